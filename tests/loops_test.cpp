// The loops of drx/transforms/loops.h: scan, fori_loop and while_loop.
//  - values against plain C++ loops over doubles (f64 and f32; trees of carries,
//    xs and ys; reverse; length with no xs; length 0; captured consts; an int
//    carry), through the interpreter and under jit;
//  - derivatives against central finite differences of those C++ loops in f64
//    (first and second order, with respect to init, xs and captured consts),
//    vjp against jvp, while_loop jvp against finite differences, and
//    while_loop's reverse mode an error that points to scan and fori_loop;
//  - remat and checkpoint_every gradients bitwise equal to the stored-residual
//    gradient;
//  - vmap against a loop over the batch (also while_loop lanes that finish at
//    different iterations);
//  - a 100-step SGD hypergradient against the unrolled loop;
//  - cond and map_fn inside loops and loops inside map_fn;
//  - one equation whatever the length; program text round trips and malformed
//    text; errors that name the operation.
#include "drx/transforms/loops.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "transform_checks.h"

namespace drx::testing {
namespace {

using Vec = std::vector<double>;
using Args = std::vector<Vec>;  // one flat vector per argument
using RefFn = std::function<double(const Args&)>;
using std::nullopt;

Type typed(DType d, Shape s) { return Type(d, std::move(s)); }
Type f64t(Shape s) { return Type(f64, std::move(s)); }

Array arr(const Vec& v, Shape s, DType d = f64) {
  return convert_array(f64_array(v, std::move(s)), d);
}
Vec rnd(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return to_doubles(random_array({n}, f64, seed, lo, hi));
}
Array i32_scalar(int32_t v) { return Array::scalar<int32_t>(v); }
Value i32_const(int32_t v) { return constant(i32_scalar(v)); }

Args doubles_of(const std::vector<Array>& as) {
  Args out;
  for (const Array& a : as) out.push_back(to_doubles(a));
  return out;
}

double dot(const Array& a, const Array& b) {
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.element_as_double(i) * b.element_as_double(i);
  return s;
}

// Same dtype, shape and raw bytes, result by result.
::testing::AssertionResult SameBytes(const std::vector<Array>& got,
                                     const std::vector<Array>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " results, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const Array &g = got[i], &w = want[i];
    if (g.dtype() != w.dtype() || g.shape() != w.shape() || g.nbytes() != w.nbytes() ||
        (g.nbytes() > 0 && std::memcmp(g.raw(), w.raw(), g.nbytes()) != 0))
      return ::testing::AssertionFailure()
             << "result " << i << " differs: " << g.str() << " vs " << w.str();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AllNear(const std::vector<Array>& got, const Args& want, double rtol,
                                   double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " results, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    ::testing::AssertionResult r = ArrayNear(got[i], want[i], rtol, atol);
    if (!r) return ::testing::AssertionFailure() << "result " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// Central differences of f in every element of every argument.
Args finite_gradient(const RefFn& f, const Args& x, double h = 1e-6) {
  Args g;
  for (size_t i = 0; i < x.size(); ++i) {
    Vec gi;
    for (size_t k = 0; k < x[i].size(); ++k) {
      Args up = x, down = x;
      up[i][k] += h;
      down[i][k] -= h;
      gi.push_back((f(up) - f(down)) / (2 * h));
    }
    g.push_back(gi);
  }
  return g;
}

// e_ik . (H v) by mixed central differences, for every element k of every argument i.
Args finite_hvp(const RefFn& f, const Args& x, const Args& v, double h = 1e-4) {
  auto at = [&](size_t i, size_t k, double si, double sv) {
    Args y = x;
    for (size_t j = 0; j < y.size(); ++j)
      for (size_t m = 0; m < y[j].size(); ++m) y[j][m] += sv * h * v[j][m];
    y[i][k] += si * h;
    return f(y);
  };
  Args hv;
  for (size_t i = 0; i < x.size(); ++i) {
    Vec hi;
    for (size_t k = 0; k < x[i].size(); ++k)
      hi.push_back((at(i, k, 1, 1) - at(i, k, 1, -1) - at(i, k, -1, 1) + at(i, k, -1, -1)) /
                   (4 * h * h));
    hv.push_back(hi);
  }
  return hv;
}

// fn throws a drx::Error whose message contains every one of `parts`.
::testing::AssertionResult ThrowsNaming(const std::function<void()>& fn,
                                        const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts)
      if (msg.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << msg << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no drx::Error was thrown";
}

size_t count_prim(const Program& p, const std::string& name) {
  size_t n = 0;
  for (const Eqn& e : p.eqns) n += e.prim->name() == name ? 1 : 0;
  return n;
}

// ---- the scan under test: a small recurrent cell over trees ----------------
// carry {h: [3], n: i32 counter, s: scalar}; x {a: [3], b: scalar}; w: [3]
// captured from the enclosing trace. Per step (in x order, or from the last x
// when reverse):
//   h' = tanh(h * w + a), s' = s + b * sum(h'), n' = n + 1
//   y = [h' * b, sum(h^2)]   (the second from the carry before the step)
struct RnnRef {
  Vec h;
  double s = 0;
  int n = 0;
  Vec ys0, ys1;
};

RnnRef rnn_ref(const Vec& h0, const Vec& a, const Vec& b, const Vec& w, bool reverse) {
  const size_t steps = b.size();
  RnnRef r{h0, 0.0, 0, Vec(steps * 3), Vec(steps)};
  for (size_t k = 0; k < steps; ++k) {
    const size_t t = reverse ? steps - 1 - k : k;
    double sq = 0, sh = 0;
    for (double v : r.h) sq += v * v;
    for (size_t i = 0; i < 3; ++i) {
      r.h[i] = std::tanh(r.h[i] * w[i] + a[t * 3 + i]);
      sh += r.h[i];
    }
    r.s += b[t] * sh;
    for (size_t i = 0; i < 3; ++i) r.ys0[t * 3 + i] = r.h[i] * b[t];
    r.ys1[t] = sq;
    r.n += 1;
  }
  return r;
}

// Fixed weights of the scalar loss.
Vec rnn_u() { return {0.3, -0.7, 1.1}; }
Vec rnn_c0(int64_t steps) {
  Vec c;
  for (int64_t t = 0; t < steps; ++t)
    for (int i = 0; i < 3; ++i) c.push_back(std::cos(static_cast<double>(t) + 0.5 * i));
  return c;
}
Vec rnn_c1(int64_t steps) {
  Vec c;
  for (int64_t t = 0; t < steps; ++t) c.push_back(std::sin(1.0 + static_cast<double>(t)));
  return c;
}

// loss = <h, u> + s^2 + <ys0, c0> + <ys1, c1>
double rnn_loss_ref(const Args& x, bool reverse) {
  const int64_t steps = static_cast<int64_t>(x[2].size());
  RnnRef r = rnn_ref(x[0], x[1], x[2], x[3], reverse);
  Vec u = rnn_u(), c0 = rnn_c0(steps), c1 = rnn_c1(steps);
  double l = r.s * r.s;
  for (size_t i = 0; i < 3; ++i) l += r.h[i] * u[i];
  for (size_t k = 0; k < r.ys0.size(); ++k) l += r.ys0[k] * c0[k];
  for (size_t t = 0; t < r.ys1.size(); ++t) l += r.ys1[t] * c1[t];
  return l;
}

std::pair<Tree, Tree> rnn_scan(const Value& h0, const Value& a, const Value& b, const Value& w,
                               const ScanOptions& opt) {
  Tree init = Tree::dict(
      {{"h", Tree(h0)}, {"n", Tree(i32_const(0))}, {"s", Tree(fill({}, 0.0, h0.dtype()))}});
  Tree xs = Tree::dict({{"a", Tree(a)}, {"b", Tree(b)}});
  return scan(
      [w](const Tree& c, const Tree& x) -> std::pair<Tree, Tree> {
        Value h = c["h"].value(), bt = x["b"].value();
        Value hn = tanh(h * w + x["a"].value());
        Tree carry = Tree::dict({{"h", Tree(hn)},
                                 {"n", Tree(c["n"].value() + 1.0)},
                                 {"s", Tree(c["s"].value() + bt * sum(hn))}});
        return {carry, Tree::list({Tree(hn * bt), Tree(sum(square(h)))})};
      },
      init, xs, opt);
}

// [h, n, s, ys0, ys1]
std::vector<Value> rnn_outputs(const Value& h0, const Value& a, const Value& b, const Value& w,
                               const ScanOptions& opt) {
  auto [c, ys] = rnn_scan(h0, a, b, w, opt);
  return {c["h"].value(), c["n"].value(), c["s"].value(), ys[0].value(), ys[1].value()};
}

Value rnn_loss(const Value& h0, const Value& a, const Value& b, const Value& w,
               const ScanOptions& opt) {
  const int64_t steps = b.shape()[0];
  const DType d = h0.dtype();
  auto [c, ys] = rnn_scan(h0, a, b, w, opt);
  return sum(c["h"].value() * constant(arr(rnn_u(), {3}, d))) + square(c["s"].value()) +
         sum(ys[0].value() * constant(arr(rnn_c0(steps), {steps, 3}, d))) +
         sum(ys[1].value() * constant(arr(rnn_c1(steps), {steps}, d)));
}

auto rnn_outputs_fn(ScanOptions opt) {
  return [opt](Value h0, Value a, Value b, Value w) { return rnn_outputs(h0, a, b, w, opt); };
}
// The floating-point outputs only: [h, s, ys0, ys1].
auto rnn_float_fn(ScanOptions opt) {
  return [opt](Value h0, Value a, Value b, Value w) {
    std::vector<Value> o = rnn_outputs(h0, a, b, w, opt);
    return std::vector<Value>{o[0], o[2], o[3], o[4]};
  };
}
auto rnn_loss_fn(ScanOptions opt) {
  return [opt](Value h0, Value a, Value b, Value w) { return rnn_loss(h0, a, b, w, opt); };
}
auto rnn_grad_fn(ScanOptions opt) { return grad(rnn_loss_fn(opt), std::vector<int>{0, 1, 2, 3}); }

struct RnnData {
  int64_t steps;
  Vec h0, a, b, w;
  std::vector<Array> arrays(DType d = f64) const {
    return {arr(h0, {3}, d), arr(a, {steps, 3}, d), arr(b, {steps}, d), arr(w, {3}, d)};
  }
  std::vector<Type> types(DType d = f64) const {
    return {typed(d, {3}), typed(d, {steps, 3}), typed(d, {steps}), typed(d, {3})};
  }
  Args args() const { return {h0, a, b, w}; }
};
RnnData rnn_data(int64_t steps, uint64_t seed) {
  return {steps, rnd(3, seed), rnd(3 * steps, seed + 1), rnd(steps, seed + 2),
          rnd(3, seed + 3, 0.5, 1.5)};
}

template <class J>
auto call4(const J& f, const std::vector<Array>& in) {
  return f(in[0], in[1], in[2], in[3]);
}

// ---- 1. values --------------------------------------------------------------

TEST(Loops, ScanOfTreesMatchesALoop) {
  for (DType d : {f64, f32})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + (reverse ? " reverse" : " forward"));
      RnnData data = rnn_data(6, 11);
      std::vector<Array> in = data.arrays(d);
      Args x = doubles_of(in);  // the inputs as rounded to d
      RnnRef want = rnn_ref(x[0], x[1], x[2], x[3], reverse);
      auto fn = rnn_outputs_fn(ScanOptions{.reverse = reverse});
      std::vector<Array> jitted = call4(jit(fn), in);
      std::vector<Array> interpreted = run(trace(fn, data.types(d)), in);
      const double tol = d == f64 ? 1e-12 : 2e-5;
      for (const std::vector<Array>& out : {jitted, interpreted}) {
        ASSERT_EQ(out.size(), 5u);
        EXPECT_EQ(out[0].dtype(), d);
        EXPECT_TRUE(ArrayNear(out[0], want.h, tol, tol));
        EXPECT_EQ(out[1].dtype(), i32);
        EXPECT_EQ(out[1].item<int32_t>(), 6);
        EXPECT_TRUE(ArrayNear(out[2], {want.s}, tol, tol));
        EXPECT_EQ(out[3].shape(), (Shape{6, 3}));
        EXPECT_TRUE(ArrayNear(out[3], want.ys0, tol, tol));
        EXPECT_EQ(out[4].shape(), (Shape{6}));
        EXPECT_TRUE(ArrayNear(out[4], want.ys1, tol, tol));
      }
    }
}

TEST(Loops, ScanOfLengthZeroReturnsInitAndEmptyYs) {
  RnnData data = rnn_data(0, 12);
  std::vector<Array> in = data.arrays();
  auto fn = rnn_outputs_fn({});
  for (const std::vector<Array>& out : {call4(jit(fn), in), run(trace(fn, data.types()), in)}) {
    ASSERT_EQ(out.size(), 5u);
    EXPECT_TRUE(ArrayNear(out[0], data.h0, 0, 0));
    EXPECT_EQ(out[1].item<int32_t>(), 0);
    EXPECT_TRUE(ArrayNear(out[2], {0.0}, 0, 0));
    EXPECT_EQ(out[3].shape(), (Shape{0, 3}));
    EXPECT_EQ(out[4].shape(), (Shape{0}));
  }
}

// c' = c * 0.5 + w, y = c * c (before the update); no xs, `length` steps.
std::pair<Tree, Tree> halving(const Value& c0, const Value& w, const ScanOptions& opt,
                              bool overload) {
  ScanFn f = [w](const Tree& c, const Tree& x) -> std::pair<Tree, Tree> {
    EXPECT_TRUE(tree_leaves(x).empty()) << x.structure();
    Value cv = c.value();
    return {Tree(cv * 0.5 + w), Tree(cv * cv)};
  };
  if (overload) return scan(f, Tree(c0), Tree(), opt.length);
  return scan(f, Tree(c0), Tree(), opt);
}

TEST(Loops, ScanWithALengthAndNoXs) {
  const Vec c0 = {0.7, -1.2}, w = {0.3, 0.1};
  for (int64_t length : {0, 1, 5})
    for (bool reverse : {false, true})
      for (bool overload : {false, true}) {
        if (overload && reverse) continue;  // the length overload runs forward
        SCOPED_TRACE("length " + std::to_string(length) + (reverse ? " reverse" : "") +
                     (overload ? " (length overload)" : ""));
        Vec c = c0, ys(static_cast<size_t>(2 * length));
        for (int64_t k = 0; k < length; ++k) {
          const int64_t t = reverse ? length - 1 - k : k;
          for (size_t i = 0; i < 2; ++i) {
            ys[static_cast<size_t>(t) * 2 + i] = c[i] * c[i];
            c[i] = c[i] * 0.5 + w[i];
          }
        }
        ScanOptions opt{.length = length, .reverse = reverse};
        auto fn = [opt, overload](Value cv, Value wv) {
          auto [carry, y] = halving(cv, wv, opt, overload);
          return std::vector<Value>{carry.value(), y.value()};
        };
        Array ca = f64_array(c0, {2}), wa = f64_array(w, {2});
        for (const std::vector<Array>& out :
             {jit(fn)(ca, wa), run(trace(fn, {f64t({2}), f64t({2})}), {ca, wa})}) {
          ASSERT_EQ(out.size(), 2u);
          EXPECT_TRUE(ArrayNear(out[0], c, 1e-15, 1e-15));
          EXPECT_EQ(out[1].shape(), (Shape{length, 2}));
          EXPECT_TRUE(ArrayNear(out[1], ys, 1e-15, 1e-15));
        }
      }
}

TEST(Loops, ScanBodyUsesValuesOfTheEnclosingTrace) {
  // e = exp(w) and k = sum(w) are computed outside the body and used inside it,
  // as is the argument w itself; no xs, 4 steps: c' = c * e + k * w.
  auto f = [](Value c0, Value w) {
    Value e = exp(w), k = sum(w);
    auto [c, ys] = scan(
        [&](const Tree& c, const Tree&) -> std::pair<Tree, Tree> {
          return {Tree(c.value() * e + k * w), Tree()};
        },
        Tree(c0), Tree(), 4);
    EXPECT_TRUE(tree_leaves(ys).empty());
    return sum(c.value() * c.value());
  };
  auto ref = [](const Args& x) {
    const Vec &c0 = x[0], &w = x[1];
    double k = w[0] + w[1];
    double total = 0;
    for (size_t i = 0; i < 2; ++i) {
      double c = c0[i];
      for (int s = 0; s < 4; ++s) c = c * std::exp(w[i]) + k * w[i];
      total += c * c;
    }
    return total;
  };
  const Args x = {{0.4, -0.3}, {-0.2, 0.1}};
  Array c0 = f64_array(x[0], {2}), w = f64_array(x[1], {2});
  EXPECT_NEAR(jit(f)(c0, w).item<double>(), ref(x), 1e-12);
  EXPECT_NEAR(run(trace(f, {f64t({2}), f64t({2})}), {c0, w})[0].item<double>(), ref(x), 1e-12);
  std::vector<Array> g = jit(grad(f, std::vector<int>{0, 1}))(c0, w);
  EXPECT_TRUE(AllNear(g, finite_gradient(ref, x), 1e-6, 1e-6));
}

// Outer scan over the rows of m (carry acc), inner scan over a row's elements
// (carry q from 1): q' = q * k + m_ij * acc, inner y = q'. The inner body uses
// k (captured two traces up) and acc (the outer body's carry).
// Outer: acc' = acc + sin(q_final), y = sum of the inner ys.
std::vector<Value> nested_scans(const Value& acc0, const Value& m, const Value& k) {
  auto [acc, ys] = scan(
      [&k](const Tree& c, const Tree& row) -> std::pair<Tree, Tree> {
        Value a = c.value();
        auto [q, qs] = scan(
            [&k, a](const Tree& qc, const Tree& mij) -> std::pair<Tree, Tree> {
              Value qn = qc.value() * k + mij.value() * a;
              return {Tree(qn), Tree(qn)};
            },
            Tree(ones_like(a)), row);
        return {Tree(a + sin(q.value())), Tree(sum(qs.value()))};
      },
      Tree(acc0), Tree(m));
  return {acc.value(), ys.value()};
}

std::pair<double, Vec> nested_ref(double acc, const Vec& m, int64_t rows, int64_t cols, double k) {
  Vec ys;
  for (int64_t i = 0; i < rows; ++i) {
    double q = 1, total = 0;
    for (int64_t j = 0; j < cols; ++j) {
      q = q * k + m[static_cast<size_t>(i * cols + j)] * acc;
      total += q;
    }
    acc += std::sin(q);
    ys.push_back(total);
  }
  return {acc, ys};
}

TEST(Loops, NestedScansMatchNestedLoops) {
  const Vec m = rnd(12, 13);
  auto [acc, ys] = nested_ref(0.3, m, 4, 3, 0.7);
  auto f = [](Value a, Value mv, Value k) { return nested_scans(a, mv, k); };
  std::vector<Array> in = {Array::scalar(0.3), f64_array(m, {4, 3}), Array::scalar(0.7)};
  for (const std::vector<Array>& out :
       {jit(f)(in[0], in[1], in[2]), run(trace(f, {f64t({}), f64t({4, 3}), f64t({})}), in)}) {
    ASSERT_EQ(out.size(), 2u);
    EXPECT_NEAR(out[0].item<double>(), acc, 1e-12);
    EXPECT_TRUE(ArrayNear(out[1], ys, 1e-12, 1e-12));
  }
  // And its gradient in all three arguments.
  auto loss = [](Value a, Value mv, Value k) {
    std::vector<Value> o = nested_scans(a, mv, k);
    return o[0] + sum(o[1] * constant(f64_array({0.5, -1, 2, 0.25}, {4})));
  };
  auto ref = [](const Args& x) {
    auto [a, y] = nested_ref(x[0][0], x[1], 4, 3, x[2][0]);
    return a + 0.5 * y[0] - y[1] + 2 * y[2] + 0.25 * y[3];
  };
  std::vector<Array> g = jit(grad(loss, std::vector<int>{0, 1, 2}))(in[0], in[1], in[2]);
  EXPECT_TRUE(AllNear(g, finite_gradient(ref, {{0.3}, m, {0.7}}), 1e-6, 1e-6));
}

// carry [x: [3], k: i32]; x' = x * cos(0.3 i) + v * i, k' = k + i.
Tree fori_poly(int64_t lo, int64_t hi, const Value& x0, const Value& v) {
  return fori_loop(
      lo, hi,
      [v](const Value& i, const Tree& c) {
        EXPECT_EQ(i.dtype(), i32);
        EXPECT_TRUE(i.shape().empty());
        Value fi = astype(i, v.dtype());
        return Tree::list({Tree(c[0].value() * cos(fi * 0.3) + v * fi), Tree(c[1].value() + i)});
      },
      Tree::list({Tree(x0), Tree(i32_const(0))}));
}

TEST(Loops, ForiLoopMatchesALoop) {
  const Vec x0 = {0.5, -1.0, 2.0}, v = {0.1, 0.2, -0.3};
  for (DType d : {f64, f32})
    for (std::pair<int64_t, int64_t> range :
         std::vector<std::pair<int64_t, int64_t>>{{2, 9}, {0, 1}, {3, 3}, {5, 2}}) {
      const int64_t lo = range.first, hi = range.second;
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + std::to_string(lo) + ".." +
                   std::to_string(hi));
      Vec x = to_doubles(arr(x0, {3}, d));
      const Vec vr = to_doubles(arr(v, {3}, d));
      int32_t k = 0;
      for (int64_t i = lo; i < hi; ++i) {
        for (size_t j = 0; j < 3; ++j)
          x[j] = x[j] * std::cos(static_cast<double>(i) * 0.3) + vr[j] * static_cast<double>(i);
        k += static_cast<int32_t>(i);
      }
      auto fn = [lo, hi](Value xv, Value vv) {
        Tree r = fori_poly(lo, hi, xv, vv);
        return std::vector<Value>{r[0].value(), r[1].value()};
      };
      Array xa = arr(x0, {3}, d), va = arr(v, {3}, d);
      const double tol = d == f64 ? 1e-12 : 2e-5;
      for (const std::vector<Array>& out :
           {jit(fn)(xa, va), run(trace(fn, {typed(d, {3}), typed(d, {3})}), {xa, va})}) {
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[0].dtype(), d);
        EXPECT_TRUE(ArrayNear(out[0], x, tol, tol));
        EXPECT_EQ(out[1].dtype(), i32);
        EXPECT_EQ(out[1].item<int32_t>(), k);
      }
    }
}

