// exec::profile: per-equation times of compiled programs, by primitive and by equation, with
// call counts; bodies of map_fn timed equation by equation, the map_fn itself not.
#include "drx/exec/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "drx/drx.h"
#include "test_util.h"

namespace drx::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The line of `table` ("by primitive" or "by equation") whose "what" column starts with `what`.
std::string line_of(const std::string& report, const std::string& table, const std::string& what) {
  std::istringstream in(report.substr(report.find(table)));
  std::string line;
  std::getline(in, line);  // the title
  while (std::getline(in, line) && !line.empty())
    if (line.find("  " + what) != std::string::npos) return line;
  return "";
}

TEST(Profile, CountsEveryKernelByPrimitiveAndByEquation) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("drx_profile_" + std::to_string(::getpid())))
          .string();
  exec::profile::reset();
  exec::profile::enable(path);
  auto f = jit(program({{"clients", 3}}, [](Value x, Value w) {
    Value per =
        map_fn([](Value xi, Value wi) { return sum(tanh(matmul(xi, wi))); }, x, broadcast(w));
    return reduce_sum(per);
  }));
  const Array x = random_array({3, 4, 5}, DType::f32, 1), w = random_array({5, 2}, DType::f32, 2);
  for (int i = 0; i < 4; ++i) f(x, w);
  exec::profile::disable();
  exec::profile::write();
  const std::string report = slurp(path);
  EXPECT_NE(report.find("drx profile: "), std::string::npos) << report;
  // 4 calls of 3 clients.
  const std::string dot = line_of(report, "by primitive", "dot_general");
  ASSERT_FALSE(dot.empty()) << report;
  EXPECT_NE(dot.find(" 12 "), std::string::npos) << dot;
  EXPECT_FALSE(line_of(report, "by equation", "[gemm] dot_general").empty()) << report;
  EXPECT_NE(line_of(report, "by primitive", "tanh").find(" 12 "), std::string::npos) << report;
  EXPECT_TRUE(line_of(report, "by primitive", "map_fn").empty()) << report;
  // Off again: nothing more is counted (the tables are the same; the roofline's measurements
  // of the machine are taken anew).
  f(x, w);
  exec::profile::write();
  const auto tables = [](const std::string& r) { return r.substr(0, r.find("products by shape")); };
  EXPECT_EQ(tables(slurp(path)), tables(report));
  exec::profile::reset();
  std::filesystem::remove(path);
  // A report that cannot be written is an error naming the file.
  exec::profile::enable("/nonexistent-dir/report.txt");
  exec::profile::disable();
  expect_error([] { exec::profile::write(); }, {"profile", "/nonexistent-dir/report.txt"});
}

// The "by kind" table sums each kernel's time under what it does; a product fused with its
// bias is a gemm though its equation is the add, and every equation line says its kind.
// What the profile says of a program is also how a test learns which kernel an equation got:
// bf16 convolutions (a product into f32, and their transposes into bf16 under grad) compile to
// the convolution kernel, not to the reference loops.
TEST(Profile, Bf16ConvolutionsRunOnTheConvolutionKernel) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("drx_profile_conv_" + std::to_string(::getpid())))
          .string();
  exec::profile::reset();
  exec::profile::enable(path);
  auto loss = [](Value x, Value w) {
    ConvParams c;
    c.padding = {{1, 1}, {1, 1}};
    c.dims = ConvDimensionNumbers::channels_last(2);
    c.preferred_element_type = DType::f32;
    return sum(square(conv_general_dilated(astype(x, DType::bf16), astype(w, DType::bf16), c)));
  };
  const Array x = random_array({2, 6, 6, 3}, DType::f32, 1),
              w = random_array({3, 3, 3, 4}, DType::f32, 2);
  jit(grad(loss, std::vector<int>{0, 1}))(x, w);
  exec::profile::disable();
  exec::profile::write();
  const std::string report = slurp(path);
  EXPECT_TRUE(line_of(report, "by equation", "[interpreted] conv_general_dilated").empty())
      << report;
  EXPECT_FALSE(line_of(report, "by equation", "[gemm] conv_general_dilated").empty()) << report;
  exec::profile::reset();
  std::filesystem::remove(path);
}

TEST(Profile, KindsSumKernelsByWhatTheyDo) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("drx_profile_kind_" + std::to_string(::getpid())))
          .string();
  exec::profile::reset();
  exec::profile::enable(path);
  auto f = jit([](Value x, Value w, Value b) {
    Value y = matmul(x, w) + b;  // one gemm starting from the bias
    return sum(tanh(y) * 2.0, {1});
  });
  const Array x = random_array({64, 32}, DType::f32, 1), w = random_array({32, 16}, DType::f32, 2),
              b = random_array({16}, DType::f32, 3);
  for (int i = 0; i < 3; ++i) f(x, w, b);
  exec::profile::disable();
  exec::profile::write();
  const std::string report = slurp(path);
  const std::string gemm = line_of(report, "by kind", "gemm");
  ASSERT_FALSE(gemm.empty()) << report;
  EXPECT_NE(gemm.find(" 3 "), std::string::npos) << gemm;  // one gemm a call
  EXPECT_FALSE(line_of(report, "by kind", "reduction").empty()) << report;
  EXPECT_FALSE(line_of(report, "by kind", "elementwise").empty()) << report;
  // The fused product is named by its add, and listed as a gemm.
  const std::string add = line_of(report, "by equation", "[gemm] add ");
  EXPECT_FALSE(add.empty()) << report;
  EXPECT_TRUE(line_of(report, "by equation", "[elementwise] add ").empty()) << report;
  exec::profile::reset();
  std::filesystem::remove(path);
}

