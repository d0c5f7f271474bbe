#include "drx/random/random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(random_random);

namespace drx::random {
namespace {

void require_key(const char* op, const Type& t) {
  if (t.dtype != DType::u32 || t.shape != Shape{2})
    throw Error(std::string("random.") + op + ": expected a key of type u32[2] (from " +
                "drx::random::key, split or fold_in), got " + t.str() +
                "; for a batch of keys, vmap over them");
}

void require_count(const char* op, const char* what, int64_t n) {
  if (n < 0)
    throw Error(std::string("random.") + op + ": " + what + " = " + std::to_string(n) +
                ", expected a non-negative count");
}

void require_shape(const char* op, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0)
      throw Error(std::string("random.") + op + ": shape " + shape_str(shape) +
                  " has a negative dimension");
  if (num_elements(shape) > int64_t{std::numeric_limits<uint32_t>::max()})
    throw Error(std::string("random.") + op + ": shape " + shape_str(shape) +
                " has more than 2^32 - 1 elements (the counter is one 32-bit word)");
}

Value word(const Value& key, int64_t i) { return reshape(slice(key, {i}, {i + 1}), {}); }

// The two result words of the block at every element's flat index (the
// counter's high word is 0 below 2^32 elements).
std::pair<Value, Value> blocks(const Value& key, const Shape& shape) {
  const int64_t n = num_elements(shape);
  Value lo = reshape(iota({n}, 0, DType::u32), shape);
  Value hi = fill(shape, 0, DType::u32);
  return threefry2x32(broadcast_to(word(key, 0), shape), broadcast_to(word(key, 1), shape), hi, lo);
}

Value key_of_words(const Value& w0, const Value& w1) {
  return concatenate({reshape(w0, {1}), reshape(w1, {1})}, 0);
}

// Host: the block for one counter, through the primitive's own semantics.
Array host_block(const char* op, const Array& key, uint32_t hi, uint32_t lo) {
  require_key(op, Type(key.dtype(), key.shape()));
  const uint32_t* k = key.data<uint32_t>();
  std::vector<Array> r = prims::threefry2x32().eval(
      {Array::scalar(k[0]), Array::scalar(k[1]), Array::scalar(hi), Array::scalar(lo)}, {});
  Array out(DType::u32, {2});
  out.data<uint32_t>()[0] = r[0].item<uint32_t>();
  out.data<uint32_t>()[1] = r[1].item<uint32_t>();
  return out;
}

// The float nearest above -1 in dtype (JAX's lower bound for normal's uniform).
double next_above_minus_one(DType dtype) {
  return dtype == DType::f32 ? static_cast<double>(std::nextafter(-1.0f, 0.0f))
                             : std::nextafter(-1.0, 0.0);
}

// a - b rounded to dtype, as the draw's arithmetic runs in dtype.
double in_dtype(DType dtype, double v) {
  return dtype == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
}

}  // namespace

DRX_PUBLIC_OP("random::key", "(seed: int64) -> Array | (seed: Value) -> Value",
              "A PRNG key (u32[2]) from a seed.");
Array key(int64_t seed) {
  Array k(DType::u32, {2});
  const auto bits = static_cast<uint64_t>(seed);
  k.data<uint32_t>()[0] = static_cast<uint32_t>(bits >> 32);
  k.data<uint32_t>()[1] = static_cast<uint32_t>(bits);
  return k;
}

Value key(const Value& seed) {
  const Type& t = seed.type();
  if (!is_integer(t.dtype) || !t.shape.empty() || !t.placement.empty())
    throw Error("random.key: expected an integer scalar seed, got " + t.str());
  Value s = astype(seed, DType::i64);
  Value hi = astype(shift_right_logical(s, scalar_like(s, 32)), DType::u32);
  return key_of_words(hi, astype(bitwise_and(s, scalar_like(s, 4294967295.0)), DType::u32));
}

DRX_PUBLIC_OP(
    "random::split",
    "(key: Array, n: int64 = 2) -> vector<Array> | (key: Value, n: int64 = 2) -> vector<Value>",
    "n new keys from a key.");
std::vector<Array> split(const Array& key, int64_t n) {
  require_count("split", "n", n);
  std::vector<Array> keys;
  for (int64_t i = 0; i < n; ++i)
    keys.push_back(host_block("split", key, 0, static_cast<uint32_t>(i)));
  return keys;
}

std::vector<Value> split(const Value& key, int64_t n) {
  require_key("split", key.type());
  require_count("split", "n", n);
  require_shape("split", {n});
  std::vector<Value> keys;
  if (n == 0) return keys;
  auto [b0, b1] = blocks(key, {n});
  for (int64_t i = 0; i < n; ++i) keys.push_back(key_of_words(word(b0, i), word(b1, i)));
  return keys;
}

DRX_PUBLIC_OP("random::split2",
              "(key: Array) -> pair<Array, Array> | (key: Value) -> pair<Value, Value>",
              "Two new keys from a key.");
