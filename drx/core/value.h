#pragma once
#include <memory>
#include <vector>

#include "drx/ir/type.h"

namespace drx {

struct TraceState;

// A traced array: a variable of the trace (Program under construction) it
// belongs to. Values are cheap handles; ops on them append equations.
class Value {
 public:
  Value() = default;
  Value(std::shared_ptr<TraceState> trace, int id) : trace_(std::move(trace)), id_(id) {}

  bool valid() const { return trace_ != nullptr; }
  const Type& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int64_t ndim() const { return type().ndim(); }
  int64_t size() const { return type().size(); }
  const std::string& placement() const { return type().placement; }

  int id() const { return id_; }
  TraceState* trace() const { return trace_.get(); }
  const std::shared_ptr<TraceState>& trace_ptr() const { return trace_; }

 private:
  std::shared_ptr<TraceState> trace_;
  int id_ = -1;
};

using Values = std::vector<Value>;

}  // namespace drx
