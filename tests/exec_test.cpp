// The compiled executor (drx/exec): results against the reference interpreter
// for every primitive and for federated programs, the buffer plan (reuse,
// in-place, outputs that stay valid), BLAS layouts against a plain-loop float64
// matmul, map_fn on threads bitwise equal to the sequential loop, the pool.
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/exec/executable.h"
#include "drx/exec/thread_pool.h"
#include "drx/ops/primitives.h"
#include "tests/test_util.h"

extern "C" {
// OpenBLAS's own thread control, where the BLAS is OpenBLAS.
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace drx::testing {

std::vector<Program> ir_text_coverage_programs();  // tests/ir_text_test.cpp

namespace {

Type f32t(Shape s) { return Type(DType::f32, std::move(s)); }
Type f64t(Shape s) { return Type(DType::f64, std::move(s)); }

// |got - want| <= rtol * max(|want|, max|want|) per element; NaN matches NaN,
// infinities match exactly. Shapes and dtypes must agree.
::testing::AssertionResult Close(const Array& got, const Array& want, double rtol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure()
           << "type " << dtype_name(got.dtype()) << shape_str(got.shape()) << " vs "
           << dtype_name(want.dtype()) << shape_str(want.shape());
  double scale = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double w = want.element_as_double(i);
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  }
  for (int64_t i = 0; i < want.size(); ++i) {
    double g = got.element_as_double(i), w = want.element_as_double(i);
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::abs(g - w) <= rtol * std::max(std::abs(w), scale);
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

std::vector<Array> inputs_for(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types()) args.push_back(random_array(t.shape, t.dtype, seed++));
  return args;
}

// The primitives whose compiled kernels deliberately reassociate floating-
// point arithmetic: dot_general runs on BLAS, whose blocked, vectorised sums
// round differently from the reference's sequential loop. Every other
// primitive's kernel computes exactly the reference's operations in its order.
const std::set<std::string> kReassociating = {"dot_general", "conv_general_dilated"};

// Which outputs of p depend on an equation (or a sub-program's equation) of a
// reassociating primitive.
std::vector<bool> reassociated_outputs(const Program& p) {
  std::vector<bool> tainted(p.var_types.size(), false);
  for (const Eqn& e : p.eqns) {
    std::set<std::string> used;
    used.insert(e.prim->name());
    for (const auto& [key, value] : e.params.items())
      if (auto* sub = std::get_if<std::shared_ptr<const Program>>(&value))
        collect_primitives(**sub, used);
    bool t = false;
    for (const std::string& name : used) t = t || kReassociating.count(name);
    for (int v : e.ins) t = t || tainted[static_cast<size_t>(v)];
    for (int v : e.outs) tainted[static_cast<size_t>(v)] = t;
  }
  std::vector<bool> r;
  for (int v : p.outputs) r.push_back(tainted[static_cast<size_t>(v)]);
  return r;
}

// Within `ulps` units in the last place of the output's scale (its largest
// finite magnitude) per element: a reassociated sum of K terms is off by
// about K rounding errors of the largest partial sum, not of each element.
::testing::AssertionResult WithinUlps(const Array& got, const Array& want, double ulps) {
  const double eps = want.dtype() == DType::f32 ? 0x1p-23 : 0x1p-52;
  return Close(got, want, ulps * eps);
}

// Compiled vs interpreted on the same inputs, output by output: bitwise,
// except outputs computed through a reassociating primitive, which must be
// within 256 ulps of their scale.
::testing::AssertionResult CompiledMatchesInterpreter(const Program& p, uint64_t seed = 7) {
  std::vector<Array> args = inputs_for(p, seed);
  std::vector<Array> want = interpret(p, args);
  const std::vector<bool> reassociated = reassociated_outputs(p);
  Executable exe = compile(p);
  for (int call = 0; call < 2; ++call) {  // the second call reuses the workspace
    std::vector<Array> got = exe.run(args);
    if (got.size() != want.size()) return ::testing::AssertionFailure() << "output count";
    for (size_t i = 0; i < got.size(); ++i) {
      ::testing::AssertionResult r = reassociated[i] ? WithinUlps(got[i], want[i], 256)
                                     : got[i].bitwise_equal(want[i])
                                         ? ::testing::AssertionSuccess()
                                         : ::testing::AssertionFailure()
                                               << "not bitwise equal: got " << got[i].str()
                                               << ", want " << want[i].str();
      if (!r)
        return ::testing::AssertionFailure()
               << "@" << p.name << " output " << i << (reassociated[i] ? " (reassociated)" : "")
               << ": " << r.message() << "\n"
               << to_string(p);
    }
  }
  return ::testing::AssertionSuccess();
}

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;

Program traced(const Fn& f, const std::vector<Type>& types, const std::string& name) {
  return trace_function(f, types, name).program;
}

// Programs in float64 exercising each fast kernel, including the layouts and
// shapes that select between a fast kernel and the fallback.
std::vector<Program> f64_programs() {
  std::vector<Program> ps;
  ps.push_back(traced(
      [](const std::vector<Value>& a) -> std::vector<Value> {
        Value x = a[0], y = a[1], p = abs(x) + 1.0;
        return {neg(x),
                exp(x),
                log(p),
                log1p(abs(x)),
                tanh(x),
                logistic(x * 40.0),
                sqrt(p),
                rsqrt(p),
                abs(x),
                sign(x),
                sin(x),
                cos(x),
                x + y,
                x - y,
                x * y,
                x / p,
                pow(p, y),
                maximum(x, y),
                minimum(x, y),
                less(x, y),
                less_equal(x, y),
                greater(x, y),
                greater_equal(x, y),
                equal(x, x),
                not_equal(x, y),
                where(less(x, y), x, y),
                astype(x, DType::f32),
                astype(astype(x, DType::i32), DType::f64),
                astype(x, DType::i64)};
      },
      {f64t({3, 5}), f64t({3, 5})}, "elementwise_f64"));
  ps.push_back(traced(
      [](const std::vector<Value>& a) -> std::vector<Value> {
        Value x = a[0];
        return {sum(x),         sum(x, {0}),    sum(x, {1}),    sum(x, {2}),
                sum(x, {0, 1}), sum(x, {1, 2}), sum(x, {0, 2}), max(x, {1}),
                min(x, {2}),    max(x, {0, 2}), min(x),         mean(x, {0})};
      },
      {f64t({3, 4, 300})}, "reductions_f64"));
  ps.push_back(traced(
      [](const std::vector<Value>& a) -> std::vector<Value> {
        Value x = a[0];
        return {transpose(x, {2, 0, 1}), transpose(x, {0, 2, 1}), slice(x, {1, 0, 2}, {3, 4, 5}),
                broadcast_in_dim(a[1], {2, 4, 5}, {1}), broadcast_in_dim(a[2], {3, 2}, {}),
                reshape(x, {12, 5}), broadcast_to(reshape(a[1], {4, 1}), {4, 6}),
                concatenate({x, x}, 1), slice(x, {1, 0, 0}, {3, 4, 5}),
                exp(slice(x, {2, 0, 0}, {3, 4, 5})),
                concatenate({slice(x, {0, 1, 0}, {1, 3, 5}), slice(x, {2, 0, 0}, {3, 2, 5})}, 0),
                // The last axis, with an empty operand between two others.
                concatenate({slice(x, {0, 0, 0}, {3, 4, 2}), slice(x, {0, 0, 0}, {3, 4, 0}), x}, 2),
                take(x, constant(Array::from_vector<int32_t>({2, 0}, {2})), 1)};
      },
      {f64t({3, 4, 5}), f64t({4}), f64t({})}, "shape_f64"));
  // Every transposition pattern, batched, vector and outer products.
  ps.push_back(traced(
      [](const std::vector<Value>& a) -> std::vector<Value> {
        Value m = a[0], n = a[1];  // [6, 7], [7, 5]
        Value mt = transpose(m, {1, 0}), nt = transpose(n, {1, 0});
        return {
            matmul(m, n),
            dot_general(mt, n, {{0}, {0}, {}, {}}),
            dot_general(m, nt, {{1}, {1}, {}, {}}),
            dot_general(mt, nt, {{0}, {1}, {}, {}}),
            dot_general(a[2], a[3], {{2}, {1}, {0}, {0}}),      // [2,6,7] x [2,7,5]
            dot_general(a[2], a[2], {{1}, {1}, {0}, {0}}),      // contracts a middle dim
            dot_general(a[4], n, {{0}, {0}, {}, {}}),           // vector-matrix
            dot_general(m, a[4], {{1}, {0}, {}, {}}),           // matrix-vector
            dot_general(a[4], a[4], {{}, {}, {}, {}}),          // outer product
            dot_general(a[5], a[5], {{1, 2}, {1, 2}, {}, {}}),  // two contracting dims
            dot_general(a[5], a[5], {{2, 1}, {2, 1}, {}, {}}),
            dot_general(a[5], transpose(a[5], {0, 2, 1}), {{1, 2}, {2, 1}, {}, {}}),  // fallback
            dot_general(a[6], a[7], {{1}, {0}, {}, {}}),                              // K = 0
            dot_general(astype(m, DType::i32), astype(n, DType::i32), {{1}, {0}, {}, {}})};
      },
      {f64t({6, 7}), f64t({7, 5}), f64t({2, 6, 7}), f64t({2, 7, 5}), f64t({7}), f64t({3, 4, 2}),
       f64t({3, 0}), f64t({0, 4})},
      "dot_f64"));
  return ps;
}

TEST(Exec, CompiledEqualsInterpreterOnEveryPrimitive) {
  std::set<std::string> used;
  std::vector<Program> programs = ir_text_coverage_programs();
  for (Program& p : f64_programs()) programs.push_back(std::move(p));
  for (const Program& p : programs) {
    SCOPED_TRACE(p.name);
    collect_primitives(p, used);
    EXPECT_TRUE(CompiledMatchesInterpreter(p));
  }
  for (const std::string& name : primitive_names())
    EXPECT_TRUE(used.count(name)) << "primitive '" << name << "' is not covered";
}

TEST(Exec, FastKernelsAreChosenForTheCommonCases) {
  for (const Program& p : f64_programs()) {
    ExecStats s = compile(p).stats();
    SCOPED_TRACE(p.name);
    EXPECT_GT(s.kernels, 0u);
    // The equations without a fast kernel, per program: converts to i32 and
    // i64; sum and max over axes {0, 2}; a contraction
    // with its pairs in crossed order, and an i32 dot with its two converts.
    const std::map<std::string, size_t> fallbacks = {
        {"elementwise_f64", 2}, {"reductions_f64", 2}, {"shape_f64", 0}, {"dot_f64", 4}};
    EXPECT_EQ(s.fallbacks, fallbacks.at(p.name));
  }
}

// C = A B in float64 with plain loops, A [m, k], B [k, n] row-major.
std::vector<double> matmul_ref(const Array& a, const Array& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[static_cast<size_t>(i * n + j)] +=
            a.element_as_double(i * k + p) * b.element_as_double(p * n + j);
  return c;
}

TEST(Exec, GemmLayoutsAgainstPlainLoops) {
  for (DType dt : {DType::f32, DType::f64}) {
    auto f = [](Value a, Value b) -> std::vector<Value> {
      Value at = transpose(a, {1, 0}), bt = transpose(b, {1, 0});
      return {matmul(a, b), dot_general(at, b, {{0}, {0}, {}, {}}),
              dot_general(a, bt, {{1}, {1}, {}, {}}), dot_general(at, bt, {{0}, {1}, {}, {}})};
    };
    Program p = trace(f, {Type(dt, {33, 70}), Type(dt, {70, 19})});
    Array a = random_array({33, 70}, dt, 1), b = random_array({70, 19}, dt, 2);
    std::vector<double> want = matmul_ref(a, b);
    Executable exe = compile(p);
    EXPECT_EQ(exe.stats().fallbacks, 0u);
    std::vector<Array> got = exe.run({a, b});
    double rtol = dt == DType::f32 ? 1e-5 : 1e-12;
    for (const Array& g : got) EXPECT_TRUE(ArrayNear(g, want, rtol, rtol * 10));
  }
}

TEST(Exec, ElementwiseChainsFuseIntoOneKernel) {
  // One group: t = exp(x * y + x) has two readers, both inside the group, so it is a
  // temporary computed once per block.
  auto f = [](Value x, Value y) {
    Value t = exp(x * y + x);
    return tanh(t * t - y) / (abs(t) + 1.0);
  };
  for (int64_t n : {64, 1000}) {  // one block, and several with a partial one
    Program p = simplify(trace(f, {f64t({n}), f64t({n})}));
    Executable exe = compile(p);
    EXPECT_EQ(exe.stats().kernels, 1u);
    EXPECT_EQ(exe.stats().fused, 8u);
    EXPECT_LE(exe.stats().buffers, 1u);
    Array x = random_array({n}, f64, 3), y = random_array({n}, f64, 4);
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i) {
      double a = x.data<double>()[i], b = y.data<double>()[i];
      double t = std::exp(a * b + a);
      want.push_back(std::tanh(t * t - b) / (std::abs(t) + 1.0));
    }
    EXPECT_TRUE(ArrayNear(exe.run({x, y})[0], want, 1e-14, 0));
    EXPECT_TRUE(exe.run({x, y})[0].bitwise_equal(interpret(p, {x, y})[0]));
    // Inputs are never written.
    EXPECT_TRUE(ArrayNear(x, to_doubles(random_array({n}, f64, 3)), 0, 0));
  }
}

// A LayerNorm-like group: a column (per-row statistic) and a row (per-feature scale) read in
// place, and d read by three members: one kernel, bitwise the interpreter. Blocks of whole
// rows (5 columns), of part of one row (300: blocks of 150) and of 256 straddling rows (257).
TEST(Exec, FusedGroupsReadRowsAndColumnsAndShareTemporaries) {
  auto f = [](Value x, Value r, Value c) {
    const Shape s = x.shape();
    Value rows = broadcast_in_dim(r, s, {1}), cols = broadcast_in_dim(c, s, {0});
    Value d = x - cols;
    return (d * rows + d * d) * cols + rows / (d + 3.0);
  };
  for (DType dt : {DType::f64, DType::f32, DType::bf16})
    for (int64_t n : {5, 257, 300}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + std::to_string(n));
      Program p = simplify(trace(f, {Type(dt, {7, n}), Type(dt, {n}), Type(dt, {7})}));
      Executable exe = compile(p);
      EXPECT_EQ(exe.stats().kernels, 1u);
      EXPECT_EQ(exe.stats().fallbacks, 0u);
      std::vector<Array> args = {random_array({7, n}, dt, 1, -2, 2), random_array({n}, dt, 2),
                                 random_array({7}, dt, 3)};
      EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args)));
      if (dt != DType::f64) continue;
      std::vector<double> want;
      for (int64_t i = 0; i < 7; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const double x = args[0].data<double>()[i * n + j], r = args[1].data<double>()[j],
                       c = args[2].data<double>()[i], d = x - c;
          want.push_back((d * r + d * d) * c + r / (d + 3.0));
        }
      EXPECT_TRUE(ArrayNear(exe.run(args)[0], want, 1e-15, 1e-15));
    }
}

