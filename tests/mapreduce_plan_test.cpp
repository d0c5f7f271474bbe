// The MapReduce plan on disk (drx/export/mapreduce_plan.h) and the caller's names for a
// form's inputs and outputs (drx/export/mapreduce_names.h): a plan written and read back is
// the same form; a schema-1 plan written by drx before schemas (tests/fixtures) still reads
// and runs to jit's results; an unknown schema is refused by name; a traced function's form
// is named by its argument and result trees and runs by those names to jit's bits.
#include "drx/export/mapreduce_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "drx/drx.h"
#include "drx/export/mapreduce_names.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(DRX_SOURCE_DIR) / "tests/fixtures/mapreduce_plan_schema1";

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::path(::testing::TempDir()) /
          ("drx_plan_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Program load(const fs::path& p) {
  Program program = parse_program(slurp(p));
  verify(program);
  return program;
}

std::vector<Array> leaf_arrays_of(const std::vector<Tree>& trees) {
  std::vector<Array> out;
  for (const Tree& t : trees)
    for (const Tree& l : tree_leaves(t)) out.push_back(l.array());
  return out;
}

std::vector<Array> jit_results(const Program& p, const std::vector<Array>& args) {
  return compile(simplify(p)).run(args);
}

bool contains(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

void expect_same_part(const Part& a, const Part& b) {
  EXPECT_EQ(to_string(a.program), to_string(b.program));
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
}

void expect_same_form(const MapReduceForm& a, const MapReduceForm& b) {
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.clients, b.clients);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.client_data, b.client_data);
  EXPECT_EQ(a.types, b.types);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const Stage &x = a.stages[s], &y = b.stages[s];
    expect_same_part(x.server_prepare, y.server_prepare);
    expect_same_part(x.client_work, y.client_work);
    expect_same_part(x.server_update, y.server_update);
    EXPECT_EQ(x.broadcast, y.broadcast);
    EXPECT_EQ(x.client_data, y.client_data);
    EXPECT_EQ(x.state_in, y.state_in);
    EXPECT_EQ(x.state_out, y.state_out);
    ASSERT_EQ(x.aggregations.size(), y.aggregations.size());
    for (size_t k = 0; k < x.aggregations.size(); ++k) {
      EXPECT_EQ(x.aggregations[k].client_value, y.aggregations[k].client_value);
      EXPECT_EQ(x.aggregations[k].kind, y.aggregations[k].kind);
      EXPECT_EQ(x.aggregations[k].weight, y.aggregations[k].weight);
      EXPECT_EQ(x.aggregations[k].server_value, y.aggregations[k].server_value);
    }
  }
}

// The fixture's program: a round whose clients keep their local model as client state for a
// personalised evaluation (two stages), w f64[3] on the server, x f64[4,6,3] and y f64[4,6]
// placed.
std::vector<Array> fixture_args() {
  return {random_array({3}, f64, 1), random_array({4, 6, 3}, f64, 2), random_array({4, 6}, f64, 3)};
}

TEST(MapReducePlan, WrittenThenReadIsTheSameFormAndRunsToJitsBits) {
  Scratch s;
  const Program p = load(kFixture / "program.drx");
  for (bool named : {false, true}) {
    SCOPED_TRACE(named ? "named" : "SSA names");
    const MapReduceForm form =
        named ? mapreduce_form(p, FormNames{{"w", "data/x", "data/y"}, {"w", "gap/max", "gap/sum"}})
              : mapreduce_form(p);
    const fs::path dir = s.dir / (named ? "named" : "ssa");
    write_mapreduce_plan(form, dir.string(), {.stablehlo = true, .op = "test"});
    EXPECT_NE(slurp(dir / "plan.json").find("\"schema\": 2"), std::string::npos);
    EXPECT_TRUE(fs::exists(dir / "stage1.client_work.mlir"));
    const MapReduceForm back = read_mapreduce_plan((dir / "plan.json").string(), "test");
    expect_same_form(back, form);
    EXPECT_TRUE(
        BitwiseEqual(run_mapreduce_form(back, fixture_args()), jit_results(p, fixture_args())));
  }
}

