#pragma once
// Who owns the BLAS library's thread count, and what drx says about it.
//
// drx runs each product as single-threaded BLAS calls on its own threads: a product at the top
// level of a program as blocks of rows on drx's pool, a product inside a map_fn body as one call
// per client on the client's thread (which path is fixed when the product is compiled:
// CompileOptions::map_body). OpenBLAS rounds differently as its own thread count changes (its
// threads split a call's work), so drx's bits are independent of that count only while it is 1.
#include <functional>
#include <string>

namespace drx {

// Lets drx set OpenBLAS's process-wide thread count: to 1 now, and back to 1 before a product if
// something changed it since; switching control off puts back the count found when it was
// switched on. Off by default: a program embedding drx, or a Python process whose NumPy or
// PyTorch share the same OpenBLAS, keeps its own setting. The drx tool, the benchmarks and the
// tests switch it on. Works with OpenBLAS; with a BLAS without thread control it does nothing.
void set_blas_thread_control(bool on);
bool blas_thread_control();

namespace exec {

// What drx says when it compiles a product while OpenBLAS has more than one thread that drx
// may not change; empty when there is nothing to say.
std::string blas_threads_note();
// Says blas_threads_note() on stderr, the first time it is not empty in this process.
void note_blas_threads_once();
// Before a product's BLAS calls: with control, puts OpenBLAS back on one thread if something
// changed its count (one read; a write only then); without control, nothing.
void keep_blas_single_threaded();
// Whether drx may set OpenBLAS's thread count now (control on, and a BLAS with thread control).
bool blas_threads_settable();
// Runs fn with OpenBLAS on n threads, then puts it back on one: for measuring the library's
// own multithreaded rate (exec::roofline), while no product runs. Returns false without running
// fn when !blas_threads_settable().
bool run_with_blas_threads(int n, const std::function<void()>& fn);

}  // namespace exec
}  // namespace drx
