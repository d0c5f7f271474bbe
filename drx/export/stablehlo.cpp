#include "drx/export/stablehlo.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>

#include "drx/array/error.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/export/mlir_text.h"
#include "drx/export/sharding.h"
#include "drx/transforms/simplify.h"

namespace drx {
namespace {

// The state one module's functions share: SSA numbering, the options, and
// what sharding constraints need to know of each SSA name.
struct ModuleState {
  StableHloOptions options;
  int next_id = 0;
  std::string fresh() { return "%" + std::to_string(next_id++); }
  // The placements of the batched map_fn bodies being emitted, outermost
  // first: level k's batch dimension carries mesh axis levels[k] (if any).
  std::vector<std::string> levels;
  // Per SSA name, the levels whose batch dimension it has (bit k: level k).
  // A value has a level's batch when it depends on that body's inputs, as
  // vmap batches exactly those; batch dimensions follow the placement axes,
  // innermost level first (drx's vmap convention for placed values).
  std::map<std::string, uint64_t> carried;
  // Per SSA name, the axes an argument sharding or a constraint gave it,
  // so an operand already constrained so is not constrained again.
  std::map<std::string, ShardingWriter::DimAxes> known;
  uint64_t carried_by(const std::string& name) const {
    auto it = carried.find(name);
    return it == carried.end() ? 0 : it->second;
  }
};

// Emits into one block (a function body or a region), `indent` deep.

class BlockEmitter : public StableHloEmitter {
  // What one region's body returned: the levels each returned value carries.
  struct RegionText {
    std::string text;
    std::vector<uint64_t> returned;
  };

 public:
  BlockEmitter(ModuleState& module, int indent) : m_(module), indent_(indent) {}

  const std::string& text() const { return text_; }

  size_t num_operands() const override { return eqn().operands.size(); }
  std::string operand(size_t i) const override { return eqn().operands.at(i); }
  const Type& operand_type(size_t i) const override { return eqn().operand_types.at(i); }
  size_t num_results() const override { return eqn().result_types.size(); }
  const Type& result_type(size_t j) const override { return eqn().result_types.at(j); }

  std::vector<std::string> emit(const std::string& op, const std::vector<std::string>& operands,
                                const MlirAttributes& attributes,
                                const std::vector<Type>& result_types,
                                const std::vector<MlirRegion>& regions) override {
    mlir_text::OpText t;
    t.op = op;
    t.operands = operands;
    for (const std::string& name : operands) t.operand_types.push_back(type_of(name));
    t.attributes = attributes;
    t.result_types = result_types;
    std::vector<uint64_t> in;
    uint64_t all = 0;
    for (const std::string& name : operands) all |= in.emplace_back(m_.carried_by(name));
    // Region arguments stand for the operands one to one (while) or are
    // element scalars (reduce, sort): either way they carry what those do.
    std::vector<RegionText> bodies;
    for (const MlirRegion& r : regions) {
      std::vector<uint64_t> args(r.arg_types.size(), all);
      if (r.arg_types.size() == operands.size()) args = in;
      bodies.push_back(region_text(r, args));
      t.regions.push_back(bodies.back().text);
      for (uint64_t c : bodies.back().returned) all |= c;
    }
    const bool one_to_one = !regions.empty() && result_types.size() == operands.size();
    const std::string base = m_.fresh();
    for (size_t k = 0; k < result_types.size(); ++k) {
      const std::string name = result_types.size() == 1 ? base : base + "#" + std::to_string(k);
      t.results.push_back(name);
      types_[name] = result_types[k];
      uint64_t c = all;
      if (one_to_one) {
        c = in[k];
        for (const RegionText& b : bodies)
          if (b.returned.size() == result_types.size()) c |= b.returned[k];
      }
      if (c) m_.carried[name] = c;
    }
    line(mlir_text::op_line(t, m_.options.generic));
    return t.results;
  }

  std::string constant(const Array& value) override {
    const Type t(value.dtype(), value.shape());
    return emit1("stablehlo.constant", {},
                 {{"value", mlir_text::dense(value) + " : " + mlir_type(t)}}, t);
  }

