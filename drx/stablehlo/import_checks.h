#pragma once
// The check dialect of StableHLO's interpreter tests (check.expect_eq_const,
// check.expect_almost_eq, check.expect_close, ...): read into a Check and
// applied with the dialect's own rules. Internal to drx/stablehlo.
#include <string>
#include <utility>

#include "drx/core/value.h"
#include "drx/stablehlo/import.h"

namespace drx::stablehlo::detail {

// The Check of a check.* op (kind, tolerance or max_ulp; its output indices
// left to the caller) and the (actual, expected) values it compares: for a
// *_const form, expected is its constant.
std::pair<Check, Values> import_check_op(const Operation& op, const Values& operands);

// apply_check for a check with the dialect's rule (tolerance or max_ulp set).
std::string apply_dialect_check(const Check& check, const Array& actual, const Array& expected);

}  // namespace drx::stablehlo::detail
