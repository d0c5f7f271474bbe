// StableHLO out: every equation of the coverage programs, exported alone and
// read back with drx's importer, computes what the primitive computes (on the
// values the coverage programs give it); federated programs round-trip; the
// generic form parses with Debian's mlir-opt; shardings read back.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../examples/hierarchical_fedavg_lib.h"
#include "drx/core/primitive.h"
#include "drx/core/walk.h"
#include "drx/export/stablehlo.h"
#include "drx/stablehlo/mlir_ast.h"
#include "tests/test_util.h"

namespace drx::testing {

std::vector<Program> ir_text_coverage_programs();  // tests/ir_text_test.cpp

namespace {

namespace fs = std::filesystem;

// How far apart two floats of one dtype are: the count of representable
// values between them (0 for equal ones, +0 and -0 are 1 apart).
int64_t ulps_apart(const Array& a, const Array& b, int64_t i) {
  const size_t size = dtype_size(a.dtype());
  auto ordered = [&](const Array& x) {
    uint64_t bits = 0;
    std::memcpy(&bits, static_cast<const unsigned char*>(x.raw()) + i * size, size);
    const uint64_t sign = uint64_t{1} << (8 * size - 1);
    return (bits & sign) ? -static_cast<int64_t>(bits & ~sign) - 1 : static_cast<int64_t>(bits);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// Bitwise equal, except that any NaN equals any NaN (payloads may differ) and
// floats may be up to `ulps` apart.
::testing::AssertionResult SameValues(const Array& got, const Array& want, int64_t ulps = 0) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure()
           << got.str().substr(0, 60) << " vs " << want.str().substr(0, 60);
  const size_t size = dtype_size(got.dtype());
  for (int64_t i = 0; i < got.size(); ++i) {
    const auto* a = static_cast<const unsigned char*>(got.raw()) + i * size;
    const auto* b = static_cast<const unsigned char*>(want.raw()) + i * size;
    if (std::memcmp(a, b, size) == 0) continue;
    if (is_floating(got.dtype()) && std::isnan(got.element_as_double(i)) &&
        std::isnan(want.element_as_double(i)))
      continue;
    if (is_floating(got.dtype()) && ulps > 0 && !std::isnan(got.element_as_double(i)) &&
        !std::isnan(want.element_as_double(i)) && ulps_apart(got, want, i) <= ulps)
      continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << got.element_as_double(i)
                                         << " vs " << want.element_as_double(i);
  }
  return ::testing::AssertionSuccess();
}

// The lowerings that approximate their kernel rather than repeat its
// arithmetic, and by how many ulps they may differ from it
// (tests/stablehlo_export_numeric_test.cpp measures these bounds): erf is a
// rational approximation of std::erf (1 ulp, f32 and f64); erf_inv is the
// kernel's own polynomial in f32 (bitwise) and two Halley steps in f64 (3 ulp).
int64_t allowed_ulps(const std::string& primitive, DType dtype) {
  if (primitive == "erf") return 1;
  if (primitive == "erf_inv" && dtype == DType::f64) return 3;
  return 0;
}

// The one-equation program of e, whose operands have the given types.
Program single_equation(const Eqn& e, const Program& from) {
  Program q;
  q.name = e.prim->name();
  Eqn copy = e;
  copy.ins.clear();
  copy.outs.clear();
  for (int v : e.ins) {
    copy.ins.push_back(q.add_var(from.type_of(v)));
    q.inputs.push_back(copy.ins.back());
  }
  for (int v : e.outs) {
    copy.outs.push_back(q.add_var(from.type_of(v)));
    q.outputs.push_back(copy.outs.back());
  }
  q.eqns.push_back(std::move(copy));
  return q;
}

std::vector<Array> random_inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types())
    args.push_back(random_array(t.shape, t.dtype, seed++, -2, 2));
  return args;
}

TEST(StablehloExport, EveryEquationRoundTripsThroughTheImporter) {
  std::set<std::string> lowered, missing;
  int checked = 0;
  for (const Program& p : ir_text_coverage_programs()) {
    walk_program(p, random_inputs(p, 11), [&](size_t, const Eqn& e, const std::vector<Array>& ins) {
      std::vector<Array> want = e.prim->evaluate(ins, e.params);
      const Program one = single_equation(e, p);
      std::string text;
      try {
        text = to_stablehlo(one);
      } catch (const Error& err) {
        if (std::string(err.what()).find("no StableHLO lowering") == std::string::npos) throw;
        missing.insert(e.prim->name());
        return want;
      }
      lowered.insert(e.prim->name());
      SCOPED_TRACE(p.name + ": " + e.prim->name() + "\n" + text);
      for (bool generic : {false, true}) {
        StableHloOptions o;
        o.generic = generic;
        std::vector<Array> got;
        try {
          got = run(from_stablehlo(to_stablehlo(one, Mesh(), o)), ins);
        } catch (const Error& err) {
          ADD_FAILURE() << err.what();
          continue;
        }
        EXPECT_EQ(got.size(), want.size());
        for (size_t k = 0; k < got.size() && k < want.size(); ++k)
          EXPECT_TRUE(SameValues(got[k], want[k], allowed_ulps(e.prim->name(), want[k].dtype())))
              << "result " << k;
      }
      ++checked;
      return want;
    });
  }
  std::cout << "[ StablehloExport ] " << checked << " equations of " << lowered.size()
            << " primitives round-tripped\n";
  // Every primitive lowers (the coverage programs use every registered one).
  for (const std::string& n : missing)
    ADD_FAILURE() << "primitive '" << n << "' has no StableHLO lowering";
}

// The order and indexing primitives on what the coverage programs do not
// give them: NaNs of both signs, signed zeros, ties, integer and bool
// operands, negative and repeated indices; exported and read back, each
// equals drx bitwise.
TEST(StablehloExport, OrderAndIndexingRoundTripWithNaNsTiesAndNegativeIndices) {
  const float nan = std::nanf("");
  const Array x =
      f32_array({1, nan, -0.0f, 0, -INFINITY, 1, -nan, 2, 0, -0.0f, 2, INFINITY}, {3, 4});
  const Array xi = Array::from_vector<int32_t>({3, -1, 3, 0, 7, 0, 7, -5, 2, 2, -1, 3}, {3, 4});
  const Array xb =
      Array::from_vector<bool>({true, false, true, false, false, false, true, true}, {2, 4});
  const Array idx = Array::from_vector<int64_t>({-1, 0, 3, -4, 3}, {5});
  auto order_ops = [](Value v) -> std::vector<Value> {
    TopK t = top_k(v, 3);
    return {sort(v, 1), argsort(v, 1), sort(v, 0, true), argsort(v, 0, true), t.values,
            t.indices,  argmax(v, 1),  argmin(v, 1),     argmax(v, 0),        argmin(v, 0)};
  };
  std::vector<std::pair<Program, std::vector<Array>>> cases = {
      {trace(order_ops, {Type(DType::f32, {3, 4})}), {x}},
      {trace(order_ops, {Type(DType::i32, {3, 4})}), {xi}},
      {trace(order_ops, {Type(DType::bool_, {2, 4})}), {xb}},
      {trace(order_ops, {Type(DType::f64, {3, 4})}), {convert_array(x, DType::f64)}},
      {trace(order_ops, {Type(DType::bf16, {3, 4})}), {convert_array(x, DType::bf16)}},
      {trace(order_ops, {Type(DType::u8, {3, 4})}), {convert_array(xi, DType::u8)}},
      {trace(
           [](Value v, Value i) -> std::vector<Value> {
             Value u = reshape(arange(15, DType::f32), {3, 5});
             return {take(v, i, 1), scatter(v, i, u, 1), scatter_add(v, i, u, 1),
                     take(v, reshape(i, {5, 1}), 1)};
           },
           {Type(DType::f32, {3, 4}), Type(DType::i64, {5})}),
       {x, idx}},
      // Nothing to gather or scatter, nothing to keep.
      {trace(
           [](Value v, Value i) -> std::vector<Value> {
             Value u = fill({3, 0}, 1.0, DType::i32);
             return {take(v, i, 1), scatter(v, i, u, 1), scatter_add(v, i, u, 1),
                     top_k(v, 0).indices, sort(slice(v, {0, 0}, {3, 1}), 1)};
           },
           {Type(DType::i32, {3, 4}), Type(DType::i32, {0})}),
       {xi, Array(DType::i32, {0})}},
  };
  for (const auto& [p, args] : cases) {
    const std::vector<Array> want = run(p, args);
    for (bool generic : {false, true}) {
      StableHloOptions o;
      o.generic = generic;
      const std::string text = to_stablehlo(p, Mesh(), o);
      const std::vector<Array> got = run(from_stablehlo(text), args);
      ASSERT_EQ(got.size(), want.size()) << text;
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(SameValues(got[k], want[k])) << "result " << k << "\n" << text;
    }
  }
}

// A FedAvg round on a linear model: `steps` local SGD steps per client (a
// fori_loop, i.e. a scan, when more than one), averaged.
auto fedavg_fn(int64_t clients, int steps) {
  return program({{"clients", clients}},
                 [steps](Value w, Value lr, Value xs, Value ys) {
                   Value bw = broadcast(w, "clients");
                   Value blr = broadcast(lr, "clients");
                   Value local = map_fn(
                       [steps](Value wi, Value lri, Value x, Value y) {
                         auto loss = [x, y](Value v) {
                           Value r = matmul(x, v) - y;
                           return mean(r * r);
                         };
                         if (steps == 1) return wi - lri * grad(loss)(wi);
                         Tree out = fori_loop(
                             0, steps,
                             [&](const Value&, const Tree& v) {
                               return Tree(v.value() - lri * grad(loss)(v.value()));
                             },
                             Tree(wi));
                         return out.value();
                       },
                       bw, blr, xs, ys);
                   return reduce_mean(local);
                 },
                 {"", "", "clients", "clients"});
}

std::vector<Type> fedavg_types(int64_t clients) {
  return {Type(f32, {3}), Type(f32, {}), Type(f32, {clients, 5, 3}), Type(f32, {clients, 5})};
}

Program fedavg_round(int64_t clients) {
  return trace(fedavg_fn(clients, 1), fedavg_types(clients));
}

// to_stablehlo -> from_stablehlo equals drx::run, bitwise.
void expect_round_trip(const Program& p, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<Array> args = random_inputs(p, 3);
  for (Array& a : args)  // small learning rates keep the numbers tame
    if (a.shape().empty() && is_floating(a.dtype())) a = full({}, 0.05, a.dtype());
  const std::vector<Array> want = run(p, args);
  for (bool generic : {false, true}) {
    StableHloOptions o;
    o.generic = generic;
    const std::string text = to_stablehlo(p, Mesh({{"clients", 2}}), o);
    const std::vector<Array> got = run(from_stablehlo(text), args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(SameValues(got[k], want[k])) << "output " << k;
  }
}

TEST(StablehloExport, FederatedProgramsRoundTripBitwise) {
  auto round = fedavg_fn(5, 1);
  expect_round_trip(fedavg_round(5), "FedAvg round");
  expect_round_trip(trace(grad([round](Value w, Value lr, Value xs, Value ys) {
                            return sum(round(w, lr, xs, ys));
                          }),
                          fedavg_types(5)),
                    "gradient of the round");
  auto local_scan = fedavg_fn(5, 3);
  expect_round_trip(trace(local_scan, fedavg_types(5)), "three local steps (a scan)");
  // The hypergradient: d loss(round(w, lr)) / d lr, through the scan.
  expect_round_trip(trace(grad(
                              [local_scan](Value w, Value lr, Value xs, Value ys) {
                                Value next = local_scan(w, lr, xs, ys);
                                return sum(next * next);
                              },
                              1),
                          fedavg_types(5)),
                    "hypergradient");
  hfl::Config c;
  c.groups = 2, c.clients = 3, c.examples = 4, c.dim = 3, c.local_steps = 2, c.edge_rounds = 2;
  expect_round_trip(hfl::round_program(c), "hierarchical FedAvg, its loss and gradients");
}

TEST(StablehloExport, SingleReduceKeepsValuesWithinRounding) {
  const Program round = fedavg_round(5);
  std::vector<Array> args = random_inputs(round, 3);
  StableHloOptions o;
  o.single_reduce = true;
  const std::string text = to_stablehlo(round, Mesh(), o);
  EXPECT_EQ(text.find("stablehlo.slice"), std::string::npos);  // no tree
  EXPECT_TRUE(
      ArrayNear(run(from_stablehlo(text), args).at(0), to_doubles(run(round, args).at(0)), 1e-6));
}

TEST(StablehloExport, ShardingsFollowTheMesh) {
  const Program round = fedavg_round(8);
  for (int devices : {1, 2, 4}) {
    const std::string sdy = to_stablehlo(round, Mesh({{"clients", devices}}));
    EXPECT_NE(sdy.find("sdy.mesh @mesh = <[\"clients\"=" + std::to_string(devices) + "]>"),
              std::string::npos);
    EXPECT_NE(sdy.find("%arg2: tensor<8x5x3xf32> {sdy.sharding = #sdy.sharding<@mesh, "
                       "[{\"clients\"}, {}, {}]>}"),
              std::string::npos)
        << sdy;
    EXPECT_NE(sdy.find("%arg0: tensor<3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}"),
              std::string::npos);
    // After the two broadcasts and the map_fn; not after placing the arguments,
    // which carry their sharding.
    size_t constraints = 0;
    for (size_t at = sdy.find("sdy.sharding_constraint"); at != std::string::npos;
         at = sdy.find("sdy.sharding_constraint", at + 1))
      ++constraints;
    EXPECT_EQ(constraints, 3u) << sdy;
    stablehlo::ImportedModule m = stablehlo::import_module(stablehlo::parse_mlir(sdy));
    EXPECT_FALSE(m.sharding_notes.empty());
    StableHloOptions o;
    o.gspmd = true;
    const std::string gspmd = to_stablehlo(round, Mesh({{"clients", devices}}), o);
    const std::string n = std::to_string(devices);
    EXPECT_NE(gspmd.find("mhlo.sharding = \"{devices=[" + n + ",1,1]<=[" + n + "]}\""),
              std::string::npos)
        << gspmd;
    EXPECT_NE(gspmd.find("mhlo.sharding = \"{replicated}\""), std::string::npos);
    EXPECT_NE(gspmd.find("call_target_name = \"Sharding\""), std::string::npos);
    // Read back by the parser: the arguments' attributes, in order (w, lr, xs, ys).
    for (const std::string& text : {sdy, gspmd}) {
      const stablehlo::Module parsed = stablehlo::parse_mlir(text);
      ASSERT_EQ(parsed.functions.size(), 1u);
      const auto& attrs = parsed.functions[0].argument_attributes;
      ASSERT_EQ(attrs.size(), 4u);
      for (const auto& a : attrs) {
        ASSERT_EQ(a.size(), 1u);
        EXPECT_EQ(a[0].first, text == sdy ? "sdy.sharding" : "mhlo.sharding");
      }
      if (text == gspmd) {
        EXPECT_EQ(attrs[0][0].second.text, "{replicated}");
        EXPECT_EQ(attrs[2][0].second.text, "{devices=[" + n + ",1,1]<=[" + n + "]}");
        EXPECT_EQ(attrs[3][0].second.text, "{devices=[" + n + ",1]<=[" + n + "]}");
      }
    }
    // Values do not change.
    std::vector<Array> args = random_inputs(round, 5);
    EXPECT_TRUE(SameValues(run(from_stablehlo(gspmd), args).at(0), run(round, args).at(0)));
  }
}

// Nested placements shard the outer axis; a mesh axis that is not a placement
// shards nothing, and other mesh axes replicate (GSPMD: last_tile_dim_replicate).
TEST(StablehloExport, NestedPlacementsShardTheOuterAxis) {
  hfl::Config c;
  c.groups = 2, c.clients = 3, c.examples = 4, c.dim = 3, c.local_steps = 1, c.edge_rounds = 1;
  const Program p = hfl::round_program(c);
  const std::string sdy = to_stablehlo(p, Mesh({{"groups", 2}}));
  EXPECT_NE(sdy.find("tensor<2x3x4x3xf64> {sdy.sharding = #sdy.sharding<@mesh, [{\"groups\"}, {}, "
                     "{}, {}]>}"),
            std::string::npos)
      << sdy;
  StableHloOptions o;
  o.gspmd = true;
  const std::string gspmd = to_stablehlo(p, Mesh({{"groups", 2}, {"model", 2}}), o);
  EXPECT_NE(gspmd.find("\"{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}\""), std::string::npos)
      << gspmd;
  const std::string second = to_stablehlo(p, Mesh({{"model", 2}, {"groups", 2}}), o);
  EXPECT_NE(second.find("\"{devices=[2,1,1,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\""),
            std::string::npos)
      << second;
}

std::string mlir_opt() {
  for (const char* c : {"mlir-opt-19", "mlir-opt"}) {
    const std::string probe = std::string("command -v ") + c + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return c;
  }
  return "";
}

TEST(StablehloExport, GenericFormParsesWithMlirOpt) {
  const std::string tool = mlir_opt();
  if (tool.empty()) GTEST_SKIP() << "mlir-opt-19 is not installed (scripts/setup.sh installs it)";
  const fs::path dir = fs::temp_directory_path() / ("drx_mlir_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int n = 0;
  std::vector<Program> programs = ir_text_coverage_programs();
  programs.push_back(fedavg_round(4));
  for (const Program& p : programs) {
    StableHloOptions o;
    o.generic = true;
    // A mesh must name a placement of the program.
    bool clients = false;
    for (const Type& t : p.var_types) clients = clients || t.placement.starts_with("clients");
    std::string text;
    try {
      text = to_stablehlo(p, clients ? Mesh({{"clients", 2}}) : Mesh(), o);
    } catch (const Error&) {
      continue;  // a primitive without a lowering yet (the test above lists them)
    }
    const fs::path file = dir / (std::to_string(n++) + ".mlir");
    std::ofstream(file) << text;
    const std::string cmd = tool + " --allow-unregistered-dialect " + file.string() +
                            " >/dev/null 2>" + file.string() + ".err";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << p.name << "\n" << text;
  }
  fs::remove_all(dir);
  EXPECT_GT(n, 3);
}

}  // namespace
}  // namespace drx::testing
