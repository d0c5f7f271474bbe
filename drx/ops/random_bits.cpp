// The primitives under drx::random: threefry2x32, the counter-based block
// function of Salmon et al. 2011 (Random123) with 20 rounds, as JAX uses it,
// and bitcast_convert, which reinterprets bits as another dtype of the same
// width (random bits become floats in [1, 2) that way).
//
// threefry2x32 takes four u32 operands of one shape — the key words k0, k1
// and the counter words x0, x1 — and returns the two u32 result words, element
// by element. Random bits carry no derivative. Its StableHLO lowering is the
// same rounds in ui32 ops (add, xor, shifts, or), bitwise drx's.
#include <cstring>
#include <map>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/no_derivative.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_random_bits);

namespace drx {
namespace {

uint32_t rotl(uint32_t v, unsigned r) { return (v << r) | (v >> (32 - r)); }

// The rotation amounts of the even and odd groups of rounds, and the key
// schedule's parity constant (Salmon et al., Threefry-2x32).
constexpr unsigned kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
constexpr uint32_t kParity = 0x1BD11BDAu;

// One block: 5 groups of 4 rounds, a key injection after each group.
void threefry_block(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ kParity};
  x0 += ks[0];
  x1 += ks[1];
  for (uint32_t group = 0; group < 5; ++group) {
    for (unsigned r : kRotations[group % 2]) {
      x0 += x1;
      x1 = rotl(x1, r);
      x1 ^= x0;
    }
    x0 += ks[(group + 1) % 3];
    x1 += ks[(group + 2) % 3] + group + 1;
  }
}

class ThreefryPrim : public Primitive {
 public:
  ThreefryPrim() : Primitive("threefry2x32") {}

  // The block function as ui32 integer ops in threefry_block's order
  // (additions wrap mod 2^32 in StableHLO as here), so it is bitwise drx's.
  void lower(StableHloEmitter& em, const Params&) const override {
    const Type t(DType::u32, em.operand_type(0).shape);
    std::map<uint32_t, std::string> splats;  // one constant per value
    auto c = [&](uint32_t v) -> const std::string& {
      auto it = splats.find(v);
      if (it == splats.end()) it = splats.emplace(v, em.splat(v, DType::u32, t.shape)).first;
      return it->second;
    };
    auto op = [&](const char* name, const std::string& a, const std::string& b) {
      return em.emit1(name, {a, b}, {}, t);
    };
    auto rotl = [&](const std::string& v, unsigned r) {
      return op("stablehlo.or", op("stablehlo.shift_left", v, c(r)),
                op("stablehlo.shift_right_logical", v, c(32 - r)));
    };
    const std::string k0 = em.operand(0), k1 = em.operand(1);
    const std::string ks[3] = {k0, k1,
                               op("stablehlo.xor", op("stablehlo.xor", k0, k1), c(kParity))};
    std::string x0 = op("stablehlo.add", em.operand(2), ks[0]);
    std::string x1 = op("stablehlo.add", em.operand(3), ks[1]);
    for (uint32_t group = 0; group < 5; ++group) {
      for (unsigned r : kRotations[group % 2]) {
        x0 = op("stablehlo.add", x0, x1);
        x1 = op("stablehlo.xor", rotl(x1, r), x0);
      }
      x0 = op("stablehlo.add", x0, ks[(group + 1) % 3]);
      x1 = op("stablehlo.add", x1, op("stablehlo.add", ks[(group + 2) % 3], c(group + 1)));
    }
    em.set_results({x0, x1});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 4);
    for (const Type& t : ins)
      if (t.dtype != DType::u32 || t.shape != ins[0].shape || t.placement != ins[0].placement)
        throw TypeError(
            "threefry2x32: expected four u32 operands of one shape (key words k0, "
            "k1 and counter words x0, x1), got " +
            types_str(ins));
    return {ins[0], ins[0]};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    Array y0(DType::u32, ins[0].shape()), y1(DType::u32, ins[0].shape());
    const uint32_t *k0 = ins[0].data<uint32_t>(), *k1 = ins[1].data<uint32_t>();
    const uint32_t *x0 = ins[2].data<uint32_t>(), *x1 = ins[3].data<uint32_t>();
    uint32_t *o0 = y0.data<uint32_t>(), *o1 = y1.data<uint32_t>();
    for (int64_t i = 0; i < y0.size(); ++i) {
      uint32_t a = x0[i], b = x1[i];
      threefry_block(k0[i], k1[i], a, b);
      o0[i] = a;
      o1[i] = b;
    }
    return {y0, y1};
  }

  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt, std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return MaybeValues(4, std::nullopt);
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& params) const override {
    Values vs;
    bool batched = elementwise::align_batched(ins, batch_size, vs);
    std::vector<Batched> outs;
    for (const Value& v : emit(*this, vs, params)) outs.push_back({v, batched});
    return outs;
  }
};

