// pad and reverse: data movement with StableHLO's semantics.
//
// pad[low, high, interior](x, v): interior[d] copies of v between neighbours
// along axis d, then low[d] / high[d] copies at the ends; negative low or high
// crop instead. reverse[dims](x) flips the listed axes. Both are linear in
// their data operands, so every rule is again a pad, a slice or a reverse.
#include <algorithm>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"
#include "drx/ops/strided_copy.h"

DRX_PUBLIC_OPS_FILE(ops_pad_reverse);

namespace drx {
namespace {

bool floating(const Value& v) { return is_floating(v.dtype()); }

int64_t padded_dim(int64_t n, int64_t lo, int64_t hi, int64_t in) {
  return lo + hi + n + std::max<int64_t>(n - 1, 0) * in;
}

class PadPrim : public Primitive {
 public:
  PadPrim() : Primitive("pad") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results({em.emit1("stablehlo.pad", {em.operand(0), em.operand(1)},
                             {{"edge_padding_low", mlir_i64_array(p.get_ints("low", name()))},
                              {"edge_padding_high", mlir_i64_array(p.get_ints("high", name()))},
                              {"interior_padding", mlir_i64_array(p.get_ints("interior", name()))}},
                             em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 2);
    const auto& lo = p.get_ints("low", name());
    const auto& hi = p.get_ints("high", name());
    const auto& in = p.get_ints("interior", name());
    const Type& x = ins[0];
    if (ins[1].dtype != x.dtype || !ins[1].shape.empty() || !ins[1].placement.empty())
      throw TypeError("pad: the padding value must be a scalar of the operand's dtype, got " +
                      types_str(ins));
    const size_t r = x.shape.size();
    if (lo.size() != r || hi.size() != r || in.size() != r)
      throw TypeError("pad: low " + shape_str(lo) + ", high " + shape_str(hi) + ", interior " +
                      shape_str(in) + " need one entry per axis of " + x.str());
    Shape out;
    for (size_t d = 0; d < r; ++d) {
      const int64_t n = padded_dim(x.shape[d], lo[d], hi[d], in[d]);
      if (in[d] < 0 || n < 0)
        throw TypeError("pad: axis " + std::to_string(d) + " of " + x.str() + ": interior " +
                        std::to_string(in[d]) + " must be >= 0 and the padded size " +
                        std::to_string(n) + " >= 0");
      out.push_back(n);
    }
    return {Type(x.dtype, out, x.placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const auto& lo = p.get_ints("low", name());
    const auto& in = p.get_ints("interior", name());
    const Array& x = ins[0];
    const Shape& xs = x.shape();
    Shape os;
    for (size_t d = 0; d < xs.size(); ++d)
      os.push_back(padded_dim(xs[d], lo[d], p.get_ints("high", name())[d], in[d]));
    Array out(x.dtype(), os);
    const std::vector<int64_t> ost = strides_of(os);
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      std::fill_n(out.data<T>(), out.size(), ins[1].data<T>()[0]);
      const T* src = x.data<T>();
      std::vector<int64_t> idx(xs.size(), 0);
      for (int64_t i = 0; i < x.size(); ++i) {
        int64_t at = 0;
        bool inside = true;
        for (size_t d = 0; d < xs.size(); ++d) {
          const int64_t pos = lo[d] + idx[d] * (in[d] + 1);
          inside = inside && pos >= 0 && pos < os[d];
          at += pos * ost[d];
        }
        if (inside) out.data<T>()[at] = src[i];
        for (size_t d = xs.size(); d-- > 0;)
          if (++idx[d] < xs[d])
            break;
          else
            idx[d] = 0;
      }
    });
    return {out};
  }

  MaybeValues jvp(const Values& x, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0] && !t[1]) return {std::nullopt};
    return {emit1(*this, {t[0] ? *t[0] : zeros_like(x[0]), t[1] ? *t[1] : zeros_like(x[1])}, p)};
  }

  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !floating(x[0])) return {std::nullopt, std::nullopt};
    const auto& lo = p.get_ints("low", name());
    const auto& hi = p.get_ints("high", name());
    const auto& in = p.get_ints("interior", name());
    const Shape xs = x[0].shape();
    // Undo the crops, pad each axis to n * (interior + 1), split it into
    // [n, interior + 1] and keep column 0: the positions x came from.
    std::vector<int64_t> restore_lo, restore_hi, zero(xs.size(), 0), starts, limits;
    Shape split, keep_start, keep_limit;
    for (size_t d = 0; d < xs.size(); ++d) {
      const int64_t s = in[d] + 1;
      restore_lo.push_back(std::max<int64_t>(0, -lo[d]));
      restore_hi.push_back(std::max<int64_t>(0, -hi[d]) + s - 1);
      starts.push_back(std::max<int64_t>(0, lo[d]));
      limits.push_back(starts.back() + xs[d] * s);
      split.push_back(xs[d]);
      split.push_back(s);
      keep_start.push_back(0), keep_start.push_back(0);
      keep_limit.push_back(xs[d]), keep_limit.push_back(1);
    }
    Value g = pad(*ct[0], fill({}, 0.0, ct[0]->dtype()), restore_lo, restore_hi, zero);
    g = reshape(slice(reshape(slice(g, starts, limits), split), keep_start, keep_limit), xs);
    MaybeValue pad_ct;
    if (floating(x[1])) pad_ct = sum(*ct[0]) - sum(g);
    return {g, pad_ct};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    auto with_batch = [&](const char* key) {
      std::vector<int64_t> v{0};
      const auto& rest = p.get_ints(key, name());
      v.insert(v.end(), rest.begin(), rest.end());
      return v;
    };
    if (!ins[0].batched && !ins[1].batched)
      return {{emit1(*this, {ins[0].value, ins[1].value}, p), false}};
    if (!ins[1].batched) {
      return {{pad(ins[0].value, ins[1].value, with_batch("low"), with_batch("high"),
                   with_batch("interior")),
               true}};
    }
    // A padding value per example: pad with 0, then add it where a mask of
    // the padded positions is 1 (exact: x + 0 and 0 + v).
    const Value& v = ins[1].value;  // [B]
    const int64_t batch = v.shape()[0];
    Value xb = ins[0].batched ? ins[0].value : broadcast_to(expand_dims(ins[0].value, 0), [&] {
      Shape s = ins[0].value.shape();
      s.insert(s.begin(), batch);
      return s;
    }());
    const auto lo = with_batch("low"), hi = with_batch("high"), in = with_batch("interior");
    Value padded = pad(xb, fill({}, 0.0, v.dtype()), lo, hi, in);
    Value mask = pad(zeros_like(xb), fill({}, 1.0, v.dtype()), lo, hi, in);
    Shape vs = padded.shape();
    std::vector<int64_t> dims{0};
    Value vb = broadcast_in_dim(v, vs, dims);
    return {{padded + mask * vb, true}};
  }
};

