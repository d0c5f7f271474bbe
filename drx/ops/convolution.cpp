// conv_general_dilated: StableHLO's convolution as one primitive (see convolution.h).
//
// Its rules follow JAX's lax.conv_general_dilated: it is bilinear, so the jvp is
// conv(t_lhs, rhs) + conv(lhs, t_rhs); the transposes are convolutions again (the lhs
// cotangent convolves the cotangent with the flipped, feature-swapped kernel, strides becoming
// lhs dilation; the rhs cotangent convolves lhs with the cotangent), feature and batch groups
// moved between the kernel's feature dims and the batch dim by reshapes; vmap folds the mapped
// axis into the batch dim (lhs), the output features (rhs) or the feature groups (both).
#include "drx/ops/convolution.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/ops/bilinear.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(ops_convolution);

namespace drx {
namespace {

using Dims = std::vector<int64_t>;
const std::string kOp = "conv_general_dilated";

namespace key {
constexpr const char* window_strides = "window_strides";
constexpr const char* padding_low = "padding_low";
constexpr const char* padding_high = "padding_high";
constexpr const char* lhs_dilation = "lhs_dilation";
constexpr const char* rhs_dilation = "rhs_dilation";
constexpr const char* window_reversal = "window_reversal";
constexpr const char* lhs_dims = "lhs_dims";  // [batch, feature, spatial...]
constexpr const char* rhs_dims = "rhs_dims";  // [out feature, in feature, spatial...]
constexpr const char* out_dims = "out_dims";  // [batch, feature, spatial...]
constexpr const char* feature_group_count = "feature_group_count";
constexpr const char* batch_group_count = "batch_group_count";
constexpr const char* preferred_element_type = "preferred_element_type";
}  // namespace key

Dims spec(int64_t a, int64_t b, const Dims& spatial) {
  Dims s{a, b};
  s.insert(s.end(), spatial.begin(), spatial.end());
  return s;
}

int64_t dilate(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

int64_t at(const Shape& s, int64_t d) { return s[static_cast<size_t>(d)]; }

// Output spatial size k (StableHLO's num_windows; 0 for an empty window).
int64_t windows(const ConvParams& c, size_t k, int64_t in, int64_t window) {
  const int64_t padded = c.padding[k].first + dilate(in, c.lhs_dilation[k]) + c.padding[k].second;
  const int64_t dw = dilate(window, c.rhs_dilation[k]);
  if (padded <= 0 || dw > padded) return 0;
  return (padded - dw) / c.window_strides[k] + 1;
}

bool is_permutation_of_rank(const Dims& d, size_t rank) {
  if (d.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t x : d) {
    if (x < 0 || x >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(x)]) return false;
    seen[static_cast<size_t>(x)] = true;
  }
  return true;
}

// The result type, checking everything (shared by infer and the public op's messages).
Type infer_type(const Type& l, const Type& r, const ConvParams& c) {
  auto fail = [&](const std::string& what) {
    throw TypeError(kOp + ": lhs " + l.str() + ", rhs " + r.str() + ": " + what);
  };
  const ConvDimensionNumbers& d = c.dims;
  if (l.dtype != r.dtype) fail("operands must have the same dtype");
  if (l.dtype == DType::bool_) fail("bool operands are not numeric (convert with astype)");
  if (c.preferred_element_type) {
    const DType p = *c.preferred_element_type, in = l.dtype;
    const bool ok = (is_floating(p) && is_floating(in) && dtype_size(p) >= dtype_size(in)) ||
                    (is_integer(p) && is_integer(in) && is_unsigned(p) == is_unsigned(in) &&
                     dtype_size(p) >= dtype_size(in));
    if (!ok)
      fail("preferred_element_type " + std::string(dtype_name(p)) + " is not a wider type of " +
           std::string(dtype_name(in)) + "'s kind (expected e.g. f32 from bf16, i32 from i8)");
  }
  const size_t S = c.num_spatial();
  if (l.shape.size() != S + 2 || r.shape.size() != S + 2)
    fail("window_strides has " + std::to_string(S) +
         " entries (one per spatial dim), so both operands need rank " + std::to_string(S + 2));
  auto sized = [&](const char* name, size_t n) {
    if (n != S)
      fail(std::string(name) + " has " + std::to_string(n) + " entries, expected " +
           std::to_string(S) + " (one per spatial dim)");
  };
  sized("padding", c.padding.size());
  sized("lhs_dilation", c.lhs_dilation.size());
  sized("rhs_dilation", c.rhs_dilation.size());
  sized("window_reversal", c.window_reversal.size());
  for (size_t k = 0; k < S; ++k) {
    if (c.window_strides[k] < 1)
      fail("window_strides " + shape_str(c.window_strides) + " must be positive");
    if (c.lhs_dilation[k] < 1)
      fail("lhs_dilation " + shape_str(c.lhs_dilation) + " must be positive");
    if (c.rhs_dilation[k] < 1)
      fail("rhs_dilation " + shape_str(c.rhs_dilation) + " must be positive");
    if (c.window_reversal[k] != 0 && c.window_reversal[k] != 1)
      fail("window_reversal " + shape_str(c.window_reversal) + " must hold 0 or 1");
  }
  const Dims ls = spec(d.lhs_batch, d.lhs_feature, d.lhs_spatial),
             rs = spec(d.rhs_out_feature, d.rhs_in_feature, d.rhs_spatial),
             os = spec(d.out_batch, d.out_feature, d.out_spatial);
  if (!is_permutation_of_rank(ls, S + 2))
    fail("dimension numbers: lhs [batch, feature, spatial...] " + shape_str(ls) +
         " must name each dim of lhs once");
  if (!is_permutation_of_rank(rs, S + 2))
    fail("dimension numbers: rhs [out feature, in feature, spatial...] " + shape_str(rs) +
         " must name each dim of rhs once");
  if (!is_permutation_of_rank(os, S + 2))
    fail("dimension numbers: output [batch, feature, spatial...] " + shape_str(os) +
         " must name each dim of a rank-" + std::to_string(S + 2) + " result once");
  const int64_t G = c.feature_group_count, B = c.batch_group_count;
  if (G < 1 || B < 1)
    fail("feature_group_count " + std::to_string(G) + " and batch_group_count " +
         std::to_string(B) + " must be positive");
  if (G > 1 && B > 1)
    fail("feature_group_count " + std::to_string(G) + " and batch_group_count " +
         std::to_string(B) + ": at most one of them may exceed 1");
  const int64_t N = at(l.shape, d.lhs_batch), C = at(l.shape, d.lhs_feature),
                O = at(r.shape, d.rhs_out_feature), I = at(r.shape, d.rhs_in_feature);
  if (C % G != 0)
    fail("input features " + std::to_string(C) + " (lhs dim " + std::to_string(d.lhs_feature) +
         ") are not divisible by feature_group_count " + std::to_string(G));
  if (I * G != C)
    fail("kernel input features " + std::to_string(I) + " (rhs dim " +
         std::to_string(d.rhs_in_feature) + ") must be input features " + std::to_string(C) +
         " / feature_group_count " + std::to_string(G));
  if (O % G != 0)
    fail("kernel output features " + std::to_string(O) + " (rhs dim " +
         std::to_string(d.rhs_out_feature) + ") are not divisible by feature_group_count " +
         std::to_string(G));
  if (N % B != 0)
    fail("batch " + std::to_string(N) + " (lhs dim " + std::to_string(d.lhs_batch) +
         ") is not divisible by batch_group_count " + std::to_string(B));
  if (O % B != 0)
    fail("kernel output features " + std::to_string(O) + " (rhs dim " +
         std::to_string(d.rhs_out_feature) + ") are not divisible by batch_group_count " +
         std::to_string(B));
  Shape out(S + 2);
  out[static_cast<size_t>(d.out_batch)] = N / B;
  out[static_cast<size_t>(d.out_feature)] = O;
  for (size_t k = 0; k < S; ++k)
    out[static_cast<size_t>(d.out_spatial[k])] =
        windows(c, k, at(l.shape, d.lhs_spatial[k]), at(r.shape, d.rhs_spatial[k]));
  return Type(c.preferred_element_type.value_or(l.dtype), out, l.placement);
}

// ---- the reference loop -------------------------------------------------------------------

template <class Acc>
std::vector<Acc> to_acc(const Array& a) {
  std::vector<Acc> out(static_cast<size_t>(a.size()));
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_floating_point_v<Acc>)
        out[i] = static_cast<Acc>(src[i]);
      else if constexpr (std::is_signed_v<T>)
        out[i] = static_cast<Acc>(static_cast<int64_t>(src[i]));  // sign-extended, mod 2^64
      else
        out[i] = static_cast<Acc>(src[i]);
    }
  });
  return out;
}

