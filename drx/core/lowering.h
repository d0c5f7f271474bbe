#pragma once
// The seam between a primitive's lowering rule and the StableHLO exporter.
// The exporter (drx/export) implements StableHloEmitter; each primitive states
// its own StableHLO in Primitive::lower, through this interface, so the
// exporter never learns primitive names and a new primitive brings its
// lowering with it.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/reduction.h"
#include "drx/ir/type.h"

namespace drx {

class Program;
class StableHloEmitter;

// Attributes of one operation, name and value in MLIR's attribute syntax,
// e.g. {"dimensions", "array<i64: 1>"} or
// {"comparison_direction", "#stablehlo<comparison_direction LT>"}.
using MlirAttributes = std::vector<std::pair<std::string, std::string>>;

// A region of an operation (a reduce body, a while condition, a case branch):
// its block arguments' types, and what emits its body into the emitter it is
// given, returning the SSA names the region returns (stablehlo.return).
struct MlirRegion {
  std::vector<Type> arg_types;
  std::function<std::vector<std::string>(StableHloEmitter& body,
                                         const std::vector<std::string>& args)>
      body;
};

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

  // Appends one operation, e.g. emit("stablehlo.add", {a, b}, {}, {t}), and
  // returns the SSA names of its results.
  virtual std::vector<std::string> emit(const std::string& op,
                                        const std::vector<std::string>& operands,
                                        const MlirAttributes& attributes,
                                        const std::vector<Type>& result_types,
                                        const std::vector<MlirRegion>& regions = {}) = 0;
  // A stablehlo.constant holding `value`; returns its SSA name.
  virtual std::string constant(const Array& value) = 0;
  // Emits a whole program's equations here (a body, batched or not), with
  // its inputs bound to `args`; returns the SSA names of its outputs.
  virtual std::vector<std::string> inline_program(const Program& program,
                                                  const std::vector<std::string>& args) = 0;
  // The SSA names that stand for the equation's results from now on.
  virtual void set_results(const std::vector<std::string>& names) = 0;
  // Whether reductions over a placement follow drx's canonical binary tree
  // over client indices (the default: results match drx bitwise where every
  // op is exactly rounded) or are one stablehlo.reduce.
  virtual bool canonical_placement_reductions() const = 0;

  // ---- shardings, where DrJAX writes them ---------------------------------
  // Emits the program `batched` (a map_fn body batched over `placement` by
  // vmap) with its inputs bound to `args`, as jax.vmap(spmd_axis_name=
  // placement): constraints written inside carry the placement's mesh axis
  // on the batch dimension. The default inlines it plainly.
  virtual std::vector<std::string> inline_batched(const Program& batched,
                                                  const std::vector<std::string>& args,
                                                  const std::string& placement) {
    (void)placement;
    return inline_program(batched, args);
  }
  // A sharding constraint on `value` (a placed value of type t standing for
  // an operand or result of the equation being lowered): the mesh axes of its
  // placement (and of the enclosing batched map_fn bodies) on their
  // dimensions, every other dimension open. Returns the constrained name;
  // `value` itself where there is nothing to constrain (the default).
  virtual std::string constrain_placed(const std::string& value, const Type& t) {
    (void)t;
    return value;
  }

  // ---- conveniences over emit() --------------------------------------------
  // One result of type t.
  std::string emit1(const std::string& op, const std::vector<std::string>& operands,
                    const MlirAttributes& attributes, const Type& t,
                    const std::vector<MlirRegion>& regions = {});
  // A scalar constant of dtype d broadcast to shape (a splat constant).
  std::string splat(double value, DType d, const Shape& shape);
};

// MLIR spellings.
std::string mlir_element_type(DType d);                     // f32, bf16, i1, ui32, ...
std::string mlir_type(const Type& t);                       // tensor<2x3xf32>, tensor<f32>
std::string mlir_i64_array(const std::vector<int64_t>& v);  // array<i64: 1, 2>
std::string mlir_i64_dense(const std::vector<int64_t>& v);  // dense<[1, 2]> : tensor<2xi64>
// #stablehlo<comparison_direction LT> and the compare type of a dtype
// (#stablehlo<comparison_type FLOAT>, SIGNED, UNSIGNED).
std::string mlir_comparison_direction(const std::string& dir);
std::string mlir_comparison_type(DType d);
// stablehlo.compare of a and b (of type t) in direction dir: an i1 tensor of t's shape.
std::string emit_compare(StableHloEmitter& em, const std::string& dir, const std::string& a,
                         const std::string& b, const Type& t);

// stablehlo.reduce of x (of type t) over `dims` by sum, max or min, with its
// identity as the initial value and a one-op body; returns the result's name.
std::string emit_reduce(StableHloEmitter& em, ReduceKind kind, const std::string& x, const Type& t,
                        const std::vector<int64_t>& dims);
// The elementwise StableHLO op that combines two partial results of `kind`.
std::string reduce_combiner(ReduceKind kind);

}  // namespace drx
