#pragma once
// The kernel-binding seam for elementwise primitives. An elementwise
// primitive states its scalar function once, as the class template argument
// it is built from; from it the primitive instantiates these block loops, and
// a backend (drx/exec) derives its kernels and its fused loops from them. The
// loops are the same function the reference semantics applies, so compiled
// results are bitwise those of Primitive::eval, and a new elementwise
// primitive is compiled without any backend learning its name.
#include <cstdint>
#include <type_traits>

#include "drx/array/dtype.h"

// target_clones for the elementwise block loops (see ScalarKernel): on x86-64 with GCC or
// clang, except in sanitizer builds (whose runtimes and ifuncs do not mix everywhere, and
// which check correctness, not speed; the results are the same bits either way).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DRX_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DRX_SANITIZED 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(DRX_SANITIZED)
#define DRX_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DRX_VECTOR_CLONES
#endif

namespace drx {

// y[j] = f(a[j * SA], b[j * SB]) for j < n, where an operand's step is 1 when
// it is read in full and 0 when it is one scalar; unary loops ignore b.
template <class T, class Out = T>
using BlockLoop = void (*)(const T* a, const T* b, Out* y, int64_t n);

class ScalarKernel {
 public:
  int arity() const { return arity_; }
  // Comparisons: any operand dtype, bool (uint8) results.
  bool predicate() const { return predicate_; }
  // (bf16 and f16 have no loops: they are computed in f32.)
  bool covers(DType d) const {
    const int i = kernel_dtype_index(d);
    return i >= 0 && loops_[i][1][1] != nullptr;
  }

  // The loop for operands of type T read in full (true) or as scalars; null
  // for a dtype the kernel does not cover.
  template <class T, class Out = T>
  BlockLoop<T, Out> loop(bool a_full, bool b_full) const {
    return reinterpret_cast<BlockLoop<T, Out>>(loops_[index<T>()][a_full][b_full]);
  }

  // Loops of a unary function object F over the float dtypes.
  template <class F>
  static ScalarKernel unary() {
    ScalarKernel k(1, false);
    k.set<float, float>(unary_loops<float, F>());
    k.set<double, double>(unary_loops<double, F>());
    return k;
  }
  // Loops of a binary function object F over the float dtypes.
  template <class F>
  static ScalarKernel binary() {
    ScalarKernel k(2, false);
    k.set<float, float>(binary_loops<float, float, F>());
    k.set<double, double>(binary_loops<double, double, F>());
    return k;
  }
  // Loops of a comparison F over every dtype, writing 0 or 1.
  template <class F>
  static ScalarKernel compare() {
    ScalarKernel k(2, true);
    k.set<float, uint8_t>(binary_loops<float, uint8_t, F>());
    k.set<double, uint8_t>(binary_loops<double, uint8_t, F>());
    k.set<int32_t, uint8_t>(binary_loops<int32_t, uint8_t, F>());
    k.set<int64_t, uint8_t>(binary_loops<int64_t, uint8_t, F>());
    k.set<uint8_t, uint8_t>(binary_loops<uint8_t, uint8_t, F>());
    k.set<uint32_t, uint8_t>(binary_loops<uint32_t, uint8_t, F>());
    k.set<char8_t, uint8_t>(binary_loops<char8_t, uint8_t, F>());
    k.set<int8_t, uint8_t>(binary_loops<int8_t, uint8_t, F>());
    k.set<int16_t, uint8_t>(binary_loops<int16_t, uint8_t, F>());
    k.set<uint16_t, uint8_t>(binary_loops<uint16_t, uint8_t, F>());
    k.set<uint64_t, uint8_t>(binary_loops<uint64_t, uint8_t, F>());
    return k;
  }
  // Loops of a unary or binary function object F over the integer dtypes and
  // bool (bitwise operations).
  template <class F>
  static ScalarKernel bitwise_unary() {
    ScalarKernel k(1, false);
    k.set<int32_t, int32_t>(unary_loops<int32_t, F>());
    k.set<int64_t, int64_t>(unary_loops<int64_t, F>());
    k.set<uint32_t, uint32_t>(unary_loops<uint32_t, F>());
    k.set<char8_t, char8_t>(unary_loops<char8_t, F>());
    k.set<int8_t, int8_t>(unary_loops<int8_t, F>());
    k.set<int16_t, int16_t>(unary_loops<int16_t, F>());
    k.set<uint16_t, uint16_t>(unary_loops<uint16_t, F>());
    k.set<uint64_t, uint64_t>(unary_loops<uint64_t, F>());
    k.set<uint8_t, uint8_t>(unary_loops<uint8_t, F>());
    return k;
  }
  template <class F>
  static ScalarKernel bitwise_binary() {
    ScalarKernel k(2, false);
    k.set<int32_t, int32_t>(binary_loops<int32_t, int32_t, F>());
    k.set<int64_t, int64_t>(binary_loops<int64_t, int64_t, F>());
    k.set<uint32_t, uint32_t>(binary_loops<uint32_t, uint32_t, F>());
    k.set<char8_t, char8_t>(binary_loops<char8_t, char8_t, F>());
    k.set<int8_t, int8_t>(binary_loops<int8_t, int8_t, F>());
    k.set<int16_t, int16_t>(binary_loops<int16_t, int16_t, F>());
    k.set<uint16_t, uint16_t>(binary_loops<uint16_t, uint16_t, F>());
    k.set<uint64_t, uint64_t>(binary_loops<uint64_t, uint64_t, F>());
    k.set<uint8_t, uint8_t>(binary_loops<uint8_t, uint8_t, F>());
    return k;
  }

