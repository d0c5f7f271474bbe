// Devices and sharding (drx::Mesh): results bitwise identical on 1 to 4
// devices (uneven shards included) and equal to the reference interpreter;
// reduce(map_fn) runs client by client into its accumulators (observed in the
// executable's stats) with the bits of the unfused kernels; the canonical tree
// from any cut of the clients into shards.
#include <random>

#include "drx/core/primitive.h"
#include "drx/exec/executable.h"
#include "drx/exec/tree_stack.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Type typed(DType dt, Shape s) { return Type(dt, std::move(s)); }

std::vector<Array> random_inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types()) args.push_back(random_array(t.shape, t.dtype, seed++));
  return args;
}

// |got - want| <= rtol * max|want| for every element of every output.
::testing::AssertionResult Near(const std::vector<Array>& got, const std::vector<Array>& want,
                                double rtol) {
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 0;
    for (int64_t k = 0; k < want[i].size(); ++k)
      scale = std::max(scale, std::abs(want[i].element_as_double(k)));
    for (int64_t k = 0; k < want[i].size(); ++k) {
      double g = got[i].element_as_double(k), w = want[i].element_as_double(k);
      if (!(std::abs(g - w) <= rtol * std::max(scale, 1e-30)))
        return ::testing::AssertionFailure()
               << "output " << i << " element " << k << ": " << g << " vs " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

// A FedAvg round of a small tanh model with 3 local steps, its training loss
// and the per-client maximum loss: map_fn results feed reductions only.
Value client_loss(Value w, Value x, Value y) {
  return mean(square(sum(tanh(matmul(x, w)), {1}) - y));
}

auto round_program(int64_t clients) {
  return program(
      {{"clients", clients}},
      [](Value w, Value xs, Value ys) -> std::vector<Value> {
        std::vector<Value> r = map_fn(
            [](Value wi, Value xi, Value yi) -> std::vector<Value> {
              Value v = wi;
              for (int k = 0; k < 3; ++k) v = v - 0.1 * grad(client_loss)(v, xi, yi);
              return {wi - v, client_loss(v, xi, yi)};
            },
            broadcast(w), xs, ys);
        return {w - reduce_mean(r[0]), reduce_mean(r[1]), reduce_max(r[1]), reduce_min(r[0])};
      },
      {"", "clients", "clients"});
}

Program round_ir(DType dt, int64_t clients) {
  return simplify(trace(round_program(clients),
                        {typed(dt, {4, 3}), typed(dt, {clients, 8, 4}), typed(dt, {clients, 8})},
                        "round"));
}

// The gradient of the loss after a round with respect to the server weights:
// map_fns of vjp bodies, broadcasts and reductions.
Program hypergradient_ir(DType dt, int64_t clients) {
  auto hyper = program(
      {{"clients", clients}},
      [](Value w, Value xs, Value ys) {
        return grad([&](Value v) {
          Value delta = map_fn(
              [](Value wi, Value xi, Value yi) { return 0.1 * grad(client_loss)(wi, xi, yi); },
              broadcast(v), xs, ys);
          Value w1 = v - reduce_mean(delta);
          return reduce_mean(map_fn(client_loss, broadcast(w1), xs, ys));
        })(w);
      },
      {"", "clients", "clients"});
  return simplify(
      trace(hyper, {typed(dt, {4, 3}), typed(dt, {clients, 8, 4}), typed(dt, {clients, 8})}));
}

TEST(Mesh, AxesSizesAndErrors) {
  Mesh one;
  EXPECT_EQ(one.devices(), 1);
  EXPECT_EQ(one.str(), "{}");
  Mesh m({{"clients", 4}, {"model", 2}});
  EXPECT_EQ(m.devices(), 8);
  EXPECT_EQ(m.axis_size("clients"), 4);
  EXPECT_EQ(m.axis_size("servers"), 1);
  EXPECT_TRUE(m.has_axis("model"));
  EXPECT_FALSE(m.has_axis("servers"));
  EXPECT_EQ(m.str(), "{clients: 4, model: 2}");
  EXPECT_THROW(Mesh({{"clients", 0}}), Error);
  EXPECT_THROW(Mesh({{"", 2}}), Error);
  EXPECT_THROW(Mesh({{"clients", 2}, {"clients", 3}}), Error);
  try {
    Mesh({{"clients", -3}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'clients' has -3 devices"), std::string::npos);
  }
}

TEST(Mesh, ScopesNestAndJitUsesTheInnermost) {
  EXPECT_EQ(current_mesh().str(), "{}");
  {
    MeshScope outer(Mesh({{"clients", 2}}));
    EXPECT_EQ(current_mesh().str(), "{clients: 2}");
    {
      MeshScope inner(Mesh({{"clients", 3}}));
      EXPECT_EQ(current_mesh().str(), "{clients: 3}");
    }
    EXPECT_EQ(current_mesh().str(), "{clients: 2}");
  }
  EXPECT_EQ(current_mesh().str(), "{}");

  // One compiled program per mesh; an explicit mesh wins over the scope.
  auto f = jit(round_program(5));
  Array w = random_array({4, 3}, f32, 1), xs = random_array({5, 8, 4}, f32, 2),
        ys = random_array({5, 8}, f32, 3);
  std::vector<Array> plain = f(w, xs, ys);
  {
    MeshScope scope(Mesh({{"clients", 2}}));
    EXPECT_TRUE(BitwiseEqual(f(w, xs, ys), plain));
    EXPECT_EQ(f.cache_size(), 2u);
  }
  auto g = jit(round_program(5), Mesh({{"clients", 3}}));
  MeshScope scope(Mesh({{"clients", 2}}));
  EXPECT_TRUE(BitwiseEqual(g(w, xs, ys), plain));
  EXPECT_EQ(g.cache_size(), 1u);
}

// DrJAX's mesh= (Python's broadcast and map_fn): the program asks the jit tracing it for a mesh.
TEST(Mesh, AMeshAskedForWhileTracingIsTheJitsMesh) {
  auto asking = [](std::optional<Mesh> m) {
    return [m](Value w, Value xs, Value ys) {
      if (m) detail::request_mesh(*m, "broadcast");
      return round_program(5)(w, xs, ys);
    };
  };
  Array w = random_array({4, 3}, f32, 1), xs = random_array({5, 8, 4}, f32, 2),
        ys = random_array({5, 8}, f32, 3);
  std::vector<Array> plain = jit(asking(std::nullopt))(w, xs, ys);
  EXPECT_TRUE(BitwiseEqual(jit(asking(Mesh({{"clients", 2}})))(w, xs, ys), plain));
  // The mesh reaches jit's check: an axis naming no placement is its error.
  expect_error(
      [&] {
        jit(asking(Mesh({{"client", 2}})))(w, xs, ys);
      },
      {"jit: mesh {client: 2} names no placement"});
  expect_error(
      [&] {
        jit(asking(Mesh({{"clients", 2}})), Mesh({{"clients", 3}}))(w, xs, ys);
      },
      {"broadcast: mesh {clients: 2} differs from the mesh {clients: 3} given to jit"});
  auto twice = [](Value w, Value xs, Value ys) {
    detail::request_mesh(Mesh({{"clients", 2}}), "broadcast");
    detail::request_mesh(Mesh({{"clients", 3}}), "map_fn");
    return round_program(5)(w, xs, ys);
  };
  expect_error([&] { jit(twice)(w, xs, ys); },
               {"map_fn: mesh {clients: 3} differs from the mesh {clients: 2} that broadcast "
                "asked for earlier"});
  // A jit inlined into another's trace passes its program's request on, also when its own
  // trace is cached from an earlier enclosing trace.
  auto inner = jit(asking(Mesh({{"client", 2}})));
  auto outer = [inner](Value w, Value xs, Value ys) { return inner(w, xs, ys); };
  for (int i = 0; i < 2; ++i)
    expect_error([&] { jit(outer)(w, xs, ys); }, {"jit: mesh {client: 2} names no placement"});
  EXPECT_EQ(inner.trace_count(), 1);
  // Traced outside a jit (nothing compiles), a request does nothing.
  EXPECT_NO_THROW(trace(asking(Mesh({{"client", 2}})),
                        {typed(f32, {4, 3}), typed(f32, {5, 8, 4}), typed(f32, {5, 8})}));
}

TEST(Mesh, ResultsAreBitwiseIdenticalOnOneToFourDevices) {
  // 7 and 13 clients split unevenly over 2, 3 and 4 devices; 2 clients leave
  // devices idle. Both the round and its hypergradient, in f32 and f64.
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t clients : {2, 7, 13}) {
      for (const Program& p : {round_ir(dt, clients), hypergradient_ir(dt, clients)}) {
        std::vector<Array> args = random_inputs(p, 11);
        std::vector<Array> want = interpret(p, args);
        std::vector<Array> one = compile(p, Mesh({{"clients", 1}})).run(args);
        EXPECT_TRUE(Near(one, want, dt == DType::f32 ? 1e-5 : 1e-12)) << p.name << " " << clients;
        EXPECT_TRUE(BitwiseEqual(compile(p).run(args), one));
        for (int devices : {2, 3, 4}) {
          Executable exe = compile(p, Mesh({{"clients", devices}}));
          EXPECT_TRUE(BitwiseEqual(exe.run(args), one))
              << p.name << ", " << clients << " clients on " << devices << " devices";
        }
      }
    }
}

TEST(Mesh, PlacementsThatAreNotMeshAxesRunOnTheDefaultThreads) {
  Program p = round_ir(DType::f32, 6);
  std::vector<Array> args = random_inputs(p, 5);
  EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"model", 3}})).run(args), compile(p).run(args)));
}

