#!/usr/bin/env bash
# File: tools/fuzz_all.sh — the brief libFuzzer run CI makes
# (tools/test_all.sh, docs/decisions/0061): builds every fuzz target of
# testing/fuzz under --config=fuzz (Debian's clang, ASan+UBSan), then runs
# each for SECONDS with tools/fuzz.sh, its new inputs in a temporary folder
# (the committed corpus is only read). A crash, a leak, UB, a hang (10 s per
# input) or an RSS over 2 GiB fails the target; its input stays in the
# findings folder the failure names.
#   tools/fuzz_all.sh 20
# prints one line per target:
#   //testing/fuzz:onnx_import_fuzzer FUZZ PASSED in 22 s (41234 runs, cov 5120)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
mapfile -t fuzzers < <(bazel query 'kind("cc_binary rule", //testing/fuzz:all)' 2>/dev/null)
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  echo "fuzz_all: no fuzz targets found under //testing/fuzz" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln_fuzz_all.XXXXXX")
# The build's log is long (the linker warns about ASan's local symbols):
# only its end is shown, and only when it fails.
start=$SECONDS
if ! bazel build --config=fuzz "${fuzzers[@]}" >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  echo "fuzz_all: the --config=fuzz build FAILED (log $work/build.log)" >&2
  exit 1
fi
echo "fuzz_all: built ${#fuzzers[@]} fuzz targets in $((SECONDS - start)) s"
rc=0
for label in "${fuzzers[@]}"; do
  name=${label##*:}
  target=${name%_fuzzer}
  log="$work/$target.log"
  start=$SECONDS
  if KILN_FUZZ_DIR="$work" tools/fuzz.sh "$target" "$seconds" >"$log" 2>&1; then
    status=PASSED
  else
    status=FAILED
    rc=1
  fi
  runs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | grep -o 'cov: [0-9]*' | awk '{print $2}')
  echo "${label} FUZZ ${status} in $((SECONDS - start)) s (${runs:-?} runs, cov ${cov:-?})"
  if [[ $status == FAILED ]]; then
    grep -v '^INFO\|^Loading\|^Analyzing' "$log" | tail -40
    echo "findings of ${target}: $work/$target/findings (log $log)"
  fi
done
# Kept when anything failed: the findings are the reproducers.
if [[ $rc -eq 0 ]]; then rm -rf "$work"; fi
exit $rc
