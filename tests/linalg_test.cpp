// dot_general and matmul against float64 loop references written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/drx.h"
#include "test_util.h"

namespace {

using drx::Array;
using drx::DotDims;
using drx::Shape;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;
using Dims = std::vector<int64_t>;

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;

std::vector<Array> run_fn(const Fn& fn, const std::vector<Array>& args) {
  std::vector<drx::Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  return drx::run(drx::trace_function(fn, types).program, args);
}

int64_t offset(const Dims& idx, const Shape& shape) {
  int64_t o = 0;
  for (size_t d = 0; d < shape.size(); ++d) o = o * shape[d] + idx[d];
  return o;
}

// Advances a row-major multi-index over `shape`; false once it wraps around.
bool next_index(Dims& idx, const Shape& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Reference dot_general: for every output index, sum over every contracting
// index, placing each operand index dim by dim. Dims must be non-negative.
std::vector<double> ref_dot(const Array& l, const Array& r, const DotDims& d, Shape* out_shape) {
  const Shape &ls = l.shape(), &rs = r.shape();
  auto free_of = [](size_t nd, const Dims& c, const Dims& b) {
    Dims f;
    for (int64_t i = 0; i < static_cast<int64_t>(nd); ++i)
      if (std::count(c.begin(), c.end(), i) == 0 && std::count(b.begin(), b.end(), i) == 0)
        f.push_back(i);
    return f;
  };
  Dims lf = free_of(ls.size(), d.lhs_contracting, d.lhs_batch);
  Dims rf = free_of(rs.size(), d.rhs_contracting, d.rhs_batch);
  Shape os, cs;
  for (int64_t b : d.lhs_batch) os.push_back(ls[static_cast<size_t>(b)]);
  for (int64_t f : lf) os.push_back(ls[static_cast<size_t>(f)]);
  for (int64_t f : rf) os.push_back(rs[static_cast<size_t>(f)]);
  for (int64_t c : d.lhs_contracting) cs.push_back(ls[static_cast<size_t>(c)]);
  *out_shape = os;
  int64_t n_out = drx::num_elements(os);
  std::vector<double> out(static_cast<size_t>(n_out), 0.0);
  if (n_out == 0) return out;
  Dims oi(os.size(), 0);
  do {
    double acc = 0;
    if (drx::num_elements(cs) > 0) {
      Dims ci(cs.size(), 0);
      do {
        Dims li(ls.size()), ri(rs.size());
        size_t k = 0;
        for (size_t i = 0; i < d.lhs_batch.size(); ++i, ++k) {
          li[static_cast<size_t>(d.lhs_batch[i])] = oi[k];
          ri[static_cast<size_t>(d.rhs_batch[i])] = oi[k];
        }
        for (int64_t f : lf) li[static_cast<size_t>(f)] = oi[k++];
        for (int64_t f : rf) ri[static_cast<size_t>(f)] = oi[k++];
        for (size_t i = 0; i < cs.size(); ++i) {
          li[static_cast<size_t>(d.lhs_contracting[i])] = ci[i];
          ri[static_cast<size_t>(d.rhs_contracting[i])] = ci[i];
        }
        acc += l.element_as_double(offset(li, ls)) * r.element_as_double(offset(ri, rs));
      } while (next_index(ci, cs));
    }
    out[static_cast<size_t>(offset(oi, os))] = acc;
  } while (next_index(oi, os));
  return out;
}

void expect_dot(const Shape& ls, const Shape& rs, const DotDims& d, drx::DType dt = drx::f64) {
  SCOPED_TRACE("lhs " + drx::shape_str(ls) + " rhs " + drx::shape_str(rs) + " contracting " +
               drx::shape_str(d.lhs_contracting) + "/" + drx::shape_str(d.rhs_contracting) +
               " batch " + drx::shape_str(d.lhs_batch) + "/" + drx::shape_str(d.rhs_batch));
  Array l = random_array(ls, dt, 11, -4, 4), r = random_array(rs, dt, 12, -4, 4);
  Array got = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::dot_general(in[0], in[1], d)};
      },
      {l, r})[0];
  Shape want_shape;
  std::vector<double> want = ref_dot(l, r, d, &want_shape);
  EXPECT_EQ(got.shape(), want_shape);
  EXPECT_EQ(got.dtype(), dt);
  EXPECT_TRUE(ArrayNear(got, want, dt == drx::f32 ? 1e-5 : 1e-12, 1e-5));
}

