#!/usr/bin/env bash
# File: tools/bootstrap.sh — installs everything kiln's build, tests and tools
# need on a fresh Debian 12 machine. Idempotent: a no-op when all is present.
#
#   tools/bootstrap.sh            # build + test dependencies
#   KILN_BOOTSTRAP_ZOO=1 tools/bootstrap.sh   # also PyTorch for zoo export
set -euo pipefail

PKGS=(
  bazel-bootstrap bazel-platforms bazel-rules-java g++ python3
  libdnnl-dev libhwy-dev libabsl-dev
  libprotobuf-dev protobuf-compiler
  libonnx-dev libonnx-testdata nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The Python module (python/, tools/install_python.sh) and its tests.
  python3-dev pybind11-dev python3-numpy python3-pytest python3-onnx
  # clang with libFuzzer, the sanitizer runtimes and an omp.h: bazel --config=fuzz
  clang libclang-rt-14-dev libomp-14-dev
)
if [[ "${KILN_BOOTSTRAP_ZOO:-0}" == "1" ]]; then
  PKGS+=(python3-torch python3-torchvision)
fi

# NEON: generated code is cross-built for aarch64 and its tests run under
# qemu-user (isa/neon). Highway's arm64 headers come from the arm64 package.
if [[ "$(dpkg --print-architecture)" == "amd64" ]]; then
  PKGS+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if (( ${#missing[@]} )); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  echo "bootstrap: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [[ "$(dpkg --print-architecture)" == "amd64" ]] &&
     ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "bootstrap: all packages present" >&2
fi
