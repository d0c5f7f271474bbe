// libFuzzer target: arbitrary bytes as a StableHLO module (MLIR text, pretty or generic form)
// through the parser, the importer, the compiler and the executor, with the module's
// check.expect_* calls applied to what it computed. `drx::from_stablehlo` takes whatever a
// user hands it, so every input must end in success or a drx::Error; a crash, a sanitizer
// report, a hang or any other exception type is a bug. A failing check is not: a mutation
// changes expected values as readily as computed ones.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/stablehlo/import.h"
#include "drx/stablehlo/mlir_ast.h"
#include "fuzz/program_cost.h"

namespace {

// Larger than program_text's: JAX's modules hold tensors of a few hundred elements.
constexpr drx::fuzz::CostLimits kLimits{100000, int64_t{1} << 22};

// DRX_FUZZ_VERBOSE=1 when reproducing one input: says how far it got and why it stopped.
void note(const char* stage, const char* what = "") {
  static const bool verbose = std::getenv("DRX_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::cerr << "stablehlo_fuzz: " << stage << " " << what << "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  drx::stablehlo::ImportedModule m;
  try {
    m = drx::stablehlo::import_module(drx::stablehlo::parse_mlir(text));
  } catch (const drx::Error& e) {
    note("import:", e.what());
    return 0;  // rejected text is the expected outcome for most inputs
  }
  const drx::Program& p = m.program;
  // The documented layout of the outputs: @main's results, then a pair per check.
  if (p.outputs.size() != m.num_results + 2 * m.checks.size()) __builtin_trap();
  // A check's indices count from the first output after the results.
  for (const drx::stablehlo::Check& c : m.checks)
    if (m.num_results + c.actual >= p.outputs.size() ||
        m.num_results + c.expected >= p.outputs.size())
      __builtin_trap();

  if (!p.inputs.empty()) {
    note("not run: @main takes arguments");
    return 0;
  }
  if (drx::fuzz::program_cost(p, kLimits) < 0) {
    note("not run: too large, or a while loop");
    return 0;
  }
  std::vector<drx::Array> out;
  try {
    out = drx::compile(p).run({});
  } catch (const drx::Error& e) {
    note("run:", e.what());
    return 0;
  }
  if (out.size() != p.outputs.size()) __builtin_trap();
  for (const drx::stablehlo::Check& c : m.checks) {
    try {
      // Pass or fail are both fine here; it must only not crash on what the module computed.
      const std::string why = drx::stablehlo::apply_check(c, out[m.num_results + c.actual],
                                                          out[m.num_results + c.expected]);
      if (!why.empty()) note("check failed:", why.c_str());
    } catch (const drx::Error& e) {
      note("check:", e.what());
    }
  }
  note("ran");
  return 0;
}
