// reduce_window, select_and_scatter_add and the pooling layers: values against
// float64 loops written here (every attribute, several bodies, 1-D to 3-D,
// ties), gradients against central differences and select_and_scatter, vjp
// against jvp, vmap against loops, compiled against interpreted, program text
// and StableHLO round trips, and errors.
#include "drx/ops/windows.h"

#include <cmath>
#include <limits>

#include "drx/exec/executable.h"
#include "transform_checks.h"

namespace drx::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Every element equal to want (infinities included) or within atol + rtol * |want|.
::testing::AssertionResult Near(const Array& got, const std::vector<double>& want, double rtol = 0,
                                double atol = 0) {
  if (got.size() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (int64_t i = 0; i < got.size(); ++i) {
    const double g = got.element_as_double(i), w = want[static_cast<size_t>(i)];
    if (!(g == w || std::abs(g - w) <= atol + rtol * std::abs(w)))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << w << " (" << got.str() << ")";
  }
  return ::testing::AssertionSuccess();
}

// ---- independent references ------------------------------------------------------

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + idx[d];
  return i;
}
int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

struct Full {  // a WindowConfig with every default written out
  std::vector<int64_t> win, str, lo, hi, base, wdil;
};
Full full_config(const WindowConfig& c, size_t r) {
  Full f;
  f.win = c.dimensions;
  f.str = c.strides.empty() ? std::vector<int64_t>(r, 1) : c.strides;
  f.base = c.base_dilation.empty() ? std::vector<int64_t>(r, 1) : c.base_dilation;
  f.wdil = c.window_dilation.empty() ? std::vector<int64_t>(r, 1) : c.window_dilation;
  for (size_t d = 0; d < r; ++d) {
    f.lo.push_back(c.padding.empty() ? 0 : c.padding[d].first);
    f.hi.push_back(c.padding.empty() ? 0 : c.padding[d].second);
  }
  return f;
}

// The operand laid out as the spec says: dilated and padded with `init`
// (which also fills the holes); `origin[j]`: the operand element at padded
// position j, or -1.
struct Padded {
  Shape shape;
  std::vector<double> v;
  std::vector<int64_t> origin;
};
Padded materialise(const std::vector<double>& x, const Shape& s, const Full& f, double init) {
  Padded p;
  for (size_t d = 0; d < s.size(); ++d)
    p.shape.push_back(f.lo[d] + f.hi[d] + (s[d] == 0 ? 0 : (s[d] - 1) * f.base[d] + 1));
  p.v.assign(static_cast<size_t>(numel(p.shape)), init);
  p.origin.assign(p.v.size(), -1);
  for (int64_t i = 0; i < numel(s); ++i) {
    std::vector<int64_t> idx = unravel(i, s);
    bool inside = true;
    for (size_t d = 0; d < s.size(); ++d) {
      idx[d] = f.lo[d] + idx[d] * f.base[d];
      inside = inside && idx[d] >= 0 && idx[d] < p.shape[d];
    }
    if (!inside) continue;
    const int64_t j = ravel(idx, p.shape);
    p.v[static_cast<size_t>(j)] = x[static_cast<size_t>(i)];
    p.origin[static_cast<size_t>(j)] = i;
  }
  return p;
}

// For each output window, the padded positions of its elements in window order.
std::vector<std::vector<int64_t>> windows_of(const Padded& p, const Full& f, Shape* out) {
  out->clear();
  for (size_t d = 0; d < p.shape.size(); ++d) {
    const int64_t span = (f.win[d] - 1) * f.wdil[d] + 1;
    out->push_back(p.shape[d] < span ? 0 : (p.shape[d] - span) / f.str[d] + 1);
  }
  std::vector<std::vector<int64_t>> w;
  for (int64_t o = 0; o < numel(*out); ++o) {
    const std::vector<int64_t> oi = unravel(o, *out);
    std::vector<int64_t> members;
    for (int64_t k = 0; k < numel(f.win); ++k) {
      std::vector<int64_t> ki = unravel(k, f.win), at(ki.size());
      for (size_t d = 0; d < ki.size(); ++d) at[d] = oi[d] * f.str[d] + ki[d] * f.wdil[d];
      members.push_back(ravel(at, p.shape));
    }
    w.push_back(members);
  }
  return w;
}