// Every output element as one sum over (input feature, window position) in that order,
// accumulated in Acc: double for floats, uint64 for integers (wrapping, then truncated to the
// result's width, which is arithmetic in the result type).
template <class Acc>
std::vector<Acc> conv_loop(const Array& L, const Array& R, const Shape& os, const ConvParams& c) {
  const ConvDimensionNumbers& d = c.dims;
  const size_t S = c.num_spatial();
  const std::vector<Acc> l = to_acc<Acc>(L), r = to_acc<Acc>(R);
  const std::vector<int64_t> lst = strides_of(L.shape()), rst = strides_of(R.shape());
  const int64_t O = at(R.shape(), d.rhs_out_feature), I = at(R.shape(), d.rhs_in_feature);
  const int64_t G = c.feature_group_count, B = c.batch_group_count;
  const int64_t Ob = at(os, d.out_batch);
  Shape K(S), X(S);
  int64_t window = 1;
  for (size_t k = 0; k < S; ++k) {
    K[k] = at(R.shape(), d.rhs_spatial[k]);
    X[k] = at(L.shape(), d.lhs_spatial[k]);
    window *= K[k];
  }
  std::vector<Acc> out(static_cast<size_t>(num_elements(os)), Acc{0});
  std::vector<int64_t> idx(os.size(), 0), w(S, 0);
  for (size_t flat = 0; flat < out.size(); ++flat) {
    const int64_t n = idx[static_cast<size_t>(d.out_batch)],
                  f = idx[static_cast<size_t>(d.out_feature)];
    const int64_t fg = f / (O / G), bg = f / (O / B);
    const int64_t lbase = (bg * Ob + n) * lst[static_cast<size_t>(d.lhs_batch)];
    Acc acc{0};
    for (int64_t i = 0; i < I; ++i) {
      const int64_t lb = lbase + (fg * I + i) * lst[static_cast<size_t>(d.lhs_feature)];
      const int64_t rb = f * rst[static_cast<size_t>(d.rhs_out_feature)] +
                         i * rst[static_cast<size_t>(d.rhs_in_feature)];
      std::fill(w.begin(), w.end(), 0);
      for (int64_t wi = 0; wi < window; ++wi) {
        bool inside = true;
        int64_t lo = lb, ro = rb;
        for (size_t k = 0; k < S && inside; ++k) {
          const int64_t y = idx[static_cast<size_t>(d.out_spatial[k])];
          int64_t p = y * c.window_strides[k] + w[k] * c.rhs_dilation[k] - c.padding[k].first;
          if (p < 0 || p % c.lhs_dilation[k] != 0) {
            inside = false;
            break;
          }
          p /= c.lhs_dilation[k];
          if (p >= X[k]) {
            inside = false;
            break;
          }
          lo += p * lst[static_cast<size_t>(d.lhs_spatial[k])];
          const int64_t kk = c.window_reversal[k] ? K[k] - 1 - w[k] : w[k];
          ro += kk * rst[static_cast<size_t>(d.rhs_spatial[k])];
        }
        if (inside) acc += l[static_cast<size_t>(lo)] * r[static_cast<size_t>(ro)];
        for (size_t k = S; k-- > 0;)
          if (++w[k] < K[k])
            break;
          else
            w[k] = 0;
      }
    }
    out[flat] = acc;
    for (size_t k = os.size(); k-- > 0;)
      if (++idx[k] < os[k])
        break;
      else
        idx[k] = 0;
  }
  return out;
}

