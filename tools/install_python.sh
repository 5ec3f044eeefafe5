#!/usr/bin/env bash
# File: tools/install_python.sh — sets up the machine (tools/bootstrap.sh),
# builds the Python module `kiln` (//python:kiln.so) and installs it for a
# Python 3 interpreter, so that `python3 -c "import kiln"` works.
#   tools/install_python.sh                        # Debian's python3: user site-packages
#   tools/install_python.sh /path/to/venv/bin/python   # a venv's site-packages
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
python=${1:-/usr/bin/python3}
# The module is built against Debian's /usr/bin/python3 (third_party/python.bzl):
# another interpreter must have the same extension ABI.
built=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
target=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [[ "$built" != "$target" ]]; then
  echo "install_python.sh: kiln.so is built for ${built#.} (/usr/bin/python3); $python wants ${target#.}" >&2
  exit 2
fi
bazel build //python:kiln.so
# A venv's own site-packages, else the user's (Debian's system site-packages
# belong to apt).
dest=$("$python" -c 'import site, sys, sysconfig
print(sysconfig.get_paths()["platlib"] if sys.prefix != sys.base_prefix else site.getusersitepackages())')
mkdir -p "$dest"
rm -f "$dest"/kiln.so "$dest"/kiln.cpython-*.so
install -m 0755 bazel-bin/python/kiln.so "$dest/kiln$target"
"$python" -c 'import kiln' && echo "installed kiln for $python: $dest/kiln$target"
