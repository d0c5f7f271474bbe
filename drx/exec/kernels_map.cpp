// map_fn: the body is compiled once, with the outer program, and run per
// client directly on the client's rows of the operands and results (no slice
// copies). Clients are independent, so blocks of them run on the thread pool;
// each client's result is computed by the same code whichever thread runs it,
// so the output is bitwise the same as the sequential loop.
#include <algorithm>
#include <cstddef>
#include <memory>

#include "drx/exec/blas_threads.h"
#include "drx/exec/kernels.h"
#include "drx/exec/thread_pool.h"

namespace drx::exec {
namespace {

class MapKernel : public Kernel {
 public:
  // A placed operand that is broadcast(x) is read as x by every client.
  MapKernel(const Eqn& e, const CompileContext& cx, Executable body)
      : outs_(e.outs), body_(std::move(body)) {
    clients_ = cx.var(e.ins[0]).shape.at(0);
    for (int v : e.ins) {
      const Eqn* b = cx.producer_of(v);
      if (b && b->prim->name() == "broadcast") {
        ins_.push_back(b->ins[0]);
        in_row_.push_back(0);
      } else {
        ins_.push_back(v);
        in_row_.push_back(row_bytes(cx.var(v)));
      }
    }
    for (int v : outs_) out_row_.push_back(row_bytes(cx.var(v)));
  }
  const std::vector<int>& reads() const { return ins_; }

  void run(Frame& f) const override {
    std::vector<const std::byte*> in(ins_.size());
    std::vector<std::byte*> out(outs_.size());
    for (size_t k = 0; k < ins_.size(); ++k) in[k] = static_cast<const std::byte*>(f.in(ins_[k]));
    for (size_t k = 0; k < outs_.size(); ++k) out[k] = static_cast<std::byte*>(f.out(outs_[k]));
    if (clients_ == 0) return;
    auto run_block = [&](int64_t lo, int64_t hi) {
      std::vector<const void*> ip(ins_.size());
      std::vector<void*> op(outs_.size());
      for (int64_t i = lo; i < hi; ++i) {
        const auto row = static_cast<size_t>(i);
        for (size_t k = 0; k < ip.size(); ++k) ip[k] = in[k] + row * in_row_[k];
        for (size_t k = 0; k < op.size(); ++k) op[k] = out[k] + row * out_row_[k];
        body_.run_raw(ip.data(), op.data());
      }
    };
    SingleThreadedBlas one_blas_thread;
    ThreadPool& pool = global_pool();
    const int64_t blocks = std::min<int64_t>(clients_, pool.size());
    if (blocks <= 1) {
      run_block(0, clients_);
      return;
    }
    pool.parallel_for(
        blocks, [&](int64_t b) { run_block(clients_ * b / blocks, clients_ * (b + 1) / blocks); });
  }

 private:
  static size_t row_bytes(const VarInfo& v) {
    return v.shape.empty() || v.shape[0] == 0 ? 0 : v.nbytes / static_cast<size_t>(v.shape[0]);
  }
  std::vector<int> ins_, outs_;
  std::vector<size_t> in_row_, out_row_;
  int64_t clients_ = 0;
  Executable body_;
};

std::optional<KernelSpec> map_fn(const Eqn& e, const CompileContext& cx) {
  if (e.ins.empty() || !e.params.has("body")) return std::nullopt;
  const auto* body = std::get_if<std::shared_ptr<const Program>>(&e.params.at("body", "map_fn"));
  if (!body || !*body) return std::nullopt;
  for (int v : e.ins)
    if (cx.var(v).shape.empty()) return std::nullopt;
  auto kernel = std::make_unique<MapKernel>(e, cx, compile(**body));
  std::vector<int> reads = kernel->reads();
  return KernelSpec{std::move(kernel), Alias::none, std::move(reads)};
}

}  // namespace

void add_mapreduce_kernels(KernelTable& t) { t["map_fn"] = map_fn; }

}  // namespace drx::exec
