// StableHLO lowerings that expand a function into arithmetic, measured over
// many points after the round trip (export, import, run): erf against
// std::erf and erf_inv against its kernels, with the ulp bounds that
// StablehloExport.EveryEquationRoundTripsThroughTheImporter allows; cumsum
// bitwise in every dtype and direction; the generic form of each parses
// with mlir-opt.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "drx/export/stablehlo.h"
#include "drx/ops/erf_inv.h"
#include "drx/ops/primitives.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;

std::vector<Array> round_trip(const Program& p, const std::vector<Array>& args,
                              bool generic = false) {
  StableHloOptions o;
  o.generic = generic;
  return run(from_stablehlo(to_stablehlo(p, Mesh(), o)), args);
}

// The distance in representable values between a and b (+0 and -0 are one
// apart), for float and double.
template <class T>
int64_t ulps_apart(T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  auto ordered = [](T v) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof bits);
    const Bits sign = Bits{1} << (8 * sizeof(T) - 1);
    return (bits & sign) ? -static_cast<int64_t>(bits & ~sign) - 1 : static_cast<int64_t>(bits);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// The largest distance between got and want (NaN only where want is NaN;
// otherwise a failure), and one input where it occurs.
template <class T>
::testing::AssertionResult WithinUlps(const Array& x, const Array& got, const std::vector<T>& want,
                                      int64_t bound) {
  int64_t worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const T g = got.data<T>()[i], w = want[static_cast<size_t>(i)];
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g))
        return ::testing::AssertionFailure()
               << "at x = " << x.data<T>()[i] << ": " << g << " vs " << w;
      continue;
    }
    const int64_t d = ulps_apart(g, w);
    if (d > worst) worst = d, at = i;
  }
  std::cout << "[ numeric ] " << got.size() << " points: at most " << worst
            << " ulp (x = " << std::setprecision(17) << x.data<T>()[at] << ")\n";
  if (worst > bound)
    return ::testing::AssertionFailure()
           << worst << " ulp at x = " << std::setprecision(17) << x.data<T>()[at] << ": "
           << got.data<T>()[at] << " vs " << want[static_cast<size_t>(at)];
  return ::testing::AssertionSuccess();
}

// Every stride-th non-negative float below `limit` (+inf by default), their
// negatives, NaN, the signed zeros and infinities and +-1, +-2.
Array f32_points(uint32_t stride, float limit = INFINITY) {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 2.0f, -2.0f};
  uint32_t end;
  std::memcpy(&end, &limit, 4);
  for (uint64_t b = 1; b < end; b += stride) {
    const auto u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
    v.push_back(-f);
  }
  return f32_array(v, {static_cast<int64_t>(v.size())});
}

// Doubles: uniform in [-lo, lo], random bit patterns below `lo` in magnitude
// (every binade), and 1 - 2^-k u for k up to 53 (erf_inv's tails), both signs.
Array f64_points(int64_t n, double lo, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> v = {0.0,
                           -0.0,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           1.0,
                           -1.0,
                           std::nextafter(1.0, 0.0),
                           -std::nextafter(1.0, 0.0),
                           std::numeric_limits<double>::denorm_min(),
                           0.84,
                           0.5,
                           16.0,
                           1e-300};
  std::uniform_real_distribution<double> uniform(-lo, lo), unit(0, 1);
  while (static_cast<int64_t>(v.size()) < n) {
    switch (v.size() % 3) {
      case 0:
        v.push_back(uniform(g));
        break;
      case 1: {
        uint64_t b = g() & 0x7fffffffffffffffULL;
        double d;
        std::memcpy(&d, &b, 8);
        v.push_back(std::fabs(d) < lo ? d : unit(g));
        break;
      }
      default:
        v.push_back((g() & 1 ? -1.0 : 1.0) *
                    (1.0 - std::ldexp(unit(g), -static_cast<int>(g() % 54))));
    }
  }
  return f64_array(v, {n});
}

Program unary(Value (*f)(const Value&), const Type& t) {
  return trace([f](Value x) { return f(x); }, {t});
}

TEST(StablehloExportNumeric, ErfF32IsWithinOneUlpOfStdErf) {
  const Array x = f32_points(1999);
  const Program p = unary(drx::erf, Type(DType::f32, x.shape()));
  std::vector<float> want;
  for (int64_t i = 0; i < x.size(); ++i) want.push_back(std::erf(x.data<float>()[i]));
  EXPECT_TRUE(WithinUlps(x, round_trip(p, {x}).at(0), want, 1));
}