std::pair<Array, Array> split2(const Array& key) {
  std::vector<Array> k = split(key, 2);
  return {k[0], k[1]};
}
std::pair<Value, Value> split2(const Value& key) {
  std::vector<Value> k = split(key, 2);
  return {k[0], k[1]};
}

DRX_PUBLIC_OP("random::fold_in",
              "(key: Array, data: int64) -> Array | (key: Value, data: int64) -> Value | (key: "
              "Value, data: Value) -> Value",
              "A key derived from key and an integer.");
Array fold_in(const Array& key, int64_t data) {
  return host_block("fold_in", key, 0, static_cast<uint32_t>(data));
}

Value fold_in(const Value& key, int64_t data) {
  return fold_in(key, constant(Array::scalar(static_cast<uint32_t>(data))));
}

Value fold_in(const Value& key, const Value& data) {
  require_key("fold_in", key.type());
  const Type& t = data.type();
  if (!is_integer(t.dtype) || !t.shape.empty() || !t.placement.empty())
    throw Error("random.fold_in: expected an integer scalar to fold in (e.g. a step or " +
                std::string("drx::client_index()), got ") + t.str());
  Value lo = astype(data, DType::u32);  // wraps modulo 2^32, as jnp.uint32 does
  auto [b0, b1] = threefry2x32(word(key, 0), word(key, 1), scalar_like(lo, 0), lo);
  return key_of_words(b0, b1);
}

DRX_PUBLIC_OP("random::bits", "(key: Value, shape: Shape, dtype: DType = u32) -> Value",
              "Uniformly random bits of an unsigned dtype.");
Value bits(const Value& key, const Shape& shape, DType dtype) {
  require_key("bits", key.type());
  require_shape("bits", shape);
  if (dtype != DType::u32 && dtype != DType::u8)
    throw Error("random.bits: dtype " + std::string(dtype_name(dtype)) + ", expected u32 or u8");
  auto [b0, b1] = blocks(key, shape);
  Value b = bitwise_xor(b0, b1);
  return dtype == DType::u32 ? b : astype(bitwise_and(b, scalar_like(b, 255)), DType::u8);
}

DRX_PUBLIC_OP("random::uniform",
              "(key: Value, shape: Shape, dtype: DType = f32, minval: double = 0, maxval: double = "
              "1) -> Value",
              "Uniform samples in [minval, maxval).");
Value uniform(const Value& key, const Shape& shape, DType dtype, double minval, double maxval) {
  require_key("uniform", key.type());
  require_shape("uniform", shape);
  // f16 and bf16 would need JAX's 16-bit draws; until then they are refused, not drawn
  // silently in f64.
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Error("random.uniform: dtype " + std::string(dtype_name(dtype)) +
                ", expected f32 or f64 (randint draws integers; for f16 or bf16 draw f32 and "
                "astype)");
  if (!(minval <= maxval) || !std::isfinite(minval) || !std::isfinite(maxval))
    throw Error("random.uniform: [minval, maxval) = [" + std::to_string(minval) + ", " +
                std::to_string(maxval) + "), expected finite bounds with minval <= maxval");
  Value one_to_two;
  if (dtype == DType::f32) {
    // 23 mantissa bits from the top of each 32-bit draw, exponent of 1.0f.
    Value b = bits(key, shape);
    Value mantissa = shift_right_logical(b, scalar_like(b, 9));
    one_to_two = bitcast_convert(bitwise_or(mantissa, scalar_like(b, 0x3F800000)), DType::f32);
  } else {
    // 52 mantissa bits from the 64-bit draw (bits1 << 32 | bits2).
    auto [b0, b1] = blocks(key, shape);
    Value hi = astype(b0, DType::i64), lo = astype(b1, DType::i64);
    Value b = bitwise_or(shift_left(hi, scalar_like(hi, 32)), lo);
    Value mantissa = shift_right_logical(b, scalar_like(b, 12));
    one_to_two =
        bitcast_convert(bitwise_or(mantissa, scalar_like(b, 4607182418800017408.0)), DType::f64);
  }
  const double lo = in_dtype(dtype, minval), hi = in_dtype(dtype, maxval);
  Value floats = one_to_two - 1.0;
  Value scaled = floats * in_dtype(dtype, hi - lo) + lo;
  return maximum(scaled, lo);
}

DRX_PUBLIC_OP("random::normal", "(key: Value, shape: Shape, dtype: DType = f32) -> Value",
              "Standard normal samples.");
Value normal(const Value& key, const Shape& shape, DType dtype) {
  require_key("normal", key.type());
  require_shape("normal", shape);
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Error("random.normal: dtype " + std::string(dtype_name(dtype)) +
                ", expected f32 or f64 (for f16 or bf16 draw f32 and astype)");
  Value u = uniform(key, shape, dtype, next_above_minus_one(dtype), 1.0);
  return erf_inv(u) * M_SQRT2;
}

