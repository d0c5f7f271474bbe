#pragma once
// Private to drx/exec: the convolution kernels' shared description of a convolution, and which
// kernel runs one (kernels_conv.cpp: drx's im2col + gemm; kernels_conv_onednn.cpp: oneDNN's
// convolutions).
#include <optional>
#include <string>

#include "drx/exec/plan.h"
#include "drx/ops/convolution.h"

namespace drx::exec {

struct ConvGeometry {
  ConvParams c;
  Shape lhs, rhs, out;
  DType operands = DType::f32, result = DType::f32;
  int64_t groups = 1, out_batch = 1, in_features = 1, out_features_per_group = 1;
  int64_t positions = 1, window = 1;  // output spatial positions, window elements

  ConvGeometry(ConvParams params, const Type& lhs, const Type& rhs, const Type& out);
};

// The kernel of a convolution on oneDNN, or nullopt where oneDNN is absent, lacks a native
// kernel, or cannot express it (lhs dilation, batch groups, negative padding, f64, ...).
std::optional<KernelSpec> onednn_conv_kernel(const ConvGeometry& g, int lhs, int rhs, int out);
// The route of onednn_conv_kernel ("oneDNN forward brgconv:avx512_core"), or nullopt.
std::optional<std::string> onednn_conv_route(const ConvGeometry& g);

// Which kernel the cpu backend gives a convolution: "oneDNN forward <kernel>", "oneDNN weight
// gradient <kernel>" (oneDNN's names), "im2col" (drx's products) or "reference".
std::string conv_kernel_route(const ConvParams& c, const Type& lhs, const Type& rhs,
                              const Type& out);

}  // namespace drx::exec
