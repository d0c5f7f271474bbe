// The pretty (custom) forms of the ops JAX prints, normalised to the generic
// attribute names of the StableHLO spec.
#include <algorithm>

#include "drx/array/error.h"
#include "drx/stablehlo/mlir_parser.h"

namespace drx::stablehlo {
namespace {

Attribute enum_attr(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::enum_value;
  a.text = std::move(v);
  return a;
}

Attribute i64_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::integer;
  a.i = v;
  a.type.element = "i64";
  return a;
}

Attribute string_attr(std::string v, Attribute::Kind kind = Attribute::Kind::string) {
  Attribute a;
  a.kind = kind;
  a.text = std::move(v);
  return a;
}

// How a pretty `key = value` is written, and under which generic name it goes.
enum class Form { integer, i64_array, dims_pair, attribute };
struct Keyword {
  std::string_view op, key, name;
  Form form;
};
constexpr Keyword kKeywords[] = {
    {"stablehlo.iota", "dim", "iota_dimension", Form::integer},
    {"stablehlo.concatenate", "dim", "dimension", Form::integer},
    {"stablehlo.get_dimension_size", "dim", "dimension", Form::integer},
    {"stablehlo.broadcast_in_dim", "dims", "broadcast_dimensions", Form::i64_array},
    {"stablehlo.transpose", "dims", "permutation", Form::i64_array},
    {"stablehlo.reverse", "dims", "dimensions", Form::i64_array},
    {"stablehlo.dynamic_slice", "sizes", "slice_sizes", Form::i64_array},
    {"stablehlo.pad", "low", "edge_padding_low", Form::i64_array},
    {"stablehlo.pad", "high", "edge_padding_high", Form::i64_array},
    {"stablehlo.pad", "interior", "interior_padding", Form::i64_array},
    {"stablehlo.dot_general", "batching_dims", "batching", Form::dims_pair},
    {"stablehlo.dot_general", "contracting_dims", "contracting", Form::dims_pair},
    {"stablehlo.dot_general", "precision", "precision_config", Form::attribute},
    {"stablehlo.dot_general", "algorithm", "algorithm", Form::attribute},
    {"stablehlo.dot", "precision", "precision_config", Form::attribute},
    // Read so that the importer can say the op is not supported, as for the generic form.
    {"stablehlo.fft", "type", "fft_type", Form::attribute},
    {"stablehlo.fft", "length", "fft_length", Form::i64_array},
};

void operands(Parser& p, Operation& op) {
  if (p.lex_.peek() != '%') return;
  do op.operands.push_back(p.lex_.value_name("as an operand of " + op.name));
  while (p.lex_.consume(","));
}

void operands_in_parens(Parser& p, Operation& op) {
  p.lex_.expect("(", "before the operands of " + op.name);
  if (p.lex_.consume(")")) return;
  operands(p, op);
  p.lex_.expect(")", "after the operands of " + op.name);
}

// The optional attribute dictionary and the type signature at the end.
void trailer(Parser& p, Operation& op) {
  if (p.lex_.peek() == '{')
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  p.apply_signature(op, p.parse_signature(op.name));
}

void one_of(Parser& p, const std::string& word, std::initializer_list<std::string_view> allowed,
            const std::string& what, size_t at) {
  if (std::find(allowed.begin(), allowed.end(), word) == allowed.end())
    p.lex_.fail_at(at, "unknown " + what + " '" + word + "'");
}

void constant(Parser& p, Operation& op) {
  if (p.lex_.peek() == '{')
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  size_t at = p.lex_.pos();
  Attribute value = p.parse_attribute(true);
  if (value.kind != Attribute::Kind::dense)
    p.lex_.fail_at(at, "stablehlo.constant: expected dense<...> : tensor<...>");
  op.result_types = {value.type};
  op.attributes.emplace_back("value", std::move(value));
}

void compare(Parser& p, Operation& op) {
  p.lex_.skip_ws();
  size_t at = p.lex_.pos();
  std::string dir = p.lex_.ident("as the direction of stablehlo.compare");
  one_of(p, dir, {"EQ", "NE", "GE", "GT", "LE", "LT"}, "comparison direction", at);
  op.attributes.emplace_back("comparison_direction", enum_attr(dir));
  p.lex_.expect(",", "after the comparison direction");
  op.operands.push_back(p.lex_.value_name("as an operand of stablehlo.compare"));
  p.lex_.expect(",", "between the operands of stablehlo.compare");
  op.operands.push_back(p.lex_.value_name("as an operand of stablehlo.compare"));
  if (p.lex_.consume(",")) {
    p.lex_.skip_ws();
    at = p.lex_.pos();
    std::string type = p.lex_.ident("as the compare type of stablehlo.compare");
    one_of(p, type, {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "NOTYPE"}, "compare type", at);
    op.attributes.emplace_back("compare_type", enum_attr(type));
  }
  trailer(p, op);
}

void slice(Parser& p, Operation& op) {
  op.operands.push_back(p.lex_.value_name("as the operand of stablehlo.slice"));
  Attribute start, limit, strides;
  for (Attribute* a : {&start, &limit, &strides}) {
    a->kind = Attribute::Kind::array;
    a->type.element = "i64";
  }
  p.lex_.expect("[", "before the ranges of stablehlo.slice");
  if (!p.lex_.consume("]")) {
    do {
      start.list.push_back(i64_attr(p.parse_integer("as a slice start")));
      p.lex_.expect(":", "after a slice start");
      limit.list.push_back(i64_attr(p.parse_integer("as a slice limit")));
      strides.list.push_back(
          i64_attr(p.lex_.consume(":") ? p.parse_integer("as a slice stride") : 1));
    } while (p.lex_.consume(","));
    p.lex_.expect("]", "after the ranges of stablehlo.slice");
  }
  op.attributes.emplace_back("start_indices", std::move(start));
  op.attributes.emplace_back("limit_indices", std::move(limit));
  op.attributes.emplace_back("strides", std::move(strides));
  trailer(p, op);
}

void call_like(Parser& p, Operation& op) {
  std::string target = p.lex_.symbol("after " + op.name);
  if (op.name == "func.call")
    op.attributes.emplace_back("callee", string_attr(target, Attribute::Kind::symbol));
  else
    op.attributes.emplace_back("call_target_name", string_attr(target));
  operands_in_parens(p, op);
  trailer(p, op);
}

void return_op(Parser& p, Operation& op) {
  operands(p, op);
  if (!op.operands.empty()) trailer(p, op);
}

void reduce(Parser& p, Operation& op) {
  Lexer& lex = p.lex_;
  std::vector<std::string> inputs, inits;
  do {
    lex.expect("(", "before an input of stablehlo.reduce");
    inputs.push_back(lex.value_name("as an input of stablehlo.reduce"));
    if (!lex.consume_word("init"))
      lex.fail("expected 'init:' in stablehlo.reduce, got " + lex.next_text());
    lex.expect(":", "after 'init'");
    inits.push_back(lex.value_name("as an init value of stablehlo.reduce"));
    lex.expect(")", "after an input of stablehlo.reduce");
  } while (lex.consume(","));
  op.operands = inputs;
  op.operands.insert(op.operands.end(), inits.begin(), inits.end());
  std::string applies;
  if (lex.consume_word("applies")) applies = lex.ident("after 'applies'");
  if (!lex.consume_word("across") || !lex.consume_word("dimensions"))
    lex.fail("expected 'across dimensions = [...]' in stablehlo.reduce, got " + lex.next_text());
  lex.expect("=", "after 'dimensions'");
  op.attributes.emplace_back("dimensions", p.parse_i64_array("in stablehlo.reduce"));
  trailer(p, op);
  const size_t n = inputs.size();
  if (op.operand_types.size() != 2 * n) return;  // apply_signature has reported it
  std::vector<std::pair<std::string, TensorType>> args(2 * n);
  if (!applies.empty()) {  // the body is the one op `applies` names
    Operation body;
    body.name = applies;
    body.line = op.line;
    Operation ret;
    ret.name = "stablehlo.return";
    ret.line = op.line;
    for (size_t k = 0; k < n; ++k) {
      args[k] = {"%lhs" + std::to_string(k), op.operand_types[n + k]};
      args[n + k] = {"%rhs" + std::to_string(k), op.operand_types[n + k]};
      body.result_types.push_back(op.operand_types[n + k]);
      body.results.push_back(n == 1 ? "%result" : "%result#" + std::to_string(k));
    }
    for (const auto& [name, type] : args) {
      body.operands.push_back(name);
      body.operand_types.push_back(type);
    }
    ret.operands = body.results;
    ret.operand_types = body.result_types;
    Region region;
    region.blocks.push_back(Block{args, {body, ret}});
    op.regions.push_back(std::move(region));
    return;
  }
  if (!lex.consume_word("reducer"))
    lex.fail("expected 'applies' or 'reducer' in stablehlo.reduce, got " + lex.next_text());
  for (size_t k = 0; k < n; ++k) {
    lex.expect("(", "before a reducer argument pair");
    for (size_t side = 0; side < 2; ++side) {
      if (side == 1) lex.expect(",", "between reducer arguments");
      std::string name = lex.value_name("as a reducer argument");
      lex.expect(":", "after a reducer argument");
      args[side * n + k] = {name, p.parse_tensor_type("of a reducer argument")};
    }
    lex.expect(")", "after a reducer argument pair");
  }
  op.regions.push_back(p.parse_region(&args));
}

void while_op(Parser& p, Operation& op) {
  Lexer& lex = p.lex_;
  std::vector<std::string> iter;
  lex.expect("(", "after stablehlo.while");
  if (!lex.consume(")")) {
    do {
      iter.push_back(lex.value_name("as a stablehlo.while iteration value"));
      lex.expect("=", "after a stablehlo.while iteration value");
      op.operands.push_back(lex.value_name("as an operand of stablehlo.while"));
    } while (lex.consume(","));
    lex.expect(")", "after the operands of stablehlo.while");
  }
  if (lex.consume_word("attributes"))
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  std::vector<TensorType> types;
  if (!iter.empty()) {
    Signature sig = p.parse_signature(op.name);
    if (sig.function) lex.fail("stablehlo.while: expected a list of types, not a function type");
    types = sig.list;
  }
  if (types.size() != iter.size())
    lex.fail("stablehlo.while: " + std::to_string(iter.size()) + " operands but " +
             std::to_string(types.size()) + " types");
  op.operand_types = types;
  op.result_types = types;
  std::vector<std::pair<std::string, TensorType>> args;
  for (size_t k = 0; k < iter.size(); ++k) args.emplace_back(iter[k], types[k]);
  if (!lex.consume_word("cond"))
    lex.fail("expected 'cond' in stablehlo.while, got " + lex.next_text());
  op.regions.push_back(p.parse_region(&args));
  if (!lex.consume_word("do")) lex.fail("expected 'do' in stablehlo.while, got " + lex.next_text());
  op.regions.push_back(p.parse_region(&args));
}

// `op %a, %b, key = value, ... {attrs} : types`.
void plain(Parser& p, Operation& op) {
  Lexer& lex = p.lex_;
  if (lex.peek() == '(') {  // stablehlo.case(%i) ({...}) and other generic-looking forms
    p.parse_generic_tail(op);
    return;
  }
  Attribute dot;
  dot.kind = Attribute::Kind::structured;
  dot.text = "stablehlo.dot";
  bool has_dot = false, keywords = false;
  const bool sdy = op.name.rfind("sdy.", 0) == 0;  // sdy ops write <@mesh, ...> after operands
  if (lex.peek() == '%' || lex.peek_ident() || lex.peek() == '<') {
    do {
      if (lex.peek() == '%' && !keywords) {
        op.operands.push_back(lex.value_name("as an operand of " + op.name));
        continue;
      }
      if (lex.peek() == '<' && sdy) {
        op.attributes.emplace_back("sharding", p.parse_attribute(false));
        continue;
      }
      lex.skip_ws();
      const size_t at = lex.pos();
      if (!lex.peek_ident())
        lex.fail("unexpected " + lex.next_text() + " in the pretty form of " + op.name);
      std::string key = lex.ident("in " + op.name);
      const Keyword* kw = nullptr;
      for (const Keyword& k : kKeywords)
        if (k.op == op.name && k.key == key) kw = &k;
      if (kw == nullptr || !lex.consume("="))
        lex.fail_at(at, "unsupported pretty syntax for " + op.name + ": '" + key + "'");
      keywords = true;
      const std::string name(kw->name);
      switch (kw->form) {
        case Form::integer:
          op.attributes.emplace_back(name, i64_attr(p.parse_integer("after '" + key + " ='")));
          break;
        case Form::i64_array:
          op.attributes.emplace_back(name, p.parse_i64_array("after '" + key + " ='"));
          break;
        case Form::attribute:
          op.attributes.emplace_back(name, p.parse_attribute(false));
          break;
        case Form::dims_pair: {
          has_dot = true;
          Attribute lhs = p.parse_i64_array("after '" + key + " ='");
          if (!lex.consume_word("x"))
            lex.fail("expected 'x' between the dimension lists of " + key);
          Attribute rhs = p.parse_i64_array("after 'x'");
          lhs.type.element.clear();
          rhs.type.element.clear();
          const std::string suffix =
              name == "batching" ? "_batching_dimensions" : "_contracting_dimensions";
          dot.dict.emplace_back("lhs" + suffix, std::move(lhs));
          dot.dict.emplace_back("rhs" + suffix, std::move(rhs));
          break;
        }
      }
    } while (lex.consume(",") || (sdy && lex.peek() == '<'));
  }
  if (op.name == "stablehlo.dot_general") {
    if (!has_dot) lex.fail("stablehlo.dot_general: expected 'contracting_dims = [...] x [...]'");
    Parser::normalise_structured(dot);
    op.attributes.emplace_back("dot_dimension_numbers", std::move(dot));
  }
  if (lex.peek() == '{')
    for (NamedAttribute& kv : p.parse_dictionary()) op.attributes.push_back(std::move(kv));
  if (!op.results.empty() || !op.operands.empty() || lex.peek() == ':')
    p.apply_signature(op, p.parse_signature(op.name));
}

}  // namespace

void Parser::parse_pretty(Operation& op) {
  const std::string& n = op.name;
  if (n == "stablehlo.constant") return constant(*this, op);
  if (n == "stablehlo.compare") return compare(*this, op);
  if (n == "stablehlo.slice") return slice(*this, op);
  if (n == "stablehlo.custom_call" || n == "func.call") return call_like(*this, op);
  if (n == "func.return" || n == "stablehlo.return") return return_op(*this, op);
  if (n == "stablehlo.reduce") return reduce(*this, op);
  if (n == "stablehlo.while") return while_op(*this, op);
  if (n == "stablehlo.convolution") return parse_convolution_pretty(*this, op);
  if (n.rfind("check.", 0) == 0) return parse_check_op(*this, op);
  if (n.find('.') == std::string::npos) lex_.fail("unknown op '" + n + "'");
  plain(*this, op);
}

}  // namespace drx::stablehlo
