#include "drx/ir/program.h"

namespace drx {

std::vector<Type> Program::input_types() const {
  std::vector<Type> t;
  for (int v : inputs) t.push_back(type_of(v));
  return t;
}

std::vector<Type> Program::output_types() const {
  std::vector<Type> t;
  for (int v : outputs) t.push_back(type_of(v));
  return t;
}

}  // namespace drx
