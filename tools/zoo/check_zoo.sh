#!/usr/bin/env bash
# File: tools/zoo/check_zoo.sh — runs `kilnc check` on every model of the
# exported zoo (tools/zoo/export_zoo.py) and prints a table: result, worst
# error relative to each output's max |ref|, wall time.
#
#   tools/zoo/check_zoo.sh                         # ~/.cache/kiln/zoo, 1e-4
#   tools/zoo/check_zoo.sh --only resnet18,mlp --max-rel 1e-5 /path/to/zoo
#
# Builds //tools:kilnc with Bazel unless $KILNC names a kilnc binary;
# $KILN_BAZEL_OUTPUT_BASE picks Bazel's --output_base. Full logs go to
# <zoo>/check_logs/<model>.log. Exit 0 when every model passes, else 1.
set -uo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

ZOO="${XDG_CACHE_HOME:-$HOME/.cache}/kiln/zoo"
MAX_REL=1e-4
ONLY=""
TIMEOUT=3600
while (( $# )); do
  case "$1" in
    --only) ONLY="$2"; shift 2 ;;
    --only=*) ONLY="${1#*=}"; shift ;;
    --max-rel) MAX_REL="$2"; shift 2 ;;
    --max-rel=*) MAX_REL="${1#*=}"; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "check_zoo: unknown flag $1" >&2; usage >&2; exit 2 ;;
    *) ZOO="$1"; shift ;;
  esac
done

if [[ ! -d "$ZOO" ]]; then
  echo "check_zoo: no zoo at $ZOO (run tools/zoo/export_zoo.py first)" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
if [[ -z "${KILNC:-}" ]]; then
  BAZEL=(bazel)
  [[ -n "${KILN_BAZEL_OUTPUT_BASE:-}" ]] && BAZEL+=("--output_base=$KILN_BAZEL_OUTPUT_BASE")
  (cd "$ROOT" && "${BAZEL[@]}" build //tools:kilnc) >&2 || exit 2
  KILNC="$(cd "$ROOT" && "${BAZEL[@]}" info bazel-bin 2>/dev/null)/tools/kilnc"
fi
[[ -x "$KILNC" ]] || { echo "check_zoo: no kilnc binary at $KILNC" >&2; exit 2; }

models=()
if [[ -n "$ONLY" ]]; then
  IFS=',' read -r -a models <<< "$ONLY"
else
  for d in "$ZOO"/*/; do
    name="$(basename "$d")"
    [[ "$name" != *.tmp && -f "$d/model.onnx" ]] && models+=("$name")
  done
fi

LOGS="$ZOO/check_logs"
mkdir -p "$LOGS"
printf '%-22s %-6s %-12s %10s  %s\n' model result rel_to_max seconds note
failed=0
for m in "${models[@]}"; do
  log="$LOGS/$m.log"
  start=$(date +%s.%N)
  timeout "$TIMEOUT" "$KILNC" check "$ZOO/$m" --max-rel="$MAX_REL" > "$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  # Worst rel_to_max over all outputs of all data sets.
  worst=$(grep -o 'rel_to_max [^ ]*' "$log" | awk '
    { v = $2 + 0; if ($2 ~ /inf/) v = 1e308; if (v >= w) { w = v; s = $2 } }
    END { print (NR ? s : "-") }')
  case $rc in
    0) result=PASS; note="" ;;
    1) result=FAIL; note=$(grep -m1 -E 'FAIL' "$log" | sed 's/^ *//' | cut -c1-90) ;;
    124) result=TIMEOUT; note="over ${TIMEOUT}s" ;;
    *) result=ERROR; note=$(grep -m1 -v '^warning' "$log" | cut -c1-90) ;;
  esac
  if grep -q 'max|ref| 0 ' "$log"; then
    note="${note:+$note; }an expected output is all zeros: the check proves little"
  fi
  (( rc != 0 )) && failed=$((failed + 1))
  printf '%-22s %-6s %-12s %10s  %s\n' "$m" "$result" "$worst" "$secs" "$note"
done
echo "${#models[@]} model(s), $failed not passing (criterion: max|got-ref| <= $MAX_REL * max|ref|); logs in $LOGS"
(( failed == 0 ))
