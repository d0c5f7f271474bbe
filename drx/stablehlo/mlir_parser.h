#pragma once
// The recursive-descent parser behind parse_mlir. Its members are defined in
// mlir_attributes.cpp (types and attributes), mlir_pretty.cpp (the pretty op
// forms) and mlir_parse.cpp (ops, regions, functions, the module). Internal to
// drx/stablehlo.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "drx/stablehlo/mlir_ast.h"
#include "drx/stablehlo/mlir_lexer.h"

namespace drx::stablehlo {

// An op's trailing type signature: `(A, B) -> C` or a plain list `A, B`.
struct Signature {
  bool function = false;
  std::vector<TensorType> inputs, outputs;  // function form
  std::vector<TensorType> list;             // list form
};

class Parser {
 public:
  explicit Parser(std::string_view text) : lex_(text) {}
  Module parse_module();

  // Types (mlir_attributes.cpp).
  TensorType parse_tensor_type(std::string_view context);
  std::string parse_element_type(std::string_view context, bool allow_index);
  std::vector<TensorType> parse_type_list_in_parens(std::string_view context);
  Signature parse_signature(std::string_view op);

  // Attributes (mlir_attributes.cpp). `typed`: a `: type` after a number
  // belongs to the attribute (inside dictionaries and arrays).
  Attribute parse_attribute(bool typed);
  AttributeList parse_dictionary();  // {key = value, ...}
  Attribute parse_dense();
  Attribute parse_i64_array(std::string_view context);  // [1, 2] as array<i64: 1, 2>
  int64_t parse_integer(std::string_view context);
  static void normalise_structured(Attribute& a);

  // Pretty op forms (mlir_pretty.cpp): fills op after its name.
  void parse_pretty(Operation& op);

  // Ops and regions (mlir_parse.cpp).
  Operation parse_op();
  void parse_op_rest(Operation& op, size_t start);  // after the results
  void parse_generic_tail(Operation& op);
  Region parse_region(const std::vector<std::pair<std::string, TensorType>>* entry_args);
  std::vector<std::pair<std::string, TensorType>> parse_block_args(std::string_view context);
  void apply_signature(Operation& op, const Signature& sig);
  void finish_attributes(Operation& op, size_t at);
  Function parse_function();
  Function function_from_generic(Operation& op);
  void add_module_op(Module& m, Operation op);
  void add_generic_module(Module& m, Operation& op);

  Lexer lex_;

 private:
  friend class DepthGuard;
  int depth_ = 0;
  std::map<std::string, Attribute, std::less<>> aliases_;
  void parse_module_body(Module& m, bool braced);
};

// The check dialect's ops (check.expect_eq_const, ...) of StableHLO's
// interpreter tests, after the op name (mlir_check_ops.cpp).
void parse_check_op(Parser& p, Operation& op);
// stablehlo.convolution's pretty form, after the op name (mlir_conv.cpp).
void parse_convolution_pretty(Parser& p, Operation& op);

// Bounds the nesting of attributes and regions, so hostile input cannot
// exhaust the stack.
class DepthGuard {
 public:
  explicit DepthGuard(Parser& p) : p_(p) {
    if (p_.depth_ >= 200) p_.lex_.fail("nesting deeper than 200 levels");
    ++p_.depth_;
  }
  ~DepthGuard() { --p_.depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  Parser& p_;
};

}  // namespace drx::stablehlo
