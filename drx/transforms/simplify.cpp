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
        if (std::optional<int> same = round_trip_convert(e)) {
          alias_[static_cast<size_t>(e.outs[0])] = *same;
          continue;
        }
        sum_of_disjoint_concatenates(e);
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

  // The equation of out_ defining v (a variable of out_), or null.
  const Eqn* producer(int v) const {
    auto it = producer_.find(v);
    return it == producer_.end() ? nullptr : &out_.eqns[it->second];
  }

  // convert(convert(x, W), D) where x is of dtype D and W holds every value of D exactly (bf16
  // or f16 through f32 or f64, f32 through f64): x.
  std::optional<int> round_trip_convert(const Eqn& e) const {
    if (e.prim != &prims::convert() || e.ins.size() != 1) return std::nullopt;
    const Eqn* inner = producer(e.ins[0]);
    if (!inner || inner->prim != &prims::convert() || inner->ins.size() != 1) return std::nullopt;
    const int x = inner->ins[0];
    const DType d = out_.type_of(x).dtype, w = out_.type_of(e.ins[0]).dtype;
    if (!(out_.type_of(x) == type(e.outs[0]))) return std::nullopt;
    const bool half = d == DType::bf16 || d == DType::f16;
    if ((half && (w == DType::f32 || w == DType::f64)) || (d == DType::f32 && w == DType::f64))
      return x;
    return std::nullopt;
  }

  // The pieces along `axis` of v: [offset, offset + size) holding variable `var`, or zeros.
  struct Piece {
    int64_t offset = 0, size = 0;
    int var = -1;
    bool zero = false;
  };
  std::optional<std::vector<Piece>> pieces(int v, int64_t axis) const {
    const Eqn* c = producer(v);
    if (!c || c->prim != &prims::concatenate() || c->params.get_int("axis", "concatenate") != axis)
      return std::nullopt;
    std::vector<Piece> out;
    int64_t offset = 0;
    for (int in : c->ins) {
      const int64_t size = out_.type_of(in).shape[static_cast<size_t>(axis)];
      const std::optional<double> z = splat(in);
      out.push_back(Piece{offset, size, in, z && *z == 0.0});
      offset += size;
    }
    return out;
  }

  // add(concatenate(a..., 0...), concatenate(0..., b...)) along one axis, where at every
  // position at most one side is not zero (reverse mode sums the cotangents of disjoint
  // slices of one value this way): one concatenate of the non-zero pieces, zeros between
  // them. (x + 0 is x, as algebraic_identity has it.)
  void sum_of_disjoint_concatenates(Eqn& e) {
    if (e.prim != &prims::add() || e.ins.size() != 2) return;
    const Type& t = type(e.outs[0]);
    if (!t.placement.empty()) return;  // (a placed zero would be place(constant))
    const Eqn* first = producer(e.ins[0]);
    if (!first || first->prim != &prims::concatenate()) return;
    const int64_t axis = first->params.get_int("axis", "concatenate");
    std::optional<std::vector<Piece>> a = pieces(e.ins[0], axis), b = pieces(e.ins[1], axis);
    if (!a || !b || !(out_.type_of(e.ins[0]) == t) || !(out_.type_of(e.ins[1]) == t)) return;
    const int64_t total = t.shape[static_cast<size_t>(axis)];
    auto at = [](const std::vector<Piece>& ps, int64_t pos) -> const Piece& {
      for (const Piece& p : ps)
        if (pos < p.offset + p.size) return p;
      return ps.back();
    };
    // Whether ps is zero over [lo, hi), and where its next non-zero piece after lo starts.
    auto zero_over = [](const std::vector<Piece>& ps, int64_t lo, int64_t hi) {
      for (const Piece& p : ps)
        if (!p.zero && p.size > 0 && p.offset < hi && p.offset + p.size > lo) return false;
      return true;
    };
    auto next_value = [total](const std::vector<Piece>& ps, int64_t pos) {
      for (const Piece& p : ps)
        if (!p.zero && p.size > 0 && p.offset >= pos) return p.offset;
      return total;
    };
    std::vector<int> parts;  // the new operands; -1: a run of zeros of zero_sizes[k]
    std::vector<int64_t> zero_sizes;
    for (int64_t pos = 0; pos < total;) {
      const Piece &pa = at(*a, pos), &pb = at(*b, pos);
      const Piece* value = !pa.zero ? &pa : !pb.zero ? &pb : nullptr;
      if (value) {
        const std::vector<Piece>& other = value == &pa ? *b : *a;
        if (value->offset != pos || !zero_over(other, pos, pos + value->size)) return;
        if (!pa.zero && !pb.zero) return;
        parts.push_back(value->var);
        zero_sizes.push_back(0);
        pos += value->size;
        continue;
      }
      const int64_t end = std::min(next_value(*a, pos), next_value(*b, pos));
      parts.push_back(-1);
      zero_sizes.push_back(end - pos);
      pos = end;
    }
    std::vector<int> ins;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (parts[k] >= 0) {
        ins.push_back(parts[k]);
        continue;
      }
      Shape shape = t.shape;
      shape[static_cast<size_t>(axis)] = zero_sizes[k];
      ins.push_back(zeros_of(t, shape));
    }
    e.prim = &prims::concatenate();
    e.ins = std::move(ins);
    e.params = Params{{"axis", axis}};
  }

  // A broadcast of a zero scalar constant of t's dtype to `shape` (new variables of out_).
  int zeros_of(const Type& t, const Shape& shape) {
    Type scalar = t;
    scalar.shape = {};
    const int zero = out_.add_var(scalar);
    record(Eqn{&prims::constant(), Params{{"value", full({}, 0.0, t.dtype)}}, {}, {zero}});
    Type whole = t;
    whole.shape = shape;
    const int z = out_.add_var(whole);
    record(Eqn{&prims::broadcast_in_dim(),
               Params{{"dims", std::vector<int64_t>{}}, {"shape", std::vector<int64_t>(shape)}},
               {zero},
               {z}});
    return z;
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
    for (int o : e.outs) producer_[o] = out_.eqns.size();
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
  std::map<int, size_t> producer_;  // out_'s variables -> the index of their equation
};

}  // namespace

Program simplify(const Program& p) {
  Program cur = Simplifier(p).run();
  // A second pass catches identities exposed by folding and CSE.
  Program next = Simplifier(cur).run();
  return next;
}

}  // namespace drx
