// The training commands' shared run loop (tools/training), driven through drx::tool::main on
// synthetic data: divergence (exit code 3, what is written and kept, --resume trimming the
// metrics), one meaning of --max-seconds, stale temporaries, the resumed summary's elapsed
// time, errors naming the command, and the shared flag groups (per-optimizer server rates).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "drx/data/checkpoint.h"
#include "drx/drx.h"
#include "tests/brown_fixture.h"
#include "tests/cli_util.h"
#include "tests/fashion_fixture.h"
#include "tools/fedavg/options.h"
#include "tools/lm/options.h"
#include "tools/training/run_flags.h"

namespace {

namespace fs = std::filesystem;
namespace fa = drx::tool::fedavg;
using drx::testing::cli;
using drx::testing::CliResult;
using drx::testing::with_flags;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool all_finite(const drx::Tree& t) {
  for (const drx::Tree& leaf : drx::tree_leaves(t)) {
    const drx::Array& a = leaf.array();
    for (int64_t i = 0; i < a.size(); ++i)
      if (!std::isfinite(a.element_as_double(i))) return false;
  }
  return true;
}

class TrainingLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    root_ = fs::temp_directory_path() /
            ("drx-loop-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  CliResult fedavg(const std::string& out, int rounds, const std::vector<std::string>& more) {
    if (!fs::exists(path("fashion"))) drx::testing::write_synthetic_fashion(path("fashion"));
    return cli(with_flags({"fedavg", "--data", path("fashion"), "--out", out, "--rounds",
                           std::to_string(rounds), "--clients", "10", "--cohort", "3", "--hidden",
                           "16", "--batch", "16", "--eval-every", "2", "--quiet"},
                          more));
  }
  CliResult lm(const std::string& out, int rounds, const std::vector<std::string>& more) {
    if (!fs::exists(path("brown"))) drx::testing::write_synthetic_brown(path("brown"), 3);
    return cli(with_flags({"lm",
                           "--data",
                           path("brown"),
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
                           "1",
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
                           "--quiet"},
                          more));
  }

  fs::path root_;
};

// A client learning rate of 100 on a four-layer MLP sends its loss to nan at round 2.
TEST_F(TrainingLoop, FedavgDivergenceStopsWithExitCodeThreeAndKeepsTheLastFiniteCheckpoint) {
  const std::string out = path("fedavg");
  const std::vector<std::string> steep = {"--hidden", "32,32,32,32", "--client-lr", "100"};
  CliResult r = fedavg(out, 20, steep);
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  const std::string tag = "fedavg: diverged at round ";
  ASSERT_EQ(r.out.rfind(tag, 0), 0u) << r.out;
  const int64_t round = std::stoll(r.out.substr(tag.size()));
  ASSERT_GE(round, 1);
  ASSERT_LT(round, 20);
  EXPECT_NE(r.out.find("lower --client-lr or --server-lr"), std::string::npos) << r.out;
  // metrics.csv and the plot cover every round run, the diverged one written as nan.
  const std::vector<std::string> csv = lines(slurp(out + "/metrics.csv"));
  ASSERT_EQ(static_cast<int64_t>(csv.size()), round + 1);
  EXPECT_EQ(csv.back().rfind(std::to_string(round) + ",", 0), 0u) << csv.back();
  EXPECT_NE(csv.back().find("nan"), std::string::npos) << csv.back();
  for (size_t i = 1; i + 1 < csv.size(); ++i) EXPECT_EQ(csv[i].find("nan"), std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/metrics.svg"));
  // The checkpoint is the round before, finite, with the rows before.
  const drx::data::Checkpoint c = drx::data::read_checkpoint(out + "/checkpoint.bin");
  EXPECT_EQ(c.round, round - 1);
  EXPECT_EQ(static_cast<int64_t>(c.history.size()), round - 1);
  EXPECT_TRUE(all_finite(c.params));
  EXPECT_TRUE(all_finite(c.state));

  // --resume from it trims metrics.csv to the checkpoint's round before anything else.
  ASSERT_GE(round, 2);
  std::vector<std::string> resume = steep;
  resume.push_back("--resume");
  CliResult again = fedavg(out, static_cast<int>(round - 1), resume);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
  EXPECT_EQ(static_cast<int64_t>(lines(slurp(out + "/metrics.csv")).size()), round);
}

// Diverging at round 1 keeps the initial model; resumed with the same (trajectory) flags, the
// run diverges again from it, the same way.
TEST_F(TrainingLoop, DivergenceAtRoundOneKeepsTheInitialModel) {
  const std::string out = path("first");
  const std::vector<std::string> steep = {"--hidden", "64,64,64", "--client-lr", "1000"};
  CliResult r = fedavg(out, 4, steep);
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("fedavg: diverged at round 1: the training loss is nan", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("the checkpoint holds the initial model"), std::string::npos) << r.out;
  const std::vector<std::string> csv = lines(slurp(out + "/metrics.csv"));
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1].rfind("1,nan,nan,nan,", 0), 0u) << csv[1];
  const drx::data::Checkpoint c = drx::data::read_checkpoint(out + "/checkpoint.bin");
  EXPECT_EQ(c.round, 0);
  EXPECT_TRUE(c.history.empty());
  EXPECT_TRUE(all_finite(c.params));
  std::vector<std::string> resume = steep;
  resume.push_back("--resume");
  CliResult again = fedavg(out, 4, resume);
  EXPECT_EQ(again.code, 3) << again.out << again.err;
  EXPECT_EQ(again.out.substr(0, again.out.find(';')), r.out.substr(0, r.out.find(';')));
}

