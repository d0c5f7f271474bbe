// What tests/cli_fuzz.py (the fuzz pass over every command's flags, ctest cli.fuzz) found, each
// kept here as a test: a folder given as the program file, a parse error that did not name its
// file, and OpenBLAS crashing under more concurrent calls than its buffer table holds
// (`drx lm --devices 1000`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "drx/drx.h"
#include "drx/exec/blas_calls.h"
#include "tests/cli_util.h"

extern "C" {
char* openblas_get_config(void) __attribute__((weak));
}

namespace drx::testing {
namespace {

namespace fs = std::filesystem;

// A scratch folder for one test, removed at its end.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::path(::testing::TempDir()) /
          ("drx_fuzz_regression_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  // A sum over 3 clients, written as DIR/round.drx; its path.
  std::string round_program() const {
    const std::string file = (dir / "round.drx").string();
    std::ofstream(file) << "program @main [clients=3] (%0: f32[3,2]@clients) -> (f32[2]) {\n"
                           "  %1 = reduce_sum[placement=\"clients\"] %0 : f32[2]\n"
                           "  return %1\n"
                           "}\n";
    return file;
  }
};

// An ifstream opens a folder and reads nothing, so `drx run DIR` said "line 1:1: expected
// 'program', found end of input" and `drx import DIR` "no function @main".
TEST(CliFuzzRegression, AFolderAsTheProgramFileIsNamedAsAFolder) {
  Scratch s;
  const std::string folder = (s.dir / "a_folder").string();
  fs::create_directories(folder);
  const std::vector<std::vector<std::string>> cases = {
      {"run", folder, "--arg", "1"},
      {"check", folder},
      {"import", folder},
      {"export", folder},
      {"split", folder, "--out", (s.dir / "parts").string()},
  };
  for (const auto& args : cases) {
    CliResult r = cli(args);
    EXPECT_EQ(r.code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(args[0] + ": '" + folder + "' is a folder, not a program file"),
              std::string::npos)
        << args[0] << ": " << r.err;
  }
}

// `drx run garbage.drx` said only "line 1:1: ..."; which file, and which command, was left out.
TEST(CliFuzzRegression, AProgramThatDoesNotParseIsNamed) {
  Scratch s;
  const std::string file = (s.dir / "garbage.drx").string();
  std::ofstream(file) << "program @main (%0: f32[\n";
  for (const char* cmd : {"run", "check", "export"}) {
    CliResult r = cli({cmd, file});
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(cmd) + ": '" + file + "': line 2:1: expected"),
              std::string::npos)
        << cmd << ": " << r.err;
  }
}

// `drx export F --mesh clients=3 --mesh clients=1` exported for clients=1, the first --mesh
// dropped without a word.
TEST(CliFuzzRegression, ExportMeshGivenTwiceIsAUsageError) {
  Scratch s;
  const std::string file = s.round_program();
  CliResult once = cli({"export", file, "--mesh", "clients=3"});
  ASSERT_EQ(once.code, 0) << once.err;
  EXPECT_NE(once.out.find("\"clients\"=3"), std::string::npos) << once.out;
  CliResult r = cli({"export", file, "--mesh", "clients=3", "--mesh", "clients=1"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("export: --mesh is given twice"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// `drx split --out a --out b` wrote into b, `drx aggregate --clients x --clients y` read y: which
// was meant is a guess, so a single-valued flag given twice is a usage error, before any file.
TEST(CliFuzzRegression, SplitAndAggregateFlagsGivenTwiceAreUsageErrors) {
  Scratch s;
  const std::string file = s.round_program();
  const std::string a = (s.dir / "a").string(), b = (s.dir / "b").string();
  CliResult split = cli({"split", file, "--out", a, "--out=" + b});
  EXPECT_EQ(split.code, 2) << split.err;
  EXPECT_NE(split.err.find("split: --out is given twice"), std::string::npos) << split.err;
  EXPECT_FALSE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  ASSERT_EQ(cli({"split", file, "--out", a}).code, 0);
  CliResult agg = cli(
      {"aggregate", a + "/plan.json", "--stage", "0", "--clients", a, "--clients", b, "--out", b});
  EXPECT_EQ(agg.code, 2) << agg.err;
  EXPECT_NE(agg.err.find("aggregate: --clients is given twice"), std::string::npos) << agg.err;
  CliResult missing = cli({"aggregate", a + "/plan.json", "--stage"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("aggregate: --stage needs a value"), std::string::npos);
}

// OpenBLAS's buffer table holds 2 x MAX_THREADS calls (at least 50); drx keeps its calls in flight
// within MAX_THREADS, as the library's own configuration string states it.
TEST(CliFuzzRegression, BlasCallLimitFitsOpenBlasBufferTable) {
  if (openblas_get_config == nullptr) GTEST_SKIP() << "the BLAS linked is not OpenBLAS";
  const std::string config = openblas_get_config();
  const size_t at = config.find("MAX_THREADS=");
  const int max_threads = at == std::string::npos ? 25 : std::stoi(config.substr(at + 12));
  EXPECT_GE(exec::blas_call_limit(), 1);
  EXPECT_LE(exec::blas_call_limit(), max_threads) << config;
}

// 3 x limit threads each take a slot and hold it until the number held at once, counted here,
// has reached the limit (or 10 s passed): never more than the limit, and the limit is reached.
TEST(CliFuzzRegression, BlasCallSlotsBoundTheCallsInFlight) {
  const int limit = exec::blas_call_limit();
  if (limit > 4096) GTEST_SKIP() << "no bound on BLAS calls with this BLAS";
  std::atomic<int> holding{0}, most{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3 * limit; ++t)
    threads.emplace_back([&] {
      const exec::BlasCallSlot slot;
      const int now = holding.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      while (most.load() < limit && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      holding.fetch_sub(1);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most.load(), limit);
  EXPECT_LE(exec::blas_calls_peak(), limit);
}

// The shape of `drx lm --devices 1000`: more devices than OpenBLAS has buffers, each client's
// product one BLAS call on its device's thread, each taking a slot. Each client computes
// ones(8,8) @ full(8,8, 0.5) = 4 everywhere, so the sum over 160 clients is 640 in every
// element (exact in f32).
TEST(CliFuzzRegression, ProductsOnManyDevicesTakeABlasCallSlotEach) {
  constexpr int64_t clients = 160;
  auto round = program({{"clients", clients}},
                       [](Value w, Value xs) {
                         return reduce_sum(map_fn([](Value wi, Value xi) { return matmul(xi, wi); },
                                                  broadcast(w), xs));
                       },
                       {"", "clients"});
  const Program p = trace(round, {Type(DType::f32, {8, 8}), Type(DType::f32, {clients, 8, 8})});
  const Array w = full({8, 8}, 0.5, DType::f32);
  const Array xs = full({clients, 8, 8}, 1.0, DType::f32);
  const Executable e = compile(p, Mesh({{"clients", clients}}));
  const int64_t before = exec::blas_calls_made();
  const Array got = e.run({w, xs})[0];
  EXPECT_GE(exec::blas_calls_made() - before, clients);
  ASSERT_EQ(got.shape(), (Shape{8, 8}));
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(got.element_as_double(i), 640.0) << i;
  if (exec::blas_call_limit() <= 4096) {
    EXPECT_LE(exec::blas_calls_peak(), exec::blas_call_limit());
  }
}

}  // namespace
}  // namespace drx::testing