// gelu(x) (cast to bf16, as a mixed-precision layer feeds its next product) and gelu_grad(x)
// (reverse mode's residual) are sibling groups reading x: one kernel, one pass computing both,
// each bitwise its own primitive. A sibling whose other operand is made later keeps its kernel.
TEST(Exec, SiblingGroupsShareAKernelAndGeluPairsOnePass) {
  auto f = [](Value x, Value y) -> std::vector<Value> {
    Value h = astype(gelu(x), DType::bf16);
    Value later = broadcast_in_dim(sum(y, {1}), {16, 16}, {0});  // made after h's group
    return {h, emit1(prims::gelu_grad(), {x}) * 2.0, exp(x) + later};
  };
  Program p = simplify(trace(f, {Type(DType::f32, {16, 16}), Type(DType::f32, {16, 16})}));
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().kernels, 3u);  // gelu's and gelu_grad's groups, the sum, exp + later
  std::vector<Array> args = {random_array({16, 16}, DType::f32, 1, -5, 5),
                             random_array({16, 16}, DType::f32, 2)};
  EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args)));
}

TEST(Exec, ElementwiseResultsReuseDyingOperands) {
  // h (a product, not fusible) dies at the fused exp(max(h + b, 0) * 2), which runs in h's
  // buffer.
  auto f = [](Value x, Value b) {
    Value h = matmul(x, constant(Array::from_vector<double>(
                            {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {4, 4})));
    return sum(exp(maximum(h + b, 0.0) * 2.0), {1});
  };
  Program p = simplify(trace(f, {f64t({3, 4}), f64t({4})}));
  Executable exe = compile(p);
  EXPECT_GE(exe.stats().in_place, 1u);
  EXPECT_EQ(exe.stats().buffers, 1u);
  Array x = random_array({3, 4}, f64, 1), b = random_array({4}, f64, 2);
  std::vector<double> want(3, 0.0);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      want[static_cast<size_t>(i)] +=
          std::exp(std::max(x.data<double>()[i * 4 + j] + b.data<double>()[j], 0.0) * 2.0);
  EXPECT_TRUE(ArrayNear(exe.run({x, b})[0], want, 1e-14, 0));
}

TEST(Exec, BroadcastOperandsAreReadWithoutMaterialisingThem) {
  auto f = [](Value x, Value r, Value c, Value s) -> std::vector<Value> {
    Value rows = broadcast_in_dim(r, {4, 5}, {1}), cols = broadcast_in_dim(c, {4, 5}, {0});
    Value scalar = broadcast_in_dim(s, {4, 5}, {});
    return {x + rows,
            x * cols,
            scalar - x,
            where(greater(x, scalar), x, scalar),
            maximum(rows, cols),
            less(cols, x)};
  };
  Program p = trace(f, {f64t({4, 5}), f64t({5}), f64t({4}), f64t({})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().dropped, 3u);  // the three broadcasts
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  Array x = random_array({4, 5}, f64, 1), r = random_array({5}, f64, 2),
        c = random_array({4}, f64, 3), s = Array::scalar<double>(0.25);
  std::vector<Array> got = exe.run({x, r, c, s});
  std::vector<double> add, mul, sub, relu, mx, lt;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double xv = x.data<double>()[i * 5 + j], rv = r.data<double>()[j], cv = c.data<double>()[i];
      add.push_back(xv + rv);
      mul.push_back(xv * cv);
      sub.push_back(0.25 - xv);
      relu.push_back(xv > 0.25 ? xv : 0.25);
      mx.push_back(std::max(rv, cv));
      lt.push_back(cv < xv ? 1 : 0);
    }
  for (auto [k, want] : std::vector<std::pair<size_t, std::vector<double>>>{
           {0, add}, {1, mul}, {2, sub}, {3, relu}, {4, mx}, {5, lt}})
    EXPECT_TRUE(ArrayNear(got[k], want, 0, 0)) << "output " << k;
}

TEST(Exec, TransposedProductsAreOneGemm) {
  auto f = [](Value a, Value b) -> std::vector<Value> {
    Value ab = dot_general(a, b, {{0}, {0}, {}, {}});  // [7, 5]
    Value once = dot_general(b, a, {{0}, {0}, {}, {}});
    return {transpose(ab, {1, 0}), transpose(once, {1, 0}) + 1.0, once};
  };
  Program p = trace(f, {f32t({6, 7}), f32t({6, 5})});
  Executable exe = compile(p);
  // The first product, and the broadcast of 1.0; `once` has other readers.
  EXPECT_EQ(exe.stats().dropped, 2u);
  Array a = random_array({6, 7}, f32, 1), b = random_array({6, 5}, f32, 2);
  std::vector<Array> got = exe.run({a, b});
  std::vector<double> abt(35), bat(35);  // (a^T b)^T [5, 7] and (b^T a) [5, 7]
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j) {
      double v = 0;
      for (int64_t k = 0; k < 6; ++k)
        v += double{a.data<float>()[k * 7 + j]} * double{b.data<float>()[k * 5 + i]};
      abt[static_cast<size_t>(i * 7 + j)] = v;
      bat[static_cast<size_t>(i * 7 + j)] = v;
    }
  EXPECT_EQ(got[0].shape(), (Shape{5, 7}));
  EXPECT_TRUE(ArrayNear(got[0], abt, 1e-5, 1e-6));
  EXPECT_TRUE(ArrayNear(got[2], bat, 1e-5, 1e-6));
  std::vector<double> t1(35);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 5; ++j)
      t1[static_cast<size_t>(i * 5 + j)] = bat[static_cast<size_t>(j * 7 + i)] + 1.0;
  EXPECT_TRUE(ArrayNear(got[1], t1, 1e-5, 1e-6));
}