// ---- rules ----------------------------------------------------------------------------------

Value emit_conv(const Value& lhs, const Value& rhs, const ConvParams& c) {
  return emit1(prims::conv_general_dilated(), {lhs, rhs}, c.to_params());
}

// Axis `src` (of size a * b) as axes src (a) and src + 1 (b): JAX's _reshape_axis_out_of.
Value split_axis(const Value& x, int64_t src, int64_t a) {
  Shape s = x.shape();
  const int64_t n = at(s, src);
  s[static_cast<size_t>(src)] = a;
  s.insert(s.begin() + src + 1, n / a);
  return reshape(x, s);
}

// Axis `src` merged, as the major part, into axis `dst` (numbered with src removed): JAX's
// _reshape_axis_into.
Value merge_axis_into(const Value& x, int64_t src, int64_t dst) {
  Dims perm;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (d != src) perm.push_back(d);
  perm.insert(perm.begin() + dst, src);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  const Value y = identity ? x : transpose(x, perm);
  Shape s = x.shape();
  const int64_t n = at(s, src);
  s.erase(s.begin() + src);
  s[static_cast<size_t>(dst)] *= n;
  return reshape(y, s);
}

// The cotangent of lhs: g convolved with the kernel flipped (the window_reversal flags
// inverted) and its feature dims swapped, the forward strides as lhs dilation.
Value transpose_lhs(const Value& g, const Value& lhs, const Value& rhs, const ConvParams& c) {
  const ConvDimensionNumbers& d = c.dims;
  const int64_t G = c.feature_group_count, B = c.batch_group_count;
  if (num_elements(g.shape()) == 0) return zeros_like(lhs);
  Value w = rhs;
  const int64_t groups = std::max(G, B);
  if (groups > 1)
    w = merge_axis_into(split_axis(rhs, d.rhs_out_feature, groups), d.rhs_out_feature,
                        d.rhs_in_feature);
  ConvParams t;
  t.dims = {d.out_batch,   d.out_feature, d.out_spatial, d.rhs_in_feature, d.rhs_out_feature,
            d.rhs_spatial, d.lhs_batch,   d.lhs_feature, d.lhs_spatial};
  t.window_strides = c.lhs_dilation;
  t.lhs_dilation = c.window_strides;
  t.rhs_dilation = c.rhs_dilation;
  t.feature_group_count = groups;
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    const int64_t ld = dilate(at(lhs.shape(), d.lhs_spatial[k]), c.lhs_dilation[k]);
    const int64_t rd = dilate(at(rhs.shape(), d.rhs_spatial[k]), c.rhs_dilation[k]);
    const int64_t od = dilate(at(g.shape(), d.out_spatial[k]), c.window_strides[k]);
    const int64_t before = rd - c.padding[k].first - 1;
    t.padding.emplace_back(before, ld + rd - 1 - od - before);
    t.window_reversal.push_back(1 - c.window_reversal[k]);
  }
  Value out = emit_conv(g, w, t);
  if (B > 1) out = merge_axis_into(split_axis(out, d.lhs_feature, B), d.lhs_feature, d.lhs_batch);
  return out;
}

