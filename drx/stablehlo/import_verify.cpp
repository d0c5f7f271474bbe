// The StableHLO spec's type constraints, checked on each imported op: drx's
// ops broadcast implicitly and infer their own result types, so without these
// checks a module that breaks the spec would run and give some answer. Each
// check names the op, its line, the types involved and the spec's constraint
// (the constraint numbers are those of the op's section in the spec).
#include <algorithm>
#include <map>
#include <set>

#include "drx/array/error.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

// How an op's operands must agree with each other (elementwise ops: StableHLO
// has no implicit broadcasting).
enum class Operands { free, same_type, compare, select, clamp };

// How the result's element type relates to what drx computed. `promotable`:
// reduce and scatter accumulate in the body's element type Ei, which the
// input's element type must promote to; the lowering computes in Ei.
// dot_general and convolution take any result element type (JAX's
// preferred_element_type); their lowering computes in it, so they are `same`.
enum class Element { same, promotable };

struct Rule {
  Operands operands = Operands::free;
  const char* operand_constraint = "";
  const char* result_constraint = "the result type its operands and attributes give";
  Element element = Element::same;
};

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> t = [] {
    std::map<std::string, Rule> r;
    const Rule binary{Operands::same_type, "C1: lhs, rhs and result have one type",
                      "C1: lhs, rhs and result have one type"};
    for (const char* op : {"add", "subtract", "multiply", "divide", "remainder", "power", "maximum",
                           "minimum", "atan2", "and", "or", "xor", "shift_left",
                           "shift_right_logical", "shift_right_arithmetic"})
      r[std::string("stablehlo.") + op] = binary;
    Rule unary;
    unary.result_constraint = "C1: operand and result have one type";
    for (const char* op :
         {"negate", "sign", "exponential", "exponential_minus_one", "log", "log_plus_one", "sqrt",
          "rsqrt", "cbrt", "tanh", "logistic", "sine", "cosine", "floor", "ceil",
          "round_nearest_even", "round_nearest_afz", "not"})
      r[std::string("stablehlo.") + op] = unary;
    r["stablehlo.abs"].result_constraint =
        "C1-C2: the result has the operand's shape and element type";
    r["stablehlo.is_finite"].result_constraint = "C1: the result has the operand's shape, of i1";
    r["stablehlo.compare"] = {Operands::compare,
                              "C1-C2: lhs and rhs have one element type and shape",
                              "C2: the result has the operands' shape, of i1"};
    r["stablehlo.select"] = {Operands::select,
                             "C1-C2: pred is a scalar or has on_true's shape; on_true and "
                             "on_false have one type",
                             "C2: on_true, on_false and result have one type"};
    r["stablehlo.clamp"] = {Operands::clamp,
                            "C1-C3: min and max are scalars or have the operand's shape, and "
                            "share its element type",
                            "C4: operand and result have one type"};
    r["stablehlo.convert"].result_constraint = "C1: the result has the operand's shape";
    r["stablehlo.constant"].result_constraint = "C1: the result has the value's type";
    r["stablehlo.broadcast_in_dim"].result_constraint = "the result has the operand's element type";
    r["stablehlo.reshape"].result_constraint =
        "C1-C2: the result has the operand's element type and number of elements";
    r["stablehlo.transpose"].result_constraint =
        "the result is the operand's type with its dimensions permuted";
    r["stablehlo.reverse"].result_constraint = "C1: operand and result have one type";
    r["stablehlo.slice"].result_constraint =
        "the result has the operand's element type and the slice's sizes";
    r["stablehlo.dynamic_slice"].result_constraint =
        "the result has the operand's element type and the slice_sizes";
    r["stablehlo.dynamic_update_slice"].result_constraint = "operand and result have one type";
    r["stablehlo.concatenate"].result_constraint =
        "the result has the inputs' element type and their sizes summed along the dimension";
    r["stablehlo.pad"].result_constraint =
        "the result has the operand's element type and its padded sizes";
    r["stablehlo.dot_general"].result_constraint =
        "the result's shape is the batch, then lhs free, then rhs free dimensions";
    r["stablehlo.reduce"].result_constraint =
        "C7-C8: the result has the inputs' shape without the reduced dimensions, of the body's "
        "element type, which the inputs' element type promotes to (C6)";
    r["stablehlo.reduce"].element = Element::promotable;
    r["stablehlo.scatter"].result_constraint =
        "C24-C25: the result has the input's shape, of the update computation's element type, "
        "which the input's element type promotes to (C23)";
    r["stablehlo.scatter"].element = Element::promotable;
    r["stablehlo.sort"].result_constraint = "the results have the inputs' types";
    r["stablehlo.while"].result_constraint = "the results have the operands' types";
    r["stablehlo.optimization_barrier"].result_constraint = "the results have the operands' types";
    r["stablehlo.case"].result_constraint = "the results have the types the branches return";
    r["stablehlo.if"].result_constraint = "the results have the types the branches return";
    r["func.call"].result_constraint = "the results have the callee's result types";
    return r;
  }();
  return t;
}

const Rule& rule_of(const std::string& name) {
  static const Rule plain;
  auto it = rules().find(name);
  return it == rules().end() ? plain : it->second;
}

// Whether `v` fits `declared`: its element type always, its shape unless only
// element types are compared (`shapes` false).
bool fits(const Value& v, const TensorType& declared, bool shapes, int line) {
  return v.dtype() == element_dtype(declared.element, line) &&
         (!shapes || v.shape() == declared.shape);
}

