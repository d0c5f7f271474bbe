#include "drx/stablehlo/import.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "drx/array/error.h"
#include "drx/array/half.h"
#include "drx/ops/ops.h"
#include "drx/stablehlo/import_checks.h"
#include "drx/stablehlo/import_internal.h"
#include "drx/stablehlo/import_windows.h"
#include "drx/trace/program_of.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/simplify.h"

namespace drx::stablehlo {
namespace detail {

[[noreturn]] void fail(const Operation& op, const std::string& what) {
  throw Error("stablehlo: line " + std::to_string(op.line) + ": " + op.name + ": " + what);
}

const Attribute& required(const Operation& op, const char* name) {
  const Attribute* a = find_attribute(op.attributes, name);
  if (!a) fail(op, std::string("missing attribute ") + name);
  return *a;
}

std::vector<int64_t> int_list(const Operation& op, const char* name) {
  const Attribute& a = required(op, name);
  std::vector<int64_t> out;
  if (a.kind == Attribute::Kind::integer) return {a.i};
  if (a.kind == Attribute::Kind::dense) {
    for (const std::string& e : a.elements) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
      if (ec != std::errc() || end != e.data() + e.size())
        fail(op, std::string(name) + " must hold integers, not " + e);
      out.push_back(v);
    }
    return out;
  }
  if (a.kind != Attribute::Kind::array) fail(op, std::string(name) + " must be a list of integers");
  for (const Attribute& e : a.list) {
    if (e.kind != Attribute::Kind::integer) fail(op, std::string(name) + " must hold integers");
    out.push_back(e.i);
  }
  return out;
}

int64_t int_value(const Operation& op, const char* name) {
  const Attribute& a = required(op, name);
  if (a.kind != Attribute::Kind::integer) fail(op, std::string(name) + " must be an integer");
  return a.i;
}

}  // namespace detail

