// Bitwise primitives on the integer dtypes and bool: and, or, xor, not, and
// the shifts shift_left, shift_right_logical, shift_right_arithmetic, with
// StableHLO's semantics. On bool, and/or/xor/not are the logical operations.
//
// A shift amount is read as unsigned (as StableHLO does): an amount of at least
// the bit width, or a negative one, shifts everything out — 0 for the left and
// logical right shifts, the sign bit everywhere for the arithmetic right shift.
// Integer results carry no derivative.
#include <type_traits>

#include "drx/core/lowering.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx::elementwise {
namespace {

// The unsigned type of T's width (bool's uint8_t storage stays uint8_t).
template <class T>
using Bits = std::make_unsigned_t<T>;

template <class T>
constexpr unsigned kBitWidth = 8 * sizeof(T);

struct And {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct Or {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct Xor {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
// ~x, and on bool (stored as 0 or 1) the logical negation.
struct Not {
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_same_v<T, uint8_t>)
      return v ? 0 : 1;
    else
      return static_cast<T>(~static_cast<Bits<T>>(v));
  }
};
struct ShiftLeft {
  template <class T>
  T operator()(T a, T s) const {
    const auto amount = static_cast<Bits<T>>(s);
    if (amount >= kBitWidth<T>) return T{0};
    return static_cast<T>(static_cast<Bits<T>>(static_cast<Bits<T>>(a) << amount));
  }
};
struct ShiftRightLogical {
  template <class T>
  T operator()(T a, T s) const {
    const auto amount = static_cast<Bits<T>>(s);
    if (amount >= kBitWidth<T>) return T{0};
    return static_cast<T>(static_cast<Bits<T>>(static_cast<Bits<T>>(a) >> amount));
  }
};
// Fills with the sign bit (C++20 defines >> on negative values this way).
struct ShiftRightArithmetic {
  template <class T>
  T operator()(T a, T s) const {
    using Signed = std::make_signed_t<T>;
    const auto amount = static_cast<Bits<T>>(s);
    const auto value = static_cast<Signed>(a);
    if (amount >= kBitWidth<T>) return static_cast<T>(value < 0 ? Signed{-1} : Signed{0});
    return static_cast<T>(static_cast<Signed>(value >> amount));
  }
};

// Which operands a bitwise primitive takes: integers, or integers and bool.
// A logical right shift of i2/i4, computed in i8 (Primitive::evaluate), would
// shift in the sign extension's ones rather than zeros: it takes no signed
// narrow integers.
enum class Operands { integers, integers_or_bool, integers_but_signed_narrow };

bool takes(Operands o, DType d) {
  if (o == Operands::integers_but_signed_narrow)
    return is_integer(d) && !(is_narrow_integer(d) && !is_unsigned(d));
  return is_integer(d) || (o == Operands::integers_or_bool && d == DType::bool_);
}
std::string operands_str(Operands o) {
  if (o == Operands::integers_but_signed_narrow)
    return "integer operands (i8 … i64, u2, u4, u8 … u64; not i2 or i4, whose logical shift drx "
           "does not compute)";
  return o == Operands::integers ? "integer operands (i2 … i64, u2 … u64)"
                                 : "integer or bool operands (i2 … i64, u2 … u64 or bool)";
}

template <class Fn>
void dispatch_bits(DType d, Fn&& fn) {
  // bool, and (unreachable: infer refuses them) the floats and storage formats, as bool's uint8_t.
  if (!is_integer(d) || is_storage_format(d)) return fn(uint8_t{});
  dispatch_dtype(d, [&](auto t) {
    if constexpr (std::is_integral_v<decltype(t)>) fn(t);
  });
}

template <class K, int Arity>
class BitwisePrim : public Primitive {
 public:
  // `op` names the public drx op in errors, when it differs from the primitive's name.
  BitwisePrim(std::string name, std::string stablehlo, Operands operands, std::string op = "")
      : Primitive(std::move(name)),
        stablehlo_(std::move(stablehlo)),
        operands_(operands),
        op_(std::move(op)) {}