TEST(Exec, UpdatesByAScaledProductAccumulateInTheGemm) {
  // w [3,4] - 0.5 * (x^T g) with x [5,3], g [5,4]; v + x^T g; and a product
  // that reads the weight it updates (so the result must not overwrite it).
  auto f = [](Value w, Value x, Value g, Value m) -> std::vector<Value> {
    Value w2 = w * 2.0, w3 = w * 3.0;  // w3 dies at its update: updated in place
    Value step = w2 - 0.5 * transpose(dot_general(g, x, {{0}, {0}, {}, {}}), {1, 0});
    Value plus = (dot_general(x, g, {{0}, {0}, {}, {}}) + w3) * 2.0;
    Value self = w2 - dot_general(w2, m, {{1}, {0}, {}, {}}) * 0.25;
    return {step, plus, self};
  };
  Program p = trace(f, {f64t({3, 4}), f64t({5, 3}), f64t({5, 4}), f64t({4, 4})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  EXPECT_GE(exe.stats().dropped, 6u);  // products, transpose, muls, broadcasts
  EXPECT_GE(exe.stats().in_place, 1u);
  Array w = random_array({3, 4}, f64, 1), x = random_array({5, 3}, f64, 2),
        g = random_array({5, 4}, f64, 3), m = random_array({4, 4}, f64, 4);
  auto at = [](const Array& a, int64_t i, int64_t j) {
    return a.data<double>()[i * a.shape()[1] + j];
  };
  std::vector<double> step, plus, self;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      double xg = 0, wm = 0;
      for (int64_t k = 0; k < 5; ++k) xg += at(x, k, i) * at(g, k, j);
      for (int64_t k = 0; k < 4; ++k) wm += 2 * at(w, i, k) * at(m, k, j);
      step.push_back(2 * at(w, i, j) - 0.5 * xg);
      plus.push_back((xg + 3 * at(w, i, j)) * 2);
      self.push_back(2 * at(w, i, j) - 0.25 * wm);
    }
  std::vector<Array> got = exe.run({w, x, g, m});
  EXPECT_TRUE(ArrayNear(got[0], step, 1e-13, 1e-13));
  EXPECT_TRUE(ArrayNear(got[1], plus, 1e-13, 1e-13));
  EXPECT_TRUE(ArrayNear(got[2], self, 1e-13, 1e-13));
}

TEST(Exec, ADenseLayersBiasStartsItsGemm) {
  // x [2, 5, 3] @ w [3, 4] + b [4]: the bias is read as one row, never broadcast into memory;
  // also b - x @ w, and a bias the size of the product (not a row: an ordinary accumulation).
  auto f = [](Value x, Value w, Value b, Value full) -> std::vector<Value> {
    Value xw = matmul(x, w);
    return {xw + b, b - matmul(x, w), matmul(x, w) + full};
  };
  Program p = trace(f, {f64t({2, 5, 3}), f64t({3, 4}), f64t({4}), f64t({2, 5, 4})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  EXPECT_EQ(exe.stats().kernels, 3u) << to_string(p);  // three gemms, nothing else
  Array x = random_array({2, 5, 3}, f64, 5), w = random_array({3, 4}, f64, 6),
        b = random_array({4}, f64, 7), full = random_array({2, 5, 4}, f64, 8);
  std::vector<double> plus, minus, acc;
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t j = 0; j < 4; ++j) {
      double xw = 0;
      for (int64_t k = 0; k < 3; ++k)
        xw += x.data<double>()[r * 3 + k] * w.data<double>()[k * 4 + j];
      plus.push_back(xw + b.data<double>()[j]);
      minus.push_back(b.data<double>()[j] - xw);
      acc.push_back(xw + full.data<double>()[r * 4 + j]);
    }
  std::vector<Array> got = exe.run({x, w, b, full});
  EXPECT_TRUE(ArrayNear(got[0], plus, 1e-13, 1e-13));
  EXPECT_TRUE(ArrayNear(got[1], minus, 1e-13, 1e-13));
  EXPECT_TRUE(ArrayNear(got[2], acc, 1e-13, 1e-13));
}

TEST(Exec, ResultsOfEarlierCallsStayValid) {
  auto f = [](Value x) -> std::vector<Value> {
    Value y = x * 2.0;
    return {y + 1.0, reshape(y, {2, 2}), stop_gradient(y), x};
  };
  Executable exe = compile(simplify(trace(f, {f64t({4})})));
  Array x1 = f64_array({1, 2, 3, 4}, {4}), x2 = f64_array({-1, -1, -1, -1}, {4});
  std::vector<Array> r1 = exe.run({x1});
  std::vector<Array> r2 = exe.run({x2});
  EXPECT_TRUE(ArrayNear(r1[0], {3, 5, 7, 9}, 0, 0));
  EXPECT_TRUE(ArrayNear(r1[1], {2, 4, 6, 8}, 0, 0));
  EXPECT_EQ(r1[1].shape(), (Shape{2, 2}));
  EXPECT_TRUE(ArrayNear(r1[2], {2, 4, 6, 8}, 0, 0));
  EXPECT_TRUE(ArrayNear(r1[3], {1, 2, 3, 4}, 0, 0));
  EXPECT_TRUE(ArrayNear(r2[0], {-1, -1, -1, -1}, 0, 0));
  EXPECT_TRUE(ArrayNear(r2[2], {-2, -2, -2, -2}, 0, 0));
}

TEST(Exec, ViewsOfIntermediatesSurviveBufferReuse) {
  // r = reshape(a) must outlive a's other uses; b has a's type and would take
  // a's buffer if the plan ignored the view.
  auto f = [](Value x) {
    Value a = x + 1.0;
    Value r = reshape(a, {6});
    Value b = exp(a);
    Value c = b * 3.0;
    return reshape(c, {6}) + r;
  };
  Program p = simplify(trace(f, {f64t({2, 3})}));
  Array x = random_array({2, 3}, f64, 5);
  std::vector<double> want;
  for (int64_t i = 0; i < 6; ++i) {
    double a = x.data<double>()[i] + 1.0;
    want.push_back(std::exp(a) * 3.0 + a);
  }
  EXPECT_TRUE(ArrayNear(compile(p).run({x})[0], want, 1e-15, 0));
}

TEST(Exec, ZeroSizeAndScalarPrograms) {
  auto f = [](Value x, Value s) -> std::vector<Value> {
    return {exp(x) + 1.0, sum(x, {0}), transpose(x, {1, 0}), s * s, sum(x)};
  };
  Program p = trace(f, {f32t({0, 3}), f32t({})});
  EXPECT_TRUE(CompiledMatchesInterpreter(p));
  std::vector<Array> r = compile(p).run({Array(f32, {0, 3}), Array::scalar<float>(3)});
  EXPECT_TRUE(ArrayNear(r[1], {0, 0, 0}));
  EXPECT_TRUE(ArrayNear(r[3], {9}));
}

TEST(Exec, BadArgumentsAndDataErrorsThrow) {
  auto f = [](Value x, Value i) { return take(x, i, 0) * 2.0; };
  Executable exe = compile(trace(f, {f32t({3}), Type(DType::i32, {2})}));
  EXPECT_THROW(exe.run({Array(f32, {3})}), Error);
  EXPECT_THROW(exe.run({Array(f64, {3}), Array(i32, {2})}), Error);
  EXPECT_THROW(exe.run({Array(f32, {4}), Array(i32, {2})}), Error);
  Array x = f32_array({1, 2, 3}, {3});
  EXPECT_THROW(exe.run({x, Array::from_vector<int32_t>({0, 7}, {2})}), Error);
  // The executable still works after a failed call.
  EXPECT_TRUE(ArrayNear(exe.run({x, Array::from_vector<int32_t>({2, 0}, {2})})[0], {6, 2}));
  EXPECT_THROW(Executable().run({}), Error);
}

TEST(Exec, ConcurrentCallsShareOneExecutable) {
  auto f = [](Value a, Value b) { return sum(tanh(matmul(a, b)), {1}); };
  Executable exe = compile(trace(f, {f64t({20, 30}), f64t({30, 10})}));
  std::vector<Array> a, b, want;
  for (uint64_t t = 0; t < 4; ++t) {
    a.push_back(random_array({20, 30}, f64, 10 + t));
    b.push_back(random_array({30, 10}, f64, 20 + t));
    want.push_back(exe.run({a[t], b[t]})[0]);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k)
        if (!exe.run({a[t], b[t]})[0].bitwise_equal(want[t])) ++mismatches;
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---- federated programs ------------------------------------------------------
Value local_loss(Value w, Value x, Value y) {
  Value h = tanh(matmul(x, w));
  return mean(square(sum(h, {1}) - y));
}

Value fedavg_round(Value w, Value xs, Value ys) {
  Value delta = map_fn(
      [](Value wi, Value xi, Value yi) {
        Value v = wi;
        for (int k = 0; k < 3; ++k) v = v - 0.1 * grad(local_loss)(v, xi, yi);
        return wi - v;
      },
      broadcast(w), xs, ys);
  return w - reduce_mean(delta);
}

Program fedavg_program(DType dt, int64_t clients) {
  auto round = program({{"clients", clients}}, fedavg_round, {"", "clients", "clients"});
  return trace(round, {Type(dt, {4, 3}), Type(dt, {clients, 8, 4}), Type(dt, {clients, 8})},
               "fedavg");
}

TEST(Exec, FederatedProgramsMatchTheInterpreter) {
  for (DType dt : {DType::f64, DType::f32}) {
    Program p = fedavg_program(dt, 5);
    EXPECT_TRUE(CompiledMatchesInterpreter(p));
    // map_fn reads broadcast(w) as w: the copies per client are never made.
    EXPECT_EQ(compile(simplify(p)).stats().dropped, 1u);
    EXPECT_TRUE(CompiledMatchesInterpreter(simplify(p)));
    // The hypergradient: a map_fn of vjp bodies, reductions and broadcasts.
    auto hyper = program(
        {{"clients", 5}},
        [](Value w, Value xs, Value ys) {
          return grad([&](Value v) {
            return reduce_mean(map_fn(local_loss, broadcast(fedavg_round(v, xs, ys)), xs, ys));
          })(w);
        },
        {"", "clients", "clients"});
    Program h = simplify(trace(hyper, {Type(dt, {4, 3}), Type(dt, {5, 8, 4}), Type(dt, {5, 8})}));
    EXPECT_TRUE(CompiledMatchesInterpreter(h));
  }
}

TEST(Exec, MapFnOnThreadsIsBitwiseTheSequentialLoop) {
  Program p = simplify(fedavg_program(DType::f32, 13));
  std::vector<Array> args = inputs_for(p, 3);
  Executable exe = compile(p);
  int before = num_threads();
  set_num_threads(1);
  std::vector<Array> one = exe.run(args);
  for (int threads : {2, 3, 4}) {
    set_num_threads(threads);
    std::vector<Array> many = exe.run(args);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(many[i].bitwise_equal(one[i])) << threads << " threads, output " << i;
  }
  set_num_threads(before);
  EXPECT_THROW(set_num_threads(0), Error);
}

TEST(Exec, ErrorsInsideMapFnBodiesReachTheCaller) {
  auto f =
      program({{"clients", 6}},
              [](Value xs, Value idx) {
                return reduce_sum(map_fn([](Value x, Value i) { return take(x, i, 0); }, xs, idx));
              },
              {"clients", "clients"});
  Program p = trace(f, {f32t({6, 3}), Type(DType::i32, {6, 2})});
  Executable exe = compile(p);
  Array xs = random_array({6, 3}, f32, 1);
  std::vector<int32_t> good = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, bad = good;
  bad[9] = 3;  // client 4 reads past its row
  int before = num_threads();
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    EXPECT_THROW(exe.run({xs, Array::from_vector<int32_t>(bad, {6, 2})}), Error);
    std::vector<Array> r = exe.run({xs, Array::from_vector<int32_t>(good, {6, 2})});
    EXPECT_TRUE(
        r[0].bitwise_equal(interpret(p, {xs, Array::from_vector<int32_t>(good, {6, 2})})[0]));
  }
  set_num_threads(before);
}

TEST(Exec, PlacedBroadcastsAreReadWithoutCopies) {
  auto f = program({{"clients", 4}},
                   [](Value s, Value xs) -> std::vector<Value> {
                     Value b = broadcast(s);
                     return {reduce_sum(xs - b), reduce_max(exp(xs) * b)};
                   },
                   {"", "clients"});
  Program p = trace(f, {f64t({3}), f64t({4, 3})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().dropped, 1u);
  Array s = random_array({3}, f64, 1), xs = random_array({4, 3}, f64, 2);
  std::vector<Array> got = exe.run({s, xs}), want = interpret(p, {s, xs});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].bitwise_equal(want[i]));
}

TEST(Exec, PlacementReductionsKeepTheCanonicalTree) {
  // Values whose float sum depends on the order: the tree order is
  // ((x0 + x1) + (x2 + x3)) + x4 for five clients.
  auto f = program({{"clients", 5}}, [](Value xs) { return reduce_sum(xs); }, {"clients"});
  Program p = trace(f, {f32t({5})});
  Array xs = f32_array({1e8f, 1.0f, -1e8f, 1.0f, 0.5f}, {5});
  float want = ((1e8f + 1.0f) + (-1e8f + 1.0f)) + 0.5f;
  EXPECT_EQ(compile(p).run({xs})[0].item<float>(), want);
  EXPECT_TRUE(compile(p).run({xs})[0].bitwise_equal(interpret(p, {xs})[0]));
}

TEST(Exec, TakeGathersAnyAxisWithNegativeIndicesAndChecksRange) {
  auto f = [](Value x, Value i) { return take(x, i, 1); };
  Program p = trace(f, {f64t({2, 5, 3}), Type(DType::i64, {2, 2})});
  EXPECT_EQ(compile(p).stats().fallbacks, 0u);
  Array x = random_array({2, 5, 3}, f64, 4);
  Array idx = Array::from_vector<int64_t>({4, -1, 0, -5}, {2, 2});
  Array got = compile(p).run({x, idx})[0];
  ASSERT_EQ(got.shape(), (Shape{2, 2, 2, 3}));
  // got[o, j, k, c] = x[o, idx[j, k] mod 5, c], by hand.
  const int64_t rows[4] = {4, 4, 0, 0};
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(got.data<double>()[(o * 4 + j) * 3 + c],
                  x.data<double>()[(o * 5 + rows[j]) * 3 + c]);
  Array bad = Array::from_vector<int64_t>({0, 5, 1, 2}, {2, 2});
  try {
    compile(p).run({x, bad});
    FAIL() << "index 5 of an axis of size 5 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("take: index 5 is out of range for axis 1 of size 5"),
              std::string::npos);
  }
}

