// The region-free StableHLO ops, each as drx ops with the spec's semantics.
#include <cctype>
#include <map>

#include "drx/array/error.h"
#include "drx/array/half.h"
#include "drx/ops/ops.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

using Unary = Value (*)(const Value&);
using Binary = Value (*)(const Value&, const Value&);

Shape result_shape(const Operation& op) {
  if (op.result_types.empty()) fail(op, "has no result type");
  return op.result_types[0].shape;
}
DType result_dtype(const Operation& op) {
  if (op.result_types.empty()) fail(op, "has no result type");
  return element_dtype(op.result_types[0].element, op.line);
}

void arity(const Operation& op, const Values& in, size_t n) {
  if (in.size() != n)
    fail(op, "takes " + std::to_string(n) + " operands, got " + std::to_string(in.size()));
}

Lowering unary(Unary f) {
  return [f](const Operation& op, const Values& in) -> Values {
    arity(op, in, 1);
    return {f(in[0])};
  };
}
Lowering binary(Binary f) {
  return [f](const Operation& op, const Values& in) -> Values {
    arity(op, in, 2);
    return {f(in[0], in[1])};
  };
}

Value logical_not(const Value& x) { return bitwise_not(x); }

// i1 as StableHLO orders it (false < true): through i32 where drx's ops take numbers.
bool boolean(const Value& v) { return v.dtype() == DType::bool_; }
Value bool_maximum(const Value& a, const Value& b) {
  return boolean(a) ? bitwise_or(a, b) : maximum(a, b);
}
Value bool_minimum(const Value& a, const Value& b) {
  return boolean(a) ? bitwise_and(a, b) : minimum(a, b);
}

Values compare(const Operation& op, const Values& in) {
  arity(op, in, 2);
  const std::string dir = required(op, "comparison_direction").text;
  const Attribute* type = find_attribute(op.attributes, "compare_type");
  Value a = in[0], b = in[1];
  if (boolean(a)) a = astype(a, DType::i32), b = astype(b, DType::i32);
  // UNSIGNED on a signed type compares the bit patterns as unsigned.
  if (type && type->text == "UNSIGNED" && a.dtype() == DType::i32)
    a = bitcast_convert(a, DType::u32), b = bitcast_convert(b, DType::u32);
  // TOTALORDER on floats orders NaNs and signed zeros too: compare the keys.
  if (type && type->text == "TOTALORDER" && is_floating(a.dtype()))
    a = total_order_key(a), b = total_order_key(b);
  if (dir == "EQ") return {equal(a, b)};
  if (dir == "NE") return {not_equal(a, b)};
  if (dir == "LT") return {less(a, b)};
  if (dir == "LE") return {less_equal(a, b)};
  if (dir == "GT") return {greater(a, b)};
  if (dir == "GE") return {greater_equal(a, b)};
  fail(op, "unknown comparison direction '" + dir + "'");
}

}  // namespace

Value total_order_key(const Value& x) {
  DType bits;
  switch (dtype_size(x.dtype())) {
    case 2:
      bits = DType::i16;
      break;
    case 4:
      bits = DType::i32;
      break;
    default:
      bits = DType::i64;
  }
  // Negative floats order opposite to their bit patterns' magnitudes: flip
  // every bit but the sign there.
  const Value b = bitcast_convert(x, bits);
  const Value largest = constant(full({}, 1e300, bits));  // saturates to the dtype's largest
  return where(less(b, scalar_like(b, 0.0)), bitwise_xor(b, largest), b);
}

namespace {

Values constant_op(const Operation& op, const Values& in) {
  arity(op, in, 0);
  const Attribute& value = required(op, "value");
  if (op.result_types.size() != 1) fail(op, "must declare one result type");
  if (!value.type.element.empty() && value.type != op.result_types[0])
    fail(op, "declares result " + to_string(op.result_types[0]) + ", but its value is " +
                 to_string(value.type) + " (spec C1: the result has the value's type)");
  return {constant(dense_array(value, op.result_types[0], op.line))};
}

Values convert_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  return {astype(in[0], result_dtype(op))};
}

Values bitcast_convert_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  if (op.result_types.at(0).shape != in[0].shape())
    fail(op, "changes the shape (only same-width bit casts are supported)");
  return {bitcast_convert(in[0], result_dtype(op))};
}

Values clamp_op(const Operation& op, const Values& in) {
  arity(op, in, 3);
  // min(max(operand, min), max); min and max may be scalars.
  const Shape s = in[1].shape();
  Value lo = in[0].shape() == s ? in[0] : broadcast_to(in[0], s);
  Value hi = in[2].shape() == s ? in[2] : broadcast_to(in[2], s);
  return {minimum(maximum(in[1], lo), hi)};
}

Values select_op(const Operation& op, const Values& in) {
  arity(op, in, 3);
  return {where(in[0], in[1], in[2])};
}

