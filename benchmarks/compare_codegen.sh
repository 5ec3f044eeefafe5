#!/usr/bin/env bash
# benchmarks/compare_codegen.sh — is kiln's generated code byte-identical
# between two kilnc builds (e.g. before and after a refactoring)?
#
# usage: benchmarks/compare_codegen.sh [options] A B
#        benchmarks/compare_codegen.sh [options] --dump-only --out DIR A
#
#   A, B   each either a kilnc binary, or a dump folder written by an earlier
#          run (--out, --dump-only): DIR/<model>/<isa>/{graph,loop,cpp}/.
#
# For every zoo model and every ISA it runs
#   kilnc compile <zoo>/<model>/model.onnx --isa=<isa> --threads=1 --dump-dir=...
# with each binary, then compares
#   - cpp/: the generated C++ (file names and bytes), and
#   - the final loop IR: the last loop/NN-<pass>.txt that is not "(unchanged)"
#     (compared by content, so a renamed or renumbered pass does not count),
#   - with --full also every file of graph/ and loop/.
# kilnc compile refuses an ISA this CPU lacks, so for the ISAs of --aot-isas
# (default: avx512 when this CPU lacks it) it runs instead, from the model's
# folder (so no path of this machine gets into the files),
#   DNNL_MAX_CPU_ISA=<cap> kilnc aot model.onnx --part=<isa> --isas=<isa> --name=m ...
# which emits that ISA's kernels without compiling them, and compares all it
# writes (DIR/<model>/aot-<isa>/: m_<isa>_0.cc, the program description with
# the final loop IR, the kernel table). oneDNN cannot be raised above this
# CPU, so an AVX-512 program made on an AVX2 host has AVX2's conv layouts:
# fine for A/B on one host, not the program an AVX-512 host would make.
# It prints one line per model and ISA, "identical" or what differs, and a
# summary.
#
# Options:
#   --zoo DIR         the model zoo (default ${XDG_CACHE_HOME:-~/.cache}/kiln/zoo);
#                     the models are its subfolders that hold model.onnx
#   --models a,b,...  only these models (default: all of the zoo)
#   --isas a,b,...    default: scalar,avx2 plus avx512 when lscpu lists avx512f
#                     (kilnc compile refuses an ISA this CPU lacks)
#   --aot-isas a,b    ISAs emitted with kilnc aot (see above); default avx512
#                     when lscpu lacks avx512f, else none; --aot-isas= for none
#   --out DIR         keep the dumps: DIR/a and DIR/b (with --dump-only: DIR);
#                     DIR must not exist or be empty. Default: a temp folder,
#                     deleted at the end
#   --dump-only       only dump A into --out (makes a baseline folder)
#   --cache-dir DIR   kilnc's JIT cache (default: kilnc's own, ~/.cache/kiln;
#                     the JIT cache is keyed by the content of the C++, so
#                     identical code compiles once)
#   --full            also diff every file of graph/ and loop/
#   --show N          print the first N lines of each differing file's diff
#                     (default 0; --out keeps the dumps for a full diff -r)
#   --kilnc-flag F    extra flag for kilnc compile (repeatable, e.g.
#                     --kilnc-flag=--no-prepack)
#   --jobs N          kilnc runs in parallel (default 1: the machine is shared)
#   -h, --help        this text
#
# Exit: 0 everything identical; 1 a difference, a model or ISA missing on one
# side, or a kilnc compile that failed; 2 bad usage.
#
# Examples:
#   benchmarks/compare_codegen.sh --dump-only --out /work/baseline-dump /work/baseline-bin/kilnc
#   benchmarks/compare_codegen.sh /work/baseline-dump bazel-bin/tools/kilnc
#   benchmarks/compare_codegen.sh --models mlp,resnet18 --show 20 /work/baseline-bin/kilnc bazel-bin/tools/kilnc
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compare_codegen: $*" >&2; exit 2; }

