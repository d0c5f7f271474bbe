#include "drx/array/dtype.h"

#include <algorithm>

#include "drx/array/error.h"

namespace drx {

namespace {
// A DType read from a file or a cast may hold a value outside the enumeration.
bool known(DType d) { return static_cast<size_t>(d) < kNumDTypes; }
}  // namespace

std::string_view dtype_name(DType d) { return known(d) ? dtype_info(d).name : "?"; }

std::string dtype_names() {
  // Floats in table order, then the integers by signedness and width, then bool.
  std::vector<DTypeInfo> rows(kDTypeTable.begin(), kDTypeTable.end());
  std::stable_sort(rows.begin(), rows.end(), [](const DTypeInfo& a, const DTypeInfo& b) {
    auto rank = [](const DTypeInfo& r) {
      return r.category == DTypeCategory::floating     ? 0
             : r.category == DTypeCategory::boolean    ? 3
             : r.category == DTypeCategory::signed_int ? 1
                                                       : 2;
    };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return rank(a) == 0 ? false : a.bits < b.bits;
  });
  std::string names;
  for (size_t i = 0; i < rows.size(); ++i)
    names += std::string(i == 0                 ? ""
                         : i + 1 == rows.size() ? " or "
                                                : ", ") +
             std::string(rows[i].name);
  return names;
}

DType dtype_from_name(std::string_view name) {
  for (const DTypeInfo& r : kDTypeTable)
    if (r.name == name) return r.dtype;
  throw ParseError("unknown dtype '" + std::string(name) + "' (expected " + dtype_names() + ")");
}

size_t dtype_size(DType d) { return known(d) ? dtype_info(d).size : 1; }

bool is_floating(DType d) { return known(d) && dtype_info(d).category == DTypeCategory::floating; }

void throw_no_storage_type(DType d) {
  throw Error("internal: a kernel was handed " + std::string(dtype_name(d)) +
              ", which has no C++ arithmetic type (Primitive::evaluate computes it in " +
              std::string(dtype_name(compute_dtype(d))) + ")");
}

bool is_integer(DType d) {
  if (!known(d)) return false;
  const DTypeCategory c = dtype_info(d).category;
  return c == DTypeCategory::signed_int || c == DTypeCategory::unsigned_int;
}

bool is_unsigned(DType d) {
  return known(d) && dtype_info(d).category == DTypeCategory::unsigned_int;
}

bool is_narrow_integer(DType d) { return is_integer(d) && dtype_info(d).bits < 8; }

int integer_bits(DType d) { return known(d) ? dtype_info(d).bits : 8; }

bool is_storage_format(DType d) { return known(d) && dtype_info(d).storage_format; }

DType compute_dtype(DType d) { return known(d) ? dtype_info(d).compute : d; }

int64_t num_elements(const Shape& s) {
  // A zero dimension makes the count 0 whatever the others, even where their product would
  // overflow.
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("shape " + shape_str(s) +
                  " has more elements than an int64 can count (at most 2^63 - 1)");
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::vector<int64_t> broadcast_strides(const Shape& in, size_t out_rank,
                                       const std::vector<int64_t>& dims) {
  std::vector<int64_t> in_st = strides_of(in), st(out_rank, 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (in[i] != 1) st[static_cast<size_t>(dims[i])] = in_st[i];
  return st;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view op) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(ndim) + " (expected -" + std::to_string(ndim) + " <= axis < " +
                std::to_string(ndim) + ")");
  return a;
}

}  // namespace drx
