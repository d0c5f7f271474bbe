// Static buffer planning: which variables share memory, decided once per
// program so that a call allocates nothing but its results.
//
// A pooled buffer is freed for reuse after the last equation that reads any
// variable living in it (views extend their operand's life). An elementwise
// result takes over the buffer of an operand that dies at that equation and
// has exactly its type, so chains like exp(x * y + z) run in one buffer.
#include <algorithm>
#include <map>
#include <utility>
#include <variant>

#include "drx/exec/plan.h"

namespace drx::exec {
namespace {

size_t at(int v) { return static_cast<size_t>(v); }

// Equation indices per variable, over live equations only (-1: none).
struct Liveness {
  std::vector<int> last;  // the last equation reading it
  std::vector<int> def;   // the equation writing it
  std::vector<bool> is_output;
  std::vector<bool> is_input;
};

Liveness find_liveness(const Program& p, const std::vector<EqnChoice>& eqns, size_t n) {
  Liveness l{std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<bool>(n, false),
             std::vector<bool>(n, false)};
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const EqnChoice& c = eqns[i];
    if (!c.live) continue;
    for (int v : c.reads) l.last[at(v)] = static_cast<int>(i);
    for (int v : written_by(p.eqns[i], c)) l.def[at(v)] = static_cast<int>(i);
  }
  for (int v : p.outputs) l.is_output[at(v)] = true;
  for (int v : p.inputs) l.is_input[at(v)] = true;
  return l;
}

Storage result_storage(const EqnChoice& c, size_t k, bool is_output) {
  if (is_output) return Storage::output;
  if (c.fallback) return Storage::dynamic;
  if (c.alias == Alias::view && k == 0) return Storage::view;
  return Storage::pooled;
}

// Sets each variable's storage class; returns, per variable, the variable whose storage it
// lives in (itself unless it is a view).
std::vector<int> assign_storage(const Program& p, const std::vector<EqnChoice>& eqns,
                                const Liveness& l, std::vector<VarInfo>& vars) {
  std::vector<int> root(vars.size());
  for (size_t v = 0; v < vars.size(); ++v) root[v] = static_cast<int>(v);
  for (int v : p.inputs) vars[at(v)].storage = Storage::input;
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const EqnChoice& c = eqns[i];
    if (!c.live) continue;
    const std::vector<int>& outs = written_by(p.eqns[i], c);
    for (size_t k = 0; k < outs.size(); ++k) {
      const size_t o = at(outs[k]);
      vars[o].storage = result_storage(c, k, l.is_output[o]);
      // Operands are defined earlier, so their roots are final: views of views share one root.
      if (vars[o].storage == Storage::view) root[o] = root[at(c.reads.at(0))];
    }
  }
  return root;
}

// Per root, the equation after which its storage is no longer read.
std::vector<int> storage_ends(const Liveness& l, const std::vector<int>& root, int num_eqns) {
  std::vector<int> end(root.size(), -1);
  for (size_t v = 0; v < root.size(); ++v) {
    const int until = l.is_output[v] ? num_eqns : std::max(l.last[v], l.def[v]);
    int& e = end[at(root[v])];
    e = std::max(e, until);
  }
  return end;
}

// Gives pooled results buffers in program order, reusing those of dead storages.
class SlotAssigner {
 public:
  SlotAssigner(Plan& plan, const std::vector<int>& root, const std::vector<int>& end)
      : plan_(plan), vars_(plan.vars), root_(root), end_(end), released_(root.size(), false) {}

  void assign(int i, const Eqn& e, const EqnChoice& c) {
    const std::vector<int>& outs = written_by(e, c);
    for (int o : outs) assign_result(i, c, o, o == outs[0]);
    for (int v : c.reads)
      if (end_[at(root_[at(v)])] == i) release(root_[at(v)]);
    for (int o : outs)
      if (end_[at(o)] == i) release(o);
  }

 private:
  using Key = std::pair<DType, Shape>;

