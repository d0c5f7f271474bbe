#include "drx/core/interpret.h"

#include "drx/core/primitive.h"
#include "drx/core/walk.h"

namespace drx {

std::vector<Array> interpret(const Program& program, const std::vector<Array>& args) {
  return walk_program(program, args, [](size_t, const Eqn& e, const std::vector<Array>& ins) {
    return e.prim->evaluate(ins, e.params);
  });
}

void check_arguments(const std::string& what, const Program& program,
                     const std::vector<Array>& args) {
  if (args.size() != program.inputs.size())
    throw Error(what + " @" + program.name + ": " + std::to_string(args.size()) +
                " arguments given, the program takes " + std::to_string(program.inputs.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& t = program.type_of(program.inputs[i]);
    if (t.dtype != args[i].dtype() || t.shape != args[i].shape())
      throw Error(what + " @" + program.name + ": argument " + std::to_string(i) + " is " +
                  std::string(dtype_name(args[i].dtype())) + shape_str(args[i].shape()) +
                  ", the program expects " + t.str());
  }
}

std::vector<Array> run(const Program& program, const std::vector<Array>& args) {
  check_arguments("run", program, args);
  return interpret(program, args);
}

}  // namespace drx