// drx lm: held-out bits per byte written as nan too, and its own hint.
TEST_F(TrainingLoop, LmDivergenceWritesNanAndKeepsTheRoundBefore) {
  const std::string out = path("lm");
  CliResult r = lm(out, 6, {"--client-opt", "sgd", "--client-lr", "100000", "--eval-every", "1"});
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  const std::string tag = "lm: diverged at round ";
  ASSERT_EQ(r.out.rfind(tag, 0), 0u) << r.out;
  const int64_t round = std::stoll(r.out.substr(tag.size()));
  const std::vector<std::string> csv = lines(slurp(out + "/metrics.csv"));
  ASSERT_EQ(static_cast<int64_t>(csv.size()), round + 1);
  // The diverged round's figures as they came out: a training loss that is nan, or one
  // that is still a number while the held-out loss overflowed; the held-out one non-finite.
  const std::string row = csv.back();
  ASSERT_EQ(row.rfind(std::to_string(round) + ",", 0), 0u) << row;
  const std::string heldout = row.substr(row.find(',', row.find(',') + 1) + 1);
  EXPECT_TRUE(heldout.rfind("nan,", 0) == 0 || heldout.rfind("inf,", 0) == 0 ||
              heldout.rfind("-inf,", 0) == 0)
      << row;
  EXPECT_EQ(drx::data::read_checkpoint(out + "/checkpoint.bin").round, round - 1);
}

