// compile(): kernel selection, compile-time constants and the buffer plan.
// run(): borrow a workspace, run the kernels, hand back the results.
#include "drx/exec/executable.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "drx/array/half.h"
#include "drx/core/interpret.h"
#include "drx/core/primitive.h"
#include "drx/core/text_syntax.h"
#include "drx/exec/plan.h"
#include "drx/exec/profile.h"
#include "drx/exec/thread_pool.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace exec {

namespace {

// The reference semantics (Primitive::eval) of a reduction over a placement
// (or of a loop or cond, whose bodies may hold one) reads every client's rows,
// but a process of a mesh axis that spans processes holds only its own. Maps,
// broadcasts and place work row by row, so they may fall back.
void refuse_fallback_across_processes(const Eqn& e, const Program& p, const Mesh& mesh) {
  if (!mesh.process_group() || !e.prim->placement_aware()) return;
  if (e.prim == &prims::map_fn() || e.prim == &prims::broadcast() || e.prim == &prims::place())
    return;
  std::vector<int> vars = e.ins;
  vars.insert(vars.end(), e.outs.begin(), e.outs.end());
  for (int v : vars) {
    const Type& t = p.type_of(v);
    if (!t.placement.empty() && mesh.processes(t.placement))
      throw Error(e.prim->name() + " on " + t.str() + " cannot run across the processes of " +
                  mesh.str() +
                  ": the executor has no kernel of its own for it (a dtype such as bool, f16 or "
                  "bf16 over the placement); convert to f32 first, or run on a mesh of this "
                  "process");
  }
}

}  // namespace

std::unique_ptr<Workspace> Plan::acquire() const {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!spare.empty()) {
      std::unique_ptr<Workspace> ws = std::move(spare.back());
      spare.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  ws->ptr.assign(vars.size(), nullptr);
  ws->hold.assign(vars.size(), std::nullopt);
  for (int v : buffer_vars)
    ws->buffers.emplace_back(vars[static_cast<size_t>(v)].dtype,
                             vars[static_cast<size_t>(v)].shape);
  for (size_t v = 0; v < vars.size(); ++v) {
    const VarInfo& info = vars[v];
    if (info.storage != Storage::pooled) continue;
    Array& b = ws->buffers[static_cast<size_t>(info.buffer)];
    ws->ptr[v] = b.raw();
    ws->hold[v] = b;
  }
  for (size_t c = 0; c < constant_vars.size(); ++c) {
    const size_t v = static_cast<size_t>(constant_vars[c]);
    ws->hold[v] = constants[c];
    ws->ptr[v] = const_cast<void*>(constants[c].raw());
  }
  return ws;
}

void discard_pages(void* p, size_t nbytes) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + nbytes) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void Plan::release(std::unique_ptr<Workspace> ws) const {
  for (int v : transient) ws->hold[static_cast<size_t>(v)].reset();
  std::lock_guard<std::mutex> lock(mu);
  spare.push_back(std::move(ws));
}

namespace {

// Returns the workspace to the plan however the call ends.
class Borrowed {
 public:
  explicit Borrowed(const Plan& plan) : plan_(plan), ws_(plan.acquire()) {}
  ~Borrowed() { plan_.release(std::move(ws_)); }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  Frame frame(bool raw_io) const {
    return Frame{&plan_, ws_->ptr.data(), ws_->hold.data(), raw_io};
  }

