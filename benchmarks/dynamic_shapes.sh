#!/usr/bin/env bash
# File: benchmarks/dynamic_shapes.sh — one kilnc process runs a model with a
# dynamic sequence length at every length of a sweep (specializing per
# shape); per length, a separate kilnc bench of the model statically bound to
# that length. Rounds alternate the two (dynamic sweep, then each static
# length) so drift hits both; prints one JSON line per bench and a table of
# medians over the rounds. The sweep also runs --vs-static: inside its
# process, a static build of each length timed alternately with the
# specialization (one run each per round), which drift cannot separate.
#
#   bazel build -c opt //tools:kilnc
#   /usr/bin/python3 tools/zoo/export_zoo.py --only distilbert_dynseq
#   benchmarks/dynamic_shapes.sh [MODEL] [ROUNDS] > out.txt
#
# Env: KILNC (default bazel-bin/tools/kilnc), THREADS (1), MIN_TIME (2),
# LENGTHS ("16 32 64 128 256 512"), CACHE (a temporary JIT cache shared by
# both, so static compiles hit the builds the specializations made).
set -euo pipefail
MODEL=${1:-$HOME/.cache/kiln/zoo/distilbert_dynseq/model.onnx}
ROUNDS=${2:-3}
KILNC=${KILNC:-bazel-bin/tools/kilnc}
THREADS=${THREADS:-1}
MIN_TIME=${MIN_TIME:-2}
LENGTHS=${LENGTHS:-"16 32 64 128 256 512"}
CACHE=${CACHE:-$(mktemp -d /tmp/kiln_dyn_cache.XXXXXX)}
sweep=$(echo "$LENGTHS" | tr ' ' ',')
common=(--threads="$THREADS" --min-time="$MIN_TIME" --min-iterations=10 --warmup=1
        --json --cache-dir="$CACHE")
out=$(mktemp /tmp/kiln_dyn_out.XXXXXX)
dynamic() {
  echo "dynamic round=$1 $("$KILNC" bench "$MODEL" --shape "input_ids=1x{$sweep}" \
       --vs-static "${common[@]}" 2>/dev/null)" | tee -a "$out"
}
statics() {
  for L in $LENGTHS; do
    echo "static round=$1 L=$L $("$KILNC" bench "$MODEL" --shape "input_ids=1x$L" \
         --shape "attention_mask=1x$L" --warm-only "${common[@]}" 2>/dev/null)" | tee -a "$out"
  done
}
# Odd rounds run the dynamic sweep first, even rounds the static ones.
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then dynamic "$r"; statics "$r"; else statics "$r"; dynamic "$r"; fi
done
/usr/bin/python3 - "$out" "$LENGTHS" <<'EOF'
import json, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
lengths = [int(x) for x in sys.argv[2].split()]
dyn = {L: {} for L in lengths}; first = {L: {} for L in lengths}; comp = {L: {} for L in lengths}
inproc = {L: {} for L in lengths}
sta = {L: {} for L in lengths}; hit = {L: [] for L in lengths}
for line in lines:
    head, _, body = line.partition(" {")
    j = json.loads("{" + body)
    r = int(head.split("round=")[1].split()[0])
    if head.startswith("dynamic"):
        for p in j["shapes"]:
            L = int(p["shapes"].split("[1,")[1].split("]")[0])
            dyn[L][r] = p["median_ms"]; first[L][r] = p["first_run_ms"]
            comp[L][r] = p["compile_ms"]
            inproc[L][r] = p["dynamic_over_static"]
    else:
        L = int(head.split("L=")[1])
        sta[L][r] = j["median_ms"]; hit[L].append(j["compile_warm_cache_hit"])
print("| seq len | static median (ms) | dynamic 2nd+ run median (ms) | dynamic / static "
      "| per-round ratios | in-process interleaved dynamic / static (per round) "
      "| first run, cold cache (ms) | first run, warm cache (ms) "
      "| static build = specialization's |")
print("|---:|---:|---:|---:|---|---|---:|---:|---|")
for L in lengths:
    s, d = statistics.median(sta[L].values()), statistics.median(dyn[L].values())
    ratios = " ".join(f"{dyn[L][r] / sta[L][r]:.2f}" for r in sorted(dyn[L]) if r in sta[L])
    warm = [first[L][r] for r in first[L] if r > 1]
    ip = " ".join(f"{inproc[L][r]:.3f}" for r in sorted(inproc[L]))
    ipm = statistics.median(inproc[L].values())
    print(f"| {L} | {s:.1f} | {d:.1f} | {d / s:.3f} | {ratios} | **{ipm:.3f}** ({ip}) "
          f"| {first[L][1]:.0f} | "
          f"{statistics.median(warm) if warm else 0:.0f} | {sum(hit[L])}/{len(hit[L])} cache hits |")
EOF
