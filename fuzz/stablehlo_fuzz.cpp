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

namespace {

// Bounds that keep one execution short and its memory small: the bugs worth finding are in
// the handling of ops, attributes and shapes, not in the size of the data.
constexpr int64_t kMaxElements = 100000;  // per value, in @main and in every sub-program
constexpr int64_t kMaxCost = int64_t{1} << 22;
constexpr int kMaxDepth = 16;

// Saturates instead of overflowing.
int64_t capped_elements(const drx::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return kMaxElements + 1;
    if (d == 0) return 0;
    if (n > kMaxElements / d) return kMaxElements + 1;
    n *= d;
  }
  return n;
}

int64_t leading_dim(const drx::Type& t) { return t.shape.empty() ? 1 : t.shape[0]; }

// A rough count of the elements the executor touches, or -1 when it is too much to run (as in
// program_text_fuzz.cpp): sub-programs (a reduce's fold, cond branches) are scaled by a scan's
// length or the largest leading dimension of the equation's inputs.
int64_t cost(const drx::Program& p, int depth) {
  if (depth > kMaxDepth) return -1;
  for (const drx::Type& t : p.var_types)
    if (capped_elements(t.shape) > kMaxElements) return -1;
  int64_t total = 0;
  for (const drx::Eqn& e : p.eqns) {
    // stablehlo.while: its trip count is unknown until it runs, so imported, never run.
    if (e.prim == &drx::prims::while_loop()) return -1;
    int64_t reps = 1;
    if (e.params.has("length"))
      if (const auto* n = std::get_if<int64_t>(&e.params.at("length", e.prim->name()))) {
        if (*n < 0 || *n > kMaxCost) return -1;
        reps = std::max<int64_t>(reps, *n);
      }
    for (int v : e.ins) {
      total += capped_elements(p.type_of(v).shape);
      reps = std::max(reps, leading_dim(p.type_of(v)));
    }
    for (int v : e.outs) total += capped_elements(p.type_of(v).shape);
    for (const auto& [key, attr] : e.params.items()) {
      if (const auto* sub = std::get_if<std::shared_ptr<const drx::Program>>(&attr)) {
        if (!*sub) continue;
        int64_t c = cost(**sub, depth + 1);
        if (c < 0 || c > kMaxCost / reps) return -1;
        total += c * reps;
      }
    }
    if (total > kMaxCost) return -1;
  }
  return total;
}

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
  if (cost(p, 0) < 0) {
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
