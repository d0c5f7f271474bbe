// map_fn: clients are independent, so each shard of them (a device's, or a
// thread's) runs on its own thread; each client's result is computed by the
// same code whichever thread runs it, so the output is bitwise the same as
// the sequential loop.
#include <algorithm>
#include <memory>

#include "drx/exec/kernels.h"
#include "drx/exec/map_clients.h"
#include "drx/exec/sharding.h"
#include "drx/mapreduce/map_fn_params.h"
#include "drx/mapreduce/primitives.h"

namespace drx::exec {

size_t client_row_bytes(const VarInfo& v) {
  return v.shape.empty() || v.shape[0] == 0 ? 0 : v.nbytes / static_cast<size_t>(v.shape[0]);
}

const Program* map_body(const Eqn& e) {
  return e.prim == &prims::map_fn() ? MapFnParams::of(e).body.get() : nullptr;
}

Executable compile_map_body(const Program& body, const CompileContext& cx) {
  CompileOptions options = cx.options;
  options.map_body = true;
  return compile(body, cx.mesh.in_process(), options);
}

ClientOperands::ClientOperands(const Eqn& e, const CompileContext& cx)
    : clients_(cx.var(e.ins[0]).shape.at(0)) {
  for (int v : e.ins) {
    const Eqn* b = cx.producer_of(v);
    if (b && b->prim == &prims::broadcast()) {
      vars_.push_back(b->ins[0]);
      row_.push_back(0);
    } else {
      vars_.push_back(v);
      row_.push_back(client_row_bytes(cx.var(v)));
    }
  }
}

std::vector<const std::byte*> ClientOperands::bases(const Frame& f) const {
  std::vector<const std::byte*> b(vars_.size());
  for (size_t k = 0; k < vars_.size(); ++k) b[k] = static_cast<const std::byte*>(f.in(vars_[k]));
  return b;
}

namespace {

class MapKernel : public Kernel {
 public:
  MapKernel(const Eqn& e, const CompileContext& cx, Executable body)
      : operands_(e, cx),
        outs_(e.outs),
        body_(std::move(body)),
        sharding_(cx.mesh, MapFnParams::of(e).placement) {
    for (int v : outs_) out_row_.push_back(client_row_bytes(cx.var(v)));
  }
  const std::vector<int>& reads() const { return operands_.reads(); }

  void run(Frame& f) const override {
    const std::vector<const std::byte*> in = operands_.bases(f);
    std::vector<std::byte*> out(outs_.size());
    for (size_t k = 0; k < outs_.size(); ++k) out[k] = static_cast<std::byte*>(f.out(outs_[k]));
    if (sharding_.spans_processes()) clear_other_processes_rows(out);
    sharding_.run(operands_.clients(), [&](int64_t, int64_t lo, int64_t hi) {
      std::vector<const void*> ip(in.size());
      std::vector<void*> op(outs_.size());
      for (int64_t c = lo; c < hi; ++c) {
        operands_.rows(in, c, ip.data());
        for (size_t k = 0; k < op.size(); ++k)
          op[k] = out[k] + static_cast<size_t>(c) * out_row_[k];
        body_.run_raw(ip.data(), op.data());
      }
    });
  }

 private:
  // Other processes compute their clients' rows; here those rows read as 0.
  void clear_other_processes_rows(const std::vector<std::byte*>& out) const {
    const auto [first, end] = sharding_.local_clients(operands_.clients());
    const auto rows = [](int64_t n, size_t bytes) { return static_cast<size_t>(n) * bytes; };
    for (size_t k = 0; k < out.size(); ++k) {
      std::fill_n(out[k], rows(first, out_row_[k]), std::byte{0});
      std::fill_n(out[k] + rows(end, out_row_[k]), rows(operands_.clients() - end, out_row_[k]),
                  std::byte{0});
    }
  }

  ClientOperands operands_;
  std::vector<int> outs_;
  std::vector<size_t> out_row_;
  Executable body_;
  Sharding sharding_;
};

std::optional<KernelSpec> map_fn(const Eqn& e, const CompileContext& cx) {
  // A missing or mistyped parameter throws here, at compile, rather than
  // leaving the equation to the interpreter.
  const Program* body = map_body(e);
  if (e.ins.empty()) return std::nullopt;
  for (int v : e.ins)
    if (cx.var(v).shape.empty()) return std::nullopt;
  auto kernel = std::make_unique<MapKernel>(e, cx, compile_map_body(*body, cx));
  std::vector<int> reads = kernel->reads();
  return KernelSpec{std::move(kernel), Alias::none, std::move(reads)};
}

}  // namespace

void add_mapreduce_kernels(KernelTable& t) { t[&prims::map_fn()] = map_fn; }

}  // namespace drx::exec