DRX_PUBLIC_OP("random::bernoulli",
              "(key: Value, p: double, shape: Shape) -> Value | (key: Value, p: Value, shape: "
              "Shape) -> Value",
              "Bool samples, true with probability p.");
Value bernoulli(const Value& key, double p, const Shape& shape) {
  require_key("bernoulli", key.type());
  require_shape("bernoulli", shape);
  if (!(p >= 0 && p <= 1))
    throw Error("random.bernoulli: p = " + std::to_string(p) + ", expected 0 <= p <= 1");
  return less(uniform(key, shape), fill(shape, p, DType::f32));
}

Value bernoulli(const Value& key, const Value& p, const Shape& shape) {
  require_key("bernoulli", key.type());
  require_shape("bernoulli", shape);
  const Type& t = p.type();
  if ((t.dtype != DType::f32 && t.dtype != DType::f64) || !t.placement.empty())
    throw Error("random.bernoulli: expected an f32 or f64 probability p, got " + t.str());
  return less(uniform(key, shape, t.dtype), broadcast_to(p, shape));
}

DRX_PUBLIC_OP(
    "random::randint",
    "(key: Value, shape: Shape, minval: int64, maxval: int64, dtype: DType = i32) -> Value",
    "Uniform integers in [minval, maxval).");
Value randint(const Value& key, const Shape& shape, int64_t minval, int64_t maxval, DType dtype) {
  require_key("randint", key.type());
  if (dtype != DType::i32 && dtype != DType::i64 && dtype != DType::u32)
    throw Error("random.randint: dtype " + std::string(dtype_name(dtype)) +
                ", expected i32, i64 or u32");
  const double dlo = static_cast<double>(minval), dhi = static_cast<double>(maxval);
  const bool fits = dtype == DType::i32   ? dlo >= -2147483648.0 && dhi <= 2147483648.0
                    : dtype == DType::u32 ? dlo >= 0 && dhi <= 4294967296.0
                                          : true;
  if (!fits || (maxval > minval && static_cast<uint64_t>(maxval - minval) > (uint64_t{1} << 32)))
    throw Error("random.randint: [minval, maxval) = [" + std::to_string(minval) + ", " +
                std::to_string(maxval) + ") for " + std::string(dtype_name(dtype)) +
                ", expected bounds in the dtype's range with a span of at most 2^32");
  auto [k1, k2] = split2(key);
  Value higher = bits(k1, shape), lower = bits(k2, shape);
  // Everything in wrapping u32 arithmetic, as JAX does; span 2^32 wraps to 0
  // only in the full-range case, where the remainder is the identity.
  const uint32_t span = maxval > minval ? static_cast<uint32_t>(maxval - minval) : 1u;
  const Value base = constant(Array::scalar(minval));
  // minval + offset lies in [minval, maxval): exact in i64 for every dtype.
  auto shifted = [&](const Value& offset) {
    return astype(astype(offset, DType::i64) + base, dtype);
  };
  if (span == 0) return shifted(higher);
  uint32_t multiplier = (uint32_t{1} << 16) % span;
  multiplier = static_cast<uint32_t>(multiplier * multiplier) % span;
  Value s = fill(shape, span, DType::u32);
  Value offset = remainder(higher, s) * fill(shape, multiplier, DType::u32) + remainder(lower, s);
  return shifted(remainder(offset, s));
}

DRX_PUBLIC_OP("random::permutation",
              "(key: Value, n: int64) -> Value | (key: Value, x: Value, axis: int64 = 0) -> Value",
              "A random permutation of [0, n), or of x along axis.");
Value permutation(const Value& key, int64_t n) {
  require_key("permutation", key.type());
  require_count("permutation", "n", n);
  require_shape("permutation", {n});
  Value perm = arange(n, DType::i32);
  // Sorting by random keys: enough rounds that ties (which would bias the
  // order) are unlikely, as JAX's shuffle counts them.
  const int rounds =
      static_cast<int>(std::ceil(3.0 * std::log(std::max<int64_t>(1, n)) / std::log(4294967295.0)));
  Value k = key;
  for (int r = 0; r < rounds; ++r) {
    auto [next, sub] = split2(k);
    k = next;
    perm = take(perm, argsort(bits(sub, {n})));
  }
  return perm;
}

Value permutation(const Value& key, const Value& x, int64_t axis) {
  const int64_t nd = x.ndim();
  if (nd == 0) throw Error("random.permutation: expected an array with an axis, got a scalar");
  if (axis < -nd || axis >= nd)
    throw Error("random.permutation: axis " + std::to_string(axis) + " out of range for " +
                x.type().str());
  if (axis < 0) axis += nd;
  return take(x, permutation(key, x.shape()[static_cast<size_t>(axis)]), axis);
}

}  // namespace drx::random
