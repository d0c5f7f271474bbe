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

#include "drx/exec/plan.h"

namespace drx::exec {

// TEMP-DUMP-BEGIN
}  // namespace drx::exec
#include <cstdio>
#include <cstdlib>
#include <mutex>
namespace drx::exec {
static void temp_dump_plan(const Plan& plan, const std::vector<EqnChoice>& eqns) {
  const char* f = std::getenv("DRX_PLAN_DUMP");
  if (!f) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  FILE* out = std::fopen(f, "a");
  std::fprintf(out, "plan vars=%zu eqns=%zu buffers=%zu in_place=%zu\n", plan.vars.size(),
               eqns.size(), (size_t)plan.stats.buffers, (size_t)plan.stats.in_place);
  for (const VarInfo& v : plan.vars) std::fprintf(out, " %d:%d", (int)v.storage, v.buffer);
  std::fprintf(out, "\nbv");
  for (int v : plan.buffer_vars) std::fprintf(out, " %d", v);
  std::fprintf(out, "\ntr");
  for (int v : plan.transient) std::fprintf(out, " %d", v);
  std::fprintf(out, "\nrel");
  for (const EqnChoice& c : eqns) {
    std::fprintf(out, " [");
    for (int v : c.release) std::fprintf(out, " %d", v);
    std::fprintf(out, "]");
  }
  std::fprintf(out, "\n");
  std::fclose(out);
}
// TEMP-DUMP-END

void plan_buffers(Plan& plan, std::vector<EqnChoice>& eqns) {
  const Program& p = plan.program;
  std::vector<VarInfo>& vars = plan.vars;
  const size_t n = vars.size();
  const int num_eqns = static_cast<int>(p.eqns.size());

  std::vector<int> last(n, -1), def(n, -1);
  std::vector<bool> is_output(n, false);
  for (int i = 0; i < num_eqns; ++i) {
    const EqnChoice& c = eqns[static_cast<size_t>(i)];
    if (!c.live) continue;
    for (int v : c.reads) last[static_cast<size_t>(v)] = i;
    for (int v : written_by(p.eqns[static_cast<size_t>(i)], c)) def[static_cast<size_t>(v)] = i;
  }
  for (int v : p.outputs) is_output[static_cast<size_t>(v)] = true;

  // Storage classes, and the variable whose storage each one lives in.
  std::vector<int> root(n);
  for (size_t v = 0; v < n; ++v) root[v] = static_cast<int>(v);
  for (int v : p.inputs) vars[static_cast<size_t>(v)].storage = Storage::input;
  for (int i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[static_cast<size_t>(i)];
    const EqnChoice& c = eqns[static_cast<size_t>(i)];
    if (!c.live) continue;
    const std::vector<int>& outs = written_by(e, c);
    for (size_t k = 0; k < outs.size(); ++k) {
      const size_t o = static_cast<size_t>(outs[k]);
      Storage& s = vars[o].storage;
      if (is_output[o]) {
        s = Storage::output;
      } else if (c.fallback) {
        s = Storage::dynamic;
      } else if (c.alias == Alias::view && k == 0) {
        s = Storage::view;
        root[o] = root[static_cast<size_t>(c.reads.at(0))];
      } else {
        s = Storage::pooled;
      }
    }
  }

  // The equation after which a storage is no longer read.
  std::vector<int> end(n, -1);
  for (size_t v = 0; v < n; ++v) {
    int until = is_output[v] ? num_eqns : std::max(last[v], def[v]);
    int& e = end[static_cast<size_t>(root[v])];
    e = std::max(e, until);
  }

  using Key = std::pair<DType, Shape>;
  std::map<Key, std::vector<int>> free_buffers;
  std::vector<bool> released(n, false);
  auto key_of = [&](int buffer) {
    const VarInfo& b = vars[static_cast<size_t>(plan.buffer_vars[static_cast<size_t>(buffer)])];
    return Key(b.dtype, b.shape);
  };
  auto release = [&](int r) {
    VarInfo& info = vars[static_cast<size_t>(r)];
    if (info.storage != Storage::pooled || released[static_cast<size_t>(r)]) return;
    released[static_cast<size_t>(r)] = true;
    free_buffers[key_of(info.buffer)].push_back(info.buffer);
  };

  for (int i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[static_cast<size_t>(i)];
    const EqnChoice& c = eqns[static_cast<size_t>(i)];
    if (!c.live) continue;
    const std::vector<int>& outs = written_by(e, c);
    for (int o : outs) {
      VarInfo& out = vars[static_cast<size_t>(o)];
      if (out.storage == Storage::view)
        out.buffer = vars[static_cast<size_t>(root[static_cast<size_t>(o)])].buffer;
      if (out.storage != Storage::pooled) continue;
      int buffer = -1;
      if (c.alias == Alias::elementwise || (c.alias == Alias::first && o == outs[0])) {
        const size_t candidates = c.alias == Alias::first ? 1 : c.reads.size();
        for (size_t k = 0; k < candidates && k < c.reads.size(); ++k) {
          const int v = c.reads[k];
          const int r = root[static_cast<size_t>(v)];
          // Alias::first kernels read their other operands in any order.
          bool shared = false;
          for (size_t j = 1; c.alias == Alias::first && j < c.reads.size(); ++j)
            shared = shared || root[static_cast<size_t>(c.reads[j])] == r;
          if (shared) continue;
          const VarInfo& in = vars[static_cast<size_t>(r)];
          if (in.storage != Storage::pooled || end[static_cast<size_t>(r)] != i ||
              released[static_cast<size_t>(r)] || key_of(in.buffer) != Key(out.dtype, out.shape))
            continue;
          buffer = in.buffer;
          released[static_cast<size_t>(r)] = true;  // handed over, not freed
          ++plan.stats.in_place;
          break;
        }
      }
      if (buffer < 0) {
        auto it = free_buffers.find(Key(out.dtype, out.shape));
        if (it != free_buffers.end() && !it->second.empty()) {
          buffer = it->second.back();
          it->second.pop_back();
        } else {
          buffer = static_cast<int>(plan.buffer_vars.size());
          plan.buffer_vars.push_back(o);
        }
      }
      out.buffer = buffer;
    }
    for (int v : c.reads)
      if (end[static_cast<size_t>(root[static_cast<size_t>(v)])] == i)
        release(root[static_cast<size_t>(v)]);
    for (int o : outs)
      if (end[static_cast<size_t>(o)] == i) release(o);
  }
  plan.stats.buffers = plan.buffer_vars.size();

  // Arrays held per call (arguments, fallback results, views) are dropped
  // after their last reader, so memory follows the program's liveness.
  plan.transient.clear();
  std::vector<bool> is_input(n, false);
  for (int v : p.inputs) is_input[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < n; ++v) {
    Storage s = vars[v].storage;
    if (s == Storage::pooled || s == Storage::constant || (def[v] < 0 && !is_input[v])) continue;
    plan.transient.push_back(static_cast<int>(v));
    if (is_output[v] || s == Storage::output) continue;
    int at = std::max(last[v], def[v]);
    if (at >= 0) eqns[static_cast<size_t>(at)].release.push_back(static_cast<int>(v));
  }
  temp_dump_plan(plan, eqns);  // TEMP-DUMP
}

}  // namespace drx::exec
