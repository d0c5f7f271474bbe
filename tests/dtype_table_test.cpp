// The dtype table (drx/array/dtype.h) against facts written out by hand here, and against the C++
// types' own sizeof and numeric_limits: the table is the one place the dtype functions read, so
// each of its columns is checked independently of it.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "drx/array/dtype.h"
#include "drx/array/error.h"
#include "drx/core/lowering.h"
#include "drx/core/program_text.h"
#include "drx/core/scalar_kernel.h"

namespace drx {
namespace {

enum class Kind { f, s, u, b };

struct Expected {
  DType d;
  const char* name;
  const char* mlir;
  size_t size;
  Kind kind;
  int bits;
  bool storage_format;
  DType compute;
};

// Written out from the StableHLO spec and the comments of dtype.h, not from the table.
const std::vector<Expected>& expected() {
  static const std::vector<Expected> rows = {
      {DType::f32, "f32", "f32", 4, Kind::f, 32, false, DType::f32},
      {DType::f64, "f64", "f64", 8, Kind::f, 64, false, DType::f64},
      {DType::i32, "i32", "i32", 4, Kind::s, 32, false, DType::i32},
      {DType::i64, "i64", "i64", 8, Kind::s, 64, false, DType::i64},
      {DType::bool_, "bool", "i1", 1, Kind::b, 8, false, DType::bool_},
      {DType::u32, "u32", "ui32", 4, Kind::u, 32, false, DType::u32},
      {DType::u8, "u8", "ui8", 1, Kind::u, 8, false, DType::u8},
      {DType::i8, "i8", "i8", 1, Kind::s, 8, false, DType::i8},
      {DType::i16, "i16", "i16", 2, Kind::s, 16, false, DType::i16},
      {DType::u16, "u16", "ui16", 2, Kind::u, 16, false, DType::u16},
      {DType::u64, "u64", "ui64", 8, Kind::u, 64, false, DType::u64},
      {DType::bf16, "bf16", "bf16", 2, Kind::f, 16, true, DType::f32},
      {DType::f16, "f16", "f16", 2, Kind::f, 16, true, DType::f32},
      {DType::i2, "i2", "i2", 1, Kind::s, 2, true, DType::i8},
      {DType::i4, "i4", "i4", 1, Kind::s, 4, true, DType::i8},
      {DType::u2, "u2", "ui2", 1, Kind::u, 2, true, DType::u8},
      {DType::u4, "u4", "ui4", 1, Kind::u, 4, true, DType::u8},
  };
  return rows;
}

TEST(DTypeTable, EveryDTypeHasItsFacts) {
  ASSERT_EQ(expected().size(), 17u);
  ASSERT_EQ(std::size(kAllDTypes), expected().size());
  ASSERT_EQ(kNumDTypes, expected().size());
  std::set<DType> seen;
  for (const Expected& e : expected()) {
    SCOPED_TRACE(e.name);
    seen.insert(e.d);
    EXPECT_EQ(dtype_name(e.d), e.name);
    EXPECT_EQ(mlir_element_type(e.d), e.mlir);
    EXPECT_EQ(dtype_size(e.d), e.size);
    EXPECT_EQ(is_floating(e.d), e.kind == Kind::f);
    EXPECT_EQ(is_integer(e.d), e.kind == Kind::s || e.kind == Kind::u);
    EXPECT_EQ(is_unsigned(e.d), e.kind == Kind::u);
    EXPECT_EQ(is_narrow_integer(e.d), is_integer(e.d) && e.bits < 8);
    EXPECT_EQ(integer_bits(e.d), e.bits);
    EXPECT_EQ(is_storage_format(e.d), e.storage_format);
    EXPECT_EQ(compute_dtype(e.d), e.compute);
    EXPECT_EQ(dtype_info(e.d).dtype, e.d);
  }
  EXPECT_EQ(seen.size(), expected().size()) << "a dtype is listed twice";
  for (DType d : kAllDTypes) EXPECT_TRUE(seen.count(d)) << dtype_name(d);
}

// The storage types, checked against what the C++ implementation says about them.
template <DType D, class T, bool IsBool = false>
void expect_storage() {
  static_assert(std::is_same_v<storage_t<D>, T>);
  SCOPED_TRACE(std::string(dtype_name(D)));
  EXPECT_EQ(sizeof(T), dtype_size(D));
  EXPECT_EQ(std::is_floating_point_v<T>, is_floating(D));
  EXPECT_EQ(std::numeric_limits<T>::is_signed && !std::is_floating_point_v<T>,
            is_integer(D) && !is_unsigned(D));
  if (!std::is_floating_point_v<T> && !IsBool) {
    EXPECT_EQ(integer_bits(D),
              std::numeric_limits<T>::digits + (std::numeric_limits<T>::is_signed ? 1 : 0));
  }
  // dispatch_dtype hands the same type over.
  EXPECT_TRUE(dispatch_dtype(D, [](auto t) { return std::is_same_v<decltype(t), T>; }));
}

TEST(DTypeTable, StorageTypesAreTheKernelsCTypes) {
  expect_storage<DType::f32, float>();
  expect_storage<DType::f64, double>();
  expect_storage<DType::i32, int32_t>();
  expect_storage<DType::i64, int64_t>();
  expect_storage<DType::bool_, uint8_t, true>();
  expect_storage<DType::u32, uint32_t>();
  expect_storage<DType::u8, char8_t>();
  expect_storage<DType::i8, int8_t>();
  expect_storage<DType::i16, int16_t>();
  expect_storage<DType::u16, uint16_t>();
  expect_storage<DType::u64, uint64_t>();
  static_assert(std::is_void_v<storage_t<DType::bf16>> && std::is_void_v<storage_t<DType::f16>>);
  static_assert(std::is_void_v<storage_t<DType::i2>> && std::is_void_v<storage_t<DType::u4>>);
  for (DType d : kAllDTypes) {
    if (is_storage_format(d)) {
      EXPECT_THROW(dispatch_dtype(d, [](auto) { return 0; }), Error) << dtype_name(d);
    }
  }
}

TEST(DTypeTable, KernelIndexIsABijectionOntoTheKernelDTypes) {
  std::set<int> indices;
  int kernel = 0;
  for (DType d : kAllDTypes) {
    const int i = kernel_dtype_index(d);
    if (is_storage_format(d)) {
      EXPECT_EQ(i, -1) << dtype_name(d);
      continue;
    }
    ++kernel;
    EXPECT_GE(i, 0) << dtype_name(d);
    EXPECT_LT(i, kNumKernelDTypes) << dtype_name(d);
    EXPECT_TRUE(indices.insert(i).second) << dtype_name(d) << " shares index " << i;
  }
  EXPECT_EQ(kernel, 11);  // 17 dtypes less bf16, f16, i2, i4, u2, u4
  EXPECT_EQ(kNumKernelDTypes, kernel);
  EXPECT_EQ(static_cast<int>(indices.size()), kNumKernelDTypes);
}

TEST(DTypeTable, NamesRoundTripAndUnknownNamesAreParseErrors) {
  for (DType d : kAllDTypes) EXPECT_EQ(dtype_from_name(dtype_name(d)), d) << dtype_name(d);
  for (const char* bad : {"f33", "", "F32", "bool_", "ui8", "int32"}) {
    try {
      dtype_from_name(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ParseError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("unknown dtype '" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("f32, f64, bf16, f16, i2, i4, i8, i16, i32, i64, u2, u4, u8, u16, u32, "
                          "u64 or bool"),
                std::string::npos)
          << what;
    }
  }
}

// The program-text parser used to list seven of the dtypes it reads in its error.
TEST(DTypeTable, ProgramTextErrorListsEveryDType) {
  try {
    parse_program("program @m (%0: f33[2]) -> () {\n  return\n}");
    ADD_FAILURE() << "f33 was accepted";
  } catch (const ParseError& e) {
    const std::string what = e.what();
    for (DType d : kAllDTypes)
      EXPECT_NE(what.find(std::string(dtype_name(d))), std::string::npos)
          << dtype_name(d) << " missing from: " << what;
  }
}

struct Less {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct Neg {
  template <class T>
  T operator()(T a) const {
    return -a;
  }
};

// ScalarKernel's table is indexed by kernel_dtype_index: every kernel dtype has its own slot.
TEST(DTypeTable, ScalarKernelCoversEachKernelDTypeInItsOwnSlot) {
  const ScalarKernel k = ScalarKernel::compare<Less>();
  for (DType d : kAllDTypes) EXPECT_EQ(k.covers(d), !is_storage_format(d)) << dtype_name(d);
  const ScalarKernel u = ScalarKernel::unary<Neg>();
  for (DType d : kAllDTypes)
    EXPECT_EQ(u.covers(d), d == DType::f32 || d == DType::f64) << dtype_name(d);
  const float a[2] = {1.f, 3.f}, b[2] = {2.f, 2.f};
  uint8_t y[2] = {9, 9};
  k.loop<float, uint8_t>(true, true)(a, b, y, 2);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], 0);
  const int64_t ia[2] = {5, 1}, ib[1] = {3};
  k.loop<int64_t, uint8_t>(true, false)(ia, ib, y, 2);
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 1);
}

}  // namespace
}  // namespace drx