double combine(const std::string& body, double a, double b) {
  if (body == "sum") return a + b;
  if (body == "max" || body == "any") return std::max(a, b);
  return std::min(a, b);
}

std::vector<double> ref_reduce_window(const Array& x, const std::string& body,
                                      const WindowConfig& c, double init, Shape* out) {
  const Full f = full_config(c, x.shape().size());
  const Padded p = materialise(to_doubles(x), x.shape(), f, init);
  std::vector<double> y;
  for (const auto& members : windows_of(p, f, out)) {
    double acc = init;
    for (int64_t j : members) acc = combine(body, acc, p.v[static_cast<size_t>(j)]);
    y.push_back(acc);
  }
  return y;
}

double identity(const std::string& body) {
  return body == "sum" || body == "any" ? 0 : body == "max" ? -kInf : kInf;
}

// select_and_scatter with an add scatter: each window's candidates are its
// operand elements (never padding); GE/LE take the first extreme, GT/LT the last.
std::vector<double> ref_select_and_scatter(const Array& x, const Array& src, const WindowConfig& c,
                                           const std::string& select) {
  const Full f = full_config(c, x.shape().size());
  const std::vector<double> xv = to_doubles(x), sv = to_doubles(src);
  const Padded p = materialise(xv, x.shape(), f, 0);
  Shape out;
  std::vector<double> y(xv.size(), 0.0);
  const auto ws = windows_of(p, f, &out);
  const bool larger = select[0] == 'G', last = select[1] == 'T';
  for (size_t o = 0; o < ws.size(); ++o) {
    std::vector<int64_t> cands;
    for (int64_t j : ws[o])
      if (p.origin[static_cast<size_t>(j)] >= 0) cands.push_back(p.origin[static_cast<size_t>(j)]);
    if (cands.empty()) continue;
    double best = xv[static_cast<size_t>(cands[0])];
    for (int64_t i : cands)
      best = larger ? std::max(best, xv[static_cast<size_t>(i)])
                    : std::min(best, xv[static_cast<size_t>(i)]);
    int64_t pick = -1;
    for (int64_t i : cands)
      if (xv[static_cast<size_t>(i)] == best && (pick < 0 || last)) pick = i;
    y[static_cast<size_t>(pick)] += sv[o];
  }
  return y;
}

// Integers in [0, 3) as f64: many ties.
Array tied(const Shape& s, uint64_t seed) {
  return f64_array(to_doubles(random_array(s, DType::i32, seed, 0, 3)), s);
}

// The program run compiled and interpreted (bitwise equal); the interpreted results.
std::vector<Array> run_both(const Program& p, const std::vector<Array>& args) {
  std::vector<Array> want = interpret(p, args);
  EXPECT_TRUE(BitwiseEqual(compile(p).run(args), want)) << p.name;
  return want;
}

struct RwCase {
  Shape shape;
  WindowConfig c;
};
std::vector<RwCase> rw_cases() {
  return {
      {{7}, {{3}, {2}, {{1, 2}}, {}, {}}},
      {{6}, {{2}, {1}, {{-1, 3}}, {3}, {2}}},
      {{5, 4}, {{2, 3}, {2, 1}, {{1, 0}, {2, 1}}, {1, 2}, {2, 1}}},
      {{4, 5}, {{3, 2}, {3, 2}, {{0, 1}, {-1, 2}}, {2, 1}, {1, 3}}},
      {{3, 4, 5}, {{2, 2, 3}, {1, 2, 2}, {{1, 1}, {0, 2}, {1, 0}}, {1, 1, 2}, {2, 1, 1}}},
      {{2, 3, 2}, {{1, 3, 2}, {}, {}, {}, {}}},
      {{3}, {{5}, {1}, {}, {}, {}}},  // a window larger than the operand: no outputs
  };
}