// bitcast_convert[dtype]: the same bytes read as another dtype of the same
// size (f32 <-> u32/i32, f64 <-> i64, bf16/f16 <-> u16/i16); no derivative.
class BitcastPrim : public NoDerivativeUnary {
 public:
  BitcastPrim() : NoDerivativeUnary("bitcast_convert") {}
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.emit1("stablehlo.bitcast_convert", {em.operand(0)}, {}, em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const DType to = p.get_dtype("dtype", name());
    // Narrow integers hold one value per byte, so their bits are those of
    // another narrow integer of the same width only.
    const bool narrow = is_narrow_integer(to) || is_narrow_integer(ins[0].dtype);
    if (narrow && (!is_narrow_integer(to) || !is_narrow_integer(ins[0].dtype) ||
                   integer_bits(to) != integer_bits(ins[0].dtype)))
      throw TypeError("bitcast_convert: " + ins[0].str() + " cannot be reinterpreted as " +
                      std::string(dtype_name(to)) + " (expected a dtype of the same width, " +
                      std::to_string(integer_bits(is_narrow_integer(to) ? to : ins[0].dtype)) +
                      " bits)");
    if (dtype_size(to) != dtype_size(ins[0].dtype) || to == DType::bool_ ||
        ins[0].dtype == DType::bool_)
      throw TypeError("bitcast_convert: " + ins[0].str() + " cannot be reinterpreted as " +
                      std::string(dtype_name(to)) +
                      " (expected a non-bool dtype of the same size, " +
                      std::to_string(dtype_size(ins[0].dtype)) + " bytes)");
    return {Type(to, ins[0].shape, ins[0].placement)};
  }
  bool computes_half_precision() const override { return true; }  // bytes are bytes
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    if (is_narrow_integer(ins[0].dtype()))  // i4 <-> u4: the low bits, re-extended
      return {convert_array(ins[0], p.get_dtype("dtype", name()))};
    Array out(p.get_dtype("dtype", name()), ins[0].shape());
    if (out.nbytes() > 0) std::memcpy(out.raw(), ins[0].raw(), out.nbytes());
    return {out};
  }
};

}  // namespace

namespace prims {
const Primitive& threefry2x32() {
  static const ThreefryPrim p;
  return p;
}
const Primitive& bitcast_convert() {
  static const BitcastPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(random_bits) {
  registry.add(prims::threefry2x32());
  registry.add(prims::bitcast_convert());
}

DRX_PUBLIC_OP("threefry2x32", "(k0: Value, k1: Value, x0: Value, x1: Value) -> pair<Value, Value>",
              "The Threefry-2x32 block function (20 rounds) on u32 key and counter words.");
std::pair<Value, Value> threefry2x32(const Value& k0, const Value& k1, const Value& x0,
                                     const Value& x1) {
  Values r = emit(prims::threefry2x32(), {k0, k1, x0, x1});
  return {r[0], r[1]};
}

DRX_PUBLIC_OP("bitcast_convert", "(x: Value, dtype: DType) -> Value",
              "x's bytes read as dtype (same element size, not bool).");
Value bitcast_convert(const Value& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return emit1(prims::bitcast_convert(), {x}, Params{{"dtype", dtype}});
}

}  // namespace drx