  Key key_of(int buffer) const {
    const VarInfo& b = vars_[at(plan_.buffer_vars[at(buffer)])];
    return Key(b.dtype, b.shape);
  }

  void assign_result(int i, const EqnChoice& c, int o, bool first) {
    VarInfo& out = vars_[at(o)];
    if (out.storage == Storage::view) out.buffer = vars_[at(root_[at(o)])].buffer;
    if (out.storage != Storage::pooled) return;
    int buffer = -1;
    if (c.alias == Alias::elementwise || (c.alias == Alias::first && first))
      buffer = take_dying_operand(i, c, Key(out.dtype, out.shape));
    out.buffer = buffer >= 0 ? buffer : free_or_new(o, Key(out.dtype, out.shape));
  }

  // The buffer of an operand whose storage dies at equation i and has type `key`, handed
  // over to the result (not freed), or -1.
  int take_dying_operand(int i, const EqnChoice& c, const Key& key) {
    const size_t candidates = c.alias == Alias::first ? 1 : c.reads.size();
    for (size_t k = 0; k < candidates && k < c.reads.size(); ++k) {
      const int r = root_[at(c.reads[k])];
      // Alias::first kernels read their other operands in any order.
      if (c.alias == Alias::first && read_after_first(c, r)) continue;
      const VarInfo& in = vars_[at(r)];
      if (in.storage != Storage::pooled || end_[at(r)] != i || released_[at(r)] ||
          key_of(in.buffer) != key)
        continue;
      released_[at(r)] = true;
      ++plan_.stats.in_place;
      return in.buffer;
    }
    return -1;
  }

  bool read_after_first(const EqnChoice& c, int r) const {
    for (size_t j = 1; j < c.reads.size(); ++j)
      if (root_[at(c.reads[j])] == r) return true;
    return false;
  }

  int free_or_new(int o, const Key& key) {
    auto it = free_buffers_.find(key);
    if (it != free_buffers_.end() && !it->second.empty()) {
      const int buffer = it->second.back();
      it->second.pop_back();
      return buffer;
    }
    plan_.buffer_vars.push_back(o);
    return static_cast<int>(plan_.buffer_vars.size()) - 1;
  }

  void release(int r) {
    const VarInfo& info = vars_[at(r)];
    if (info.storage != Storage::pooled || released_[at(r)]) return;
    released_[at(r)] = true;
    free_buffers_[key_of(info.buffer)].push_back(info.buffer);
  }

  Plan& plan_;
  std::vector<VarInfo>& vars_;
  const std::vector<int>& root_;
  const std::vector<int>& end_;
  std::vector<bool> released_;  // storages whose buffer went back to the pool or to a result
  std::map<Key, std::vector<int>> free_buffers_;
};

// Arrays held per call (arguments, fallback results, views) are dropped
// after their last reader, so memory follows the program's liveness.
void plan_releases(Plan& plan, std::vector<EqnChoice>& eqns, const Liveness& l) {
  plan.transient.clear();
  for (size_t v = 0; v < plan.vars.size(); ++v) {
    const Storage s = plan.vars[v].storage;
    if (s == Storage::pooled || s == Storage::constant || (l.def[v] < 0 && !l.is_input[v]))
      continue;
    plan.transient.push_back(static_cast<int>(v));
    if (l.is_output[v] || s == Storage::output) continue;
    const int last = std::max(l.last[v], l.def[v]);
    if (last >= 0) eqns[at(last)].release.push_back(static_cast<int>(v));
  }
}

// A large pooled buffer that dies before equations running sub-programs (a loop's
// backward scan, a map_fn) gives its pages back, since those run in workspaces of their
// own that cannot reuse it; one that dies at the end stays resident for the next call
// (re-faulting it would cost more than it holds). Smaller buffers always stay.

bool runs_sub_programs(const Eqn& e) {
  for (const auto& [key, attr] : e.params.items())
    if (std::holds_alternative<std::shared_ptr<const Program>>(attr)) return true;
  return false;
}

