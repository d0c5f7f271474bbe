#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"

DRX_PUBLIC_OPS_FILE(nn_init);

namespace drx::nn {

namespace {

// A double in [0, 1) from the top 53 bits: exact and the same on every platform.
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// SplitMix64 finaliser: decorrelates per-layer seeds derived from one user seed.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

const char* init_name(Init init) {
  switch (init) {
    case Init::glorot_uniform:
      return "glorot_uniform";
    case Init::he_normal:
      return "he_normal";
    case Init::lecun_normal:
      return "lecun_normal";
    case Init::zeros:
      return "zeros";
  }
  return "?";
}

// Rounds v into a (f32 or f64).
void store(const std::vector<double>& v, Array& a) {
  if (a.dtype() == DType::f64) {
    for (size_t i = 0; i < v.size(); ++i) a.data<double>()[i] = v[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = static_cast<float>(v[i]);
  }
}

}  // namespace

DRX_PUBLIC_OP("nn::init_array",
              "(init: Init, shape: Shape, fan_in: int64, fan_out: int64, seed: uint64, dtype: "
              "DType = f32) -> Array",
              "A seeded, platform-independent array drawn from an initialiser.");
Array init_array(Init init, const Shape& shape, int64_t fan_in, int64_t fan_out, uint64_t seed,
                 DType dtype) {
  const std::string what = std::string("init_array(") + init_name(init) + ", " + shape_str(shape) +
                           ", " + std::string(dtype_name(dtype)) + ")";
  if (dtype != DType::f32 && dtype != DType::f64) throw Error(what + ": dtype must be f32 or f64");
  for (int64_t d : shape)
    if (d < 0) throw Error(what + ": negative dimension");
  Array a(dtype, shape);
  if (init == Init::zeros) return a;
  if (fan_in <= 0 || (init == Init::glorot_uniform && fan_out <= 0))
    throw Error(what + ": fan_in and fan_out must be positive, got fan_in " +
                std::to_string(fan_in) + ", fan_out " + std::to_string(fan_out));
  if (init == Init::glorot_uniform) {
    std::mt19937_64 rng(seed);
    const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    std::vector<double> v(static_cast<size_t>(a.size()));
    for (double& x : v) x = limit * (2.0 * unit(rng) - 1.0);
    store(v, a);
    return a;
  }
  const double gain = init == Init::he_normal ? 2.0 : 1.0;
  return normal_array(shape, std::sqrt(gain / static_cast<double>(fan_in)), seed, dtype);
}

DRX_PUBLIC_OP("nn::normal_array",
              "(shape: Shape, stddev: double, seed: uint64, dtype: DType = f32) -> Array",
              "Seeded, platform-independent N(0, stddev^2) samples.");
Array normal_array(const Shape& shape, double stddev, uint64_t seed, DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Error("normal_array: dtype must be f32 or f64, got " + std::string(dtype_name(dtype)));
  if (!(stddev >= 0) || !std::isfinite(stddev))
    throw Error("normal_array: stddev must be finite and not negative, got " +
                std::to_string(stddev));
  for (int64_t d : shape)
    if (d < 0) throw Error("normal_array: negative dimension in " + shape_str(shape));
  Array a(dtype, shape);
  std::mt19937_64 rng(seed);
  const int64_t n = a.size();
  std::vector<double> v(static_cast<size_t>(n));
  // Box-Muller, both outputs of each pair; 1 - u lies in (0, 1] so the log is finite.
  for (int64_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(1.0 - unit(rng)));
    const double t = 2.0 * std::numbers::pi * unit(rng);
    v[static_cast<size_t>(i)] = stddev * r * std::cos(t);
    if (i + 1 < n) v[static_cast<size_t>(i + 1)] = stddev * r * std::sin(t);
  }
  store(v, a);
  return a;
}

DRX_PUBLIC_OP("nn::derive_init_seed", "(seed: uint64, stream: uint64) -> uint64",
              "A decorrelated seed for one stream (layer, leaf) of a model.");
uint64_t derive_init_seed(uint64_t seed, uint64_t stream) { return mix(seed ^ mix(stream)); }

DRX_PUBLIC_OP("nn::mlp_init",
              "(sizes: vector<int64>, seed: uint64, weight_init: Init = he_normal, dtype: DType = "
              "f32) -> Tree",
              "MLP parameters {layerK: {w, b}} as a Tree of Arrays.");
Tree mlp_init(const std::vector<int64_t>& sizes, uint64_t seed, Init weight_init, DType dtype) {
  if (sizes.size() < 2)
    throw Error("mlp_init: sizes needs at least an input and an output size, got " +
                std::to_string(sizes.size()) + " entries");
  for (int64_t s : sizes)
    if (s <= 0) throw Error("mlp_init: layer sizes must be positive, got " + std::to_string(s));
  const size_t layers = sizes.size() - 1;
  const size_t width = std::to_string(layers - 1).size();
  std::vector<std::pair<std::string, Tree>> items;
  for (size_t l = 0; l < layers; ++l) {
    std::string index = std::to_string(l);
    index.insert(0, width - index.size(), '0');
    const int64_t in = sizes[l], out = sizes[l + 1];
    Array w = init_array(weight_init, {in, out}, in, out, derive_init_seed(seed, l), dtype);
    Array b = init_array(Init::zeros, {out}, in, out, 0, dtype);
    items.emplace_back("layer" + index, Tree::dict({{"b", Tree(b)}, {"w", Tree(w)}}));
  }
  return Tree::dict(std::move(items));
}

}  // namespace drx::nn
