#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
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
// What kind of number a dtype holds.
enum class DTypeCategory : uint8_t { floating, signed_int, unsigned_int, boolean };

// One dtype's facts. Every dtype function below is read off kDTypeTable.
struct DTypeInfo {
  DType dtype;
  std::string_view name;       // drx's, in program text and errors: "u8", "bool"
  std::string_view mlir_name;  // StableHLO's element type: "ui8", "i1"
  uint8_t size;                // bytes per element (storage formats: one per byte of value)
  DTypeCategory category;
  uint8_t bits;  // the width of a value: 2 for i2, 8 for bool, 32 for f32
  // No C++ arithmetic type: kernels never see it; Primitive::evaluate computes it in `compute`.
  bool storage_format;
  DType compute;  // the dtype it is computed in (itself unless a storage format)
};

namespace detail {
// One row of the table: the facts and the C++ type kernels store the elements in (void for
// storage formats). bool is uint8_t and u8 char8_t, distinct types, so generic code tells them
// apart by type.
template <class Storage>
struct DTypeRow {
  using storage = Storage;
  DTypeInfo info;
};
using Cat = DTypeCategory;
}  // namespace detail

// THE dtype table, in enumerator order (static_asserts below keep it so). To add a dtype:
// append an enumerator and a row here; everything else derives from the row.
inline constexpr std::tuple kDTypeRows{
    detail::DTypeRow<float>{
        {DType::f32, "f32", "f32", 4, detail::Cat::floating, 32, false, DType::f32}},
    detail::DTypeRow<double>{
        {DType::f64, "f64", "f64", 8, detail::Cat::floating, 64, false, DType::f64}},
    detail::DTypeRow<int32_t>{
        {DType::i32, "i32", "i32", 4, detail::Cat::signed_int, 32, false, DType::i32}},
    detail::DTypeRow<int64_t>{
        {DType::i64, "i64", "i64", 8, detail::Cat::signed_int, 64, false, DType::i64}},
    detail::DTypeRow<uint8_t>{
        {DType::bool_, "bool", "i1", 1, detail::Cat::boolean, 8, false, DType::bool_}},
    detail::DTypeRow<uint32_t>{
        {DType::u32, "u32", "ui32", 4, detail::Cat::unsigned_int, 32, false, DType::u32}},
    detail::DTypeRow<char8_t>{
        {DType::u8, "u8", "ui8", 1, detail::Cat::unsigned_int, 8, false, DType::u8}},
    detail::DTypeRow<int8_t>{
        {DType::i8, "i8", "i8", 1, detail::Cat::signed_int, 8, false, DType::i8}},
    detail::DTypeRow<int16_t>{
        {DType::i16, "i16", "i16", 2, detail::Cat::signed_int, 16, false, DType::i16}},
    detail::DTypeRow<uint16_t>{
        {DType::u16, "u16", "ui16", 2, detail::Cat::unsigned_int, 16, false, DType::u16}},
    detail::DTypeRow<uint64_t>{
        {DType::u64, "u64", "ui64", 8, detail::Cat::unsigned_int, 64, false, DType::u64}},
    detail::DTypeRow<void>{
        {DType::bf16, "bf16", "bf16", 2, detail::Cat::floating, 16, true, DType::f32}},
    detail::DTypeRow<void>{
        {DType::f16, "f16", "f16", 2, detail::Cat::floating, 16, true, DType::f32}},
    detail::DTypeRow<void>{{DType::i2, "i2", "i2", 1, detail::Cat::signed_int, 2, true, DType::i8}},
    detail::DTypeRow<void>{{DType::i4, "i4", "i4", 1, detail::Cat::signed_int, 4, true, DType::i8}},
    detail::DTypeRow<void>{
        {DType::u2, "u2", "ui2", 1, detail::Cat::unsigned_int, 2, true, DType::u8}},
    detail::DTypeRow<void>{
        {DType::u4, "u4", "ui4", 1, detail::Cat::unsigned_int, 4, true, DType::u8}},
};

inline constexpr size_t kNumDTypes = std::tuple_size_v<std::remove_cv_t<decltype(kDTypeRows)>>;
// The facts alone, indexed by enumerator.
inline constexpr std::array<DTypeInfo, kNumDTypes> kDTypeTable = std::apply(
    [](const auto&... row) { return std::array<DTypeInfo, kNumDTypes>{row.info...}; }, kDTypeRows);

// The C++ type kernels store dtype D in (void for a storage format).
template <DType D>
struct StorageOf {
  using type = typename std::tuple_element_t<static_cast<size_t>(D),
                                             std::remove_cv_t<decltype(kDTypeRows)>>::storage;
};
template <DType D>
using storage_t = typename StorageOf<D>::type;