TEST(LinalgDotGeneral, HandComputedMatrixProduct) {
  Array a = drx::testing::f64_array({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = drx::testing::f64_array({7, 8, 9, 10, 11, 12}, {3, 2});
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::dot_general(in[0], in[1], {{1}, {0}, {}, {}})};
      },
      {a, b})[0];
  EXPECT_EQ(got.shape(), (Shape{2, 2}));
  EXPECT_TRUE(ArrayNear(got, {58, 64, 139, 154}));
}

TEST(LinalgDotGeneral, UnusualDimPositions) {
  expect_dot({2, 3, 4}, {4, 3, 5}, {{1}, {1}, {}, {}});             // -> [2,4,4,5]
  expect_dot({3, 2, 4}, {4, 3, 2}, {{0}, {1}, {1}, {2}});           // batch not leading
  expect_dot({2, 3, 4}, {4, 5, 3}, {{2, 1}, {0, 2}, {}, {}});       // two contracting, swapped
  expect_dot({2, 3, 4}, {3, 4, 2, 5}, {{1}, {0}, {2, 0}, {1, 2}});  // batch order not sorted
  expect_dot({5, 2, 3}, {2, 3, 5}, {{2}, {1}, {0, 1}, {2, 0}});
  expect_dot({2, 3, 4}, {4, 3, 5}, {{1}, {1}, {}, {}}, drx::f32);
  expect_dot({2, 3, 4}, {4, 3, 5}, {{1}, {1}, {}, {}}, drx::i32);
  expect_dot({3, 4}, {4, 2}, {{1}, {0}, {}, {}}, drx::i64);
}

TEST(LinalgDotGeneral, DegenerateShapes) {
  expect_dot({}, {}, {{}, {}, {}, {}});            // product of scalars
  expect_dot({2}, {3}, {{}, {}, {}, {}});          // outer product
  expect_dot({4}, {4}, {{0}, {0}, {}, {}});        // inner product -> scalar
  expect_dot({0, 3}, {3, 2}, {{1}, {0}, {}, {}});  // empty result
  expect_dot({2, 0}, {0, 3}, {{1}, {0}, {}, {}});  // empty contraction -> zeros
  expect_dot({0, 2, 3}, {0, 3}, {{2}, {1}, {0}, {0}});
  expect_dot({3}, {3}, {{}, {}, {0}, {0}});  // elementwise product via batch
}

TEST(LinalgDotGeneral, NegativeDimsCountFromTheEnd) {
  Array a = random_array({2, 3}, drx::f64, 3), b = random_array({3, 4}, drx::f64, 4);
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::dot_general(in[0], in[1], {{-1}, {-2}, {}, {}})};
      },
      {a, b})[0];
  Shape s;
  EXPECT_TRUE(ArrayNear(got, ref_dot(a, b, {{1}, {0}, {}, {}}, &s), 1e-12));
}

// Transposed (non-contiguous in the sense of a strided view) operands: the
// reference reads the original arrays through the permuted index.
TEST(LinalgDotGeneral, OperandsThroughTranspose) {
  Array a = random_array({4, 2, 3}, drx::f64, 5), b = random_array({5, 3}, drx::f64, 6);
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        Value at = drx::transpose(in[0], {1, 0, 2});  // [2,4,3]
        Value bt = drx::transpose(in[1], {1, 0});     // [3,5]
        return {drx::dot_general(at, bt, {{2}, {0}, {}, {}}), drx::matmul(at, bt)};
      },
      {a, b});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int n = 0; n < 5; ++n) {
        double s = 0;
        for (int k = 0; k < 3; ++k)
          s += a.element_as_double((j * 2 + i) * 3 + k) * b.element_as_double(n * 3 + k);
        want.push_back(s);
      }
  for (const Array& got : out) {
    EXPECT_EQ(got.shape(), (Shape{2, 4, 5}));
    EXPECT_TRUE(ArrayNear(got, want, 1e-12));
  }
}

// ---- matmul ------------------------------------------------------------------

