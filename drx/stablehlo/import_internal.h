#pragma once
// What the importer's files share: op lookup, attribute access, constants.
#include <functional>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/value.h"
#include "drx/stablehlo/mlir_ast.h"

namespace drx::stablehlo::detail {

[[noreturn]] void fail(const Operation& op, const std::string& what);

// The drx dtype of a StableHLO element type; throws naming the line for the
// types drx does not hold (complex, f8, quantized, ...).
DType element_dtype(const std::string& element, int line);

// A dense<...> attribute as an Array of `type`.
Array dense_array(const Attribute& value, const TensorType& type, int line);

const Attribute& required(const Operation& op, const char* name);
std::vector<int64_t> int_list(const Operation& op, const char* name);
int64_t int_value(const Operation& op, const char* name);
// Field `key` of a #stablehlo.gather<...> or #stablehlo.scatter<...>
// dimension-numbers attribute as integers (one number or a list); empty when
// it is absent and `optional`, else an error naming the field.
std::vector<int64_t> dimension_list(const Attribute& numbers, const char* key, const Operation& op,
                                    bool optional = false);

// Ops without regions: their results from their operands.
using Lowering = std::function<Values(const Operation&, const Values&)>;
const Lowering* find_lowering(const std::string& name);

// Ops with regions that are read, not run: sort (its comparator) and scatter
// (its update computation), matched against the forms they are known in
// (import_sort_scatter.cpp); nullptr for any other op.
const Lowering* find_region_lowering(const std::string& name);

// x's elements as signed integers of its width that order as the spec's
// TOTALORDER orders x: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN.
Value total_order_key(const Value& x);

// reduce's body run on (accumulators..., elements...) of any one shape.
using RegionFn = std::function<Values(const Region&, const Values&)>;
Values import_reduce(const Operation& op, const Values& operands, const RegionFn& run);
Value import_gather(const Operation& op, const Value& operand, const Value& indices);
// stablehlo.convolution as conv_general_dilated (import_conv.cpp).
Values convolution_op(const Operation& op, const Values& in);

// ---- the spec's type constraints (import_verify.cpp) ----
// "i1", "ui8", "f32": StableHLO's name of a drx element type.
std::string mlir_element(DType d);
// "tensor<2x3xf32>": the StableHLO type of a traced value.
std::string mlir_type(const Value& v);
// The spec's is_promotable: same kind (i1, integer or float), no narrower.
bool is_promotable(DType from, DType to);
// Before an op is imported: its operands have the types it declares for them
// and, for elementwise ops, agree with each other (no implicit broadcasting).
// `shapes` false compares element types only (a body run on whole rows).
void check_operands(const Operation& op, const Values& in, bool shapes);
// Every SSA name of f (arguments, results, block arguments) is defined once
// in its scope, as MLIR requires.
void check_ssa_names(const Function& f);
// After: the results drx computed have the types the op declares.
void check_results(const Operation& op, const Values& in, const Values& out, bool shapes);

}  // namespace drx::stablehlo::detail
