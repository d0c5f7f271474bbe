#pragma once
// Private to drx/exec: the table from primitive object to fast-kernel factory.
// A factory returns nullopt for cases it does not cover (a dtype, a layout),
// and the equation then runs on Primitive::eval.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/exec/plan.h"

namespace drx::exec {

using KernelFactory = std::optional<KernelSpec> (*)(const Eqn& e, const CompileContext& cx);
using KernelTable = std::unordered_map<const Primitive*, KernelFactory>;

void add_elementwise_kernels(KernelTable& t);
void add_dot_kernels(KernelTable& t);
void add_shape_kernels(KernelTable& t);
void add_mapreduce_kernels(KernelTable& t);
void add_index_kernels(KernelTable& t);
void add_axis_kernels(KernelTable& t);  // argmax, argmin, cumsum
void add_control_flow_kernels(KernelTable& t);
void add_loop_kernels(KernelTable& t);    // scan, while_loop
void add_conv_kernels(KernelTable& t);    // conv_general_dilated (kernels_conv.cpp)
void add_window_kernels(KernelTable& t);  // reduce_window, select_and_scatter_add

// Kernels derived from what a primitive states about itself: its scalar
// function (elementwise) or its reduction.
std::optional<KernelSpec> elementwise_kernel(const Eqn& e, const CompileContext& cx);
std::optional<KernelSpec> reduction_kernel(const Eqn& e, const CompileContext& cx);

// bf16 equations: dot_general with bf16 operands and a bf16 or f32 result
// (kernels_dot_bf16.cpp); arithmetic computed in f32 and rounded to bf16 (a fused
// kernel of one equation, fusion.cpp); conversions between bf16 and f32 or f64.
std::optional<KernelSpec> bf16_dot_general(const Eqn& e, const CompileContext& cx);
std::optional<KernelSpec> bf16_elementwise(const Eqn& e, const CompileContext& cx);
// out = product + w (or that sum rounded to a bf16 out), where product is a bf16 product with
// an f32 result and w a bias row (bias_row): one product per row block adding the bias in f32
// as it writes.
std::optional<KernelSpec> bf16_biased_dot(int product, int w, int out, const CompileContext& cx);
// transpose(dot, [1, 0]) of a 2-D bf16 product read by nothing else, as one product.
std::optional<KernelSpec> bf16_transposed_dot(const Eqn& transpose, const CompileContext& cx);
std::optional<KernelSpec> bf16_convert(const Eqn& e, const CompileContext& cx);

// A transpose of a matrix product, as one gemm that writes the transposed
// product (the product's own equation is then unused and dropped).
std::optional<KernelSpec> transposed_dot(const Eqn& transpose, const CompileContext& cx);
// add/sub of a (scaled) matrix product to w, as one gemm accumulating into w.
std::optional<KernelSpec> accumulated_dot(const Eqn& e, const CompileContext& cx, bool subtract);

// out[i] = in[offset + sum_d idx_d(i) * stride_d] over `shape` (in elements).
struct Layout {
  Shape shape;
  std::vector<int64_t> stride;
  int64_t offset = 0;
};
// The same layout with size-1 dims dropped and contiguous neighbours merged.
Layout merged(const Shape& shape, const std::vector<int64_t>& stride, int64_t offset);
// The layout in which `e` reads its operand if it is a broadcast_in_dim or a
// broadcast over a placement; nullopt otherwise.
std::optional<Layout> broadcast_layout(const Eqn& e, const CompileContext& cx);

// Primitives with sub-programs (scan, while_loop, cond, map_fn) and
// dot_general read their parameters through their typed views
// (ScanParams::of, ...), which throw for a missing key instead of returning
// "absent" as these do.

// The integer parameter `key`, or nullopt when absent or of another kind.
inline std::optional<int64_t> param_int(const Eqn& e, const char* key) {
  if (!e.params.has(key)) return std::nullopt;
  const auto* v = std::get_if<int64_t>(&e.params.at(key, e.prim->name()));
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}
// The floating-point parameter `key`, or nullopt when absent or of another kind.
inline std::optional<double> param_double(const Eqn& e, const char* key) {
  if (!e.params.has(key)) return std::nullopt;
  const auto* v = std::get_if<double>(&e.params.at(key, e.prim->name()));
  return v ? std::optional<double>(*v) : std::nullopt;
}
// The integer-list parameter `key`, or nullptr when absent or of another kind.
inline const std::vector<int64_t>* param_ints(const Eqn& e, const char* key) {
  if (!e.params.has(key)) return nullptr;
  return std::get_if<std::vector<int64_t>>(&e.params.at(key, e.prim->name()));
}

template <class K, class... A>
std::optional<KernelSpec> spec(Alias alias, A&&... args) {
  return KernelSpec{std::make_unique<K>(std::forward<A>(args)...), alias, std::nullopt};
}

}  // namespace drx::exec