TEST(WindowReduce, MatchesFloat64LoopsOnEveryAttribute) {
  uint64_t seed = 1;
  for (const RwCase& rc : rw_cases())
    for (const std::string body : {"sum", "max", "min"}) {
      SCOPED_TRACE(body + " " + shape_str(rc.shape) + " window " + shape_str(rc.c.dimensions));
      const Array x = random_array(rc.shape, DType::f64, seed++);
      Program p = trace([&](Value v) { return reduce_window(v, body, rc.c); },
                        {Type(DType::f64, rc.shape)});
      Shape out;
      const std::vector<double> want = ref_reduce_window(x, body, rc.c, identity(body), &out);
      const std::vector<Array> got = run_both(p, {x});
      EXPECT_EQ(got[0].shape(), out);
      EXPECT_TRUE(Near(got[0], want, 1e-14, 1e-14));
      // With an init value that is not the identity: it pads and starts each fold.
      const double init = 0.25;
      Program q =
          trace([&](Value v) { return reduce_window(v, fill({}, init, DType::f64), body, rc.c); },
                {Type(DType::f64, rc.shape)});
      EXPECT_TRUE(
          Near(run_both(q, {x})[0], ref_reduce_window(x, body, rc.c, init, &out), 1e-14, 1e-14));
    }
}

TEST(WindowReduce, IntegerAndBoolBodies) {
  const WindowConfig c{{2, 2}, {1, 2}, {{1, 0}, {0, 1}}, {1, 2}, {1, 1}};
  for (DType d : {DType::i32, DType::i64, DType::u8, DType::f32}) {
    SCOPED_TRACE(dtype_name(d));
    const Array x = random_array({3, 4}, d, 7, 0, 9);
    for (const std::string body : {"sum", "max", "min"}) {
      Program p = trace([&](Value v) { return reduce_window(v, body, c); }, {Type(d, {3, 4})});
      Shape out;
      double id = 0;  // max/min: padding is the dtype's extreme
      if (body != "sum") {
        const bool hi = body == "min";
        id = is_floating(d)    ? identity(body)
             : d == DType::i32 ? (hi ? 2147483647.0 : -2147483648.0)
             : d == DType::i64 ? (hi ? 9223372036854775807.0 : -9223372036854775808.0)
                               : (hi ? 255.0 : 0.0);
      }
      EXPECT_TRUE(Near(run_both(p, {x})[0], ref_reduce_window(x, body, c, id, &out),
                       d == DType::f32 ? 1e-6 : 0, 0))
          << body;
    }
  }
  const Array b = random_array({4, 3}, DType::bool_, 9);
  for (const std::string body : {"any", "all"}) {
    Program p = trace(
        [&](Value v) {
          return reduce_window(v, body, {{2, 2}, {}, {}, {}, {}});
        },
        {Type(DType::bool_, {4, 3})});
    Shape out;
    const std::vector<double> want = ref_reduce_window(
        b, body == "any" ? "max" : "min", {{2, 2}, {}, {}, {}, {}}, body == "any" ? 0 : 1, &out);
    EXPECT_TRUE(Near(run_both(p, {b})[0], want, 0, 0)) << body;
  }
}