// The cotangent of rhs: lhs convolved with g (batch and feature dims swapped on both), the
// forward strides as the window's dilation; flipped back where the forward pass flipped.
Value transpose_rhs(const Value& g, const Value& lhs, const Value& rhs, const ConvParams& c) {
  const ConvDimensionNumbers& d = c.dims;
  if (num_elements(g.shape()) == 0) return zeros_like(rhs);
  ConvParams t;
  t.dims = {d.lhs_feature, d.lhs_batch,      d.lhs_spatial,     d.out_feature, d.out_batch,
            d.out_spatial, d.rhs_in_feature, d.rhs_out_feature, d.rhs_spatial};
  t.window_strides = c.rhs_dilation;
  t.lhs_dilation = c.lhs_dilation;
  t.rhs_dilation = c.window_strides;
  if (c.batch_group_count > 1) t.feature_group_count = c.batch_group_count;
  if (c.feature_group_count > 1) t.batch_group_count = c.feature_group_count;
  Dims flipped;
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    const int64_t ld = dilate(at(lhs.shape(), d.lhs_spatial[k]), c.lhs_dilation[k]);
    const int64_t rd = dilate(at(rhs.shape(), d.rhs_spatial[k]), c.rhs_dilation[k]);
    const int64_t od = dilate(at(g.shape(), d.out_spatial[k]), c.window_strides[k]);
    const int64_t lo = c.padding[k].first;
    t.padding.emplace_back(lo, (od - ld) + (rd - lo - 1));
    t.window_reversal.push_back(0);
    if (c.window_reversal[k]) flipped.push_back(d.rhs_spatial[k]);
  }
  return reverse(emit_conv(lhs, g, t), flipped);
}