 private:
  using Erased = void (*)();
  ScalarKernel(int arity, bool predicate) : arity_(arity), predicate_(predicate) {}

  // The kernel-dtype index of the dtype whose storage type is T (uint8_t is bool's, char8_t u8's).
  template <class T, size_t I = 0>
  static constexpr int index() {
    if constexpr (std::is_same_v<storage_t<static_cast<DType>(I)>, T>)
      return kernel_dtype_index(static_cast<DType>(I));
    else {
      static_assert(I + 1 < kNumDTypes, "ScalarKernel: T is no dtype's storage type");
      return index<T, I + 1>();
    }
  }

  template <class T, class Out>
  struct Loops {
    BlockLoop<T, Out> at[2][2];
  };
  template <class T, class Out>
  void set(const Loops<T, Out>& l) {
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) loops_[index<T>()][a][b] = reinterpret_cast<Erased>(l.at[a][b]);
  }

  // Each loop is compiled for AVX-512 and AVX2 as well as for baseline x86-64 and the CPU
  // picks (the ifunc of target_clones): the same IEEE operations per element in each (no FMA
  // contraction: -ffp-contract=off), only more of them per instruction, so results are
  // bitwise the same on every machine.
  template <class T, class F, int SA>
  DRX_VECTOR_CLONES static void unary_block(const T* a, const T*, T* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = F{}(a[j * SA]);
  }
  template <class T, class Out, class F, int SA, int SB>
  DRX_VECTOR_CLONES static void binary_block(const T* a, const T* b, Out* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<Out>(F{}(a[j * SA], b[j * SB]));
  }
  template <class T, class F>
  static Loops<T, T> unary_loops() {
    return {{{unary_block<T, F, 0>, unary_block<T, F, 0>},
             {unary_block<T, F, 1>, unary_block<T, F, 1>}}};
  }
  template <class T, class Out, class F>
  static Loops<T, Out> binary_loops() {
    return {{{binary_block<T, Out, F, 0, 0>, binary_block<T, Out, F, 0, 1>},
             {binary_block<T, Out, F, 1, 0>, binary_block<T, Out, F, 1, 1>}}};
  }

  int arity_;
  bool predicate_;
  Erased loops_[kNumKernelDTypes][2][2] = {};
};

}  // namespace drx
