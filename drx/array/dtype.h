#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace drx {

// Unsigned integers (u32, u8, u16, u64) wrap around like the signed ones.
// bf16 and f16 are storage formats computed in f32 (drx/array/half.h); the
// narrow integers i2, i4, u2 and u4 (StableHLO's i2, i4, ui2, ui4) are storage
// formats too, one byte per element holding the value (sign-extended, or
// zero-extended), computed in i8 or u8 and wrapped back to their width. The
// values are appended so that existing encodings of the others keep their numbers.
enum class DType : uint8_t {
  f32,
  f64,
  i32,
  i64,
  bool_,
  u32,
  u8,
  i8,
  i16,
  u16,
  u64,
  bf16,
  f16,
  i2,
  i4,
  u2,
  u4
};
inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType bool_ = DType::bool_;
inline constexpr DType u32 = DType::u32;
inline constexpr DType u8 = DType::u8;
inline constexpr DType i8 = DType::i8;
inline constexpr DType i16 = DType::i16;
inline constexpr DType u16 = DType::u16;
inline constexpr DType u64 = DType::u64;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType f16 = DType::f16;
inline constexpr DType i2 = DType::i2;
inline constexpr DType i4 = DType::i4;
inline constexpr DType u2 = DType::u2;
inline constexpr DType u4 = DType::u4;
// Every dtype, for loops over them.
inline constexpr DType kAllDTypes[] = {
    DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_, DType::u32,
    DType::u8,  DType::i8,  DType::i16, DType::u16, DType::u64,   DType::bf16,
    DType::f16, DType::i2,  DType::i4,  DType::u2,  DType::u4};

using Shape = std::vector<int64_t>;

std::string_view dtype_name(DType d);
// Throws drx::ParseError for an unknown name.
DType dtype_from_name(std::string_view name);
size_t dtype_size(DType d);
bool is_floating(DType d);  // f32, f64, bf16, f16
// The signed and unsigned integers (not bool).
bool is_integer(DType d);
bool is_unsigned(DType d);
// i2, i4, u2, u4: integers narrower than a byte, stored one per byte.
bool is_narrow_integer(DType d);
// The width in bits of an integer dtype (2 for i2, 64 for u64).
int integer_bits(DType d);
// The dtypes kernels never see: bf16, f16 and the narrow integers, which
// Primitive::evaluate computes in compute_dtype and rounds or wraps back.
bool is_storage_format(DType d);
// f32 for bf16 and f16, i8 for i2 and i4, u8 for u2 and u4, else d itself.
DType compute_dtype(DType d);

int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);  // "[2,3]"
// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// The strides (in elements) at which broadcast_in_dim reads an operand of
// shape `in` for each of the result's `out_rank` dims: operand dim i lands at
// result dim dims[i]; new and stretched size-1 dims step 0.
std::vector<int64_t> broadcast_strides(const Shape& in, size_t out_rank,
                                       const std::vector<int64_t>& dims);
// Normalises a possibly negative axis for rank `ndim`; throws naming `op` if out of range.
int64_t normalize_axis(int64_t axis, int64_t ndim, std::string_view op);

// C++ element type for each dtype. bool is stored as one byte.
template <class T>
struct dtype_of_t;
template <>
struct dtype_of_t<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of_t<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of_t<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of_t<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of_t<bool> {
  static constexpr DType value = DType::bool_;
};
template <>
struct dtype_of_t<uint32_t> {
  static constexpr DType value = DType::u32;
};
// u8 elements are stored as char8_t inside the kernels (a type distinct from
// bool's uint8_t storage, so generic code can tell them apart); host code may
// use uint8_t for them.
template <>
struct dtype_of_t<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of_t<int8_t> {
  static constexpr DType value = DType::i8;
};
template <>
struct dtype_of_t<int16_t> {
  static constexpr DType value = DType::i16;
};
template <>
struct dtype_of_t<uint16_t> {
  static constexpr DType value = DType::u16;
};
template <>
struct dtype_of_t<uint64_t> {
  static constexpr DType value = DType::u64;
};
template <>
struct dtype_of_t<char8_t> {
  static constexpr DType value = DType::u8;
};
template <class T>
inline constexpr DType dtype_of = dtype_of_t<T>::value;

// Calls fn(T{}) with T the storage type of `d` (uint8_t for bool, char8_t for u8).
// Kernels never see bf16, f16 or the narrow integers: Primitive::evaluate
// widens them (compute_dtype).
[[noreturn]] void throw_no_storage_type(DType d);

template <class Fn>
decltype(auto) dispatch_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::f32:
      return fn(float{});
    case DType::f64:
      return fn(double{});
    case DType::i32:
      return fn(int32_t{});
    case DType::i64:
      return fn(int64_t{});
    case DType::u32:
      return fn(uint32_t{});
    case DType::u8:
      return fn(char8_t{});
    case DType::i8:
      return fn(int8_t{});
    case DType::i16:
      return fn(int16_t{});
    case DType::u16:
      return fn(uint16_t{});
    case DType::u64:
      return fn(uint64_t{});
    case DType::bf16:
    case DType::f16:
    case DType::i2:
    case DType::i4:
    case DType::u2:
    case DType::u4:
      throw_no_storage_type(d);
    case DType::bool_:
      break;
  }
  return fn(uint8_t{});
}

}  // namespace drx