Values broadcast_in_dim_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  return {broadcast_in_dim(in[0], result_shape(op), int_list(op, "broadcast_dimensions"))};
}

Values reshape_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  return {reshape(in[0], result_shape(op))};
}

Values transpose_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  return {transpose(in[0], int_list(op, "permutation"))};
}

Values slice_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  const auto start = int_list(op, "start_indices"), limit = int_list(op, "limit_indices");
  std::vector<int64_t> strides = find_attribute(op.attributes, "strides")
                                     ? int_list(op, "strides")
                                     : std::vector<int64_t>(start.size(), 1);
  Value x = slice(in[0], start, limit);
  // Strides: every k-th element along the axis, by a take of those positions.
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 1) continue;
    if (strides[d] < 1) fail(op, "stride " + std::to_string(strides[d]) + " must be >= 1");
    const int64_t n = (limit[d] - start[d] + strides[d] - 1) / strides[d];
    Value idx = iota({n}, 0, DType::i64) * static_cast<double>(strides[d]);
    x = take(x, idx, static_cast<int64_t>(d));
  }
  return {x};
}

Values dynamic_slice_op(const Operation& op, const Values& in) {
  if (in.empty()) fail(op, "needs an operand");
  return {dynamic_slice(in[0], Values(in.begin() + 1, in.end()), int_list(op, "slice_sizes"))};
}

Values dynamic_update_slice_op(const Operation& op, const Values& in) {
  if (in.size() < 2) fail(op, "needs an operand and an update");
  return {dynamic_update_slice(in[0], in[1], Values(in.begin() + 2, in.end()))};
}

Values concatenate_op(const Operation& op, const Values& in) {
  if (in.empty()) fail(op, "needs operands");
  return {concatenate(in, int_value(op, "dimension"))};
}

Values reverse_op(const Operation& op, const Values& in) {
  arity(op, in, 1);
  return {reverse(in[0], int_list(op, "dimensions"))};
}

Values pad_op(const Operation& op, const Values& in) {
  arity(op, in, 2);
  return {pad(in[0], in[1], int_list(op, "edge_padding_low"), int_list(op, "edge_padding_high"),
              int_list(op, "interior_padding"))};
}

Values iota_op(const Operation& op, const Values& in) {
  arity(op, in, 0);
  return {iota(result_shape(op), int_value(op, "iota_dimension"), result_dtype(op))};
}

std::vector<int64_t> dims_of(const Attribute& numbers, const char* key, const Operation& op) {
  for (const auto& [k, v] : numbers.dict)
    if (k == key) {
      std::vector<int64_t> out;
      for (const Attribute& e : v.list) out.push_back(e.i);
      return out;
    }
  fail(op, std::string("dot_dimension_numbers lacks ") + key);
}

// The operand type a dot_algorithm computes in, for the algorithms drx runs: the result's own
// type throughout (f32 x f32 -> f32, ...), and bf16 operands accumulated in f32.
DType dot_algorithm_operands(const Attribute& algorithm, DType out, const Operation& op) {
  // Generic form: #stablehlo.dot_algorithm<key = value, ...>, parsed; pretty form:
  // <key = value, ...>, kept raw.
  auto field = [&](const std::string& key) -> std::string {
    for (const auto& [k, v] : algorithm.dict)
      if (k == key) return v.text;
    const std::string& raw = algorithm.text;
    for (size_t at = raw.find(key); at != std::string::npos; at = raw.find(key, at + 1)) {
      if (at > 0 && (std::isalnum(static_cast<unsigned char>(raw[at - 1])) || raw[at - 1] == '_'))
        continue;
      size_t i = raw.find_first_not_of(' ', at + key.size());
      if (i == std::string::npos || raw[i] != '=') continue;
      i = raw.find_first_not_of(' ', i + 1);
      const size_t end = raw.find_first_of(" ,>", i);
      return raw.substr(i, end == std::string::npos ? std::string::npos : end - i);
    }
    fail(op, "algorithm lacks " + key);
  };
  const std::string lhs = field("lhs_precision_type"), rhs = field("rhs_precision_type"),
                    acc = field("accumulation_type");
  const std::string own(dtype_info(out).mlir_name);
  if (lhs == "bf16" && rhs == "bf16" && acc == "f32" && (out == DType::f32 || out == DType::bf16))
    return DType::bf16;
  // tf32 (GPUs' reduced f32), f32 and f64 products run at the result type's own precision, as
  // the StableHLO interpreter runs them: no less precise than asked.
  auto at_least_own = [&](const std::string& t) {
    return t == own || t == "tf32" || t == "f32" || t == "f64";
  };
  if (at_least_own(lhs) && at_least_own(rhs) && at_least_own(acc)) return out;
  fail(op, "algorithm with " + lhs + " x " + rhs + " operands and " + acc + " accumulation into " +
               own +
               " is not supported (expected bf16 x bf16 with f32 accumulation, or tf32, f32, f64 "
               "or the result's own type throughout)");
}

