#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "drx/core/value.h"
#include "drx/ir/program.h"

namespace drx {

// A Program under construction. Traces nest: a transformation traces its
// function in a child trace; a Value of an enclosing trace used inside is
// captured as an extra input of the child (in capture order, after the
// explicit inputs), so the child Program is closed.
struct TraceState {
  Program program;
  TraceState* parent = nullptr;
  std::weak_ptr<TraceState> self;
  bool open = true;
  std::vector<Value> captured;  // Values of the parent trace
  std::map<std::pair<const TraceState*, int>, int> capture_vars;
  std::vector<int> captured_inputs;  // local vars of the captures
  // Set for map_fn bodies, which must be closed: a capture is an error
  // thrown with this op name.
  std::string closed_for;
};

// Pushes a fresh child trace of the current one for its lifetime.
class TraceScope {
 public:
  TraceScope();
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  Value add_input(const Type& t);
  // Closes the trace with these outputs. Captured values become trailing inputs.
  Program finish(const std::vector<Value>& outputs);
  // Values of the parent trace for the captured inputs, in order.
  const std::vector<Value>& captured() const { return state_->captured; }
  const std::shared_ptr<TraceState>& state() const { return state_; }

 private:
  std::shared_ptr<TraceState> state_;
  bool popped_ = false;
};

// The innermost open trace, or nullptr outside any trace.
TraceState* current_trace();
std::shared_ptr<TraceState> current_trace_ptr();
// The variable of `v` in trace `t`, capturing it through enclosing traces.
int resolve_in(TraceState& t, const Value& v, const std::string& op);

struct Traced {
  Program program;
  std::vector<Value> captured;  // pass after the explicit arguments when inlining
};
// Traces `fn` on fresh inputs of `in_types`.
// closed_for: non-empty to forbid captures (see TraceState::closed_for).
Traced trace_function(const std::function<std::vector<Value>(const std::vector<Value>&)>& fn,
                      const std::vector<Type>& in_types, const std::string& name = "main",
                      const std::string& closed_for = "");
// Replays `p`'s equations in the current trace on `args` (one per input).
std::vector<Value> inline_program(const Program& p, const std::vector<Value>& args);

}  // namespace drx
