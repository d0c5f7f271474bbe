// Types and attribute values of MLIR text.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "drx/array/dtype.h"
#include "drx/array/error.h"
#include "drx/stablehlo/mlir_parser.h"

namespace drx::stablehlo {
namespace {

// StableHLO's names of the element types drx holds (the dtype table's).
const std::vector<std::string_view>& element_types() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const DTypeInfo& r : kDTypeTable) v.push_back(r.mlir_name);
    return v;
  }();
  return names;
}

bool is_float_type(std::string_view e) { return e == "f16" || e == "bf16" || e[0] == 'f'; }

// Bytes per element in a dense hex blob (MLIR stores i2 and i4 one per byte, as drx does).
int64_t element_bytes(std::string_view e) {
  for (const DTypeInfo& r : kDTypeTable)
    if (r.mlir_name == e) return static_cast<int64_t>(r.size);
  return 8;
}

bool is_hex_literal(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

bool is_float_literal(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+' || (s[0] >= '0' && s[0] <= '9')) &&
         !is_hex_literal(s) && s.find_first_of(".eE") != std::string_view::npos;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;  // too many
    n *= d;
  }
  return n;
}

Attribute empty_array() {
  Attribute a;
  a.kind = Attribute::Kind::array;
  return a;
}

Attribute integer_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::integer;
  a.i = v;
  a.type.element = "i64";
  return a;
}

}  // namespace

// ---- types ----------------------------------------------------------------

std::string Parser::parse_element_type(std::string_view context, bool allow_index) {
  size_t at = lex_.pos();
  std::string e = lex_.ident(context);
  if (std::find(element_types().begin(), element_types().end(), e) != element_types().end())
    return e;
  if (allow_index && e == "index") return e;
  if (e == "complex" || e.rfind("f8", 0) == 0 || e.rfind("f4", 0) == 0 || e.rfind("f6", 0) == 0)
    lex_.fail_at(at, "unsupported element type '" + e + "' " + std::string(context));
  lex_.fail_at(at, "unknown element type '" + e + "' " + std::string(context));
}

TensorType Parser::parse_tensor_type(std::string_view context) {
  size_t at = lex_.pos();
  if (!lex_.consume_word("tensor")) {
    lex_.skip_ws();
    at = lex_.pos();
    if (lex_.peek() == '!' || lex_.peek_ident() || lex_.peek() == '(')
      lex_.fail_at(at, "unsupported type " + lex_.next_text() + " " + std::string(context) +
                           " (only ranked tensor types are read)");
    lex_.fail("expected a tensor type " + std::string(context) + ", got " + lex_.next_text());
  }
  lex_.expect("<", "after 'tensor'");
  TensorType t;
  while (true) {
    char c = lex_.peek();
    if (c == '?' || c == '*')
      lex_.fail("dynamic shapes are not supported (tensor<" + std::string(1, c) + "...>) " +
                std::string(context));
    if (c < '0' || c > '9') break;
    t.shape.push_back(std::stoll(lex_.digits(context)));
    lex_.expect("x", "after a tensor dimension");
  }
  t.element = parse_element_type(context, false);
  if (lex_.peek() == ',') lex_.fail("tensor encodings are not supported " + std::string(context));
  lex_.expect(">", "to close tensor<...>");
  return t;
}

std::vector<TensorType> Parser::parse_type_list_in_parens(std::string_view context) {
  lex_.expect("(", context);
  std::vector<TensorType> types;
  if (lex_.consume(")")) return types;
  do types.push_back(parse_tensor_type(context));
  while (lex_.consume(","));
  lex_.expect(")", "to close a type list " + std::string(context));
  return types;
}

Signature Parser::parse_signature(std::string_view op) {
  const std::string context = "in the type of " + std::string(op);
  lex_.expect(":", "before the type of " + std::string(op));
  Signature sig;
  if (lex_.peek() == '(') {
    sig.function = true;
    sig.inputs = parse_type_list_in_parens(context);
    lex_.expect("->", context);
    if (lex_.peek() == '(')
      sig.outputs = parse_type_list_in_parens(context);
    else
      sig.outputs.push_back(parse_tensor_type(context));
    return sig;
  }
  do sig.list.push_back(parse_tensor_type(context));
  while (lex_.consume(","));
  return sig;
}

// ---- attributes -----------------------------------------------------------