  std::vector<std::string> inline_program(const Program& p,
                                          const std::vector<std::string>& args) override {
    if (args.size() != p.inputs.size())
      throw Error("to_stablehlo: @" + p.name + " takes " + std::to_string(p.inputs.size()) +
                  " inputs, " + std::to_string(args.size()) + " given");
    std::vector<std::string> env(p.var_types.size());
    for (size_t i = 0; i < args.size(); ++i) env[static_cast<size_t>(p.inputs[i])] = args[i];
    for (size_t k = 0; k < p.eqns.size(); ++k) {
      const Eqn& e = p.eqns[k];
      Context c;
      for (int v : e.ins) {
        c.operands.push_back(env[static_cast<size_t>(v)]);
        c.operand_types.push_back(p.type_of(v));
      }
      for (int v : e.outs) c.result_types.push_back(p.type_of(v));
      contexts_.push_back(std::move(c));
      try {
        e.prim->lower(*this, e.params);
      } catch (const Error& err) {
        contexts_.pop_back();
        throw Error("to_stablehlo: @" + p.name + " equation " + std::to_string(k) + " (" +
                    e.prim->name() + "): " + err.what());
      }
      Context done = std::move(contexts_.back());
      contexts_.pop_back();
      if (!done.results || done.results->size() != e.outs.size())
        throw Error("to_stablehlo: the lowering of " + e.prim->name() + " set " +
                    std::to_string(done.results ? done.results->size() : 0) + " results, the " +
                    "equation has " + std::to_string(e.outs.size()));
      for (size_t j = 0; j < e.outs.size(); ++j) {
        env[static_cast<size_t>(e.outs[j])] = (*done.results)[j];
        types_[(*done.results)[j]] = p.type_of(e.outs[j]);
      }
    }
    std::vector<std::string> outs;
    for (int v : p.outputs) outs.push_back(env[static_cast<size_t>(v)]);
    return outs;
  }

  void set_results(const std::vector<std::string>& names) override {
    contexts_.back().results = names;
  }
  bool canonical_placement_reductions() const override { return !m_.options.single_reduce; }

  std::vector<std::string> inline_batched(const Program& batched,
                                          const std::vector<std::string>& args,
                                          const std::string& placement) override {
    if (m_.levels.size() == 64)
      throw Error("to_stablehlo: more than 64 nested map_fn bodies around @" + batched.name);
    m_.levels.push_back(placement);
    const uint64_t bit = uint64_t{1} << (m_.levels.size() - 1);
    // An argument may be the operand itself (no transpose needed): it has the
    // body's batch only inside the body.
    std::map<std::string, uint64_t> outside;
    for (const std::string& a : args) outside.emplace(a, m_.carried_by(a));
    for (const std::string& a : args) m_.carried[a] |= bit;
    std::vector<std::string> outs;
    try {
      outs = inline_program(batched, args);
    } catch (...) {
      m_.levels.pop_back();
      throw;
    }
    m_.levels.pop_back();
    // The results leave the body: their batch becomes the placement axis.
    for (const std::string& o : outs) m_.carried[o] &= ~bit;
    for (const auto& [a, c] : outside) m_.carried[a] = c;
    return outs;
  }

  std::string constrain_placed(const std::string& value, const Type& t) override {
    if (!sharding_ || !sharding_->active()) return value;
    ShardingWriter::DimAxes axes = sharding_->placement_axes(t);
    size_t d = static_cast<size_t>(placement_depth(t.placement));
    const uint64_t c = m_.carried_by(value);
    for (size_t k = m_.levels.size(); k-- > 0;) {
      if (!(c & (uint64_t{1} << k))) continue;
      if (d < axes.size() && sharding_->has_axis(m_.levels[k])) axes[d] = m_.levels[k];
      ++d;
    }
    if (std::all_of(axes.begin(), axes.end(), [](const std::string& a) { return a.empty(); }))
      return value;
    if (auto it = m_.known.find(value); it != m_.known.end() && it->second == axes) return value;
    const std::string name = sharding_->constrain(*this, value, t, axes);
    m_.known[name] = axes;
    return name;
  }

  // Names a block argument (of a function or region).
  std::string argument(const Type& t, const std::string& given = "") {
    const std::string name = given.empty() ? m_.fresh() : given;
    types_[name] = t;
    return name;
  }
  void line(const std::string& s) {
    text_ += std::string(static_cast<size_t>(indent_), ' ') + s + "\n";
  }
  const Type& type_of(const std::string& name) const {
    auto it = types_.find(name);
    if (it == types_.end()) throw Error("internal: to_stablehlo: no type for " + name);
    return it->second;
  }
  void set_sharding(const ShardingWriter* s) { sharding_ = s; }

