// libFuzzer target: arbitrary bytes as program text through the parser, the printer, the
// verifier and the reference interpreter. Any input a user can hand to `drx check` / `drx run`
// must end in success or a drx::Error; a crash, a sanitizer report, a hang or any other
// exception type is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "drx/drx.h"
#include "fuzz/program_cost.h"

namespace {

// Per variable (and over all inputs together), and in all: one execution stays in the
// millisecond range.
constexpr drx::fuzz::CostLimits kLimits{4096, int64_t{1} << 20};
constexpr int64_t kMaxElements = kLimits.max_elements;

// splitmix64: inputs derived from the fuzz bytes, so every finding reproduces from its file.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

// Mostly small values (so integer inputs often are valid indices), sometimes the values that
// break naive kernels: zero, negatives, huge magnitudes, inf and NaN.
double pick_value(Rng& rng, bool floating) {
  uint64_t r = rng.next();
  switch (r % 16) {
    case 0:
      return 0.0;
    case 1:
      return floating ? 1e30 : 2147483647.0;
    case 2:
      return floating ? -1e30 : -2147483648.0;
    case 3:
      return floating ? __builtin_inf() : -1.0;
    case 4:
      return floating ? __builtin_nan("") : 1000.0;
    default:  // ints in [-1, 3]: mostly valid indices for small axes, sometimes negative
      return floating ? static_cast<double>(static_cast<int64_t>((r >> 8) % 13) - 4) * 0.5
                      : static_cast<double>(static_cast<int64_t>((r >> 8) % 5) - 1);
  }
}

drx::Array make_input(const drx::Type& t, Rng& rng) {
  // bf16, f16 and the narrow integers have no C++ element type: their values are drawn in
  // the dtype they compute in, then converted (rounded or wrapped).
  if (drx::is_storage_format(t.dtype))
    return drx::convert_array(make_input(drx::Type(drx::compute_dtype(t.dtype), t.shape), rng),
                              t.dtype);
  drx::Array a(t.dtype, t.shape);
  drx::dispatch_dtype(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = a.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_same_v<T, uint8_t>)
        p[i] = static_cast<uint8_t>(rng.next() & 1);
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = static_cast<T>(pick_value(rng, true));
      else  // the int32 extremes saturate in narrower integers: a cast out of range is UB
        p[i] = static_cast<T>(std::clamp(pick_value(rng, false),
                                         static_cast<double>(std::numeric_limits<T>::min()),
                                         static_cast<double>(std::numeric_limits<T>::max())));
    }
  });
  return a;
}

// DRX_FUZZ_VERBOSE=1 when reproducing one input: says how far it got and why it stopped.
void note(const char* stage, const char* what = "") {
  static const bool verbose = std::getenv("DRX_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::cerr << "program_text_fuzz: " << stage << " " << what << "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  drx::Program program;
  try {
    program = drx::parse_program(text);
  } catch (const drx::Error& e) {
    note("parse:", e.what());
    return 0;  // rejected text is the expected outcome for most inputs
  }

  // Printing is canonical: whatever parses must print as text that parses back to the same
  // text. A ParseError here means the printer wrote something the parser does not accept.
  const std::string printed = drx::to_string(program);
  if (drx::to_string(drx::parse_program(printed)) != printed) __builtin_trap();

  try {
    drx::verify(program);
  } catch (const drx::Error& e) {
    note("verify:", e.what());
    return 0;
  }

  int64_t input_elements = 0;
  for (int v : program.inputs)
    input_elements += drx::fuzz::capped_elements(program.type_of(v).shape, kLimits);
  if (input_elements > kMaxElements || drx::fuzz::program_cost(program, kLimits) < 0) {
    note("too large to run");
    return 0;
  }

  uint64_t seed = 1469598103934665603ULL;  // FNV-1a of the input
  for (size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 1099511628211ULL;
  Rng rng{seed};
  std::vector<drx::Array> args;
  for (int v : program.inputs) args.push_back(make_input(program.type_of(v), rng));
  try {
    drx::run(program, args);
    note("ran");
  } catch (const drx::Error& e) {
    note("run:", e.what());
  }
  return 0;
}
