#pragma once
// Shared helpers for the test suite: reference comparisons and random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "drx/drx.h"

namespace drx::testing {

// Every element of `got` (any dtype) equals `want` within atol + rtol*|want|.
inline ::testing::AssertionResult ArrayNear(const Array& got, const std::vector<double>& want,
                                            double rtol = 1e-6, double atol = 1e-6) {
  if (got.size() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (int64_t i = 0; i < got.size(); ++i) {
    double g = got.element_as_double(i), w = want[static_cast<size_t>(i)];
    if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= atol + rtol * std::abs(w)))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w
                                           << " (array " << got.str() << ")";
  }
  return ::testing::AssertionSuccess();
}

inline Array f64_array(const std::vector<double>& v, Shape shape) {
  return Array::from_vector<double>(v, std::move(shape));
}
inline Array f32_array(const std::vector<float>& v, Shape shape) {
  return Array::from_vector<float>(v, std::move(shape));
}

// Uniform random array in [lo, hi) (integers: floor), reproducible from seed.
inline Array random_array(const Shape& shape, DType dtype, uint64_t seed, double lo = -1.0,
                          double hi = 1.0) {
  if (is_half(dtype)) return convert_array(random_array(shape, DType::f32, seed, lo, hi), dtype);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Array a(dtype, shape);
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = a.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) {
      double x = dist(rng);
      if constexpr (std::is_same_v<T, uint8_t>)
        p[i] = x > 0.5 * (lo + hi) ? 1 : 0;
      else if constexpr (std::is_integral_v<T>)  // through int64: unsigned types wrap
        p[i] = static_cast<T>(static_cast<int64_t>(std::floor(x)));
      else
        p[i] = static_cast<T>(x);
    }
  });
  return a;
}

// All elements as doubles.
inline std::vector<double> to_doubles(const Array& a) {
  std::vector<double> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(a.element_as_double(i));
  return v;
}

// Adds the names of the primitives p uses, sub-programs included.
inline void collect_primitives(const Program& p, std::set<std::string>& names) {
  for (const Eqn& e : p.eqns) {
    names.insert(e.prim->name());
    for (const auto& [key, value] : e.params.items())
      if (auto* sub = std::get_if<std::shared_ptr<const Program>>(&value))
        collect_primitives(**sub, names);
  }
}

// Runs fn expecting a drx::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no drx::Error thrown (expected one containing '"
                  << (parts.empty() ? "" : parts[0]) << "')";
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
  }
}

// Row b of a's leading axis, as an array of the remaining axes.
inline Array batch_row(const Array& a, int64_t b) {
  Shape s(a.shape().begin() + 1, a.shape().end());
  Array r(a.dtype(), s);
  std::memcpy(r.raw(), static_cast<const std::byte*>(a.raw()) + static_cast<size_t>(b) * r.nbytes(),
              r.nbytes());
  return r;
}

// Every result bitwise equal: same count, dtypes, shapes and bytes.
inline ::testing::AssertionResult BitwiseEqual(const std::vector<Array>& got,
                                               const std::vector<Array>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " results, want " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!got[i].bitwise_equal(want[i]))
      return ::testing::AssertionFailure()
             << "result " << i << ": " << got[i].str() << " vs " << want[i].str();
  return ::testing::AssertionSuccess();
}

// The largest |a - b| over every element of every result (infinity when the
// counts or shapes differ).
inline double max_abs_diff(const std::vector<Array>& a, const std::vector<Array>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape()) return INFINITY;
    for (int64_t k = 0; k < a[i].size(); ++k)
      d = std::max(d, std::abs(a[i].element_as_double(k) - b[i].element_as_double(k)));
  }
  return d;
}

}  // namespace drx::testing