void plan_discards(Plan& plan, std::vector<EqnChoice>& eqns, const std::vector<int>& root,
                   const std::vector<int>& end, int num_eqns) {
  std::vector<int> buffer_end(plan.buffer_vars.size(), -1);
  for (size_t v = 0; v < plan.vars.size(); ++v) {
    const VarInfo& info = plan.vars[v];
    if (info.storage != Storage::pooled || root[v] != static_cast<int>(v)) continue;
    int& e = buffer_end[at(info.buffer)];
    e = std::max(e, end[v]);
  }
  // later_sub[i]: a live equation after i runs sub-programs.
  std::vector<bool> later_sub(at(num_eqns) + 1, false);
  for (int i = num_eqns - 1; i >= 0; --i)
    later_sub[at(i)] = later_sub[at(i + 1)] || (i + 1 < num_eqns && eqns[at(i + 1)].live &&
                                                runs_sub_programs(plan.program.eqns[at(i + 1)]));
  for (size_t b = 0; b < buffer_end.size(); ++b) {
    const VarInfo& info = plan.vars[at(plan.buffer_vars[b])];
    const int last = buffer_end[b];
    if (info.nbytes >= kDiscardBytes && last >= 0 && last < num_eqns && later_sub[at(last)])
      eqns[at(last)].discard.push_back(plan.buffer_vars[b]);
  }
}

// Whether the kernel of eqns[at] may write its result over input variable `in` while reading
// it: an elementwise kernel reads each element before writing it; an Alias::first kernel (a
// product accumulating into its first operand) when `in` is that operand and no other.
bool writes_over_safely(const EqnChoice& c, int in, const std::vector<int>& root) {
  if (c.fallback) return false;
  if (c.alias == Alias::elementwise) return true;
  if (c.alias != Alias::first || c.reads.empty() || root[at(c.reads[0])] != in) return false;
  for (size_t k = 1; k < c.reads.size(); ++k)
    if (root[at(c.reads[k])] == in) return false;
  return true;
}

void plan_in_place_outputs(Plan& plan, const std::vector<EqnChoice>& eqns, const Liveness& l,
                           const std::vector<int>& root, const std::vector<int>& end) {
  const Program& p = plan.program;
  plan.output_may_overwrite.assign(p.outputs.size(), {});
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const int o = p.outputs[k];
    const int def = l.def[at(o)];
    if (def < 0 || plan.vars[at(o)].storage != Storage::output ||
        std::count(p.outputs.begin(), p.outputs.end(), o) != 1)
      continue;
    for (size_t j = 0; j < p.inputs.size(); ++j) {
      const int in = p.inputs[j];
      if (plan.vars[at(in)].nbytes != plan.vars[at(o)].nbytes || l.is_output[at(in)]) continue;
      // A view of the input that is an output is copied out at its own equation, a read.
      const int last = end[at(in)];
      if (last < def || (last == def && writes_over_safely(eqns[at(def)], in, root)))
        plan.output_may_overwrite[k].push_back(static_cast<int>(j));
    }
  }
}

}  // namespace

void plan_buffers(Plan& plan, std::vector<EqnChoice>& eqns) {
  const Program& p = plan.program;
  const int num_eqns = static_cast<int>(p.eqns.size());
  const Liveness l = find_liveness(p, eqns, plan.vars.size());
  const std::vector<int> root = assign_storage(p, eqns, l, plan.vars);
  const std::vector<int> end = storage_ends(l, root, num_eqns);
  SlotAssigner slots(plan, root, end);
  for (int i = 0; i < num_eqns; ++i)
    if (eqns[at(i)].live) slots.assign(i, p.eqns[at(i)], eqns[at(i)]);
  plan.stats.buffers = plan.buffer_vars.size();
  plan_releases(plan, eqns, l);
  plan_discards(plan, eqns, root, end, num_eqns);
  plan_in_place_outputs(plan, eqns, l, root, end);
}

}  // namespace drx::exec