// {k: i32, x: scalar}: while x < limit: x = x * g + 1, k += 1. limit is a
// const of the predicate, g one of the body.
Tree grow_until(const Value& x0, const Value& g, const Value& limit) {
  Tree init = Tree::dict({{"k", Tree(i32_const(0))}, {"x", Tree(x0)}});
  return while_loop([limit](const Tree& c) { return less(c["x"].value(), limit); },
                    [g](const Tree& c) {
                      return Tree::dict({{"k", Tree(c["k"].value() + 1.0)},
                                         {"x", Tree(c["x"].value() * g + 1.0)}});
                    },
                    init);
}
std::vector<Value> grow_outputs(const Value& x0, const Value& g, const Value& limit) {
  Tree r = grow_until(x0, g, limit);
  return {r["x"].value(), r["k"].value()};
}

template <class T>
std::pair<double, int> grow_ref(T x, T g, T limit) {
  int k = 0;
  while (x < limit) {
    x = x * g + T(1);
    ++k;
  }
  return {static_cast<double>(x), k};
}

TEST(Loops, WhileLoopMatchesALoop) {
  auto fn = [](Value x0, Value g, Value limit) { return grow_outputs(x0, g, limit); };
  for (DType d : {f64, f32})
    for (double x0 : {0.5, 3.0, 99.5, 150.0}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " x0 = " + std::to_string(x0));
      auto [x, k] = d == f64 ? grow_ref<double>(x0, 1.7, 100.0) : grow_ref<float>(x0, 1.7f, 100.f);
      std::vector<Array> in = {arr({x0}, {}, d), arr({1.7}, {}, d), arr({100.0}, {}, d)};
      const double tol = d == f64 ? 1e-12 : 1e-5;
      for (const std::vector<Array>& out :
           {jit(fn)(in[0], in[1], in[2]),
            run(trace(fn, {typed(d, {}), typed(d, {}), typed(d, {})}), in)}) {
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[0].dtype(), d);
        EXPECT_TRUE(ArrayNear(out[0], {x}, tol, tol));
        EXPECT_EQ(out[1].dtype(), i32);
        EXPECT_EQ(out[1].item<int32_t>(), k);
      }
    }
}