void expect_matmul(const Shape& as, const Shape& bs, const Shape& want_shape) {
  SCOPED_TRACE(drx::shape_str(as) + " @ " + drx::shape_str(bs));
  Array a = random_array(as, drx::f64, 21), b = random_array(bs, drx::f64, 22);
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::matmul(in[0], in[1])};
      },
      {a, b})[0];
  ASSERT_EQ(got.shape(), want_shape);
  // numpy.matmul semantics: promote vectors, broadcast leading dims, multiply.
  Shape pa = as, pb = bs;
  if (pa.size() == 1) pa.insert(pa.begin(), 1);
  if (pb.size() == 1) pb.push_back(1);
  const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
  Shape lead;
  size_t nl = std::max(pa.size(), pb.size()) - 2;
  for (size_t i = 0; i < nl; ++i) {
    auto dim = [&](const Shape& s) {
      size_t off = nl - (s.size() - 2);
      return i < off ? int64_t{1} : s[i - off];
    };
    lead.push_back(std::max(dim(pa), dim(pb)));
  }
  std::vector<double> want;
  Dims li(lead.size(), 0);
  if (drx::num_elements(lead) > 0) do {
      auto base = [&](const Shape& s) {  // offset of the matrix at `li` in an operand
        size_t off = nl - (s.size() - 2);
        int64_t o = 0;
        for (size_t i = off; i < nl; ++i) o = o * s[i - off] + (s[i - off] == 1 ? 0 : li[i]);
        return o * s[s.size() - 2] * s.back();
      };
      int64_t oa = base(pa), ob = base(pb);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += a.element_as_double(oa + m * K + k) * b.element_as_double(ob + k * N + n);
          want.push_back(s);
        }
    } while (next_index(li, lead));
  EXPECT_TRUE(ArrayNear(got, want, 1e-12));
}

TEST(LinalgMatmul, MatricesBatchesAndVectors) {
  expect_matmul({3, 4}, {4, 5}, {3, 5});
  expect_matmul({2, 3, 4}, {2, 4, 5}, {2, 3, 5});
  expect_matmul({3, 4}, {2, 4, 5}, {2, 3, 5});           // broadcast lhs
  expect_matmul({2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2});  // broadcast both
  expect_matmul({4}, {4}, {});
  expect_matmul({4}, {4, 5}, {5});
  expect_matmul({3, 4}, {4}, {3});
  expect_matmul({4}, {2, 4, 5}, {2, 5});
  expect_matmul({2, 3, 4}, {4}, {2, 3});
  expect_matmul({0, 4}, {4, 2}, {0, 2});
  expect_matmul({3, 0}, {0, 2}, {3, 2});
  expect_matmul({2, 3, 4}, {4, 5}, {2, 3, 5});  // a matrix rhs: one product over all rows
  expect_matmul({2, 2, 3, 4}, {4, 5}, {2, 2, 3, 5});
}

// x [..., in] @ w [in, out] is one dot_general with x's leading dims free, not a batched product
// over copies of w; the gradient of w is then one contraction over all of x's rows.
TEST(LinalgMatmul, MatrixRhsIsOneProductNotABroadcastBatch) {
  const drx::Program p =
      drx::trace([](Value x, Value w) { return matmul(x, w); },
                 {drx::Type(drx::DType::f32, {2, 3, 4}), drx::Type(drx::DType::f32, {4, 5})});
  ASSERT_EQ(p.eqns.size(), 1u);
  EXPECT_EQ(p.eqns[0].prim->name(), "dot_general");
}

TEST(LinalgMatmul, Float32AccumulatesAccurately) {
  // 1 + 1e-8 * 4096 summed in float32 one term at a time would lose the small
  // terms; accumulating in double and rounding once keeps them.
  const int64_t K = 4096;
  std::vector<float> a(static_cast<size_t>(K), 1.0f), b(static_cast<size_t>(K), 1e-8f);
  b[0] = 1.0f;
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::matmul(in[0], in[1])};
      },
      {drx::testing::f32_array(a, {1, K}), drx::testing::f32_array(b, {K, 1})})[0];
  EXPECT_EQ(got.to_vector<float>()[0], static_cast<float>(1.0 + 4095 * double{1e-8f}));
}

// ---- errors ------------------------------------------------------------------

std::string error_of(const Fn& fn, const std::vector<Array>& args) {
  try {
    run_fn(fn, args);
  } catch (const drx::TypeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no TypeError thrown";
  return "";
}

std::string dot_error(const Array& a, const Array& b, const DotDims& d) {
  return error_of(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::dot_general(in[0], in[1], d)};
      },
      {a, b});
}