int64_t Parser::parse_integer(std::string_view context) {
  size_t at = lex_.pos();
  std::string s = lex_.number(context);
  if (is_float_literal(s)) lex_.fail_at(at, "expected an integer " + std::string(context));
  bool neg = s[0] == '-';
  std::string_view digits(s);
  if (s[0] == '-' || s[0] == '+') digits.remove_prefix(1);
  int base = 10;
  if (is_hex_literal(digits)) {
    digits.remove_prefix(2);
    base = 16;
  }
  uint64_t u = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
  if (ec != std::errc() || end != digits.data() + digits.size() || (neg && u > uint64_t{1} << 63))
    lex_.fail_at(at, "integer '" + s + "' out of range " + std::string(context));
  return neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
}

Attribute Parser::parse_i64_array(std::string_view context) {
  Attribute a = empty_array();
  a.type.element = "i64";
  lex_.expect("[", context);
  if (lex_.consume("]")) return a;
  do a.list.push_back(integer_attr(parse_integer(context)));
  while (lex_.consume(","));
  lex_.expect("]", "to close a list " + std::string(context));
  return a;
}

AttributeList Parser::parse_dictionary() {
  DepthGuard guard(*this);
  lex_.expect("{", "to open an attribute dictionary");
  AttributeList dict;
  if (lex_.consume("}")) return dict;
  do {
    std::string key = lex_.peek() == '"' ? lex_.string_literal("as an attribute name")
                                         : lex_.ident("as an attribute name");
    Attribute value;
    if (lex_.consume("="))
      value = parse_attribute(true);
    else
      value.kind = Attribute::Kind::unit;
    dict.emplace_back(std::move(key), std::move(value));
  } while (lex_.consume(","));
  lex_.expect("}", "to close an attribute dictionary");
  return dict;
}

void Parser::normalise_structured(Attribute& a) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> fields = {
      {"stablehlo.dot",
       {"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
        "rhs_contracting_dimensions"}},
      {"stablehlo.gather",
       {"offset_dims", "collapsed_slice_dims", "operand_batching_dims",
        "start_indices_batching_dims", "start_index_map", "index_vector_dim"}},
      {"stablehlo.scatter",
       {"update_window_dims", "inserted_window_dims", "input_batching_dims",
        "scatter_indices_batching_dims", "scatter_dims_to_operand_dims", "index_vector_dim"}},
  };
  auto it = fields.find(a.text);
  if (it == fields.end()) return;
  AttributeList out;
  for (const std::string& key : it->second) {
    auto found = std::find_if(a.dict.begin(), a.dict.end(),
                              [&](const NamedAttribute& kv) { return kv.first == key; });
    if (found != a.dict.end())
      out.push_back(*found);
    else
      out.emplace_back(key, key == "index_vector_dim" ? integer_attr(0) : empty_array());
  }
  for (const NamedAttribute& kv : a.dict)
    if (std::find(it->second.begin(), it->second.end(), kv.first) == it->second.end())
      out.push_back(kv);
  a.dict = std::move(out);
}

namespace {

// One element literal of dense<...>, as written.
std::string dense_element(Lexer& lex) {
  char c = lex.peek();
  if (c == '(') return lex.balanced("in a complex dense element");
  if (lex.consume_word("true")) return "true";
  if (lex.consume_word("false")) return "false";
  if (lex.peek_number()) return lex.number("in a dense element");
  lex.fail("expected a dense element, got " + lex.next_text());
}

}  // namespace