 private:
  const Plan& plan_;
  std::unique_ptr<Workspace> ws_;
};

// This thread's minor page faults so far (first touches of fresh pages), for exec::profile.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// What one run of the equation's kernel costs at best (exec::profile's roofline): its product,
// or the bytes it reads and writes.
profile::Cost kernel_cost(const Plan& plan, const Eqn& e, const EqnChoice& c, const Kernel* k) {
  profile::Cost cost;
  if (k)
    if (const auto product = k->product()) {
      cost.has_product = true;
      cost.product = *product;
      return cost;
    }
  std::vector<int> vars = c.reads;
  const std::vector<int>& writes = c.writes ? *c.writes : e.outs;
  vars.insert(vars.end(), writes.begin(), writes.end());
  std::sort(vars.begin(), vars.end());
  vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
  for (int v : vars) cost.bytes += static_cast<double>(plan.vars[static_cast<size_t>(v)].nbytes);
  return cost;
}

void run_steps(const Plan& plan, Frame& f) {
  const bool timed = profile::enabled();
  for (const Step& s : plan.steps) {
    if (timed && !s.label.empty()) {
      const long faults = minor_faults();
      const auto start = std::chrono::steady_clock::now();
      s.kernel->run(f);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      profile::record(s.label, kernel_kind_name(s.kind), seconds, minor_faults() - faults);
    } else {
      s.kernel->run(f);
    }
    for (int v : s.release) f.hold[v].reset();
    for (int v : s.discard) discard_pages(f.ptr[v], plan.vars[static_cast<size_t>(v)].nbytes);
  }
}

// The equation as printed without its result names ("mul %3, %4 : f32[8,64]"), marked when
// it runs on the reference interpreter; empty for equations that run sub-programs (their
// bodies' equations are timed instead).
std::string profile_label(const Program& p, const Eqn& e, const EqnChoice& c) {
  for (const auto& [key, attr] : e.params.items())
    if (std::holds_alternative<std::shared_ptr<const Program>>(attr)) return "";
  const std::string text = text::raw_eqn_text(p, e);
  const size_t eq = text.find(" = ");
  return (eq == std::string::npos ? text : text.substr(eq + 3)) +
         (c.fallback ? "  [interpreted]" : "");
}

// Equations whose results nothing reads (after kernels that fuse or replace
// them) are not run. Walks backwards so that whole dead chains go.
void drop_dead(const Program& p, std::vector<EqnChoice>& choices) {
  std::vector<int> readers(p.var_types.size(), 0);
  for (int v : p.outputs) ++readers[static_cast<size_t>(v)];
  for (const EqnChoice& c : choices)
    if (c.live)
      for (int v : c.reads) ++readers[static_cast<size_t>(v)];
  for (size_t i = p.eqns.size(); i-- > 0;) {
    EqnChoice& c = choices[i];
    if (!c.live || !p.eqns[i].prim->is_pure()) continue;
    bool used = false;
    for (int o : written_by(p.eqns[i], c)) used = used || readers[static_cast<size_t>(o)] > 0;
    if (used) continue;
    c.live = false;
    for (int v : c.reads) --readers[static_cast<size_t>(v)];
  }
}

std::shared_ptr<Plan> build(const Program& program, const Mesh& mesh,
                            const CompileOptions& options) {
  auto plan = std::make_shared<Plan>();
  plan->program = program;
  const Program& p = plan->program;
  plan->vars.resize(p.var_types.size());
  for (size_t v = 0; v < p.var_types.size(); ++v) {
    VarInfo& info = plan->vars[v];
    info.dtype = p.var_types[v].dtype;
    info.shape = p.var_types[v].shape;
    info.nbytes = static_cast<size_t>(num_elements(info.shape)) * dtype_size(info.dtype);
  }

  const size_t num_eqns = p.eqns.size();
  CompileContext cx{p,
                    plan->vars,
                    std::vector<int>(p.var_types.size(), -1),
                    std::vector<int>(p.var_types.size(), 0),
                    mesh,
                    options};
  for (size_t i = 0; i < num_eqns; ++i) {
    for (int v : p.eqns[i].outs) cx.producer[static_cast<size_t>(v)] = static_cast<int>(i);
    for (int v : p.eqns[i].ins) ++cx.uses[static_cast<size_t>(v)];
  }
  for (int v : p.outputs) ++cx.uses[static_cast<size_t>(v)];

  std::vector<EqnChoice> choices(num_eqns);
  std::vector<std::unique_ptr<Kernel>> kernels(num_eqns);
  for (size_t i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[i];
    EqnChoice& c = choices[i];
    // Equations without operands (constant, iota) are evaluated once, here.
    if (e.ins.empty() && e.prim->is_pure()) {
      std::vector<Array> r = e.prim->evaluate({}, e.params);
      for (size_t k = 0; k < e.outs.size(); ++k) {
        plan->vars[static_cast<size_t>(e.outs[k])].storage = Storage::constant;
        plan->constant_vars.push_back(e.outs[k]);
        plan->constants.push_back(r.at(k));
      }
      ++plan->stats.constants;
      c.live = false;
      continue;
    }
    std::optional<KernelSpec> spec = select_kernel(e, cx);
    if (spec) {
      kernels[i] = std::move(spec->kernel);
      c.alias = spec->alias;
      c.reads = spec->reads ? std::move(*spec->reads) : e.ins;
      c.view_offset = spec->view_offset;
    } else {
      refuse_fallback_across_processes(e, p, mesh);
      // Its parameters are read when it runs: check them now (a structured primitive's typed
      // view throws for a missing or mistyped key), so a malformed program fails at compile.
      std::vector<Type> in_types;
      for (int v : e.ins) in_types.push_back(p.type_of(v));
      (void)e.prim->infer(in_types, e.params);
      kernels[i] = fallback_kernel(e);
      c.fallback = true;
      c.reads = e.ins;
    }
  }
  fuse_elementwise(cx, choices, kernels, plan->stats);
  if (options.chunk_map_reduce) fuse_map_reduce(cx, choices, kernels, plan->stats);
  drop_dead(p, choices);
  plan_buffers(*plan, choices);
  for (size_t i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[i];
    EqnChoice& c = choices[i];
    if (!c.live) {
      if (kernels[i]) ++plan->stats.dropped;
      continue;
    }
    // A view whose result is a program output needs bytes of its own.
    if (c.alias == Alias::view &&
        plan->vars[static_cast<size_t>(e.outs[0])].storage != Storage::view) {
      kernels[i] = copy_kernel(e, plan->vars[static_cast<size_t>(e.outs[0])].nbytes, c.view_offset);
      ++plan->stats.kernels;
    } else if (c.alias == Alias::view) {
      ++plan->stats.views;
    } else if (c.fallback) {
      ++plan->stats.fallbacks;
    } else {
      ++plan->stats.kernels;
    }
    const KernelKind kind = kernels[i] ? kernels[i]->kind() : KernelKind::other;
    std::string label = profile::enabled() ? profile_label(p, e, c) : std::string();
    if (!label.empty()) profile::describe(label, kernel_cost(*plan, e, c, kernels[i].get()));
    plan->steps.push_back(Step{std::move(kernels[i]), std::move(c.release), std::move(c.discard),
                               std::move(label), kind});
  }

  std::vector<bool> seen(p.var_types.size(), false);
  for (int v : p.outputs) {
    plan->output_first.push_back(!seen[static_cast<size_t>(v)] &&
                                 plan->vars[static_cast<size_t>(v)].storage == Storage::output);
    seen[static_cast<size_t>(v)] = true;
  }
  return plan;
}

}  // namespace
}  // namespace exec

