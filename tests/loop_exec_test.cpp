// The compiled kernels of scan and while_loop (drx/exec/kernels_loop.cpp):
// bitwise equal to the reference interpreter and close to plain C++ loops, for
// forward and reverse scans with consts, carries of several dtypes, several
// xs and ys, lengths 0 and 1 (where the carry's alternation between buffers
// has its edge cases), bodies that forward their inputs, while loops of 0 and
// several trips, loops inside map_fn bodies and map_fns inside loops, and
// concurrent calls of one compiled program.
#include <algorithm>
#include <atomic>
#include <thread>

#include "drx/exec/executable.h"
#include "drx/transforms/loops.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Type f32t(Shape s) { return Type(DType::f32, std::move(s)); }
Type f64t(Shape s) { return Type(DType::f64, std::move(s)); }
Type i32t(Shape s) { return Type(DType::i32, std::move(s)); }

std::vector<Array> random_inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types())
    args.push_back(random_array(t.shape, t.dtype, seed++, -3.0, 3.0));
  return args;
}

// Compiled results equal the interpreter's, without falling back to it.
::testing::AssertionResult CompiledMatchesInterpreter(const Program& p,
                                                      const std::vector<Array>& args) {
  Executable exe = compile(p);
  if (exe.stats().fallbacks != 0)
    return ::testing::AssertionFailure() << exe.stats().fallbacks << " fallbacks";
  return BitwiseEqual(exe.run(args), interpret(p, args));
}

// Carries (a f32[2], b f64[3], n i32), consts c f64[3] and s f32, xs (u
// f32[L,2], v f64[L,3], w i32[L]); ys (a' * u, sum(b'), n' + n').
Program scan_program(int64_t length, bool reverse) {
  auto f = [reverse](Value c, Value s, Value a, Value b, Value n, Value u, Value v, Value w) {
    ScanOptions o;
    o.reverse = reverse;
    auto [carry, ys] = scan(
        [&](const Tree& k, const Tree& x) {
          Value a2 = k[0].value() * s + x[0].value();
          Value b2 = k[1].value() * c + x[1].value();
          Value n2 = k[2].value() + x[2].value();
          return std::pair<Tree, Tree>(Tree::list({a2, b2, n2}),
                                       Tree::list({a2 * x[0].value(), sum(b2), n2 + n2}));
        },
        Tree::list({a, b, n}), Tree::list({u, v, w}), o);
    return std::vector<Value>{carry[0], carry[1], carry[2], ys[0], ys[1], ys[2]};
  };
  return trace(f, {f64t({3}), f32t({}), f32t({2}), f64t({3}), i32t({}), f32t({length, 2}),
                   f64t({length, 3}), i32t({length})});
}

// scan_program's values by plain loops.
std::vector<std::vector<double>> scan_reference(const std::vector<Array>& in, int64_t length,
                                                bool reverse) {
  const double* c = in[0].data<double>();
  const float s = in[1].data<float>()[0];
  std::vector<float> a(in[2].data<float>(), in[2].data<float>() + 2);
  std::vector<double> b(in[3].data<double>(), in[3].data<double>() + 3);
  int32_t n = in[4].data<int32_t>()[0];
  const float* u = in[5].data<float>();
  const double* v = in[6].data<double>();
  const int32_t* w = in[7].data<int32_t>();
  const size_t L = static_cast<size_t>(length);
  std::vector<double> y1(L * 2), y2(L), y3(L);
  for (size_t i = 0; i < L; ++i) {
    const size_t t = reverse ? L - 1 - i : i;
    for (size_t j = 0; j < 2; ++j) {
      a[j] = a[j] * s + u[t * 2 + j];
      y1[t * 2 + j] = a[j] * u[t * 2 + j];
    }
    for (size_t j = 0; j < 3; ++j) b[j] = b[j] * c[j] + v[t * 3 + j];
    n += w[t];
    y2[t] = b[0] + b[1] + b[2];
    y3[t] = n + n;
  }
  return {std::vector<double>(a.begin(), a.end()), b, {double(n)}, y1, y2, y3};
}