ZOO="${XDG_CACHE_HOME:-$HOME/.cache}/kiln/zoo"
MODELS=""
ISAS=""
AOT_ISAS="default"
OUT=""
DUMP_ONLY=0
CACHE_DIR=""
FULL=0
SHOW=0
JOBS=1
KFLAGS=()
POS=()
while (( $# )); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --zoo=*) ZOO="${1#*=}" ;;            --zoo) ZOO="${2:?}"; shift ;;
    --models=*) MODELS="${1#*=}" ;;      --models) MODELS="${2:?}"; shift ;;
    --isas=*) ISAS="${1#*=}" ;;          --isas) ISAS="${2:?}"; shift ;;
    --aot-isas=*) AOT_ISAS="${1#*=}" ;;  --aot-isas) AOT_ISAS="${2?}"; shift ;;
    --out=*) OUT="${1#*=}" ;;            --out) OUT="${2:?}"; shift ;;
    --cache-dir=*) CACHE_DIR="${1#*=}" ;; --cache-dir) CACHE_DIR="${2:?}"; shift ;;
    --show=*) SHOW="${1#*=}" ;;          --show) SHOW="${2:?}"; shift ;;
    --jobs=*) JOBS="${1#*=}" ;;          --jobs) JOBS="${2:?}"; shift ;;
    --kilnc-flag=*) KFLAGS+=("${1#*=}") ;; --kilnc-flag) KFLAGS+=("${2:?}"); shift ;;
    --dump-only) DUMP_ONLY=1 ;;
    --full) FULL=1 ;;
    --) shift; POS+=("$@"); break ;;
    -*) die "unknown option $1 (--help)" ;;
    *) POS+=("$1") ;;
  esac
  shift
