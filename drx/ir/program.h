#pragma once
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "drx/ir/params.h"
#include "drx/ir/type.h"

namespace drx {

class Primitive;

// One SSA equation: outs = prim[params](ins). Variables are indices into the
// owning Program's var_types.
struct Eqn {
  const Primitive* prim = nullptr;
  Params params;
  std::vector<int> ins;
  std::vector<int> outs;
};

// A typed SSA function. Sub-programs live in equation parameters.
class Program {
 public:
  std::string name = "main";
  // Placements (name, size) declared for this program, in declaration order.
  std::vector<std::pair<std::string, int64_t>> placements;
  // A deque: Values hand out references to their types while the trace grows.
  std::deque<Type> var_types;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<Eqn> eqns;

  int add_var(Type t) {
    var_types.push_back(std::move(t));
    return static_cast<int>(var_types.size()) - 1;
  }
  const Type& type_of(int var) const { return var_types.at(static_cast<size_t>(var)); }
  std::vector<Type> input_types() const;
  std::vector<Type> output_types() const;
};

// True when p and q have the same equations on the same types, up to the
// numbering of their variables (what makes two sub-program parameters equal).
bool same_structure(const Program& p, const Program& q);

}  // namespace drx
