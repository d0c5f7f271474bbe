// `drx fedavg` (tools/fedavg): checkpoint format and its damage handling, atomic outputs, the
// metrics files, option parsing, and whole runs driven through drx::tool::main on a small
// synthetic dataset (always) and on the real Fashion-MNIST files (when installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "drx/data/atomic_write.h"
#include "drx/data/checkpoint.h"
#include "drx/drx.h"
#include "tests/cli_util.h"
#include "tests/fashion_fixture.h"
#include "tools/cli.h"
#include "tools/fedavg/metrics.h"
#include "tools/fedavg/options.h"
#include "tools/fedavg/train.h"
#include "tools/flags.h"

namespace {

namespace fs = std::filesystem;
namespace fa = drx::tool::fedavg;
using drx::Array;
using drx::Tree;

using drx::testing::cli;
using drx::testing::CliResult;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<std::string> dir_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool same_tree(const Tree& a, const Tree& b) {
  if (a.structure() != b.structure()) return false;
  std::vector<Tree> la = drx::tree_leaves(a), lb = drx::tree_leaves(b);
  for (size_t i = 0; i < la.size(); ++i)
    if (!la[i].array().bitwise_equal(lb[i].array())) return false;
  return true;
}

// A fresh directory per test, removed afterwards.
class FedavgTool : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("drx-fedavg-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string synthetic_data(int64_t train_n = 400, int64_t test_n = 200) {
    drx::testing::write_synthetic_fashion(path("data"), train_n, test_n);
    return path("data");
  }

  // Flags of a quick run on the synthetic data, writing to out/.
  std::vector<std::string> quick_run(const std::string& data, const std::string& out,
                                     int64_t rounds) {
    return {"fedavg",
            "--data",
            data,
            "--out",
            out,
            "--rounds",
            std::to_string(rounds),
            "--clients",
            "10",
            "--cohort",
            "3",
            "--hidden",
            "16",
            "--batch",
            "16",
            "--eval-every",
            "2",
            "--checkpoint-every",
            "1",
            "--quiet"};
  }

  fs::path dir_;
};

drx::data::Checkpoint sample_checkpoint() {
  drx::data::Checkpoint c;
  c.config = {{"--clients", "10"}, {"--client-lr", "0.10000000000000001"}, {"--seed", "3"}};
  c.round = 7;
  Array w =
      Array::from_vector<float>({1.5f, -0.0f, 3.25e-30f, std::nanf(""), 1e30f, -7.0f}, {2, 3});
  Array b = Array::from_vector<int32_t>({-1, 2147483647, -2147483647 - 1}, {3});
  Array scalar = Array::scalar<float>(0.125f);
  Array empty(drx::f32, {0, 4});
  c.params = Tree::dict({{"layer0", Tree::dict({{"b", Tree(b)}, {"w", Tree(w)}})},
                         {"misc", Tree::list({Tree(scalar), Tree(empty), Tree()})}});
  c.state = Tree::dict({{"momentum", Tree(Array::from_vector<double>({0.1, -2.0}, {2}))}});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.history = {{1, 2.5, nan, nan, 0.75}, {2, 1.25, 1.0, 0.5, 1.5}};
  return c;
}

TEST_F(FedavgTool, CheckpointRoundTripIsBitExact) {
  const drx::data::Checkpoint c = sample_checkpoint();
  const std::string file = path("ck.bin");
  drx::data::write_checkpoint(file, c, "test");
  // The atomic write leaves only the final file behind.
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"ck.bin"});
  drx::data::Checkpoint d = drx::data::read_checkpoint(file);
  EXPECT_EQ(d.config, c.config);
  EXPECT_EQ(d.round, 7);
  EXPECT_TRUE(same_tree(d.params, c.params)) << d.params.structure();
  EXPECT_TRUE(same_tree(d.state, c.state)) << d.state.structure();
  ASSERT_EQ(d.history.size(), 2u);
  EXPECT_EQ(d.history[0].round, 1);
  EXPECT_EQ(d.history[0].train_loss, 2.5);
  EXPECT_TRUE(std::isnan(d.history[0].test_accuracy));
  EXPECT_EQ(d.history[1].test_accuracy, 0.5);
  EXPECT_EQ(d.history[1].elapsed_s, 1.5);
  // Re-encoding the decoded checkpoint reproduces the file byte for byte.
  EXPECT_EQ(drx::data::encode_checkpoint(d), slurp(file));
  // Overwriting replaces the file, again without leftovers.
  drx::data::write_checkpoint(file, d, "test");
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"ck.bin"});
}