// x' = x * 1.2 + sin(x) * c while sum(x^2) < 25; carry [x: [3], k: i32].
Tree spiral(const Value& x0, const Value& c) {
  return while_loop(
      [](const Tree& t) {
        Value x = t[0].value();
        return less(sum(square(x)), fill({}, 25.0, x.dtype()));
      },
      [c](const Tree& t) {
        Value x = t[0].value();
        return Tree::list({Tree(x * 1.2 + sin(x) * c), Tree(t[1].value() + 1.0)});
      },
      Tree::list({Tree(x0), Tree(i32_const(0))}));
}
// The final x, the trip count, and the smallest distance of sum(x^2) to 25
// seen by the predicate (how far the trip count is from changing).
struct SpiralRef {
  Vec x;
  int k = 0;
  double margin = 1e300;
};
SpiralRef spiral_ref(Vec x, double c) {
  SpiralRef r;
  for (;;) {
    double s = 0;
    for (double v : x) s += v * v;
    r.margin = std::min(r.margin, std::abs(s - 25.0));
    if (!(s < 25.0)) break;
    for (double& v : x) v = v * 1.2 + std::sin(v) * c;
    ++r.k;
  }
  r.x = x;
  return r;
}

TEST(Loops, WhileLoopOverAVectorCarry) {
  auto fn = [](Value x0, Value c) {
    Tree r = spiral(x0, c);
    return std::vector<Value>{r[0].value(), r[1].value()};
  };
  const Vec x0 = {0.3, -0.2, 0.5};
  SpiralRef want = spiral_ref(x0, 0.4);
  ASSERT_GT(want.k, 3);
  std::vector<Array> in = {f64_array(x0, {3}), Array::scalar(0.4)};
  for (const std::vector<Array>& out :
       {jit(fn)(in[0], in[1]), run(trace(fn, {f64t({3}), f64t({})}), in)}) {
    EXPECT_TRUE(ArrayNear(out[0], want.x, 1e-12, 1e-12));
    EXPECT_EQ(out[1].item<int32_t>(), want.k);
  }
}

// ---- 2. derivatives -----------------------------------------------------------

TEST(LoopsGrad, ScanGradientsMatchFiniteDifferences) {
  // With respect to init (h0), xs (a, b) and the captured const (w).
  for (int64_t steps : {0, 1, 5})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE("length " + std::to_string(steps) + (reverse ? " reverse" : ""));
      RnnData data = rnn_data(steps, 21);
      std::vector<Array> in = data.arrays();
      Args fd = finite_gradient([reverse](const Args& x) { return rnn_loss_ref(x, reverse); },
                                data.args());
      auto g = rnn_grad_fn(ScanOptions{.reverse = reverse});
      EXPECT_TRUE(AllNear(call4(jit(g), in), fd, 1e-6, 1e-6));
      EXPECT_TRUE(AllNear(run(trace(g, data.types()), in), fd, 1e-6, 1e-6));
      // The value too.
      EXPECT_NEAR(call4(jit(rnn_loss_fn(ScanOptions{.reverse = reverse})), in).item<double>(),
                  rnn_loss_ref(data.args(), reverse), 1e-12);
    }
}

TEST(LoopsGrad, ScanSecondDerivativesMatchFiniteDifferences) {
  // H v with respect to all four arguments jointly: grad of <grad loss, v>.
  RnnData data = rnn_data(4, 31);
  RnnData dir = rnn_data(4, 35);  // the direction v
  std::vector<Array> in = data.arrays(), vs = dir.arrays();
  for (ScanOptions opt : {ScanOptions{}, ScanOptions{.reverse = true},
                          ScanOptions{.checkpoint_every = 3}, ScanOptions{.remat = true}}) {
    SCOPED_TRACE(std::string(opt.reverse ? "reverse " : "") + (opt.remat ? "remat " : "") +
                 "checkpoint_every " + std::to_string(opt.checkpoint_every));
    auto g = rnn_grad_fn(opt);
    auto hvp = jit(grad(
        [g, vs](Value h0, Value a, Value b, Value w) {
          std::vector<Value> gs = g(h0, a, b, w);
          Value s = sum(gs[0] * constant(vs[0]));
          for (size_t i = 1; i < 4; ++i) s = s + sum(gs[i] * constant(vs[i]));
          return s;
        },
        std::vector<int>{0, 1, 2, 3}));
    const bool reverse = opt.reverse;
    Args want = finite_hvp([reverse](const Args& x) { return rnn_loss_ref(x, reverse); },
                           data.args(), dir.args());
    EXPECT_TRUE(AllNear(call4(hvp, in), want, 1e-6, 1e-6));
  }
}

// x' = x - lr * sin(x * v) + 0.01 * i * v for i in [1, 8); loss = <x, u>.
Value fori_loss(const Value& x0, const Value& v, const Value& lr, const ScanOptions& opt) {
  Tree x = fori_loop(
      1, 8,
      [&](const Value& i, const Tree& c) {
        Value xc = c.value();
        return Tree(xc - lr * sin(xc * v) + 0.01 * astype(i, f64) * v);
      },
      Tree(x0), opt);
  return sum(x.value() * constant(f64_array({0.3, -0.7, 1.1}, {3})));
}
double fori_loss_ref(const Args& a) {
  Vec x = a[0];
  const Vec& v = a[1];
  const double lr = a[2][0];
  for (int i = 1; i < 8; ++i)
    for (size_t j = 0; j < 3; ++j) x[j] = x[j] - lr * std::sin(x[j] * v[j]) + 0.01 * i * v[j];
  return 0.3 * x[0] - 0.7 * x[1] + 1.1 * x[2];
}
auto fori_loss_fn(ScanOptions opt = {}) {
  return [opt](Value x0, Value v, Value lr) { return fori_loss(x0, v, lr, opt); };
}