 private:
  struct Context {
    std::vector<std::string> operands;
    std::vector<Type> operand_types;
    std::vector<Type> result_types;
    std::optional<std::vector<std::string>> results;
  };
  const Context& eqn() const {
    if (contexts_.empty()) throw Error("internal: to_stablehlo: no equation is being lowered");
    return contexts_.back();
  }

  RegionText region_text(const MlirRegion& r, const std::vector<uint64_t>& carried) {
    BlockEmitter body(m_, indent_ + 2);
    body.set_sharding(sharding_);
    body.types_ = types_;  // values from above may be read (operands are named uniquely)
    std::vector<std::string> args;
    std::string header = "^bb0(";
    for (size_t i = 0; i < r.arg_types.size(); ++i) {
      args.push_back(body.argument(r.arg_types[i]));
      if (carried[i]) m_.carried[args.back()] = carried[i];
      header += (i ? ", " : "") + args.back() + ": " + mlir_type(r.arg_types[i]);
    }
    header += "):";
    std::vector<std::string> results = r.body(body, args);
    std::vector<Type> result_types;
    for (const std::string& n : results) result_types.push_back(body.type_of(n));
    mlir_text::OpText ret;
    ret.op = "stablehlo.return";
    ret.operands = results;
    ret.operand_types = result_types;
    std::string ret_line =
        m_.options.generic ? mlir_text::op_line(ret, true)
        : results.empty()  ? "stablehlo.return"
                           : "stablehlo.return " + join(results) + " : " + types_text(result_types);
    const std::string pad(static_cast<size_t>(indent_), ' ');
    RegionText out{
        "{\n" + pad + header + "\n" + body.text() + pad + "  " + ret_line + "\n" + pad + "}", {}};
    for (const std::string& n : results) out.returned.push_back(m_.carried_by(n));
    return out;
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  }
  static std::string types_text(const std::vector<Type>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + mlir_type(v[i]);
    return s;
  }

