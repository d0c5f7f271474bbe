// Program -> text. The format is documented in drx/ir/parse.cpp.
#include <functional>
#include <map>
#include <ostream>
#include <set>

#include "drx/array/half.h"
#include "drx/core/primitive.h"
#include "drx/core/program_text.h"
#include "drx/core/text_syntax.h"

namespace drx {
namespace {

using ProgramName = std::function<std::string(const Program*)>;

std::string array_text(const Array& a) {
  std::string s = std::string(dtype_name(a.dtype())) + shape_str(a.shape()) + "{";
  if (is_half(a.dtype())) {  // each value is an f32, printed so that it reads back exactly
    for (int64_t i = 0; i < a.size(); ++i)
      s += (i ? ", " : "") + text::f32_text(static_cast<float>(a.element_as_double(i)));
    return s + "}";
  }
  if (is_narrow_integer(a.dtype())) {
    for (int64_t i = 0; i < a.size(); ++i)
      s += (i ? ", " : "") + std::to_string(static_cast<int>(a.element_as_double(i)));
    return s + "}";
  }
  dispatch_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* d = a.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) {
      if (i) s += ", ";
      if constexpr (std::is_same_v<T, float>)
        s += text::f32_text(d[i]);
      else if constexpr (std::is_same_v<T, double>)
        s += text::f64_text(d[i]);
      else if constexpr (std::is_same_v<T, uint8_t>)
        s += d[i] ? "true" : "false";
      else
        s += std::to_string(d[i]);
    }
  });
  return s + "}";
}

std::string attr_text(const Attr& a, const ProgramName& program_name) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<V, double>) {
          return text::double_text(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          return text::quote(v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          return shape_str(v);
        } else if constexpr (std::is_same_v<V, DType>) {
          return std::string(dtype_name(v));
        } else if constexpr (std::is_same_v<V, Array>) {
          return array_text(v);
        } else {
          // A null sub-program cannot be parsed back; verify reports it.
          return v ? "@" + program_name(v.get()) : std::string("@<null>");
        }
      },
      a);
}

std::string eqn_text(const Program& p, const Eqn& e, const std::vector<std::string>& out_names,
                     const std::vector<std::string>& in_names, const ProgramName& program_name) {
  std::string s;
  for (size_t i = 0; i < out_names.size(); ++i) s += (i ? ", " : "") + out_names[i];
  s += e.outs.empty() ? "() = " : " = ";
  s += e.prim ? e.prim->name() : std::string("<null>");
  if (!e.params.items().empty()) {
    s += "[";
    bool first = true;
    for (const auto& [key, value] : e.params.items()) {
      if (!first) s += ", ";
      first = false;
      s += text::name_text(key) + "=" + attr_text(value, program_name);
    }
    s += "]";
  }
  for (size_t i = 0; i < in_names.size(); ++i) s += (i ? ", " : " ") + in_names[i];
  s += " :";
  if (e.outs.empty()) s += " ()";
  for (size_t i = 0; i < e.outs.size(); ++i) {
    int v = e.outs[i];
    bool known = v >= 0 && static_cast<size_t>(v) < p.var_types.size();
    s += (i ? ", " : " ") + (known ? text::type_text(p.type_of(v)) : std::string("?"));
  }
  return s;
}

// Prints a program and every sub-program it reaches, each once, under names
// that are unique in the text.
class Printer {
 public:
  std::string print(const Program& main) {
    add(&main);
    for (size_t i = 0; i < order_.size(); ++i)
      for (const Eqn& e : order_[i]->eqns)
        for (const auto& [key, value] : e.params.items())
          if (auto* sub = std::get_if<std::shared_ptr<const Program>>(&value))
            if (*sub) add(sub->get());
    std::string out;
    for (size_t i = 0; i < order_.size(); ++i) {
      if (i) out += "\n";
      print_one(*order_[i], out);
    }
    return out;
  }

 private:
  void add(const Program* p) {
    if (names_.count(p)) return;
    std::string name = p->name;
    for (int k = 1; used_.count(name); ++k) name = p->name + "_" + std::to_string(k);
    used_.insert(name);
    names_[p] = name;
    order_.push_back(p);
  }

  void print_one(const Program& p, std::string& out) {
    // Dense renumbering: inputs first, then equation outputs in order.
    std::map<int, int> number;
    int next = 0;
    auto define = [&](int v) {
      number[v] = next++;
      return "%" + std::to_string(next - 1);
    };
    auto use = [&](int v) {
      auto it = number.find(v);
      return it == number.end() ? "%?" + std::to_string(v) : "%" + std::to_string(it->second);
    };
    ProgramName program_name = [&](const Program* sub) { return text::name_text(names_.at(sub)); };

    out += "program @" + text::name_text(names_.at(&p));
    if (!p.placements.empty()) {
      out += " [";
      for (size_t i = 0; i < p.placements.size(); ++i)
        out += (i ? ", " : "") + text::name_text(p.placements[i].first) + "=" +
               std::to_string(p.placements[i].second);
      out += "]";
    }
    out += " (";
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      int v = p.inputs[i];
      bool known = v >= 0 && static_cast<size_t>(v) < p.var_types.size();
      out += (i ? ", " : "") + define(v) + ": " +
             (known ? text::type_text(p.type_of(v)) : std::string("?"));
    }
    out += ") -> (";
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      int v = p.outputs[i];
      bool known = v >= 0 && static_cast<size_t>(v) < p.var_types.size();
      out += (i ? ", " : "") + (known ? text::type_text(p.type_of(v)) : std::string("?"));
    }
    out += ") {\n";
    for (const Eqn& e : p.eqns) {
      // Uses are named before the outputs are (re)defined.
      std::vector<std::string> ins;
      for (int v : e.ins) ins.push_back(use(v));
      std::vector<std::string> outs;
      for (int v : e.outs) outs.push_back(define(v));
      out += "  " + eqn_text(p, e, outs, ins, program_name) + "\n";
    }
    out += "  return";
    for (size_t i = 0; i < p.outputs.size(); ++i) out += (i ? ", " : " ") + use(p.outputs[i]);
    out += "\n}\n";
  }

  std::map<const Program*, std::string> names_;
  std::vector<const Program*> order_;
  std::set<std::string> used_;
};

}  // namespace

std::string text::raw_eqn_text(const Program& p, const Eqn& e) {
  auto raw = [](const std::vector<int>& vars) {
    std::vector<std::string> names;
    for (int v : vars) names.push_back("%" + std::to_string(v));
    return names;
  };
  return eqn_text(p, e, raw(e.outs), raw(e.ins),
                  [](const Program* sub) { return text::name_text(sub->name); });
}

std::string to_string(const Program& p) { return Printer().print(p); }

std::ostream& operator<<(std::ostream& os, const Program& p) { return os << to_string(p); }

}  // namespace drx