TEST(Exec, JitRunsCompiledPrograms) {
  auto f = jit([](Value a, Value b) { return logistic(matmul(a, b)); });
  Array a = random_array({8, 16}, f32, 1), b = random_array({16, 4}, f32, 2);
  Array got = f(a, b);
  Array want = interpret(f.last_program(), {a, b})[0];
  EXPECT_TRUE(Close(got, want, 1e-5));
  EXPECT_TRUE(Close(f(a, b), want, 1e-5));
  EXPECT_EQ(f.trace_count(), 1);
}

// ---- thread pool -------------------------------------------------------------
TEST(ExecThreadPool, RunsEveryTaskOnceAndRethrows) {
  exec::ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t i) { ++hits[static_cast<size_t>(i)]; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  // Nested calls run inline instead of deadlocking.
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](int64_t) { pool.parallel_for(5, [&](int64_t) { ++inner; }); });
  EXPECT_EQ(inner.load(), 20);
  EXPECT_THROW(pool.parallel_for(50,
                                 [](int64_t i) {
                                   if (i == 17) throw Error("task 17");
                                 }),
               Error);
  std::atomic<int> after{0};
  pool.parallel_for(10, [&](int64_t) { ++after; });
  EXPECT_EQ(after.load(), 10);
}

// A product outside map_fn is split into row blocks that drx's threads run, each one BLAS call
// on one BLAS thread: its bits are the same whatever drx's thread count and whatever thread
// count OpenBLAS was left at (a multithreaded BLAS call rounds differently as that changes).
TEST(Exec, TopLevelProductsAreBitwiseTheSameUnderAnyThreadCount) {
  // Shapes where OpenBLAS 0.3.21 on 1 and 2 threads round differently: a test set through a
  // hidden layer, and a few rows.
  const Array a = random_array({1000, 784}, DType::f32, 81);
  const Array b = random_array({784, 200}, DType::f32, 82);
  const Array c = random_array({8, 784}, DType::f32, 83);
  auto f = [](Value x, Value y, Value z) {
    return std::vector<Value>{matmul(x, y), transpose(matmul(x, y), {1, 0}), matmul(z, y)};
  };
  const std::vector<Type> types = {Type(DType::f32, {1000, 784}), Type(DType::f32, {784, 200}),
                                   Type(DType::f32, {8, 784})};
  const std::vector<Array> exact = interpret(trace(f, types), {a, b, c});  // double accumulation
  const int saved_drx = num_threads();
  const int saved_blas = openblas_get_num_threads ? openblas_get_num_threads() : 1;
  std::vector<Array> want;
  for (int drx_threads : {1, 2, 3})
    for (int blas_threads : {1, 2, 4}) {
      SCOPED_TRACE("drx " + std::to_string(drx_threads) + ", OpenBLAS " +
                   std::to_string(blas_threads));
      set_num_threads(drx_threads);
      if (openblas_set_num_threads) openblas_set_num_threads(blas_threads);
      std::vector<Array> got = jit(f)(a, b, c);
      if (want.empty()) want = got;
      EXPECT_TRUE(BitwiseEqual(got, want));
      for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(Close(got[k], exact[k], 1e-4));
    }
  set_num_threads(saved_drx);
  if (openblas_set_num_threads) openblas_set_num_threads(saved_blas);
}

}  // namespace
}  // namespace drx::testing