// A DP run that diverges still reports what it spent: the epsilon of the rounds run.
TEST_F(TrainingLoop, DivergedDpRunReportsEpsilon) {
  CliResult r = fedavg(
      path("dp"), 20,
      {"--hidden", "64,64,64", "--client-lr", "1000", "--dp-clip", "1e12", "--dp-noise", "1"});
  ASSERT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("diverged at round "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DP (epsilon "), std::string::npos) << r.out;
}

// --max-seconds means the same for both commands: stop before a round that would overrun,
// after evaluating and checkpointing the last round run.
TEST_F(TrainingLoop, MaxSecondsStopsLmLikeFedavgWithAnEvaluatedCheckpoint) {
  for (const std::string command : {"fedavg", "lm"}) {
    const std::string out = path("budget-" + command);
    CliResult r = command == "lm" ? lm(out, 5, {"--max-seconds", "1e-9"})
                                  : fedavg(out, 5, {"--max-seconds", "1e-9"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("after 1/5 rounds"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stopped by --max-seconds"), std::string::npos) << r.out;
    const drx::data::Checkpoint c = drx::data::read_checkpoint(out + "/checkpoint.bin");
    EXPECT_EQ(c.round, 1) << command;
    ASSERT_EQ(c.history.size(), 1u) << command;
    EXPECT_TRUE(c.history[0].evaluated()) << command;
  }
}

TEST_F(TrainingLoop, LmRemovesStaleTemporariesOfItsOwnFilesOnly) {
  const std::string out = path("stale");
  fs::create_directories(out);
  for (const char* name : {"checkpoint.bin.tmp.a1B2c3", "metrics.csv.tmp.ZZZZZZ", "notes.txt"})
    std::ofstream(out + "/" + name) << "partial";
  CliResult r = lm(out, 1, {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out + "/checkpoint.bin.tmp.a1B2c3"));
  EXPECT_FALSE(fs::exists(out + "/metrics.csv.tmp.ZZZZZZ"));
  EXPECT_TRUE(fs::exists(out + "/notes.txt"));
}

// The summary's elapsed time is the run's, as metrics.csv and the progress lines count it.
TEST_F(TrainingLoop, ResumedSummaryReportsTheWholeRunsElapsedTime) {
  const std::string out = path("elapsed");
  ASSERT_EQ(lm(out, 2, {}).code, 0);
  CliResult r = lm(out, 4, {"--resume"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string at = "rounds in ";
  const size_t pos = r.out.find(at);
  ASSERT_NE(pos, std::string::npos) << r.out;
  const double summary_s = std::strtod(r.out.c_str() + pos + at.size(), nullptr);
  EXPECT_NE(r.out.find(" in this process, resumed at round 2)"), std::string::npos) << r.out;
  const std::vector<std::string> csv = lines(slurp(out + "/metrics.csv"));
  const double last_elapsed = std::stod(csv.back().substr(csv.back().rfind(',') + 1));
  EXPECT_NEAR(summary_s, last_elapsed, 0.051) << r.out << csv.back();
}

TEST_F(TrainingLoop, OutputErrorsNameTheCommand) {
  std::ofstream(path("a-file")) << "x";
  CliResult f = fedavg(path("a-file") + "/out", 1, {});
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("fedavg: cannot create output directory"), std::string::npos) << f.err;
  CliResult l = lm(path("a-file") + "/out", 1, {});
  EXPECT_EQ(l.code, 1);
  EXPECT_NE(l.err.find("lm: cannot create output directory"), std::string::npos) << l.err;
}

// Each server optimizer has its own default learning rate, in both commands (one flag
// group); an explicit --server-lr wins, and the checkpoint records the rate used.
TEST(TrainingFlags, ServerLearningRateDefaultsPerOptimizer) {
  const std::vector<std::pair<std::string, double>> want = {
      {"fedavg", 1.0}, {"fedavgm", 1.0}, {"fedadam", 0.03}, {"fedyogi", 0.03}, {"fedadagrad", 0.1}};
  for (const auto& [kind, lr] : want) {
    EXPECT_EQ(drx::tool::training::default_server_lr(kind), lr) << kind;
    EXPECT_EQ(fa::parse_options({"--server-opt", kind}).server_lr, lr) << kind;
    EXPECT_EQ(drx::tool::lm::parse_options({"--server-opt", kind}).server_lr, lr) << kind;
    EXPECT_EQ(fa::parse_options({"--server-opt", kind, "--server-lr", "0.5"}).server_lr, 0.5);
    const auto fields =
        drx::tool::lm::trajectory_fields(drx::tool::lm::parse_options({"--server-opt", kind}));
    bool found = false;
    for (const auto& [flag, value] : fields)
      if (flag == "--server-lr") found = std::stod(value) == lr;
    EXPECT_TRUE(found) << kind;
  }
  // Help says so.
  CliResult help = cli({"help", "lm"});
  EXPECT_NE(help.out.find("0.03 for fedadam and fedyogi"), std::string::npos) << help.out;
}

// The shared groups are one registration: both commands take the same flags with the same
// ranges and messages.
TEST(TrainingFlags, SharedFlagsBehaveTheSameInBothCommands) {
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"--max-seconds", "0"},
                                             {"--mpi-timeout", "-1"},
                                             {"--server-momentum", "1"},
                                             {"--checkpoint-every", "0"},
                                             {"--resume", "--overwrite"},
                                             {"--server-opt", "fedavgm", "--adam-beta1", "0.5"}}) {
    std::vector<std::string> f = {"fedavg"}, l = {"lm"};
    f.insert(f.end(), bad.begin(), bad.end());
    l.insert(l.end(), bad.begin(), bad.end());
    CliResult a = cli(f), b = cli(l);
    EXPECT_EQ(a.code, 2) << bad[0];
    EXPECT_EQ(b.code, 2) << bad[0];
    // The same message but for the command's name.
    EXPECT_EQ(a.err.substr(a.err.find(':') + 1 + 7), b.err.substr(b.err.find(':') + 1 + 3))
        << a.err << b.err;
  }
}

// Numbers are decimal: strtod's hexadecimal and leading blanks are typos on a command line.
TEST(TrainingFlags, NumbersAreDecimalWithoutBlanks) {
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"fedavg", "--client-lr", "0x10"},
                                             {"lm", "--weight-decay", "0x1p3"},
                                             {"fedavg", "--local-steps", " 1"},
                                             {"lm", "--seed", " 7"},
                                             {"fedavg", "--max-seconds", "1e3 "}}) {
    const CliResult r = cli(bad);
    EXPECT_EQ(r.code, 2) << bad[1] << " '" << bad[2] << "': " << r.err;
    EXPECT_NE(r.err.find(bad[1] + " expects "), std::string::npos) << r.err;
  }
  EXPECT_EQ(fa::parse_options({"--client-lr", "1.5e-1"}).client_lr, 0.15);
}

// A path the system refuses is the user's input, not an internal error: exit 1 naming it.
TEST_F(TrainingLoop, AnUnusablePathIsAnErrorNotAnInternalOne) {
  const std::string long_name(5000, 'x');
  for (const std::string command : {"fedavg", "lm"}) {
    const CliResult r =
        command == "lm" ? lm(path(long_name), 1, {}) : fedavg(path(long_name), 1, {});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(command + ": "), std::string::npos) << r.err;
  }
}

}  // namespace
