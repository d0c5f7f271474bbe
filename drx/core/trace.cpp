#include "drx/core/trace.h"

#include "drx/core/primitive.h"
#include "drx/core/walk.h"

namespace drx {

namespace {
thread_local std::vector<std::shared_ptr<TraceState>> trace_stack;

bool is_ancestor(const TraceState* anc, const TraceState* t) {
  for (const TraceState* p = t; p; p = p->parent)
    if (p == anc) return true;
  return false;
}
}  // namespace

const Type& Value::type() const {
  if (!trace_) throw Error("drx::Value: use of an empty (default-constructed) Value");
  return trace_->program.type_of(id_);
}

TraceState* current_trace() { return trace_stack.empty() ? nullptr : trace_stack.back().get(); }
std::shared_ptr<TraceState> current_trace_ptr() {
  return trace_stack.empty() ? nullptr : trace_stack.back();
}

TraceScope::TraceScope() : state_(std::make_shared<TraceState>()) {
  state_->parent = current_trace();
  state_->self = state_;
  trace_stack.push_back(state_);
}

TraceScope::~TraceScope() {
  if (!popped_) {
    state_->open = false;
    // Unwinding after an error: drop this trace (and anything above it).
    while (!trace_stack.empty()) {
      bool mine = trace_stack.back() == state_;
      trace_stack.back()->open = false;
      trace_stack.pop_back();
      if (mine) break;
    }
  }
}

Value TraceScope::add_input(const Type& t) {
  int v = state_->program.add_var(t);
  state_->program.inputs.push_back(v);
  return Value(state_, v);
}

Program TraceScope::finish(const std::vector<Value>& outputs) {
  Program& p = state_->program;
  p.outputs.clear();
  for (const Value& v : outputs) p.outputs.push_back(resolve_in(*state_, v, "trace output"));
  for (int v : state_->captured_inputs) p.inputs.push_back(v);
  state_->open = false;
  if (trace_stack.empty() || trace_stack.back() != state_)
    throw Error("internal: trace scopes closed out of order");
  trace_stack.pop_back();
  popped_ = true;
  return p;
}

int resolve_in(TraceState& t, const Value& v, const std::string& op) {
  if (!v.valid()) throw Error(op + ": an empty (default-constructed) Value was passed");
  TraceState* owner = v.trace();
  if (owner == &t) return v.id();
  if (!owner->open || !is_ancestor(owner, &t))
    throw Error(op +
                ": a Value from a finished or unrelated trace was used (did a traced "
                "Value escape the function that was transformed?)");
  auto key = std::make_pair(static_cast<const TraceState*>(owner), v.id());
  if (auto it = t.capture_vars.find(key); it != t.capture_vars.end()) return it->second;
  if (!t.closed_for.empty()) {
    const Type& ty = v.type();
    if (!ty.placement.empty())
      throw Error(t.closed_for + ": the body uses a value placed at '" + ty.placement + "' (" +
                  ty.str() + ") from outside; pass it to " + t.closed_for + " as an argument");
    throw Error(t.closed_for + ": the body uses the server value " + ty.str() +
                " from outside; broadcast it (drx::broadcast) and pass it to " + t.closed_for +
                " as an argument");
  }
  // Capture in the parent first so the captured Value belongs to our parent.
  Value outer = v;
  if (owner != t.parent) outer = Value(t.parent->self.lock(), resolve_in(*t.parent, v, op));
  int local = t.program.add_var(t.parent->program.type_of(outer.id()));
  t.captured.push_back(outer);
  t.captured_inputs.push_back(local);
  t.capture_vars[key] = local;
  return local;
}

namespace {
// Records the placements a program uses, for its printed header.
void note_placements(Program& p, const std::vector<Type>& ins, const std::vector<Type>& outs) {
  for (const auto* list : {&ins, &outs})
    for (const Type& t : *list) {
      // Each level of a nested placement is a placement of its own, sized by its axis.
      std::vector<std::string> levels = placement_levels(t.placement);
      for (size_t d = 0; d < levels.size() && d < t.shape.size(); ++d) {
        bool known = false;
        for (const auto& [name, size] : p.placements) known = known || name == levels[d];
        if (!known) p.placements.emplace_back(levels[d], t.shape[d]);
      }
    }
}
}  // namespace

Values emit(const Primitive& prim, const Values& ins, Params params) {
  TraceState* t = current_trace();
  if (!t)
    throw Error(prim.name() +
                ": called outside of a trace (wrap the function in drx::jit or drx::trace)");
  std::vector<int> vars;
  std::vector<Type> types;
  vars.reserve(ins.size());
  for (const Value& v : ins) {
    vars.push_back(resolve_in(*t, v, prim.name()));
    types.push_back(t->program.type_of(vars.back()));
  }
  std::vector<Type> outs = prim.infer_types(types, params);
  if (prim.placement_aware()) note_placements(t->program, types, outs);
  Eqn e;
  e.prim = &prim;
  e.ins = std::move(vars);
  for (Type& ty : outs) e.outs.push_back(t->program.add_var(std::move(ty)));
  e.params = std::move(params);
  Values result;
  auto self = t->self.lock();
  for (int o : e.outs) result.emplace_back(self, o);
  t->program.eqns.push_back(std::move(e));
  return result;
}

Value emit1(const Primitive& prim, const Values& ins, Params params) {
  Values out = emit(prim, ins, std::move(params));
  if (out.size() != 1)
    throw Error(prim.name() + ": expected one output, got " + std::to_string(out.size()));
  return out[0];
}

Traced trace_function(const std::function<std::vector<Value>(const std::vector<Value>&)>& fn,
                      const std::vector<Type>& in_types, const std::string& name,
                      const std::string& closed_for) {
  TraceScope scope;
  scope.state()->closed_for = closed_for;
  std::vector<Value> args;
  for (const Type& t : in_types) args.push_back(scope.add_input(t));
  std::vector<Value> outs = fn(args);
  Traced r{scope.finish(outs), scope.captured()};
  r.program.name = name;
  return r;
}

std::vector<Value> inline_program(const Program& p, const std::vector<Value>& args) {
  return walk_program(p, args, [](size_t, const Eqn& e, const Values& ins) {
    return emit(*e.prim, ins, e.params);
  });
}

}  // namespace drx