Attribute Parser::parse_dense() {
  size_t start = lex_.pos();
  lex_.expect("<", "after 'dense'");
  Attribute a;
  a.kind = Attribute::Kind::dense;
  bool listed = false;
  std::vector<int64_t> dims;  // the nesting of a written list
  int leaf_depth = -1;
  // Reads one bracketed level at nesting depth d.
  auto list = [&](auto& self, size_t d) -> void {
    DepthGuard guard(*this);
    lex_.expect("[", "in a dense list");
    int64_t count = 0;
    if (!lex_.consume("]")) {
      do {
        if (lex_.peek() == '[') {
          self(self, d + 1);
        } else {
          if (leaf_depth >= 0 && leaf_depth != static_cast<int>(d))
            lex_.fail("ragged dense list (elements at different depths)");
          leaf_depth = static_cast<int>(d);
          a.elements.push_back(dense_element(lex_));
        }
        ++count;
      } while (lex_.consume(","));
      lex_.expect("]", "to close a dense list");
    }
    if (dims.size() <= d) dims.resize(d + 1, -1);
    if (dims[d] >= 0 && dims[d] != count)
      lex_.fail("ragged dense list (rows of different lengths)");
    dims[d] = count;
  };
  if (lex_.peek() == '"') {
    size_t at = lex_.pos();
    std::string s = lex_.string_literal("in dense<\"0x...\">");
    if (!is_hex_literal(s) || s.size() % 2 != 0 ||
        s.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos)
      lex_.fail_at(at, "expected an even number of hex digits in dense<\"0x...\">");
    a.hex = s.substr(2);
  } else if (lex_.peek() == '>') {
    listed = true;
  } else if (lex_.peek() == '[') {
    listed = true;
    list(list, 0);
  } else {
    a.elements.push_back(dense_element(lex_));
    a.splat = true;
  }
  lex_.expect(">", "to close dense<...>");
  lex_.expect(":", "before the type of a dense attribute");
  a.type = parse_tensor_type("of a dense attribute");
  const std::string type = to_string(a.type);
  const int64_t n = element_count(a.type.shape);
  if (n < 0) lex_.fail_at(start, "dense attribute of type " + type + " has too many elements");
  if (!a.hex.empty() || (!listed && a.elements.empty())) {
    const int64_t bytes = static_cast<int64_t>(a.hex.size() / 2),
                  each = element_bytes(a.type.element);
    if (bytes == each && n != 1)
      a.splat = true;
    else if (bytes / each != n || bytes % each != 0)
      lex_.fail_at(start, "dense hex blob of " + std::to_string(bytes) + " bytes for " + type);
  } else if (listed) {
    if (static_cast<int64_t>(a.elements.size()) != n || (n > 0 && dims != a.type.shape))
      lex_.fail_at(start, "dense list of " + std::to_string(a.elements.size()) +
                              " elements does not match " + type);
  }
  for (const std::string& e : a.elements) {
    const bool fl = is_float_type(a.type.element);
    if (e[0] == '(') lex_.fail_at(start, "complex dense elements are not supported (" + type + ")");
    if ((e == "true" || e == "false") && a.type.element != "i1")
      lex_.fail_at(start, "dense element '" + e + "' for " + type);
    if (!fl && is_float_literal(e))
      lex_.fail_at(start, "floating-point dense element '" + e + "' for " + type);
  }
  return a;
}

