// The one MapReduce-form driver (drx/export/mapreduce_driver.h): over the
// in-process executor, the files executor and an executor of the test's own
// it gives jit's results bitwise; `drx mapreduce run` runs a split program and
// the rounds `drx fedavg --export-rounds` wrote from their files alone, and
// names the file at fault when one is missing or wrong.
#include "drx/export/mapreduce_driver.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "drx/data/client_files.h"
#include "drx/drx.h"
#include "examples/fed_hypergradient_lib.h"
#include "tests/cli_util.h"
#include "tests/mapreduce_cases.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;

std::vector<Array> jit_results(const Program& p, const std::vector<Array>& args) {
  return compile(simplify(p)).run(args);
}

std::map<std::string, Array> server_of(const MapReduceForm& form, const std::vector<Array>& args) {
  std::map<std::string, Array> server;
  for (size_t k = 0; k < form.inputs.size(); ++k)
    if (!form.client_data.count(form.inputs[k])) server[form.inputs[k]] = args[k];
  return server;
}

std::vector<Array> in_process(const MapReduceForm& form, const std::vector<Array>& args,
                              int64_t per_call = 0) {
  InProcessClientExecutor clients(form, args);
  return run_mapreduce(form, server_of(form, args), clients, {.clients_per_call = per_call});
}

// A program, its inputs, and its form.
struct Case {
  std::string what;
  Program program;
  std::vector<Array> args;
};

// Two stages: the clients keep the model they trained in stage 0 (client state) and evaluate it
// against the averaged one in stage 1.
Case personalised_evaluation() {
  auto f = personalised_evaluation_program();
  const std::vector<Type> types = {Type(f64, {3}), Type(f64, {4, 6, 3}), Type(f64, {4, 6})};
  return {
      "personalised evaluation",
      trace(f, types),
      {random_array({3}, f64, 1), random_array({4, 6, 3}, f64, 2), random_array({4, 6}, f64, 3)}};
}

// A weighted mean, the client index, max and min.
Case weighted_mean() {
  auto f = weighted_mean_program();
  const std::vector<Type> types = {Type(f32, {4}), Type(f32, {5, 4}), Type(f32, {5})};
  return {"weighted mean",
          trace(f, types),
          {random_array({4}, f32, 1), random_array({5, 4}, f32, 2),
           Array::from_vector<float>({1, 2, 0.5f, 3, 1}, {5})}};
}

// The hypergradient of a FedAvg round: a round, then an evaluation whose backward pass needs the
// clients again.
Case hypergradient() {
  fedhg::Config c;
  c.clients = 5;
  const fedhg::Data d = fedhg::make_data(c);
  const std::vector<Type> types = {Type(f64, {c.dim}), Type(f64, {}), Type(f64, d.x.shape()),
                                   Type(f64, d.y.shape())};
  return {"hypergradient",
          trace(value_and_grad(fedhg::hyper_objective(c), 1), types),
          {random_array({c.dim}, f64, 4), full({}, 0.4, f64), d.x, d.y}};
}