class ConvPrim : public Primitive {
 public:
  ConvPrim() : Primitive(kOp) {}

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& params) const override {
    check_arity(name(), ins, 2);
    ConvParams c;
    try {
      c = ConvParams::of(params);
    } catch (const TypeError& e) {  // params that cannot describe these operands: name them
      throw TypeError(std::string(e.what()) + " (operands " + ins[0].str() + " and " +
                      ins[1].str() + ")");
    }
    return {infer_type(ins[0], ins[1], c)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& params) const override {
    const ConvParams c = ConvParams::of(params);
    const Type t =
        infer_type(Type(ins[0].dtype(), ins[0].shape()), Type(ins[1].dtype(), ins[1].shape()), c);
    Array out(t.dtype, t.shape);
    auto write = [&](const auto& acc) {
      dispatch_dtype(t.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* o = out.data<T>();
        for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i]);
      });
    };
    if (is_floating(t.dtype))
      write(conv_loop<double>(ins[0], ins[1], t.shape, c));
    else
      write(conv_loop<uint64_t>(ins[0], ins[1], t.shape, c));
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values&,
                  const Params& params) const override {
    return bilinear_jvp(*this, primals, tangents, params);
  }

  MaybeValues vjp(const Values& primals, const Values&, const MaybeValues& cotangents,
                  const Params& params) const override {
    const Value &l = primals[0], &r = primals[1];
    if (!cotangents[0] || !is_floating(l.dtype())) return {std::nullopt, std::nullopt};
    ConvParams c = ConvParams::of(params);
    // With a wider result (f32 from bf16) the cotangent meets the other operand in the
    // operands' type, as JAX's transposes do.
    const Value g = c.preferred_element_type ? astype(*cotangents[0], l.dtype()) : *cotangents[0];
    c.preferred_element_type.reset();
    return {transpose_lhs(g, l, r, c), transpose_rhs(g, l, r, c)};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& params) const override {
    const Batched &l = ins[0], &r = ins[1];
    if (!l.batched && !r.batched) return {{emit1(*this, {l.value, r.value}, params), false}};
    ConvParams c = ConvParams::of(params);
    const ConvDimensionNumbers& d = c.dims;
    const int64_t n = l.batched ? l.value.shape()[0] : r.value.shape()[0];
    if (l.batched && r.batched) {
      Value nl;
      if (c.batch_group_count > 1) {
        nl = merge_axis_into(l.value, 0, d.lhs_batch);
        c.batch_group_count *= n;
      } else {
        nl = merge_axis_into(l.value, 0, d.lhs_feature);
        c.feature_group_count *= n;
      }
      const Value nr = merge_axis_into(r.value, 0, d.rhs_out_feature);
      const Value out = split_axis(emit_conv(nl, nr, c), d.out_feature, n);
      return {{move_axis(out, d.out_feature, 0), true}};
    }
    if (l.batched) {
      Value nl;
      if (c.batch_group_count == 1) {
        nl = merge_axis_into(l.value, 0, d.lhs_batch);
      } else {  // the batch groups stay outermost in the batch dim
        const int64_t s = d.lhs_batch;
        nl = split_axis(l.value, s + 1, c.batch_group_count);
        nl = merge_axis_into(merge_axis_into(nl, 0, s + 1), s, s);
      }
      const Value out = split_axis(emit_conv(nl, r.value, c), d.out_batch, n);
      return {{move_axis(out, d.out_batch, 0), true}};
    }
    const int64_t f = d.out_feature;
    if (c.feature_group_count == 1 && c.batch_group_count == 1) {
      const Value nr = merge_axis_into(r.value, 0, d.rhs_out_feature);
      return {{move_axis(split_axis(emit_conv(l.value, nr, c), f, n), f, 0), true}};
    }
    // Groups stay outermost in the kernel's output features: [groups, batch, features/groups].
    const int64_t groups = std::max(c.feature_group_count, c.batch_group_count);
    const int64_t s = d.rhs_out_feature;
    Value nr = split_axis(r.value, s + 1, groups);
    nr = merge_axis_into(merge_axis_into(nr, 0, s + 1), s, s);
    Value out = split_axis(split_axis(emit_conv(l.value, nr, c), f, groups), f + 1, n);
    out = merge_axis_into(out, f, f + 1);
    return {{move_axis(out, f, 0), true}};
  }

  void lower(StableHloEmitter& em, const Params& params) const override {
    const ConvParams c = ConvParams::of(params);
    const ConvDimensionNumbers& d = c.dims;
    const size_t S = c.num_spatial();
    auto labels = [&](int64_t a, const char* la, int64_t b, const char* lb, const Dims& sp) {
      std::vector<std::string> v(S + 2);
      v[static_cast<size_t>(a)] = la;
      v[static_cast<size_t>(b)] = lb;
      for (size_t k = 0; k < S; ++k) v[static_cast<size_t>(sp[k])] = std::to_string(k);
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
      return s + "]";
    };
    const std::string dims =
        "#stablehlo.conv<" + labels(d.lhs_batch, "b", d.lhs_feature, "f", d.lhs_spatial) + "x" +
        labels(d.rhs_out_feature, "o", d.rhs_in_feature, "i", d.rhs_spatial) + "->" +
        labels(d.out_batch, "b", d.out_feature, "f", d.out_spatial) + ">";
    std::string reversal = "array<i1";
    for (size_t k = 0; k < S; ++k)
      reversal += (k ? ", " : ": ") + std::string(c.window_reversal[k] ? "true" : "false");
    reversal += ">";
    MlirAttributes attrs{
        {"batch_group_count", std::to_string(c.batch_group_count) + " : i64"},
        {"dimension_numbers", dims},
        {"feature_group_count", std::to_string(c.feature_group_count) + " : i64"},
        {"lhs_dilation", mlir_i64_array(c.lhs_dilation)},
    };
    if (S > 0) {
      std::string pad = "dense<[";
      for (size_t k = 0; k < S; ++k)
        pad += (k ? ", [" : "[") + std::to_string(c.padding[k].first) + ", " +
               std::to_string(c.padding[k].second) + "]";
      attrs.emplace_back("padding", pad + "]> : tensor<" + std::to_string(S) + "x2xi64>");
    }
    attrs.emplace_back("rhs_dilation", mlir_i64_array(c.rhs_dilation));
    attrs.emplace_back("window_reversal", reversal);
    attrs.emplace_back("window_strides", mlir_i64_array(c.window_strides));
    em.set_results({em.emit1("stablehlo.convolution", {em.operand(0), em.operand(1)}, attrs,
                             em.result_type(0))});
  }
};

