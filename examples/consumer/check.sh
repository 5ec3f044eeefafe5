#!/usr/bin/env bash
# File: examples/consumer/check.sh — what CI does with this example, as a
# plain shell step after kiln's own tests (tools/test_all.sh):
#   1. build the classifier and its generated test in this workspace;
#   2. run it on sample.ppm and run the test;
#   3. reproducibility: build the AOT library again in a second, fresh output
#      base (another path) and require byte-identical generated sources,
#      program descriptions and weights, with no absolute path in them.
# The AOT genrules run in both builds (--modify_execution_info=Genrule=+no-cache
# keeps them out of every cache); everything else is shared through one disk
# cache, so the second build does not compile kiln again.
# Prints "consumer: ..." lines; exits non-zero on the first failure.
#   examples/consumer/check.sh [--keep]   # --keep: leave the second output base
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
keep=0
[[ "${1:-}" == "--keep" ]] && keep=1

# The README's "Use kiln from your Bazel project" shows these files whole.
for f in WORKSPACE .bazelrc BUILD.bazel; do
  python3 - "$f" ../../README.md <<'PY' || { echo "consumer: README does not show $f as it is"; exit 1; }
import sys
sys.exit(0 if open(sys.argv[1]).read() in open(sys.argv[2]).read() else 1)
PY
done
echo "consumer: README shows WORKSPACE, .bazelrc and BUILD.bazel as they are"

cache="${KILN_CONSUMER_DISK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/consumer-disk-cache}"
mkdir -p "$cache"
flags=(--disk_cache="$cache" --modify_execution_info=Genrule=+no-cache --jobs="${KILN_JOBS:-2}")
lib=classifier

start=$(date +%s)
bazel build "${flags[@]}" //:classify //:${lib}_test
echo "consumer: build $(( $(date +%s) - start )) s"
out=$(bazel run "${flags[@]}" //:classify -- "$here/sample.ppm")
echo "$out" | sed 's/^/consumer: classify: /'
[[ $(echo "$out" | grep -c '^class ') -eq 3 ]] || { echo "consumer: classify printed no top-3"; exit 1; }
bazel test "${flags[@]}" //:${lib}_test
size=$(stat -c %s bazel-bin/classify)
echo "consumer: classify binary ${size} bytes"

# The AOT outputs of the first build, then of a fresh output base.
gen=$(bazel query 'kind(genrule, //:*)' 2>/dev/null | tr '\n' ' ')
bin1=$(bazel info "${flags[@]}" bazel-bin)
base2=$(mktemp -d "${TMPDIR:-/tmp}/kiln-consumer-base2.XXXXXX")
trap '[[ $keep -eq 1 ]] || rm -rf "$base2"' EXIT
start=$(date +%s)
bazel --output_base="$base2" build "${flags[@]}" --symlink_prefix=/ $gen
bin2=$(bazel --output_base="$base2" info "${flags[@]}" bazel-bin)
echo "consumer: second build (fresh output base) $(( $(date +%s) - start )) s"
files=$(cd "$bin1" && ls ${lib}.h ${lib}_*.cc ${lib}_*.S ${lib}_*.inc)
n=0
for f in $files; do
  cmp -s "$bin1/$f" "$bin2/$f" || { echo "consumer: NOT reproducible: $f differs"; exit 1; }
  n=$((n + 1))
done
for dir in "$(bazel info output_base)" "$base2" "$here" "$HOME"; do
  if (cd "$bin1" && grep -l -F "$dir" $files); then
    echo "consumer: NOT hermetic: the files above contain the path $dir"
    exit 1
  fi
done
bazel --output_base="$base2" shutdown
echo "consumer: reproducible: ${n} generated files identical across two output bases"

