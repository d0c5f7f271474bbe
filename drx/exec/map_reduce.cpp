// reduce(map_fn(...)) without the per-client results: when every result of a
// map_fn is read only by reduce_sum/max/min, each shard of clients runs its
// clients one by one and pushes each client's rows straight into the
// reductions' TreeStacks, so a call holds O(log clients) rows per reduction
// instead of all clients' results, and the bits equal the unfused kernels'.
#include <memory>

#include "drx/core/primitive.h"
#include "drx/exec/map_clients.h"
#include "drx/exec/sharding.h"
#include "drx/exec/spares.h"
#include "drx/exec/tree_stack.h"
#include "drx/mapreduce/map_fn_params.h"

namespace drx::exec {
namespace {

struct Reduction {
  size_t result;   // which map_fn result it reduces
  int out;         // the variable it defines
  std::string op;  // the reduction's primitive, for errors
  std::unique_ptr<RowReducer> prototype;
};

class MapReduceKernel : public Kernel {
 public:
  MapReduceKernel(const Eqn& e, const CompileContext& cx, std::vector<Reduction> reductions)
      : operands_(e, cx),
        body_(compile_map_body(*map_body(e), cx)),
        reductions_(std::move(reductions)),
        sharding_(cx.mesh, MapFnParams::of(e).placement) {
    for (int v : e.outs) result_bytes_.push_back(client_row_bytes(cx.var(v)));
  }
  const std::vector<int>& reads() const { return operands_.reads(); }
  ExecStats body_stats() const { return body_.stats(); }

  void run(Frame& f) const override {
    const std::vector<const std::byte*> in = operands_.bases(f);
    const int64_t clients = operands_.clients();
    std::vector<std::unique_ptr<ShardWork>> shards(static_cast<size_t>(sharding_.shards(clients)));
    sharding_.run(clients, [&](int64_t s, int64_t lo, int64_t hi) {
      std::unique_ptr<ShardWork> w = take_work();
      std::vector<const void*> ip(in.size());
      for (int64_t c = lo; c < hi; ++c) {
        operands_.rows(in, c, ip.data());
        body_.run_raw(ip.data(), w->results.data());
        for (size_t r = 0; r < reductions_.size(); ++r)
          w->stacks[r]->push_row(c, w->results[reductions_[r].result]);
      }
      shards[static_cast<size_t>(s)] = std::move(w);
    });
    std::unique_ptr<ShardWork> all = take_work();  // its stacks combine the shards'
    for (size_t r = 0; r < reductions_.size(); ++r) {
      for (const auto& s : shards) all->stacks[r]->push_blocks(*s->stacks[r]);
      sharding_.reduce(*all->stacks[r], f.out(reductions_[r].out), reductions_[r].op);
    }
    for (auto& s : shards) work_.give_back(std::move(s));
    work_.give_back(std::move(all));
  }

 private:
  ClientOperands operands_;
  Executable body_;
  std::vector<Reduction> reductions_;
  std::vector<size_t> result_bytes_;
  Sharding sharding_;

  // A shard's rows for one client's results and its partial reductions, kept between calls.
  struct ShardWork {
    std::vector<std::unique_ptr<std::byte[]>> rows;
    std::vector<void*> results;  // rows[i].get()
    std::vector<std::unique_ptr<RowReducer>> stacks;
  };
  Spares<ShardWork> work_;

  std::unique_ptr<ShardWork> take_work() const {
    auto w = work_.take([&] {
      auto made = std::make_unique<ShardWork>();
      for (size_t bytes : result_bytes_) {  // allocated, not touched: a shard that combines
        made->rows.emplace_back(new std::byte[bytes + 1]);  // never maps their pages
        made->results.push_back(made->rows.back().get());
      }
      for (const Reduction& r : reductions_) made->stacks.push_back(r.prototype->empty_like());
      return made;
    });
    for (auto& s : w->stacks) s->clear();
    return w;
  }
};

// The reduction over a placement that `e` is, if any.
std::optional<ReduceKind> reduce_kind(const Eqn& e) {
  if (!e.prim->placement_aware()) return std::nullopt;
  return e.prim->reduction();
}

// The reductions that are the only readers of map_fn equation i's results,
// or nullopt if something else reads one of them.
std::optional<std::vector<Reduction>> sole_reductions(size_t i, const CompileContext& cx,
                                                      const std::vector<EqnChoice>& choices) {
  const Program& p = cx.program;
  const Eqn& map = p.eqns[i];
  std::vector<int> result_of(p.var_types.size(), -1);
  for (size_t k = 0; k < map.outs.size(); ++k)
    result_of[static_cast<size_t>(map.outs[k])] = static_cast<int>(k);
  for (int v : p.outputs)
    if (result_of[static_cast<size_t>(v)] >= 0) return std::nullopt;
  std::vector<Reduction> found;
  for (size_t j = i + 1; j < p.eqns.size(); ++j) {
    const EqnChoice& c = choices[j];
    if (!c.live) continue;
    bool reads_result = false;
    for (int v : c.reads) reads_result = reads_result || result_of[static_cast<size_t>(v)] >= 0;
    if (!reads_result) continue;
    const Eqn& e = p.eqns[j];
    const std::optional<ReduceKind> kind = reduce_kind(e);
    if (!kind || c.fallback || c.reads.size() != 1 || c.reads[0] != e.ins[0]) return std::nullopt;
    const VarInfo& x = cx.var(e.ins[0]);
    auto prototype = make_row_reducer(x.dtype, *kind, num_elements(cx.var(e.outs[0]).shape));
    if (!prototype) return std::nullopt;
    found.push_back(Reduction{static_cast<size_t>(result_of[static_cast<size_t>(e.ins[0])]),
                              e.outs[0], e.prim->name(), std::move(prototype)});
  }
  if (found.empty()) return std::nullopt;
  return found;
}

}  // namespace

void fuse_map_reduce(const CompileContext& cx, std::vector<EqnChoice>& choices,
                     std::vector<std::unique_ptr<Kernel>>& kernels, ExecStats& stats) {
  const Program& p = cx.program;
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const Eqn& e = p.eqns[i];
    if (!choices[i].live || choices[i].fallback || !map_body(e)) continue;
    std::optional<std::vector<Reduction>> reductions = sole_reductions(i, cx, choices);
    if (!reductions) continue;
    std::vector<int> writes;
    for (const Reduction& r : *reductions) writes.push_back(r.out);
    for (size_t j = i + 1; j < p.eqns.size(); ++j) {
      for (int w : writes)
        if (!p.eqns[j].outs.empty() && p.eqns[j].outs[0] == w) {
          choices[j].live = false;
          kernels[j].reset();
        }
    }
    auto kernel = std::make_unique<MapReduceKernel>(e, cx, std::move(*reductions));
    choices[i].reads = kernel->reads();
    choices[i].writes = std::move(writes);
    const ExecStats body = kernel->body_stats();
    kernels[i] = std::move(kernel);
    ++stats.chunked_maps;
    stats.nested_chunked_maps += body.chunked_maps + body.nested_chunked_maps;
  }
}

}  // namespace drx::exec
