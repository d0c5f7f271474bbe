// The check dialect of StableHLO's interpreter tests, as they write it:
//   check.expect_eq_const %v, dense<...> : tensor<...> {tolerance = ...}
//   check.expect_almost_eq %a, %b, tolerance = 0.1 : tensor<...>
//   check.expect_close %a, %b, max_ulp_difference = 3 : tensor<...>, tensor<...>
// A *_const form's expected value becomes the attribute `value` (its type the
// operand's); `key = value` pairs become attributes of that name.
#include "drx/stablehlo/mlir_parser.h"

namespace drx::stablehlo {

void parse_check_op(Parser& p, Operation& op) {
  Lexer& lex = p.lex_;
  bool has_value = false;
  do {
    if (lex.peek() == '%') {
      op.operands.push_back(lex.value_name("as an operand of " + op.name));
    } else if (lex.peek_word("dense")) {
      const size_t at = lex.pos();
      Attribute value = p.parse_attribute(true);
      if (value.kind != Attribute::Kind::dense)
        lex.fail_at(at, op.name + ": expected dense<...> : tensor<...>");
      op.operand_types.assign(op.operands.size(), value.type);
      op.attributes.emplace_back("value", std::move(value));
      has_value = true;
    } else {
      std::string key = lex.ident("in " + op.name);
      lex.expect("=", "after '" + key + "' in " + op.name);
      op.attributes.emplace_back(std::move(key), p.parse_attribute(false));
    }
  } while (lex.consume(","));
  if (lex.peek() == '{')
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  if (!has_value) p.apply_signature(op, p.parse_signature(op.name));
}

}  // namespace drx::stablehlo
