#pragma once
// The floating-point operations of a program's matrix products, counted exactly from its
// dot_general equations: 2 x (result elements) x (contracted elements) each, times the trip
// count of the scans and the clients of the map_fns they sit in (a cond counts its costliest
// branch, a while_loop's body once).
#include <cstdint>

#include "drx/ir/program.h"

namespace drx::tool::lm {

double dot_flops(const Program& program);

}  // namespace drx::tool::lm
