#!/usr/bin/env bash
# benchmarks/bench_ab.sh — is kilnc B as fast as kilnc A? Interleaved A/B
# latency at one thread (e.g. before and after a refactoring).
#
# usage: benchmarks/bench_ab.sh [options] KILNC_A KILNC_B MODEL...
#
#   MODEL  a zoo model name (<zoo>/<name>/model.onnx) or a path to an .onnx
#
# Per model: one untimed `kilnc compile` per binary fills that binary's own
# JIT cache, then R rounds of
#   A: kilnc bench MODEL --threads=1 --json --warm-only --min-time=S --cache-dir=<A's>
#   B: the same with B
# alternating A,B,A,B,... (machine noise hits both alike). Each run's JSON
# median_ms is one sample; the script prints per model the median of A's and
# of B's samples, B/A, and each side's spread ((max-min)/median of its
# samples, a noise gauge), then the geometric mean of B/A over the models.
# B/A > 1: B is slower.
#
# Options:
#   --rounds R        A,B pairs per model (default 5)
#   --min-time S      kilnc bench --min-time per run, seconds (default 1)
#   --zoo DIR         the model zoo (default ${XDG_CACHE_HOME:-~/.cache}/kiln/zoo)
#   --isa NAME        kilnc --isa (default: kilnc's choice, the best this CPU runs)
#   --bench-flag F    extra flag for every kilnc bench and compile (repeatable,
#                     e.g. --bench-flag=--warmup=5)
#   --cache-root DIR  JIT caches DIR/<sha256 of the binary>/ (kept, so a second
#                     run skips the C++ builds); default: temp, deleted
#   --json FILE       also write every run's JSON line (with side, round) to FILE
#   --cpu N           pin every kilnc run to CPU N (taskset); default: unpinned
#   -h, --help        this text
#
# Exit: 0 all ran; 1 a kilnc run failed; 2 bad usage.
#
# Example (A = B: the noise floor):
#   benchmarks/bench_ab.sh --rounds 2 /work/baseline-bin/kilnc /work/baseline-bin/kilnc mlp resnet18
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench_ab: $*" >&2; exit 2; }

