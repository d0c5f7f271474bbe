#pragma once
// The floating-point operations of a program's matrix products and convolutions, counted
// exactly from its dot_general equations, 2 x (result elements) x (contracted elements) each,
// and its conv_general_dilated equations, 2 x (result elements) x (the kernel's input-feature
// dim) x (the kernel's window elements) each (right for feature and batch groups alike; padding
// and the holes of dilations count as products), times the trip count of the scans and the
// clients of the map_fns they sit in (a cond counts its costliest branch, a while_loop's body
// once). A convolution's gradients are convolutions too, and count the same way.
#include <cstdint>

#include "drx/ir/program.h"

namespace drx::tool::lm {

double dot_flops(const Program& program);

}  // namespace drx::tool::lm
