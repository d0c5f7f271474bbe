// `drx lm` (tools/lm) driven through drx::tool::main on a synthetic corpus: options, outputs,
// bit-identical --resume for the FedAvg family and DiLoCo, the mesh, and error cases. The
// learning run on the real corpus is the ctest cli.lm (tests/lm_learns.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "drx/data/checkpoint.h"
#include "drx/drx.h"
#include "drx/transforms/simplify.h"
#include "tests/brown_fixture.h"
#include "tests/cli_util.h"
#include "tools/lm/flops.h"
#include "tools/lm/options.h"

namespace {

namespace fs = std::filesystem;
using drx::Tree;
using drx::testing::cli;
using drx::testing::CliResult;

bool same_tree(const Tree& a, const Tree& b) {
  if (a.structure() != b.structure()) return false;
  std::vector<Tree> la = drx::tree_leaves(a), lb = drx::tree_leaves(b);
  for (size_t i = 0; i < la.size(); ++i)
    if (!la[i].array().bitwise_equal(lb[i].array())) return false;
  return true;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class LmTool : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("drx_lm_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    drx::testing::write_synthetic_brown(root_ / "corpus", 3);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  // A tiny model, a few steps: seconds for the whole test.
  CliResult run(const std::string& out, int rounds, std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"lm",
                                     "--data",
                                     path("corpus"),
                                     "--out",
                                     out,
                                     "--rounds",
                                     std::to_string(rounds),
                                     "--context",
                                     "8",
                                     "--width",
                                     "8",
                                     "--heads",
                                     "2",
                                     "--layers",
                                     "2",
                                     "--cohort",
                                     "3",
                                     "--local-steps",
                                     "2",
                                     "--batch",
                                     "2",
                                     "--eval-every",
                                     "2",
                                     "--eval-windows",
                                     "1",
                                     "--checkpoint-every",
                                     "1",
                                     "--quiet"};
    // DiLoCo has workers, not a cohort.
    const bool diloco = std::find(more.begin(), more.end(), "diloco") != more.end();
    return cli(drx::testing::with_flags(
        args, more, diloco ? std::vector<std::string>{"--cohort"} : std::vector<std::string>{}));
  }

  // A full run against one stopped after 2 rounds and resumed.
  void expect_resume_is_bit_identical(const std::vector<std::string>& extra) {
    const std::string tag = extra.empty() ? "fedavg" : extra[1] + extra.back();
    CliResult full = run(path("full" + tag), 5, extra);
    ASSERT_EQ(full.code, 0) << full.err;
    CliResult part = run(path("part" + tag), 2, extra);
    ASSERT_EQ(part.code, 0) << part.err;
    const drx::data::Checkpoint at2 =
        drx::data::read_checkpoint(path("part" + tag + "/checkpoint.bin"));
    std::vector<std::string> more = extra;
    more.push_back("--resume");
    CliResult resumed = run(path("part" + tag), 5, more);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    const drx::data::Checkpoint a =
        drx::data::read_checkpoint(path("full" + tag + "/checkpoint.bin"));
    const drx::data::Checkpoint b =
        drx::data::read_checkpoint(path("part" + tag + "/checkpoint.bin"));
    EXPECT_EQ(b.round, 5);
    EXPECT_TRUE(same_tree(a.params, b.params)) << tag;
    EXPECT_TRUE(same_tree(a.state, b.state)) << tag;
    EXPECT_FALSE(same_tree(at2.params, b.params)) << tag;
    ASSERT_EQ(a.history.size(), b.history.size());
    for (size_t i = 0; i < a.history.size(); ++i) {
      EXPECT_EQ(a.history[i].train_loss, b.history[i].train_loss) << tag << " row " << i;
      EXPECT_EQ(a.history[i].evaluated(), b.history[i].evaluated());
      if (a.history[i].evaluated()) {
        EXPECT_EQ(a.history[i].test_loss, b.history[i].test_loss);
      }
    }
  }

  fs::path root_;
};

TEST_F(LmTool, RunsWritesItsFilesAndReportsFlops) {
  CliResult r = run(path("out"), 4);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("lm: held-out "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("after 4/4 rounds"), std::string::npos) << r.out;
  // tokens per round: cohort 3 x steps 2 x batch 2 x context 8.
  EXPECT_NE(r.out.find(" 96 tokens/round"), std::string::npos) << r.out;
  // The rounds' page faults after the first are reported (a figure, not a bound).
  const size_t faults = r.out.find(" page faults/round");
  ASSERT_NE(faults, std::string::npos) << r.out;
  const size_t number = r.out.rfind(' ', faults - 1) + 1;
  EXPECT_GE(std::stoll(r.out.substr(number, faults - number)), 0) << r.out;
  const std::string csv = slurp(path("out/metrics.csv"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "round,train_bpb,heldout_bpb,elapsed_s");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  const std::string svg = slurp(path("out/metrics.svg"));
  EXPECT_NE(svg.find("id=\"heldout_bpb\""), std::string::npos);
  const drx::data::Checkpoint c = drx::data::read_checkpoint(path("out/checkpoint.bin"));
  EXPECT_EQ(c.round, 4);
  EXPECT_TRUE(c.history[1].evaluated());
  EXPECT_FALSE(c.history[0].evaluated());
  // The model starts near log2(256) = 8 bits per byte and learns the tiny corpus quickly.
  EXPECT_LT(c.history.back().train_loss, c.history.front().train_loss);
}

TEST_F(LmTool, ResumeIsBitIdenticalForFedAvgFedYogiAndDiLoCo) {
  expect_resume_is_bit_identical({});
  expect_resume_is_bit_identical({"--server-opt", "fedyogi"});
  expect_resume_is_bit_identical({"--algorithm", "diloco", "--workers", "3"});
  expect_resume_is_bit_identical({"--client-opt", "sgd", "--client-momentum", "0.5"});
}

TEST_F(LmTool, DiLoCoCheckpointsEveryWorkersInnerState) {
  CliResult r = run(path("diloco"), 3, {"--algorithm", "diloco", "--workers", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  const drx::data::Checkpoint c = drx::data::read_checkpoint(path("diloco/checkpoint.bin"));
  ASSERT_EQ(c.state.structure().substr(0, 7), "{inner:");
  // AdamW's step count per worker: 3 rounds of 2 inner steps, kept across rounds.
  const drx::Array counts = drx::tree_leaves(c.state["inner"])[0].array();
  ASSERT_EQ(counts.shape(), (drx::Shape{3}));
  for (int64_t w = 0; w < 3; ++w) EXPECT_EQ(counts.element_as_double(w), 6.0) << w;
}

TEST_F(LmTool, TwoDevicesTrainTheSameModel) {
  CliResult one = run(path("one"), 3, {"--threads", "1"});
  CliResult two = run(path("two"), 3, {"--threads", "1", "--devices", "2"});
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(two.code, 0) << two.err;
  const drx::data::Checkpoint a = drx::data::read_checkpoint(path("one/checkpoint.bin"));
  const drx::data::Checkpoint b = drx::data::read_checkpoint(path("two/checkpoint.bin"));
  EXPECT_TRUE(same_tree(a.params, b.params));
}

// The thread count changes how the work is spread, never the numbers: the same parameters and
// the same training and held-out losses, row by row (the evaluation's shards do not follow the
// threads).
TEST_F(LmTool, AnyThreadCountGivesTheSameRunBitwise) {
  CliResult one = run(path("t1"), 4, {"--threads", "1"});
  CliResult three = run(path("t3"), 4, {"--threads", "3"});
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(three.code, 0) << three.err;
  const drx::data::Checkpoint a = drx::data::read_checkpoint(path("t1/checkpoint.bin"));
  const drx::data::Checkpoint b = drx::data::read_checkpoint(path("t3/checkpoint.bin"));
  EXPECT_TRUE(same_tree(a.params, b.params));
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) {
    EXPECT_EQ(a.history[i].train_loss, b.history[i].train_loss) << "row " << i;
    EXPECT_EQ(a.history[i].evaluated(), b.history[i].evaluated()) << "row " << i;
    if (a.history[i].evaluated()) {
      EXPECT_EQ(a.history[i].test_loss, b.history[i].test_loss) << "row " << i;
    }
  }
}

// bf16 products (--precision bf16): f32 parameters and checkpoints, a model close to the f32
// run's but not the same, bitwise the same on 1 thread and device as on 3 threads and 2
// devices; a checkpoint is resumed only at the precision it was written with.
TEST_F(LmTool, Bf16ProductsTrainTheSameModelOnAnyThreadsAndDevices) {
  CliResult f32 = run(path("f32"), 3, {"--threads", "1"});
  CliResult one = run(path("b1"), 3, {"--threads", "1", "--precision", "bf16"});
  CliResult two = run(path("b2"), 3, {"--threads", "3", "--devices", "2", "--precision", "bf16"});
  ASSERT_EQ(f32.code, 0) << f32.err;
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(two.code, 0) << two.err;
  const drx::data::Checkpoint a = drx::data::read_checkpoint(path("b1/checkpoint.bin"));
  const drx::data::Checkpoint b = drx::data::read_checkpoint(path("b2/checkpoint.bin"));
  const drx::data::Checkpoint f = drx::data::read_checkpoint(path("f32/checkpoint.bin"));
  EXPECT_TRUE(same_tree(a.params, b.params));
  EXPECT_FALSE(same_tree(a.params, f.params));
  for (const drx::Tree& leaf : drx::tree_leaves(a.params))
    EXPECT_EQ(leaf.array().dtype(), drx::f32);
  ASSERT_EQ(a.history.size(), f.history.size());
  const auto& last = a.history.back();
  EXPECT_NEAR(last.train_loss, f.history.back().train_loss, 0.02 * f.history.back().train_loss);
  CliResult mixed = run(path("f32"), 4, {"--threads", "1", "--precision", "bf16", "--resume"});
  EXPECT_EQ(mixed.code, 1);
  EXPECT_NE(mixed.err.find("--precision bf16"), std::string::npos) << mixed.err;
}

TEST_F(LmTool, ErrorsLeaveNothingBehind) {
  CliResult missing = cli({"lm", "--data", path("nowhere"), "--out", path("bad"), "--quiet"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(path("bad")));
  CliResult again = run(path("twice"), 1);
  ASSERT_EQ(again.code, 0) << again.err;
  CliResult refused = run(path("twice"), 2);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("pass --resume to continue it"), std::string::npos) << refused.err;
  CliResult other = run(path("twice"), 2, {"--resume", "--client-lr", "0.01"});
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("--client-lr"), std::string::npos) << other.err;
  CliResult long_context = run(path("long"), 1, {"--context", "4000"});
  EXPECT_EQ(long_context.code, 1);
  EXPECT_NE(long_context.err.find("fewer than --context + 2"), std::string::npos)
      << long_context.err;
}

TEST_F(LmTool, BadFlagsNameTheFlagAndHelpListsThemAll) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--width", "10", "--heads", "4"}, "--width (10) must be a multiple of --heads (4)"},
           {{"--algorithm", "fedsgd"}, "--algorithm expects one of fedavg|diloco"},
           {{"--client-opt", "adam"}, "--client-opt expects one of adamw|sgd"},
           {{"--rounds", "0"}, "--rounds expects an integer in [1, 100000000]"},
           {{"--bogus"}, "unknown flag '--bogus'"},
           {{"--resume", "--overwrite"}, "exclude each other"},
           {{"--workers", "3"},
            "--workers does nothing here: it applies only with --algorithm diloco"},
           {{"--algorithm", "diloco", "--cohort", "4"}, "--cohort does nothing here"},
           {{"--client-momentum", "0.5"},
            "--client-momentum does nothing here: it applies only "
            "with --client-opt sgd"},
           {{"--client-opt", "sgd", "--weight-decay", "0.1"}, "--weight-decay does nothing here"},
           {{"--server-opt", "fedadam", "--server-momentum", "0.5"},
            "--server-momentum does nothing here"},
           {{"--layers", "1", "--layers", "2"}, "--layers is given twice"}}) {
    std::vector<std::string> full = {"lm"};
    full.insert(full.end(), args.begin(), args.end());
    CliResult r = cli(full);
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  CliResult help = cli({"lm", "--help"});
  ASSERT_EQ(help.code, 0);
  for (const char* flag : {"--data",
                           "--out",
                           "--algorithm",
                           "--cohort",
                           "--workers",
                           "--local-steps",
                           "--batch",
                           "--context",
                           "--layers",
                           "--width",
                           "--heads",
                           "--client-opt",
                           "--client-lr",
                           "--client-momentum",
                           "--weight-decay",
                           "--server-opt",
                           "--server-lr",
                           "--server-momentum",
                           "--adam-beta1",
                           "--adam-beta2",
                           "--adam-eps",
                           "--outer-lr",
                           "--outer-momentum",
                           "--rounds",
                           "--seed",
                           "--eval-every",
                           "--eval-windows",
                           "--checkpoint-every",
                           "--resume",
                           "--overwrite",
                           "--max-seconds",
                           "--devices",
                           "--threads",
                           "--quiet",
                           "--mpi",
                           "--mpi-timeout"})
    EXPECT_NE(help.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
}

TEST(LmFlops, DotFlopsCountScansAndMapsExactly) {
  // A map_fn over 3 clients of a 4-step scan of x [2,5] @ w [5,7]: 3 x 4 x 2 x 2 x 5 x 7.
  auto f = drx::program(
      {{"clients", 3}},
      [](drx::Value w, drx::Value xs) {
        drx::Tree per = drx::map_fn(
            [](drx::Value w, drx::Value x) {
              auto body = [&](const Tree& c, const Tree& xi) -> std::pair<Tree, Tree> {
                return {Tree(c.value() + drx::sum(drx::matmul(xi.value(), w))), Tree()};
              };
              return drx::scan(body, Tree(drx::fill({}, 0.0, drx::f32)), Tree(x)).first;
            },
            drx::broadcast(w), xs);
        return drx::reduce_sum(per.value());
      },
      {"", "clients"});
  const drx::Program p =
      drx::trace(f, drx::Array(drx::f32, {5, 7}), drx::Array(drx::f32, {3, 4, 2, 5}));
  EXPECT_EQ(drx::tool::lm::dot_flops(p), 3.0 * 4 * 2 * 2 * 5 * 7);
}

// The number of conv_general_dilated equations in p (no sub-programs).
int count_convs(const drx::Program& p) {
  int n = 0;
  for (const drx::Eqn& e : p.eqns) n += e.prim == &drx::prims::conv_general_dilated();
  return n;
}

TEST(LmFlops, ConvolutionsCount2xOutputsxKernelInFeaturesxWindow) {
  using drx::Value;
  auto flops = [](auto f, const drx::Shape& xs, const drx::Shape& ws) {
    const drx::Program p = drx::trace(f, drx::Array(drx::f32, xs), drx::Array(drx::f32, ws));
    EXPECT_EQ(count_convs(p), 1);
    return drx::tool::lm::dot_flops(p);
  };
  // Plain: x [2,3,6,7], w [4,3,3,3], VALID: y [2,4,4,5], each a sum of 3 x 3 x 3 products.
  EXPECT_EQ(flops([](Value x, Value w) { return drx::conv(x, w, {}, "VALID"); }, {2, 3, 6, 7},
                  {4, 3, 3, 3}),
            2.0 * (2 * 4 * 4 * 5) * (3 * 3 * 3));
  // The same in NHWC / HWIO: the dims are read from the dimension numbers.
  drx::ConvParams nhwc;
  nhwc.dims = {0, 3, {1, 2}, 3, 2, {0, 1}, 0, 3, {1, 2}};
  EXPECT_EQ(flops([nhwc](Value x, Value w) { return drx::conv_general_dilated(x, w, nhwc); },
                  {2, 6, 7, 3}, {3, 3, 3, 4}),
            2.0 * (2 * 4 * 4 * 5) * (3 * 3 * 3));
  // Two feature groups: x [2,4,5,5], w [6,2,3,3] (2 = 4 / 2 input features a group), SAME:
  // y [2,6,5,5], each a sum of 2 x 3 x 3 products (padding included).
  EXPECT_EQ(flops([](Value x, Value w) { return drx::conv(x, w, {}, "SAME", 2); }, {2, 4, 5, 5},
                  {6, 2, 3, 3}),
            2.0 * (2 * 6 * 5 * 5) * (2 * 3 * 3));
  // Depthwise: x [1,3,6,6], w [6,1,3,3], 3 groups, VALID: y [1,6,4,4], 9 products each.
  EXPECT_EQ(flops([](Value x, Value w) { return drx::conv(x, w, {}, "VALID", 3); }, {1, 3, 6, 6},
                  {6, 1, 3, 3}),
            2.0 * (1 * 6 * 4 * 4) * (1 * 3 * 3));
  // Strided: x [1,3,9,8], w [5,3,3,2], strides (2, 3), VALID: y [1,5,4,3].
  EXPECT_EQ(flops(
                [](Value x, Value w) {
                  return drx::conv(x, w, {2, 3}, "VALID");
                },
                {1, 3, 9, 8}, {5, 3, 3, 2}),
            2.0 * (1 * 5 * 4 * 3) * (3 * 3 * 2));
  // Batch groups: x [4,3,5,5], w [6,3,2,2], 2 batch groups: y [2,6,4,4] and the kernel's in
  // feature dim is all of C.
  drx::ConvParams bg;
  bg.batch_group_count = 2;
  EXPECT_EQ(flops([bg](Value x, Value w) { return drx::conv_general_dilated(x, w, bg); },
                  {4, 3, 5, 5}, {6, 3, 2, 2}),
            2.0 * (2 * 6 * 4 * 4) * (3 * 2 * 2));
}

TEST(LmFlops, ConvolutionUnderGradCountsItsTransposes) {
  // y = conv(x, w) and its vjp: the cotangents of x and of w are convolutions too (of the
  // cotangent with the flipped kernel, and of x with the cotangent). With SAME padding and
  // stride 1 each has the forward's count: 2 x 2*4*6*7 x 3*3*3 (forward), 2 x 2*3*6*7 x 4*3*3
  // (dx: x's elements, the cotangent's 4 features as the kernel's input features), 2 x 4*3*3*3
  // x 2*6*7 (dw: w's elements, the batch and the output positions as the window). The
  // programs are simplified first, as jit's (the round program's) are: the raw trace of vjp
  // holds the forward convolution twice, and grad's an unused one.
  using drx::Value;
  const drx::Program p = drx::simplify(drx::trace(
      [](Value x, Value w, Value u) -> std::vector<Value> {
        auto [y, pullback] =
            drx::vjp([](Value x, Value w) { return drx::conv(x, w, {}, "SAME"); }, {x, w});
        const std::vector<drx::Tree> g = pullback(u);
        return {y, g[0].value(), g[1].value()};
      },
      drx::Array(drx::f32, {2, 3, 6, 7}), drx::Array(drx::f32, {4, 3, 3, 3}),
      drx::Array(drx::f32, {2, 4, 6, 7})));
  EXPECT_EQ(count_convs(p), 3);
  const double forward = 2.0 * (2 * 4 * 6 * 7) * (3 * 3 * 3);
  EXPECT_EQ(drx::tool::lm::dot_flops(p), 3 * forward);
  // VALID: dx is a full correlation over the cotangent padded by the window, counted with
  // its padding: 2 x 2*3*6*7 x 4*3*3 rather than the forward's 2 x 2*4*4*5 x 3*3*3.
  const drx::Program q = drx::simplify(drx::trace(
      [](Value x, Value w) {
        auto loss = [](Value x, Value w) { return drx::sum(drx::conv(x, w, {}, "VALID")); };
        return drx::grad(loss, std::vector<int>{0, 1})(x, w);
      },
      drx::Array(drx::f32, {2, 3, 6, 7}), drx::Array(drx::f32, {4, 3, 3, 3})));
  EXPECT_EQ(count_convs(q), 2);  // the forward convolution is not needed for the gradients
  EXPECT_EQ(drx::tool::lm::dot_flops(q),
            2.0 * (2 * 3 * 6 * 7) * (4 * 3 * 3) + 2.0 * (4 * 3 * 3 * 3) * (2 * 4 * 5));
}

}  // namespace
