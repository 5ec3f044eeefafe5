#!/usr/bin/env bash
# File: benchmarks/setup_venv.sh — creates the peer-benchmark virtualenv
# (PyTorch 2.x with Inductor, ONNX Runtime, OpenVINO, onnxconverter-common,
# matplotlib) outside git. Idempotent.
#
#   benchmarks/setup_venv.sh                 # venv at ~/.cache/kiln/bench-venv
#   KILN_BENCH_VENV=/some/dir benchmarks/setup_venv.sh
#   TORCH_INDEX_URL=<CPU wheel index> benchmarks/setup_venv.sh
#
# TORCH_INDEX_URL (optional) names a PyTorch CPU-only wheel index; when it is
# unset or unreachable, torch comes from PyPI's default index (an x86_64 CUDA
# build of several GB that runs fine on the CPU).
set -euo pipefail

VENV="${KILN_BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/bench-venv}"
PY="${KILN_BENCH_PYTHON:-/usr/bin/python3}"
# Versions used for the committed results; override to try others.
TORCH_SPEC="${TORCH_SPEC:-torch==2.15.0}"
OTHER_PKGS=(torchvision onnxruntime onnx numpy matplotlib openvino onnxconverter-common)

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup_venv: creating $VENV with $PY" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

have() {
  "$VPY" - "$@" <<'PYEOF' 2>/dev/null
import importlib, sys
for mod in sys.argv[1:]:
    importlib.import_module(mod)
import torch
assert torch.__version__.startswith("2."), torch.__version__
assert hasattr(torch, "compile")
PYEOF
}

if have torch torchvision onnxruntime onnx numpy matplotlib openvino onnxconverter_common; then
  echo "setup_venv: $VENV already complete" >&2
else
  "$VPY" -m pip install -q --upgrade pip wheel >&2
  installed=0
  if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    echo "setup_venv: trying torch from TORCH_INDEX_URL" >&2
    if "$VPY" -m pip install -q --index-url "$TORCH_INDEX_URL" \
        "$TORCH_SPEC" torchvision >&2; then
      installed=1
    else
      echo "setup_venv: TORCH_INDEX_URL failed; using PyPI's default index" >&2
    fi
  fi
  if (( ! installed )); then
    "$VPY" -m pip install -q "$TORCH_SPEC" torchvision >&2
  fi
  "$VPY" -m pip install -q "${OTHER_PKGS[@]}" >&2
  have torch torchvision onnxruntime onnx numpy matplotlib openvino onnxconverter_common
fi

"$VPY" - <<'PYEOF'
import matplotlib, numpy, onnx, onnxruntime, openvino, torch, torchvision
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
      f"onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, "
      f"openvino {openvino.__version__}, numpy {numpy.__version__}, "
      f"matplotlib {matplotlib.__version__}")
PYEOF
echo "$VPY"
