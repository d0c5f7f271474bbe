#pragma once
// stablehlo.reduce_window and stablehlo.select_and_scatter as drx ops
// (import_windows.cpp), called from the importer's dispatch.
#include <optional>

#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {

// reduce_window: one operand whose body is one add, maximum, minimum, or
// (bool) or/and becomes drx's reduce_window; any other body, or several
// operands, runs the body (through `run`) over the windows' elements in
// window order. select_and_scatter: a compare select (GE, GT, LE, LT) and an
// add scatter. Other ops: nullopt.
std::optional<Values> import_windowed(const Operation& op, const Values& operands,
                                      const RegionFn& run);

}  // namespace drx::stablehlo::detail
