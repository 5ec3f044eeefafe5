#!/usr/bin/env bash
# File: tools/test_all.sh — sets up a fresh Debian 12 machine (tools/bootstrap.sh)
# and runs every kiln test, then the sanitized subsets (//testing:sanitized_tests
# under --config=asan: address + UB sanitizers; //testing:tsan_tests under
# --config=tsan: the thread sanitizer), then prints one summary line
# "N passed, N failed, N skipped" over all of them.
#   tools/test_all.sh                 # all tests, then the sanitized subsets
#   tools/test_all.sh --config=asan   # all tests under address+UB sanitizers
#   KILN_SANITIZED_TESTS=0 tools/test_all.sh   # all tests, no sanitized subsets
#   KILN_FUZZ_SECONDS=0 tools/test_all.sh      # no libFuzzer run
# Then it runs each libFuzzer target of testing/fuzz briefly
# (tools/fuzz_all.sh, KILN_FUZZ_SECONDS each, default 20; 0 skips it), each
# counted as one test. Last it runs examples/consumer/check.sh (a separate
# workspace that uses kiln as a dependency: its build, run, test and
# reproducibility check), counted as one more test; KILN_CONSUMER_CHECK=0
# skips it.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh || exit 1

passed=0
failed=0
skipped=0
skip_list=""

# Runs `bazel test ARGS...` and adds its results to the counters; $1 labels
# the run's lines ("" for the plain run).
run_tests() {
  local label=$1
  shift
  local log rc tlog target why
  log=$(mktemp)
  local start=$SECONDS
  bazel test "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # Bazel's summary lines look like "//pkg:target   PASSED in 0.3s".
  local p f s
  p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
  f=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
  s=$(grep -cE '^//[^ ]+ +SKIPPED' "$log")
  # A target Bazel calls PASSED whose log says "SKIPPED: <why>" and ran no
  # test case (an ISA shard this host cannot run) is a skip, not a pass.
  local args=()
  for a in "$@"; do [[ "$a" == --* ]] && args+=("$a"); done
  local testlogs
  testlogs=$(bazel info "${args[@]}" bazel-testlogs 2>/dev/null)
  while read -r target; do
    [[ -n "$target" && -n "$testlogs" ]] || continue
    tlog="$testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
    [[ -f "$tlog" ]] || continue
    if grep -qE '^SKIPPED: ' "$tlog" && ! grep -qE '^\[       OK \]|^conformance: ' "$tlog"; then
      why=$(grep -m1 -E '^SKIPPED: ' "$tlog" | cut -c10-)
      skip_list+="  skipped ${label}${target}: ${why}"$'\n'
      p=$((p - 1))
      s=$((s + 1))
    fi
  done < <(grep -E '^//[^ ]+ +(\(cached\) )?PASSED' "$log" | awk '{print $1}')
  rm -f "$log"
  if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi  # build or setup error
  echo "${label:-plain run: }${p} passed, ${f} failed, ${s} skipped in $((SECONDS - start)) s"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  return $rc
}

run_tests "" "$@" //...
rc=$?
# The sanitized subsets, unless the caller chose a config of its own. The
# TSan one shares the plain run's output directory: it recompiles only the
# packages it instruments (.bazelrc, docs/decisions/0057).
if [[ $# -eq 0 && "${KILN_SANITIZED_TESTS:-1}" != "0" ]]; then
  run_tests "asan+ubsan: " --config=asan //testing:sanitized_tests || rc=1
  run_tests "tsan: " --config=tsan //testing:tsan_tests || rc=1
fi
# The brief libFuzzer run: every testing/fuzz target built with clang
# (--config=fuzz, ASan+UBSan) and run KILN_FUZZ_SECONDS (default 20) on its
# corpus, each counted as one test (tools/fuzz_all.sh, docs/decisions/0061).
if [[ $# -eq 0 && "${KILN_FUZZ_SECONDS:-20}" != "0" ]]; then
  fuzz_log=$(mktemp)
  start=$SECONDS
  tools/fuzz_all.sh "${KILN_FUZZ_SECONDS:-20}" 2>&1 | tee "$fuzz_log"
  fuzz_rc=${PIPESTATUS[0]}
  p=$(grep -cE '^//testing/fuzz:[^ ]+ FUZZ PASSED' "$fuzz_log")
  f=$(grep -cE '^//testing/fuzz:[^ ]+ FUZZ FAILED' "$fuzz_log")
  if [[ $fuzz_rc -ne 0 && $f -eq 0 ]]; then f=1; fi  # the build failed
  echo "libfuzzer: ${p} passed, ${f} failed in $((SECONDS - start)) s"
  passed=$((passed + p))
  failed=$((failed + f))
  if [[ $fuzz_rc -ne 0 ]]; then rc=1; fi
  rm -f "$fuzz_log"
fi
# A plain shell step, not Bazel inside a Bazel test.
if [[ $# -eq 0 && "${KILN_CONSUMER_CHECK:-1}" != "0" ]]; then
  consumer_log=$(mktemp)
  start=$SECONDS
  if examples/consumer/check.sh >"$consumer_log" 2>&1; then
    grep '^consumer: ' "$consumer_log"
    echo "examples/consumer/check.sh PASSED in $((SECONDS - start)) s"
    passed=$((passed + 1))
  else
    tail -40 "$consumer_log"
    echo "examples/consumer/check.sh FAILED in $((SECONDS - start)) s"
    failed=$((failed + 1))
    rc=1
  fi
  rm -f "$consumer_log"
fi
printf '%s' "$skip_list"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $rc