namespace detail {
template <size_t... I>
constexpr bool rows_match_enumerators(std::index_sequence<I...>) {
  return ((kDTypeTable[I].dtype == static_cast<DType>(I)) && ...);
}
template <size_t I>
constexpr bool row_is_consistent() {
  using T = storage_t<static_cast<DType>(I)>;
  const DTypeInfo& r = kDTypeTable[I];
  if constexpr (std::is_void_v<T>) {
    return r.storage_format && r.compute != r.dtype &&
           !kDTypeTable[size_t(r.compute)].storage_format &&
           kDTypeTable[size_t(r.compute)].category == r.category;
  } else {
    const Cat c = std::is_floating_point_v<T> ? Cat::floating
                  : r.dtype == DType::bool_   ? Cat::boolean
                  : std::is_signed_v<T>       ? Cat::signed_int
                                              : Cat::unsigned_int;
    return !r.storage_format && r.compute == r.dtype && sizeof(T) == r.size &&
           r.bits == 8 * sizeof(T) && c == r.category;
  }
}
template <size_t... I>
constexpr bool rows_are_consistent(std::index_sequence<I...>) {
  return (row_is_consistent<I>() && ...);
}
}  // namespace detail
namespace detail {
// A switch without a default: -Wswitch (in -Wall) names any enumerator missing here, and once
// it is added, the static_assert below asks for its row.
constexpr bool is_enumerator(DType d) {
  switch (d) {
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::bool_:
    case DType::u32:
    case DType::u8:
    case DType::i8:
    case DType::i16:
    case DType::u16:
    case DType::u64:
    case DType::bf16:
    case DType::f16:
    case DType::i2:
    case DType::i4:
    case DType::u2:
    case DType::u4:
      return true;
  }
  return false;
}
constexpr size_t count_enumerators() {
  size_t n = 0;
  for (int i = 0; i < 256; ++i) n += is_enumerator(static_cast<DType>(i)) ? 1 : 0;
  return n;
}
}  // namespace detail
// Every enumerator has exactly one row, at its own index.
static_assert(kNumDTypes == detail::count_enumerators(),
              "kDTypeRows needs one row per DType enumerator");
static_assert(detail::rows_match_enumerators(std::make_index_sequence<kNumDTypes>{}),
              "row i of kDTypeRows must describe enumerator i");
static_assert(detail::rows_are_consistent(std::make_index_sequence<kNumDTypes>{}),
              "a row's storage type disagrees with its size, bits, category or storage format");

constexpr const DTypeInfo& dtype_info(DType d) { return kDTypeTable[static_cast<size_t>(d)]; }

// Every dtype, for loops over them.
inline constexpr auto kAllDTypes = [] {
  std::array<DType, kNumDTypes> all{};
  for (size_t i = 0; i < kNumDTypes; ++i) all[i] = kDTypeTable[i].dtype;
  return all;
}();

// The dtypes kernels compute in (those with a storage type) are numbered 0..kNumKernelDTypes-1
// by kernel_dtype_index, in table order; -1 for a storage format.
inline constexpr int kNumKernelDTypes = [] {
  int n = 0;
  for (const DTypeInfo& r : kDTypeTable) n += r.storage_format ? 0 : 1;
  return n;
}();
constexpr int kernel_dtype_index(DType d) {
  if (dtype_info(d).storage_format) return -1;
  int i = 0;
  for (size_t k = 0; k < static_cast<size_t>(d); ++k) i += kDTypeTable[k].storage_format ? 0 : 1;
  return i;
}

using Shape = std::vector<int64_t>;

std::string_view dtype_name(DType d);
// Throws drx::ParseError for an unknown name.
DType dtype_from_name(std::string_view name);
// Every dtype's name, for error messages: "f32, f64, bf16, f16, i2, ..., u64 or bool".
std::string dtype_names();
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

// Calls fn(T{}) with T the storage type of `d` (storage_t: uint8_t for bool, char8_t for u8).
// Kernels never see bf16, f16 or the narrow integers: Primitive::evaluate
// widens them (compute_dtype), and this throws for them.
[[noreturn]] void throw_no_storage_type(DType d);

namespace detail {
// Compares d with each enumerator in turn (the compiler turns the chain into a jump table).
// Every branch must return the same type, as in a hand-written switch.
template <size_t I, class Fn, class R = decltype(std::declval<Fn&>()(float{}))>
R dispatch_dtype_from(DType d, Fn& fn) {
  using T = storage_t<static_cast<DType>(I)>;
  if constexpr (!std::is_void_v<T>)
    static_assert(std::is_same_v<decltype(fn(T{})), R>,
                  "dispatch_dtype: the function must return one type for every dtype");
  if constexpr (I + 1 < kNumDTypes)
    if (static_cast<size_t>(d) != I) return dispatch_dtype_from<I + 1>(d, fn);
  if constexpr (std::is_void_v<T>)
    throw_no_storage_type(d);
  else
    return fn(T{});
}
}  // namespace detail

template <class Fn>
decltype(auto) dispatch_dtype(DType d, Fn&& fn) {
  return detail::dispatch_dtype_from<0>(d, fn);
}

}  // namespace drx