TEST(LinalgErrors, DotGeneralNamesOpAndTypes) {
  Array a(drx::f32, {2, 3}), b(drx::f32, {4, 5});
  std::string m = dot_error(a, b, {{1}, {0}, {}, {}});
  EXPECT_NE(m.find("dot_general"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,3]"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[4,5]"), std::string::npos) << m;
  EXPECT_NE(m.find("size 3"), std::string::npos) << m;

  m = dot_error(a, Array(drx::f64, {3, 2}), {{1}, {0}, {}, {}});
  EXPECT_NE(m.find("dtype"), std::string::npos) << m;
  m = dot_error(a, Array(drx::f32, {3, 2}), {{2}, {0}, {}, {}});
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  m = dot_error(a, Array(drx::f32, {3, 3}), {{1, 1}, {0, 1}, {}, {}});
  EXPECT_NE(m.find("twice"), std::string::npos) << m;
  m = dot_error(a, Array(drx::f32, {3, 2}), {{1}, {0, 1}, {}, {}});
  EXPECT_NE(m.find("as many"), std::string::npos) << m;
  m = dot_error(Array(drx::f32, {2, 3}), Array(drx::f32, {3, 3}), {{1}, {0}, {0}, {1}});
  EXPECT_NE(m.find("batch"), std::string::npos) << m;
  m = dot_error(Array(drx::bool_, {3}), Array(drx::bool_, {3}), {{0}, {0}, {}, {}});
  EXPECT_NE(m.find("bool"), std::string::npos) << m;
}

TEST(LinalgErrors, MatmulNamesOpAndTypes) {
  auto mm = [](const Array& a, const Array& b) {
    return error_of(
        [](const std::vector<Value>& in) -> std::vector<Value> {
          return {drx::matmul(in[0], in[1])};
        },
        {a, b});
  };
  std::string m = mm(Array(drx::f32, {2, 3}), Array(drx::f32, {4, 5}));
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,3]"), std::string::npos) << m;
  m = mm(Array(drx::f32, {2, 3, 4}), Array(drx::f32, {3, 4, 5}));
  EXPECT_NE(m.find("broadcast"), std::string::npos) << m;
  m = mm(Array(drx::f32, {}), Array(drx::f32, {3}));
  EXPECT_NE(m.find("1-D"), std::string::npos) << m;
  m = mm(Array(drx::f32, {3}), Array(drx::f32, {4}));
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
}

// ---- rules, called directly on the primitive ---------------------------------

drx::Params dot_params(const DotDims& d) {
  return drx::Params{{"lhs_contracting", d.lhs_contracting},
                     {"rhs_contracting", d.rhs_contracting},
                     {"lhs_batch", d.lhs_batch},
                     {"rhs_batch", d.rhs_batch}};
}

double inner(const Array& a, const std::vector<double>& b) {
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.element_as_double(i) * b[static_cast<size_t>(i)];
  return s;
}

struct Case {
  Shape ls, rs;
  DotDims d;
};
const std::vector<Case> kCases = {
    {{3, 4}, {4, 5}, {{1}, {0}, {}, {}}},
    {{2, 3, 4}, {4, 3, 5}, {{1}, {1}, {}, {}}},
    {{3, 2, 4}, {4, 3, 2}, {{0}, {1}, {1}, {2}}},
    {{2, 3, 4}, {4, 5, 3}, {{2, 1}, {0, 2}, {}, {}}},
    {{2, 3, 4}, {3, 4, 2, 5}, {{1}, {0}, {2, 0}, {1, 2}}},
    {{4}, {4}, {{0}, {0}, {}, {}}},
    {{2}, {3}, {{}, {}, {}, {}}},
};

// The jvp is the product rule (checked against the reference, which is
// bilinear), and the vjp is its transpose: <u, J (va, vb)> = <J^T u, (va, vb)>.
TEST(LinalgRules, JvpProductRuleAndVjpTranspose) {
  const drx::Primitive& p = drx::primitive("dot_general");
  for (const Case& c : kCases) {
    SCOPED_TRACE("lhs " + drx::shape_str(c.ls) + " rhs " + drx::shape_str(c.rs));
    Array a = random_array(c.ls, drx::f64, 1), b = random_array(c.rs, drx::f64, 2);
    Array ta = random_array(c.ls, drx::f64, 3), tb = random_array(c.rs, drx::f64, 4);
    Shape os;
    std::vector<double> jv = ref_dot(ta, b, c.d, &os), t2 = ref_dot(a, tb, c.d, &os);
    for (size_t i = 0; i < jv.size(); ++i) jv[i] += t2[i];
    Array u = random_array(os, drx::f64, 5);
    auto out = run_fn(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          drx::Params params = dot_params(c.d);
          Value y = drx::emit1(p, {in[0], in[1]}, params);
          auto tan = p.jvp({in[0], in[1]}, {in[2], in[3]}, {y}, params);
          auto only_a = p.jvp({in[0], in[1]}, {in[2], std::nullopt}, {y}, params);
          auto none = p.jvp({in[0], in[1]}, {std::nullopt, std::nullopt}, {y}, params);
          EXPECT_FALSE(none[0].has_value());
          auto ct = p.vjp({in[0], in[1]}, {y}, {in[4]}, params);
          return {*tan[0], *only_a[0], *ct[0], *ct[1]};
        },
        {a, b, ta, tb, u});
    EXPECT_TRUE(ArrayNear(out[0], jv, 1e-12, 1e-12));
    EXPECT_TRUE(ArrayNear(out[1], ref_dot(ta, b, c.d, &os), 1e-12, 1e-12));
    ASSERT_EQ(out[2].shape(), c.ls);
    ASSERT_EQ(out[3].shape(), c.rs);
    double lhs = inner(u, jv);
    double rhs = inner(out[2], to_doubles(ta)) + inner(out[3], to_doubles(tb));
    EXPECT_NEAR(lhs, rhs, 1e-10);
  }
}