TEST(LoopExec, ScanMatchesTheInterpreterAndPlainLoops) {
  for (bool reverse : {false, true})
    for (int64_t length : {0, 1, 2, 3, 6}) {
      Program p = scan_program(length, reverse);
      std::vector<Array> args = random_inputs(p, 10 + static_cast<uint64_t>(length));
      SCOPED_TRACE((reverse ? "reverse, length " : "length ") + std::to_string(length));
      EXPECT_TRUE(CompiledMatchesInterpreter(p, args));
      std::vector<Array> got = compile(p).run(args);
      std::vector<std::vector<double>> want = scan_reference(args, length, reverse);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(ArrayNear(got[k], want[k], 1e-5, 1e-5));
      EXPECT_EQ(got[3].shape(), (Shape{length, 2}));
    }
}

// Which outputs a compiled body may write over the input they replace (a loop then keeps the
// carry in one buffer): not where the input is read after the output is written, nor where the
// input is itself an output; yes for an elementwise update or a product accumulated into it.
TEST(LoopExec, OutputsMayOverwriteOnlyInputsReadNoLaterThanTheirWrite) {
  Program p = trace(
      [](Value a, Value b) -> std::vector<Value> {
        return {a + 1.0, a * b, a};
      },
      {f32t({8}), f32t({8})});
  Executable exe = compile(p);
  EXPECT_FALSE(exe.output_may_overwrite_input(0, 0));  // a is read after a + 1 is written
  EXPECT_FALSE(exe.output_may_overwrite_input(1, 0));  // a is also output 2
  EXPECT_TRUE(exe.output_may_overwrite_input(1, 1));   // b's last read writes a * b
  EXPECT_FALSE(exe.output_may_overwrite_input(2, 0));  // a forwarded: no equation writes it
  Program sgd = trace(
      [](Value w, Value x, Value g) -> std::vector<Value> {
        return {w - matmul(transpose(x, {1, 0}), g) * 0.1, x * 2.0};
      },
      {f32t({4, 3}), f32t({5, 4}), f32t({5, 3})});
  Executable step = compile(sgd);
  EXPECT_TRUE(step.output_may_overwrite_input(0, 0));   // accumulated into w in place
  EXPECT_FALSE(step.output_may_overwrite_input(0, 1));  // x: another size
  EXPECT_TRUE(step.output_may_overwrite_input(1, 1));   // x * 2 is x's last read
}

// SGD steps as a scan whose parameters stay in one buffer: the same values as a plain loop,
// and the caller's initial parameters are not written.
TEST(LoopExec, ScanUpdatingItsCarryInPlaceMatchesAPlainLoop) {
  Program p = trace(
      [](Value w0, Value xs) {
        auto [carry, ys] = scan(
            [](const Tree& k, const Tree& x) {
              Value w = k.value();
              Value g = matmul(transpose(x.value(), {1, 0}), tanh(matmul(x.value(), w)));
              return std::pair<Tree, Tree>(Tree(w - g * 0.05), Tree());
            },
            Tree(w0), Tree(xs));
        return carry.value();
      },
      {f64t({6, 3}), f64t({7, 5, 6})});
  std::vector<Array> args = random_inputs(p, 41);
  const Array w_before = random_inputs(p, 41)[0];  // the same draw, never given to the program
  const Array got = compile(p).run(args)[0];
  std::vector<double> w(args[0].data<double>(), args[0].data<double>() + 18);
  const double* xs = args[1].data<double>();
  for (int t = 0; t < 7; ++t) {
    const double* x = xs + t * 30;
    std::vector<double> h(15, 0.0), g(18, 0.0);
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 3; ++c) {
        for (int i = 0; i < 6; ++i) h[r * 3 + c] += x[r * 6 + i] * w[i * 3 + c];
        h[r * 3 + c] = std::tanh(h[r * 3 + c]);
      }
    for (int i = 0; i < 6; ++i)
      for (int c = 0; c < 3; ++c)
        for (int r = 0; r < 5; ++r) g[i * 3 + c] += x[r * 6 + i] * h[r * 3 + c];
    for (int k = 0; k < 18; ++k) w[k] -= g[k] * 0.05;
  }
  EXPECT_TRUE(ArrayNear(got, w, 1e-12, 1e-12));
  EXPECT_TRUE(args[0].bitwise_equal(w_before));
}

TEST(LoopExec, ScanOfLengthZeroReturnsTheInitialCarry) {
  Program p = scan_program(0, false);
  std::vector<Array> args = random_inputs(p, 3);
  std::vector<Array> got = compile(p).run(args);
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(got[k].bitwise_equal(args[2 + k])) << k;
}