TEST(StablehloExportNumeric, ErfF64IsWithinOneUlpOfStdErf) {
  const Array x = f64_points(1 << 20, 7.0, 5);
  const Program p = unary(drx::erf, Type(DType::f64, x.shape()));
  std::vector<double> want;
  for (int64_t i = 0; i < x.size(); ++i) want.push_back(std::erf(x.data<double>()[i]));
  EXPECT_TRUE(WithinUlps(x, round_trip(p, {x}).at(0), want, 1));
}

TEST(StablehloExportNumeric, ErfInvF32IsBitwiseTheKernel) {
  const Array x = f32_points(499, 1.0f);
  const Program p = unary(drx::erf_inv, Type(DType::f32, x.shape()));
  std::vector<float> want;
  for (int64_t i = 0; i < x.size(); ++i) want.push_back(erf_inv_f32(x.data<float>()[i]));
  EXPECT_TRUE(WithinUlps(x, round_trip(p, {x}).at(0), want, 0));
}

TEST(StablehloExportNumeric, ErfInvF64IsWithinThreeUlpOfTheKernel) {
  const Array x = f64_points(1 << 19, 1.0, 7);
  const Program p = unary(drx::erf_inv, Type(DType::f64, x.shape()));
  std::vector<double> want;
  for (int64_t i = 0; i < x.size(); ++i) want.push_back(erf_inv_f64(x.data<double>()[i]));
  EXPECT_TRUE(WithinUlps(x, round_trip(p, {x}).at(0), want, 3));
}

Program gelu_program(bool derivative, const Type& t) {
  return trace(
      [derivative](Value x) { return derivative ? emit1(prims::gelu_grad(), {x}) : gelu(x); }, {t});
}

// gelu's and gelu_grad's expansions are their f32 kernels op for op (erf's expansion, drx's
// exp), so an exported f32 program computes the same bits.
TEST(StablehloExportNumeric, GeluAndItsDerivativeF32AreBitwiseTheKernels) {
  const Array x = f32_points(4999);
  for (bool derivative : {false, true}) {
    SCOPED_TRACE(derivative ? "gelu_grad" : "gelu");
    const Program p = gelu_program(derivative, Type(DType::f32, x.shape()));
    const Array want = run(p, {x}).at(0);
    EXPECT_TRUE(WithinUlps(x, round_trip(p, {x}).at(0),
                           std::vector<float>(want.data<float>(), want.data<float>() + x.size()),
                           0));
  }
}

// In f64 the kernels use std::erf and std::exp, the expansions drx's erf (within 1 ulp) and
// the backend's exp: close in absolute terms (1 + erf(x) cancels for x << 0, so not in ulps).
TEST(StablehloExportNumeric, GeluAndItsDerivativeF64FollowTheKernels) {
  const Array x = f64_points(1 << 14, 12.0, 11);
  for (bool derivative : {false, true}) {
    SCOPED_TRACE(derivative ? "gelu_grad" : "gelu");
    const Program p = gelu_program(derivative, Type(DType::f64, x.shape()));
    const Array want = run(p, {x}).at(0), got = round_trip(p, {x}).at(0);
    double worst = 0;
    for (int64_t i = 0; i < x.size(); ++i) {
      const double w = want.data<double>()[i], g = got.data<double>()[i];
      if (std::isnan(w) || std::isnan(g)) {
        EXPECT_EQ(std::isnan(w), std::isnan(g)) << "at x = " << x.data<double>()[i];
        continue;
      }
      worst = std::max(worst, std::fabs(g - w) / (1.0 + std::fabs(x.data<double>()[i])));
    }
    EXPECT_LE(worst, 1e-15);
  }
}

TEST(StablehloExportNumeric, HalfPrecisionErfComputesInF32) {
  for (DType d : {DType::bf16, DType::f16}) {
    const Array x = random_array({64}, d, 3, -3, 3);
    using Fn = Value (*)(const Value&);
    for (Fn f : {Fn{&drx::erf}, Fn{&drx::erf_inv}}) {
      const Program p = unary(f, Type(d, {64}));
      const Array want = run(p, {x}).at(0), got = round_trip(p, {x}).at(0);
      // Within one f32 ulp before rounding to the half format: at most one apart.
      for (int64_t i = 0; i < x.size(); ++i) {
        const double g = got.element_as_double(i), w = want.element_as_double(i);
        if (g == w || (std::isnan(g) && std::isnan(w))) continue;
        EXPECT_LE(std::fabs(g - w), std::fabs(w) * (d == DType::bf16 ? 1.0 / 128 : 1.0 / 1024))
            << dtype_name(d) << " at " << x.element_as_double(i);
      }
    }
  }
}