// Each slice of a vmapped dot_general equals the reference on that slice.
TEST(LinalgRules, VmapAgainstLoop) {
  const drx::Primitive& p = drx::primitive("dot_general");
  const int64_t B = 3;
  auto slice = [](const Array& x, int64_t b) {
    Shape s(x.shape().begin() + 1, x.shape().end());
    std::vector<double> v;
    int64_t n = drx::num_elements(s);
    for (int64_t i = 0; i < n; ++i) v.push_back(x.element_as_double(b * n + i));
    return drx::testing::f64_array(v, s);
  };
  for (const Case& c : kCases) {
    for (int mode = 0; mode < 3; ++mode) {  // 0: both batched, 1: lhs only, 2: rhs only
      SCOPED_TRACE("lhs " + drx::shape_str(c.ls) + " rhs " + drx::shape_str(c.rs) + " mode " +
                   std::to_string(mode));
      bool lb = mode != 2, rb = mode != 1;
      Shape ls = c.ls, rs = c.rs;
      if (lb) ls.insert(ls.begin(), B);
      if (rb) rs.insert(rs.begin(), B);
      Array a = random_array(ls, drx::f64, 7), b = random_array(rs, drx::f64, 8);
      Array got = run_fn(
          [&](const std::vector<Value>& in) -> std::vector<Value> {
            auto r = p.vmap({{in[0], lb}, {in[1], rb}}, B, dot_params(c.d));
            EXPECT_TRUE(r[0].batched);
            return {r[0].value};
          },
          {a, b})[0];
      std::vector<double> want;
      Shape os;
      for (int64_t i = 0; i < B; ++i) {
        auto w = ref_dot(lb ? slice(a, i) : a, rb ? slice(b, i) : b, c.d, &os);
        want.insert(want.end(), w.begin(), w.end());
      }
      os.insert(os.begin(), B);
      EXPECT_EQ(got.shape(), os);
      EXPECT_TRUE(ArrayNear(got, want, 1e-12, 1e-12));
    }
  }
}

TEST(LinalgRules, IntegerOperandsHaveNoDerivative) {
  const drx::Primitive& p = drx::primitive("dot_general");
  Array a = random_array({2, 3}, drx::i32, 1, -3, 3), b = random_array({3}, drx::i32, 2, -3, 3);
  run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        drx::Params params = dot_params({{1}, {0}, {}, {}});
        Value y = drx::emit1(p, {in[0], in[1]}, params);
        auto ct = p.vjp({in[0], in[1]}, {y}, {y}, params);
        EXPECT_FALSE(ct[0].has_value());
        EXPECT_FALSE(ct[1].has_value());
        return {y};
      },
      {a, b});
}

// ---- end to end through the public transformations ---------------------------