TEST_F(FedavgTool, CheckpointHeaderIsAsDocumented) {
  const std::string bytes = drx::data::encode_checkpoint(sample_checkpoint());
  EXPECT_EQ(bytes.substr(0, 8), "DRXFEDCK");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\0\0\0", 4));
  // The trailer is zlib's CRC-32 of everything before it, little-endian (checked against a
  // bitwise CRC-32 computed here).
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i + 4 < bytes.size(); ++i) {
    crc ^= static_cast<unsigned char>(bytes[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  uint32_t stored = 0;
  for (int k = 3; k >= 0; --k)
    stored = (stored << 8) |
             static_cast<unsigned char>(bytes[bytes.size() - 4 + static_cast<size_t>(k)]);
  EXPECT_EQ(stored, crc);
}

TEST_F(FedavgTool, CheckpointDamageIsRefused) {
  const std::string good = drx::data::encode_checkpoint(sample_checkpoint());
  // Every single corrupted byte, and every truncation, is a drx::Error.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    EXPECT_THROW(drx::data::decode_checkpoint(bad), drx::Error) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(drx::data::decode_checkpoint(good.substr(0, n)), drx::Error) << "length " << n;
  auto message = [](const std::string& bytes) {
    try {
      drx::data::decode_checkpoint(bytes, "ck.bin");
    } catch (const drx::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  EXPECT_NE(message(flipped).find("CRC-32 mismatch"), std::string::npos) << message(flipped);
  EXPECT_NE(message(good.substr(0, good.size() - 3)).find("ck.bin"), std::string::npos);
  EXPECT_NE(message("NOTACKPTxxxxxxxxxxxxxxx").find("wrong magic"), std::string::npos);
  std::string v2 = good;
  v2[8] = 2;
  EXPECT_NE(message(v2).find("version 2 is not supported"), std::string::npos) << message(v2);
  // A file that is not there.
  EXPECT_THROW(drx::data::read_checkpoint(path("missing.bin")), drx::Error);
}

TEST_F(FedavgTool, ConfigMismatchNamesTheField) {
  const std::vector<std::pair<std::string, std::string>> saved = {{"--clients", "10"},
                                                                  {"--client-lr", "0.1"}};
  EXPECT_NO_THROW(drx::data::check_same_config(saved, saved, "ck"));
  try {
    drx::data::check_same_config(saved, {{"--clients", "10"}, {"--client-lr", "0.2"}}, "ck");
    ADD_FAILURE() << "no error";
  } catch (const drx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--client-lr 0.1 but this run has --client-lr 0.2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(drx::data::check_same_config(saved, {{"--clients", "10"}}, "ck"), drx::Error);
}

TEST_F(FedavgTool, AtomicWriteReplacesAndFailsCleanly) {
  const std::string file = path("a.txt");
  drx::data::write_file_atomically(file, {"first"}, "test");
  drx::data::write_file_atomically(file, {"second"}, "test");
  EXPECT_EQ(slurp(file), "second");
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"a.txt"});
  EXPECT_THROW(drx::data::write_file_atomically(path("no/such/dir/x"), {"x"}, "test"), drx::Error);
  EXPECT_EQ(dir_entries(dir_), std::vector<std::string>{"a.txt"});
}

TEST_F(FedavgTool, MetricsCsvAndSvg) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<drx::data::RoundRecord> rows = {{1, 2.0, nan, nan, 0.5}, {2, 1.5, 1.25, 0.625, 1.0}};
  EXPECT_EQ(fa::metrics_csv(rows),
            "round,train_loss,test_loss,test_accuracy,elapsed_s\n"
            "1,2.000000,,,0.500\n"
            "2,1.500000,1.250000,0.625000,1.000\n");
  std::string svg = fa::metrics_svg(rows, "a <b> & c");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  // The accuracy panel spans x 70..700 over rounds 0..2, and y 250 (bottom) to 50 (top) over
  // accuracies 0.6 (the lowest, rounded down to a tenth) to 1: the one evaluated round is at
  // x 700, and accuracy 0.625 at y 250 - 200 * 0.025 / 0.4 = 237.5.
  EXPECT_NE(svg.find("id=\"test_accuracy\" fill=\"none\" stroke=\"#1f77b4\" "
                     "stroke-width=\"1.5\" points=\"700.00,237.50\""),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("id=\"train_loss\""), std::string::npos);
}

TEST_F(FedavgTool, BucketSteps) {
  EXPECT_EQ(fa::bucket_steps(0, 10), 1);
  EXPECT_EQ(fa::bucket_steps(7, 10), 7);
  EXPECT_EQ(fa::bucket_steps(19, 100), 20);  // 10011 -> 10100
  EXPECT_EQ(fa::bucket_steps(19, 19), 19);   // capped at the population's largest need
  EXPECT_EQ(fa::bucket_steps(33, 100), 40);  // 100001 -> 101000
  EXPECT_EQ(fa::bucket_steps(64, 100), 64);
}

// ---- whole runs ----------------------------------------------------------------------

TEST_F(FedavgTool, HelpListsEveryFlag) {
  CliResult help = cli({"help", "fedavg"});
  ASSERT_EQ(help.code, 0);
  EXPECT_EQ(cli({"fedavg", "--help"}).out, help.out);
  EXPECT_EQ(cli({"fedavg", "--rounds", "3", "--help"}).out, help.out);
  for (const char* flag : {"--data",
                           "--out",
                           "--max-examples",
                           "--clients",
                           "--cohort",
                           "--partition",
                           "--alpha",
                           "--shards-per-client",
                           "--model",
                           "--hidden",
                           "--epochs",
                           "--local-steps",
                           "--batch",
                           "--client-lr",
                           "--client-momentum",
                           "--server-opt",
                           "--server-lr",
                           "--server-momentum",
                           "--adam-beta1",
                           "--adam-beta2",
                           "--adam-eps",
                           "--overwrite",
                           "--rounds",
                           "--seed",
                           "--eval-every",
                           "--checkpoint-every",
                           "--resume",
                           "--max-seconds",
                           "--devices",
                           "--threads",
                           "--quiet",
                           "--mpi",
                           "--mpi-timeout"})
    EXPECT_NE(help.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  EXPECT_NE(cli({"help"}).out.find("  fedavg"), std::string::npos);
  // The CNN's own defaults, from the Options a --model cnn run starts from.
  const fa::Options cnn = fa::Options::defaults("cnn");
  std::ostringstream cnn_line;
  cnn_line << "cnn has its own defaults: --rounds " << cnn.rounds << ", --batch " << cnn.batch
           << ", --client-lr " << drx::tool::flags::brief(cnn.client_lr) << "\n";
  EXPECT_NE(help.out.find(cnn_line.str()), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("(default 32; cnn " + std::to_string(cnn.batch) + ")"), std::string::npos)
      << help.out;
}

TEST_F(FedavgTool, BadFlagsExitTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown flag '--bogus'"},
      {{"--rounds", "0"}, "--rounds expects an integer in [1, 100000000], got '0'"},
      {{"--rounds", "ten"}, "--rounds expects an integer"},
      {{"--rounds"}, "--rounds needs a value"},
      {{"--client-lr", "-1"}, "--client-lr expects a number > 0"},
      {{"--client-lr=nan"}, "--client-lr expects a number > 0"},
      {{"--client-momentum", "1"}, "--client-momentum expects a number >= 0 and < 1"},
      {{"--partition", "zipf"}, "--partition expects one of iid|dirichlet|shards, got 'zipf'"},
      {{"--server-opt", "sgd"}, "--server-opt expects one of fedavg|fedavgm|fedadam"},
      {{"--hidden", "200,,10"}, "--hidden expects comma-separated layer sizes"},
      {{"--model", "resnet"}, "--model expects one of mlp|cnn, got 'resnet'"},
      {{"--model", "cnn", "--hidden", "10"},
       "--hidden does nothing here: it applies only with --model mlp"},
      {{"--adam-beta2", "1"}, "--adam-beta2 expects a number >= 0 and < 1"},
      {{"--resume", "--overwrite"}, "--resume and --overwrite exclude each other"},
      {{"--seed", "-3"}, "--seed expects an integer in [0, 2^64)"},
      {{"--clients", "5", "--cohort", "6"}, "--cohort expects at most --clients (5)"},
      {{"--epochs", "2", "--local-steps", "3"}, "--epochs and --local-steps exclude each other"},
      {{"--quiet=yes"}, "--quiet takes no value"},
      {{"extra"}, "unexpected argument 'extra'"},
      {{"--mpi-timeout", "0"}, "--mpi-timeout expects a number > 0"},
      {{"--mpi", "--export-rounds", "x"}, "--export-rounds writes every client's data"},
      // Flags that would change nothing, and flags given twice.
      {{"--alpha", "0.3"}, "--alpha does nothing here: it applies only with --partition dirichlet"},
      {{"--partition", "iid", "--shards-per-client", "2"},
       "--shards-per-client does nothing here: it applies only with --partition shards"},
      {{"--server-momentum", "0.5"}, "--server-momentum does nothing here"},
      {{"--server-opt", "fedavgm", "--adam-beta1", "0.5"}, "--adam-beta1 does nothing here"},
      {{"--server-opt", "fedadagrad", "--adam-beta2", "0.5"}, "--adam-beta2 does nothing here"},
      {{"--dp-clip", "1", "--dp-clip-lr", "0.1"},
       "--dp-clip-lr does nothing here: it applies only with --dp-quantile"},
      {{"--rounds", "1", "--rounds", "2"}, "--rounds is given twice"},
      {{"--export-rounds", DRX_SOURCE_DIR "/README.md"}, "' is a file, expected a folder"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"fedavg", "--out", path("never")};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CliResult r = cli(args);
    EXPECT_EQ(r.code, 2) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(path("never")));
  // The parsed values, for flags given both ways.
  fa::Options o = fa::parse_options({"--rounds=7", "--hidden", "3,4", "--client-lr", "0.5",
                                     "--partition=shards", "--seed", "18446744073709551615"});
  EXPECT_EQ(o.rounds, 7);
  EXPECT_EQ(o.hidden, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(o.client_lr, 0.5);
  EXPECT_EQ(o.partition, "shards");
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_FALSE(o.mpi);
  EXPECT_EQ(o.mpi_timeout, 30.0);
  o = fa::parse_options({"--mpi", "--mpi-timeout=2.5"});
  EXPECT_TRUE(o.mpi);
  EXPECT_EQ(o.mpi_timeout, 2.5);
}

TEST_F(FedavgTool, CnnHasItsOwnDefaultsAndRecordsTheModel) {
  const fa::Options mlp = fa::parse_options({});
  const fa::Options d = fa::Options::defaults("cnn");
  EXPECT_EQ(mlp.model, "mlp");
  EXPECT_EQ(mlp.rounds, fa::Options().rounds);
  EXPECT_EQ(mlp.batch, fa::Options().batch);
  EXPECT_EQ(mlp.client_lr, fa::Options().client_lr);
  fa::Options o = fa::parse_options({"--model", "cnn"});
  EXPECT_EQ(o.model, "cnn");
  EXPECT_EQ(o.rounds, d.rounds);
  EXPECT_EQ(o.batch, d.batch);
  EXPECT_EQ(o.client_lr, d.client_lr);
  // Given flags win over the model's defaults, in either order.
  o = fa::parse_options({"--batch", "7", "--model=cnn", "--rounds", "3", "--client-lr", "0.2"});
  EXPECT_EQ(o.batch, 7);
  EXPECT_EQ(o.rounds, 3);
  EXPECT_EQ(o.client_lr, 0.2);
  // Checkpoints of CNN runs record the model (and no hidden sizes); the MLP's as before.
  auto has = [](const fa::Options& o, const std::string& flag) {
    for (const auto& [f, v] : fa::trajectory_fields(o))
      if (f == flag) return v;
    return std::string("(none)");
  };
  EXPECT_EQ(has(o, "--model"), "cnn");
  EXPECT_EQ(has(o, "--hidden"), "(none)");
  EXPECT_EQ(has(mlp, "--model"), "(none)");
  EXPECT_EQ(has(mlp, "--hidden"), "200,200");
}

TEST_F(FedavgTool, CnnTrainsResumesAndRefusesAnotherModel) {
  const std::string data = synthetic_data(200, 100);
  auto run = [&](const std::string& out, int64_t rounds, std::vector<std::string> more) {
    std::vector<std::string> args = {"fedavg",
                                     "--data",
                                     data,
                                     "--out",
                                     out,
                                     "--rounds",
                                     std::to_string(rounds),
                                     "--clients",
                                     "6",
                                     "--cohort",
                                     "2",
                                     "--batch",
                                     "16",
                                     "--eval-every",
                                     "2",
                                     "--checkpoint-every",
                                     "1",
                                     "--quiet"};
    args.insert(args.end(), more.begin(), more.end());
    return cli(args);
  };
  const std::vector<std::string> cnn = {"--model", "cnn"};
  CliResult full = run(path("full"), 3, cnn);
  ASSERT_EQ(full.code, 0) << full.err;
  EXPECT_NE(full.out.find("fedavg: test accuracy "), std::string::npos) << full.out;
  const drx::data::Checkpoint a = drx::data::read_checkpoint(path("full/checkpoint.bin"));
  EXPECT_EQ(a.params.structure(),
            "{conv0:{b:*,w:*},conv1:{b:*,w:*},dense0:{b:*,w:*},dense1:{b:*,w:*}}");
  EXPECT_EQ(a.params["conv0"]["w"].array().shape(), (drx::Shape{5, 5, 1, 32}));
  EXPECT_EQ(a.params["dense0"]["w"].array().shape(), (drx::Shape{3136, 512}));
  // Interrupted after 2 rounds and resumed: bit for bit the uninterrupted run.
  ASSERT_EQ(run(path("part"), 2, cnn).code, 0);
  std::vector<std::string> resume = cnn;
  resume.push_back("--resume");
  CliResult resumed = run(path("part"), 3, resume);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const drx::data::Checkpoint b = drx::data::read_checkpoint(path("part/checkpoint.bin"));
  EXPECT_EQ(b.round, 3);
  EXPECT_TRUE(same_tree(a.params, b.params));
  // Resuming with the other model is refused, either way.
  CliResult as_mlp = run(path("part"), 4, {"--resume"});
  EXPECT_EQ(as_mlp.code, 1);
  EXPECT_NE(as_mlp.err.find("cannot resume"), std::string::npos) << as_mlp.err;
  ASSERT_EQ(run(path("mlp"), 1, {"--hidden", "8"}).code, 0);
  CliResult as_cnn = run(path("mlp"), 2, resume);
  EXPECT_EQ(as_cnn.code, 1);
  EXPECT_NE(as_cnn.err.find("no --model but this run has --model cnn"), std::string::npos)
      << as_cnn.err;
}

TEST_F(FedavgTool, BrokenDatasetIsAnErrorWithNoOutputs) {
  const std::string out = path("out");
  CliResult r = cli({"fedavg", "--data", path("nowhere"), "--out", out, "--quiet"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("drx: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(path("nowhere")), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // A truncated image file.
  const std::string data = synthetic_data();
  const std::string images = data + "/train-images-idx3-ubyte.gz";
  std::string bytes = slurp(images);
  spit(images, bytes.substr(0, bytes.size() / 2));
  r = cli({"fedavg", "--data", data, "--out", out, "--quiet"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("train-images-idx3-ubyte.gz"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(FedavgTool, ResumeIsBitIdenticalToAnUninterruptedRun) {
  const std::string data = synthetic_data();
  // Client momentum and FedAvgM make both the client and the server carry state.
  const std::vector<std::string> extra = {"--client-momentum", "0.5",         "--server-opt",
                                          "fedavgm",           "--partition", "dirichlet",
                                          "--alpha",           "0.3"};
  auto run = [&](const std::string& out, int64_t rounds, std::vector<std::string> more) {
    std::vector<std::string> args = quick_run(data, out, rounds);
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), more.begin(), more.end());
    return cli(args);
  };
  CliResult full = run(path("full"), 5, {});
  ASSERT_EQ(full.code, 0) << full.err;
  CliResult part = run(path("part"), 2, {});
  ASSERT_EQ(part.code, 0) << part.err;
  drx::data::Checkpoint at2 = drx::data::read_checkpoint(path("part/checkpoint.bin"));
  EXPECT_EQ(at2.round, 2);
  CliResult resumed = run(path("part"), 5, {"--resume"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  drx::data::Checkpoint a = drx::data::read_checkpoint(path("full/checkpoint.bin"));
  drx::data::Checkpoint b = drx::data::read_checkpoint(path("part/checkpoint.bin"));
  EXPECT_EQ(a.round, 5);
  EXPECT_EQ(b.round, 5);
  EXPECT_TRUE(same_tree(a.params, b.params));
  EXPECT_TRUE(same_tree(a.state, b.state));
  EXPECT_EQ(a.state.structure(), "{momentum:{layer0:{b:*,w:*},layer1:{b:*,w:*}}}");
  // The two runs really differ from round 2's state (the resume did train).
  EXPECT_FALSE(same_tree(at2.params, b.params));
  ASSERT_EQ(a.history.size(), 5u);
  ASSERT_EQ(b.history.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.history[i].train_loss, b.history[i].train_loss) << i;
    EXPECT_EQ(
        a.history[i].test_accuracy == b.history[i].test_accuracy ||
            (std::isnan(a.history[i].test_accuracy) && std::isnan(b.history[i].test_accuracy)),
        true)
        << i;
  }
  // Two devices along "clients" (and one thread) train the same model bit for bit.
  CliResult mesh = run(path("mesh"), 5, {"--devices", "2", "--threads", "1"});
  ASSERT_EQ(mesh.code, 0) << mesh.err;
  drx::data::Checkpoint m = drx::data::read_checkpoint(path("mesh/checkpoint.bin"));
  EXPECT_TRUE(same_tree(a.params, m.params));
  EXPECT_TRUE(same_tree(a.state, m.state));

  // No temporary files anywhere.
  EXPECT_EQ(dir_entries(path("part")),
            (std::vector<std::string>{"checkpoint.bin", "metrics.csv", "metrics.svg"}));

  // Resuming under a different training configuration is refused, naming the flag.
  CliResult other = run(path("part"), 6, {"--resume", "--client-lr", "0.3"});
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("--client-lr"), std::string::npos) << other.err;
  // ... as is a damaged checkpoint, and a missing one.
  std::string bytes = slurp(path("part/checkpoint.bin"));
  spit(path("part/checkpoint.bin"), bytes.substr(0, bytes.size() - 10));
  CliResult damaged = run(path("part"), 6, {"--resume"});
  EXPECT_EQ(damaged.code, 1);
  EXPECT_NE(damaged.err.find("corrupt checkpoint"), std::string::npos) << damaged.err;
  CliResult missing = run(path("elsewhere"), 6, {"--resume"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("no checkpoint"), std::string::npos) << missing.err;
}

TEST_F(FedavgTool, AnEarlierRunIsNotOverwrittenByAccident) {
  const std::string data = synthetic_data();
  ASSERT_EQ(cli(quick_run(data, path("out"), 2)).code, 0);
  const std::string before = slurp(path("out/checkpoint.bin"));
  std::vector<std::string> again = quick_run(data, path("out"), 3);
  CliResult r = cli(again);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds the checkpoint of an earlier run; pass --resume"), std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(path("out/checkpoint.bin")), before);
  again.push_back("--overwrite");
  ASSERT_EQ(cli(again).code, 0);
  EXPECT_EQ(drx::data::read_checkpoint(path("out/checkpoint.bin")).round, 3);
  again.push_back("--resume");
  EXPECT_EQ(cli(again).code, 2);
}

TEST_F(FedavgTool, LeftoverTemporaryFilesAreRemovedAtStart) {
  const std::string data = synthetic_data();
  const std::string out = path("out");
  fs::create_directories(out);
  // What write_file_atomic leaves when a run is killed between mkstemp and rename.
  const std::vector<std::string> leftovers = {"checkpoint.bin.tmp.a1B2c3", "metrics.csv.tmp.ZZZZZZ",
                                              "metrics.svg.tmp.000000"};
  // Not temporary files of this tool's outputs: another file's, or not mkstemp's suffix.
  const std::vector<std::string> kept = {"notes.txt", "notes.txt.tmp.abcdef",
                                         "checkpoint.bin.tmp.abc", "metrics.csv.tmp.ab-cd_"};
  for (const std::string& name : leftovers) spit(out + "/" + name, "partial");
  for (const std::string& name : kept) spit(out + "/" + name, "mine");
  fs::create_directories(out + "/metrics.svg.tmp.Dir123");  // only files are removed

  fa::Options o = fa::parse_options({"--data", data, "--out", out, "--rounds", "1", "--clients",
                                     "4", "--cohort", "2", "--hidden", "8", "--quiet"});
  std::ostringstream sink;
  fa::run_fedavg(o, sink, sink, false);

  std::vector<std::string> expected = kept;
  expected.insert(expected.end(),
                  {"checkpoint.bin", "metrics.csv", "metrics.svg", "metrics.svg.tmp.Dir123"});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(dir_entries(out), expected);
  for (const std::string& name : kept) EXPECT_EQ(slurp(out + "/" + name), "mine") << name;
}

TEST_F(FedavgTool, FedAdamHyperparametersReachTheServerAndTheCheckpoint) {
  const std::string data = synthetic_data();
  auto run = [&](const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> args = quick_run(data, out, 2);
    args.insert(args.end(), {"--server-opt", "fedadam", "--server-lr", "0.01"});
    args.insert(args.end(), more.begin(), more.end());
    CliResult r = cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return drx::data::read_checkpoint(out + "/checkpoint.bin");
  };
  drx::data::Checkpoint plain = run(path("a"), {});
  drx::data::Checkpoint tuned = run(path("b"), {"--adam-beta2", "0.5", "--adam-eps", "0.1"});
  // Another beta2 and tau give another model; the flags are part of the configuration.
  EXPECT_FALSE(same_tree(plain.params, tuned.params));
  bool recorded = false;
  for (const auto& [flag, value] : tuned.config) recorded = recorded || flag == "--adam-eps";
  EXPECT_TRUE(recorded);
}

TEST_F(FedavgTool, TimeBudgetStopsWithACheckpointAndResumes) {
  const std::string data = synthetic_data();
  const std::vector<std::string> args = drx::testing::with_flags(
      quick_run(data, path("out"), 4), {"--max-seconds", "0.000001", "--checkpoint-every", "100"});
  CliResult r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("stopped by --max-seconds"), std::string::npos) << r.out;
  drx::data::Checkpoint c = drx::data::read_checkpoint(path("out/checkpoint.bin"));
  EXPECT_EQ(c.round, 1);  // a run always makes progress
  ASSERT_EQ(c.history.size(), 1u);
  EXPECT_TRUE(c.history[0].evaluated());
  CliResult rest = cli([&] {
    std::vector<std::string> a = quick_run(data, path("out"), 4);
    a.push_back("--resume");
    return a;
  }());
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.out.find("after 4/4 rounds"), std::string::npos) << rest.out;
  EXPECT_EQ(drx::data::read_checkpoint(path("out/checkpoint.bin")).round, 4);
}

TEST_F(FedavgTool, ProgressLines) {
  const std::string data = synthetic_data();
  fa::Options o =
      fa::parse_options({"--data", data, "--out", path("out"), "--rounds", "3", "--clients", "4",
                         "--cohort", "2", "--hidden", "8", "--eval-every", "2"});
  std::ostringstream out, plain, tty;
  fa::run_fedavg(o, out, plain, false);
  EXPECT_NE(plain.str().find("round 1/3 loss "), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("round 3/3 loss "), std::string::npos) << plain.str();
  EXPECT_EQ(plain.str().find('\r'), std::string::npos);
  fs::remove_all(path("out"));
  fa::run_fedavg(o, out, tty, true);
  EXPECT_NE(tty.str().find("\rround 2/3 ["), std::string::npos) << tty.str();
  o.quiet = true;
  o.overwrite = true;
  std::ostringstream quiet;
  fa::run_fedavg(o, out, quiet, true);
  EXPECT_EQ(quiet.str(), "");
}

// Reads metrics.csv into rows of cells (a trailing empty cell kept).
std::vector<std::vector<std::string>> csv_rows(const std::string& text, std::string* header) {
  std::istringstream csv(text);
  std::string line;
  std::getline(csv, line);
  *header = line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

TEST_F(FedavgTool, DpFedAvgReportsTheAccountantsEpsilonAndResumesBitExactly) {
  const std::string data = synthetic_data();
  for (const std::string& sampling : {std::string("poisson"), std::string("fixed")}) {
    auto run = [&](const std::string& out, int64_t rounds, std::vector<std::string> more) {
      std::vector<std::string> args = quick_run(data, out, rounds);
      for (const char* a :
           {"--dp-clip", "0.5", "--dp-noise", "1.1", "--dp-delta", "1e-3", "--dp-sampling"})
        args.push_back(a);
      args.push_back(sampling);
      args.insert(args.end(), more.begin(), more.end());
      return cli(args);
    };
    CliResult full = run(path("dp-" + sampling), 4, {});
    ASSERT_EQ(full.code, 0) << full.err;
    EXPECT_NE(full.out.find("DP (epsilon "), std::string::npos) << full.out;
    std::string header;
    auto rows = csv_rows(slurp(path("dp-" + sampling + "/metrics.csv")), &header);
    EXPECT_EQ(header, "round,train_loss,test_loss,test_accuracy,elapsed_s,epsilon");
    ASSERT_EQ(rows.size(), 4u);
    // The population's 10 clients, a cohort of 3: q = 0.3 (Poisson), or 3 of 10 replaced-one
    // with the sum's sensitivity 2C (multiplier z / 2).
    const bool fixed = sampling == "fixed";
    for (int64_t r : {2, 4}) {
      drx::privacy::RdpAccountant a(
          fixed ? drx::privacy::Sampling::fixed_size : drx::privacy::Sampling::poisson, 3, 10,
          fixed ? 0.55 : 1.1);
      a.step(r);
      const double want = a.epsilon(1e-3).epsilon;
      ASSERT_EQ(rows[static_cast<size_t>(r - 1)].size(), 6u);
      EXPECT_NEAR(std::stod(rows[static_cast<size_t>(r - 1)][5]), want, 1e-5 * want) << sampling;
    }
    EXPECT_EQ(rows[0][5], "");  // not evaluated: no epsilon column value
    // The round state carries the clip and the noise key; a resume continues bit for bit.
    CliResult part = run(path("dp-part-" + sampling), 2, {});
    ASSERT_EQ(part.code, 0) << part.err;
    CliResult resumed = run(path("dp-part-" + sampling), 4, {"--resume"});
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    drx::data::Checkpoint a =
        drx::data::read_checkpoint(path("dp-" + sampling + "/checkpoint.bin"));
    drx::data::Checkpoint b =
        drx::data::read_checkpoint(path("dp-part-" + sampling + "/checkpoint.bin"));
    EXPECT_TRUE(same_tree(a.params, b.params));
    EXPECT_TRUE(same_tree(a.state, b.state));
    EXPECT_EQ(a.state.structure(), "{dp:{clip:*,key:*},server:[]}");
    EXPECT_EQ(slurp(path("dp-" + sampling + "/metrics.csv")).substr(0, 20),
              slurp(path("dp-part-" + sampling + "/metrics.csv")).substr(0, 20));
    EXPECT_EQ(csv_rows(slurp(path("dp-part-" + sampling + "/metrics.csv")), &header)[3][5],
              rows[3][5]);
  }
  // Adaptive clipping moves the clip; its count noise must leave budget for the update.
  std::vector<std::string> args = quick_run(data, path("dp-adaptive"), 2);
  for (const char* a :
       {"--dp-clip", "0.5", "--dp-noise", "0.5", "--dp-quantile", "0.5", "--dp-count-noise", "1"})
    args.push_back(a);
  CliResult adaptive = cli(args);
  ASSERT_EQ(adaptive.code, 0) << adaptive.err;
  drx::data::Checkpoint c = drx::data::read_checkpoint(path("dp-adaptive/checkpoint.bin"));
  EXPECT_NE(c.state["dp"]["clip"].array().item<float>(), 0.5f);
  args.back() = "0.2";  // 2 x 0.2 < 0.5
  CliResult refused = cli(args);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("--dp-count-noise"), std::string::npos) << refused.err;
  CliResult orphan = cli({"fedavg", "--dp-noise", "1"});
  EXPECT_EQ(orphan.code, 2);
  EXPECT_NE(orphan.err.find("--dp-clip"), std::string::npos) << orphan.err;
  // An infinite clip with noise would add infinite noise (a NaN model with an epsilon beside it).
  CliResult infinite = cli({"fedavg", "--dp-clip", "inf", "--dp-noise", "1"});
  EXPECT_EQ(infinite.code, 2);
  EXPECT_NE(infinite.err.find("--dp-clip inf with --dp-noise 1"), std::string::npos)
      << infinite.err;
  // Clipping alone is not privacy: said at the start.
  args = quick_run(data, path("dp-clip-only"), 1);
  args.insert(args.end(), {"--dp-clip", "0.5"});
  CliResult clip_only = cli(args);
  ASSERT_EQ(clip_only.code, 0) << clip_only.err;
  EXPECT_NE(clip_only.err.find("not differentially private"), std::string::npos) << clip_only.err;
}

TEST_F(FedavgTool, RealDatasetLearns) {
  if (!fs::exists(std::string(drx::data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << drx::data::kFashionMnistDir;
  const std::string out = path("out");
  const int64_t rounds = 8;
  CliResult r = cli({"fedavg", "--out", out, "--rounds", std::to_string(rounds), "--clients", "20",
                     "--cohort", "4", "--max-examples", "6000", "--hidden", "64", "--eval-every",
                     "4", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fedavg: test accuracy "), std::string::npos) << r.out;

  std::string header;
  std::vector<std::vector<std::string>> rows = csv_rows(slurp(out + "/metrics.csv"), &header);
  EXPECT_EQ(header, "round,train_loss,test_loss,test_accuracy,elapsed_s");
  for (const auto& cells : rows) ASSERT_EQ(cells.size(), 5u);
  ASSERT_EQ(rows.size(), static_cast<size_t>(rounds));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], std::to_string(i + 1));
    EXPECT_EQ(rows[i][3].empty(), (i + 1) % 4 != 0) << "evaluated only every 4 rounds";
  }
  EXPECT_LT(std::stod(rows.back()[1]), std::stod(rows.front()[1])) << "training loss decreases";
  EXPECT_LT(std::stod(rows[7][2]), std::stod(rows[3][2])) << "test loss decreases";
  EXPECT_GT(std::stod(rows.back()[3]), 0.3) << "above chance (0.1)";
  EXPECT_LE(std::stod(rows.back()[3]), 1.0);

  const std::string svg = slurp(out + "/metrics.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Balanced tags: every opening tag is closed or self-closing, in order.
  std::vector<std::string> open;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    size_t end = svg.find('>', at);
    ASSERT_NE(end, std::string::npos);
    std::string tag = svg.substr(at + 1, end - at - 1);
    std::string name =
        tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" />", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] == '/') {
      ASSERT_FALSE(open.empty()) << tag;
      EXPECT_EQ(open.back(), name);
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(name);
    }
  }
  EXPECT_TRUE(open.empty());
  // The accuracy polyline has one point per evaluation (rounds 4 and 8), the loss line one
  // per round.
  auto points = [&](const std::string& id) {
    size_t at = svg.find("id=\"" + id + "\"");
    EXPECT_NE(at, std::string::npos) << id;
    at = svg.find("points=\"", at) + 8;
    std::string pts = svg.substr(at, svg.find('"', at) - at);
    return std::count(pts.begin(), pts.end(), ',');
  };
  EXPECT_EQ(points("test_accuracy"), 2);
  EXPECT_EQ(points("train_loss"), rounds);
}

}  // namespace
