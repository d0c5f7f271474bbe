#include "drx/array/dtype.h"

#include "drx/array/error.h"

namespace drx {

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::bool_:
      return "bool";
    case DType::u32:
      return "u32";
    case DType::u8:
      return "u8";
    case DType::i8:
      return "i8";
    case DType::i16:
      return "i16";
    case DType::u16:
      return "u16";
    case DType::u64:
      return "u64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i2:
      return "i2";
    case DType::i4:
      return "i4";
    case DType::u2:
      return "u2";
    case DType::u4:
      return "u4";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  throw ParseError(
      "unknown dtype '" + std::string(name) +
      "' (expected f32, f64, bf16, f16, i2, i4, i8, i16, i32, i64, u2, u4, u8, u16, u32, u64 "
      "or bool)");
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32:
    case DType::i32:
    case DType::u32:
      return 4;
    case DType::f64:
    case DType::i64:
    case DType::u64:
      return 8;
    case DType::i16:
    case DType::u16:
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::bool_:
    case DType::u8:
    case DType::i8:
    case DType::i2:
    case DType::i4:
    case DType::u2:
    case DType::u4:
      return 1;
  }
  return 1;
}

bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::bf16 || d == DType::f16;
}

void throw_no_storage_type(DType d) {
  throw Error("internal: a kernel was handed " + std::string(dtype_name(d)) +
              ", which has no C++ arithmetic type (Primitive::evaluate computes it in " +
              std::string(dtype_name(compute_dtype(d))) + ")");
}
bool is_integer(DType d) { return d != DType::bool_ && !is_floating(d); }
bool is_unsigned(DType d) {
  return d == DType::u32 || d == DType::u8 || d == DType::u16 || d == DType::u64 ||
         d == DType::u2 || d == DType::u4;
}

bool is_narrow_integer(DType d) {
  return d == DType::i2 || d == DType::i4 || d == DType::u2 || d == DType::u4;
}

int integer_bits(DType d) {
  if (d == DType::i2 || d == DType::u2) return 2;
  if (d == DType::i4 || d == DType::u4) return 4;
  return static_cast<int>(dtype_size(d)) * 8;
}

bool is_storage_format(DType d) {
  return d == DType::bf16 || d == DType::f16 || is_narrow_integer(d);
}

DType compute_dtype(DType d) {
  if (d == DType::bf16 || d == DType::f16) return DType::f32;
  if (d == DType::i2 || d == DType::i4) return DType::i8;
  if (d == DType::u2 || d == DType::u4) return DType::u8;
  return d;
}

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
