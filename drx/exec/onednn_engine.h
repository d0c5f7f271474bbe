#pragma once
// Private to drx/exec/onednn*.cpp: what oneDNN's product and convolution wrappers share (only
// in builds with oneDNN).
#if DRX_HAVE_ONEDNN
#include <dnnl.hpp>
#include <string>

#include "drx/array/dtype.h"

namespace drx::exec::onednn::detail {

// oneDNN runs a primitive on as many OpenMP threads as the creating thread's nthreads-var
// allows: one, on every thread drx creates or runs one on.
void one_thread_here();
// The CPU engine (never destroyed: the profile's report, written at exit, may still time
// products).
dnnl::engine& cpu_engine();
// bf16 or f32; else throws drx::Error naming `what`.
dnnl::memory::data_type data_type(DType d, const std::string& what);

}  // namespace drx::exec::onednn::detail
#endif