// Empty lists of the public op are the defaults; spatial dims default to the remaining dims.
ConvParams normalised(ConvParams c, int64_t rank) {
  if (rank < 2)
    throw TypeError(kOp + ": operands of rank " + std::to_string(rank) +
                    " have no batch and feature dims (expected rank >= 2)");
  const size_t S = static_cast<size_t>(rank - 2);
  ConvDimensionNumbers& d = c.dims;
  if (d.lhs_spatial.empty() && d.rhs_spatial.empty() && d.out_spatial.empty()) {
    auto rest = [&](int64_t a, int64_t b) {
      Dims out;
      for (int64_t x = 0; x < rank; ++x)
        if (x != a && x != b) out.push_back(x);
      return out;
    };
    d.lhs_spatial = rest(d.lhs_batch, d.lhs_feature);
    d.rhs_spatial = rest(d.rhs_out_feature, d.rhs_in_feature);
    d.out_spatial = rest(d.out_batch, d.out_feature);
  }
  auto ones = [&](Dims& v) {
    if (v.empty()) v.assign(S, 1);
  };
  ones(c.window_strides);
  ones(c.lhs_dilation);
  ones(c.rhs_dilation);
  if (c.padding.empty()) c.padding.assign(S, {0, 0});
  if (c.window_reversal.empty()) c.window_reversal.assign(S, 0);
  return c;
}

}  // namespace

// ---- the typed view ---------------------------------------------------------------------------

