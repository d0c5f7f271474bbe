#pragma once
// Counter-based, splittable random numbers, bit for bit those of JAX's default
// PRNG (threefry2x32 with jax_threefry_partitionable=True).
//
// A key is a u32[2]: an Array outside a trace, a Value inside one. Random
// functions are pure: the same key gives the same numbers, under jit, vmap (a
// batch of keys gives one stream per key), any mesh and the interpreter, and
// a key is never advanced in place — split it or fold data into it to get new
// keys. Each number depends only on the key and its position, so a sharded
// array draws the same bits on any device count. Random outputs carry no
// derivative with respect to the key.
//
//   Array k = random::key(42);
//   auto [k1, k2] = random::split2(k);
//   Value noise = random::normal(k1_value, {3, 4});               // inside a trace
//   Value mine = random::fold_in(key_value, drx::client_index());  // in a map_fn body
#include <cstdint>
#include <utility>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/value.h"

namespace drx::random {

// The key of a seed: [seed >> 32, seed & 0xffffffff] (JAX with 64-bit seeds).
Array key(int64_t seed);
// Traced: seed is an integer scalar Value.
Value key(const Value& seed);

// n new keys: key i is threefry2x32(key, (0, i)), so split(key, n)[i] equals
// fold_in(key, i).
std::vector<Array> split(const Array& key, int64_t n = 2);
std::vector<Value> split(const Value& key, int64_t n = 2);
// split into two, for structured bindings.
std::pair<Array, Array> split2(const Array& key);
std::pair<Value, Value> split2(const Value& key);

// A key for `data` (taken modulo 2^32): threefry2x32(key, (0, data)).
Array fold_in(const Array& key, int64_t data);
Value fold_in(const Value& key, int64_t data);
Value fold_in(const Value& key, const Value& data);  // an integer scalar Value

// Uniform random bits of `shape`: u32 (bits1 ^ bits2 of the block at each
// element's flat index) or u8 (their low byte).
Value bits(const Value& key, const Shape& shape, DType dtype = DType::u32);

// Uniform in [minval, maxval): the mantissa filled with random bits gives
// [1, 2), shifted and scaled; never below minval.
Value uniform(const Value& key, const Shape& shape, DType dtype = DType::f32, double minval = 0,
              double maxval = 1);
// Standard normal: sqrt(2) erfinv(u) with u uniform in (-1, 1).
Value normal(const Value& key, const Shape& shape, DType dtype = DType::f32);
// true with probability p: uniform < p.
Value bernoulli(const Value& key, double p, const Shape& shape);
Value bernoulli(const Value& key, const Value& p, const Shape& shape);
// Integers uniform in [minval, maxval) (JAX's algorithm: two 32-bit draws
// combined modulo the span); dtype i32, i64 or u32, span below 2^32.
Value randint(const Value& key, const Shape& shape, int64_t minval, int64_t maxval,
              DType dtype = DType::i32);
// A random permutation of 0..n-1 (i32), by sorting random 32-bit keys (JAX's
// shuffle: enough rounds that n^3 draws stay below 2^32 collisions' reach).
Value permutation(const Value& key, int64_t n);
// x with its elements along `axis` shuffled by one such permutation.
Value permutation(const Value& key, const Value& x, int64_t axis = 0);

}  // namespace drx::random