TEST(LoopsGrad, ForiLoopGradientsMatchFiniteDifferences) {
  const Args x = {{0.5, -1.0, 2.0}, {0.8, 1.3, -0.6}, {0.35}};
  std::vector<Array> in = {f64_array(x[0], {3}), f64_array(x[1], {3}), Array::scalar(x[2][0])};
  auto g = grad(fori_loss_fn(), std::vector<int>{0, 1, 2});
  Args fd = finite_gradient(fori_loss_ref, x);
  EXPECT_TRUE(AllNear(jit(g)(in[0], in[1], in[2]), fd, 1e-6, 1e-6));
  EXPECT_TRUE(AllNear(run(trace(g, {f64t({3}), f64t({3}), f64t({})}), in), fd, 1e-6, 1e-6));
  EXPECT_NEAR(jit(fori_loss_fn())(in[0], in[1], in[2]).item<double>(), fori_loss_ref(x), 1e-12);

  // d^2/dlr^2 by grad of grad, and the full Hessian-vector product.
  const double h = 1e-4;
  auto f_lr = [&](double lr) { return fori_loss_ref({x[0], x[1], {lr}}); };
  const double d2 = (f_lr(x[2][0] + h) - 2 * f_lr(x[2][0]) + f_lr(x[2][0] - h)) / (h * h);
  EXPECT_NEAR(jit(grad(grad(fori_loss_fn(), 2), 2))(in[0], in[1], in[2]).item<double>(), d2,
              1e-6 * std::max(1.0, std::abs(d2)));
  const Args v = {{0.2, -0.5, 0.9}, {-0.4, 0.1, 0.3}, {0.7}};
  auto gl = grad(fori_loss_fn(), std::vector<int>{0, 1, 2});
  auto hvp = jit(grad(
      [gl, v](Value x0, Value vv, Value lr) {
        std::vector<Value> gs = gl(x0, vv, lr);
        return sum(gs[0] * constant(f64_array(v[0], {3}))) +
               sum(gs[1] * constant(f64_array(v[1], {3}))) + gs[2] * v[2][0];
      },
      std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(AllNear(hvp(in[0], in[1], in[2]), finite_hvp(fori_loss_ref, x, v), 1e-6, 1e-6));
}

TEST(LoopsGrad, VjpAgreesWithJvp) {
  RnnData data = rnn_data(5, 41);
  std::vector<Array> in = data.arrays();
  std::vector<Array> vs = rnn_data(5, 45).arrays();  // tangents, shaped like the inputs
  std::vector<Array> us = {random_array({3}, f64, 51), random_array({}, f64, 52),
                           random_array({5, 3}, f64, 53), random_array({5}, f64, 54)};
  for (ScanOptions opt : {ScanOptions{}, ScanOptions{.reverse = true}, ScanOptions{.remat = true},
                          ScanOptions{.reverse = true, .checkpoint_every = 2}}) {
    auto F = rnn_float_fn(opt);
    auto jv = jit([F](Value h0, Value a, Value b, Value w, Value th, Value ta, Value tb, Value tw) {
      return jvp(F, {Tree(h0), Tree(a), Tree(b), Tree(w)}, {Tree(th), Tree(ta), Tree(tb), Tree(tw)})
          .second;
    });
    auto vj =
        jit([F](Value h0, Value a, Value b, Value w, Value uh, Value us_, Value uy0, Value uy1) {
          auto [y, pullback] = vjp(F, {Tree(h0), Tree(a), Tree(b), Tree(w)});
          std::vector<Tree> ct = pullback(Tree(std::vector<Value>{uh, us_, uy0, uy1}));
          return std::vector<Value>{ct[0].value(), ct[1].value(), ct[2].value(), ct[3].value()};
        });
    std::vector<Array> jvs = jv(in[0], in[1], in[2], in[3], vs[0], vs[1], vs[2], vs[3]);
    std::vector<Array> cts = vj(in[0], in[1], in[2], in[3], us[0], us[1], us[2], us[3]);
    ASSERT_EQ(jvs.size(), 4u);
    ASSERT_EQ(cts.size(), 4u);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < 4; ++i) lhs += dot(us[i], jvs[i]), rhs += dot(cts[i], vs[i]);
    EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(lhs)))
        << "reverse " << opt.reverse << " remat " << opt.remat << " checkpoint_every "
        << opt.checkpoint_every;
  }
}

TEST(LoopsGrad, WhileLoopJvpMatchesFiniteDifferences) {
  const Vec x0 = {0.3, -0.2, 0.5}, tx = {0.7, -1.1, 0.4};
  const double c = 0.4, tc = -0.3, h = 1e-6;
  SpiralRef at = spiral_ref(x0, c);
  ASSERT_GT(at.margin, 1e-3);  // the trip count does not change within +-h
  Vec up = x0, down = x0;
  for (size_t i = 0; i < 3; ++i) up[i] += h * tx[i], down[i] -= h * tx[i];
  SpiralRef fu = spiral_ref(up, c + h * tc), fdn = spiral_ref(down, c - h * tc);
  ASSERT_EQ(fu.k, at.k);
  ASSERT_EQ(fdn.k, at.k);
  Vec want;
  for (size_t i = 0; i < 3; ++i) want.push_back((fu.x[i] - fdn.x[i]) / (2 * h));
  auto F = [](Value xv, Value cv) { return spiral(xv, cv)[0].value(); };
  auto tangent = [F](Value xv, Value cv, Value txv, Value tcv) {
    auto [y, t] = jvp(F, {Tree(xv), Tree(cv)}, {Tree(txv), Tree(tcv)});
    return std::vector<Value>{y, t};
  };
  std::vector<Array> in = {f64_array(x0, {3}), Array::scalar(c), f64_array(tx, {3}),
                           Array::scalar(tc)};
  for (const std::vector<Array>& out :
       {jit(tangent)(in[0], in[1], in[2], in[3]),
        run(trace(tangent, {f64t({3}), f64t({}), f64t({3}), f64t({})}), in)}) {
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(ArrayNear(out[0], at.x, 1e-12, 1e-12));
    EXPECT_TRUE(ArrayNear(out[1], want, 1e-6, 1e-6));
  }
}

TEST(LoopsGrad, WhileLoopReverseModeIsAnErrorPointingToScan) {
  auto loss = [](Value xv, Value cv) { return sum(spiral(xv, cv)[0].value()); };
  Array x = f64_array({0.3, -0.2, 0.5}, {3}), c = Array::scalar(0.4);
  auto message_ok = [](const std::string& msg) {
    return msg.find("while_loop") != std::string::npos &&
           (msg.find("scan") != std::string::npos || msg.find("fori_loop") != std::string::npos);
  };
  EXPECT_THROW(jit(grad(loss, 0))(x, c), Error);
  EXPECT_THROW(trace(grad(loss, 1), {f64t({3}), f64t({})}), Error);
  try {
    jit(grad(loss, 0))(x, c);
    FAIL() << "grad through while_loop was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(message_ok(e.what())) << e.what();
  }
  // With respect to a const of the body only, and through vjp.
  try {
    jit(grad(loss, 1))(x, c);
    FAIL() << "grad through while_loop was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(message_ok(e.what())) << e.what();
  }
  auto pulled = [](Value xv, Value cv) {
    auto [y, pullback] = vjp([cv](Value z) { return spiral(z, cv)[0].value(); }, {Tree(xv)});
    return pullback(Tree(ones_like(y)))[0].value();
  };
  try {
    jit(pulled)(x, c);
    FAIL() << "vjp through while_loop was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(message_ok(e.what())) << e.what();
  }
}

// ---- 3. rematerialisation and checkpoints ------------------------------------

std::vector<ScanOptions> memory_options(bool reverse) {
  return {ScanOptions{.reverse = reverse, .remat = true},
          ScanOptions{.reverse = reverse, .checkpoint_every = 1},
          ScanOptions{.reverse = reverse, .checkpoint_every = 3},
          ScanOptions{.reverse = reverse, .checkpoint_every = 4},
          ScanOptions{.reverse = reverse, .checkpoint_every = 10},
          ScanOptions{.reverse = reverse, .checkpoint_every = 25},
          ScanOptions{.reverse = reverse, .remat = true, .checkpoint_every = 4}};
}
std::string describe(const ScanOptions& o) {
  return std::string(o.reverse ? "reverse " : "") + (o.remat ? "remat " : "") +
         "checkpoint_every " + std::to_string(o.checkpoint_every);
}

TEST(LoopsRemat, ScanGradientsEqualStoredResidualsBitwise) {
  RnnData data = rnn_data(10, 61);
  std::vector<Array> in = data.arrays();
  for (bool reverse : {false, true}) {
    ScanOptions base{.reverse = reverse};
    const Program base_program = trace(rnn_grad_fn(base), data.types());
    std::vector<Array> want_interp = interpret(base_program, in);
    std::vector<Array> want_jit = call4(jit(rnn_grad_fn(base)), in);
    // The stored-residual gradient is itself right.
    Args fd =
        finite_gradient([reverse](const Args& x) { return rnn_loss_ref(x, reverse); }, data.args());
    EXPECT_TRUE(AllNear(want_interp, fd, 1e-6, 1e-6));
    EXPECT_TRUE(AllNear(want_jit, fd, 1e-6, 1e-6));
    for (const ScanOptions& opt : memory_options(reverse)) {
      SCOPED_TRACE(describe(opt));
      const Program p = trace(rnn_grad_fn(opt), data.types());
      // The option is honoured: the gradient is computed by another program.
      EXPECT_NE(to_string(p), to_string(base_program));
      EXPECT_TRUE(SameBytes(interpret(p, in), want_interp));
      EXPECT_TRUE(SameBytes(call4(jit(rnn_grad_fn(opt)), in), want_jit));
    }
  }
}

TEST(LoopsRemat, ForiLoopGradientsEqualStoredResidualsBitwise) {
  std::vector<Array> in = {f64_array({0.5, -1.0, 2.0}, {3}), f64_array({0.8, 1.3, -0.6}, {3}),
                           Array::scalar(0.35)};
  const std::vector<Type> types = {f64t({3}), f64t({3}), f64t({})};
  auto g = [](ScanOptions o) { return grad(fori_loss_fn(o), std::vector<int>{0, 1, 2}); };
  std::vector<Array> want_interp = run(trace(g({}), types), in);
  std::vector<Array> want_jit = jit(g({}))(in[0], in[1], in[2]);
  for (const ScanOptions& opt : memory_options(false)) {
    SCOPED_TRACE(describe(opt));
    EXPECT_TRUE(SameBytes(run(trace(g(opt), types), in), want_interp));
    EXPECT_TRUE(SameBytes(jit(g(opt))(in[0], in[1], in[2]), want_jit));
  }
}