// tests/fixtures/mapreduce_plan_schema1/parts is what `drx split program.drx` wrote before
// plans had a schema (format drx-mapreduce-plan-1, no "schema" field).
TEST(MapReducePlan, ASchemaOnePlanOfTheOldCodeStillReadsAndRuns) {
  const std::string json = slurp(kFixture / "parts/plan.json");
  ASSERT_NE(json.find("\"format\": \"drx-mapreduce-plan-1\""), std::string::npos);
  ASSERT_EQ(json.find("\"schema\""), std::string::npos);
  const MapReduceForm old = read_mapreduce_plan((kFixture / "parts/plan.json").string());
  const Program p = load(kFixture / "program.drx");
  EXPECT_EQ(old.inputs, (std::vector<std::string>{"v0", "v1", "v2"}));
  expect_same_form(old, mapreduce_form(p));
  EXPECT_TRUE(
      BitwiseEqual(run_mapreduce_form(old, fixture_args()), jit_results(p, fixture_args())));
}

TEST(MapReducePlan, AnUnknownSchemaIsRefusedNamingItAndTheSupportedOnes) {
  Scratch s;
  fs::copy(kFixture / "parts", s.dir);
  const fs::path plan = s.dir / "plan.json";
  const std::string text = slurp(plan);
  const std::string format = "\"format\": \"drx-mapreduce-plan-1\"";
  ASSERT_NE(text.find(format), std::string::npos);
  for (const std::string schema : {"7", "\"2\"", "0"}) {
    std::string edited = text;
    edited.replace(edited.find(format), format.size(),
                   "\"format\": \"drx-mapreduce-plan\", \"schema\": " + schema);
    std::ofstream(plan) << edited;
    expect_error(
        [&] { read_mapreduce_plan(plan.string(), "aggregate"); },
        {"aggregate: '" + plan.string() + "'", "schema " + schema, "reads schemas 1 to 2"});
  }
  std::string other = text;
  other.replace(other.find(format), format.size(), "\"format\": \"something-else\"");
  std::ofstream(plan) << other;
  expect_error([&] { read_mapreduce_plan(plan.string()); },
               {"read_mapreduce_plan: '", "format something-else", "drx-mapreduce-plan"});
}

// One step of a small model on the clients' rows: params {dense0: {b, w}, scale} on the
// server, x placed; the new w and b replace the old, scale passes through.
Tree step(Tree params, Value x) {
  const Value w = params["dense0"]["w"], b = params["dense0"]["b"], scale = params["scale"];
  const Value per =
      map_fn([](Value wk, Value bk, Value xk) { return sum(square(matmul(xk, wk) + bk)); },
             broadcast(w), broadcast(b), x);
  const Value g = reduce_mean(map_fn(
      [](Value wk, Value xk) {
        return matmul(transpose(xk, {1, 0}), matmul(xk, wk));
      },
      broadcast(w), x));
  const Value loss = reduce_mean(per) * scale;
  return Tree::dict(
      {{"loss", loss},
       {"params", Tree::dict({{"dense0", Tree::dict({{"b", b * 0.5}, {"w", w - 0.1 * g}})},
                              {"scale", scale}})}});
}

