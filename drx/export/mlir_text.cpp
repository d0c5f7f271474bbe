#include "drx/export/mlir_text.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "drx/array/half.h"

namespace drx::mlir_text {
namespace {

std::string hex_bits(uint64_t bits, size_t bytes) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llX", static_cast<int>(2 * bytes),
                static_cast<unsigned long long>(bits));
  return buf;
}

// One element as MLIR reads it: floats in decimal with enough digits to read
// back exactly (non-finite ones as their bit pattern), integers in decimal.
std::string element(const Array& a, int64_t i) {
  const DType d = a.dtype();
  const size_t size = dtype_size(d);
  const auto* p = static_cast<const unsigned char*>(a.raw()) + static_cast<size_t>(i) * size;
  if (d == DType::bool_) return *p ? "true" : "false";
  if (is_floating(d)) {
    const double v = a.element_as_double(i);
    if (!std::isfinite(v)) {
      uint64_t bits = 0;
      std::memcpy(&bits, p, size);
      return hex_bits(bits, size);
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, d == DType::f64 ? "%.17g" : "%.9g", v);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  if (d == DType::u64) {
    uint64_t v = 0;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  if (d == DType::i64) {
    int64_t v = 0;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  return std::to_string(static_cast<long long>(a.element_as_double(i)));
}

bool is_splat(const Array& a) {
  const size_t size = dtype_size(a.dtype());
  const auto* p = static_cast<const unsigned char*>(a.raw());
  for (int64_t i = 1; i < a.size(); ++i)
    if (std::memcmp(p, p + static_cast<size_t>(i) * size, size) != 0) return false;
  return true;
}

void nested(const Array& a, size_t dim, int64_t& next, std::string& out) {
  out += "[";
  const int64_t n = a.shape()[dim];
  for (int64_t k = 0; k < n; ++k) {
    if (k) out += ", ";
    if (dim + 1 == a.shape().size())
      out += element(a, next++);
    else
      nested(a, dim + 1, next, out);
  }
  out += "]";
}

std::string types_list(const std::vector<Type>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + mlir_type(ts[i]);
  return s;
}

std::string names_list(const std::vector<std::string>& ns) {
  std::string s;
  for (size_t i = 0; i < ns.size(); ++i) s += (i ? ", " : "") + ns[i];
  return s;
}

// "%5 = " or "%5:2 = " (results %5#0, %5#1), or "" for none.
std::string results_prefix(const std::vector<std::string>& results) {
  if (results.empty()) return "";
  if (results.size() == 1) return results[0] + " = ";
  const std::string& first = results[0];
  return first.substr(0, first.find('#')) + ":" + std::to_string(results.size()) + " = ";
}

bool all_types_equal(const OpText& op) {
  if (op.result_types.size() != 1) return false;
  for (const Type& t : op.operand_types)
    if (mlir_type(t) != mlir_type(op.result_types[0])) return false;
  return true;
}

const std::string* find(const MlirAttributes& attrs, const std::string& name) {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

// "array<i64: 1, 2>" -> "[1, 2]"; "array<i64>" -> "[]".
std::string bracketed(const std::string& array) {
  const size_t colon = array.find(':');
  if (colon == std::string::npos) return "[]";
  return "[" + array.substr(colon + 2, array.size() - colon - 3) + "]";
}

// "#stablehlo<comparison_direction LT>" -> "LT".
std::string enum_word(const std::string& e) {
  const size_t space = e.rfind(' ');
  return e.substr(space + 1, e.size() - space - 2);
}

// "[2]" after "name = " in a #stablehlo.dot<...> text.
std::string dot_list(const std::string& dot, const std::string& name) {
  const size_t at = dot.find(name + " = [");
  if (at == std::string::npos) return "[]";
  const size_t open = at + name.size() + 3;
  return dot.substr(open, dot.find(']', open) - open + 1);
}

// The pretty form of ops whose custom syntax JAX prints (as the StableHLO
// dialect's printer writes it), or "" to fall back to the generic form.
std::string pretty_body(const OpText& op) {
  const std::string sig = " : " + function_type(op.operand_types, op.result_types);
  const std::string& x = op.operands.empty() ? std::string() : op.operands[0];
  const size_t nattrs = op.attributes.size();
  auto attr = [&](const char* name) { return find(op.attributes, name); };
  if ((op.op == "stablehlo.reshape" || op.op == "stablehlo.convert" ||
       op.op == "stablehlo.bitcast_convert") &&
      nattrs == 0 && op.operands.size() == 1)
    return op.op + " " + x + sig;
  if (op.op == "stablehlo.broadcast_in_dim" && nattrs == 1 && attr("broadcast_dimensions"))
    return op.op + " " + x + ", dims = " + bracketed(*attr("broadcast_dimensions")) + sig;
  if (op.op == "stablehlo.transpose" && nattrs == 1 && attr("permutation"))
    return op.op + " " + x + ", dims = " + bracketed(*attr("permutation")) + sig;
  if (op.op == "stablehlo.iota" && nattrs == 1 && attr("iota_dimension")) {
    const std::string& d = *attr("iota_dimension");
    return op.op + " dim = " + d.substr(0, d.find(' ')) + " : " + mlir_type(op.result_types[0]);
  }
  if (op.op == "stablehlo.compare" && nattrs == 2 && attr("comparison_direction") &&
      attr("compare_type"))
    return op.op + "  " + enum_word(*attr("comparison_direction")) + ", " + x + ", " +
           op.operands[1] + ",  " + enum_word(*attr("compare_type")) + sig;
  if (op.op == "stablehlo.concatenate" && nattrs == 1 && attr("dimension")) {
    std::string s = op.op + " ";
    for (size_t i = 0; i < op.operands.size(); ++i) s += (i ? ", " : "") + op.operands[i];
    const std::string& d = *attr("dimension");
    return s + ", dim = " + d.substr(0, d.find(' ')) + sig;
  }
  if (op.op == "stablehlo.dot_general" && nattrs == 1 && attr("dot_dimension_numbers")) {
    const std::string& d = *attr("dot_dimension_numbers");
    std::string s = op.op + " " + x + ", " + op.operands[1];
    const std::string lb = dot_list(d, "lhs_batching_dimensions");
    if (lb != "[]") s += ", batching_dims = " + lb + " x " + dot_list(d, "rhs_batching_dimensions");
    return s + ", contracting_dims = " + dot_list(d, "lhs_contracting_dimensions") + " x " +
           dot_list(d, "rhs_contracting_dimensions") + sig;
  }
  if (op.op == "sdy.sharding_constraint" && nattrs == 1 && attr("sharding")) {
    const std::string& sh = *attr("sharding");  // #sdy.sharding<@mesh, [...]>
    return op.op + " " + x + " " + sh.substr(sh.find('<')) + " : " + mlir_type(op.result_types[0]);
  }
  return "";
}

}  // namespace

std::string dense(const Array& a) {
  if (a.size() == 0) return "dense<>";
  if (is_splat(a)) return "dense<" + element(a, 0) + ">";
  if (a.dtype() != DType::bool_ && a.size() > 16) {
    static const char* kHex = "0123456789ABCDEF";
    std::string s = "dense<\"0x";
    const auto* p = static_cast<const unsigned char*>(a.raw());
    for (size_t i = 0; i < a.nbytes(); ++i) {
      s += kHex[p[i] >> 4];
      s += kHex[p[i] & 15];
    }
    return s + "\">";
  }
  if (a.shape().empty()) return "dense<" + element(a, 0) + ">";
  std::string s = "dense<";
  int64_t next = 0;
  nested(a, 0, next, s);
  return s + ">";
}

std::string function_type(const std::vector<Type>& ins, const std::vector<Type>& outs) {
  std::string s = "(" + types_list(ins) + ") -> ";
  if (outs.size() == 1) return s + mlir_type(outs[0]);
  return s + "(" + types_list(outs) + ")";
}

std::string attribute_dict(const MlirAttributes& attributes) {
  std::string s = "{";
  for (size_t i = 0; i < attributes.size(); ++i)
    s += (i ? ", " : "") + attributes[i].first + " = " + attributes[i].second;
  return s + "}";
}

std::string op_line(const OpText& op, bool generic) {
  const std::string head = results_prefix(op.results);
  if (!generic && op.regions.empty()) {
    if (op.op == "stablehlo.constant" && op.attributes.size() == 1 &&
        op.attributes[0].first == "value") {
      const std::string& v = op.attributes[0].second;
      return head + "stablehlo.constant " + v.substr(0, v.rfind(" : ")) + " : " +
             mlir_type(op.result_types[0]);
    }
    // An elementwise op of one type prints as JAX prints it.
    if (op.attributes.empty() && !op.operands.empty() && all_types_equal(op))
      return head + op.op + " " + names_list(op.operands) + " : " + mlir_type(op.result_types[0]);
    if (std::string body = pretty_body(op); !body.empty()) return head + body;
  }
  std::string s = head + "\"" + op.op + "\"(" + names_list(op.operands) + ")";
  if (!op.regions.empty()) {
    s += " (";
    for (size_t i = 0; i < op.regions.size(); ++i) s += (i ? ", " : "") + op.regions[i];
    s += ")";
  }
  if (!op.attributes.empty()) s += " " + attribute_dict(op.attributes);
  return s + " : " + function_type(op.operand_types, op.result_types);
}

}  // namespace drx::mlir_text