// A scratch folder for one test, removed at its end.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::path(::testing::TempDir()) /
          ("drx_driver_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

// The server's inputs as SERVER/NAME.npy and client i's data as CLIENTS/i/NAME.npy.
void write_inputs(const MapReduceForm& form, const std::vector<Array>& args, const fs::path& server,
                  const fs::path& clients) {
  fs::create_directories(server);
  for (const auto& [name, value] : server_of(form, args))
    save_npy(data::value_file(server.string(), name), value);
  for (int64_t i = 0; i < form.clients; ++i) {
    const fs::path mine = clients / std::to_string(i);
    fs::create_directories(mine);
    for (const auto& [name, k] : form.client_data)
      save_npy(data::value_file(mine.string(), name), batch_row(args[k], i));
  }
}

TEST(MapReduceDriver, InProcessExecutorGivesJitsResultsBitwise) {
  for (const Case& c : {personalised_evaluation(), weighted_mean(), hypergradient()}) {
    SCOPED_TRACE(c.what);
    const MapReduceForm form = mapreduce_form(c.program);
    const std::vector<Array> want = jit_results(c.program, c.args);
    EXPECT_TRUE(BitwiseEqual(in_process(form, c.args), want));
    // Clients handed over in blocks of 2 (the last one short): the same bits.
    EXPECT_TRUE(BitwiseEqual(in_process(form, c.args, 2), want));
    EXPECT_TRUE(BitwiseEqual(run_mapreduce_form(form, c.args), want));
  }
  const Case c = personalised_evaluation();
  const MapReduceForm form = mapreduce_form(c.program);
  ASSERT_EQ(form.stages.size(), 2u);
  EXPECT_FALSE(form.stages[0].state_out.empty()) << "the case exercises client state";
  // The server's inputs are checked by name and type.
  InProcessClientExecutor clients(form, c.args);
  std::map<std::string, Array> server = server_of(form, c.args);
  const std::string w = server.begin()->first;
  server[w] = full({4}, 1.0, f64);
  expect_error([&] { run_mapreduce(form, server, clients); },
               {"server input '" + w + "' holds f64[4], expected f64[3]"});
  server.erase(w);
  expect_error([&] { run_mapreduce(form, server, clients); },
               {"no value for the server input '" + w + "'"});
}

TEST(MapReduceDriver, FileExecutorEqualsInProcess) {
  Scratch s;
  for (const Case& c : {personalised_evaluation(), hypergradient()}) {
    SCOPED_TRACE(c.what);
    const MapReduceForm form = mapreduce_form(c.program);
    const fs::path clients = s.dir / c.what / "clients", outs = s.dir / c.what / "outs";
    write_inputs(form, c.args, s.dir / c.what / "server", clients);
    std::ostringstream warn;
    data::FileClientExecutor files(form, clients.string(), warn, outs.string());
    const std::vector<Array> got = run_mapreduce(form, server_of(form, c.args), files);
    EXPECT_TRUE(BitwiseEqual(got, in_process(form, c.args)));
    EXPECT_EQ(warn.str(), "");
    // Each client's outputs of each stage, where drx aggregate reads them.
    for (size_t t = 0; t < form.stages.size(); ++t)
      for (int64_t i = 0; i < form.clients; ++i)
        for (const std::string& name : form.stages[t].client_work.outputs)
          EXPECT_TRUE(fs::exists(data::value_file(
              (outs / ("stage" + std::to_string(t)) / std::to_string(i)).string(), name)))
              << "stage " << t << " client " << i << " " << name;
  }
}

// Client i's output is x_i * w, computed here in plain C++, handed over in whatever order the
// test says.
class TableExecutor : public ClientExecutor {
 public:
  explicit TableExecutor(std::vector<float> x) : x_(std::move(x)) {}
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool swap_first_two = false, skip_last = false;

  void run(const ClientStage& stage, int64_t begin, int64_t end, ClientOutputs& outputs) override {
    ranges.emplace_back(begin, end);
    const float w = stage.broadcast.begin()->second.item<float>();
    std::vector<int64_t> order;
    for (int64_t i = begin; i < end; ++i) order.push_back(i);
    if (swap_first_two && begin == 0) std::swap(order[0], order[1]);
    if (skip_last && end == stage.form.clients) order.pop_back();
    for (int64_t i : order)
      outputs.add_outputs(i, {Array::from_vector<float>({x_[static_cast<size_t>(i)] * w}, {})});
  }

 private:
  std::vector<float> x_;
};

TEST(MapReduceDriver, CustomExecutorGetsTheRangesAndIsAggregatedInClientOrder) {
  auto f =
      program({{"clients", 5}},
              [](Value w, Value x) {
                return reduce_sum(map_fn([](Value a, Value b) { return a * b; }, broadcast(w), x));
              },
              {"", "clients"});
  // Values whose f32 sum depends on the order: the canonical tree of 5, ((x0 + x1) + (x2 + x3))
  // + x4, gives (1e8 + -1e8) + 3 = 3; left to right, ((((1e8 + 1) - 1e8) + 1) + 3) = 4.
  const std::vector<float> x = {1e8f, 1, -1e8f, 1, 3};
  const Program p = trace(f, {Type(f32, {}), Type(f32, {5})});
  const std::vector<Array> args = {full({}, 1.0, f32), Array::from_vector<float>(x, {5})};
  const MapReduceForm form = mapreduce_form(p);
  ASSERT_EQ(form.stages.size(), 1u);
  ASSERT_EQ(form.stages[0].client_work.outputs.size(), 1u);

  TableExecutor table(x);
  const std::vector<Array> got =
      run_mapreduce(form, server_of(form, args), table, {.clients_per_call = 2});
  EXPECT_EQ(table.ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 4}, {4, 5}}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].item<float>(), 3.0f);
  EXPECT_TRUE(BitwiseEqual(got, jit_results(p, args)));

  TableExecutor swapped(x);
  swapped.swap_first_two = true;
  expect_error([&] { run_mapreduce(form, server_of(form, args), swapped); },
               {"client 1's outputs came when client 0's were expected"});
  TableExecutor short_one(x);
  short_one.skip_last = true;
  expect_error([&] { run_mapreduce(form, server_of(form, args), short_one); },
               {"the outputs of 4 clients were aggregated, expected all 5"});
}