Array cumsum_input(DType d, const Shape& shape, uint64_t seed) {
  if (d == DType::u8 || d == DType::i8)
    return convert_array(random_array(shape, DType::f32, seed, 0, 255), d);  // sums wrap
  Array a = random_array(shape, d, seed, -1e3, 1e3);
  if (is_floating(d) && a.size() > 1) {  // a -0.0 first: the running sum makes it +0.0
    Array z = convert_array(full({}, -0.0, DType::f64), d);
    std::memcpy(a.raw(), z.raw(), dtype_size(d));
  }
  return a;
}

TEST(StablehloExportNumeric, CumsumIsBitwiseInEveryDtypeAndDirection) {
  const std::vector<DType> dtypes = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                     DType::i32, DType::i64, DType::u8,   DType::u32};
  const std::vector<Shape> shapes = {{7}, {2, 3, 4}, {1, 5}, {3, 0}};
  uint64_t seed = 1;
  for (DType d : dtypes)
    for (const Shape& s : shapes)
      for (int64_t axis = 0; axis < static_cast<int64_t>(s.size()); ++axis)
        for (bool reverse : {false, true}) {
          const Program p =
              trace([axis, reverse](Value x) { return cumsum(x, axis, reverse); }, {Type(d, s)});
          const Array x = cumsum_input(d, s, seed++);
          SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_str(s) + " axis " +
                       std::to_string(axis) + (reverse ? " reverse" : ""));
          for (bool generic : {false, true})
            EXPECT_TRUE(BitwiseEqual(round_trip(p, {x}, generic), run(p, {x})));
        }
}

// Long f32 sums, where accumulating in f32 would differ from drx's f64.
TEST(StablehloExportNumeric, CumsumAccumulatesF32InF64) {
  const Program p = trace([](Value x) { return cumsum(x, 0); }, {Type(DType::f32, {3000})});
  const Array x = random_array({3000}, DType::f32, 9, 0, 1);
  EXPECT_TRUE(BitwiseEqual(round_trip(p, {x}), run(p, {x})));
  EXPECT_NE(to_stablehlo(p).find("tensor<1xf64>"), std::string::npos);
}

std::string mlir_opt() {
  for (const char* c : {"mlir-opt-19", "mlir-opt"}) {
    const std::string probe = std::string("command -v ") + c + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return c;
  }
  return "";
}

TEST(StablehloExportNumeric, GenericFormsParseWithMlirOpt) {
  const std::string tool = mlir_opt();
  if (tool.empty()) GTEST_SKIP() << "mlir-opt-19 is not installed (scripts/setup.sh installs it)";
  std::vector<Program> programs;
  for (DType d : {DType::f32, DType::f64, DType::bf16}) {
    programs.push_back(unary(drx::erf, Type(d, {3})));
    programs.push_back(unary(drx::erf_inv, Type(d, {2, 2})));
    programs.push_back(gelu_program(false, Type(d, {3})));
    programs.push_back(gelu_program(true, Type(d, {3})));
    programs.push_back(trace([](Value x) { return cumsum(x, 1, true); }, {Type(d, {2, 5})}));
  }
  programs.push_back(trace([](Value x) { return cumsum(x, 0); }, {Type(DType::i32, {4})}));
  // A bf16 product with an f32 result states its algorithm (#stablehlo.dot_algorithm).
  programs.push_back(trace([](Value a, Value b) { return matmul(a, b, DType::f32); },
                           {Type(DType::bf16, {2, 3}), Type(DType::bf16, {3, 4})}));
  const fs::path dir = fs::temp_directory_path() / ("drx_mlir_num_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int n = 0;
  for (const Program& p : programs) {
    StableHloOptions o;
    o.generic = true;
    const std::string text = to_stablehlo(p, Mesh(), o);
    const fs::path file = dir / (std::to_string(n++) + ".mlir");
    std::ofstream(file) << text;
    const std::string cmd = tool + " --allow-unregistered-dialect " + file.string() +
                            " >/dev/null 2>" + file.string() + ".err";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << text;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drx::testing
