#!/usr/bin/env bash
# File: python/run_pytest.sh — runs python/kiln_test.py with Debian's Python
# (numpy, onnx, pytest from tools/bootstrap.sh) on the kiln.so Bazel built.
# pytest's exit code 5 (no tests collected) is a failure here.
#   run_pytest.sh [pytest args]     (as //python:kiln_test)
set -uo pipefail
if [[ "${1:-}" == "--skip-under-sanitizers" ]]; then
  echo "SKIPPED: the Python module is not tested under --config=asan (python3 is not instrumented)"
  exit 0
fi
here="${TEST_SRCDIR:-$PWD}/${TEST_WORKSPACE:-kiln}"
cd "$here" || exit 1
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export KILN_TINY_CNN="$here/models/tiny_cnn"
export KILN_README="$here/README.md"
export PYTHONDONTWRITEBYTECODE=1
/usr/bin/python3 -m pytest -p no:cacheprovider -q -rs python/kiln_test.py "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "run_pytest.sh: pytest collected no tests: failing" >&2
  exit 1
fi
exit $rc
