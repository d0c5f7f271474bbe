// dot_general (contraction with batch dims) and matmul on top of it.
#include <algorithm>
#include <numeric>
#include <string>

#include "drx/array/half.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/bilinear.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_linalg);

namespace drx {
namespace {

using Dims = std::vector<int64_t>;

Dims concat(std::initializer_list<const Dims*> parts) {
  Dims out;
  for (const Dims* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Dims of a rank-`ndim` operand that are neither batch nor contracting, in order.
Dims free_dims(int64_t ndim, const Dims& contracting, const Dims& batch) {
  Dims out;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(contracting.begin(), contracting.end(), d) == contracting.end() &&
        std::find(batch.begin(), batch.end(), d) == batch.end())
      out.push_back(d);
  return out;
}

Dims argsort(const Dims& v) {
  Dims idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return v[static_cast<size_t>(a)] < v[static_cast<size_t>(b)];
  });
  return idx;
}

Value emit_dot(const Value& lhs, const Value& rhs, const DotGeneralParams& d) {
  const Primitive& p = prims::dot_general();
  return emit1(p, {lhs, rhs}, d.to_params());
}

// Moves axis `from` of x to the front.
Value move_to_front(const Value& x, int64_t from) {
  if (from == 0) return x;
  Dims perm{from};
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (d != from) perm.push_back(d);
  return transpose(x, perm);
}

// x's elements with its dims visited in `order` (a permutation), as Acc.
template <class T, class Acc>
std::vector<Acc> gather_as(const Array& x, const Dims& order) {
  const size_t nd = order.size();
  std::vector<int64_t> st = strides_of(x.shape());
  Shape shape(nd);
  std::vector<int64_t> step(nd);
  for (size_t i = 0; i < nd; ++i) {
    shape[i] = x.shape()[static_cast<size_t>(order[i])];
    step[i] = st[static_cast<size_t>(order[i])];
  }
  std::vector<Acc> out(static_cast<size_t>(x.size()));
  const T* src = x.data<T>();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<Acc>(src[off]);
    for (size_t d = nd; d-- > 0;) {
      off += step[d];
      if (++idx[d] < shape[d]) break;
      off -= step[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

int64_t prod_dims(const Shape& s, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s[static_cast<size_t>(d)];
  return n;
}

class DotGeneralPrim : public Primitive {
 public:
  DotGeneralPrim() : Primitive("dot_general") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    auto list = [](const std::vector<int64_t>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    const DotGeneralParams d = DotGeneralParams::of(p);
    const std::string dims = "#stablehlo.dot<lhs_batching_dimensions = " + list(d.lhs_batch) +
                             ", rhs_batching_dimensions = " + list(d.rhs_batch) +
                             ", lhs_contracting_dimensions = " + list(d.lhs_contracting) +
                             ", rhs_contracting_dimensions = " + list(d.rhs_contracting) + ">";
    MlirAttributes attrs{{"dot_dimension_numbers", dims}};
    // A product of narrower operands with an f32 result states its algorithm, as JAX's
    // preferred_element_type with precision=DEFAULT does not: f32 accumulation.
    if (d.preferred_element_type) {
      const std::string in(dtype_info(em.operand_type(0).dtype).mlir_name);
      attrs.emplace_back("algorithm", "#stablehlo.dot_algorithm<lhs_precision_type = " + in +
                                          ", rhs_precision_type = " + in +
                                          ", accumulation_type = f32, lhs_component_count = 1, "
                                          "rhs_component_count = 1, num_primitive_operations = 1, "
                                          "allow_imprecise_accumulation = false>");
    }
    em.set_results({em.emit1("stablehlo.dot_general", {em.operand(0), em.operand(1)}, attrs,
                             em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& params) const override {
    if (ins.size() != 2)
      throw TypeError("dot_general: takes two operands, got " + std::to_string(ins.size()));
    const DotGeneralParams d = DotGeneralParams::of(params);
    const Type &l = ins[0], &r = ins[1];
    std::string both = "lhs " + l.str() + ", rhs " + r.str();
    auto fail = [&](const std::string& what) {
      throw TypeError("dot_general: " + both + " with contracting " + shape_str(d.lhs_contracting) +
                      "/" + shape_str(d.rhs_contracting) + ", batch " + shape_str(d.lhs_batch) +
                      "/" + shape_str(d.rhs_batch) + ": " + what);
    };
    if (l.dtype != r.dtype) fail("operands must have the same dtype");
    if (l.dtype == DType::bool_) fail("bool operands are not numeric (convert with astype)");
    if (d.preferred_element_type && !(is_half(l.dtype) && *d.preferred_element_type == DType::f32))
      fail("preferred_element_type " + std::string(dtype_name(*d.preferred_element_type)) +
           " is not supported for " + std::string(dtype_name(l.dtype)) +
           " operands (expected f32 from bf16 or f16 operands)");
    if (d.lhs_contracting.size() != d.rhs_contracting.size())
      fail("expected as many lhs as rhs contracting dims");
    if (d.lhs_batch.size() != d.rhs_batch.size()) fail("expected as many lhs as rhs batch dims");
    auto check_side = [&](const Type& t, const Dims& c, const Dims& b, const char* side) {
      Dims all = concat({&b, &c});
      for (int64_t x : all)
        if (x < 0 || x >= t.ndim())
          fail(std::string(side) + " dim " + std::to_string(x) + " is out of range for rank " +
               std::to_string(t.ndim()));
      std::sort(all.begin(), all.end());
      if (std::adjacent_find(all.begin(), all.end()) != all.end())
        fail(std::string(side) + " names a dim twice (expected distinct dims)");
    };
    check_side(l, d.lhs_contracting, d.lhs_batch, "lhs");
    check_side(r, d.rhs_contracting, d.rhs_batch, "rhs");
    auto check_pairs = [&](const Dims& a, const Dims& b, const char* what) {
      for (size_t i = 0; i < a.size(); ++i) {
        int64_t sa = l.shape[static_cast<size_t>(a[i])], sb = r.shape[static_cast<size_t>(b[i])];
        if (sa != sb)
          fail(std::string(what) + " dim " + std::to_string(a[i]) + " of lhs has size " +
               std::to_string(sa) + " but " + what + " dim " + std::to_string(b[i]) +
               " of rhs has size " + std::to_string(sb) + " (expected equal sizes)");
      }
    };
    check_pairs(d.lhs_contracting, d.rhs_contracting, "contracting");
    check_pairs(d.lhs_batch, d.rhs_batch, "batch");
    Shape out;
    for (int64_t x : d.lhs_batch) out.push_back(l.shape[static_cast<size_t>(x)]);
    for (int64_t x : free_dims(l.ndim(), d.lhs_contracting, d.lhs_batch))
      out.push_back(l.shape[static_cast<size_t>(x)]);
    for (int64_t x : free_dims(r.ndim(), d.rhs_contracting, d.rhs_batch))
      out.push_back(r.shape[static_cast<size_t>(x)]);
    return {Type(d.preferred_element_type.value_or(l.dtype), out, l.placement)};
  }

  // Reference: both operands are gathered into [B, M, K] and [B, K, N] order
  // (so any dim arrangement is one loop nest), accumulated in double for
  // floats and uint64 for integers (where overflow wraps, as XLA does), and
  // rounded once.
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& params) const override {
    const DotGeneralParams d = DotGeneralParams::of(params);
    const Array &l = ins[0], &r = ins[1];
    Dims lf = free_dims(l.ndim(), d.lhs_contracting, d.lhs_batch),
         rf = free_dims(r.ndim(), d.rhs_contracting, d.rhs_batch);
    const int64_t B = prod_dims(l.shape(), d.lhs_batch), M = prod_dims(l.shape(), lf),
                  K = prod_dims(l.shape(), d.lhs_contracting), N = prod_dims(r.shape(), rf);
    Shape out_shape;
    for (int64_t x : d.lhs_batch) out_shape.push_back(l.shape()[static_cast<size_t>(x)]);
    for (int64_t x : lf) out_shape.push_back(l.shape()[static_cast<size_t>(x)]);
    for (int64_t x : rf) out_shape.push_back(r.shape()[static_cast<size_t>(x)]);
    Array out(l.dtype(), out_shape);
    dispatch_dtype(l.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
      std::vector<Acc> L = gather_as<T, Acc>(l, concat({&d.lhs_batch, &lf, &d.lhs_contracting}));
      std::vector<Acc> R = gather_as<T, Acc>(r, concat({&d.rhs_batch, &d.rhs_contracting, &rf}));
      std::vector<Acc> row(static_cast<size_t>(N));
      T* o = out.data<T>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < M; ++m) {
          std::fill(row.begin(), row.end(), Acc{0});
          const Acc* lrow = L.data() + (b * M + m) * K;
          for (int64_t k = 0; k < K; ++k) {
            const Acc a = lrow[k];
            const Acc* rrow = R.data() + (b * K + k) * N;
            for (int64_t n = 0; n < N; ++n) row[static_cast<size_t>(n)] += a * rrow[n];
          }
          T* orow = o + (b * M + m) * N;
          for (int64_t n = 0; n < N; ++n) orow[n] = static_cast<T>(row[static_cast<size_t>(n)]);
        }
    });
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values&,
                  const Params& params) const override {
    return bilinear_jvp(*this, primals, tangents, params);
  }

  // The transpose rules of JAX's dot_general: contract the cotangent with the
  // other operand over that operand's free dims, then permute the result into
  // the operand's layout.
  MaybeValues vjp(const Values& primals, const Values&, const MaybeValues& cotangents,
                  const Params& params) const override {
    const Value &l = primals[0], &r = primals[1];
    if (!cotangents[0] || !is_floating(l.dtype())) return {std::nullopt, std::nullopt};
    DotGeneralParams d = DotGeneralParams::of(params);
    // With an f32 result from bf16 operands the cotangent is f32: it meets the
    // other operand as a bf16 product, as in JAX, giving bf16 cotangents.
    const Value g = d.preferred_element_type ? astype(*cotangents[0], l.dtype()) : *cotangents[0];
    d.preferred_element_type.reset();
    return {transpose_lhs(g, l, r, d, false),
            transpose_lhs(
                g, r, l,
                DotGeneralParams{d.rhs_contracting, d.lhs_contracting, d.rhs_batch, d.lhs_batch},
                true)};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& params) const override {
    const Batched &l = ins[0], &r = ins[1];
    if (!l.batched && !r.batched) return {{emit1(*this, {l.value, r.value}, params), false}};
    const DotGeneralParams d = DotGeneralParams::of(params);
    auto shift = [](Dims v) {
      for (int64_t& x : v) ++x;
      return v;
    };
    if (l.batched && r.batched) {
      Dims lb = shift(d.lhs_batch), rb = shift(d.rhs_batch);
      lb.insert(lb.begin(), 0);
      rb.insert(rb.begin(), 0);
      return {{emit_dot(l.value, r.value,
                        DotGeneralParams{shift(d.lhs_contracting), shift(d.rhs_contracting), lb, rb,
                                         d.preferred_element_type}),
               true}};
    }
    // One side batched: its batch axis is its first free dim, so it lands right
    // after the batch dims (lhs) or after all lhs free dims (rhs).
    const int64_t nb = static_cast<int64_t>(d.lhs_batch.size());
    if (l.batched) {
      Value y =
          emit_dot(l.value, r.value,
                   DotGeneralParams{shift(d.lhs_contracting), d.rhs_contracting, shift(d.lhs_batch),
                                    d.rhs_batch, d.preferred_element_type});
      return {{move_to_front(y, nb), true}};
    }
    int64_t lfree = l.value.ndim() - nb - static_cast<int64_t>(d.lhs_contracting.size());
    Value y = emit_dot(l.value, r.value,
                       DotGeneralParams{d.lhs_contracting, shift(d.rhs_contracting), d.lhs_batch,
                                        shift(d.rhs_batch), d.preferred_element_type});
    return {{move_to_front(y, nb + lfree), true}};
  }

 private:
  // Cotangent of `x` in dot_general(x, y) (or of y in dot_general(y, x) when
  // `swapped`, in which case y's free dims come first in g).
  static Value transpose_lhs(const Value& g, const Value& x, const Value& y,
                             const DotGeneralParams& d, bool swapped) {
    const int64_t nb = static_cast<int64_t>(d.lhs_batch.size());
    Dims x_kept = free_dims(x.ndim(), d.lhs_contracting, d.lhs_batch),
         y_kept = free_dims(y.ndim(), d.rhs_contracting, d.rhs_batch);
    const int64_t nx = static_cast<int64_t>(x_kept.size()),
                  ny = static_cast<int64_t>(y_kept.size());
    Dims g_batch(static_cast<size_t>(nb)), g_y(static_cast<size_t>(ny));
    std::iota(g_batch.begin(), g_batch.end(), 0);
    std::iota(g_y.begin(), g_y.end(), swapped ? nb : nb + nx);
    // Result: [batch, x free, y's contracting dims in increasing order].
    Value z = emit_dot(g, y, DotGeneralParams{g_y, y_kept, g_batch, d.rhs_batch});
    Dims x_contract_by_y;
    for (int64_t i : argsort(d.rhs_contracting))
      x_contract_by_y.push_back(d.lhs_contracting[static_cast<size_t>(i)]);
    Dims src = concat({&d.lhs_batch, &x_kept, &x_contract_by_y});
    Dims perm = argsort(src);
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity = identity && perm[i] == static_cast<int64_t>(i);
    return identity ? z : transpose(z, perm);
  }
};

// The C++ name of a dtype constant, for suggestions: drx::f32, drx::bool_.
std::string dtype_constant(DType d) {
  return d == DType::bool_ ? "drx::bool_" : "drx::" + std::string(dtype_name(d));
}

// Checked before any dims so that a dtype mistake is reported as such, by the
// public op the user called, with the conversion that fixes it.
void check_dot_dtypes(const char* op, const Value& a, const Value& b, const char* a_name,
                      const char* b_name) {
  const Type &ta = a.type(), &tb = b.type();
  if (ta.dtype != tb.dtype)
    throw TypeError(std::string(op) + ": operands have different dtypes " + ta.str() + " and " +
                    tb.str() + "; convert one with drx::astype, e.g. the second to the first's: " +
                    "drx::astype(" + b_name + ", " + dtype_constant(ta.dtype) + ")");
  if (ta.dtype == DType::bool_)
    throw TypeError(std::string(op) + ": operands " + ta.str() + " and " + tb.str() +
                    " are bool, which is not numeric; convert them with drx::astype, e.g. " +
                    "drx::astype(" + a_name + ", drx::f32)");
}

// A preferred type equal to the operands' is no preference.
std::optional<DType> preferred(std::optional<DType> want, DType operands) {
  return want == operands ? std::nullopt : want;
}

Dims normalize_dims(Dims dims, int64_t ndim) {
  for (int64_t& d : dims)
    if (d < 0 && d + ndim >= 0) d += ndim;
  return dims;
}

}  // namespace

namespace prims {
const Primitive& dot_general() {
  static const DotGeneralPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(linalg) { registry.add(prims::dot_general()); }

DRX_PUBLIC_OP("dot_general", "(lhs: Value, rhs: Value, dims: DotDims) -> Value",
              "General dot product: batch dims, then lhs free dims, then rhs free dims.");
// Negative dims count from the end; the primitive checks everything else.
Value dot_general(const Value& lhs, const Value& rhs, const DotDims& dims) {
  check_dot_dtypes("dot_general", lhs, rhs, "lhs", "rhs");
  return emit_dot(lhs, rhs,
                  DotGeneralParams{normalize_dims(dims.lhs_contracting, lhs.ndim()),
                                   normalize_dims(dims.rhs_contracting, rhs.ndim()),
                                   normalize_dims(dims.lhs_batch, lhs.ndim()),
                                   normalize_dims(dims.rhs_batch, rhs.ndim()),
                                   preferred(dims.preferred_element_type, lhs.dtype())});
}

DRX_PUBLIC_OP("matmul",
              "(a: Value, b: Value) -> Value | "
              "(a: Value, b: Value, preferred_element_type: DType) -> Value",
              "Matrix product, batched over equal leading dims; a 1-D operand is a vector "
              "(numpy.matmul); preferred_element_type f32 gives bf16 operands an f32 result.");
// numpy.matmul semantics: the leading (batch) dims broadcast numpy-style via
// broadcast_to, then one dot_general with those dims as batch dims. A 1-D
// operand is a vector and its dim disappears from the result.
Value matmul(const Value& a, const Value& b) { return matmul(a, b, a.dtype()); }

Value matmul(const Value& a, const Value& b, DType preferred_element_type) {
  const std::optional<DType> p = preferred(preferred_element_type, a.dtype());
  auto fail = [&](const std::string& what) {
    throw TypeError("matmul: " + a.type().str() + " @ " + b.type().str() + ": " + what);
  };
  check_dot_dtypes("matmul", a, b, "a", "b");
  if (a.ndim() == 0 || b.ndim() == 0) fail("operands must be at least 1-D (use * for scalars)");
  const int64_t ka = a.shape().back();
  const int64_t kb = b.ndim() == 1 ? b.shape()[0] : b.shape()[static_cast<size_t>(b.ndim() - 2)];
  if (ka != kb)
    fail("a's last dim (" + std::to_string(ka) + ") differs from b's " +
         (b.ndim() == 1 ? "only" : "second-to-last") + " dim (" + std::to_string(kb) + ")");
  // With a vector operand the other operand's leading dims are just free dims.
  if (a.ndim() == 1) return dot_general(a, b, {{0}, {b.ndim() == 1 ? 0 : b.ndim() - 2}, {}, {}, p});
  if (b.ndim() == 1) return dot_general(a, b, {{a.ndim() - 1}, {0}, {}, {}, p});
  // A matrix b applies to every row of a: a's leading dims are free dims of one product (one
  // gemm over all of a's rows), not a batch over copies of b.
  if (b.ndim() == 2) return dot_general(a, b, {{a.ndim() - 1}, {0}, {}, {}, p});
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t x = i < batch.size() - ba.size() ? 1 : ba[i - (batch.size() - ba.size())];
    int64_t y = i < batch.size() - bb.size() ? 1 : bb[i - (batch.size() - bb.size())];
    if (x != y && x != 1 && y != 1)
      fail("leading dims " + shape_str(ba) + " and " + shape_str(bb) +
           " do not broadcast (expected equal sizes or 1)");
    batch[i] = x == 1 ? y : x;
  }
  auto expand = [&](const Value& v) {
    Shape want = batch;
    want.push_back(v.shape()[static_cast<size_t>(v.ndim() - 2)]);
    want.push_back(v.shape().back());
    return want == v.shape() ? v : broadcast_to(v, want);
  };
  Value ea = expand(a), eb = expand(b);
  const int64_t nb = static_cast<int64_t>(batch.size());
  Dims bdims(static_cast<size_t>(nb));
  std::iota(bdims.begin(), bdims.end(), 0);
  return dot_general(ea, eb, {{nb + 1}, {nb}, bdims, bdims, p});
}

}  // namespace drx