namespace {

using detail::fail;

// Names to Values; regions that are not isolated see their parents' names.
struct Env {
  const Env* parent = nullptr;
  // Inside reduce's body, run on whole rows: values have more dims than declared.
  bool rows = false;
  std::unordered_map<std::string, Value> values;
  // Integer scalar constants by name, for finding static trip counts.
  std::unordered_map<std::string, int64_t> int_constants;
  const Value& get(const std::string& name, const Operation& op) const {
    for (const Env* e = this; e; e = e->parent)
      if (auto it = e->values.find(name); it != e->values.end()) return it->second;
    fail(op, "uses " + name + ", which is not defined before it");
  }
  std::optional<int64_t> int_constant(const std::string& name) const {
    for (const Env* e = this; e; e = e->parent)
      if (auto it = e->int_constants.find(name); it != e->int_constants.end()) return it->second;
    return std::nullopt;
  }
};

// The value of a scalar integer constant op, if op is one.
std::optional<int64_t> scalar_int_constant(const Operation& op) {
  if (op.name != "stablehlo.constant" || op.result_types.size() != 1 ||
      !op.result_types[0].shape.empty())
    return std::nullopt;
  const std::string& e = op.result_types[0].element;
  if (e != "i32" && e != "i64" && e != "ui32") return std::nullopt;
  const Attribute* v = find_attribute(op.attributes, "value");
  if (!v || v->kind != Attribute::Kind::dense || v->elements.size() != 1) return std::nullopt;
  try {
    return std::stoll(v->elements[0]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Within one block: a name's integer constant, from the block's own constant
// ops or the enclosing scopes.
std::optional<int64_t> constant_in(const Block& b, const std::string& name, const Env& env) {
  for (const Operation& op : b.ops)
    if (op.results.size() == 1 && op.results[0] == name) return scalar_int_constant(op);
  return env.int_constant(name);
}

const Operation* defining(const Block& b, const std::string& name) {
  for (const Operation& op : b.ops)
    for (const std::string& r : op.results)
      if (r == name) return &op;
  return nullptr;
}

// JAX's fori_loop and scan export as a while over a counter k: init c0 (a
// constant), cond `k < N` (N a constant), body returning `k + 1`. Their trip
// count max(0, N - c0) is known when tracing, so the loop can be a fori_loop.
std::optional<int64_t> static_trip_count(const Operation& op, const Env& env) {
  if (op.regions.size() != 2 || op.regions[0].blocks.size() != 1 ||
      op.regions[1].blocks.size() != 1)
    return std::nullopt;
  const Block &cond = op.regions[0].blocks[0], &body = op.regions[1].blocks[0];
  if (cond.ops.empty() || cond.ops.back().operands.size() != 1) return std::nullopt;
  const Operation* cmp = defining(cond, cond.ops.back().operands[0]);
  if (!cmp || cmp->name != "stablehlo.compare" || cmp->operands.size() != 2) return std::nullopt;
  const Attribute* dir = find_attribute(cmp->attributes, "comparison_direction");
  if (!dir || dir->text != "LT") return std::nullopt;
  size_t k = cond.arguments.size();
  for (size_t i = 0; i < cond.arguments.size(); ++i)
    if (cond.arguments[i].first == cmp->operands[0]) k = i;
  if (k == cond.arguments.size() || k >= op.operands.size() || k >= body.arguments.size())
    return std::nullopt;
  const std::optional<int64_t> limit = constant_in(cond, cmp->operands[1], env);
  const std::optional<int64_t> start = env.int_constant(op.operands[k]);
  if (!limit || !start || body.ops.empty() || body.ops.back().operands.size() <= k)
    return std::nullopt;
  const Operation* inc = defining(body, body.ops.back().operands[k]);
  if (!inc || inc->name != "stablehlo.add" || inc->operands.size() != 2) return std::nullopt;
  const std::string& counter = body.arguments[k].first;
  const std::string& other = inc->operands[0] == counter ? inc->operands[1] : inc->operands[0];
  if (inc->operands[0] != counter && inc->operands[1] != counter) return std::nullopt;
  if (constant_in(body, other, env) != std::optional<int64_t>(1)) return std::nullopt;
  return std::max<int64_t>(0, *limit - *start);
}

class Importer {
 public:
  Importer(const Module& m, ImportedModule& out) : out_(out) {
    for (const Function& f : m.functions) functions_[f.name] = &f;
    for (const Operation& op : m.operations)
      out_.sharding_notes.push_back("line " + std::to_string(op.line) + ": " + op.name);
  }

  const Function& function(const std::string& name, int line) const {
    auto it = functions_.find(name);
    if (it == functions_.end())
      throw Error("stablehlo: line " + std::to_string(line) + ": no function @" + name);
    return *it->second;
  }

  Values call(const Function& f, const Values& args, int depth) {
    if (depth > 64)
      throw Error("stablehlo: line " + std::to_string(f.line) + ": calls nest deeper than 64 (@" +
                  f.name + " recursive?)");
    if (args.size() != f.arguments.size())
      throw Error("stablehlo: line " + std::to_string(f.line) + ": @" + f.name + " takes " +
                  std::to_string(f.arguments.size()) + " arguments, got " +
                  std::to_string(args.size()));
    note_attributes(f.attributes, f.line);
    for (const AttributeList& a : f.argument_attributes) note_attributes(a, f.line);
    if (names_checked_.insert(&f).second) detail::check_ssa_names(f);
    Env env;
    Values out = run_region(f.body, args, env, depth);
    check_returned(f, out);
    return out;
  }

  // Runs the region's single block on args; returns what its terminator returns.
  Values run_region(const Region& r, const Values& args, const Env& parent, int depth) {
    if (r.blocks.size() != 1)
      throw Error("stablehlo: a region with " + std::to_string(r.blocks.size()) +
                  " blocks (only single-block regions are supported)");
    const Block& b = r.blocks[0];
    Env env;
    env.parent = &parent;
    env.rows = parent.rows;
    if (args.size() != b.arguments.size())
      throw Error("stablehlo: a block of " + std::to_string(b.arguments.size()) +
                  " arguments given " + std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i) env.values[b.arguments[i].first] = args[i];
    for (const Operation& op : b.ops) {
      if (op.name == "func.return" || op.name == "stablehlo.return") {
        Values out;
        for (const std::string& n : op.operands) out.push_back(env.get(n, op));
        detail::check_operands(op, out, !env.rows);
        return out;
      }
      Values results = run(op, env, depth);
      if (results.size() != op.results.size())
        fail(op, "gives " + std::to_string(results.size()) + " results for " +
                     std::to_string(op.results.size()) + " names");
      for (size_t i = 0; i < results.size(); ++i) env.values[op.results[i]] = results[i];
      if (auto c = scalar_int_constant(op)) env.int_constants[op.results[0]] = *c;
    }
    throw Error("stablehlo: a block without a return");
  }

 private:
  void note_attributes(const AttributeList& attrs, int line) {
    for (const auto& [name, value] : attrs)
      if (name.rfind("mhlo.sharding", 0) == 0 || name.rfind("sdy.", 0) == 0)
        out_.sharding_notes.push_back("line " + std::to_string(line) + ": " + name + " = " +
                                      value.text);
  }

  // A function returns the types it declares.
  static void check_returned(const Function& f, const Values& out) {
    const Block& b = f.body.blocks.at(0);
    const int line = b.ops.empty() ? f.line : b.ops.back().line;
    bool same = out.size() == f.results.size();
    for (size_t k = 0; same && k < out.size(); ++k)
      same = out[k].dtype() == detail::element_dtype(f.results[k].element, line) &&
             out[k].shape() == f.results[k].shape;
    if (same) return;
    auto list = [](const auto& types, auto str) {
      std::string s = "(";
      for (const auto& t : types) s += (s.size() > 1 ? ", " : "") + str(t);
      return s + ")";
    };
    throw Error("stablehlo: line " + std::to_string(line) + ": @" + f.name + " declares results " +
                list(f.results, [](const TensorType& t) { return to_string(t); }) +
                ", but returns " + list(out, detail::mlir_type) +
                " (func.return: the returned types are the function's result types)");
  }

  // One op: its operands and results checked against the types it declares,
  // and drx's own errors in between given the op's line.
  Values run(const Operation& op, const Env& env, int depth) {
    note_attributes(op.attributes, op.line);
    Values in;
    for (const std::string& n : op.operands) in.push_back(env.get(n, op));
    detail::check_operands(op, in, !env.rows);
    Values out;
    try {
      out = dispatch(op, in, env, depth);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("stablehlo: ", 0) == 0) throw;
      const std::string at = "stablehlo: line " + std::to_string(op.line) + ": " + op.name + ": ";
      if (dynamic_cast<const TypeError*>(&e)) throw TypeError(at + what);
      throw Error(at + what);
    }
    detail::check_results(op, in, out, !env.rows);
    return out;
  }

  Values dispatch(const Operation& op, const Values& in, const Env& env, int depth) {
    if (op.name == "func.call") {
      const Attribute& callee = detail::required(op, "callee");
      const Function& f = function(callee.text, op.line);
      for (size_t k = 0; k < in.size() && k < f.arguments.size(); ++k) {
        const TensorType& t = f.arguments[k].second;
        if (in[k].dtype() != detail::element_dtype(t.element, op.line) || in[k].shape() != t.shape)
          fail(op, "passes " + detail::mlir_type(in[k]) + " as argument " + std::to_string(k) +
                       " of @" + f.name + ", which takes " + to_string(t) +
                       " (the operands have the callee's argument types)");
      }
      return call(f, in, depth + 1);
    }
    if (op.name == "stablehlo.custom_call") return custom_call(op, in);
    if (op.name.rfind("check.", 0) == 0) {  // the check dialect of StableHLO's interpreter tests
      auto [c, pair] = detail::import_check_op(op, in);
      c.actual = check_values_.size();
      c.expected = c.actual + 1;
      check_values_.insert(check_values_.end(), pair.begin(), pair.end());
      out_.checks.push_back(c);
      return {};
    }
    if (op.name == "stablehlo.reduce")
      return detail::import_reduce(op, in, [&](const Region& r, const Values& args) {
        Env isolated;
        isolated.rows = true;
        return run_region(r, args, isolated, depth);
      });
    if (auto windowed = detail::import_windowed(op, in, [&](const Region& r, const Values& args) {
          Env isolated;
          isolated.rows = true;
          return run_region(r, args, isolated, depth);
        }))
      return *windowed;
    if (op.name == "stablehlo.gather") {
      if (in.size() != 2) fail(op, "takes an operand and indices");
      return {detail::import_gather(op, in[0], in[1])};
    }
    if (op.name == "stablehlo.while") return while_op(op, in, env, depth);
    if (op.name == "stablehlo.case") return case_op(op, in, env, depth);
    if (op.name == "stablehlo.if") return if_op(op, in, env, depth);
    if (op.name == "stablehlo.optimization_barrier") return in;
    if (op.name.rfind("sdy.", 0) == 0) {
      out_.sharding_notes.push_back("line " + std::to_string(op.line) + ": " + op.name);
      return in.size() == op.results.size() ? in : Values{};
    }
    if (const detail::Lowering* l = detail::find_region_lowering(op.name)) return (*l)(op, in);
    if (!op.regions.empty()) fail(op, "is not supported (an op with regions)");
    if (const detail::Lowering* l = detail::find_lowering(op.name)) return (*l)(op, in);
    fail(op, "is not supported");
  }

  Values custom_call(const Operation& op, const Values& in) {
    const Attribute& target = detail::required(op, "call_target_name");
    const std::string& t = target.text;
    if (t == "check.expect_close" || t == "check.expect_eq" || t == "check.expect_almost_eq") {
      if (in.size() != 2) fail(op, t + " takes (actual, expected)");
      Check c{t.substr(6), op.line, check_values_.size(), check_values_.size() + 1};
      check_values_.push_back(in[0]);
      check_values_.push_back(in[1]);
      out_.checks.push_back(c);
      return {};
    }
    if (t == "Sharding" || t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape") {
      out_.sharding_notes.push_back("line " + std::to_string(op.line) + ": @" + t);
      if (in.size() != 1) fail(op, "@" + t + " takes one operand");
      return in;
    }
    fail(op, "custom_call @" + t + " is not supported");
  }

  Values while_op(const Operation& op, const Values& in, const Env& env, int depth) {
    if (op.regions.size() != 2) fail(op, "needs cond and body regions");
    auto cond_fn = [&](const Tree& carry) {
      Values r = run_region(op.regions[0], leaves(carry), env, depth);
      if (r.size() != 1) fail(op, "cond must return one i1");
      return r[0];
    };
    auto body_fn = [&](const Tree& carry) {
      return as_tree(run_region(op.regions[1], leaves(carry), env, depth));
    };
    // A counted loop becomes a fori_loop (a scan: reverse-differentiable).
    if (std::optional<int64_t> trips = static_trip_count(op, env))
      return leaves(fori_loop(
          0, *trips, [&](const Value&, const Tree& c) { return body_fn(c); }, as_tree(in)));
    return leaves(while_loop(cond_fn, body_fn, as_tree(in)));
  }

  // Branch k of a case (an index out of range takes the last branch).
  Values case_op(const Operation& op, const Values& in, const Env& env, int depth) {
    if (in.size() != 1 || op.regions.empty()) fail(op, "takes an index and branches");
    const int64_t n = static_cast<int64_t>(op.regions.size());
    Value index = astype(in[0], DType::i32);
    std::function<Tree(int64_t)> from = [&](int64_t k) -> Tree {
      auto branch = [&, k](const Tree&) {
        return as_tree(run_region(op.regions[k], {}, env, depth));
      };
      if (k == n - 1) return branch(Tree());
      return cond(
          equal(index, scalar_like(index, static_cast<double>(k))), branch,
          [&, k](const Tree&) { return from(k + 1); }, Tree());
    };
    return leaves(from(0));
  }

  Values if_op(const Operation& op, const Values& in, const Env& env, int depth) {
    if (in.size() != 1 || op.regions.size() != 2) fail(op, "takes a predicate and two branches");
    auto branch = [&](size_t k) {
      return [&, k](const Tree&) { return as_tree(run_region(op.regions[k], {}, env, depth)); };
    };
    return leaves(cond(in[0], branch(0), branch(1), Tree()));
  }

  static Values leaves(const Tree& t) {
    Values out;
    for (const Tree& l : tree_leaves(t)) out.push_back(l.value());
    return out;
  }
  static Tree as_tree(const Values& vs) {
    std::vector<Tree> t(vs.begin(), vs.end());
    return Tree::list(t);
  }

 public:
  Values check_values_;

 private:
  ImportedModule& out_;
  std::map<std::string, const Function*> functions_;
  std::set<const Function*> names_checked_;
};

// One unit in the last place of e in bf16 or f16 (mantissa_bits 7 or 10;
// least normal exponent -126 or -14).
double half_ulp(double e, DType dt) {
  const int mantissa_bits = dt == DType::bf16 ? 7 : 10;
  const int least_exponent = dt == DType::bf16 ? -126 : -14;
  int e2 = 0;
  std::frexp(e, &e2);
  return std::ldexp(1.0, std::max(e2 - 1, least_exponent) - mantissa_bits);
}

bool close_enough(double a, double e, DType dt, bool exact) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (exact) return a == e || (std::isinf(a) && a == e);
  if (a == e) return true;
  if (std::isinf(a) || std::isinf(e)) return false;
  // bf16 and f16 are rounded from f32 once per op: 3 ULP of their own precision.
  if (is_half(dt)) return std::abs(a - e) <= 3 * half_ulp(e, dt);
  const bool f32 = dt == DType::f32;
  // 3 ULP of the expected value's precision.
  const double ulp =
      f32 ? std::abs(std::nextafter(static_cast<float>(e), INFINITY) - static_cast<float>(e))
          : std::abs(std::nextafter(e, INFINITY) - e);
  if (std::abs(a - e) <= 3 * ulp) return true;
  const double rel = f32 ? std::ldexp(1.0, -20) : std::ldexp(1.0, -44);
  return std::abs(a - e) <= rel * std::max(1.0, std::abs(e));
}

}  // namespace

ImportedModule import_module(const Module& module, const std::string& entry) {
  ImportedModule out;
  Importer im(module, out);
  const Function& main = im.function(entry, 0);
  std::vector<Type> in_types;
  for (const auto& [name, t] : main.arguments)
    in_types.emplace_back(detail::element_dtype(t.element, main.line), t.shape);
  out.program = drx::trace(
      [&](std::vector<Value> args) -> Tree {
        Values results = im.call(main, args, 0);
        out.num_results = results.size();
        std::vector<Tree> all(results.begin(), results.end());
        for (const Value& v : im.check_values_) all.emplace_back(v);
        return Tree::list(all);
      },
      in_types, entry);
  return out;
}

Program results_program(const ImportedModule& m) {
  Program p = m.program;
  p.outputs.resize(m.num_results);
  return eliminate_dead_code(p);
}

std::string apply_check(const Check& c, const Array& actual, const Array& expected) {
  if (c.tolerance >= 0 || c.max_ulp >= 0) return detail::apply_dialect_check(c, actual, expected);
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return "line " + std::to_string(c.line) + ": " + c.kind + ": " + actual.str().substr(0, 40) +
           " vs expected of another type";
  const bool exact = c.kind == "expect_eq" || !is_floating(actual.dtype());
  for (int64_t i = 0; i < actual.size(); ++i) {
    const double a = actual.element_as_double(i), e = expected.element_as_double(i);
    bool same = close_enough(a, e, actual.dtype(), exact);
    if (exact && !is_floating(actual.dtype()) && dtype_size(actual.dtype()) == 8) {
      // Compare 64-bit integers exactly (doubles round above 2^53).
      same = actual.data<int64_t>()[i] == expected.data<int64_t>()[i];
    }
    if (!same)
      return "line " + std::to_string(c.line) + ": " + c.kind + ": element " + std::to_string(i) +
             " is " + std::to_string(a) + ", expected " + std::to_string(e);
  }
  return "";
}

}  // namespace drx::stablehlo

namespace drx {
Program from_stablehlo(const std::string& text) {
  return stablehlo::results_program(stablehlo::import_module(stablehlo::parse_mlir(text)));
}
}  // namespace drx