// The body returns its inputs as they are (a swapped carry, an x, the old
// carry and a const as ys): the compiled body copies them into its results.
TEST(LoopExec, ScanBodiesMayForwardTheirInputs) {
  for (int64_t length : {1, 2, 5}) {
    auto f = [](Value p, Value q, Value c, Value xs) {
      auto [carry, ys] = scan(
          [&](const Tree& k, const Tree& x) {
            return std::pair<Tree, Tree>(
                Tree::list({k[1], k[0]}),
                Tree::list({x.value(), k[0], k[1].value() + x.value(), c}));
          },
          Tree::list({p, q}), Tree(xs));
      return std::vector<Value>{carry[0], carry[1], ys[0], ys[1], ys[2], ys[3]};
    };
    Program prog = trace(f, {f64t({3}), f64t({3}), f64t({2}), f64t({length, 3})});
    std::vector<Array> args = random_inputs(prog, 7);
    SCOPED_TRACE("length " + std::to_string(length));
    EXPECT_TRUE(CompiledMatchesInterpreter(prog, args));
    std::vector<Array> got = compile(prog).run(args);
    // Swapping twice is the identity.
    EXPECT_TRUE(got[static_cast<size_t>(length % 2)].bitwise_equal(args[0]));
    EXPECT_TRUE(got[static_cast<size_t>(1 - length % 2)].bitwise_equal(args[1]));
    EXPECT_TRUE(got[2].bitwise_equal(args[3]));
    const std::vector<double> p = args[0].to_vector<double>(), q = args[1].to_vector<double>(),
                              c = args[2].to_vector<double>();
    std::vector<double> old_first, consts;
    for (int64_t t = 0; t < length; ++t) {
      old_first.insert(old_first.end(), (t % 2 ? q : p).begin(), (t % 2 ? q : p).end());
      consts.insert(consts.end(), c.begin(), c.end());
    }
    EXPECT_TRUE(ArrayNear(got[3], old_first, 0, 0));
    EXPECT_TRUE(ArrayNear(got[5], consts, 0, 0));
  }
}

// Counts i up to a limit (a cond const) while x = x * s + 1 (s a body const).
Program while_program() {
  auto f = [](Value limit, Value s, Value i, Value x) {
    Tree r = while_loop(
        [&](const Tree& k) { return less(k[0].value(), limit); },
        [&](const Tree& k) {
          return Tree::list({k[0].value() + ones_like(k[0].value()), k[1].value() * s + 1.0});
        },
        Tree::list({i, x}));
    return std::vector<Value>{r[0], r[1]};
  };
  return trace(f, {i32t({}), f64t({3}), i32t({}), f64t({3})});
}

TEST(LoopExec, WhileLoopMatchesTheInterpreterAndAPlainLoop) {
  Program p = while_program();
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  Array s = random_array({3}, DType::f64, 1), x = random_array({3}, DType::f64, 2);
  // Trips: 0 (start past the limit), 0, 1, 2, 5.
  for (auto [start, limit] :
       std::vector<std::pair<int32_t, int32_t>>{{4, 2}, {0, 0}, {0, 1}, {0, 2}, {-2, 3}}) {
    std::vector<Array> args = {Array::from_vector<int32_t>({limit}, {}), s,
                               Array::from_vector<int32_t>({start}, {}), x};
    std::vector<Array> got = exe.run(args);
    EXPECT_TRUE(BitwiseEqual(got, interpret(p, args))) << start << " to " << limit;
    int32_t i = start;
    std::vector<double> want = x.to_vector<double>();
    const std::vector<double> sv = s.to_vector<double>();
    for (; i < limit; ++i)
      for (size_t j = 0; j < 3; ++j) want[j] = want[j] * sv[j] + 1.0;
    EXPECT_EQ(got[0].item<int32_t>(), i);
    EXPECT_TRUE(ArrayNear(got[1], want, 1e-12, 1e-12));
  }
}

// The predicate is a carry leaf as it is (the cond program returns its input).
TEST(LoopExec, WhileLoopOnABoolCarry) {
  auto f = [](Value go, Value n) {
    Tree r = while_loop([](const Tree& k) { return k[0].value(); },
                        [](const Tree& k) {
                          Value n2 = k[1].value() + 1.0;
                          return Tree::list({less(n2, scalar_like(n2, 3.0)), n2});
                        },
                        Tree::list({go, n}));
    return std::vector<Value>{r[0], r[1]};
  };
  Program p = trace(f, {Type(DType::bool_, {}), i32t({})});
  for (bool go : {false, true})
    for (int32_t n : {-4, 0, 5}) {
      std::vector<Array> args = {Array::from_vector<bool>({go}, {}),
                                 Array::from_vector<int32_t>({n}, {})};
      EXPECT_TRUE(CompiledMatchesInterpreter(p, args)) << go << " " << n;
      // At least one trip once started, then up to 3.
      const int32_t want = go ? std::max(n + 1, 3) : n;
      EXPECT_EQ(compile(p).run(args)[1].item<int32_t>(), want) << go << " " << n;
    }
}