Attribute Parser::parse_attribute(bool typed) {
  DepthGuard guard(*this);
  Attribute a;
  const char c = lex_.peek();
  const size_t start = lex_.pos();
  if (c == '"') {
    a.kind = Attribute::Kind::string;
    a.text = lex_.string_literal("as an attribute");
  } else if (c == '@') {
    a.kind = Attribute::Kind::symbol;
    a.text = lex_.symbol("as an attribute");
    while (lex_.consume("::")) a.text += "::@" + lex_.symbol("in a nested symbol");
  } else if (c == '[') {
    a.kind = Attribute::Kind::array;
    lex_.expect("[", "");
    if (!lex_.consume("]")) {
      do a.list.push_back(parse_attribute(true));
      while (lex_.consume(","));
      lex_.expect("]", "to close an array attribute");
    }
  } else if (c == '{') {
    a.kind = Attribute::Kind::dictionary;
    a.dict = parse_dictionary();
  } else if (c == '(') {
    a.kind = Attribute::Kind::type;
    Attribute ins = empty_array(), outs = empty_array();
    for (const TensorType& t : parse_type_list_in_parens("in a function type")) {
      Attribute ta;
      ta.kind = Attribute::Kind::type;
      ta.type = t;
      ta.text = to_string(t);
      ins.list.push_back(ta);
    }
    lex_.expect("->", "in a function type");
    std::vector<TensorType> results;
    if (lex_.peek() == '(')
      results = parse_type_list_in_parens("in a function type");
    else
      results.push_back(parse_tensor_type("in a function type"));
    for (const TensorType& t : results) {
      Attribute ta;
      ta.kind = Attribute::Kind::type;
      ta.type = t;
      ta.text = to_string(t);
      outs.list.push_back(ta);
    }
    a.list = {ins, outs};
    a.text = std::string(lex_.slice(start, lex_.pos()));
  } else if (c == '<') {
    a.kind = Attribute::Kind::other;
    a.text = lex_.balanced("in an attribute");
  } else if (c == '#') {
    lex_.consume("#");
    std::string name = lex_.ident("after '#'");
    if (lex_.peek() != '<') {
      auto it = aliases_.find(name);
      if (it == aliases_.end()) lex_.fail_at(start, "unknown attribute alias '#" + name + "'");
      return it->second;
    }
    const size_t open = lex_.pos();
    try {
      lex_.expect("<", "");
      if (name.find('.') == std::string::npos) {  // #stablehlo<comparison_direction GT>
        lex_.ident("in an enum attribute");
        a.kind = Attribute::Kind::enum_value;
        a.text = lex_.ident("in an enum attribute");
      } else {  // #stablehlo.gather<key = value, ...>
        a.kind = Attribute::Kind::structured;
        a.text = name;
        if (lex_.peek() != '>') {
          do {
            std::string key = lex_.ident("in a structured attribute");
            lex_.expect("=", "after '" + key + "'");
            a.dict.emplace_back(std::move(key), parse_attribute(true));
          } while (lex_.consume(","));
        }
      }
      lex_.expect(">", "");
      normalise_structured(a);
    } catch (const ParseError&) {  // some other syntax: keep it raw
      lex_.reset(open);
      a = Attribute();
      a.kind = Attribute::Kind::other;
      a.text = "#" + name + lex_.balanced("in attribute #" + name);
    }
  } else if (lex_.peek_number()) {
    std::string s = lex_.number("in an attribute");
    std::string suffix;
    if (typed && lex_.consume(":")) suffix = parse_element_type("after a number", true);
    const bool fl =
        is_float_literal(s) || (!suffix.empty() && is_float_type(suffix) && suffix != "index");
    if (fl) {
      a.kind = Attribute::Kind::floating;
      a.text = s;
      a.type.element = suffix.empty() ? "f64" : suffix;
      if (is_hex_literal(s) && (suffix == "f32" || suffix == "f64")) {
        lex_.reset(start);
        const uint64_t bits = static_cast<uint64_t>(parse_integer("in a float attribute"));
        lex_.consume(":");
        parse_element_type("after a number", true);
        if (suffix == "f32") {
          float v;
          const uint32_t b32 = static_cast<uint32_t>(bits);
          std::memcpy(&v, &b32, sizeof v);
          a.f = v;
        } else {
          std::memcpy(&a.f, &bits, sizeof a.f);
        }
      } else if (!is_hex_literal(s)) {
        a.f = std::strtod(s.c_str(), nullptr);
      }
    } else {
      const size_t after = lex_.pos();
      lex_.reset(start);
      a.kind = Attribute::Kind::integer;
      a.i = parse_integer("in an attribute");
      lex_.reset(after);
      a.type.element = suffix.empty() ? "i64" : suffix;
    }
  } else if (lex_.peek_ident()) {
    std::string word = lex_.ident("as an attribute");
    if (word == "true" || word == "false") {
      a.kind = Attribute::Kind::boolean;
      a.b = word == "true";
    } else if (word == "unit") {
      a.kind = Attribute::Kind::unit;
    } else if (word == "dense") {
      return parse_dense();
    } else if (word == "array") {
      lex_.expect("<", "after 'array'");
      a.kind = Attribute::Kind::array;
      a.type.element = parse_element_type("in array<...>", false);
      if (lex_.consume(":")) {
        do {
          Attribute e = parse_attribute(false);
          if (e.kind != Attribute::Kind::integer && e.kind != Attribute::Kind::floating &&
              e.kind != Attribute::Kind::boolean)
            lex_.fail("expected a number in array<" + a.type.element + ": ...>");
          if (e.kind != Attribute::Kind::boolean) e.type.element = a.type.element;
          a.list.push_back(std::move(e));
        } while (lex_.consume(","));
      }
      lex_.expect(">", "to close array<...>");
    } else if (word == "tensor") {
      lex_.reset(start);
      a.kind = Attribute::Kind::type;
      a.type = parse_tensor_type("as an attribute");
      a.text = to_string(a.type);
    } else if (word == "dense_resource" || word == "sparse" || word == "distinct") {
      lex_.fail_at(start, "unsupported attribute '" + word + "'");
    } else if (lex_.peek() == '<') {  // affine_map<...> and the like
      a.kind = Attribute::Kind::other;
      a.text = word + lex_.balanced("in attribute " + word);
    } else {
      a.kind = Attribute::Kind::enum_value;
      a.text = word;
    }
  } else {
    lex_.fail("expected an attribute value, got " + lex_.next_text());
  }
  return a;
}

}  // namespace drx::stablehlo
