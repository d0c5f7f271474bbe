#include "drx/stablehlo/import_checks.h"

#include <cmath>
#include <cstring>

#include "drx/array/error.h"
#include "drx/ops/ops.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

// After areApproximatelyEqual in StableHLO's reference interpreter: equal,
// both NaN, or finite, of one sign and within tolerance, read as absolute up
// to magnitude 1 and relative above (the suite's own check.mlir expects 5.0
// and 5.0001 to agree at the default 1e-4, which an absolute 1e-4 in f64
// refuses by 6.6e-17).
bool within_tolerance(double a, double e, double tolerance) {
  if (a == e) return true;
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (std::isinf(a) || std::isinf(e)) return false;
  if (std::signbit(a) != std::signbit(e)) return false;
  return std::abs(a - e) <= tolerance * std::max(1.0, std::abs(e));
}

// A float element's position among the values of its type (bf16 ... f64), so
// that adjacent values differ by one: sign-magnitude bits made monotonic.
int64_t float_position(const Array& x, int64_t i) {
  const size_t width = dtype_size(x.dtype());
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(x.raw()) + i * static_cast<int64_t>(width), width);
  const uint64_t sign = uint64_t{1} << (8 * width - 1);
  const auto magnitude = static_cast<int64_t>(bits & (sign - 1));
  return bits & sign ? -magnitude : magnitude;
}

double number(const Operation& op, const char* name, double otherwise) {
  const Attribute* a = find_attribute(op.attributes, name);
  if (!a) return otherwise;
  if (a->kind == Attribute::Kind::floating) return a->f;
  if (a->kind == Attribute::Kind::integer) return static_cast<double>(a->i);
  fail(op, std::string(name) + " must be a number");
}

}  // namespace

std::pair<Check, Values> import_check_op(const Operation& op, const Values& in) {
  const std::string kind = op.name.substr(6);  // without "check."
  const bool constant_form = kind.ends_with("_const");
  const std::string base = constant_form ? kind.substr(0, kind.size() - 6) : kind;
  if (base != "expect_eq" && base != "expect_almost_eq" && base != "expect_close")
    fail(op,
         "is not supported (the check ops drx applies: expect_eq, expect_almost_eq, "
         "expect_close and their _const forms)");
  Values pair = in;
  if (constant_form) {
    if (in.size() != 1 || op.operand_types.size() != 1)
      fail(op, "takes one operand and a dense<...> constant");
    pair.push_back(constant(dense_array(required(op, "value"), op.operand_types[0], op.line)));
  } else if (in.size() != 2) {
    fail(op, "takes (actual, expected)");
  }
  if (pair[0].dtype() != pair[1].dtype() || pair[0].shape() != pair[1].shape())
    fail(op, "compares " + pair[0].type().str() + " with " + pair[1].type().str() +
                 " (expected the same type)");
  Check c;
  c.kind = base;
  c.line = op.line;
  // The interpreter's defaults: a tolerance of 1e-4, 3 ULP.
  if (base == "expect_almost_eq") c.tolerance = number(op, "tolerance", 1e-4);
  if (base == "expect_close") c.max_ulp = static_cast<int64_t>(number(op, "max_ulp_difference", 3));
  return {c, pair};
}

std::string apply_dialect_check(const Check& c, const Array& actual, const Array& expected) {
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return "line " + std::to_string(c.line) + ": " + c.kind + ": " + actual.str().substr(0, 40) +
           " vs expected of another type";
  const bool integral = !is_floating(actual.dtype());
  for (int64_t i = 0; i < actual.size(); ++i) {
    const double a = actual.element_as_double(i), e = expected.element_as_double(i);
    bool same = false;
    if (integral)  // exact, and 64-bit integers beyond 2^53 by their bits
      same = dtype_size(actual.dtype()) == 8
                 ? actual.data<int64_t>()[i] == expected.data<int64_t>()[i]
                 : a == e;
    else if (c.tolerance >= 0)
      same = within_tolerance(a, e, c.tolerance);
    else
      same = (std::isnan(a) && std::isnan(e)) ||
             (!std::isnan(a) && !std::isnan(e) &&
              std::abs(float_position(actual, i) - float_position(expected, i)) <= c.max_ulp);
    if (!same)
      return "line " + std::to_string(c.line) + ": " + c.kind + ": element " + std::to_string(i) +
             " is " + std::to_string(a) + ", expected " + std::to_string(e);
  }
  return "";
}

}  // namespace drx::stablehlo::detail
