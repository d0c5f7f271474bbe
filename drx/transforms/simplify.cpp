#include "drx/transforms/simplify.h"

#include <cstdint>
#include <map>
#include <optional>

#include "drx/core/primitive.h"
#include "drx/ops/primitives.h"

namespace drx {

Program eliminate_dead_code(const Program& p) {
  std::vector<char> live(p.var_types.size(), 0);
  for (int v : p.outputs) live[static_cast<size_t>(v)] = 1;
  std::vector<char> keep(p.eqns.size(), 0);
  for (size_t i = p.eqns.size(); i-- > 0;) {
    const Eqn& e = p.eqns[i];
    bool used = false;
    for (int o : e.outs) used = used || live[static_cast<size_t>(o)];
    if (!used) continue;
    keep[i] = 1;
    for (int v : e.ins) live[static_cast<size_t>(v)] = 1;
  }
  Program out = p;
  out.eqns.clear();
  for (size_t i = 0; i < p.eqns.size(); ++i)
    if (keep[i]) out.eqns.push_back(p.eqns[i]);
  return out;
}

namespace {

// Constants folded at compile time stay small so programs stay readable.
constexpr int64_t kMaxFoldedElements = 64;

class Simplifier {
 public:
  explicit Simplifier(const Program& p) : in_(p), alias_(p.var_types.size()) {
    for (size_t v = 0; v < alias_.size(); ++v) alias_[v] = static_cast<int>(v);
    out_ = p;
    out_.eqns.clear();
  }

  Program run() {
    for (const Eqn& e0 : in_.eqns) {
      Eqn e = e0;
      for (int& v : e.ins) v = alias_[static_cast<size_t>(v)];
      simplify_bodies(e);
      if (e.outs.size() == 1) {
        if (std::optional<int> same = algebraic_identity(e)) {
          alias_[static_cast<size_t>(e.outs[0])] = *same;
          continue;
        }
        fold_constants(e);
      }
      if (std::optional<const Eqn*> prev = find_common(e)) {
        for (size_t i = 0; i < e.outs.size(); ++i)
          alias_[static_cast<size_t>(e.outs[i])] = (*prev)->outs[i];
        continue;
      }
      record(e);
    }
    for (int& v : out_.outputs) v = alias_[static_cast<size_t>(v)];
    return eliminate_dead_code(out_);
  }

 private:
  // The single value of a constant whose elements are all equal, if v is one
  // (directly or broadcast from a scalar constant).
  std::optional<double> splat(int v) const {
    if (auto b = broadcast_splats_.find(v); b != broadcast_splats_.end()) return b->second;
    auto it = constants_.find(v);
    if (it == constants_.end()) return std::nullopt;
    const Array& a = it->second;
    if (a.size() == 0) return std::nullopt;
    double first = a.element_as_double(0);
    for (int64_t i = 1; i < a.size(); ++i)
      if (a.element_as_double(i) != first) return std::nullopt;
    return first;
  }

  const Type& type(int v) const { return in_.type_of(v); }

  // Sub-programs (map_fn bodies) are simplified too.
  static void simplify_bodies(Eqn& e) {
    std::vector<std::pair<std::string, std::shared_ptr<const Program>>> bodies;
    for (const auto& [key, attr] : e.params.items())
      if (const auto* body = std::get_if<std::shared_ptr<const Program>>(&attr))
        bodies.emplace_back(key, std::make_shared<const Program>(simplify(**body)));
    for (auto& [key, body] : bodies) e.params.set(key, body);
  }

  // x*1, 1*x, x/1, x+0, 0+x, x-0, no-op reshapes/transposes/converts/broadcasts:
  // each primitive states which of its operands it would return unchanged.
  std::optional<int> algebraic_identity(const Eqn& e) const {
    std::vector<std::optional<double>> splats;
    for (int v : e.ins) splats.push_back(splat(v));
    std::optional<size_t> k = e.prim->identity_operand(splats, e.params);
    if (!k || *k >= e.ins.size()) return std::nullopt;
    const int v = e.ins[*k];
    if (!(type(v) == type(e.outs[0]))) return std::nullopt;
    return v;
  }

  // Evaluates a pure equation whose inputs are all small constants.
  void fold_constants(Eqn& e) {
    if (!e.prim->is_pure() || e.prim == &prims::constant()) return;
    std::vector<Array> args;
    for (int v : e.ins) {
      auto it = constants_.find(v);
      if (it == constants_.end()) return;
      args.push_back(it->second);
    }
    if (type(e.outs[0]).size() > kMaxFoldedElements) return;
    // A constant is a server value: a placed result stays place(constant).
    if (!type(e.outs[0]).placement.empty()) return;
    for (const auto& [k, attr] : e.params.items())
      if (std::holds_alternative<std::shared_ptr<const Program>>(attr)) return;
    std::vector<Array> result;
    try {
      result = e.prim->evaluate(args, e.params);
    } catch (const Error&) {
      return;  // leave a data-dependent failure to run time, where it is reported
    }
    e.prim = &prims::constant();
    e.ins.clear();
    e.params = Params{{"value", result[0]}};
  }

  std::optional<const Eqn*> find_common(const Eqn& e) const {
    if (!e.prim->is_pure()) return std::nullopt;
    auto range = by_key_.equal_range(key(e));
    for (auto it = range.first; it != range.second; ++it) {
      const Eqn& prev = out_.eqns[it->second];
      if (prev.params == e.params) return &prev;
    }
    return std::nullopt;
  }

  static std::string key(const Eqn& e) {
    std::string k = std::to_string(reinterpret_cast<std::uintptr_t>(e.prim));
    for (int v : e.ins) k += "," + std::to_string(v);
    return k;
  }

  void record(const Eqn& e) {
    if (e.prim == &prims::constant())
      constants_[e.outs[0]] = e.params.get_array("value", "constant");
    // A broadcast too large to fold still has one known value everywhere, so
    // x * broadcast(1) on a large x is recognised as x.
    if (e.prim == &prims::broadcast_in_dim())
      if (std::optional<double> s = splat(e.ins[0])) broadcast_splats_[e.outs[0]] = *s;
    by_key_.emplace(key(e), out_.eqns.size());
    out_.eqns.push_back(e);
  }

  const Program& in_;
  Program out_;
  std::vector<int> alias_;
  std::map<int, Array> constants_;
  std::map<int, double> broadcast_splats_;  // unfolded broadcasts of splat constants
  std::multimap<std::string, size_t> by_key_;
};

}  // namespace

Program simplify(const Program& p) {
  Program cur = Simplifier(p).run();
  // A second pass catches identities exposed by folding and CSE.
  Program next = Simplifier(cur).run();
  return next;
}

}  // namespace drx