TEST(WindowSelectAndScatter, MatchesLoopsIncludingTiesFirstInWindowOrder) {
  struct Case {
    Shape shape;
    WindowConfig c;
  };
  const std::vector<Case> cases = {
      {{8}, {{3}, {2}, {{1, 1}}, {}, {}}},
      {{5, 6}, {{2, 3}, {2, 2}, {{1, 0}, {1, 1}}, {}, {}}},
      {{4, 4}, {{2, 2}, {1, 1}, {}, {}, {}}},  // overlapping windows
      {{3, 4, 5}, {{2, 2, 2}, {1, 2, 3}, {{0, 1}, {1, 1}, {2, 0}}, {}, {}}},
  };
  uint64_t seed = 30;
  for (const Case& k : cases)
    for (const std::string sel : {"GE", "GT", "LE", "LT"}) {
      SCOPED_TRACE(sel + " " + shape_str(k.shape));
      const Array x = tied(k.shape, seed++);
      Shape out;
      ref_reduce_window(x, "sum", k.c, 0, &out);
      const Array src = random_array(out, DType::f64, seed++);
      Program p = trace([&](Value v, Value s) { return select_and_scatter_add(v, s, k.c, sel); },
                        {Type(DType::f64, k.shape), Type(DType::f64, out)});
      EXPECT_TRUE(ArrayNear(run_both(p, {x, src})[0], ref_select_and_scatter(x, src, k.c, sel),
                            1e-14, 1e-14));
    }
  // By hand: the first of the tied maxima gets both windows' sources.
  Program p = trace(
      [](Value v, Value s) {
        return select_and_scatter_add(v, s, {{2}, {1}, {}, {}, {}});
      },
      {Type(DType::f64, {3}), Type(DType::f64, {2})});
  EXPECT_TRUE(ArrayNear(run_both(p, {f64_array({5, 5, 5}, {3}), f64_array({1, 10}, {2})})[0],
                        {1, 10, 0}, 0, 0));
  // Integers add with wrapping, as the scatter body's add.
  Program q = trace(
      [](Value v, Value s) {
        return select_and_scatter_add(v, s, {{2}, {2}, {}, {}, {}});
      },
      {Type(DType::i32, {4}), Type(DType::i32, {2})});
  EXPECT_TRUE(ArrayNear(run_both(q, {Array::from_vector<int32_t>({1, 3, 4, 2}, {4}),
                                     Array::from_vector<int32_t>({7, 9}, {2})})[0],
                        {0, 7, 9, 0}, 0, 0));
}

// The (low, high) of flax's SAME padding, written out.
std::pair<int64_t, int64_t> same(int64_t n, int64_t w, int64_t s) {
  const int64_t out = (n + s - 1) / s, total = std::max<int64_t>((out - 1) * s + w - n, 0);
  return {total / 2, total - total / 2};
}

TEST(Pool, MaxPoolGradientIsSelectAndScatterAndMatchesCentralDifferences) {
  const Shape xs{2, 5, 6, 3};
  for (const std::string padding : {"VALID", "SAME"}) {
    SCOPED_TRACE(padding);
    WindowConfig c{{1, 3, 3, 1}, {1, 2, 2, 1}, {}, {}, {}};
    c.padding = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    if (padding == "SAME") c.padding = {{0, 0}, same(5, 3, 2), same(6, 3, 2), {0, 0}};
    for (const Array& x : {random_array(xs, DType::f64, 41), tied(xs, 42)}) {
      Program pool = trace(
          [&](Value v) {
            return nn::max_pool(v, {3, 3}, {2, 2}, padding);
          },
          {Type(DType::f64, xs)});
      Shape out;
      EXPECT_TRUE(
          ArrayNear(run_both(pool, {x})[0], ref_reduce_window(x, "max", c, -kInf, &out), 0, 0));
      const Array w = random_array(out, DType::f64, 43);
      auto loss = [&](Value v) {
        return sum(nn::max_pool(v, {3, 3}, {2, 2}, padding) * constant(w));
      };
      EXPECT_TRUE(
          ArrayNear(jit(grad(loss))(x), ref_select_and_scatter(x, w, c, "GE"), 1e-14, 1e-14));
    }
    OpCase oc{"max_pool " + padding,
              [padding](const std::vector<Value>& a) {
                return nn::max_pool(a[0], {3, 3}, {2, 2}, padding);
              },
              {xs}};
    EXPECT_TRUE(GradMatchesFiniteDifferences(oc, 44));
  }
}

