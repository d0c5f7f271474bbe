// Loops with the mesh: a federated round whose clients run their local steps
// in a scan, and its hypergradient (a reverse scan inside a map_fn body), are
// bitwise identical on 1 to 4 devices, take the chunked reduce(map_fn) path,
// and equal the same round with the steps unrolled.
#include "drx/exec/executable.h"
#include "drx/transforms/loops.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Type typed(DType dt, Shape s) { return Type(dt, std::move(s)); }

Value client_loss(Value w, Value x, Value y) {
  return mean(square(sum(tanh(matmul(x, w)), {1}) - y));
}

// 4 local steps on [4, 2, 4] batches: as a scan, or unrolled at trace time.
Value local_steps(Value w, Value x, Value y, bool unrolled, ScanOptions options = {}) {
  Value xb = reshape(x, {4, 2, 4}), yb = reshape(y, {4, 2});
  if (unrolled) {
    for (int64_t s = 0; s < 4; ++s) {
      Value xs = reshape(slice(xb, {s, 0, 0}, {s + 1, 2, 4}), {2, 4});
      Value ys = reshape(slice(yb, {s, 0}, {s + 1, 2}), {2});
      w = w - 0.1 * grad(client_loss)(w, xs, ys);
    }
    return w;
  }
  auto step = [](const Tree& c, const Tree& b) -> std::pair<Tree, Tree> {
    Value v = c.value();
    return {Tree(v - 0.1 * grad(client_loss)(v, b[0].value(), b[1].value())), Tree()};
  };
  return scan(step, Tree(w), Tree::list({Tree(xb), Tree(yb)}), options).first.value();
}

// The loss after one round as a function of the server weights, and its gradient.
Program hypergradient(DType dt, int64_t clients, bool unrolled, ScanOptions options = {}) {
  auto hyper = program({{"clients", clients}},
                       [unrolled, options](Value w, Value xs, Value ys) -> std::vector<Value> {
                         auto after_round = [&](Value v) {
                           Value local = map_fn(
                               [&](Value wi, Value xi, Value yi) {
                                 return local_steps(wi, xi, yi, unrolled, options);
                               },
                               broadcast(v), xs, ys);
                           Value w1 = reduce_mean(local);
                           return reduce_mean(map_fn(client_loss, broadcast(w1), xs, ys));
                         };
                         return {after_round(w), grad(after_round)(w)};
                       },
                       {"", "clients", "clients"});
  return trace(hyper, {typed(dt, {4, 3}), typed(dt, {clients, 8, 4}), typed(dt, {clients, 8})});
}

std::vector<Array> inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types()) args.push_back(random_array(t.shape, t.dtype, seed++));
  return args;
}

TEST(LoopsMesh, ScannedRoundAndHypergradientAreBitwiseTheSameOnOneToFourDevices) {
  for (int64_t clients : {3, 7}) {
    Program p = hypergradient(DType::f64, clients, false);
    std::vector<Array> args = inputs(p, 21);
    std::vector<Array> one = compile(p, Mesh({{"clients", 1}})).run(args);
    EXPECT_LT(max_abs_diff(one, interpret(p, args)), 1e-12);
    for (int devices : {2, 3, 4})
      EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"clients", devices}})).run(args), one))
          << clients << " clients on " << devices << " devices";
    // Whatever the loop's options, the same bits.
    for (ScanOptions o : {ScanOptions{.remat = true}, ScanOptions{.checkpoint_every = 2}})
      EXPECT_TRUE(BitwiseEqual(
          compile(hypergradient(DType::f64, clients, false, o), Mesh({{"clients", 3}})).run(args),
          one));
  }
}

TEST(LoopsMesh, ScannedRoundEqualsTheUnrolledOne) {
  Program scanned = hypergradient(DType::f64, 5, false);
  Program unrolled = hypergradient(DType::f64, 5, true);
  std::vector<Array> args = inputs(scanned, 4);
  EXPECT_LT(max_abs_diff(compile(scanned).run(args), compile(unrolled).run(args)), 1e-12);
}

TEST(LoopsMesh, MapFnWhoseBodyIsAScanStillRunsInChunks) {
  Program p = hypergradient(DType::f32, 6, false);
  for (int devices : {1, 2}) {
    Executable exe = compile(p, Mesh({{"clients", devices}}));
    // The round's map_fns and the gradient's all feed reductions only.
    EXPECT_GE(exe.stats().chunked_maps, 2u);
    CompileOptions whole;
    whole.chunk_map_reduce = false;
    std::vector<Array> args = inputs(p, 9);
    EXPECT_TRUE(
        BitwiseEqual(exe.run(args), compile(p, Mesh({{"clients", devices}}), whole).run(args)));
  }
}

}  // namespace
}  // namespace drx::testing