// A program split with drx split, its inputs written as files.
struct SplitOnDisk {
  Scratch scratch;
  Case c = hypergradient();
  MapReduceForm form = mapreduce_form(c.program);
  fs::path plan, server, clients, out;
  SplitOnDisk() {
    const fs::path prog = scratch.dir / "hyper.drx";
    std::ofstream(prog) << to_string(c.program);
    const fs::path parts = scratch.dir / "parts";
    CliResult r = cli({"split", prog.string(), "--out", parts.string()});
    EXPECT_EQ(r.code, 0) << r.err;
    plan = parts / "plan.json";
    server = scratch.dir / "server";
    clients = scratch.dir / "clients";
    out = scratch.dir / "out";
    write_inputs(form, c.args, server, clients);
  }
  CliResult run(std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"mapreduce",      "run",      plan.string(),   "--clients",
                                     clients.string(), "--server", server.string(), "--out",
                                     out.string()};
    args.insert(args.end(), more.begin(), more.end());
    return cli(args);
  }
};

TEST(MapReduceDriver, MapreduceRunCommandGivesJitsResultsFromFiles) {
  SplitOnDisk s;
  const fs::path client_outs = s.scratch.dir / "client_outs";
  CliResult r = s.run({"--client-outputs", client_outs.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ran 2 stages over 5 clients; wrote 2 outputs"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  const std::vector<Array> want = jit_results(s.c.program, s.c.args);
  ASSERT_EQ(want.size(), s.form.outputs.size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_TRUE(
        load_npy(data::value_file(s.out.string(), s.form.outputs[k])).bitwise_equal(want[k]))
        << "output " << k;
  // The clients' outputs it wrote are what drx aggregate folds: the same stage-1 aggregates that
  // led to the results above.
  const fs::path agg = s.scratch.dir / "agg";
  r = cli({"aggregate", s.plan.string(), "--stage", "1", "--clients",
           (client_outs / "stage1").string(), "--out", agg.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const AggregationSpec& a : s.form.stages[1].aggregations)
    EXPECT_TRUE(fs::exists(data::value_file(agg.string(), a.server_value))) << a.server_value;
  // Its help, as drx help lists it.
  r = cli({"help", "mapreduce"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: drx mapreduce run PLAN.json --clients DIR"), std::string::npos)
      << r.out;
  EXPECT_NE(cli({"help"}).out.find("mapreduce run a whole MapReduce plan"), std::string::npos);
}

TEST(MapReduceDriver, MapreduceRunNamesTheFileAtFault) {
  SplitOnDisk s;
  const std::string data_name = s.form.client_data.begin()->first;
  const fs::path victim = s.clients / "3" / (data_name + ".npy");
  const Array good = load_npy(victim.string());
  auto expect_refused = [&](const std::string& part) {
    CliResult r = s.run();
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(s.out)) << "something was written";
  };
  fs::remove(victim);
  expect_refused("client 3: missing '" + victim.string() + "' (" + data_name + ", expected");
  save_npy(victim.string(), full({7}, 1.0, f64));
  expect_refused("client 3: '" + victim.string() + "' holds f64[7], expected " +
                 s.form.types.at(data_name).str() + " (" + data_name + ")");
  save_npy(victim.string(), good);
  fs::rename(s.clients / "4", s.clients / "x4");
  expect_refused("client 4 has no folder '" + (s.clients / "4").string() + "'");
  fs::rename(s.clients / "x4", s.clients / "4");
  const std::string w = server_input_names(s.form)[0];
  const fs::path server_file = s.server / (w + ".npy");
  fs::rename(server_file, s.scratch.dir / "moved.npy");
  expect_refused("missing '" + server_file.string() + "' (" + w + ", expected " +
                 s.form.types.at(w).str() + ")");
  save_npy(server_file.string(), full({2, 2}, 1.0, f32));
  expect_refused("'" + server_file.string() + "' holds f32[2,2], expected " +
                 s.form.types.at(w).str());
  fs::rename(s.scratch.dir / "moved.npy", server_file);

  // A stray folder is named on stderr; the run goes on.
  fs::create_directories(s.clients / "abc");
  CliResult r = s.run();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("mapreduce run: ignoring '" + (s.clients / "abc").string() + "'"),
            std::string::npos)
      << r.err;

  // Bad command lines are usage errors (exit code 2) naming what is wrong.
  for (const auto& [args, part] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"mapreduce"}, "needs a subcommand"},
           {{"mapreduce", "walk"}, "unknown subcommand 'walk'"},
           {{"mapreduce", "run", s.plan.string(), "--clients", s.clients.string()},
            "missing --server"},
           {{"mapreduce", "run", s.plan.string(), "--clients", s.clients.string(), "--clients",
             s.clients.string(), "--server", s.server.string(), "--out", "o"},
            "--clients is given twice"},
           {{"mapreduce", "run", s.plan.string(), "--clients", "nowhere", "--server",
             s.server.string(), "--out", "o"},
            "--clients 'nowhere' is not a folder"},
           {{"mapreduce", "run", s.plan.string(), "--frobnicate"},
            "unknown flag '--frobnicate'"}}) {
    CliResult bad = cli(args);
    EXPECT_EQ(bad.code, 2) << part << ": " << bad.err;
    EXPECT_NE(bad.err.find(part), std::string::npos) << bad.err;
  }
}

// IDX files (plain bytes: the loader's zlib passes them through) of a learnable 10-class
// problem: class c lights up the c-th band of pixels.
void write_idx_dataset(const fs::path& dir) {
  fs::create_directories(dir);
  std::mt19937 rng(11);
  auto be32 = [](std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  };
  for (const auto& [prefix, n] : {std::pair{"train", 300}, {"t10k", 100}}) {
    std::string images, labels;
    be32(images, 0x803), be32(images, n), be32(images, 28), be32(images, 28);
    be32(labels, 0x801), be32(labels, n);
    for (int i = 0; i < n; ++i) {
      const int c = static_cast<int>(rng() % 10);
      labels.push_back(static_cast<char>(c));
      for (int p = 0; p < 784; ++p)
        images.push_back(static_cast<char>(rng() % 50 + (p / 78 == c ? 160 : 0)));
    }
    std::ofstream(dir / (std::string(prefix) + "-images-idx3-ubyte.gz"), std::ios::binary)
        << images;
    std::ofstream(dir / (std::string(prefix) + "-labels-idx1-ubyte.gz"), std::ios::binary)
        << labels;
  }
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The rounds drx fedavg --export-rounds writes run with drx mapreduce run alone, round 2 on
// round 1's outputs (as its carry file maps them), and give drx fedavg's results bitwise.
TEST(MapReduceDriver, FedavgExportedRoundsRunWithMapreduceRunAlone) {
  Scratch s;
  write_idx_dataset(s.dir / "data");
  const fs::path rounds = s.dir / "rounds";
  CliResult r = cli({"fedavg", "--data", (s.dir / "data").string(), "--rounds", "2", "--clients",
                     "6", "--cohort", "3", "--hidden", "8", "--batch", "8", "--quiet", "--out",
                     (s.dir / "fedavg").string(), "--export-rounds", rounds.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  fs::path previous;
  for (int round = 1; round <= 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const fs::path job = rounds / ("round-" + std::to_string(round));
    fs::path server = job / "server";
    if (!previous.empty()) {
      // The round's params and state are the previous round's results, nothing else.
      server = s.dir / ("server-" + std::to_string(round));
      std::istringstream carry(slurp(job / "carry"));
      int carried = 0;
      for (std::string from, to; carry >> from >> to; ++carried) {
        const fs::path dest = data::value_file(server.string(), to);
        fs::create_directories(fs::path(dest).parent_path());
        fs::copy_file(data::value_file(previous.string(), from), dest);
      }
      EXPECT_GT(carried, 0);
    }
    const fs::path out = s.dir / ("out-" + std::to_string(round));
    r = cli({"mapreduce", "run", (job / "parts" / "plan.json").string(), "--clients",
             (job / "clients").string(), "--server", server.string(), "--out", out.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    int compared = 0;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(job / "expected")) {
      if (!e.is_regular_file()) continue;
      const fs::path got = out / fs::relative(e.path(), job / "expected");
      ASSERT_TRUE(fs::exists(got)) << got;
      EXPECT_TRUE(load_npy(got.string()).bitwise_equal(load_npy(e.path().string())))
          << got << " differs from drx fedavg's";
      ++compared;
    }
    EXPECT_GT(compared, 2) << "the loss, the params and the state";
    previous = out;
  }
}

}  // namespace
}  // namespace drx::testing
