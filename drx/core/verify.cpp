// The well-formedness check behind every transformation's output: SSA form
// and types that agree with what each primitive infers.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/core/program_text.h"
#include "drx/core/text_syntax.h"

namespace drx {
namespace {

class Verifier {
 public:
  void check(const Program& p) {
    auto [it, fresh] = state_.emplace(&p, State::in_progress);
    if (!fresh) {
      if (it->second == State::in_progress)
        throw TypeError("verify @" + p.name + ": the program contains itself as a sub-program");
      return;  // shared bodies are checked once
    }
    check_body(p);
    it->second = State::done;
  }

 private:
  enum class State { in_progress, done };

  static std::string header(const Program& p) {
    return "verify @" + text::name_text(p.name) + ": ";
  }
  [[noreturn]] static void fail(const Program& p, size_t index, const Eqn& e,
                                const std::string& problem) {
    throw TypeError(header(p) + "equation " + std::to_string(index) + " `" +
                    text::raw_eqn_text(p, e) + "`: " + problem);
  }
  static std::string var(int v) { return "%" + std::to_string(v); }

  // The header's placements fix the leading dimensions of placed values: one row per member,
  // one axis per level of a nested path. A value of another size would still run, row by row,
  // but for a cohort the program does not declare. "" when t is fine (or nothing is declared).
  static std::string placement_problem(const Program& p, const Type& t) {
    if (t.placement.empty() || p.placements.empty()) return "";
    std::string declared;
    for (const auto& [name, size] : p.placements)
      declared += (declared.empty() ? "" : ", ") + name + "=" + std::to_string(size);
    std::vector<std::string> levels;
    for (size_t start = 0;;) {
      const size_t dot = t.placement.find('.', start);
      levels.push_back(t.placement.substr(start, dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    for (size_t i = 0; i < levels.size(); ++i) {
      const auto it = std::find_if(p.placements.begin(), p.placements.end(),
                                   [&](const auto& d) { return d.first == levels[i]; });
      if (it == p.placements.end())
        return text::type_text(t) + " is placed at '" + levels[i] +
               "', which the header does not declare ([" + declared + "])";
      if (static_cast<int64_t>(i) >= t.ndim() || t.shape[i] != it->second)
        return text::type_text(t) + " does not have one row per member of '" + levels[i] +
               "' (dimension " + std::to_string(i) + " should be " + std::to_string(it->second) +
               ", as the header [" + declared + "] declares)";
    }
    return "";
  }

  void check_body(const Program& p) {
    const size_t n = p.var_types.size();
    auto in_range = [&](int v) { return v >= 0 && static_cast<size_t>(v) < n; };
    std::vector<char> defined(n, 0);
    const std::string range = " (the program has " + std::to_string(n) + " variables)";

    for (size_t i = 0; i < p.inputs.size(); ++i) {
      int v = p.inputs[i];
      if (!in_range(v))
        throw TypeError(header(p) + "input " + std::to_string(i) + " is " + var(v) +
                        ", not a variable of the program" + range);
      if (defined[static_cast<size_t>(v)])
        throw TypeError(header(p) + "input " + std::to_string(i) + " " + var(v) +
                        " is already an earlier input (each variable is defined once)");
      if (std::string problem = text::type_problem(p.type_of(v)); !problem.empty())
        throw TypeError(header(p) + "input " + std::to_string(i) + " " + var(v) + ": " + problem);
      if (std::string problem = placement_problem(p, p.type_of(v)); !problem.empty())
        throw TypeError(header(p) + "input " + std::to_string(i) + " " + var(v) + ": " + problem);
      defined[static_cast<size_t>(v)] = 1;
    }

    for (size_t k = 0; k < p.eqns.size(); ++k) {
      const Eqn& e = p.eqns[k];
      if (!e.prim) fail(p, k, e, "the equation has no primitive");
      std::vector<Type> in_types;
      for (int v : e.ins) {
        if (!in_range(v)) fail(p, k, e, "operand " + var(v) + " is not a variable" + range);
        if (!defined[static_cast<size_t>(v)])
          fail(p, k, e, "operand " + var(v) + " is used before it is defined");
        in_types.push_back(p.type_of(v));
      }
      for (const auto& [key, value] : e.params.items()) {
        auto* sub = std::get_if<std::shared_ptr<const Program>>(&value);
        if (!sub) continue;
        if (!*sub) fail(p, k, e, "parameter " + key + " holds no sub-program (null)");
        try {
          check(**sub);
        } catch (const TypeError& err) {
          fail(p, k, e, "in sub-program " + key + ": " + err.what());
        }
      }
      std::vector<Type> inferred;
      try {
        inferred = e.prim->infer_types(in_types, e.params);
      } catch (const Error& err) {
        fail(p, k, e, err.what());
      }
      if (inferred.size() != e.outs.size())
        fail(p, k, e,
             e.prim->name() + " produces " + std::to_string(inferred.size()) +
                 " output(s), the equation defines " + std::to_string(e.outs.size()));
      for (size_t i = 0; i < e.outs.size(); ++i) {
        int v = e.outs[i];
        if (!in_range(v)) fail(p, k, e, "output " + var(v) + " is not a variable" + range);
        if (defined[static_cast<size_t>(v)])
          fail(p, k, e, "output " + var(v) + " is already defined (each variable is defined once)");
        if (!(p.type_of(v) == inferred[i]))
          fail(p, k, e,
               "output " + var(v) + " is recorded as " + text::type_text(p.type_of(v)) + " but " +
                   e.prim->name() + " infers " + text::type_text(inferred[i]));
        if (std::string problem = placement_problem(p, inferred[i]); !problem.empty())
          fail(p, k, e, "output " + var(v) + ": " + problem);
        defined[static_cast<size_t>(v)] = 1;
      }
    }

    for (size_t i = 0; i < p.outputs.size(); ++i) {
      int v = p.outputs[i];
      if (!in_range(v) || !defined[static_cast<size_t>(v)])
        throw TypeError(header(p) + "output " + std::to_string(i) + " " + var(v) +
                        " is not defined by an input or an equation");
    }
  }

  std::map<const Program*, State> state_;
};

}  // namespace

void verify(const Program& p) { Verifier().check(p); }

}  // namespace drx
