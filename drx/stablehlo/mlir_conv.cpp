// stablehlo.convolution's pretty form, normalised to the generic attributes:
//   stablehlo.convolution(%lhs, %rhs)
//     dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
//     window = {stride = [4, 4], pad = [[1, 1], [1, 1]], lhs_dilate = [2, 2],
//               rhs_dilate = [1, 1], reverse = [false, true]}
//     {batch_group_count = 1 : i64, ...} : (tensor<...>, tensor<...>) -> tensor<...>
// becomes dimension_numbers (#stablehlo.conv<...>, kept raw), window_strides, padding (dense
// [n, 2] of i64), lhs_dilation, rhs_dilation (array<i64>) and window_reversal (array<i1>).
#include <map>
#include <string>

#include "drx/stablehlo/mlir_parser.h"

namespace drx::stablehlo {
void parse_convolution_pretty(Parser& p, Operation& op) {
  Lexer& lex = p.lex_;
  lex.expect("(", "before the operands of stablehlo.convolution");
  if (!lex.consume(")")) {
    do op.operands.push_back(lex.value_name("as an operand of stablehlo.convolution"));
    while (lex.consume(","));
    lex.expect(")", "after the operands of stablehlo.convolution");
  }
  bool more = true;
  while (more && lex.peek_ident()) {
    lex.skip_ws();
    const size_t at = lex.pos();
    const std::string key = lex.ident("in stablehlo.convolution");
    lex.expect("=", "after '" + key + "'");
    if (key == "dim_numbers") {
      std::string text = "#stablehlo.conv<";
      lex.skip_ws();
      text += lex.balanced("in dim_numbers");
      if (!lex.consume_word("x"))
        lex.fail("expected 'x' in the dim_numbers of stablehlo.convolution");
      lex.skip_ws();
      text += "x" + lex.balanced("in dim_numbers");
      lex.expect("->", "in the dim_numbers of stablehlo.convolution");
      lex.skip_ws();
      text += "->" + lex.balanced("in dim_numbers") + ">";
      Attribute a;
      a.kind = Attribute::Kind::other;
      a.text = text;
      op.attributes.emplace_back("dimension_numbers", std::move(a));
    } else if (key == "window") {
      lex.expect("{", "after 'window ='");
      if (!lex.consume("}")) {
        do {
          lex.skip_ws();
          const size_t wat = lex.pos();
          const std::string w = lex.ident("in the window of stablehlo.convolution");
          lex.expect("=", "after '" + w + "'");
          // The window's keywords and the attributes of the generic form they spell.
          static const std::map<std::string, std::string> kWindowFields = {
              {"stride", "window_strides"},
              {"lhs_dilate", "lhs_dilation"},
              {"rhs_dilate", "rhs_dilation"},
              {"pad", "padding"},
              {"reverse", "window_reversal"}};
          const auto field = kWindowFields.find(w);
          const std::string attribute = field == kWindowFields.end() ? "" : field->second;
          if (attribute == "window_strides" || attribute == "lhs_dilation" ||
              attribute == "rhs_dilation") {
            op.attributes.emplace_back(attribute, p.parse_i64_array("after '" + w + " ='"));
          } else if (attribute == "padding") {
            Attribute pad;
            pad.kind = Attribute::Kind::dense;
            pad.type.element = "i64";
            int64_t rows = 0;
            lex.expect("[", "after 'pad ='");
            if (!lex.consume("]")) {
              do {
                lex.expect("[", "before a (low, high) pair");
                pad.elements.push_back(std::to_string(p.parse_integer("as a low padding")));
                lex.expect(",", "between low and high padding");
                pad.elements.push_back(std::to_string(p.parse_integer("as a high padding")));
                lex.expect("]", "after a (low, high) pair");
                ++rows;
              } while (lex.consume(","));
              lex.expect("]", "after the padding pairs");
            }
            pad.type.shape = {rows, 2};
            op.attributes.emplace_back("padding", std::move(pad));
          } else if (attribute == "window_reversal") {
            Attribute rev;
            rev.kind = Attribute::Kind::array;
            rev.type.element = "i1";
            lex.expect("[", "after 'reverse ='");
            if (!lex.consume("]")) {
              do {
                Attribute b;
                b.kind = Attribute::Kind::boolean;
                if (lex.consume_word("true"))
                  b.b = true;
                else if (lex.consume_word("false"))
                  b.b = false;
                else
                  b.b = p.parse_integer("as a window reversal flag") != 0;
                rev.list.push_back(b);
              } while (lex.consume(","));
              lex.expect("]", "after the window reversal flags");
            }
            op.attributes.emplace_back("window_reversal", std::move(rev));
          } else {
            lex.fail_at(wat, "unknown window attribute '" + w + "' of stablehlo.convolution");
          }
        } while (lex.consume(","));
        lex.expect("}", "after the window of stablehlo.convolution");
      }
    } else {
      lex.fail_at(at, "unsupported pretty syntax for stablehlo.convolution: '" + key + "'");
    }
    more = lex.consume(",");
  }
  if (lex.peek() == '{')
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  p.apply_signature(op, p.parse_signature(op.name));
}

}  // namespace drx::stablehlo
