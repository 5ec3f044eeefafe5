#!/usr/bin/env bash
# File: tools/test_all.sh — sets up a fresh Debian 12 machine (tools/bootstrap.sh)
# and runs every kiln test, then prints one summary line "N passed, N failed".
#   tools/test_all.sh                 # all tests
#   tools/test_all.sh --config=asan   # all tests under address+UB sanitizers
# After Bazel's tests it runs examples/consumer/check.sh (a separate
# workspace that uses kiln as a dependency; its build and reproducibility
# check), counted as one more test.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh || exit 1
log=$(mktemp)
bazel test "$@" //... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# Bazel's summary lines look like "//pkg:target   PASSED in 0.3s".
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
skipped=$(grep -cE '^//[^ ]+ +SKIPPED' "$log")
# A target Bazel calls PASSED whose log says "SKIPPED: <why>" and ran no
# test case (an ISA shard this host cannot run) is a skip, not a pass.
testlogs=$(bazel info "$@" bazel-testlogs 2>/dev/null)
skip_list=""
while read -r target; do
  [[ -n "$target" && -n "$testlogs" ]] || continue
  tlog="$testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
  [[ -f "$tlog" ]] || continue
  if grep -qE '^SKIPPED: ' "$tlog" && ! grep -qE '^\[       OK \]|^conformance: ' "$tlog"; then
    why=$(grep -m1 -E '^SKIPPED: ' "$tlog" | cut -c10-)
    skip_list+="  skipped ${target}: ${why}"$'\n'
    passed=$((passed - 1))
    skipped=$((skipped + 1))
  fi
done < <(grep -E '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | awk '{print $1}')
rm -f "$log"
if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi  # build or setup error
# A plain shell step, not Bazel inside a Bazel test.
consumer_log=$(mktemp)
if examples/consumer/check.sh >"$consumer_log" 2>&1; then
  grep '^consumer: ' "$consumer_log"
  echo "examples/consumer/check.sh PASSED"
  passed=$((passed + 1))
else
  tail -40 "$consumer_log"
  echo "examples/consumer/check.sh FAILED"
  failed=$((failed + 1))
  rc=1
fi
rm -f "$consumer_log"
printf '%s' "$skip_list"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $rc