  const ScalarKernel* scalar_kernel() const override { return &kernel_; }

  void lower(StableHloEmitter& em, const Params&) const override {
    std::vector<std::string> ins;
    for (int i = 0; i < Arity; ++i) ins.push_back(em.operand(static_cast<size_t>(i)));
    em.set_results(em.emit(stablehlo_, ins, {}, {em.result_type(0)}));
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, Arity);
    if (Arity == 2 && (ins[0].dtype != ins[1].dtype || ins[0].shape != ins[1].shape))
      throw TypeError(name() + ": operands must have the same dtype and shape, got " +
                      types_str(ins) + " (the public drx::" + public_name() +
                      " broadcasts shapes; convert dtypes with drx::astype)");
    if (!takes(operands_, ins[0].dtype))
      throw TypeError(name() + ": expected " + operands_str(operands_) + ", got " + types_str(ins));
    return {ins[0]};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    Array out(ins[0].dtype(), ins[0].shape());
    dispatch_bits(ins[0].dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (Arity == 1)
        unary_loop<T, T>(ins[0], out, [](T v) { return K{}(v); });
      else
        binary_loop<T, T>(ins[0], ins[1], out, [](T a, T b) { return K{}(a, b); });
    });
    return {out};
  }

  // Integer and bool results have no tangents.
  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return MaybeValues(Arity, std::nullopt);
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& params) const override {
    Values vs;
    bool batched = align_batched(ins, batch_size, vs);
    return {{emit1(*this, vs, params), batched}};
  }

 private:
  std::string public_name() const { return op_.empty() ? name() : op_; }
  static ScalarKernel make_kernel() {
    if constexpr (Arity == 1)
      return ScalarKernel::bitwise_unary<K>();
    else
      return ScalarKernel::bitwise_binary<K>();
  }
  std::string stablehlo_;
  Operands operands_;
  std::string op_;
  inline static const ScalarKernel kernel_ = make_kernel();
};

}  // namespace

DRX_PRIMITIVE_FAMILY(elementwise_bitwise) {
  registry.add(prims::bitwise_and());
  registry.add(prims::bitwise_or());
  registry.add(prims::bitwise_xor());
  registry.add(prims::bitwise_not());
  registry.add(prims::shift_left());
  registry.add(prims::shift_right_logical());
  registry.add(prims::shift_right_arithmetic());
}

}  // namespace drx::elementwise

namespace drx::prims {
using elementwise::BitwisePrim;
using elementwise::Operands;

const Primitive& bitwise_and() {
  static const BitwisePrim<elementwise::And, 2> p("and", "stablehlo.and",
                                                  Operands::integers_or_bool, "bitwise_and");
  return p;
}
const Primitive& bitwise_or() {
  static const BitwisePrim<elementwise::Or, 2> p("or", "stablehlo.or", Operands::integers_or_bool,
                                                 "bitwise_or");
  return p;
}
const Primitive& bitwise_xor() {
  static const BitwisePrim<elementwise::Xor, 2> p("xor", "stablehlo.xor",
                                                  Operands::integers_or_bool, "bitwise_xor");
  return p;
}
const Primitive& bitwise_not() {
  static const BitwisePrim<elementwise::Not, 1> p("not", "stablehlo.not",
                                                  Operands::integers_or_bool);
  return p;
}

}  // namespace drx::prims

namespace drx::prims {
using namespace elementwise;  // the primitive classes, their scalar functions and rules

const Primitive& shift_left() {
  static const BitwisePrim<ShiftLeft, 2> p("shift_left", "stablehlo.shift_left",
                                           Operands::integers);
  return p;
}

const Primitive& shift_right_logical() {
  static const BitwisePrim<ShiftRightLogical, 2> p(
      "shift_right_logical", "stablehlo.shift_right_logical", Operands::integers_but_signed_narrow);
  return p;
}

const Primitive& shift_right_arithmetic() {
  static const BitwisePrim<ShiftRightArithmetic, 2> p(
      "shift_right_arithmetic", "stablehlo.shift_right_arithmetic", Operands::integers);
  return p;
}

}  // namespace drx::prims
