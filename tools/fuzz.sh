#!/usr/bin/env bash
# File: tools/fuzz.sh — runs one libFuzzer target of testing/fuzz for SECONDS
# under ASan+UBSan (bazel --config=fuzz: Debian's clang).
#   tools/fuzz.sh onnx_import 300   # onnx_import, onnx_compile, graph_text, loop_text,
#                                   # tensor_proto, aot_description
#   tools/fuzz.sh loop_text 60 -jobs=2   # extra flags go to libFuzzer
# New inputs go to $KILN_FUZZ_DIR/TARGET/corpus (default /tmp/kiln_fuzz), the
# committed corpus testing/fuzz/corpus/TARGET is only read; a crash, a hang
# (-timeout, seconds per input) or an RSS over 2 GiB leaves its input in
# .../findings. Minimize it (-minimize_crash=1), fix it, and commit the input
# to the committed corpus: its corpus test then replays it on every build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
  echo "usage: tools/fuzz.sh TARGET SECONDS [libFuzzer flags]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
bazel build --config=fuzz "//testing/fuzz:${target}_fuzzer" >&2
bin="$(bazel info --config=fuzz bazel-bin 2>/dev/null)/testing/fuzz/${target}_fuzzer"
work="${KILN_FUZZ_DIR:-/tmp/kiln_fuzz}/${target}"
mkdir -p "$work/corpus" "$work/findings"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/findings/" -print_final_stats=1 \
  "$@" "$work/corpus" "testing/fuzz/corpus/${target}"
