#!/usr/bin/env bash
# File: tools/corpus/setup_venv.sh — creates the corpus virtualenv (ONNX Runtime,
# onnx, onnxconverter-common, OpenVINO, numpy, matplotlib; no PyTorch) outside git.
# Idempotent; prints the venv's python.
#
#   tools/corpus/setup_venv.sh                  # venv at ~/.cache/kiln/corpus-venv
#   KILN_CORPUS_VENV=/some/dir tools/corpus/setup_venv.sh
set -euo pipefail

VENV="${KILN_CORPUS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/corpus-venv}"
PY="${KILN_CORPUS_PYTHON:-/usr/bin/python3}"
PKGS=(onnxruntime onnx onnxconverter-common openvino numpy matplotlib)
MODS=(onnxruntime onnx onnxconverter_common openvino numpy matplotlib)

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup_venv: creating $VENV with $PY" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
if ! "$VPY" -c "import $(IFS=,; echo "${MODS[*]}")" 2>/dev/null; then
  "$VPY" -m pip install -q --upgrade pip >&2
  "$VPY" -m pip install -q "${PKGS[@]}" >&2
fi
"$VPY" - <<'PYEOF' >&2
import onnx, onnxconverter_common, onnxruntime, openvino, numpy
print(f"onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}, "
      f"onnxconverter-common {onnxconverter_common.__version__}, "
      f"openvino {openvino.__version__}, numpy {numpy.__version__}")
PYEOF
echo "$VPY"