// The value of `key` on the report's machine-readable roofline line.
double roofline_number(const std::string& report, const std::string& key) {
  const size_t line = report.find("roofline_numbers ");
  if (line == std::string::npos) return -1;
  const size_t at = report.find(" " + key + "=", line);
  if (at == std::string::npos) return -1;
  return std::stod(report.substr(at + key.size() + 2));
}

std::string profile_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("drx_profile_" + name + "_" + std::to_string(::getpid())))
      .string();
}

// The roofline counts each product's FLOPs by its shape (and times the same calls through
// sgemm), and each memory-bound kernel's bytes: what it reads and writes, by hand.
TEST(Profile, RooflineCountsProductFlopsAndKernelBytes) {
  const std::string path = profile_path("roofline");
  exec::profile::reset();
  exec::profile::enable(path);
  auto product = jit([](Value x, Value w) { return matmul(x, w); });
  auto fused = jit([](Value a, Value b) { return a * b + a; });  // one kernel: reads a, b
  const Array x = random_array({64, 32}, DType::f32, 1), w = random_array({32, 16}, DType::f32, 2);
  const Array a = random_array({1000}, DType::f32, 3), b = random_array({1000}, DType::f32, 4);
  for (int i = 0; i < 3; ++i) product(x, w);
  for (int i = 0; i < 5; ++i) fused(a, b);
  exec::profile::disable();
  exec::profile::write();
  const std::string report = slurp(path);
  EXPECT_EQ(roofline_number(report, "product_flops"), 3.0 * 2 * 64 * 16 * 32) << report;
  // 5 runs reading 2 x 1000 floats and writing 1000.
  EXPECT_EQ(roofline_number(report, "bytes"), 5.0 * 3 * 1000 * 4) << report;
  EXPECT_GT(roofline_number(report, "sgemm1_s"), 0) << report;
  EXPECT_GT(roofline_number(report, "bandwidth1"), 0) << report;
  EXPECT_GT(roofline_number(report, "bound_s"), 0) << report;
  const std::string shape = line_of(report, "products by shape", "f32 64x16x32");
  EXPECT_NE(shape.find(" 3 "), std::string::npos) << report;
  // The same numbers from the API: one product shape, 3 calls.
  const exec::profile::Roofline r = exec::profile::roofline();
  ASSERT_EQ(r.shapes.size(), 1u);
  EXPECT_EQ(r.shapes[0].text, "f32 64x16x32");
  EXPECT_EQ(r.shapes[0].calls, 3);
  EXPECT_EQ(r.product_flops, 3.0 * 2 * 64 * 16 * 32);
  EXPECT_EQ(r.bytes, 5.0 * 3 * 1000 * 4);
  EXPECT_GT(r.product_bound_s, 0);
  EXPECT_NEAR(r.bound_s, r.product_bound_s + r.bytes / r.bandwidth, 1e-12);
  exec::profile::reset();
  std::filesystem::remove(path);
}

// bf16 products are timed against the same-shape product as drx calls it (oneDNN on one
// thread, or sgemm without a native kernel), and named by their operand and result types.
TEST(Profile, RooflineTimesBf16ProductsAsDrxRunsThem) {
  exec::profile::reset();
  exec::profile::enable("");
  auto product = jit([](Value x, Value w) { return matmul(x, w, DType::f32); });
  const Array x = random_array({64, 32}, DType::bf16, 1),
              w = random_array({32, 16}, DType::bf16, 2);
  for (int i = 0; i < 4; ++i) product(x, w);
  exec::profile::disable();
  const exec::profile::Roofline r = exec::profile::roofline();
  ASSERT_EQ(r.shapes.size(), 1u);
  EXPECT_EQ(r.shapes[0].text, "bf16->f32 64x16x32");
  EXPECT_EQ(r.shapes[0].calls, 4);
  EXPECT_EQ(r.product_flops, 4.0 * 2 * 64 * 16 * 32);
  EXPECT_GT(r.shapes[0].sgemm1_s, 0);
  exec::profile::reset();
}

// A kernel that writes a fresh 64 MiB result each run (past glibc's largest mmap threshold, so
// never recycled heap) takes page faults in every run, and its line counts them.
TEST(Profile, CountsThePageFaultsOfFreshResults) {
  const std::string path = profile_path("faults");
  exec::profile::reset();
  exec::profile::enable(path);
  auto f = jit([](Value x) { return x + 1.0; });
  const Array x = random_array({int64_t{16} << 20}, DType::f32, 1);
  for (int i = 0; i < 2; ++i) f(x);
  exec::profile::disable();
  exec::profile::write();
  const std::string report = slurp(path);
  std::istringstream line(line_of(report, "by primitive", "add"));
  double seconds = 0, us = 0;
  std::string share;
  long long calls = 0, faults = 0;
  line >> seconds >> share >> calls >> us >> faults;
  EXPECT_EQ(calls, 2) << report;
  EXPECT_GE(faults, 2) << report;
  exec::profile::reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace drx::testing