// What the backward scan reads per iteration: a broadcast in the body is computed again there
// from its (smaller) operand, not stacked. The body scales the carry [16, 8] by the
// iteration's row w [8] (broadcast to [16, 8]) and adds a broadcast constant before a tanh;
// the backward pass needs the broadcast w (for the carry's cotangent), the incoming carry (for
// w's) and tanh's derivative. The carries and the derivative are stacked at [n, 16, 8]; w is
// read from the rows [n, 8] and broadcast again.
TEST(LoopsRemat, BroadcastsAreRecomputedByTheBackwardScanNotStacked) {
  auto loss = [](Value h0, Value ws) {
    auto body = [](const Tree& h, const Tree& w) -> std::pair<Tree, Tree> {
      Value next = tanh(h.value() * broadcast_in_dim(w.value(), {16, 8}, {1}) + 0.5);
      return {Tree(next), Tree::list({})};
    };
    return sum(scan(body, Tree(h0), Tree(ws)).first.value());
  };
  const std::vector<Type> types = {f64t({16, 8}), f64t({5, 8})};
  const Program g = trace(grad(loss, std::vector<int>{0, 1}), types);
  const Eqn* backward = nullptr;
  for (const Eqn& e : g.eqns)
    if (e.prim->name() == "scan") backward = &e;  // the last scan runs the backward pass
  ASSERT_NE(backward, nullptr);
  int full_stacks = 0, rows = 0;
  for (int v : backward->ins) {
    full_stacks += g.type_of(v).shape == Shape{5, 16, 8};
    rows += g.type_of(v).shape == Shape{5, 8};
  }
  EXPECT_EQ(full_stacks, 2) << to_string(g);
  EXPECT_EQ(rows, 1) << to_string(g);
  // And the gradient is right.
  std::vector<Array> in = {random_array({16, 8}, f64, 3, -1, 1),
                           random_array({5, 8}, f64, 4, -1, 1)};
  std::vector<Array> got = jit(grad(loss, std::vector<int>{0, 1}))(in[0], in[1]);
  std::vector<Array> want = interpret(g, in);
  EXPECT_TRUE(SameBytes(got, want));
  auto ref = [&](const Args& a) {
    std::vector<double> h = a[0];
    for (int t = 0; t < 5; ++t)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
          double& x = h[static_cast<size_t>(i * 8 + j)];
          x = std::tanh(x * a[1][static_cast<size_t>(t * 8 + j)] + 0.5);
        }
    double s = 0;
    for (double x : h) s += x;
    return s;
  };
  EXPECT_TRUE(
      AllNear(got, finite_gradient(ref, {to_doubles(in[0]), to_doubles(in[1])}), 1e-6, 1e-6));
}

// ---- 4. vmap --------------------------------------------------------------------

TEST(LoopsVmap, ScanUnderVmapMatchesALoopOverTheBatch) {
  const int64_t batch = 3, steps = 4;
  const std::vector<Shape> shapes = {{3}, {steps, 3}, {steps}, {3}};
  struct Config {
    std::string name;
    Axes axes;
  };
  const std::vector<Config> configs = {{"init only", {0, nullopt, nullopt, nullopt}},
                                       {"xs only", {nullopt, 0, 0, nullopt}},
                                       {"const only", {nullopt, nullopt, nullopt, 0}},
                                       {"everything", {0, 0, 0, 0}}};
  for (bool reverse : {false, true})
    for (const Config& cfg : configs) {
      SCOPED_TRACE(cfg.name + (reverse ? " reverse" : ""));
      std::vector<Array> in;
      for (size_t j = 0; j < 4; ++j) {
        Shape s = shapes[j];
        if (cfg.axes[j]) s.insert(s.begin(), batch);
        in.push_back(random_array(s, f64, 70 + j, j == 3 ? 0.5 : -1.0, j == 3 ? 1.5 : 1.0));
      }
      auto F = rnn_float_fn(ScanOptions{.reverse = reverse});
      std::vector<Array> got = call4(jit(vmap(F, cfg.axes)), in);
      // Per-example gradients too.
      auto G = rnn_grad_fn(ScanOptions{.reverse = reverse});
      std::vector<Array> got_grads = call4(jit(vmap(G, cfg.axes)), in);
      auto single = jit(F);
      auto single_grad = jit(G);
      ASSERT_EQ(got.size(), 4u);
      ASSERT_EQ(got_grads.size(), 4u);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<Array> lane;
        for (size_t j = 0; j < 4; ++j)
          lane.push_back(cfg.axes[j] ? slice_axis(in[j], 0, b) : in[j]);
        std::vector<Array> want = call4(single, lane), want_grads = call4(single_grad, lane);
        // And against the C++ loop.
        Args x = doubles_of(lane);
        RnnRef r = rnn_ref(x[0], x[1], x[2], x[3], reverse);
        EXPECT_TRUE(ArrayNear(want[0], r.h, 1e-12, 1e-12));
        for (size_t k = 0; k < 4; ++k) {
          Array g = slice_axis(got[k], 0, b);
          EXPECT_EQ(g.shape(), want[k].shape()) << "output " << k;
          EXPECT_TRUE(ArrayNear(g, to_doubles(want[k]), 1e-12, 1e-12)) << "output " << k;
          Array gg = slice_axis(got_grads[k], 0, b);
          EXPECT_EQ(gg.shape(), want_grads[k].shape()) << "gradient " << k;
          EXPECT_TRUE(ArrayNear(gg, to_doubles(want_grads[k]), 1e-12, 1e-12)) << "gradient " << k;
        }
      }
    }
}

TEST(LoopsVmap, ForiLoopUnderVmap) {
  auto F = [](Value x0, Value v) {
    Tree r = fori_poly(0, 6, x0, v);
    return std::vector<Value>{r[0].value(), r[1].value()};
  };
  Array xs = random_array({4, 3}, f64, 81), v = random_array({3}, f64, 82);
  std::vector<Array> got = jit(vmap(F, {0, nullopt}))(xs, v);
  auto single = jit(F);
  for (int64_t b = 0; b < 4; ++b) {
    std::vector<Array> want = single(slice_axis(xs, 0, b), v);
    EXPECT_TRUE(ArrayNear(slice_axis(got[0], 0, b), to_doubles(want[0]), 1e-12, 1e-12));
    EXPECT_EQ(slice_axis(got[1], 0, b).item<int32_t>(), want[1].item<int32_t>());
  }
}

TEST(LoopsVmap, WhileLoopLanesFinishAtDifferentIterations) {
  auto F = [](Value x0, Value g, Value limit) { return grow_outputs(x0, g, limit); };
  const Vec x0 = {0.5, 3.0, 40.0, 150.0, 99.0}, g = {1.7, 1.1, 2.5, 1.5, 1.01},
            limit = {100.0, 50.0, 1000.0, 10.0, 400.0};
  struct Config {
    std::string name;
    Axes axes;
  };
  const std::vector<Config> configs = {{"x0", {0, nullopt, nullopt}},
                                       {"limit (a predicate const)", {nullopt, nullopt, 0}},
                                       {"g (a body const)", {nullopt, 0, nullopt}},
                                       {"everything", {0, 0, 0}}};
  const Array xa = f64_array(x0, {5}), ga = f64_array(g, {5}), la = f64_array(limit, {5});
  auto single = jit(F);
  for (const Config& cfg : configs) {
    SCOPED_TRACE(cfg.name);
    std::vector<Array> in = {cfg.axes[0] ? xa : Array::scalar(x0[0]),
                             cfg.axes[1] ? ga : Array::scalar(g[0]),
                             cfg.axes[2] ? la : Array::scalar(limit[0])};
    std::vector<Array> got = jit(vmap(F, cfg.axes))(in[0], in[1], in[2]);
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[0].shape(), (Shape{5}));
    ASSERT_EQ(got[1].shape(), (Shape{5}));
    std::set<int> trips;
    for (int64_t b = 0; b < 5; ++b) {
      const size_t u = static_cast<size_t>(b);
      auto [x, k] = grow_ref<double>(cfg.axes[0] ? x0[u] : x0[0], cfg.axes[1] ? g[u] : g[0],
                                     cfg.axes[2] ? limit[u] : limit[0]);
      trips.insert(k);
      EXPECT_NEAR(got[0].element_as_double(b), x, 1e-12 * std::max(1.0, std::abs(x))) << b;
      EXPECT_EQ(got[1].data<int32_t>()[b], k) << b;
      std::vector<Array> want = single(cfg.axes[0] ? slice_axis(xa, 0, b) : in[0],
                                       cfg.axes[1] ? slice_axis(ga, 0, b) : in[1],
                                       cfg.axes[2] ? slice_axis(la, 0, b) : in[2]);
      EXPECT_EQ(want[1].item<int32_t>(), k) << b;
    }
    EXPECT_GE(trips.size(), 3u) << "the lanes should stop at different iterations";
  }
}

TEST(LoopsVmap, WhileLoopWithAnUnbatchedPredicate) {
  // The predicate reads only an unbatched counter; the batched x rides along.
  auto F = [](Value x0) {
    Tree r =
        while_loop([](const Tree& t) { return less(t[1].value(), i32_const(5)); },
                   [](const Tree& t) {
                     return Tree::list({Tree(sin(t[0].value()) + 1.0), Tree(t[1].value() + 1.0)});
                   },
                   Tree::list({Tree(x0), Tree(i32_const(0))}));
    return std::vector<Value>{r[0].value(), r[1].value()};
  };
  Array xs = random_array({4, 2}, f64, 91);
  std::vector<Array> got = jit(vmap(F))(xs);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t j = 0; j < 2; ++j) {
      double x = xs.data<double>()[b * 2 + j];
      for (int s = 0; s < 5; ++s) x = std::sin(x) + 1.0;
      EXPECT_NEAR(got[0].data<double>()[b * 2 + j], x, 1e-12);
    }
  for (int64_t i = 0; i < got[1].size(); ++i) EXPECT_EQ(got[1].element_as_double(i), 5.0);
}

// ---- 5. a hypergradient -------------------------------------------------------

constexpr int kSgdSteps = 100;

Value lsq(Value w, Value x, Value y) { return mean(square(matmul(x, w) - y)); }

Value sgd_fori(Value lr, Value w0, Value x, Value y) {
  Tree w = fori_loop(
      0, kSgdSteps,
      [&](const Value&, const Tree& c) {
        Value wc = c.value();
        return Tree(wc - lr * grad(lsq)(wc, x, y));
      },
      Tree(w0));
  return lsq(w.value(), x, y);
}
Value sgd_fori_unrolled(Value lr, Value w0, Value x, Value y) {
  Value w = w0;
  for (int k = 0; k < kSgdSteps; ++k) w = w - lr * grad(lsq)(w, x, y);
  return lsq(w, x, y);
}
// Step t at lr * decay[t]; the objective adds the mean of the losses before each step.
Value sgd_scan(Value lr, Value w0, Value x, Value y, Value decay, ScanOptions opt) {
  auto [w, losses] = scan(
      [&](const Tree& c, const Tree& d) -> std::pair<Tree, Tree> {
        Value wc = c.value();
        return {Tree(wc - lr * d.value() * grad(lsq)(wc, x, y)), Tree(lsq(wc, x, y))};
      },
      Tree(w0), Tree(decay), opt);
  return lsq(w.value(), x, y) + mean(losses.value());
}
Value sgd_scan_unrolled(Value lr, Value w0, Value x, Value y, Value decay) {
  Value w = w0, total = fill({}, 0.0, f64);
  for (int64_t k = 0; k < kSgdSteps; ++k) {
    Value d = reshape(slice(decay, {k}, {k + 1}), {});
    total = total + lsq(w, x, y);
    w = w - lr * d * grad(lsq)(w, x, y);
  }
  return lsq(w, x, y) + total / static_cast<double>(kSgdSteps);
}

