// stablehlo.convolution as drx's conv_general_dilated: the window attributes (absent ones at
// their defaults), the dimension numbers in either of their spellings
// (#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]> or
// #stablehlo.conv<raw input_batch_dimension = 0, ...>), the groups, and a result element type
// wider than the operands' as the primitive's preferred_element_type.
#include <cctype>
#include <charconv>
#include <map>

#include "drx/array/error.h"
#include "drx/ops/convolution.h"
#include "drx/ops/ops.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

// One bracketed list "[b, 0, 1, f]": the dim holding each of the two letters and each spatial
// index.
void read_layout(const Operation& op, const std::string& list, char first, char second, int64_t& a,
                 int64_t& b, std::vector<int64_t>& spatial) {
  if (list.size() < 2 || list.front() != '[' || list.back() != ']')
    fail(op, "dimension_numbers: expected a bracketed list, got '" + list + "'");
  std::vector<std::string> items;
  std::string cur;
  for (char ch : list.substr(1, list.size() - 2)) {
    if (ch == ',') {
      items.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(ch))) {
      cur += ch;
    }
  }
  if (!cur.empty() || !items.empty()) items.push_back(cur);
  a = b = -1;
  spatial.assign(items.size() >= 2 ? items.size() - 2 : 0, -1);
  for (size_t d = 0; d < items.size(); ++d) {
    const std::string& it = items[d];
    const auto dim = static_cast<int64_t>(d);
    if (it.size() == 1 && it[0] == first) {
      a = dim;
    } else if (it.size() == 1 && it[0] == second) {
      b = dim;
    } else {
      int64_t k = -1;
      auto [end, ec] = std::from_chars(it.data(), it.data() + it.size(), k);
      if (ec != std::errc() || end != it.data() + it.size() || k < 0 ||
          k >= static_cast<int64_t>(spatial.size()) || spatial[static_cast<size_t>(k)] >= 0)
        fail(op, "dimension_numbers: '" + it + "' in " + list + " is not '" + first + "', '" +
                     second + "' or a spatial index named once");
      spatial[static_cast<size_t>(k)] = dim;
    }
  }
  if (a < 0 || b < 0)
    fail(op, "dimension_numbers: " + list + " must name '" + first + "' and '" + second + "'");
  for (int64_t s : spatial)
    if (s < 0) fail(op, "dimension_numbers: " + list + " lacks a spatial index");
}

// `raw key = value, ...`: the spec's field names.
ConvDimensionNumbers read_raw(const Operation& op, const std::string& body) {
  ConvDimensionNumbers d;
  std::map<std::string, std::vector<int64_t>> fields;
  size_t pos = body.find("raw") + 3;
  while (pos < body.size()) {
    const size_t eq = body.find('=', pos);
    if (eq == std::string::npos) break;
    std::string key = body.substr(pos, eq - pos);
    key.erase(0, key.find_first_not_of(" \t\n,"));
    key.erase(key.find_last_not_of(" \t\n") + 1);
    size_t end = eq + 1;
    while (end < body.size() && std::isspace(static_cast<unsigned char>(body[end]))) ++end;
    size_t stop = body[end] == '[' ? body.find(']', end) + 1 : body.find(',', end);
    if (stop == std::string::npos || stop == 0) stop = body.size();
    std::vector<int64_t> v;
    std::string num;
    for (size_t i = end; i <= stop && i <= body.size(); ++i) {
      const char ch = i < body.size() ? body[i] : ',';
      if (std::isdigit(static_cast<unsigned char>(ch))) {
        num += ch;
      } else if (!num.empty()) {
        v.push_back(std::stoll(num));
        num.clear();
      }
    }
    fields[key] = v;
    pos = stop;
  }
  auto one = [&](const char* k) {
    auto it = fields.find(k);
    if (it == fields.end() || it->second.size() != 1)
      fail(op, std::string("dimension_numbers: raw form lacks ") + k);
    return it->second[0];
  };
  auto list = [&](const char* k) {
    auto it = fields.find(k);
    return it == fields.end() ? std::vector<int64_t>{} : it->second;
  };
  d.lhs_batch = one("input_batch_dimension");
  d.lhs_feature = one("input_feature_dimension");
  d.lhs_spatial = list("input_spatial_dimensions");
  d.rhs_in_feature = one("kernel_input_feature_dimension");
  d.rhs_out_feature = one("kernel_output_feature_dimension");
  d.rhs_spatial = list("kernel_spatial_dimensions");
  d.out_batch = one("output_batch_dimension");
  d.out_feature = one("output_feature_dimension");
  d.out_spatial = list("output_spatial_dimensions");
  return d;
}

