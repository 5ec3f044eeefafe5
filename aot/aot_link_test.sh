#!/usr/bin/env bash
# File: aot/aot_link_test.sh — a binary that only runs an AOT-compiled
# model must link kiln's runtime alone: no libonnx or protobuf among its
# shared libraries, no symbol of the compiler side (frontend, passes,
# lowering, the reference interpreter, the C++ emitter, the JIT, the
# pipeline, kiln::Compiler) and none of ONNX's. Then it must run.
#   aot_link_test.sh BINARY
set -euo pipefail
bin=$1
fail=0

needed=$(readelf -d "$bin" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
bad=$(echo "$needed" | grep -E '^lib(onnx|protobuf)' || true)
if [[ -n "$bad" ]]; then
  echo "FAIL: $bin needs these shared libraries:"
  echo "$bad"
  fail=1
fi

symbols=$(nm -C "$bin")
for pattern in 'kiln::frontend::' 'kiln::passes::' 'kiln::lowering::' 'kiln::interp::' \
               'kiln::backends::cpp::' 'kiln::jit::' 'kiln::compiler::' 'kiln::Compiler::' \
               '[ <(,]onnx::' 'google::protobuf::'; do
  found=$(echo "$symbols" | grep -E -c -- "$pattern" || true)
  if [[ "$found" -ne 0 ]]; then
    echo "FAIL: $bin has $found symbols matching '$pattern', e.g.:"
    echo "$symbols" | grep -E -- "$pattern" | head -5
    fail=1
  fi
done
if [[ "$fail" -ne 0 ]]; then exit 1; fi

echo "$bin: $(stat -L -c %s "$bin") bytes; needs $(echo $needed | tr ' ' ',')"
echo "kiln symbols by namespace:"
echo "$symbols" | grep -oE 'kiln::[a-z_]+::' | sort | uniq -c
"$bin"