class ReversePrim : public Primitive {
 public:
  ReversePrim() : Primitive("reverse") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results({em.emit1("stablehlo.reverse", {em.operand(0)},
                             {{"dimensions", mlir_i64_array(p.get_ints("dims", name()))}},
                             em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const auto& dims = p.get_ints("dims", name());
    std::vector<bool> seen(ins[0].shape.size(), false);
    for (int64_t d : dims) {
      if (d < 0 || d >= ins[0].ndim() || seen[static_cast<size_t>(d)])
        throw TypeError("reverse: dims " + shape_str(dims) + " must be distinct axes of " +
                        ins[0].str());
      seen[static_cast<size_t>(d)] = true;
    }
    return {ins[0]};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    std::vector<int64_t> st = strides_of(ins[0].shape());
    int64_t offset = 0;
    for (int64_t d : p.get_ints("dims", name())) {
      const size_t k = static_cast<size_t>(d);
      if (ins[0].shape()[k] > 0) offset += (ins[0].shape()[k] - 1) * st[k];
      st[k] = -st[k];
    }
    return {detail::strided_copy(ins[0], ins[0].shape(), offset, st)};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {emit1(*this, {*t[0]}, p)};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !floating(x[0])) return {std::nullopt};
    return {emit1(*this, {*ct[0]}, p)};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    if (!ins[0].batched) return {{emit1(*this, {ins[0].value}, p), false}};
    std::vector<int64_t> dims;
    for (int64_t d : p.get_ints("dims", name())) dims.push_back(d + 1);
    return {{reverse(ins[0].value, dims), true}};
  }
};

}  // namespace

namespace prims {
const Primitive& pad() {
  static const PadPrim p;
  return p;
}
const Primitive& reverse() {
  static const ReversePrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(pad_reverse) {
  registry.add(prims::pad());
  registry.add(prims::reverse());
}

DRX_PUBLIC_OP(
    "pad",
    "(x: Value, value: Value, low: vector<int64>, high: vector<int64>, interior: vector<int64>) -> "
    "Value | (x: Value, value: double, low: vector<int64>, high: vector<int64>) -> Value",
    "StableHLO's pad: interior, low and high padding (negative: crop).");
Value pad(const Value& x, const Value& value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  return emit1(prims::pad(), {x, value},
               Params{{"low", low}, {"high", high}, {"interior", interior}});
}

Value pad(const Value& x, double value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high) {
  return pad(x, fill({}, value, x.dtype()), low, high, std::vector<int64_t>(low.size(), 0));
}

DRX_PUBLIC_OP("reverse", "(x: Value, dims: vector<int64>) -> Value",
              "x with the listed axes flipped.");
Value reverse(const Value& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> d;
  for (int64_t a : dims) d.push_back(a < 0 ? a + x.ndim() : a);
  if (d.empty()) return x;
  return emit1(prims::reverse(), {x}, Params{{"dims", d}});
}

}  // namespace drx
