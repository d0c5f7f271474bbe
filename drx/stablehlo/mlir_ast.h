#pragma once
// A small syntax tree for MLIR text holding StableHLO modules as JAX prints
// them, and the parser that builds it. The parser reads the pretty (custom)
// form of the ops it knows and the generic form of every op, and normalises
// both to the same Operation: attribute names are the generic ones of the
// StableHLO spec, attribute lists are sorted by name, and a pretty type
// signature is expanded to one type per operand and per result.
//
// Value names are kept as written ("%0", "%arg1", "%cst_2"); a result of a
// multi-result op is named "%0#k". Nothing is resolved: the importer maps
// names to values.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace drx::stablehlo {

// A ranked, statically shaped tensor type: tensor<2x3xf32> is {{2, 3}, "f32"};
// tensor<f32> has shape {}. element is one of f16 bf16 f32 f64 i1 i2 i4 i8
// i16 i32 i64 ui2 ui4 ui8 ui16 ui32 ui64. (In an attribute's type suffix,
// `1 : i32`, only element is set; there it may also be "index".)
struct TensorType {
  std::vector<int64_t> shape;
  std::string element;
  bool operator==(const TensorType&) const = default;
};

struct Attribute;
using NamedAttribute = std::pair<std::string, Attribute>;
using AttributeList = std::vector<NamedAttribute>;

// One attribute value, normalised.
struct Attribute {
  enum class Kind {
    integer,     // i (type.element: the suffix type, "i64" when none is written)
    floating,    // f, and text: the literal as written (type.element: suffix, else "f64")
    boolean,     // b
    string,      // text: the decoded contents
    symbol,      // text: the name without '@' ("inputs")
    array,       // list: [1, 2], [DEFAULT, DEFAULT]; array<i64: 1, 2> also sets type.element
    dense,       // type, splat, elements or hex
    dictionary,  // dict: {key = value, ...} in written order
    enum_value,  // text: "GT" for #stablehlo<comparison_direction GT>, or a bare word (DEFAULT)
    unit,        // a key without a value ({foo}) or `unit`
    structured,  // #stablehlo.gather<offset_dims = [1], ...>: text = "stablehlo.gather", dict
    type,        // a type as a value: text raw; type if a tensor; a function type
                 // (function_type = (A) -> B) has list = {inputs, results}, arrays of types
    other,       // anything else, kept raw in text (#sdy.sharding<...>, <[...]>, #alias text)
  };
  Kind kind = Kind::unit;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string text;
  std::vector<Attribute> list;
  AttributeList dict;
  // dense<...>: the tensor type from ": tensor<...>" (scalars: element suffix).
  TensorType type;
  bool splat = false;  // one element written for the whole tensor (or a one-element hex blob)
  // Element literals in row-major order as written: "1.5", "-2", "0xFF800000",
  // "true", "(1.0, 2.0)". Empty when the hex form is used.
  std::vector<std::string> elements;
  // dense<"0x0000803F..."> : the hex digits after "0x" (little-endian bytes).
  std::string hex;

  bool operator==(const Attribute&) const = default;
};

struct Region;

struct Operation {
  // Generic op name: "stablehlo.add", "func.call", "func.return", "stablehlo.return".
  std::string name;
  std::vector<std::string> results;   // one per result value: "%3", or "%0#0", "%0#1"
  std::vector<std::string> operands;  // uses as written: "%arg0", "%0#1", "%cst"
  // Properties <{...}> and attributes {...} together, plus what the pretty
  // form writes inline, under the spec's generic names, sorted by name:
  //   compare: comparison_direction (enum GT), compare_type (enum FLOAT)
  //   iota: iota_dimension; concatenate: dimension (integers, i64)
  //   broadcast_in_dim: broadcast_dimensions; transpose: permutation;
  //   reverse, reduce: dimensions; dynamic_slice: slice_sizes; slice:
  //   start_indices, limit_indices, strides; pad: edge_padding_low,
  //   edge_padding_high, interior_padding (arrays with type.element "i64")
  //   dot_general: dot_dimension_numbers (structured "stablehlo.dot" with
  //   lhs_batching_dimensions, rhs_batching_dimensions,
  //   lhs_contracting_dimensions, rhs_contracting_dimensions, always all
  //   four), precision_config (array of enums)
  //   gather: dimension_numbers (structured "stablehlo.gather", with
  //   offset_dims, collapsed_slice_dims, operand_batching_dims,
  //   start_indices_batching_dims, start_index_map, index_vector_dim always
  //   present), slice_sizes, indices_are_sorted
  //   custom_call: call_target_name (string), has_side_effect, ...
  //   func.call: callee (symbol); constant: value (dense)
  AttributeList attributes;
  std::vector<TensorType> operand_types, result_types;
  // reduce: body; while: cond, body; case/if: branches. The pretty reduce
  // `applies stablehlo.add` becomes one block (%lhs0.., %rhs0..) holding
  // `%result = stablehlo.add %lhs0, %rhs0` and `stablehlo.return %result`.
  std::vector<Region> regions;
  int line = 0;  // 1-based source line where the op starts

  bool operator==(const Operation&) const = default;
};

struct Block {
  std::vector<std::pair<std::string, TensorType>> arguments;  // ("%arg1", tensor<f32>)
  std::vector<Operation> ops;
  bool operator==(const Block&) const = default;
};

struct Region {
  std::vector<Block> blocks;
  bool operator==(const Region&) const = default;
};

struct Function {
  std::string name;  // without '@'
  bool is_public = true;
  std::vector<std::pair<std::string, TensorType>> arguments;
  std::vector<AttributeList> argument_attributes;  // one per argument (often empty)
  std::vector<TensorType> results;
  std::vector<AttributeList> result_attributes;  // one per result
  AttributeList attributes;                      // `attributes {...}` of the func
  Region body;                                   // body.blocks[0].arguments == arguments
  int line = 0;
  bool operator==(const Function&) const = default;
};

struct Module {
  std::string name;  // without '@'; empty for an unnamed or implicit module
  AttributeList attributes;
  std::vector<Function> functions;
  std::vector<Operation> operations;  // other module-level ops, e.g. sdy.mesh
  bool operator==(const Module&) const = default;
};

// Parses MLIR text. Throws drx::ParseError (a drx::Error) with a message
// "stablehlo: line N: <what>", naming the offending token or op, on anything
// malformed or unsupported.
Module parse_mlir(const std::string& text);

// The attribute named `name` in `list`, or nullptr.
const Attribute* find_attribute(const AttributeList& list, std::string_view name);

// "tensor<2x3xf32>".
std::string to_string(const TensorType& type);

}  // namespace drx::stablehlo
