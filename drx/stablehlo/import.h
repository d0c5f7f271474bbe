#pragma once
// StableHLO in: a module as JAX prints it (pretty or generic form, see
// mlir_ast.h) to a drx Program, with the spec's semantics.
//
//   drx::Program p = drx::from_stablehlo(text);        // @main, as a Program
//   auto m = drx::stablehlo::import_module(parse_mlir(text));
//   // m.program's outputs: @main's results, then (actual, expected) per check
//
// Every op drx can express maps to its primitives (one op -> one primitive
// where one exists); a reduce whose body is one add/max/min/and/or becomes
// that reduction, any other body (argmax's variadic compare-and-select) a
// fold along the reduced axes with drx::scan; gather becomes a take of
// linearised indices; sort (a comparator of the form jnp.sort writes, or
// drx's exporter) drx's sort, and scatter of whole slices along one axis
// (overwriting or adding) drx's scatter or scatter_add. Sharding
// annotations (sdy.*, mhlo.sharding, the @Sharding custom calls) are recorded
// in `sharding_notes` and change no value. Anything else throws drx::Error
// naming the op and its line.
#include <string>
#include <vector>

#include "drx/ir/program.h"
#include "drx/stablehlo/mlir_ast.h"

namespace drx::stablehlo {

// A check.expect_* custom call of a self-checking module, or an op of the
// check dialect (check.expect_eq_const, ...) of StableHLO's interpreter tests.
struct Check {
  std::string kind;     // "expect_close", "expect_eq", "expect_almost_eq"
  int line = 0;         // of the custom_call
  size_t actual = 0;    // program output index of the computed value
  size_t expected = 0;  // ... and of the expected one
  // The check dialect's own rules, where set (>= 0): expect_almost_eq holds
  // when |actual - expected| <= tolerance (same sign; NaN equals NaN),
  // expect_close when they are at most max_ulp values of their type apart.
  double tolerance = -1;
  int64_t max_ulp = -1;
};

struct ImportedModule {
  Program program;  // inputs: @main's arguments; outputs: its results, then the checks' pairs
  size_t num_results = 0;
  std::vector<Check> checks;
  std::vector<std::string> sharding_notes;  // "line N: mhlo.sharding = ..." (no effect on values)
};

ImportedModule import_module(const Module& module, const std::string& entry = "main");

// m.program with @main's results only (the check outputs and the ops only they
// use removed).
Program results_program(const ImportedModule& m);

// How a check compares: expect_eq is exact (bitwise for floats, NaN equal to
// NaN); expect_close and expect_almost_eq allow 3 ULP, as StableHLO's
// interpreter, or a relative 2^-20 (f32) / 2^-44 (f64) where the two sides
// computed a transcendental function with different approximations.
// Returns an empty string when it holds, else what differs.
std::string apply_check(const Check& check, const Array& actual, const Array& expected);

}  // namespace drx::stablehlo

namespace drx {
// @main of a StableHLO module as a Program: its results only (the checks of a
// self-checking module, and the ops only they use, are dropped).
Program from_stablehlo(const std::string& text);
}  // namespace drx
