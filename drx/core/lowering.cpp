#include "drx/core/lowering.h"

#include <algorithm>
#include <cmath>

#include "drx/array/error.h"

namespace drx {

std::string StableHloEmitter::emit1(const std::string& op, const std::vector<std::string>& operands,
                                    const MlirAttributes& attributes, const Type& t,
                                    const std::vector<MlirRegion>& regions) {
  return emit(op, operands, attributes, {t}, regions).at(0);
}

std::string StableHloEmitter::splat(double value, DType d, const Shape& shape) {
  const std::string scalar = constant(full({}, value, d));
  if (shape.empty()) return scalar;
  return emit1("stablehlo.broadcast_in_dim", {scalar}, {{"broadcast_dimensions", "array<i64>"}},
               Type(d, shape));
}

std::string mlir_element_type(DType d) {
  if (static_cast<size_t>(d) >= kNumDTypes)
    throw Error("stablehlo: no element type for dtype " + std::string(dtype_name(d)));
  return std::string(dtype_info(d).mlir_name);
}

std::string mlir_type(const Type& t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape) s += std::to_string(d) + "x";
  return s + mlir_element_type(t.dtype) + ">";
}

std::string mlir_i64_array(const std::vector<int64_t>& v) {
  if (v.empty()) return "array<i64>";
  std::string s = "array<i64: ";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ">";
}

std::string mlir_i64_dense(const std::vector<int64_t>& v) {
  std::string s = "dense<[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]> : tensor<" + std::to_string(v.size()) + "xi64>";
}

std::string mlir_comparison_direction(const std::string& dir) {
  return "#stablehlo<comparison_direction " + dir + ">";
}

std::string mlir_comparison_type(DType d) {
  const char* kind = is_floating(d)                        ? "FLOAT"
                     : is_unsigned(d) || d == DType::bool_ ? "UNSIGNED"
                                                           : "SIGNED";
  return std::string("#stablehlo<comparison_type ") + kind + ">";
}

std::string emit_compare(StableHloEmitter& em, const std::string& dir, const std::string& a,
                         const std::string& b, const Type& t) {
  return em.emit1("stablehlo.compare", {a, b},
                  {{"comparison_direction", mlir_comparison_direction(dir)},
                   {"compare_type", mlir_comparison_type(t.dtype)}},
                  Type(DType::bool_, t.shape));
}

std::string reduce_combiner(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::sum:
      return "stablehlo.add";
    case ReduceKind::max:
      return "stablehlo.maximum";
    case ReduceKind::min:
      break;
  }
  return "stablehlo.minimum";
}

std::string emit_reduce(StableHloEmitter& em, ReduceKind kind, const std::string& x, const Type& t,
                        const std::vector<int64_t>& dims) {
  // The identity: 0; -inf / +inf for floats; for integers a huge value that
  // full() saturates to the dtype's lowest / largest; false / true for bool.
  double identity = 0;
  if (kind != ReduceKind::sum) {
    const double sign = kind == ReduceKind::max ? -1.0 : 1.0;
    identity = t.dtype == DType::bool_ ? (sign > 0 ? 1.0 : 0.0)
               : is_floating(t.dtype)  ? sign * INFINITY
                                       : sign * 1e300;
  }
  const std::string init = em.constant(full({}, identity, t.dtype));
  Shape out;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
      out.push_back(t.shape[d]);
  const Type scalar(t.dtype, {});
  MlirRegion body{{scalar, scalar},
                  [kind, scalar](StableHloEmitter& b, const std::vector<std::string>& args) {
                    return std::vector<std::string>{
                        b.emit1(reduce_combiner(kind), {args[0], args[1]}, {}, scalar)};
                  }};
  return em.emit1("stablehlo.reduce", {x, init}, {{"dimensions", mlir_i64_array(dims)}},
                  Type(t.dtype, out), {body});
}

}  // namespace drx