namespace exec {
namespace {

// The cpu backend's compiled form: the plan, run by a borrowed workspace per call.
class CpuProgram final : public CompiledProgram {
 public:
  explicit CpuProgram(std::shared_ptr<Plan> plan) : plan_(std::move(plan)) {}
  const Plan& plan() const { return *plan_; }

  std::vector<Array> run(const std::vector<Array>& args) const override {
    const Plan& plan = *plan_;
    const Program& p = plan.program;
    check_arguments("run", p, args);
    PoolScope pool_scope;
    Borrowed ws(plan);
    Frame f = ws.frame(false);
    for (size_t i = 0; i < args.size(); ++i) {
      const int v = p.inputs[i];
      f.ptr[v] = const_cast<void*>(args[i].raw());
      f.hold[v] = args[i];
    }
    run_steps(plan, f);
    std::vector<Array> results;
    results.reserve(p.outputs.size());
    for (int v : p.outputs) results.push_back(f.array(v));
    return results;
  }

  const Program& program() const override { return plan_->program; }
  ExecStats stats() const override { return plan_->stats; }

  void release_idle_memory() const override {
    // Under the lock, so that no call takes one of these workspaces meanwhile.
    std::lock_guard<std::mutex> lock(plan_->mu);
    for (const auto& ws : plan_->spare)
      for (Array& b : ws->buffers)
        if (b.nbytes() >= kDiscardBytes) discard_pages(b.raw(), b.nbytes());
    for (const Step& s : plan_->steps)
      if (s.kernel) s.kernel->release_idle_memory();
  }

 private:
  std::shared_ptr<Plan> plan_;
};

void run_raw(const Plan& plan, const void* const* ins, void* const* outs) {
  const Program& p = plan.program;
  PoolScope pool_scope;
  Borrowed ws(plan);
  Frame f = ws.frame(true);
  for (size_t i = 0; i < p.inputs.size(); ++i) f.ptr[p.inputs[i]] = const_cast<void*>(ins[i]);
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (plan.output_first[k]) f.ptr[p.outputs[k]] = outs[k];
  run_steps(plan, f);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const int v = p.outputs[k];
    const size_t nbytes = plan.vars[static_cast<size_t>(v)].nbytes;
    if (f.ptr[v] != outs[k] && nbytes) std::memcpy(outs[k], f.ptr[v], nbytes);
  }
}

}  // namespace

std::shared_ptr<const CompiledProgram> compile_cpu(const Program& program,
                                                   const CompileOptions& options) {
  return std::make_shared<const CpuProgram>(build(program, options.mesh, options));
}

}  // namespace exec

Executable::Executable(const Program& program, const Mesh& mesh, const CompileOptions& options) {
  CompileOptions on_mesh = options;
  on_mesh.mesh = mesh;
  *this = Executable(exec::compile_cpu(program, on_mesh));
}

Executable::Executable(std::shared_ptr<const CompiledProgram> compiled)
    : compiled_(std::move(compiled)) {
  if (auto* cpu = dynamic_cast<const exec::CpuProgram*>(compiled_.get())) plan_ = &cpu->plan();
}

const Program& Executable::program() const {
  if (!compiled_) throw Error("Executable: empty (compile a program first)");
  return compiled_->program();
}

ExecStats Executable::stats() const { return compiled_ ? compiled_->stats() : ExecStats{}; }

void Executable::release_idle_memory() const {
  if (compiled_) compiled_->release_idle_memory();
}

std::vector<Array> Executable::run(const std::vector<Array>& args) const {
  if (!compiled_) throw Error("Executable::run: empty (compile a program first)");
  return compiled_->run(args);
}

bool Executable::output_may_overwrite_input(size_t k, size_t j) const {
  if (!plan_ || k >= plan_->output_may_overwrite.size()) return false;
  const std::vector<int>& js = plan_->output_may_overwrite[k];
  return std::find(js.begin(), js.end(), static_cast<int>(j)) != js.end();
}

void Executable::run_raw(const void* const* ins, void* const* outs) const {
  if (!plan_) throw Error("Executable::run_raw: only the cpu backend runs on raw buffers");
  exec::run_raw(*plan_, ins, outs);
}

}  // namespace drx