TEST(MapReducePlan, ATracedTreeFunctionsFormIsNamedByItsTreesAndRunsByName) {
  const auto f = program({{"clients", 4}}, [](Tree params, Value x) { return step(params, x); },
                         {"", "clients"});
  const Tree params = Tree::dict({{"dense0", Tree::dict({{"b", random_array({2}, f32, 1)},
                                                         {"w", random_array({3, 2}, f32, 2)}})},
                                  {"scale", random_array({}, f32, 3)}});
  const Array x = random_array({4, 5, 3}, f32, 4);
  const NamedProgram named = trace_named(f, {"params", "x"}, params, x);
  const std::vector<std::string> inputs = {"params/dense0/b", "params/dense0/w", "params/scale",
                                           "x"};
  const std::vector<std::string> outputs = {"loss", "params/dense0/b", "params/dense0/w",
                                            "params/scale"};
  EXPECT_EQ(named.names.inputs, inputs);
  EXPECT_EQ(named.names.outputs, outputs);
  // Without argument names, the argument's index.
  EXPECT_EQ(trace_named(f, {}, params, x).names.inputs,
            (std::vector<std::string>{"arg0/dense0/b", "arg0/dense0/w", "arg0/scale", "arg1"}));
  // A result other than a dict is under "out"; list items are numbered.
  const Tree leaf(x);
  EXPECT_EQ(form_names({leaf}, leaf).outputs, (std::vector<std::string>{"out"}));
  EXPECT_EQ(form_names({leaf}, Tree::list({leaf, Tree::list({leaf})}), {"xs"}).outputs,
            (std::vector<std::string>{"out/0", "out/1/0"}));
  EXPECT_EQ(form_names({leaf}, leaf, {"xs"}).inputs, (std::vector<std::string>{"xs"}));
  // The program is drx::trace's.
  EXPECT_EQ(to_string(named.program), to_string(trace(f, params, x)));

  const MapReduceForm form = mapreduce_form(named.program, named.names);
  EXPECT_EQ(form.inputs, inputs);
  EXPECT_EQ(form.outputs, outputs);
  EXPECT_EQ(form.client_data, (std::map<std::string, size_t>{{"x", 3}}));
  EXPECT_EQ(form.types.at("x"), Type(f32, {5, 3}));  // one client's rows
  EXPECT_EQ(form.types.at("params/dense0/w"), Type(f32, {3, 2}));

  // Run by name: the server's values by input name, the results read by output name.
  std::map<std::string, Array> by_name;
  const std::vector<Tree> leaves = tree_leaves(params);
  for (size_t k = 0; k < leaves.size(); ++k) by_name[inputs[k]] = leaves[k].array();
  by_name["x"] = x;
  std::vector<Array> args;
  for (const std::string& name : form.inputs) args.push_back(by_name.at(name));
  Scratch s;
  write_mapreduce_plan(form, s.dir.string());
  const MapReduceForm back = read_mapreduce_plan((s.dir / "plan.json").string());
  expect_same_form(back, form);
  const std::vector<Array> got = run_mapreduce_form(back, args);
  const std::vector<Array> want = jit_results(named.program, leaf_arrays_of({params, x}));
  ASSERT_EQ(got.size(), outputs.size());
  EXPECT_TRUE(BitwiseEqual(got, want));
  // scale passed through: the same bits as the input of its name.
  EXPECT_TRUE(got[3].bitwise_equal(by_name.at("params/scale")));
}