ConvParams ConvParams::of(const Params& p) {
  param_view::only_keys(
      p, kOp,
      {key::window_strides, key::padding_low, key::padding_high, key::lhs_dilation,
       key::rhs_dilation, key::window_reversal, key::lhs_dims, key::rhs_dims, key::out_dims,
       key::feature_group_count, key::batch_group_count, key::preferred_element_type});
  ConvParams c;
  c.window_strides = p.get_ints(key::window_strides, kOp);
  const size_t S = c.window_strides.size();
  const Dims& lo = p.get_ints(key::padding_low, kOp);
  const Dims& hi = p.get_ints(key::padding_high, kOp);
  if (lo.size() != hi.size())
    throw TypeError(kOp + ": padding_low " + shape_str(lo) + " and padding_high " + shape_str(hi) +
                    " must have one entry per spatial dim each");
  for (size_t k = 0; k < lo.size(); ++k) c.padding.emplace_back(lo[k], hi[k]);
  c.lhs_dilation = p.get_ints(key::lhs_dilation, kOp);
  c.rhs_dilation = p.get_ints(key::rhs_dilation, kOp);
  c.window_reversal = p.get_ints(key::window_reversal, kOp);
  auto read_dims = [&](const char* k, int64_t& a, int64_t& b, Dims& sp) {
    const Dims& v = p.get_ints(k, kOp);
    if (v.size() != S + 2)
      throw TypeError(kOp + ": " + k + " " + shape_str(v) + " must have " + std::to_string(S + 2) +
                      " entries (two, then one per spatial dim of window_strides)");
    a = v[0];
    b = v[1];
    sp.assign(v.begin() + 2, v.end());
  };
  read_dims(key::lhs_dims, c.dims.lhs_batch, c.dims.lhs_feature, c.dims.lhs_spatial);
  read_dims(key::rhs_dims, c.dims.rhs_out_feature, c.dims.rhs_in_feature, c.dims.rhs_spatial);
  read_dims(key::out_dims, c.dims.out_batch, c.dims.out_feature, c.dims.out_spatial);
  c.feature_group_count = p.get_int(key::feature_group_count, kOp);
  c.batch_group_count = p.get_int(key::batch_group_count, kOp);
  if (p.has(key::preferred_element_type))
    c.preferred_element_type = p.get_dtype(key::preferred_element_type, kOp);
  return c;
}

ConvParams ConvParams::of(const Eqn& e) {
  return of(param_view::params_of(e, prims::conv_general_dilated()));
}

Params ConvParams::to_params() const {
  Dims lo, hi;
  for (const auto& [a, b] : padding) {
    lo.push_back(a);
    hi.push_back(b);
  }
  const ConvDimensionNumbers& d = dims;
  Params p{{key::window_strides, window_strides},
           {key::padding_low, lo},
           {key::padding_high, hi},
           {key::lhs_dilation, lhs_dilation},
           {key::rhs_dilation, rhs_dilation},
           {key::window_reversal, window_reversal},
           {key::lhs_dims, spec(d.lhs_batch, d.lhs_feature, d.lhs_spatial)},
           {key::rhs_dims, spec(d.rhs_out_feature, d.rhs_in_feature, d.rhs_spatial)},
           {key::out_dims, spec(d.out_batch, d.out_feature, d.out_spatial)},
           {key::feature_group_count, feature_group_count},
           {key::batch_group_count, batch_group_count}};
  if (preferred_element_type) p.set(key::preferred_element_type, *preferred_element_type);
  return p;
}