done
[[ "$SHOW" =~ ^[0-9]+$ ]] || die "--show needs a number"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"
if (( DUMP_ONLY )); then
  (( ${#POS[@]} == 1 )) || die "--dump-only takes one kilnc binary (--help)"
  [[ -n "$OUT" ]] || die "--dump-only needs --out DIR"
else
  (( ${#POS[@]} == 2 )) || die "need two sides A and B (--help)"
fi

# A side is a kilnc binary (a regular executable file) or a dump folder.
kind_of() {
  if [[ -f "$1" && -x "$1" ]]; then echo bin
  elif [[ -d "$1" ]]; then echo dir
  else die "$1 is neither a kilnc binary nor a dump folder"; fi
}
SIDES=("${POS[@]}")
KINDS=()
for s in "${SIDES[@]}"; do KINDS+=("$(kind_of "$s")"); done
(( DUMP_ONLY )) && [[ "${KINDS[0]}" != bin ]] && die "--dump-only needs a kilnc binary"
for i in "${!SIDES[@]}"; do SIDES[$i]="$(realpath "${SIDES[$i]}")"; done

# Models: the zoo's subfolders with a model.onnx (or --models).
[[ -d "$ZOO" ]] || die "no zoo folder $ZOO (--zoo; tools/zoo/export_zoo.py makes it)"
ZOO="$(realpath "$ZOO")"
if [[ -n "$MODELS" ]]; then
  IFS=, read -r -a MODEL_LIST <<< "$MODELS"
else
  MODEL_LIST=()
  for f in "$ZOO"/*/model.onnx; do [[ -f "$f" ]] && MODEL_LIST+=("$(basename "$(dirname "$f")")"); done
fi
(( ${#MODEL_LIST[@]} )) || die "no models (no $ZOO/*/model.onnx)"
for m in "${MODEL_LIST[@]}"; do
  [[ -f "$ZOO/$m/model.onnx" ]] || die "no model $ZOO/$m/model.onnx"
done

if [[ -z "$ISAS" ]]; then
  ISAS="scalar,avx2"
  if lscpu 2>/dev/null | grep -qw avx512f; then ISAS+=",avx512"; fi
fi
IFS=, read -r -a ISA_LIST <<< "$ISAS"
if [[ "$AOT_ISAS" == default ]]; then
  AOT_ISAS=""
  if ! lscpu 2>/dev/null | grep -qw avx512f; then AOT_ISAS="avx512"; fi
fi
AOT_LIST=()
[[ -n "$AOT_ISAS" ]] && IFS=, read -r -a AOT_LIST <<< "$AOT_ISAS"
onednn_cap() {  # tools/aot.bzl's _ONEDNN_CAP
  case "$1" in avx512) echo AVX512_CORE ;; avx2) echo AVX2 ;; scalar) echo SSE41 ;; *) echo "" ;; esac
}
for isa in "${AOT_LIST[@]}"; do
  [[ -n "$(onednn_cap "$isa")" ]] || die "--aot-isas: no oneDNN cap known for '$isa' (avx512, avx2, scalar)"
done
# What is compared per model: "<isa>" (kilnc compile) and "aot-<isa>".
UNITS=("${ISA_LIST[@]}")
for isa in "${AOT_LIST[@]}"; do UNITS+=("aot-$isa"); done

# Where binaries dump.
if [[ -n "$OUT" ]]; then
  if [[ -e "$OUT" && -n "$(ls -A "$OUT" 2>/dev/null)" ]]; then
    die "--out $OUT exists and is not empty"
  fi
  mkdir -p "$OUT" || die "cannot create $OUT"
  WORK="$(realpath "$OUT")"
else
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/compare_codegen.XXXXXX")" || die "mktemp failed"
  trap 'rm -rf "$WORK"' EXIT
fi
ROOTS=()
for i in "${!SIDES[@]}"; do
  if [[ "${KINDS[$i]}" == dir ]]; then
    ROOTS+=("${SIDES[$i]}")
  elif (( DUMP_ONLY )); then
    ROOTS+=("$WORK")
  else
    label=$([[ $i == 0 ]] && echo a || echo b)
    ROOTS+=("$WORK/$label")
  fi
done

# ---------------------------------------------------------------- dumping
# One kilnc compile into a fresh folder; its output and exit code are kept
# next to the dump (compile.log, compile.rc).
dump_one() {  # kilnc root model isa
  local kilnc="$1" root="$2" model="$3" isa="$4"
  local d="$root/$model/$isa"
  rm -rf "$d" && mkdir -p "$d"
  local args=(compile "$ZOO/$model/model.onnx" "--isa=$isa" --threads=1 "--dump-dir=$d")
  [[ -n "$CACHE_DIR" ]] && args+=("--cache-dir=$CACHE_DIR")
  args+=("${KFLAGS[@]}")
  "$kilnc" "${args[@]}" > "$d/compile.log" 2>&1
  echo $? > "$d/compile.rc"
}

# kilnc aot for one ISA, from the model's folder: only kiln's output in d/aot.
aot_one() {  # kilnc root model isa
  local kilnc="$1" root="$2" model="$3" isa="$4"
  local d="$root/$model/aot-$isa"
  rm -rf "$d" && mkdir -p "$d/aot"
  (cd "$ZOO/$model" && DNNL_MAX_CPU_ISA="$(onednn_cap "$isa")" "$kilnc" aot model.onnx \
     "--out-dir=$d/aot" --data-dir=aot --name=m "--isas=$isa" "--part=$isa" --threads=1 \
     "${KFLAGS[@]}") > "$d/compile.log" 2>&1
  echo $? > "$d/compile.rc"
}

running=0
for i in "${!SIDES[@]}"; do
  [[ "${KINDS[$i]}" == bin ]] || continue
  echo "dumping ${#MODEL_LIST[@]} models x ${UNITS[*]} with ${SIDES[$i]} into ${ROOTS[$i]}" >&2
  mkdir -p "${ROOTS[$i]}"
  { echo "kilnc ${SIDES[$i]}"; echo "sha256 $(sha256sum < "${SIDES[$i]}" | cut -d' ' -f1)";
    echo "zoo $ZOO"; echo "isas ${ISA_LIST[*]}"; echo "aot isas ${AOT_LIST[*]:-}"; echo "flags --threads=1 ${KFLAGS[*]:-}";
    echo "date $(date -Is)"; echo "host $(hostname) $(lscpu | sed -n 's/^Model name: *//p')"; } \
    > "${ROOTS[$i]}/DUMP_INFO.txt"
  for m in "${MODEL_LIST[@]}"; do
    for isa in "${ISA_LIST[@]}"; do
      dump_one "${SIDES[$i]}" "${ROOTS[$i]}" "$m" "$isa" &
      running=$((running + 1))
      if (( running >= JOBS )); then wait -n; running=$((running - 1)); fi
    done
    for isa in "${AOT_LIST[@]}"; do
      aot_one "${SIDES[$i]}" "${ROOTS[$i]}" "$m" "$isa" &
      running=$((running + 1))
      if (( running >= JOBS )); then wait -n; running=$((running - 1)); fi
    done
  done
done
wait

if (( DUMP_ONLY )); then
  bad=0
  for m in "${MODEL_LIST[@]}"; do
    for isa in "${UNITS[@]}"; do
      rc=$(cat "$WORK/$m/$isa/compile.rc" 2>/dev/null || echo "?")
      n=$(find "$WORK/$m/$isa/cpp" "$WORK/$m/$isa/aot" -name '*.cc' 2>/dev/null | wc -l)
      printf '%-22s %-10s kilnc rc %s, %s .cc files\n' "$m" "$isa" "$rc" "$n"
      [[ "$rc" == 0 ]] || bad=1
    done
  done
  echo "dumps in $WORK"
  exit $bad
fi

# ---------------------------------------------------------------- comparing
# The last dump of a pipeline folder whose content is not "(unchanged)".
final_ir() {  # dir
  local f last=""
  while IFS= read -r f; do
    if (( $(stat -c %s "$f") > 16 )) || [[ "$(cat "$f")" != "(unchanged)" ]]; then last="$f"; fi
  done < <(find "$1" -maxdepth 1 -type f -name '*.txt' 2>/dev/null | sort -V)
  echo "$last"
}

# Compares two folders file by file; prints "" when identical, else a summary.
diff_tree() {  # label dirA dirB
  local label="$1" a="$2" b="$3" out="" f
  local fa fb only_a only_b changed=() lines=0
  fa="$(cd "$a" 2>/dev/null && find . -type f | sort)"
  fb="$(cd "$b" 2>/dev/null && find . -type f | sort)"
  only_a="$(comm -23 <(echo "$fa") <(echo "$fb") | grep -c . )"
  only_b="$(comm -13 <(echo "$fa") <(echo "$fb") | grep -c . )"
  while IFS= read -r f; do
    [[ -z "$f" ]] && continue
    if ! cmp -s "$a/$f" "$b/$f"; then
      changed+=("${f#./}")
      lines=$((lines + $(diff "$a/$f" "$b/$f" | grep -c '^[<>]')))
    fi
  done < <(comm -12 <(echo "$fa") <(echo "$fb"))
  if (( only_a || only_b || ${#changed[@]} )); then
    out="$label:"
    (( only_a )) && out+=" $only_a file(s) only in A ($(comm -23 <(echo "$fa") <(echo "$fb") | head -3 | sed 's|^\./||' | paste -sd' '))"
    (( only_b )) && out+=" $only_b file(s) only in B ($(comm -13 <(echo "$fa") <(echo "$fb") | head -3 | sed 's|^\./||' | paste -sd' '))"
    (( ${#changed[@]} )) && out+=" ${#changed[@]} file(s) differ (${changed[*]:0:3}$( (( ${#changed[@]} > 3 )) && echo ' ...'); $lines lines changed)"
    echo "$out"
    if (( SHOW )); then
      for f in "${changed[@]}"; do diff -u "$a/$f" "$b/$f" | head -n "$SHOW" | sed 's/^/      /'; done
    fi
  fi
}

diff_final() {  # label dirA dirB
  local label="$1" fa fb
  fa="$(final_ir "$2")"; fb="$(final_ir "$3")"
  if [[ -z "$fa" || -z "$fb" ]]; then
    echo "$label: no dump in $([[ -z "$fa" ]] && echo A)$([[ -z "$fa" && -z "$fb" ]] && echo ' and ')$([[ -z "$fb" ]] && echo B)"
    return
  fi
  if ! cmp -s "$fa" "$fb"; then
    echo "$label: $(basename "$fa") vs $(basename "$fb") differ ($(diff "$fa" "$fb" | grep -c '^[<>]') lines changed)"
    (( SHOW )) && diff -u "$fa" "$fb" | head -n "$SHOW" | sed 's/^/      /'
  fi
}

A="${ROOTS[0]}"; B="${ROOTS[1]}"
echo "A: ${SIDES[0]}"
echo "B: ${SIDES[1]}"
echo "zoo: $ZOO; ISAs: ${ISA_LIST[*]}; compared: cpp/, final loop IR$( (( FULL )) && echo ', all of graph/ and loop/')"
(( ${#AOT_LIST[@]} )) && echo "kilnc aot ISAs: ${AOT_LIST[*]}; compared: all files it writes"
same=0; differ=0; total=0
for m in "${MODEL_LIST[@]}"; do
  for isa in "${UNITS[@]}"; do
    total=$((total + 1))
    da="$A/$m/$isa"; db="$B/$m/$isa"
    problems=()
    for side in A B; do
      d=$([[ $side == A ]] && echo "$da" || echo "$db")
      if [[ ! -d "$d" ]]; then problems+=("missing in $side ($d)"); continue; fi
      rc=$(cat "$d/compile.rc" 2>/dev/null || echo 0)
      [[ "$rc" == 0 ]] || problems+=("kilnc $([[ $isa == aot-* ]] && echo aot || echo compile) failed in $side (exit $rc, see $d/compile.log)")
    done
    if [[ "$isa" == aot-* && -d "$da" && -d "$db" ]]; then
      r="$(diff_tree aot "$da/aot" "$db/aot")"; [[ -n "$r" ]] && problems+=("$r")
      ncpp=$(find "$da/aot" -name '*.cc' 2>/dev/null | wc -l)
    elif [[ -d "$da" && -d "$db" ]]; then
      r="$(diff_tree cpp "$da/cpp" "$db/cpp")"; [[ -n "$r" ]] && problems+=("$r")
      r="$(diff_final "final loop IR" "$da/loop" "$db/loop")"; [[ -n "$r" ]] && problems+=("$r")
      if (( FULL )); then
        r="$(diff_tree graph "$da/graph" "$db/graph")"; [[ -n "$r" ]] && problems+=("$r")
        r="$(diff_tree loop "$da/loop" "$db/loop")"; [[ -n "$r" ]] && problems+=("$r")
      fi
      ncpp=$(find "$da/cpp" -type f 2>/dev/null | wc -l)
    fi
    if (( ${#problems[@]} == 0 )); then
      printf '%-22s %-10s identical (%s .cc files)\n' "$m" "$isa" "$ncpp"
      same=$((same + 1))
    else
      printf '%-22s %-10s DIFFERENT\n' "$m" "$isa"
      printf '%s\n' "${problems[@]}" | sed 's/^/    /'
      differ=$((differ + 1))
    fi
  done
done
echo "summary: $same of $total identical, $differ different"
[[ -n "$OUT" ]] && echo "dumps kept in $WORK"
(( differ == 0 ))
