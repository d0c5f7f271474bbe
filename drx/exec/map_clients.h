#pragma once
// Private to drx/exec: a map_fn's operands as per-client rows. The body is
// compiled once, with the outer program, and run per client directly on the
// client's rows of the operands (no slice copies); a placed operand that is
// broadcast(x) is read as x by every client.
#include <cstddef>
#include <vector>

#include "drx/exec/plan.h"

namespace drx::exec {

class ClientOperands {
 public:
  ClientOperands(const Eqn& e, const CompileContext& cx);
  // The variables read (through broadcasts).
  const std::vector<int>& reads() const { return vars_; }
  int64_t clients() const { return clients_; }
  // The operands' base pointers in this call.
  std::vector<const std::byte*> bases(const Frame& f) const;
  // Client c's rows, from the bases.
  void rows(const std::vector<const std::byte*>& bases, int64_t c, const void** out) const {
    for (size_t k = 0; k < vars_.size(); ++k) out[k] = bases[k] + static_cast<size_t>(c) * row_[k];
  }

 private:
  std::vector<int> vars_;
  std::vector<size_t> row_;  // bytes per client; 0 for broadcasts
  int64_t clients_ = 0;
};

// Bytes of one client's row of a placed variable.
size_t client_row_bytes(const VarInfo& v);

// The body of a map_fn equation (a drx::TypeError if its parameters are
// malformed), or nullptr for any other equation.
const Program* map_body(const Eqn& e);

// The body compiled to run client by client on this process's threads.
Executable compile_map_body(const Program& body, const CompileContext& cx);

}  // namespace drx::exec
