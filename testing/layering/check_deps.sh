#!/usr/bin/env bash
# File: testing/layering/check_deps.sh — fails when a target's transitive
# dependencies (a genquery's output, one label per line) include a label
# under a forbidden prefix: the design's "may depend on" column as a test.
#   check_deps.sh DEPS_FILE TARGET PREFIX...
set -euo pipefail
deps_file=$1
target=$2
shift 2
status=0
for prefix in "$@"; do
  hits=$(grep -E "^${prefix}([:/]|$)" "$deps_file" || true)
  if [[ -n "$hits" ]]; then
    echo "FAIL: ${target} depends on ${prefix}:"
    echo "$hits" | sed 's/^/  /' | head -20
    status=1
  fi
done
if [[ $status -eq 0 ]]; then
  echo "OK: ${target} ($(wc -l < "$deps_file") dependencies) depends on none of: $*"
fi
exit $status