// "spec C1: ..." for a numbered constraint of the op's section, else "spec: ...".
std::string spec(const std::string& constraint) {
  const bool numbered =
      constraint.size() > 1 && constraint[0] == 'C' && constraint[1] >= '0' && constraint[1] <= '9';
  return (numbered ? "spec " : "spec: ") + constraint;
}

bool same_type(const Value& a, const Value& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape();
}

int bits(DType d) { return is_integer(d) ? integer_bits(d) : static_cast<int>(dtype_size(d)) * 8; }

void check_operands_agree(const Operation& op, const Rule& rule, const Values& in) {
  if (rule.operands == Operands::free || in.empty()) return;
  auto mismatch = [&](size_t a, size_t b) {
    fail(op, "operand " + std::to_string(a) + " is " + mlir_type(in[a]) + ", operand " +
                 std::to_string(b) + " is " + mlir_type(in[b]) +
                 " (StableHLO has no implicit broadcasting; " + spec(rule.operand_constraint) +
                 ")");
  };
  switch (rule.operands) {
    case Operands::same_type:
    case Operands::compare:
      for (size_t k = 1; k < in.size(); ++k)
        if (!same_type(in[k], in[0])) mismatch(0, k);
      return;
    case Operands::select:  // (pred, on_true, on_false)
      if (in.size() != 3) return;
      if (!same_type(in[2], in[1])) mismatch(1, 2);
      if (in[0].ndim() != 0 && in[0].shape() != in[1].shape()) mismatch(0, 1);
      return;
    case Operands::clamp:  // (min, operand, max)
      if (in.size() != 3) return;
      for (size_t k : {size_t{0}, size_t{2}})
        if (in[k].dtype() != in[1].dtype() || (in[k].ndim() != 0 && in[k].shape() != in[1].shape()))
          mismatch(k, 1);
      return;
    case Operands::free:
      return;
  }
}

}  // namespace

std::string mlir_element(DType d) { return std::string(dtype_info(d).mlir_name); }

std::string mlir_type(const Value& v) {
  std::string s = "tensor<";
  for (int64_t d : v.shape()) s += std::to_string(d) + "x";
  return s + mlir_element(v.dtype()) + ">";
}

bool is_promotable(DType from, DType to) {
  const bool same_kind = (from == DType::bool_ && to == DType::bool_) ||
                         (is_integer(from) && is_integer(to)) ||
                         (is_floating(from) && is_floating(to));
  return same_kind && bits(from) <= bits(to);
}

void check_operands(const Operation& op, const Values& in, bool shapes) {
  if (op.operand_types.size() == in.size())
    for (size_t k = 0; k < in.size(); ++k)
      if (!fits(in[k], op.operand_types[k], shapes, op.line))
        fail(op, "operand " + std::to_string(k) + " (" + op.operands[k] + ") is " +
                     mlir_type(in[k]) + ", but the op declares it " +
                     to_string(op.operand_types[k]) +
                     " (a value keeps the type it is defined with)");
  // Inside a body run on whole rows (reduce's), values have more dims than declared.
  if (shapes) check_operands_agree(op, rule_of(op.name), in);
}

void check_results(const Operation& op, const Values& in, const Values& out, bool shapes) {
  if (op.result_types.size() != out.size()) return;
  const Rule& rule = rule_of(op.name);
  for (size_t k = 0; k < out.size(); ++k) {
    const TensorType& declared = op.result_types[k];
    if (fits(out[k], declared, shapes, op.line)) continue;
    std::string what = "declares result " + (out.size() > 1 ? std::to_string(k) + " " : "") +
                       to_string(declared) + ", but its operands give " + mlir_type(out[k]);
    if (rule.element == Element::promotable && k < in.size() &&
        !is_promotable(in[k].dtype(), element_dtype(declared.element, op.line)))
      what += " (" + mlir_element(in[k].dtype()) + " does not promote to " + declared.element + ")";
    fail(op, what + " (" + spec(rule.result_constraint) + ")");
  }
}

namespace {

// The names visible at a point of a function, innermost region last; each
// with the line that defines it.
class Scopes {
 public:
  void define(const std::string& name, int line, const std::string& where) {
    for (const auto& scope : scopes_)
      if (auto it = scope.find(name); it != scope.end())
        throw Error("stablehlo: line " + std::to_string(line) + ": " + where + " defines " + name +
                    ", which line " + std::to_string(it->second) +
                    " already defines (an SSA value is defined once in its scope)");
    scopes_.back()[name] = line;
  }
  void push() { scopes_.emplace_back(); }
  void pop() { scopes_.pop_back(); }

 private:
  std::vector<std::map<std::string, int>> scopes_;
};

void check_names(const Region& r, const std::string& owner, int line, Scopes& s) {
  // A region sees its parents' names; its own go out of scope after it, so
  // sibling regions (the branches of a case, a while's cond and body) may reuse them.
  s.push();
  for (const Block& b : r.blocks) {
    for (const auto& [name, type] : b.arguments)
      s.define(name, line, owner + " (a block argument)");
    for (const Operation& op : b.ops) {
      for (const Region& inner : op.regions) check_names(inner, op.name, op.line, s);
      for (const std::string& name : op.results) s.define(name, op.line, op.name);
    }
  }
  s.pop();
}

}  // namespace

void check_ssa_names(const Function& f) {
  Scopes s;
  check_names(f.body, "@" + f.name, f.line, s);
}

}  // namespace drx::stablehlo::detail
