#!/usr/bin/env bash
# File: aot/isa_symbols_test.sh — a kiln_aot_library's per-ISA kernel
# libraries must define no global symbol but their `extern "C"` entries.
# Why: the ISA units are compiled with different -march flags and linked
# into one binary; an inline function or template instance they define as a
# weak (COMDAT) symbol would be merged with the other ISAs' copies, and the
# linker could keep the AVX-512 one for the scalar path (SIGILL on a CPU
# without AVX-512). The emitter keeps everything else internal. Nor may they
# have static initializers (.init_array/.ctors): those run at start-up on
# every CPU, before any ISA check.
#   isa_symbols_test.sh PREFIX LIB...   (PREFIX: kiln_aot_<name>_)
set -euo pipefail
prefix=$1
shift
checked=0
for lib in "$@"; do
  [[ "$lib" == *.a ]] || continue
  symbols=$(nm -g --defined-only "$lib")
  # DW.ref.__gxx_personality_v0 is a pointer to libstdc++'s exception
  # personality routine that units with unwind tables share (debug and
  # sanitizer builds emit it): data, the same in every ISA's unit.
  bad=$(echo "$symbols" | awk 'NF == 3 {print $2, $3}' | grep -v " ${prefix}" |
        grep -v '^V DW\.ref\.__gxx_personality_v0$' || true)
  if [[ -n "$bad" ]]; then
    echo "FAIL: $lib defines global symbols other than its ${prefix}* entries:"
    echo "$bad"
    exit 1
  fi
  sections=$(objdump -h "$lib")
  # A sanitizer build (--config=asan) gives every instrumented unit GCC's
  # module constructor, which registers its globals with the sanitizer
  # (section .init_array.00099, the priority GCC reserves for it); that one
  # is the sanitizer's, any other initializer still fails.
  if nm "$lib" | grep -q ' U __asan_init$'; then
    sections=$(echo "$sections" | grep -v '\.init_array\.00099 ')
  fi
  if echo "$sections" | grep -qE '\.(init_array|preinit_array|ctors)'; then
    echo "FAIL: $lib has static initializers (they would run on every CPU):"
    echo "$sections" | grep -E '\.(init_array|preinit_array|ctors)'
    exit 1
  fi
  entries=$(echo "$symbols" | grep -c " T ${prefix}" || true)
  echo "$lib: $entries entries, no other global symbol, no static initializer"
  if [[ "$entries" -eq 0 ]]; then
    echo "FAIL: $lib has no ${prefix}* entry"
    exit 1
  fi
  checked=$((checked + 1))
done
if [[ $checked -eq 0 ]]; then
  echo "FAIL: no static library among the arguments"
  exit 1
fi