TEST(LoopsGrad, HypergradientOfOneHundredSgdStepsEqualsTheUnrolledLoop) {
  Array x = random_array({8, 3}, f64, 101), y = random_array({8}, f64, 102);
  Array w0 = random_array({3}, f64, 103), lr = Array::scalar(0.1);
  Vec dv;
  for (int k = 0; k < kSgdSteps; ++k) dv.push_back(std::pow(0.99, k));
  Array decay = f64_array(dv, {kSgdSteps});
  const std::vector<int> wrt = {0, 1};
  {
    std::vector<Array> got = jit(grad(sgd_fori, wrt))(lr, w0, x, y);
    std::vector<Array> want = jit(grad(sgd_fori_unrolled, wrt))(lr, w0, x, y);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(AllNear(got, doubles_of(want), 1e-12, 1e-12));
    EXPECT_NEAR(jit(sgd_fori)(lr, w0, x, y).item<double>(),
                jit(sgd_fori_unrolled)(lr, w0, x, y).item<double>(), 1e-12);
    EXPECT_GT(std::abs(got[0].item<double>()), 1e-6);  // not trivially zero
  }
  std::vector<Array> want = jit(grad(sgd_scan_unrolled, wrt))(lr, w0, x, y, decay);
  for (ScanOptions opt :
       {ScanOptions{}, ScanOptions{.remat = true}, ScanOptions{.checkpoint_every = 10},
        ScanOptions{.checkpoint_every = 7}}) {
    SCOPED_TRACE(describe(opt));
    auto f = [opt](Value l, Value w, Value xv, Value yv, Value d) {
      return sgd_scan(l, w, xv, yv, d, opt);
    };
    EXPECT_TRUE(AllNear(jit(grad(f, wrt))(lr, w0, x, y, decay), doubles_of(want), 1e-12, 1e-12));
  }
}

// ---- 6. composition -------------------------------------------------------------

// body: c' = c * 0.9 - a * x if sum(c) > 0 else sin(c) + a * x; y = sum(c').
// a is a const (captured by the branches through the body), x the slice of xs.
Value cond_scan_loss(const Value& c0, const Value& a, const Value& xs) {
  auto [c, ys] = scan(
      [&a](const Tree& ct, const Tree& xt) -> std::pair<Tree, Tree> {
        Value x = xt.value();
        Value cv = ct.value();
        Value next = cond(
                         greater(sum(cv), fill({}, 0.0, cv.dtype())),
                         [&](const Tree& t) { return Tree(t.value() * 0.9 - a * x); },
                         [&](const Tree& t) { return Tree(sin(t.value()) + a * x); }, Tree(cv))
                         .value();
        return {Tree(next), Tree(sum(next))};
      },
      Tree(c0), Tree(xs));
  return sum(c.value() * constant(f64_array({0.3, -0.7, 1.1}, {3}))) +
         sum(ys.value() * constant(f64_array(rnn_c1(6), {6})));
}
// The loss, and how close sum(c) came to the branch boundary.
std::pair<double, double> cond_scan_ref(const Args& args) {
  Vec c = args[0];
  const double a = args[1][0];
  const Vec &xs = args[2], c1 = rnn_c1(6);
  double l = 0, margin = 1e300;
  for (size_t t = 0; t < 6; ++t) {
    double s = c[0] + c[1] + c[2];
    margin = std::min(margin, std::abs(s));
    for (size_t i = 0; i < 3; ++i)
      c[i] = s > 0 ? c[i] * 0.9 - a * xs[t * 3 + i] : std::sin(c[i]) + a * xs[t * 3 + i];
    l += c1[t] * (c[0] + c[1] + c[2]);
  }
  return {l + 0.3 * c[0] - 0.7 * c[1] + 1.1 * c[2], margin};
}

TEST(LoopsCompose, CondInsideAScanBody) {
  const Args x = {{0.4, 0.3, -0.1}, {0.6}, rnd(18, 111)};
  auto [want, margin] = cond_scan_ref(x);
  ASSERT_GT(margin, 1e-3);
  std::vector<Array> in = {f64_array(x[0], {3}), Array::scalar(x[1][0]), f64_array(x[2], {6, 3})};
  const std::vector<Type> types = {f64t({3}), f64t({}), f64t({6, 3})};
  auto f = [](Value c0, Value a, Value xs) { return cond_scan_loss(c0, a, xs); };
  Array jitted = jit(f)(in[0], in[1], in[2]);
  EXPECT_NEAR(jitted.item<double>(), want, 1e-12);
  EXPECT_NEAR(run(trace(f, types), in)[0].item<double>(), jitted.item<double>(), 1e-13);
  auto g = grad(f, std::vector<int>{0, 1, 2});
  std::vector<Array> gj = jit(g)(in[0], in[1], in[2]), gi = run(trace(g, types), in);
  Args fd = finite_gradient([](const Args& a) { return cond_scan_ref(a).first; }, x);
  EXPECT_TRUE(AllNear(gj, fd, 1e-6, 1e-6));
  EXPECT_TRUE(AllNear(gi, doubles_of(gj), 1e-13, 1e-13));
}

// Each of 4 clients scans its own rows from the server weights:
// h' = tanh(h * w + row), y = sum(h'); the client returns h_T + sum(ys); the
// server sums the clients.
constexpr int64_t kClients = 4, kRows = 5;
auto clients_scan() {
  return program({{"clients", kClients}},
                 [](Value w, Value data) {
                   Value local = map_fn(
                       [](Value wi, Value di) {
                         auto [h, ys] = scan(
                             [wi](const Tree& c, const Tree& row) -> std::pair<Tree, Tree> {
                               Value hn = tanh(c.value() * wi + row.value());
                               return {Tree(hn), Tree(sum(hn))};
                             },
                             Tree(wi), Tree(di));
                         return h.value() + sum(ys.value());
                       },
                       broadcast(w), data);
                   return reduce_sum(local);
                 },
                 {"", "clients"});
}
double clients_scan_ref(const Args& x) {
  const Vec &w = x[0], &data = x[1];
  const Vec u = rnn_u();
  double l = 0;
  for (int64_t k = 0; k < kClients; ++k) {
    Vec h = w;
    double total = 0;
    for (int64_t t = 0; t < kRows; ++t)
      for (size_t i = 0; i < 3; ++i) {
        h[i] = std::tanh(h[i] * w[i] + data[static_cast<size_t>((k * kRows + t) * 3) + i]);
        total += h[i];
      }
    for (size_t i = 0; i < 3; ++i) l += u[i] * (h[i] + total);
  }
  return l;
}

TEST(LoopsCompose, MapFnOfAScan) {
  const Args x = {rnd(3, 121, 0.5, 1.5), rnd(kClients * kRows * 3, 122)};
  std::vector<Array> in = {f64_array(x[0], {3}), f64_array(x[1], {kClients, kRows, 3})};
  const std::vector<Type> types = {f64t({3}), f64t({kClients, kRows, 3})};
  auto per_client = clients_scan();
  auto loss = [per_client](Value w, Value data) {
    return sum(per_client(w, data) * constant(f64_array(rnn_u(), {3})));
  };
  Array jitted = jit(loss)(in[0], in[1]);
  EXPECT_NEAR(jitted.item<double>(), clients_scan_ref(x), 1e-12);
  EXPECT_NEAR(run(trace(loss, types), in)[0].item<double>(), jitted.item<double>(), 1e-12);
  auto g = grad(loss, std::vector<int>{0, 1});
  std::vector<Array> gj = jit(g)(in[0], in[1]), gi = run(trace(g, types), in);
  EXPECT_TRUE(AllNear(gj, finite_gradient(clients_scan_ref, x), 1e-6, 1e-6));
  EXPECT_TRUE(AllNear(gi, doubles_of(gj), 1e-13, 1e-13));
}

// The server scans over per-round learning rates; each round maps a local
// update over the placed carry: c_k' = c_k - lr * (sin(c_k) - d_k), y = the
// mean over the clients. data (placed) is a const of the scan body.
constexpr int64_t kRounds = 6;
auto scan_of_map_fn(ScanOptions opt = {}) {
  return program({{"clients", kClients}},
                 [opt](Value w, Value data, Value lrs) {
                   auto [c, ys] = scan(
                       [&data](const Tree& ct, const Tree& lr) -> std::pair<Tree, Tree> {
                         Value next = map_fn(
                             [](Value ci, Value di, Value li) { return ci - li * (sin(ci) - di); },
                             ct.value(), data, broadcast(lr.value()));
                         return {Tree(next), Tree(reduce_mean(next))};
                       },
                       Tree(broadcast(w)), Tree(lrs), opt);
                   EXPECT_EQ(c.value().placement(), "clients");
                   return reduce_mean(c.value()) + sum(ys.value(), {0});
                 },
                 {"", "clients", ""});
}
double scan_of_map_fn_ref(const Args& x) {
  const Vec &w = x[0], &data = x[1], &lrs = x[2];
  const Vec u = rnn_u();
  std::vector<Vec> c(kClients, w);
  Vec out(3, 0.0);
  for (int64_t t = 0; t < kRounds; ++t) {
    for (int64_t k = 0; k < kClients; ++k)
      for (size_t i = 0; i < 3; ++i) {
        double& v = c[static_cast<size_t>(k)][i];
        v = v - lrs[static_cast<size_t>(t)] * (std::sin(v) - data[static_cast<size_t>(k * 3) + i]);
      }
    for (size_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < kClients; ++k) out[i] += c[static_cast<size_t>(k)][i] / kClients;
  }
  for (size_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < kClients; ++k) out[i] += c[static_cast<size_t>(k)][i] / kClients;
  return u[0] * out[0] + u[1] * out[1] + u[2] * out[2];
}