namespace prims {
const Primitive& conv_general_dilated() {
  static const ConvPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(convolution) { registry.add(prims::conv_general_dilated()); }

// ---- public ops ---------------------------------------------------------------------------------

ConvDimensionNumbers ConvDimensionNumbers::channels_last(int64_t num_spatial) {
  if (num_spatial < 0)
    throw TypeError("ConvDimensionNumbers::channels_last: " + std::to_string(num_spatial) +
                    " spatial dims (expected >= 0)");
  ConvDimensionNumbers d;
  d.lhs_batch = d.out_batch = 0;
  d.lhs_feature = d.out_feature = num_spatial + 1;
  d.rhs_in_feature = num_spatial;
  d.rhs_out_feature = num_spatial + 1;
  for (int64_t k = 0; k < num_spatial; ++k) {
    d.lhs_spatial.push_back(k + 1);
    d.out_spatial.push_back(k + 1);
    d.rhs_spatial.push_back(k);
  }
  return d;
}

DRX_PUBLIC_OP("padtype_to_pads",
              "(in: vector<int64>, window: vector<int64>, strides: vector<int64>, padding: "
              "string) -> vector<pair<int64, int64>>",
              "JAX's padtype_to_pads: the (low, high) padding of SAME, SAME_LOWER or VALID.");
std::vector<std::pair<int64_t, int64_t>> padtype_to_pads(const std::vector<int64_t>& in,
                                                         const std::vector<int64_t>& window,
                                                         const std::vector<int64_t>& strides,
                                                         const std::string& padding) {
  if (window.size() != in.size() || strides.size() != in.size())
    throw TypeError("padtype_to_pads: input sizes " + shape_str(in) + ", window " +
                    shape_str(window) + " and strides " + shape_str(strides) +
                    " need one entry per spatial dim each");
  std::vector<std::pair<int64_t, int64_t>> pads;
  if (padding == "VALID") return std::vector<std::pair<int64_t, int64_t>>(in.size(), {0, 0});
  if (padding != "SAME" && padding != "SAME_LOWER")
    throw TypeError("padtype_to_pads: unknown padding '" + padding +
                    "' (expected SAME, SAME_LOWER or VALID)");
  for (size_t k = 0; k < in.size(); ++k) {
    if (strides[k] < 1)
      throw TypeError("padtype_to_pads: strides " + shape_str(strides) + " must be positive");
    const int64_t out = (in[k] + strides[k] - 1) / strides[k];
    const int64_t total = std::max<int64_t>((out - 1) * strides[k] + window[k] - in[k], 0);
    if (padding == "SAME")
      pads.emplace_back(total / 2, total - total / 2);
    else
      pads.emplace_back(total - total / 2, total / 2);
  }
  return pads;
}

DRX_PUBLIC_OP("conv_general_dilated", "(lhs: Value, rhs: Value, params: ConvParams) -> Value",
              "StableHLO's convolution: strides, padding, lhs/rhs dilation, window reversal, "
              "dimension numbers, feature and batch groups, a wider result type.");
Value conv_general_dilated(const Value& lhs, const Value& rhs, const ConvParams& params) {
  ConvParams c = normalised(params, lhs.ndim());
  if (c.preferred_element_type == lhs.dtype()) c.preferred_element_type.reset();
  return emit_conv(lhs, rhs, c);
}

DRX_PUBLIC_OP("conv",
              "(lhs: Value, rhs: Value, strides: vector<int64>, padding: string, "
              "feature_group_count: int64 = 1) -> Value | (lhs: Value, rhs: Value, strides: "
              "vector<int64>, padding: vector<pair<int64, int64>>, feature_group_count: int64 = "
              "1) -> Value",
              "lax.conv: NCHW input, OIHW kernel, NCHW result; padding SAME, SAME_LOWER, VALID "
              "or (low, high) pairs.");
Value conv(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
           const std::string& padding, int64_t feature_group_count) {
  if (lhs.ndim() < 2 || rhs.ndim() != lhs.ndim())
    throw TypeError("conv: lhs " + lhs.type().str() + " and rhs " + rhs.type().str() +
                    " must be [N, C, spatial...] and [O, I, window...] of one rank");
  const size_t S = static_cast<size_t>(lhs.ndim() - 2);
  std::vector<int64_t> in, window, st = strides.empty() ? std::vector<int64_t>(S, 1) : strides;
  for (size_t k = 0; k < S; ++k) {
    in.push_back(lhs.shape()[k + 2]);
    window.push_back(rhs.shape()[k + 2]);
  }
  if (st.size() != S)
    throw TypeError("conv: strides " + shape_str(st) + " need one entry per spatial dim of " +
                    lhs.type().str());
  return conv(lhs, rhs, st, padtype_to_pads(in, window, st, padding), feature_group_count);
}

Value conv(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
           const std::vector<std::pair<int64_t, int64_t>>& padding, int64_t feature_group_count) {
  ConvParams c;
  c.window_strides = strides;
  c.padding = padding;
  c.feature_group_count = feature_group_count;
  return conv_general_dilated(lhs, rhs, c);
}

}  // namespace drx