// Each client scans its rows of xs from the server's w: the map_fn runs on
// threads, so scan kernels run concurrently on raw client rows.
Value client_scan(Value wi, Value x) {
  auto [carry, ys] = scan(
      [](const Tree& k, const Tree& xt) {
        Value k2 = k.value() * 0.9 + xt.value();
        return std::pair<Tree, Tree>(Tree(k2), Tree(sum(k2)));
      },
      Tree(wi), Tree(x));
  return carry.value() + sum(ys.value());
}

TEST(LoopExec, ScanInsideMapFn) {
  auto reduced =
      program({{"clients", 5}},
              [](Value w, Value xs) { return reduce_sum(map_fn(client_scan, broadcast(w), xs)); },
              {"", "clients"});
  Program p = trace(reduced, {f64t({3}), f64t({5, 4, 3})});
  std::vector<Array> args = random_inputs(p, 4);
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().chunked_maps, 1u);
  EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args)));
  // Unreduced, the map_fn writes each client's result row in place.
  auto whole = program({{"clients", 5}},
                       [](Value w, Value xs) { return map_fn(client_scan, broadcast(w), xs); },
                       {"", "clients"});
  Program q = trace(whole, {f64t({3}), f64t({5, 4, 3})});
  EXPECT_EQ(compile(q).stats().chunked_maps, 0u);
  EXPECT_TRUE(CompiledMatchesInterpreter(q, args));
}

TEST(LoopExec, MapFnInsideScan) {
  auto f = program({{"clients", 4}},
                   [](Value k0, Value xs) {
                     auto [carry, ys] = scan(
                         [](const Tree& k, const Tree& x) {
                           Value m = map_fn([](Value xi, Value ki) { return tanh(xi * ki); },
                                            place(x.value(), "clients"), broadcast(k.value()));
                           Value k2 = k.value() + reduce_sum(m) * 0.1;
                           return std::pair<Tree, Tree>(Tree(k2), Tree(reduce_max(m)));
                         },
                         Tree(k0), Tree(xs));
                     return std::vector<Value>{carry.value(), ys.value()};
                   },
                   {"", ""});
  Program p = trace(f, {f64t({3}), f64t({6, 4, 3})});
  std::vector<Array> args = random_inputs(p, 9);
  EXPECT_TRUE(CompiledMatchesInterpreter(p, args));
  // A placed carry: each client's state, updated by a map_fn per iteration.
  auto g = program({{"clients", 4}},
                   [](Value ws, Value xs) {
                     auto [carry, ys] = scan(
                         [](const Tree& k, const Tree& x) {
                           Value k2 = map_fn([](Value wi, Value xi) { return sin(wi) * 0.5 + xi; },
                                             k.value(), broadcast(x.value()));
                           return std::pair<Tree, Tree>(Tree(k2), Tree(reduce_sum(k2)));
                         },
                         Tree(ws), Tree(xs));
                     return std::vector<Value>{carry.value(), ys.value()};
                   },
                   {"clients", ""});
  Program q = trace(g, {f64t({4, 3}), f64t({5, 3})});
  EXPECT_TRUE(CompiledMatchesInterpreter(q, random_inputs(q, 2)));
}

// Each thread its own inputs, all released at once so that the calls overlap:
// the carry's scratch is per call, so none sees another's.
TEST(LoopExec, ConcurrentCallsOfOneScanAgree) {
  Program p = scan_program(7, true);
  Executable exe = compile(p);
  std::vector<std::vector<Array>> args, want;
  for (uint64_t t = 0; t < 4; ++t) {
    args.push_back(random_inputs(p, 100 * t));
    want.push_back(interpret(p, args.back()));
  }
  std::atomic<bool> go{false};
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int r = 0; r < 200; ++r)
        if (!BitwiseEqual(exe.run(args[t]), want[t])) ++mismatches[t];
    });
  go.store(true);
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace drx::testing
