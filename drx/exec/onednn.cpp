#include "drx/exec/onednn.h"

#include "drx/array/error.h"
#include "drx/exec/onednn_engine.h"

#if DRX_HAVE_ONEDNN
#include <omp.h>

#include <memory>
#include <unordered_map>
#endif

namespace drx::exec::onednn {

#if DRX_HAVE_ONEDNN
namespace detail {

void one_thread_here() {
  thread_local const bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine& e = *[] {
    one_thread_here();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

dnnl::memory::data_type data_type(DType d, const std::string& what) {
  if (d == DType::bf16) return dnnl::memory::data_type::bf16;
  if (d == DType::f32) return dnnl::memory::data_type::f32;
  throw Error(what + ": element type " + std::string(dtype_name(d)) + " is not bf16 or f32");
}

}  // namespace detail

namespace {

using detail::cpu_engine;
using detail::one_thread_here;

std::string isa_name(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::sse41:
      return "sse41";
    case I::avx:
      return "avx";
    case I::avx2:
      return "avx2";
    case I::avx2_vnni:
      return "avx2_vnni";
    case I::avx512_mic:
      return "avx512_mic";
    case I::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case I::avx512_core:
      return "avx512_core";
    case I::avx512_core_vnni:
      return "avx512_core_vnni";
    case I::avx512_core_bf16:
      return "avx512_core_bf16";
    case I::avx512_core_amx:
      return "avx512_core_amx";
    case I::all:
      return "all";
  }
  return "isa" + std::to_string(static_cast<int>(isa));
}

// A matrix's descriptor: [rows, cols] with leading dimension ld (transposed: stored as
// [cols, rows]), or `batch` of them one after another.
dnnl::memory::desc matrix(int64_t batch, int64_t rows, int64_t cols, dnnl::memory::data_type t,
                          bool transposed, int64_t ld) {
  const dnnl::memory::dims st = transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  if (batch == 1) return dnnl::memory::desc({rows, cols}, t, st);
  return dnnl::memory::desc({batch, rows, cols}, t, {rows * cols, st[0], st[1]});
}

}  // namespace

struct Matmul::Impl {
  dnnl::memory::desc a, b, c, bias, scratch;
  dnnl::matmul primitive;
  std::string implementation;
};

Matmul::Matmul(const MatmulShape& s) {
  if (s.accumulate && s.out != DType::f32)
    throw Error("oneDNN matmul: accumulation into a " + std::string(dtype_name(s.out)) +
                " result (expected an f32 result)");
  one_thread_here();
  using dt = dnnl::memory::data_type;
  auto impl = std::make_shared<Impl>();
  if (s.batch > 1 &&
      (s.lda != (s.trans_a ? s.m : s.k) || s.ldb != (s.trans_b ? s.k : s.n) || s.ldc != s.n))
    throw Error("oneDNN matmul: a batch of " + std::to_string(s.batch) +
                " products needs whole operands (leading dimensions of the shapes)");
  impl->a = matrix(s.batch, s.m, s.k, dt::bf16, s.trans_a, s.lda);
  impl->b = matrix(s.batch, s.k, s.n, dt::bf16, s.trans_b, s.ldb);
  impl->c =
      matrix(s.batch, s.m, s.n, detail::data_type(s.out, "oneDNN matmul result"), false, s.ldc);
  if (s.bias)  // one row, broadcast over the rows (and the batch)
    impl->bias = s.batch == 1 ? dnnl::memory::desc({1, s.n}, dt::f32, {s.n, 1})
                              : dnnl::memory::desc({1, 1, s.n}, dt::f32, {s.n, s.n, 1});
  dnnl::primitive_attr attr;
  // Each call brings its own scratch space, so that threads may run one primitive at once.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (s.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::desc desc = s.bias
                                        ? dnnl::matmul::desc(impl->a, impl->b, impl->bias, impl->c)
                                        : dnnl::matmul::desc(impl->a, impl->b, impl->c);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    impl->scratch = pd.scratchpad_desc();
    impl->implementation = pd.impl_info_str();
    impl->primitive = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Error("oneDNN matmul: [" + std::to_string(s.m) + ", " + std::to_string(s.k) + "] x [" +
                std::to_string(s.k) + ", " + std::to_string(s.n) + "] -> " +
                std::string(dtype_name(s.out)) + " was refused: " + e.what());
  }
  impl_ = std::move(impl);
}

void Matmul::run(const void* a, const void* b, void* c, const float* bias) const {
  one_thread_here();
  // A stream and scratch space per call (both cheap next to a product), not thread_local
  // objects: the profile's report times products at exit, after those are destroyed.
  dnnl::engine& e = cpu_engine();
  dnnl::stream stream(e);
  const Impl& m = *impl_;
  // Not zero-filled: oneDNN writes its scratch space before reading it.
  const auto scratch = std::make_unique_for_overwrite<unsigned char[]>(m.scratch.get_size());
  dnnl::memory am(m.a, e, const_cast<void*>(a)), bm(m.b, e, const_cast<void*>(b)), cm(m.c, e, c),
      sm(m.scratch, e, scratch.get());
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(m.bias, e, const_cast<float*>(bias)));
  m.primitive.execute(stream, args);
  stream.wait();
}

const std::string& Matmul::implementation() const { return impl_->implementation; }

bool Matmul::native() const { return impl_->implementation.rfind("ref", 0) != 0; }

bool available() { return true; }

std::string version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string isa() {
  cpu_engine();  // the ISA is fixed once oneDNN has started
  return isa_name(dnnl::get_effective_cpu_isa());
}

#else  // built without oneDNN

struct Matmul::Impl {};

Matmul::Matmul(const MatmulShape&) {
  throw Error("oneDNN matmul: drx was built without oneDNN (DRX_ONEDNN=OFF)");
}
void Matmul::run(const void*, const void*, void*, const float*) const {}
const std::string& Matmul::implementation() const {
  static const std::string none = "none";
  return none;
}
bool Matmul::native() const { return false; }
bool available() { return false; }
std::string version() { return "none"; }
std::string isa() { return "none"; }

#endif

MatmulShape MatmulShape::rows_of(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                                 int64_t rows, DType out) {
  MatmulShape s;
  s.m = rows;
  s.n = n;
  s.k = k;
  s.lda = trans_a ? m : k;
  s.ldb = trans_b ? k : n;
  s.ldc = n;
  s.trans_a = trans_a;
  s.trans_b = trans_b;
  s.out = out;
  return s;
}

std::string kernel_fingerprint() {
  return available() ? "onednn " + version() + " " + isa() : "drx loops";
}

}  // namespace drx::exec::onednn