ROUNDS=5
MIN_TIME=1
ZOO="${XDG_CACHE_HOME:-$HOME/.cache}/kiln/zoo"
ISA=""
CACHE_ROOT=""
JSON_OUT=""
CPU=""
FLAGS=()
POS=()
while (( $# )); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds=*) ROUNDS="${1#*=}" ;;        --rounds) ROUNDS="${2:?}"; shift ;;
    --min-time=*) MIN_TIME="${1#*=}" ;;    --min-time) MIN_TIME="${2:?}"; shift ;;
    --zoo=*) ZOO="${1#*=}" ;;              --zoo) ZOO="${2:?}"; shift ;;
    --isa=*) ISA="${1#*=}" ;;              --isa) ISA="${2:?}"; shift ;;
    --cache-root=*) CACHE_ROOT="${1#*=}" ;; --cache-root) CACHE_ROOT="${2:?}"; shift ;;
    --json=*) JSON_OUT="${1#*=}" ;;        --json) JSON_OUT="${2:?}"; shift ;;
    --cpu=*) CPU="${1#*=}" ;;              --cpu) CPU="${2:?}"; shift ;;
    --bench-flag=*) FLAGS+=("${1#*=}") ;;  --bench-flag) FLAGS+=("${2:?}"); shift ;;
    --) shift; POS+=("$@"); break ;;
    -*) die "unknown option $1 (--help)" ;;
    *) POS+=("$1") ;;
  esac
  shift
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive number"
[[ "$MIN_TIME" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--min-time needs seconds"
(( ${#POS[@]} >= 3 )) || die "need KILNC_A KILNC_B and at least one MODEL (--help)"
BIN=("$(realpath "${POS[0]}")" "$(realpath "${POS[1]}")")
for b in "${BIN[@]}"; do [[ -f "$b" && -x "$b" ]] || die "$b is not an executable"; done
MODELS=("${POS[@]:2}")
PATHS=()
for m in "${MODELS[@]}"; do
  if [[ -f "$m" ]]; then PATHS+=("$(realpath "$m")")
  elif [[ -f "$ZOO/$m/model.onnx" ]]; then PATHS+=("$ZOO/$m/model.onnx")
  else die "no model $m (neither a file nor $ZOO/$m/model.onnx)"; fi
done
PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=python3
PIN=()
if [[ -n "$CPU" ]]; then PIN=(taskset -c "$CPU"); fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/bench_ab.XXXXXX")" || die "mktemp failed"
trap 'rm -rf "$TMP"' EXIT
[[ -z "$CACHE_ROOT" ]] && CACHE_ROOT="$TMP/cache"
CACHES=()
for b in "${BIN[@]}"; do
  CACHES+=("$CACHE_ROOT/$(sha256sum < "$b" | cut -c1-16)")
  mkdir -p "${CACHES[-1]}" || die "cannot create ${CACHES[-1]}"
done
RUNS="$TMP/runs.jsonl"
: > "$RUNS"

common_flags() {  # side
  local f=(--threads=1 "--cache-dir=${CACHES[$1]}")
  [[ -n "$ISA" ]] && f+=("--isa=$ISA")
  f+=("${FLAGS[@]}")
  printf '%s\n' "${f[@]}"
}

echo "A: ${BIN[0]}"
echo "B: ${BIN[1]}"
echo "rounds $ROUNDS, kilnc bench --threads=1 --min-time=$MIN_TIME --warm-only${ISA:+ --isa=$ISA} ${FLAGS[*]:-}; load $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for i in "${!MODELS[@]}"; do
  m="${MODELS[$i]}"; path="${PATHS[$i]}"
  ok=1
  for side in 0 1; do  # fill each binary's JIT cache, untimed
    mapfile -t cf < <(common_flags $side)
    if ! out="$("${PIN[@]}" "${BIN[$side]}" compile "$path" "${cf[@]}" 2>&1)"; then
      echo "$m: kilnc compile failed with $([[ $side == 0 ]] && echo A || echo B):" >&2
      echo "$out" | tail -5 >&2
      ok=0
    fi
  done
  (( ok )) || { failed=1; continue; }
  for ((r = 1; r <= ROUNDS; r++)); do
    for side in 0 1; do
      mapfile -t cf < <(common_flags $side)
      # A fresh shell per run: getrusage's max RSS survives execve.
      line="$(/bin/sh -c '"$@"' sh "${PIN[@]}" "${BIN[$side]}" bench "$path" --json --warm-only \
                "--min-time=$MIN_TIME" "${cf[@]}" 2> "$TMP/err")"
      rc=$?
      line="$(printf '%s\n' "$line" | grep '^{' | tail -1)"
      if (( rc != 0 )) || [[ -z "$line" ]]; then
        echo "$m: kilnc bench failed with $([[ $side == 0 ]] && echo A || echo B) (exit $rc):" >&2
        tail -5 "$TMP/err" >&2
        failed=1; ok=0; break 2
      fi
      printf '%s\n' "$line" | "$PY" -c '
import json, sys
j = json.loads(sys.stdin.read())
j.update(bench_ab_model=sys.argv[1], bench_ab_side=sys.argv[2], bench_ab_round=int(sys.argv[3]))
print(json.dumps(j))' "$m" "$([[ $side == 0 ]] && echo A || echo B)" "$r" >> "$RUNS"
    done
  done
done
[[ -n "$JSON_OUT" ]] && cp "$RUNS" "$JSON_OUT"

"$PY" - "$RUNS" "${MODELS[@]}" <<'PYEOF'
import json, math, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
models = sys.argv[2:]
print(f"{'model':22s} {'A ms':>10s} {'B ms':>10s} {'B/A':>7s} {'A spread':>9s} {'B spread':>9s} {'n':>3s}  isa/threads")
ratios = []
for m in models:
    a = [r["median_ms"] for r in runs if r["bench_ab_model"] == m and r["bench_ab_side"] == "A"]
    b = [r["median_ms"] for r in runs if r["bench_ab_model"] == m and r["bench_ab_side"] == "B"]
    if not a or not b or len(a) != len(b):
        print(f"{m:22s} {'failed':>10s}")
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    sa = (max(a) - min(a)) / ma if ma else 0
    sb = (max(b) - min(b)) / mb if mb else 0
    ratio = mb / ma if ma else float("nan")
    ratios.append(ratio)
    isas = sorted({r.get("isa", "?") + "/" + str(r.get("threads", "?")) + "t"
                   for r in runs if r["bench_ab_model"] == m})
    isa = " ".join(isas) + ("  (A and B differ!)" if len(isas) > 1 else "")
    print(f"{m:22s} {ma:10.3f} {mb:10.3f} {ratio:7.3f} {100*sa:8.1f}% {100*sb:8.1f}% {len(a):3d}  {isa}")
if ratios:
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geomean B/A over {len(ratios)} model(s): {g:.3f}")
PYEOF
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