Values dot_general_op(const Operation& op, const Values& in) {
  arity(op, in, 2);
  const Attribute& n = required(op, "dot_dimension_numbers");
  DotDims dims;
  dims.lhs_batch = dims_of(n, "lhs_batching_dimensions", op);
  dims.rhs_batch = dims_of(n, "rhs_batching_dimensions", op);
  dims.lhs_contracting = dims_of(n, "lhs_contracting_dimensions", op);
  dims.rhs_contracting = dims_of(n, "rhs_contracting_dimensions", op);
  Value a = in[0], b = in[1];
  const DType out = result_dtype(op);
  // JAX's bf16 products with f32 accumulation: an algorithm of bf16 operands and
  // f32 accumulation (whatever the operands' type), or bf16 operands with an f32 result.
  DType operands = out;
  if (const Attribute* algorithm = find_attribute(op.attributes, "algorithm")) {
    operands = dot_algorithm_operands(*algorithm, out, op);
  } else if (a.dtype() == b.dtype() && is_half(a.dtype()) && out == DType::f32) {
    operands = a.dtype();
  }
  if (a.dtype() != operands) a = astype(a, operands);
  if (b.dtype() != operands) b = astype(b, operands);
  if (operands != out && out == DType::f32) dims.preferred_element_type = out;
  Value y = dot_general(a, b, dims);
  return {y.dtype() == out ? y : astype(y, out)};
}

const std::map<std::string, Lowering>& table() {
  static const std::map<std::string, Lowering> t = {
      {"stablehlo.constant", constant_op},
      {"stablehlo.add", binary(add)},
      {"stablehlo.subtract", binary(sub)},
      {"stablehlo.multiply", binary(mul)},
      {"stablehlo.divide", binary(div)},
      {"stablehlo.remainder", binary(remainder)},
      {"stablehlo.power", binary(pow)},
      {"stablehlo.maximum", binary(bool_maximum)},
      {"stablehlo.minimum", binary(bool_minimum)},
      {"stablehlo.atan2", binary(atan2)},
      {"stablehlo.and", binary(bitwise_and)},
      {"stablehlo.or", binary(bitwise_or)},
      {"stablehlo.xor", binary(bitwise_xor)},
      {"stablehlo.shift_left", binary(shift_left)},
      {"stablehlo.shift_right_logical", binary(shift_right_logical)},
      {"stablehlo.shift_right_arithmetic", binary(shift_right_arithmetic)},
      {"stablehlo.not", unary(logical_not)},
      {"stablehlo.negate", unary(neg)},
      {"stablehlo.abs", unary(abs)},
      {"stablehlo.sign", unary(sign)},
      {"stablehlo.exponential", unary(exp)},
      {"stablehlo.exponential_minus_one", unary(expm1)},
      {"stablehlo.log", unary(log)},
      {"stablehlo.log_plus_one", unary(log1p)},
      {"stablehlo.sqrt", unary(sqrt)},
      {"stablehlo.rsqrt", unary(rsqrt)},
      {"stablehlo.cbrt", unary(cbrt)},
      {"stablehlo.tanh", unary(tanh)},
      {"stablehlo.logistic", unary(logistic)},
      {"stablehlo.sine", unary(sin)},
      {"stablehlo.cosine", unary(cos)},
      {"stablehlo.floor", unary(floor)},
      {"stablehlo.ceil", unary(ceil)},
      {"stablehlo.round_nearest_even", unary(round)},
      {"stablehlo.round_nearest_afz", unary(round_away)},
      {"stablehlo.is_finite", unary(is_finite)},
      {"stablehlo.compare", compare},
      {"stablehlo.select", select_op},
      {"stablehlo.clamp", clamp_op},
      {"stablehlo.convert", convert_op},
      {"stablehlo.bitcast_convert", bitcast_convert_op},
      {"stablehlo.broadcast_in_dim", broadcast_in_dim_op},
      {"stablehlo.reshape", reshape_op},
      {"stablehlo.transpose", transpose_op},
      {"stablehlo.slice", slice_op},
      {"stablehlo.dynamic_slice", dynamic_slice_op},
      {"stablehlo.dynamic_update_slice", dynamic_update_slice_op},
      {"stablehlo.concatenate", concatenate_op},
      {"stablehlo.reverse", reverse_op},
      {"stablehlo.pad", pad_op},
      {"stablehlo.iota", iota_op},
      {"stablehlo.dot_general", dot_general_op},
      {"stablehlo.convolution", convolution_op},  // import_conv.cpp
  };
  return t;
}

}  // namespace

const Lowering* find_lowering(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace drx::stablehlo::detail