struct PlacedCase {
  Args x = {rnd(3, 131), rnd(kClients * 3, 132), rnd(kRounds, 133, 0.1, 0.5)};
  std::vector<Array> in = {f64_array(x[0], {3}), f64_array(x[1], {kClients, 3}),
                           f64_array(x[2], {kRounds})};
  std::vector<Type> types = {f64t({3}), f64t({kClients, 3}), f64t({kRounds})};
};
auto placed_loss(ScanOptions opt = {}) {
  return [rounds = scan_of_map_fn(opt)](Value w, Value data, Value lrs) {
    return sum(rounds(w, data, lrs) * constant(f64_array(rnn_u(), {3})));
  };
}

TEST(LoopsCompose, ScanOverMapFnOfPlacedCarries) {
  PlacedCase c;
  auto loss = placed_loss();
  Array jitted = jit(loss)(c.in[0], c.in[1], c.in[2]);
  EXPECT_NEAR(jitted.item<double>(), scan_of_map_fn_ref(c.x), 1e-12);
  EXPECT_NEAR(run(trace(loss, c.types), c.in)[0].item<double>(), jitted.item<double>(), 1e-12);
  // Forward mode: the directional derivative along (1, 1, ...).
  auto tangent = [loss](Value w, Value data, Value lrs) {
    return jvp(loss, {Tree(w), Tree(data), Tree(lrs)},
               {Tree(ones_like(w)), Tree(ones_like(data)), Tree(ones_like(lrs))})
        .second;
  };
  Args fd = finite_gradient(scan_of_map_fn_ref, c.x);
  double want = 0;
  for (const Vec& g : fd)
    for (double v : g) want += v;
  EXPECT_NEAR(jit(tangent)(c.in[0], c.in[1], c.in[2]).item<double>(), want, 1e-6);
}

TEST(LoopsCompose, ScanOverMapFnOfPlacedCarriesGradient) {
  PlacedCase c;
  Args fd = finite_gradient(scan_of_map_fn_ref, c.x);
  for (ScanOptions opt :
       {ScanOptions{}, ScanOptions{.remat = true}, ScanOptions{.checkpoint_every = 4}}) {
    SCOPED_TRACE(describe(opt));
    try {
      auto g = grad(placed_loss(opt), std::vector<int>{0, 1, 2});
      std::vector<Array> gj = jit(g)(c.in[0], c.in[1], c.in[2]), gi = run(trace(g, c.types), c.in);
      EXPECT_TRUE(AllNear(gj, fd, 1e-6, 1e-6));
      EXPECT_TRUE(AllNear(gi, doubles_of(gj), 1e-13, 1e-13));
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// ---- 7. one equation whatever the length ---------------------------------------

TEST(Loops, OneScanEquationWhateverTheLength) {
  std::vector<size_t> sizes, grad_sizes, grad_scans, fori_sizes;
  for (int64_t steps : {10, 1000}) {
    SCOPED_TRACE("length " + std::to_string(steps));
    std::vector<Type> types = rnn_data(1, 1).types();
    types[1] = f64t({steps, 3});
    types[2] = f64t({steps});
    Program p = trace(rnn_outputs_fn({}), types);
    EXPECT_EQ(count_prim(p, "scan"), 1u) << to_string(p);
    sizes.push_back(p.eqns.size());
    for (const Eqn& e : p.eqns)
      if (e.prim->name() == "scan") {
        EXPECT_EQ(e.params.get_int("length", "test"), steps);
      }
    Program g = trace(rnn_grad_fn({}), types);
    grad_sizes.push_back(g.eqns.size());
    grad_scans.push_back(count_prim(g, "scan"));
    EXPECT_GE(grad_scans.back(), 1u);
    auto fori = [steps](Value x0, Value v) {
      Tree r = fori_poly(0, steps, x0, v);
      return std::vector<Value>{r[0].value(), r[1].value()};
    };
    Program q = trace(fori, {f64t({3}), f64t({3})});
    EXPECT_EQ(count_prim(q, "scan"), 1u) << to_string(q);
    fori_sizes.push_back(q.eqns.size());
  }
  EXPECT_EQ(sizes[0], sizes[1]);
  EXPECT_EQ(grad_sizes[0], grad_sizes[1]);
  EXPECT_EQ(grad_scans[0], grad_scans[1]);
  EXPECT_EQ(fori_sizes[0], fori_sizes[1]);
  // A while_loop is one equation too.
  Program w = trace([](Value x0, Value g, Value l) { return grow_outputs(x0, g, l); },
                    {f64t({}), f64t({}), f64t({})});
  EXPECT_EQ(count_prim(w, "while_loop"), 1u) << to_string(w);
}

// ---- 8. program text -----------------------------------------------------------

struct TextCase {
  std::string name;
  Program program;
};

std::vector<TextCase> text_cases() {
  std::vector<TextCase> cs;
  RnnData data = rnn_data(5, 141);
  cs.push_back({"scan", trace(rnn_outputs_fn({}), data.types(), "scan")});
  cs.push_back(
      {"scan_reverse_f32", trace(rnn_outputs_fn({.reverse = true}), data.types(f32), "rev")});
  cs.push_back(
      {"nested_scan", trace([](Value a, Value m, Value k) { return nested_scans(a, m, k); },
                            {f64t({}), f64t({4, 3}), f64t({})}, "nested")});
  cs.push_back({"grad_of_scan", trace(rnn_grad_fn({}), data.types(), "grad")});
  cs.push_back(
      {"grad_of_checkpointed_scan",
       trace(rnn_grad_fn({.reverse = true, .checkpoint_every = 2}), data.types(), "ckpt")});
  cs.push_back({"grad_of_remat_scan", trace(rnn_grad_fn({.remat = true}), data.types(), "remat")});
  auto F = rnn_float_fn({});
  cs.push_back(
      {"jvp_of_scan", trace(
                          [F](Value h0, Value a, Value b, Value w) {
                            return jvp(F, {Tree(h0), Tree(a), Tree(b), Tree(w)},
                                       {Tree(ones_like(h0)), Tree(a), Tree(zeros_like(b)), Tree(w)})
                                .second;
                          },
                          data.types(), "jvp")});
  // A scan whose body takes a vjp (grad) and a jvp.
  cs.push_back({"scan_of_vjp_and_jvp",
                trace(
                    [](Value lr, Value w0, Value x, Value y) {
                      auto [w, ys] = scan(
                          [&](const Tree& c, const Tree& d) -> std::pair<Tree, Tree> {
                            Value wc = c.value();
                            Value gw = grad(lsq)(wc, x, y);
                            Value t =
                                jvp([](Value z) { return tanh(z); }, {Tree(wc)}, {Tree(gw)}).second;
                            return {Tree(wc - lr * d.value() * gw + 0.01 * t), Tree(lsq(wc, x, y))};
                          },
                          Tree(w0), Tree(fill({7}, 0.5, f64)));
                      return std::vector<Value>{w.value(), ys.value()};
                    },
                    {f64t({}), f64t({3}), f64t({8, 3}), f64t({8})}, "hyper")});
  cs.push_back({"fori_loop", trace(
                                 [](Value x0, Value v) {
                                   Tree r = fori_poly(2, 9, x0, v);
                                   return std::vector<Value>{r[0].value(), r[1].value()};
                                 },
                                 {f64t({3}), f64t({3})}, "fori")});
  cs.push_back(
      {"while_loop", trace([](Value x0, Value g, Value l) { return grow_outputs(x0, g, l); },
                           {f64t({}), f64t({}), f64t({})}, "grow")});
  cs.push_back({"jvp_of_while_loop",
                trace(
                    [](Value x0, Value c) {
                      auto F2 = [](Value xv, Value cv) { return spiral(xv, cv)[0].value(); };
                      return jvp(F2, {Tree(x0), Tree(c)}, {Tree(ones_like(x0)), Tree(c)}).second;
                    },
                    {f64t({3}), f64t({})}, "while_jvp")});
  return cs;
}

// Inputs of `p`: ranges where every case is well defined (the while loops stop).
std::vector<Array> text_inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types())
    args.push_back(random_array(t.shape, t.dtype, seed++, 0.1, 0.9));
  return args;
}

TEST(LoopsText, PrintParsePrintIsIdentityAndParsedProgramsRun) {
  for (const TextCase& c : text_cases()) {
    SCOPED_TRACE(c.name);
    const Program& p = c.program;
    EXPECT_NO_THROW(verify(p));
    std::set<std::string> prims;
    collect_primitives(p, prims);
    EXPECT_TRUE(prims.count("scan") || prims.count("while_loop"));
    const std::string text = to_string(p);
    Program q;
    try {
      q = parse_program(text);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << "\n" << text;
      continue;
    }
    EXPECT_EQ(to_string(q), text);
    EXPECT_NO_THROW(verify(q));
    EXPECT_EQ(q.input_types(), p.input_types());
    EXPECT_EQ(q.output_types(), p.output_types());
    ASSERT_EQ(q.eqns.size(), p.eqns.size());
    // Sub-programs compare by structure, not name: the printer gives
    // same-named ones unique names (two nested "scan_body"s print as
    // @scan_body and @scan_body_1).
    Program r = parse_program(to_string(q));
    ASSERT_EQ(r.eqns.size(), q.eqns.size());
    for (size_t i = 0; i < p.eqns.size(); ++i) {
      EXPECT_EQ(q.eqns[i].prim, p.eqns[i].prim);
      EXPECT_EQ(q.eqns[i].ins.size(), p.eqns[i].ins.size());
      EXPECT_EQ(q.eqns[i].outs.size(), p.eqns[i].outs.size());
      EXPECT_TRUE(q.eqns[i].params == p.eqns[i].params) << "equation " << i;
      EXPECT_TRUE(r.eqns[i].params == q.eqns[i].params) << "equation " << i;
    }
    std::vector<Array> args = text_inputs(p, 151);
    EXPECT_TRUE(SameBytes(run(q, args), run(p, args)));
  }
  // The nested scan's body holds a scan.
  Program nested = text_cases()[2].program;
  bool inner = false;
  for (const Eqn& e : nested.eqns)
    if (e.prim->name() == "scan")
      inner = count_prim(e.params.get_program("body", "test"), "scan") == 1;
  EXPECT_TRUE(inner);
}

// Text with every occurrence of `from` in [begin, end) replaced by `to`.
std::string replaced(std::string text, size_t begin, size_t end, const std::string& from,
                     const std::string& to) {
  for (size_t at = text.find(from, begin); at != std::string::npos && at + from.size() <= end;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    end = end + to.size() - from.size();
  }
  return text;
}

// The sub-program named by parameter `param` of the first equation with one:
// [start, end) of its text.
std::pair<size_t, size_t> sub_program_span(const std::string& text, const std::string& param) {
  size_t at = text.find(param + "=@");
  if (at == std::string::npos) return {std::string::npos, std::string::npos};
  at += param.size() + 2;
  size_t stop = text.find_first_of(",] ", at);
  const std::string name = text.substr(at, stop - at);
  size_t start = text.find("program @" + name + " ");
  if (start == std::string::npos) return {std::string::npos, std::string::npos};
  size_t end = text.find("\n}\n", start);
  return {start, end + 3};
}

// Every integer parameter `key=N` changed to each of `values(N)`.
std::vector<std::string> with_int_param(
    const std::string& text, const std::string& key,
    const std::function<std::vector<int64_t>(int64_t)>& values) {
  std::vector<std::string> out;
  const std::string pat = key + "=";
  size_t at = text.find(pat);
  if (at == std::string::npos) return out;
  size_t digits = at + pat.size();
  size_t stop = text.find_first_not_of("0123456789", digits);
  int64_t n = std::stoll(text.substr(digits, stop - digits));
  for (int64_t v : values(n)) {
    std::string t = text;
    t.replace(digits, stop - digits, std::to_string(v));
    out.push_back(t);
  }
  return out;
}

::testing::AssertionResult ParseThrows(const std::string& text) {
  try {
    Program p = parse_program(text);
    return ::testing::AssertionFailure() << "parsed without error:\n" << text;
  } catch (const Error&) {
    return ::testing::AssertionSuccess();
  }
}

TEST(LoopsText, TruncatedTextIsAnError) {
  const std::vector<TextCase> cases = text_cases();
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string text = to_string(c.program);
    // Every position for the plain loops, about 300 for the others.
    const bool plain = c.name == "scan" || c.name == "fori_loop" || c.name == "while_loop";
    const size_t stride = plain ? 1 : std::max<size_t>(1, text.size() / 300);
    // (Dropping only the final newline leaves a complete program.)
    for (size_t n = 0; n + 1 < text.size(); n += stride)
      EXPECT_TRUE(ParseThrows(text.substr(0, n))) << "cut at " << n;
  }
}