ConvDimensionNumbers dimension_numbers(const Operation& op) {
  const Attribute& a = required(op, "dimension_numbers");
  std::string text = a.text;
  const std::string prefix = "#stablehlo.conv<";
  if (text.rfind(prefix, 0) != 0 || text.back() != '>')
    fail(op, "dimension_numbers: expected #stablehlo.conv<...>, got '" + text + "'");
  const std::string body = text.substr(prefix.size(), text.size() - prefix.size() - 1);
  if (body.find("raw") != std::string::npos) return read_raw(op, body);
  const size_t x = body.find("]x["), arrow = body.find("->");
  if (x == std::string::npos || arrow == std::string::npos || arrow < x)
    fail(op, "dimension_numbers: expected [...]x[...]->[...], got '" + body + "'");
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t\n"));
    s.erase(s.find_last_not_of(" \t\n") + 1);
    return s;
  };
  ConvDimensionNumbers d;
  read_layout(op, trim(body.substr(0, x + 1)), 'b', 'f', d.lhs_batch, d.lhs_feature, d.lhs_spatial);
  read_layout(op, trim(body.substr(x + 2, arrow - x - 2)), 'o', 'i', d.rhs_out_feature,
              d.rhs_in_feature, d.rhs_spatial);
  read_layout(op, trim(body.substr(arrow + 2)), 'b', 'f', d.out_batch, d.out_feature,
              d.out_spatial);
  return d;
}

int64_t integer(const Operation& op, const std::string& e) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
  if (ec != std::errc() || end != e.data() + e.size())
    fail(op, "expected an integer, got '" + e + "'");
  return v;
}

// An optional list attribute: integers (or booleans, for window_reversal), else `fallback`.
std::vector<int64_t> list_or(const Operation& op, const char* name,
                             const std::vector<int64_t>& fallback) {
  const Attribute* a = find_attribute(op.attributes, name);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::array) {
    std::vector<int64_t> out;
    for (const Attribute& e : a->list) {
      if (e.kind == Attribute::Kind::boolean)
        out.push_back(e.b ? 1 : 0);
      else if (e.kind == Attribute::Kind::integer)
        out.push_back(e.i);
      else
        fail(op, std::string(name) + " must hold integers or booleans");
    }
    return out;
  }
  if (a->kind == Attribute::Kind::dense) {
    std::vector<int64_t> out;
    for (const std::string& e : a->elements)
      out.push_back(e == "true" ? 1 : e == "false" ? 0 : integer(op, e));
    if (a->splat && !out.empty())
      out.assign(static_cast<size_t>(num_elements(a->type.shape)), out[0]);
    return out;
  }
  return int_list(op, name);
}

DType result_dtype(const Operation& op) {
  if (op.result_types.empty()) fail(op, "has no result type");
  return element_dtype(op.result_types[0].element, op.line);
}

}  // namespace

Values convolution_op(const Operation& op, const Values& in) {
  if (in.size() != 2) fail(op, "takes lhs and rhs, got " + std::to_string(in.size()) + " operands");
  ConvParams c;
  c.dims = dimension_numbers(op);
  const size_t S = c.dims.lhs_spatial.size();
  const std::vector<int64_t> ones(S, 1), zeros(S, 0);
  c.window_strides = list_or(op, "window_strides", ones);
  c.lhs_dilation = list_or(op, "lhs_dilation", ones);
  c.rhs_dilation = list_or(op, "rhs_dilation", ones);
  c.window_reversal = list_or(op, "window_reversal", zeros);
  const std::vector<int64_t> pad = list_or(op, "padding", std::vector<int64_t>(2 * S, 0));
  if (pad.size() != 2 * S)
    fail(op, "padding must hold a (low, high) pair per spatial dim (" + std::to_string(S) + ")");
  for (size_t k = 0; k < S; ++k) c.padding.emplace_back(pad[2 * k], pad[2 * k + 1]);
  if (find_attribute(op.attributes, "feature_group_count"))
    c.feature_group_count = int_value(op, "feature_group_count");
  if (find_attribute(op.attributes, "batch_group_count"))
    c.batch_group_count = int_value(op, "batch_group_count");
  Value l = in[0], r = in[1];
  if (l.dtype() != r.dtype()) fail(op, "lhs and rhs of different element types are not supported");
  const DType out = result_dtype(op);
  const DType operands = l.dtype();
  const bool wider =
      out != operands &&
      ((is_floating(out) && is_floating(operands) && dtype_size(out) >= dtype_size(operands)) ||
       (is_integer(out) && is_integer(operands) && is_unsigned(out) == is_unsigned(operands) &&
        dtype_size(out) >= dtype_size(operands)));
  if (wider) c.preferred_element_type = out;
  Value y = conv_general_dilated(l, r, c);
  return {y.dtype() == out ? y : astype(y, out)};
}

}  // namespace drx::stablehlo::detail