TEST(Pool, AvgPoolValuesAndGradientAgainstCentralDifferences) {
  const Shape xs{5, 4, 2};  // no batch axis
  const Array x = random_array(xs, DType::f64, 51);
  for (bool include : {true, false}) {
    Program p = trace(
        [&](Value v) {
          return nn::avg_pool(v, {2, 3}, {2, 1}, "SAME", include);
        },
        {Type(DType::f64, xs)});
    WindowConfig c{{2, 3, 1}, {2, 1, 1}, {same(5, 2, 2), same(4, 3, 1), {0, 0}}, {}, {}};
    Shape out;
    std::vector<double> want = ref_reduce_window(x, "sum", c, 0, &out);
    const std::vector<double> count =
        ref_reduce_window(full(xs, 1.0, DType::f64), "sum", c, 0, &out);
    for (size_t i = 0; i < want.size(); ++i) want[i] /= include ? 6.0 : count[i];
    EXPECT_TRUE(ArrayNear(run_both(p, {x})[0], want, 1e-14, 1e-14)) << include;
    OpCase oc{"avg_pool",
              [include](const std::vector<Value>& a) {
                return nn::avg_pool(a[0], {2, 3}, {2, 1}, "SAME", include);
              },
              {xs}};
    EXPECT_TRUE(GradMatchesFiniteDifferences(oc, 52));
  }
}

std::vector<OpCase> rule_cases() {
  std::vector<OpCase> cs;
  const WindowConfig dil{{2, 2}, {2, 1}, {{1, 2}, {-1, 1}}, {2, 1}, {1, 2}};
  // No window of only padding (whose -inf has no finite differences).
  const WindowConfig maxdil{{2, 2}, {1, 1}, {{1, 0}, {-1, 0}}, {2, 1}, {1, 2}};
  const WindowConfig plain{{2, 3}, {1, 2}, {{1, 0}, {0, 1}}, {}, {}};
  cs.push_back({"sum dilated",
                [dil](const std::vector<Value>& a) { return reduce_window(a[0], "sum", dil); },
                {{4, 5}}});
  cs.push_back({"sum 3-D strided",
                [](const std::vector<Value>& a) {
                  return reduce_window(a[0] * a[0], "sum",
                                       {{2, 1, 2}, {2, 1, 1}, {{0, 1}, {1, 0}, {0, 0}}, {}, {}});
                },
                {{3, 2, 4}}});
  cs.push_back({"max padded",
                [plain](const std::vector<Value>& a) { return reduce_window(a[0], "max", plain); },
                {{4, 5}}});
  cs.push_back({"min padded",
                [plain](const std::vector<Value>& a) { return reduce_window(a[0], "min", plain); },
                {{4, 5}}});
  cs.push_back(
      {"max dilated",
       [maxdil](const std::vector<Value>& a) { return reduce_window(a[0], "max", maxdil); },
       {{4, 5}}});
  cs.push_back({"select_and_scatter_add",
                [](const std::vector<Value>& a) {
                  return select_and_scatter_add(a[0], a[1] * a[1],
                                                {{2, 2}, {1, 2}, {{0, 1}, {1, 0}}, {}, {}});
                },
                {{3, 4}, {3, 2}}});
  cs.push_back({"avg_pool SAME",
                [](const std::vector<Value>& a) {
                  return nn::avg_pool(a[0], {2, 2}, {1, 2}, "SAME", false);
                },
                {{2, 3, 4, 2}}});
  return cs;
}

TEST(WindowTransforms, VjpMatchesJvpAndVmapMatchesLoops) {
  for (const OpCase& c : rule_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 61));
    EXPECT_TRUE(VjpMatchesJvp(c, 62));
    EXPECT_TRUE(VmapMatchesLoop(c, 63, 0));
    EXPECT_TRUE(VmapMatchesLoop(c, 64, -1));
  }
  // vmap of an unbatched operand with a batched source.
  auto f = [](Value x, Value s) { return select_and_scatter_add(x, s, {{2}, {2}, {}, {}, {}}); };
  const Array x = random_array({4}, DType::f64, 65), s = random_array({3, 2}, DType::f64, 66);
  const Array got = jit(vmap(f, {std::nullopt, 0}))(x, s);
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_TRUE(ArrayNear(batch_row(got, b), to_doubles(jit(f)(x, batch_row(s, b))), 0, 0));
}

