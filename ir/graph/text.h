// File: ir/graph/text.h — the readable text form of the graph IR: a printer
// and a parser that round-trip, for dumps between passes and golden tests.
//
//   graph main(%x: f32[1,3,8,8]) -> (%y) opset 18 {
//     %w = constant f32[4,3,3,3] <elided>
//     %b = constant f32[4] splat(0.5)
//     %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1], strides=[1, 1]} name="conv0" : f32[1,4,8,8]
//     %y, _ = com.example.Split2(%c) {axis=1} : f32[1,2,8,8]
//   }
//
// Grammar (`//` starts a comment to the end of the line):
//   graph    := 'graph' NAME '(' [%v ':' type, ...] ')'
//               ['captures' '(' %inner ':' type '=' %outer, ... ')']
//               '->' '(' [%v | '_', ...] ')' ['opset' INT] '{' stmt* '}'
//   stmt     := %v '=' 'constant' tensor [':' type]
//             | outs '=' op '(' [%v | '_', ...] ')' ['{' attr, ... '}']
//                      ['name' '=' STRING] [':' type, ...]
//             | op '(' ... ')' ...                 (a node without outputs)
//   outs     := (%v | '_') [',' (%v | '_')]*       ('_' is an omitted output)
//   op       := Ident | com.microsoft.Ident | NAME '.' NAME | STRING
//   type     := dtype '[' dims ']' | dtype '[' '*' ']'   (dims: INT or '?')
//   dtype    := f32 f16 f64 i64 i32 i8 u8 bool | '?' (unknown)
//   tensor   := dtype '[' dims ']' ( '[' elem, ... ']' | 'splat' '(' elem ')'
//               | elem (one element only) | '<elided>' )
//   elem     := INT | FLOAT | inf | -inf | nan | nan(0xBITS) | true | false
//   attr     := NAME '=' ( INT | FLOAT | STRING | '[' ... ']'
//               | ints[...] | floats[...] | strings[...]
//               | 'tensor' tensor | 'graph' graph | 'graph' '<null>' )
// Value names are %ident ([A-Za-z0-9_.]+) or %"quoted"; NAME is an
// identifier or a quoted string. Quoted strings escape \" \\ \n \t \r \xHH.
// Floats print with a '.' or exponent (so `alpha=1.0` is a float and
// `axis=1` an int64), in the shortest form that reads back bit-exactly.
// Node output types are optional when parsing (omitted: `?[*]`).
#ifndef KILN_IR_GRAPH_TEXT_H_
#define KILN_IR_GRAPH_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"

namespace kiln::ir {

struct PrintOptions {
  // Constants (and tensor attributes) with more elements than this print as
  // `<elided>` unless all elements are equal (those print as `splat(x)`).
  // Negative: print everything, which is what a round trip needs.
  int64_t max_constant_elements = 16;

  // Everything printed: Parse(Print(g, Full())) rebuilds g exactly.
  static PrintOptions Full() {
    PrintOptions o;
    o.max_constant_elements = -1;
    return o;
  }
};

struct ParseOptions {
  // `<elided>` constant data becomes zeros instead of an error (golden tests
  // of big models print weights elided).
  bool allow_elided_constants = false;
  // Largest constant accepted, so a typo in a shape cannot exhaust memory.
  int64_t max_constant_bytes = int64_t{1} << 30;
};

// The whole graph, subgraphs included.
std::string PrintGraph(const Graph& graph, const PrintOptions& options = {});

// One node as it appears in PrintGraph (without indentation or newline).
std::string PrintNode(const Graph& graph, const Node& node,
                      const PrintOptions& options = {});

// "f32[1,?,8]", "f32[]" (scalar), "f32[*]" (unknown rank), "?[2]".
std::string PrintValueType(const Value& value);

// A tensor literal: "f32[2] [1.0, 2.5]", "i64[] 3", "f32[4] splat(0.0)".
std::string PrintTensor(const Tensor& tensor, const PrintOptions& options = {});

// "%x" or "%\"a name\"".
std::string PrintValueName(absl::string_view name);

// Parses exactly one graph. Errors are InvalidArgument "LINE:COL: ...".
absl::StatusOr<Graph> ParseGraph(absl::string_view text,
                                 const ParseOptions& options = {});

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_TEXT_H_
