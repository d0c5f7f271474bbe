#pragma once
// The seam between a primitive's lowering rule and the StableHLO exporter.
// The exporter (drx/export) implements StableHloEmitter; each primitive states
// its own StableHLO in Primitive::lower, through this interface, so the
// exporter never learns primitive names and a new primitive brings its
// lowering with it.
#include <string>
#include <vector>

#include "drx/ir/type.h"

namespace drx {

class StableHloEmitter {
 public:
  virtual ~StableHloEmitter() = default;

  // The equation being lowered: its operands (SSA names such as "%3", and
  // their drx types) and the types of its results.
  virtual size_t num_operands() const = 0;
  virtual std::string operand(size_t i) const = 0;
  virtual const Type& operand_type(size_t i) const = 0;
  virtual size_t num_results() const = 0;
  virtual const Type& result_type(size_t j) const = 0;

  // Appends one operation, e.g. emit("stablehlo.add", {a, b}, "", {t}), and
  // returns the SSA names of its results. `attributes` is the text between
  // the operands and the type signature (empty for none).
  virtual std::vector<std::string> emit(const std::string& op,
                                        const std::vector<std::string>& operands,
                                        const std::string& attributes,
                                        const std::vector<Type>& result_types) = 0;
  // The SSA names that stand for the equation's results from now on.
  virtual void set_results(const std::vector<std::string>& names) = 0;
};

}  // namespace drx
