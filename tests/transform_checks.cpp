#include "transform_checks.h"

#include <cstring>

namespace drx::testing {

std::vector<Array> random_inputs(const std::vector<Shape>& shapes, uint64_t seed, double lo,
                                 double hi) {
  std::vector<Array> xs;
  for (size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(random_array(shapes[i], f64, seed * 7919 + i, lo, hi));
  return xs;
}

Array slice_axis(const Array& a, int64_t axis, int64_t b) {
  axis = axis < 0 ? axis + a.ndim() : axis;
  Shape out_shape = a.shape();
  out_shape.erase(out_shape.begin() + axis);
  Array out(a.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= a.shape()[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < a.ndim(); ++i) inner *= a.shape()[static_cast<size_t>(i)];
  int64_t n = a.shape()[static_cast<size_t>(axis)];
  size_t es = dtype_size(a.dtype());
  auto* dst = static_cast<std::byte*>(out.raw());
  auto* src = static_cast<const std::byte*>(a.raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o * inner) * es,
                src + static_cast<size_t>((o * n + b) * inner) * es,
                static_cast<size_t>(inner) * es);
  return out;
}

namespace {
Shape output_shape(const ListFn& f, const std::vector<Array>& xs) {
  return jit([f](std::vector<Value> v) { return f(v); })(xs).shape();
}

Array perturbed(const Array& a, int64_t k, double delta) {
  Array c(a.dtype(), a.shape());
  std::memcpy(c.raw(), a.raw(), a.nbytes());
  c.data<double>()[k] += delta;
  return c;
}

double dot(const Array& a, const Array& b) {
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.element_as_double(i) * b.element_as_double(i);
  return s;
}
}  // namespace

::testing::AssertionResult GradMatchesFiniteDifferences(const OpCase& c, uint64_t seed,
                                                        double rtol) {
  std::vector<Array> xs = random_inputs(c.shapes, seed, c.lo, c.hi);
  Array w = random_array(output_shape(c.f, xs), f64, seed + 101);
  ListFn f = c.f;
  auto loss = [f, w](std::vector<Value> v) { return sum(f(v) * constant(w)); };
  auto lj = jit(loss);
  std::vector<Array> g = jit(grad(loss))(xs);
  const double h = 1e-6;
  for (size_t i = 0; i < xs.size(); ++i) {
    for (int64_t k = 0; k < xs[i].size(); ++k) {
      std::vector<Array> xp = xs, xm = xs;
      xp[i] = perturbed(xs[i], k, h);
      xm[i] = perturbed(xs[i], k, -h);
      double fd = (lj(xp).item<double>() - lj(xm).item<double>()) / (2 * h);
      double an = g[i].element_as_double(k);
      if (!(std::abs(an - fd) <= rtol * std::max(1.0, std::abs(fd))))
        return ::testing::AssertionFailure() << c.name << ": d/dx" << i << "[" << k << "] grad "
                                             << an << " vs finite difference " << fd;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult VjpMatchesJvp(const OpCase& c, uint64_t seed, double rtol) {
  std::vector<Array> xs = random_inputs(c.shapes, seed, c.lo, c.hi);
  std::vector<Array> vs = random_inputs(c.shapes, seed + 5, -1, 1);
  Array u = random_array(output_shape(c.f, xs), f64, seed + 9);
  ListFn f = c.f;
  size_t n = xs.size();
  auto jv = jit([f, n](std::vector<Value> a) {
    std::vector<Value> x(a.begin(), a.begin() + static_cast<long>(n));
    std::vector<Value> v(a.begin() + static_cast<long>(n), a.end());
    return jvp(f, {Tree(x)}, {Tree(v)}).second;
  });
  auto vj = jit([f, n](std::vector<Value> a) {
    std::vector<Value> x(a.begin(), a.begin() + static_cast<long>(n));
    auto [y, pullback] = vjp(f, {Tree(x)});
    Tree ct = pullback(Tree(a.back()))[0];
    std::vector<Value> out;
    for (size_t i = 0; i < n; ++i) out.push_back(ct[i].value());
    return out;
  });
  std::vector<Array> args = xs;
  args.insert(args.end(), vs.begin(), vs.end());
  double lhs = dot(u, jv(args));
  std::vector<Array> args2 = xs;
  args2.push_back(u);
  std::vector<Array> jtu = vj(args2);
  double rhs = 0;
  for (size_t i = 0; i < n; ++i) rhs += dot(jtu[i], vs[i]);
  if (std::abs(lhs - rhs) <= rtol * std::max(1.0, std::abs(lhs)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << c.name << ": <u, J v> = " << lhs << " but <J^T u, v> = " << rhs;
}

::testing::AssertionResult VmapMatchesLoop(const OpCase& c, uint64_t seed, int64_t axis) {
  const int64_t batch = 3;
  std::vector<Shape> stacked_shapes;
  for (Shape s : c.shapes) {
    s.insert(axis == 0 ? s.begin() : s.end(), batch);
    stacked_shapes.push_back(s);
  }
  std::vector<Array> xs = random_inputs(stacked_shapes, seed, c.lo, c.hi);
  ListFn f = c.f;
  std::vector<Array> out =
      jit(vmap([f](std::vector<Value> v) { return std::vector<Value>{f(v)}; }, {axis}, {axis}))(xs);
  auto fj = jit([f](std::vector<Value> v) { return f(v); });
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Array> slice;
    for (const Array& x : xs) slice.push_back(slice_axis(x, axis, b));
    Array want = fj(slice);
    Array got = slice_axis(out[0], axis, b);
    if (got.shape() != want.shape())
      return ::testing::AssertionFailure()
             << c.name << ": vmap slice shape " << shape_str(got.shape()) << " vs loop "
             << shape_str(want.shape());
    auto r = ArrayNear(got, to_doubles(want), 1e-12, 1e-12);
    if (!r) return ::testing::AssertionFailure() << c.name << " batch " << b << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace drx::testing