TEST(Mesh, ReduceOfMapRunsInChunksWithTheSameBits) {
  for (int64_t clients : {1, 6, 9}) {
    Program p = round_ir(DType::f32, clients);
    std::vector<Array> args = random_inputs(p, 3);
    CompileOptions unchunked;
    unchunked.chunk_map_reduce = false;
    for (int devices : {1, 3}) {
      Mesh mesh({{"clients", devices}});
      Executable chunked = compile(p, mesh), whole = compile(p, mesh, unchunked);
      EXPECT_EQ(chunked.stats().chunked_maps, 1u);
      EXPECT_EQ(whole.stats().chunked_maps, 0u);
      // Without chunking the per-client results take a buffer of their own.
      EXPECT_LT(chunked.stats().buffers, whole.stats().buffers);
      EXPECT_TRUE(BitwiseEqual(chunked.run(args), whole.run(args))) << clients << " clients";
    }
  }
  // The hypergradient's maps feed reductions only, too.
  Program h = hypergradient_ir(DType::f64, 5);
  EXPECT_GE(compile(h).stats().chunked_maps, 1u);
}

TEST(Mesh, MapResultsReadByOtherOpsAreNotChunked) {
  auto f =
      program({{"clients", 4}},
              [](Value w, Value xs) -> std::vector<Value> {
                Value r = map_fn([](Value wi, Value x) { return sum(x * wi); }, broadcast(w), xs);
                return {reduce_sum(r), reduce_sum(r * r)};  // r * r reads r outside a reduction
              },
              {"", "clients"});
  Program p = trace(f, {typed(DType::f64, {3}), typed(DType::f64, {4, 3})});
  Executable exe = compile(p, Mesh({{"clients", 2}}));
  EXPECT_EQ(exe.stats().chunked_maps, 0u);
  std::vector<Array> args = random_inputs(p, 1);
  EXPECT_TRUE(Near(exe.run(args), interpret(p, args), 1e-12));
  // A map result that is a program output is kept whole as well.
  auto g = program({{"clients", 4}},
                   [](Value xs) -> std::vector<Value> {
                     Value r = map_fn([](Value x) { return exp(x); }, xs);
                     return {r, reduce_sum(r)};
                   },
                   {"clients"});
  Program q = trace(g, {typed(DType::f64, {4, 3})});
  EXPECT_EQ(compile(q).stats().chunked_maps, 0u);
  std::vector<Array> qa = random_inputs(q, 2);
  EXPECT_TRUE(BitwiseEqual(compile(q, Mesh({{"clients", 3}})).run(qa), interpret(q, qa)));
}