  ModuleState& m_;
  int indent_;
  std::string text_;
  std::vector<Context> contexts_;
  std::map<std::string, Type> types_;
  const ShardingWriter* sharding_ = nullptr;
};

std::string types_text(const std::vector<Type>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + mlir_type(v[i]);
  return s;
}

// The type an input is used at: programs of drx::program take their
// arguments unplaced and place them with a placement-aware equation that
// keeps the shape, so the argument is sharded as that equation's result.
Type placed_as(const Program& p, int input) {
  for (const Eqn& e : p.eqns)
    if (e.prim->placement_aware() && e.ins.size() == 1 && e.ins[0] == input && e.outs.size() == 1 &&
        !p.type_of(e.outs[0]).placement.empty() &&
        p.type_of(e.outs[0]).shape == p.type_of(input).shape)
      return p.type_of(e.outs[0]);
  return p.type_of(input);
}

// The type an output had before `place` unplaced it (a per-client value
// returned as a plain array): it stays split over the clients' devices, as a
// placed result would, rather than being gathered onto every device.
Type unplaced_from(const Program& p, int output) {
  const Type& t = p.type_of(output);
  if (!t.placement.empty()) return t;
  for (const Eqn& e : p.eqns)
    if (e.prim->placement_aware() && e.outs.size() == 1 && e.outs[0] == output &&
        e.ins.size() == 1 && !p.type_of(e.ins[0]).placement.empty() &&
        p.type_of(e.ins[0]).shape == t.shape)
      return p.type_of(e.ins[0]);
  return t;
}

// func.func public @main, pretty or generic.
std::string function_text(ModuleState& m, const Program& p, const ShardingWriter& sharding) {
  const bool generic = m.options.generic;
  const int indent = generic ? 6 : 4;
  BlockEmitter body(m, indent);
  body.set_sharding(&sharding);
  std::vector<std::string> args;
  std::vector<Type> in_types, out_types;
  for (int v : p.inputs) {
    in_types.push_back(p.type_of(v));
    args.push_back(body.argument(p.type_of(v), "%arg" + std::to_string(args.size())));
    if (sharding.active()) m.known[args.back()] = sharding.placement_axes(placed_as(p, v));
  }
  for (int v : p.outputs) out_types.push_back(p.type_of(v));
  const std::vector<std::string> results = body.inline_program(p, args);

  std::vector<std::string> arg_attrs, res_attrs;
  for (size_t i = 0; i < in_types.size(); ++i)
    arg_attrs.push_back(sharding.argument_attributes(placed_as(p, p.inputs[i])));
  for (int v : p.outputs) res_attrs.push_back(sharding.argument_attributes(unplaced_from(p, v)));
  if (!generic) {
    std::string sig = "  func.func public @main(";
    for (size_t i = 0; i < args.size(); ++i) {
      sig += (i ? ", " : "") + args[i] + ": " + mlir_type(in_types[i]);
      if (!arg_attrs[i].empty()) sig += " " + arg_attrs[i];
    }
    sig += ") -> (";
    for (size_t i = 0; i < out_types.size(); ++i) {
      sig += (i ? ", " : "") + mlir_type(out_types[i]);
      if (!res_attrs[i].empty()) sig += " " + res_attrs[i];
    }
    sig += ") {\n";
    std::string ret = "    return";
    if (!results.empty()) {
      ret += " ";
      for (size_t i = 0; i < results.size(); ++i) ret += (i ? ", " : "") + results[i];
      ret += " : " + types_text(out_types);
    }
    return sig + body.text() + ret + "\n  }\n";
  }
  auto attr_list = [](const std::vector<std::string>& attrs) {
    std::string s = "[";
    for (size_t i = 0; i < attrs.size(); ++i)
      s += (i ? ", " : "") + (attrs[i].empty() ? "{}" : attrs[i]);
    return s + "]";
  };
  std::string props = "<{function_type = " + mlir_text::function_type(in_types, out_types);
  if (!in_types.empty()) props += ", arg_attrs = " + attr_list(arg_attrs);
  if (!out_types.empty()) props += ", res_attrs = " + attr_list(res_attrs);
  props += ", sym_name = \"main\", sym_visibility = \"public\"}>";
  std::string header = "    ^bb0(";
  for (size_t i = 0; i < args.size(); ++i)
    header += (i ? ", " : "") + args[i] + ": " + mlir_type(in_types[i]);
  header += "):\n";
  std::string ret = "      \"func.return\"(";
  for (size_t i = 0; i < results.size(); ++i) ret += (i ? ", " : "") + results[i];
  ret += ") : (" + types_text(out_types) + ") -> ()\n";
  return "  \"func.func\"() " + props + " ({\n" + (args.empty() ? "    ^bb0():\n" : header) +
         body.text() + ret + "  }) : () -> ()\n";
}

std::string module_name(const Program& p, const StableHloOptions& o) {
  std::string name = o.module_name.empty() ? "jit_" + p.name : o.module_name;
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$')) c = '_';
  return name;
}

}  // namespace

std::string to_stablehlo(const Program& program, const Mesh& mesh,
                         const StableHloOptions& options) {
  ModuleState m;
  m.options = options;
  // A mesh across processes exports as the one mesh of all their devices.
  const Mesh whole = mesh.global();
  check_mesh_names_placements(program, whole, "to_stablehlo");
  if (!options.allow_idle_devices)
    for (const IdleMeshAxis& idle : idle_mesh_axes(program, whole))
      throw Error("to_stablehlo: mesh axis '" + idle.axis + "' has " +
                  std::to_string(idle.devices) + " devices but placement '" + idle.axis + "' has " +
                  std::to_string(idle.size) +
                  " values: " + std::to_string(idle.devices - idle.size) +
                  " devices would hold only padding. Use a mesh axis of at most " +
                  std::to_string(idle.size) +
                  " devices, or allow idle devices (StableHloOptions::allow_idle_devices, "
                  "drx export --allow-idle-devices)");
  const ShardingWriter sharding(whole, options.gspmd);
  // No dead code in the module: XLA would compile it, and shardings of
  // values nothing reads would only mislead.
  const Program simplified = simplify(program);
  const std::string func = function_text(m, simplified, sharding);
  const std::string name = module_name(program, options);
  const std::string partitions = std::to_string(whole.devices());
  const std::string attrs =
      "{mhlo.num_partitions = " + partitions + " : i32, mhlo.num_replicas = 1 : i32}";
  const std::string mesh_decl = sharding.mesh_declaration(options.generic);
  if (options.generic)
    return "\"builtin.module\"() <{sym_name = \"" + name + "\"}> ({\n" + mesh_decl + func + "}) " +
           attrs + " : () -> ()\n";
  return "module @" + name + " attributes " + attrs + " {\n" + mesh_decl + func + "}\n";
}

}  // namespace drx