// A value with two names is copied by the last server_update, and so is an update in place
// that a later stage would otherwise read past; names that are not file stems, reserved,
// repeated or miscounted, and an update in place of another type, are refused.
TEST(MapReducePlan, NamesAreCheckedAndUpdatesInPlaceWaitForTheLastRead) {
  const auto passes = program({{"clients", 4}},
                              [](Value w, Value x) {
                                return std::vector<Value>{reduce_sum(x), w};
                              },
                              {"", "clients"});
  const std::vector<Type> types = {Type(f32, {2}), Type(f32, {4, 2})};
  const Program p = trace(passes, types);
  const std::vector<Array> args = {random_array({2}, f32, 1), random_array({4, 2}, f32, 2)};
  const MapReduceForm alias = mapreduce_form(p, FormNames{{"w", "x"}, {"total", "w_copy"}});
  EXPECT_EQ(alias.outputs, (std::vector<std::string>{"total", "w_copy"}));
  EXPECT_EQ(alias.types.at("w_copy"), Type(f32, {2}));
  EXPECT_TRUE(BitwiseEqual(run_mapreduce_form(alias, args), jit_results(p, args)));

  // The input w kept as w_old while its update replaces it: in the last server_update (where
  // the update is computed) and in stage 0's server_prepare (whence it is broadcast).
  const auto keep = program({{"clients", 4}},
                            [](Value w, Value x) {
                              return std::vector<Value>{w + reduce_sum(x), w};
                            },
                            {"", "clients"});
  const auto early = program(
      {{"clients", 4}},
      [](Value w, Value x) {
        Value w2 = w * 2.0;
        Value r = reduce_sum(map_fn([](Value a, Value xk) { return a * xk; }, broadcast(w2), x));
        return std::vector<Value>{w2, r, w};
      },
      {"", "clients"});
  for (const Program& k : {trace(keep, types), trace(early, types)}) {
    const bool three = k.outputs.size() == 3;
    const FormNames names =
        three ? FormNames{{"w", "x"}, {"w", "r", "w_old"}} : FormNames{{"w", "x"}, {"w", "w_old"}};
    const std::vector<Array> got = run_mapreduce_form(mapreduce_form(k, names), args);
    EXPECT_TRUE(BitwiseEqual(got, jit_results(k, args)));
    EXPECT_TRUE(got.back().bitwise_equal(args[0]));
  }

  expect_error(
      [&] {
        mapreduce_form(p, FormNames{{"w", "x"}, {"v3", "w"}});
      },
      {"mapreduce_form: the name 'v3' is reserved"});
  expect_error(
      [&] {
        mapreduce_form(p, FormNames{{"w", "w"}, {"a", "b"}});
      },
      {"'w' is given to two inputs"});
  expect_error(
      [&] {
        mapreduce_form(p, FormNames{{"w", "x"}, {"a"}});
      },
      {"2 input and 1 output names for a program of 2 inputs and 2 outputs"});
  expect_error(
      [&] {
        mapreduce_form(p, FormNames{{"w", "../x"}, {"a", "b"}});
      },
      {"'../x' is not a valid name"});
  expect_error(
      [&] {
        mapreduce_form(p, FormNames{{"w", "x"}, {"x", "b"}});
      },
      {"output 'x' has the name of the clients' data input 'x'"});
  expect_error(
      [&] {
        tree_leaf_names(Tree::dict({{"a b", Tree(args[0])}}), "params");
      },
      {"the key 'a b' under 'params' is not a name segment"});

  // Stage 0 computes w1 from w; stage 1 still broadcasts w: w1 replaces w only at the end, in
  // the last server_update.
  const auto two = program(
      {{"clients", 4}},
      [](Value w, Value x) {
        Value w1 = reduce_mean(map_fn([](Value wk, Value xk) { return wk + xk; }, broadcast(w), x));
        Value gap = reduce_sum(map_fn([](Value a, Value b, Value xk) { return sum((a - b) * xk); },
                                      broadcast(w1), broadcast(w), x));
        return std::vector<Value>{w1, gap};
      },
      {"", "clients"});
  const Program q = trace(two, types);
  const MapReduceForm in_place = mapreduce_form(q, FormNames{{"w", "x"}, {"w", "gap"}});
  ASSERT_EQ(in_place.stages.size(), 2u);
  EXPECT_TRUE(contains(in_place.stages[1].broadcast, "w"));
  for (const Stage& st : in_place.stages)
    for (const Part* part : {&st.server_prepare, &st.server_update})
      EXPECT_EQ(contains(part->outputs, "w"), part == &in_place.stages[1].server_update);
  EXPECT_TRUE(BitwiseEqual(run_mapreduce_form(in_place, args), jit_results(q, args)));
  expect_error(
      [&] {
        mapreduce_form(q, FormNames{{"w", "x"}, {"gap", "w"}});
      },
      {"output 'w' is f32[] but input 'w' is f32[2]"});
}

}  // namespace
}  // namespace drx::testing