TEST(WindowTransforms, SecondOrderThroughMaxPool) {
  // grad(max_pool) is select_and_scatter_add, whose own derivative in its
  // source gathers at the same positions: d/dw <grad f(x; w), u> = u gathered.
  const Array x = random_array({1, 4, 4, 1}, DType::f64, 71);
  const Array u = random_array({1, 4, 4, 1}, DType::f64, 72);
  auto inner = [](Value v, Value w) { return sum(nn::max_pool(v, {2, 2}, {2, 2}) * w); };
  auto outer = [&](Value w) { return sum(grad(inner)(constant(x), w) * constant(u)); };
  const Array g = jit(grad(outer))(full({1, 2, 2, 1}, 1.0, DType::f64));
  // u at each window's argmax.
  std::vector<double> want;
  const std::vector<double> xv = to_doubles(x), uv = to_doubles(u);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      int64_t best = -1;
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 2; ++b) {
          const int64_t k = (2 * i + a) * 4 + 2 * j + b;
          if (best < 0 || xv[static_cast<size_t>(k)] > xv[static_cast<size_t>(best)]) best = k;
        }
      want.push_back(uv[static_cast<size_t>(best)]);
    }
  EXPECT_TRUE(ArrayNear(g, want, 0, 0));
}

TEST(WindowExport, ProgramTextAndStableHloRoundTrips) {
  const WindowConfig c{{2, 2}, {1, 2}, {{1, 0}, {-1, 2}}, {2, 1}, {1, 2}};
  const WindowConfig s{{2, 3}, {2, 1}, {{0, 1}, {1, 1}}, {}, {}};
  for (DType d : {DType::f32, DType::f64, DType::i32}) {
    SCOPED_TRACE(dtype_name(d));
    Program p = trace(
        [&](Value x, Value y) -> std::vector<Value> {
          return {reduce_window(x, "sum", c), reduce_window(x, "max", c),
                  reduce_window(x, "min", s), select_and_scatter_add(x, y, s, "GE"),
                  select_and_scatter_add(x, y, s, "LT")};
        },
        {Type(d, {4, 5}), Type(d, {2, 5})});
    const std::vector<Array> args = {random_array({4, 5}, d, 81, -5, 5),
                                     random_array({2, 5}, d, 82, -5, 5)};
    const std::vector<Array> want = run_both(p, args);
    Program parsed = parse_program(to_string(p));
    EXPECT_EQ(to_string(parsed), to_string(p));
    EXPECT_TRUE(BitwiseEqual(interpret(parsed, args), want));
    const std::string mlir = to_stablehlo(p);
    EXPECT_NE(mlir.find("stablehlo.reduce_window"), std::string::npos);
    EXPECT_NE(mlir.find("stablehlo.select_and_scatter"), std::string::npos);
    Program back = from_stablehlo(mlir);
    const std::vector<Array> got = run_both(back, args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(ArrayNear(got[i], to_doubles(want[i]), 1e-6, 1e-6)) << i;
  }
}

TEST(WindowImport, JaxMaxPoolJvpOverValueTangentPairs) {
  // JAX's forward derivative of max pooling: one reduce_window over (value,
  // tangent) pairs whose body keeps the accumulator's pair on ties.
  const std::string mlir = R"(
func.func @main(%x: tensor<4x5xf32>, %t: tensor<4x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %r:2 = "stablehlo.reduce_window"(%x, %t, %ninf, %zero) ({
  ^bb0(%a: tensor<f32>, %at: tensor<f32>, %b: tensor<f32>, %bt: tensor<f32>):
    %c = stablehlo.compare  GE, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %v = stablehlo.select %c, %a, %b : tensor<i1>, tensor<f32>
    %vt = stablehlo.select %c, %at, %bt : tensor<i1>, tensor<f32>
    stablehlo.return %v, %vt : tensor<f32>, tensor<f32>
  }) {padding = dense<[[0, 0], [1, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>} : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<f32>, tensor<f32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<2x3xf32>
}
)";
  Program p = from_stablehlo(mlir);
  const Array x = convert_array(tied({4, 5}, 91), DType::f32);
  const Array t = random_array({4, 5}, DType::f32, 92);
  const std::vector<Array> got = run_both(p, {x, t});
  // drx's own jvp of max pooling selects the same elements.
  const WindowConfig c{{2, 2}, {2, 2}, {{0, 0}, {1, 0}}, {}, {}};
  auto f = [c](Value v) { return reduce_window(v, "max", c); };
  Program d = trace(
      [f](Value v, Value dv) -> std::vector<Value> {
        auto [y, dy] = jvp(f, {v}, {dv});
        return {y, dy};
      },
      {Type(DType::f32, {4, 5}), Type(DType::f32, {4, 5})});
  EXPECT_TRUE(BitwiseEqual(got, run_both(d, {x, t})));
}

TEST(WindowErrors, NameTheAttributeAndTheShapes) {
  const Type m(DType::f32, {4, 5});
  auto fails = [](const std::function<Value(Value)>& f, const Type& t,
                  const std::vector<std::string>& parts) {
    expect_error([&] { trace(f, {t}); }, parts);
  };
  fails(
      [](Value v) {
        return reduce_window(v, "sum", {{2}, {}, {}, {}, {}});
      },
      m, {"reduce_window", "window_dimensions [2]", "f32[4,5]"});
  fails(
      [](Value v) {
        return reduce_window(v, "sum", {{2, 0}, {}, {}, {}, {}});
      },
      m, {"reduce_window", "window_dimensions [2,0]", ">= 1"});
  fails(
      [](Value v) {
        return reduce_window(v, "max", {{2, 2}, {1, 0}, {}, {}, {}});
      },
      m, {"window_strides [1,0]", ">= 1"});
  fails(
      [](Value v) {
        return reduce_window(v, "max", {{2, 2}, {1, 1, 1}, {}, {}, {}});
      },
      m, {"window_strides [1,1,1]", "one entry per axis"});
  fails(
      [](Value v) {
        return reduce_window(v, "max", {{2, 2}, {}, {}, {0, 1}, {}});
      },
      m, {"base_dilations [0,1]"});
  fails(
      [](Value v) {
        return reduce_window(v, "max", {{2, 2}, {}, {{-3, -3}, {0, 0}}, {}, {}});
      },
      m, {"padding (-3, -3)", "axis 0", "f32[4,5]"});
  fails(
      [](Value v) {
        return reduce_window(v, "prod", {{2, 2}, {}, {}, {}, {}});
      },
      m, {"body 'prod'"});
  fails(
      [](Value v) {
        return reduce_window(v, "any", {{2, 2}, {}, {}, {}, {}});
      },
      m, {"any", "bool", "f32[4,5]"});
  fails(
      [](Value v) {
        return reduce_window(astype(v, DType::bool_), "sum", {{2, 2}, {}, {}, {}, {}});
      },
      m, {"reduce_window", "bool[4,5]"});
  fails(
      [](Value v) {
        return select_and_scatter_add(v, v, {{2, 2}, {}, {}, {}, {}});
      },
      m, {"select_and_scatter_add", "source f32[4,5]", "[3,4]", "operand f32[4,5]"});
  fails(
      [](Value v) {
        return select_and_scatter_add(v, slice(v, {0, 0}, {3, 4}), {{2, 2}, {}, {}, {}, {}}, "EQ");
      },
      m, {"select 'EQ'"});
  fails([](Value v) { return nn::max_pool(v, {2, 2, 2}); }, m, {"max_pool", "f32[4,5]"});
  fails([](Value v) { return nn::avg_pool(v, {2}, {}, "FULL"); }, m, {"avg_pool", "FULL"});
  // Parsed programs reach the primitive's own checks.
  expect_error(
      [] {
        parse_program(
            "program @m (%0: f32[4]) -> (f32[3]) {\n"
            "  %1 = reduce_window[base_dilation=[1], body=\"sum\", high=[0], low=[0], strides=[1], "
            "window=[2,2], window_dilation=[1]] %0 : f32[3]\n"
            "  return %1\n}");
      },
      {"reduce_window", "window_dimensions [2,2]", "f32[4]"});
}

}  // namespace
}  // namespace drx::testing