TEST(Mesh, IntegerReductions) {
  auto f = program({{"clients", 5}},
                   [](Value xs) -> std::vector<Value> {
                     Value r = map_fn([](Value x) { return x * 3; }, xs);
                     return {reduce_sum(r), reduce_max(r)};
                   },
                   {"clients"});
  Program p = trace(f, {typed(DType::i32, {5, 2})});
  Array xs = Array::from_vector<int32_t>({1, -2, 3, 4, -5, 6, 7, 8, 9, -10}, {5, 2});
  std::vector<Array> got = compile(p, Mesh({{"clients", 2}})).run({xs});
  EXPECT_EQ(got[0].to_vector<int32_t>(), (std::vector<int32_t>{45, 18}));
  EXPECT_EQ(got[1].to_vector<int32_t>(), (std::vector<int32_t>{27, 24}));
}

// The stack of aligned blocks against the primitive's recursive tree, for
// every client count up to 70 and random cuts into up to 5 shards, on values
// whose f32 sum depends on the order of additions.
TEST(MeshTreeStack, AnyCutIntoShardsGivesTheCanonicalTree) {
  std::mt19937_64 rng(42);
  const Primitive& reduce = primitive("reduce_sum");
  const Params params{{"placement", std::string("clients")}};
  for (int64_t n = 1; n <= 70; ++n) {
    Array xs(DType::f32, {n, 2});
    for (int64_t i = 0; i < 2 * n; ++i)
      xs.data<float>()[i] = static_cast<float>((rng() % 2 ? 1e7 : 1.0) * ((rng() % 200) - 100.0));
    const std::vector<float> want = reduce.eval({xs}, params)[0].to_vector<float>();
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<int64_t> cuts = {0, n};
      for (int k = 0; k < 4; ++k) cuts.push_back(static_cast<int64_t>(rng() % (n + 1)));
      std::sort(cuts.begin(), cuts.end());
      exec::TreeStack<float, ReduceKind::sum> all(2);
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        exec::TreeStack<float, ReduceKind::sum> shard(2);
        for (int64_t c = cuts[s]; c < cuts[s + 1]; ++c) shard.push_row(c, xs.data<float>() + 2 * c);
        all.push_blocks(shard);
      }
      std::vector<float> got(2);
      all.finish(got.data());
      EXPECT_EQ(got, want) << n << " clients";
    }
  }
}

}  // namespace
}  // namespace drx::testing