TEST(LoopsText, MalformedLoopsAreErrors) {
  const std::vector<TextCase> cases = text_cases();
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string text = to_string(c.program);
    // A body whose types are f32 where the loop's operands are f64: itself a
    // well-formed program, but not this loop's body.
    size_t tried = 0;
    if (c.name != "scan_reverse_f32")
      for (const char* param : {"body", "cond"}) {
        auto [start, end] = sub_program_span(text, param);
        if (start == std::string::npos) continue;
        std::string bad = replaced(text, start, end, "f64", "f32");
        ASSERT_NE(bad, text);
        EXPECT_TRUE(ParseThrows(bad)) << param;
        ++tried;
      }
    // Wrong counts and lengths.
    auto off_by = [](int64_t n) {
      std::vector<int64_t> v = {n + 1, n + 7, 1000};
      if (n > 0) v.push_back(n - 1);
      return v;
    };
    // (A length is free only for a scan without xs.)
    bool first_scan_has_xs = false;
    for (const Eqn& e : c.program.eqns)
      if (e.prim->name() == "scan") {
        first_scan_has_xs =
            static_cast<int64_t>(e.ins.size()) >
            e.params.get_int("num_consts", "test") + e.params.get_int("num_carry", "test");
        break;
      }
    for (const char* key :
         {"num_carry", "num_consts", "length", "num_cond_consts", "num_body_consts"})
      for (const std::string& bad : with_int_param(text, key, off_by))
        if (std::string(key) != "length" || first_scan_has_xs) {
          EXPECT_TRUE(ParseThrows(bad)) << key;
          ++tried;
        }
    EXPECT_GE(tried, 6u);
  }
  // The same through verify on an edited Program.
  Program p = text_cases()[0].program;
  for (Eqn& e : p.eqns)
    if (e.prim->name() == "scan") {
      Eqn saved = e;
      e.params.set("num_carry", e.params.get_int("num_carry", "test") + 1);
      EXPECT_THROW(verify(p), Error);
      e = saved;
      e.params.set("length", e.params.get_int("length", "test") + 1);
      EXPECT_THROW(verify(p), Error);
      e = saved;
      e.params.set("num_consts", int64_t{-1});
      EXPECT_THROW(verify(p), Error);
      e = saved;
      EXPECT_NO_THROW(verify(p));
    }
}

// ---- 9. errors -------------------------------------------------------------------

ScanFn add_body() {
  return [](const Tree& c, const Tree& x) -> std::pair<Tree, Tree> {
    return {Tree(c.value() + sum(tree_leaves(x)[0].value())), Tree()};
  };
}

TEST(LoopsErrors, ScanErrorsNameScan) {
  // xs leaves of different leading sizes.
  EXPECT_TRUE(ThrowsNaming(
      [] {
        trace(
            [](Value c, Value a, Value b) {
              return scan(add_body(), Tree(c), Tree::list({Tree(a), Tree(b)})).first.value();
            },
            {f64t({3}), f64t({5, 3}), f64t({4})});
      },
      {"scan", "5", "4"}));
  // A length that disagrees with xs.
  EXPECT_TRUE(ThrowsNaming(
      [] {
        trace([](Value c, Value a) { return scan(add_body(), Tree(c), Tree(a), 4).first.value(); },
              {f64t({3}), f64t({5, 3})});
      },
      {"scan"}));
  // An xs leaf with no leading axis.
  EXPECT_TRUE(ThrowsNaming(
      [] {
        trace([](Value c, Value a) { return scan(add_body(), Tree(c), Tree(a)).first.value(); },
              {f64t({3}), f64t({})});
      },
      {"scan"}));
  // No xs and no length.
  EXPECT_TRUE(ThrowsNaming(
      [] {
        trace(
            [](Value c) {
              return scan(
                         [](const Tree& t, const Tree&) -> std::pair<Tree, Tree> {
                           return {t, Tree()};
                         },
                         Tree(c), Tree())
                  .first.value();
            },
            {f64t({3})});
      },
      {"scan", "length"}));
  // A carry that changes dtype, shape or structure.
  auto changing = [](std::function<Tree(const Value&)> next) {
    return [next] {
      trace(
          [next](Value c, Value a) {
            return sum(tree_leaves(scan(
                                       [next](const Tree& t, const Tree&) -> std::pair<Tree, Tree> {
                                         return {next(tree_leaves(t)[0].value()), Tree()};
                                       },
                                       Tree(c), Tree(a))
                                       .first)[0]
                           .value());
          },
          {f64t({3}), f64t({5, 3})});
    };
  };
  EXPECT_TRUE(
      ThrowsNaming(changing([](const Value& v) { return Tree(astype(v, f32)); }), {"scan"}));
  EXPECT_TRUE(ThrowsNaming(changing([](const Value& v) {
                             return Tree(reshape(v, {1, 3}));
                           }),
                           {"scan"}));
  EXPECT_TRUE(ThrowsNaming(changing([](const Value& v) {
                             return Tree::list({Tree(v), Tree(v)});
                           }),
                           {"scan"}));
  EXPECT_TRUE(ThrowsNaming(changing([](const Value& v) {
                             return Tree::dict({{"v", Tree(v)}});
                           }),
                           {"scan"}));
  EXPECT_TRUE(ThrowsNaming(changing([](const Value& v) { return Tree(sum(v)); }), {"scan"}));
  // Placed xs, and placed ys.
  EXPECT_TRUE(ThrowsNaming(
      [] {
        auto f = program(
            {{"clients", 4}},
            [](Value w, Value xs) { return scan(add_body(), Tree(w), Tree(xs)).first.value(); },
            {"", "clients"});
        trace(f, {f64t({3}), f64t({4, 3})});
      },
      {"scan"}));
  EXPECT_TRUE(ThrowsNaming(
      [] {
        auto f = program({{"clients", 4}},
                         [](Value w) {
                           return scan(
                                      [](const Tree& c, const Tree&) -> std::pair<Tree, Tree> {
                                        return {c, Tree(broadcast(c.value()))};
                                      },
                                      Tree(w), Tree(), 3)
                               .first.value();
                         },
                         {""});
        trace(f, {f64t({3})});
      },
      {"scan"}));
}

TEST(LoopsErrors, ForiLoopErrorsNameForiLoop) {
  auto with_body = [](ForiBody body) {
    return [body] {
      trace([body](Value x) { return tree_leaves(fori_loop(0, 3, body, Tree(x)))[0].value(); },
            {f64t({3})});
    };
  };
  EXPECT_TRUE(ThrowsNaming(with_body([](const Value&, const Tree& c) {
                             return Tree::list({c, c});
                           }),
                           {"fori_loop"}));
  EXPECT_TRUE(ThrowsNaming(
      with_body([](const Value&, const Tree& c) { return Tree(astype(c.value(), f32)); }),
      {"fori_loop"}));
  EXPECT_TRUE(ThrowsNaming(
      with_body([](const Value&, const Tree& c) { return Tree(sum(c.value())); }), {"fori_loop"}));
}

TEST(LoopsErrors, WhileLoopErrorsNameWhileLoop) {
  auto run_while = [](LoopCondFn cond_fn, LoopBodyFn body_fn) {
    return [cond_fn, body_fn] {
      trace([cond_fn, body_fn](
                Value x) { return tree_leaves(while_loop(cond_fn, body_fn, Tree(x)))[0].value(); },
            {f64t({3})});
    };
  };
  auto body = [](const Tree& t) { return Tree(t.value() * 2.0); };
  // A predicate that is not a bool scalar.
  EXPECT_TRUE(
      ThrowsNaming(run_while([](const Tree& t) { return sum(t.value()); }, body), {"while_loop"}));
  EXPECT_TRUE(ThrowsNaming(
      run_while([](const Tree& t) { return less(t.value(), ones_like(t.value())); }, body),
      {"while_loop"}));
  // A body that changes the carry.
  auto pred = [](const Tree& t) {
    return less(sum(tree_leaves(t)[0].value()), fill({}, 10.0, f64));
  };
  EXPECT_TRUE(ThrowsNaming(run_while(pred,
                                     [](const Tree& t) {
                                       return Tree::list({t, t});
                                     }),
                           {"while_loop"}));
  EXPECT_TRUE(ThrowsNaming(
      run_while(pred, [](const Tree& t) { return Tree(astype(t.value(), f32)); }), {"while_loop"}));
}

}  // namespace
}  // namespace drx::testing
