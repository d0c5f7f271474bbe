// drx split, drx run on the parts and drx aggregate, as a batch system would
// drive them: every client's work a separate `drx run` on files, named as the
// .inputs/.outputs lists say; the result bitwise that of jit on the whole
// program. And the refusals of drx aggregate, after which nothing is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "drx/drx.h"
#include "drx/export/mapreduce_plan.h"
#include "examples/fed_hypergradient_lib.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<Array> jit_results_of(const Program& p, const std::vector<Array>& args) {
  return compile(simplify(p)).run(args);
}

// A scratch folder for one test, removed at its end.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::path(::testing::TempDir()) /
          ("drx_split_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

// Runs the part `base` (e.g. "stage0.client_work") with drx run, its inputs
// read as NAME.npy from the first folder of `from` that has them, its outputs
// written as NAME.npy into `to`.
void run_part(const fs::path& parts, const std::string& base, const std::vector<fs::path>& from,
              const fs::path& to) {
  std::vector<std::string> args = {"run", (parts / (base + ".drx")).string()};
  for (const std::string& name : read_lines(parts / (base + ".inputs"))) {
    fs::path file;
    for (const fs::path& d : from)
      if (fs::exists(d / (name + ".npy"))) file = d / (name + ".npy");
    ASSERT_FALSE(file.empty()) << base << " input " << name;
    args.insert(args.end(), {"--arg", file.string()});
  }
  fs::create_directories(to);
  for (const std::string& name : read_lines(parts / (base + ".outputs")))
    args.insert(args.end(), {"--out", (to / (name + ".npy")).string()});
  CliResult r = cli(args);
  ASSERT_EQ(r.code, 0) << base << ": " << r.err;
}

struct Split {
  Scratch scratch;
  fs::path parts, server, data;
  Program program;
  std::vector<Array> args;
  MapReduceForm form;

  // The hypergradient of a FedAvg round: a round, then an evaluation whose
  // backward pass needs the clients again.
  Split() {
    fedhg::Config c;
    c.clients = 5;
    const fedhg::Data d = fedhg::make_data(c);
    const std::vector<Type> types = {Type(f64, {c.dim}), Type(f64, {}), Type(f64, d.x.shape()),
                                     Type(f64, d.y.shape())};
    program = trace(value_and_grad(fedhg::hyper_objective(c), 1), types);
    args = {random_array({c.dim}, f64, 4), full({}, 0.4, f64), d.x, d.y};
    form = mapreduce_form(program);
    parts = scratch.dir / "parts";
    server = scratch.dir / "server";
    data = scratch.dir / "data";
    const fs::path prog = scratch.dir / "hyper.drx";
    std::ofstream(prog) << to_string(program);
    CliResult r = cli({"split", prog.string(), "--out", parts.string(), "--format", "stablehlo"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("into 2 stages"), std::string::npos) << r.out;
    // The server's inputs, and each client's rows of the placed ones.
    fs::create_directories(server);
    for (size_t k = 0; k < form.inputs.size(); ++k)
      save_npy((server / (form.inputs[k] + ".npy")).string(), args[k]);
    for (int64_t i = 0; i < form.clients; ++i) {
      const fs::path mine = data / std::to_string(i);
      fs::create_directories(mine);
      save_npy((mine / "client_index.npy").string(), full({}, static_cast<double>(i), DType::i32));
      for (const auto& [name, k] : form.client_data)
        save_npy((mine / (name + ".npy")).string(), batch_row(args[k], i));
    }
  }
  fs::path clients(size_t stage) const { return scratch.dir / ("clients" + std::to_string(stage)); }
  void client_work(size_t stage) {
    for (int64_t i = 0; i < form.clients; ++i) {
      const std::string id = std::to_string(i);
      // Client state stays in the client's own folder of the stage it was made in.
      std::vector<fs::path> from = {data / id, server};
      for (size_t t = 0; t < stage; ++t) from.push_back(clients(t) / id);
      run_part(parts, "stage" + std::to_string(stage) + ".client_work", from, clients(stage) / id);
    }
  }
};

TEST(CliSplit, PartsRunAsSeparateCommandsGiveJitsResultsBitwise) {
  Split s;
  ASSERT_EQ(s.form.stages.size(), 2u);
  for (size_t t = 0; t < s.form.stages.size(); ++t) {
    const std::string stage = "stage" + std::to_string(t);
    run_part(s.parts, stage + ".server_prepare", {s.server}, s.server);
    s.client_work(t);
    CliResult r = cli({"aggregate", (s.parts / "plan.json").string(), "--stage", std::to_string(t),
                       "--clients", s.clients(t).string(), "--out", s.server.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    run_part(s.parts, stage + ".server_update", {s.server}, s.server);
  }
  const std::vector<Array> want = jit_results_of(s.program, s.args);
  for (size_t k = 0; k < want.size(); ++k) {
    Array got = load_npy((s.server / (s.form.outputs[k] + ".npy")).string());
    EXPECT_TRUE(got.bitwise_equal(want[k]))
        << "output " << k << ": " << got.str() << " vs " << want[k].str();
  }
  // The client work also as StableHLO: imported back, it gives client 2's outputs bitwise.
  for (size_t t = 0; t < s.form.stages.size(); ++t) {
    const std::string base = "stage" + std::to_string(t) + ".client_work";
    std::ifstream in(s.parts / (base + ".mlir"));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<Array> inputs;
    for (const std::string& name : read_lines(s.parts / (base + ".inputs"))) {
      std::vector<fs::path> from = {s.data / "2", s.server};
      for (size_t u = 0; u < t; ++u) from.push_back(s.clients(u) / "2");
      for (const fs::path& d : from)
        if (fs::exists(d / (name + ".npy"))) {
          inputs.push_back(load_npy((d / (name + ".npy")).string()));
          break;
        }
    }
    CompileOptions as_client;  // as drx run --client
    as_client.map_body = true;
    const std::vector<Array> got =
        compile(simplify(from_stablehlo(text)), Mesh(), as_client).run(inputs);
    const std::vector<std::string> outs = read_lines(s.parts / (base + ".outputs"));
    ASSERT_EQ(got.size(), outs.size());
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_TRUE(
          got[k].bitwise_equal(load_npy((s.clients(t) / "2" / (outs[k] + ".npy")).string())))
          << base << " output " << outs[k];
  }
}

TEST(CliSplit, AggregateRefusesBadClientOutputsAndWritesNothing) {
  Split s;
  run_part(s.parts, "stage0.server_prepare", {s.server}, s.server);
  s.client_work(0);
  const std::string plan = (s.parts / "plan.json").string();
  const std::string value = s.form.stages[0].aggregations[0].client_value;
  const fs::path out = s.scratch.dir / "agg";
  auto aggregate = [&] {
    return cli({"aggregate", plan, "--stage", "0", "--clients", s.clients(0).string(), "--out",
                out.string()});
  };
  const fs::path victim = s.clients(0) / "3" / (value + ".npy");
  const Array good = load_npy(victim.string());
  auto expect_refused = [&](const std::string& part) {
    CliResult r = aggregate();
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << "something was written";
  };
  fs::remove(victim);
  expect_refused("client 3: missing '");
  {
    // Truncated: half of the file.
    std::string bytes = encode_npy(good);
    std::ofstream(victim, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_refused("client 3: ");
  save_npy(victim.string(), full({7}, 1.0, f64));
  expect_refused("client 3: '" + victim.string() + "' holds f64[7], expected");
  save_npy(victim.string(), convert_array(good, f32));
  expect_refused("holds f32");
  save_npy(victim.string(), good);
  fs::create_directories(s.clients(0) / "03");
  expect_refused("client 3 is given twice");
  fs::remove_all(s.clients(0) / "03");
  fs::remove_all(s.clients(0) / "4");
  expect_refused("client 4 has no folder");
}

// What a new user got wrong, answered with the flag, the path or the value at fault.
TEST(CliSplit, AggregateAndPlanMistakesAreNamed) {
  Split s;
  run_part(s.parts, "stage0.server_prepare", {s.server}, s.server);
  s.client_work(0);
  const std::string plan = (s.parts / "plan.json").string();
  const fs::path out = s.scratch.dir / "agg";
  auto aggregate = [&](const std::string& plan_file, const std::string& stage) {
    return cli({"aggregate", plan_file, "--stage", stage, "--clients", s.clients(0).string(),
                "--out", out.string()});
  };
  // A stage out of range is a usage error (exit 2) naming the flag and the range; "-1" once
  // read as 18446744073709551615.
  for (const std::string stage : {"-1", "9", "x", "99999999999999999999"}) {
    CliResult r = aggregate(plan, stage);
    EXPECT_EQ(r.code, 2) << stage << ": " << r.err;
    EXPECT_NE(r.err.find("--stage"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("0..1"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("18446744073709551615"), std::string::npos) << r.err;
  }
  // A stray folder among the clients' is named on stderr, not skipped in silence.
  fs::create_directories(s.clients(0) / "abc");
  CliResult r = aggregate(plan, "0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ignoring '" + (s.clients(0) / "abc").string() + "'"), std::string::npos)
      << r.err;
  // plan.json moved away from its parts: say where parts are looked for.
  const fs::path moved = s.scratch.dir / "elsewhere" / "plan.json";
  fs::create_directories(moved.parent_path());
  fs::copy_file(plan, moved);
  r = aggregate(moved.string(), "0");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("parts are read from the plan's own folder '" +
                       moved.parent_path().string() + "'"),
            std::string::npos)
      << r.err;
  // A plan with no clients.
  {
    std::ifstream in(plan);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"clients\": 5");
    ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
    text.replace(at, 12, "\"clients\": -1");
    std::ofstream(s.parts / "bad.json") << text;
  }
  r = aggregate((s.parts / "bad.json").string(), "0");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("clients is -1, expected at least 1"), std::string::npos) << r.err;
  // drx split --out naming a file.
  const fs::path file = s.scratch.dir / "a_file";
  std::ofstream(file) << "x";
  const fs::path prog = s.scratch.dir / "hyper.drx";
  r = cli({"split", prog.string(), "--out", file.string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--out '" + file.string() + "' is a file"), std::string::npos) << r.err;
}

// A client's work with products over 128 rows: drx run compiles it as the map_fn body it was cut
// from (one BLAS call per product, not row blocks over drx's threads) because of its name, so
// no flag is needed; --client is accepted, says it is deprecated and changes nothing.
TEST(CliSplit, AClientsWorkRunsAsItsMapBodyWithoutAFlag) {
  Scratch scratch;
  const int64_t clients = 2, rows = 300;
  const Program p =
      trace(program({{"clients", clients}},
                    [](Value w, Value xs) -> Value {
                      Value h = map_fn([](Value wi, Value xi) { return tanh(matmul(xi, wi)); },
                                       broadcast(w), xs);
                      return reduce_sum(h);
                    },
                    {"", "clients"}),
            {Type(f32, {64, 48}), Type(f32, {clients, rows, 64})});
  const MapReduceForm form = mapreduce_form(p);
  ASSERT_EQ(form.stages.size(), 1u);
  const Part& work = form.stages[0].client_work;
  EXPECT_TRUE(is_client_work(work.program));
  EXPECT_FALSE(is_client_work(form.stages[0].server_prepare.program));
  const fs::path file = scratch.dir / "stage0.client_work.drx";
  std::ofstream(file) << to_string(work.program);
  std::vector<std::string> args = {"run", file.string()};
  std::vector<Array> inputs;
  for (size_t k = 0; k < work.inputs.size(); ++k) {
    const Type& t = work.program.type_of(work.program.inputs[k]);
    inputs.push_back(random_array(t.shape, t.dtype, 40 + k));
    const fs::path in = scratch.dir / ("in" + std::to_string(k) + ".npy");
    save_npy(in.string(), inputs.back());
    args.insert(args.end(), {"--arg", in.string()});
  }
  ASSERT_EQ(work.program.outputs.size(), 1u);
  const fs::path out = scratch.dir / "out.npy";
  args.insert(args.end(), {"--out", out.string()});
  CompileOptions as_body;
  as_body.map_body = true;
  as_body.simplify = true;
  const Array want = compile(work.program, as_body).run(inputs)[0];
  CompileOptions top_level;
  top_level.simplify = true;
  if (compile(work.program, top_level).run(inputs)[0].bitwise_equal(want))
    std::cout << "note: this BLAS rounds a top-level product as a map body's here, so this test "
                 "cannot tell whether drx run recognised the client's work\n";
  CliResult r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(load_npy(out.string()).bitwise_equal(want));
  args.push_back("--client");
  r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("--client is deprecated"), std::string::npos) << r.err;
  EXPECT_TRUE(load_npy(out.string()).bitwise_equal(want));
}

// --input-names and --output-names name the plan's inputs, client data and outputs (a program
// file has no names of its own); the plan then runs, by those names, to jit's bits. Without
// one of the lists, its values are arg0, arg1, ... or out/0, out/1, ...
TEST(CliSplit, NamedInputsAndOutputsNameThePlansValues) {
  Scratch scratch;
  const fs::path prog =
      fs::path(DRX_SOURCE_DIR) / "tests/fixtures/mapreduce_plan_schema1/program.drx";
  const fs::path parts = scratch.dir / "parts";
  CliResult r = cli({"split", prog.string(), "--out", parts.string(), "--input-names",
                     "w,data/x,data/y", "--output-names", "w,gap/max,gap/sum"});
  ASSERT_EQ(r.code, 0) << r.err;
  const MapReduceForm form = read_mapreduce_plan((parts / "plan.json").string());
  EXPECT_EQ(form.inputs, (std::vector<std::string>{"w", "data/x", "data/y"}));
  EXPECT_EQ(form.outputs, (std::vector<std::string>{"w", "gap/max", "gap/sum"}));
  EXPECT_EQ(form.client_data, (std::map<std::string, size_t>{{"data/x", 1}, {"data/y", 2}}));
  std::ifstream in(prog);
  const Program p = parse_program(
      std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  const std::vector<Array> args = {random_array({3}, f64, 1), random_array({4, 6, 3}, f64, 2),
                                   random_array({4, 6}, f64, 3)};
  EXPECT_TRUE(BitwiseEqual(run_mapreduce_form(form, args), jit_results_of(p, args)));

  r = cli({"split", prog.string(), "--out", parts.string(), "--output-names", "a,b,c"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_mapreduce_plan((parts / "plan.json").string()).inputs,
            (std::vector<std::string>{"arg0", "arg1", "arg2"}));
  r = cli({"split", prog.string(), "--out", parts.string(), "--input-names", "w,x"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("split: --input-names names 2 values, but the program has 3"),
            std::string::npos)
      << r.err;
  r = cli({"split", prog.string(), "--out", parts.string(), "--input-names", "w,x y,z"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("split: --input-names: 'x y' is not a valid name"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace drx::testing