namespace grad_e2e {

// f = sum(matmul(a, b) * w): df/da = sum over broadcast batch of w b^T,
// df/db = a^T w, with a [3,4] broadcast against b [2,4,5].
TEST(LinalgGrad, BroadcastMatmulGradients) {
  Array a = random_array({3, 4}, drx::f64, 71), b = random_array({2, 4, 5}, drx::f64, 72);
  Array w = random_array({2, 3, 5}, drx::f64, 73);
  auto f = [](Value a, Value b, Value w) { return drx::sum(drx::matmul(a, b) * w); };
  auto g = drx::jit(drx::grad(f, std::vector<int>{0, 1}))(a, b, w);
  ASSERT_EQ(g.size(), 2u);
  std::vector<double> ga(12, 0.0), gb(40, 0.0);
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 5; ++j) {
          double wv = w.element_as_double((n * 3 + i) * 5 + j);
          ga[static_cast<size_t>(i * 4 + k)] += wv * b.element_as_double((n * 4 + k) * 5 + j);
          gb[static_cast<size_t>((n * 4 + k) * 5 + j)] += a.element_as_double(i * 4 + k) * wv;
        }
  EXPECT_TRUE(ArrayNear(g[0], ga, 1e-12, 1e-12));
  EXPECT_TRUE(ArrayNear(g[1], gb, 1e-12, 1e-12));
}

// Gradients of a contraction with batch and contracting dims in unusual places
// against central finite differences (the function is bilinear, so they are exact
// up to rounding).
TEST(LinalgGrad, DotGeneralMatchesFiniteDifferences) {
  const DotDims d{{0}, {1}, {1}, {2}};
  Array a = random_array({3, 2, 4}, drx::f64, 74), b = random_array({4, 3, 2}, drx::f64, 75);
  auto f = [d](Value a, Value b) {
    Value y = drx::dot_general(a, b, d);
    return drx::sum(y * y);
  };
  auto g = drx::jit(drx::grad(f, std::vector<int>{0, 1}))(a, b);
  auto value = [&](const Array& aa, const Array& bb) {
    Shape s;
    double v = 0;
    for (double y : ref_dot(aa, bb, d, &s)) v += y * y;
    return v;
  };
  const double h = 1e-5;
  for (int which = 0; which < 2; ++which) {
    const Array& x = which == 0 ? a : b;
    std::vector<double> fd;
    for (int64_t i = 0; i < x.size(); ++i) {
      std::vector<double> p = to_doubles(x), m = p;
      p[static_cast<size_t>(i)] += h;
      m[static_cast<size_t>(i)] -= h;
      Array xp = drx::testing::f64_array(p, x.shape()), xm = drx::testing::f64_array(m, x.shape());
      fd.push_back(which == 0 ? (value(xp, b) - value(xm, b)) / (2 * h)
                              : (value(a, xp) - value(a, xm)) / (2 * h));
    }
    EXPECT_TRUE(ArrayNear(g[static_cast<size_t>(which)], fd, 1e-6, 1e-6)) << "operand " << which;
  }
}

// vmap over the lhs only, rhs only, and both, against per-example matmuls.
TEST(LinalgGrad, VmapMatmul) {
  Array a = random_array({3, 2, 4}, drx::f64, 76), b = random_array({3, 4, 5}, drx::f64, 77);
  auto mm = [](Value x, Value y) { return drx::matmul(x, y); };
  Array both = drx::jit(drx::vmap(mm))(a, b);
  Array b0 = random_array({4, 5}, drx::f64, 78);
  Array lhs_only = drx::jit(drx::vmap(mm, {0, std::nullopt}))(a, b0);
  Array a0 = random_array({2, 4}, drx::f64, 79);
  Array rhs_only = drx::jit(drx::vmap(mm, {std::nullopt, 0}))(a0, b);
  auto ref = [](const Array& x, int64_t xo, const Array& y, int64_t yo) {
    std::vector<double> out;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k)
          s += x.element_as_double(xo + i * 4 + k) * y.element_as_double(yo + k * 5 + j);
        out.push_back(s);
      }
    return out;
  };
  std::vector<double> w_both, w_lhs, w_rhs;
  for (int n = 0; n < 3; ++n) {
    auto r1 = ref(a, n * 8, b, n * 20), r2 = ref(a, n * 8, b0, 0), r3 = ref(a0, 0, b, n * 20);
    w_both.insert(w_both.end(), r1.begin(), r1.end());
    w_lhs.insert(w_lhs.end(), r2.begin(), r2.end());
    w_rhs.insert(w_rhs.end(), r3.begin(), r3.end());
  }
  for (const Array* got : {&both, &lhs_only, &rhs_only}) EXPECT_EQ(got->shape(), (Shape{3, 2, 5}));
  EXPECT_TRUE(ArrayNear(both, w_both, 1e-12));
  EXPECT_TRUE(ArrayNear(lhs_only, w_lhs, 1e-12));
  EXPECT_TRUE(ArrayNear(rhs_only, w_rhs, 1e-12));
}

}  // namespace grad_e2e

}  // namespace
