#include "drx/core/interpret.h"

#include "drx/core/primitive.h"

namespace drx {

std::vector<Array> interpret(const Program& program, const std::vector<Array>& args) {
  if (args.size() != program.inputs.size())
    throw Error("interpret @" + program.name + ": " + std::to_string(args.size()) +
                " arguments given, the program takes " + std::to_string(program.inputs.size()));
  std::vector<Array> env(program.var_types.size());
  for (size_t i = 0; i < args.size(); ++i) env[static_cast<size_t>(program.inputs[i])] = args[i];
  std::vector<Array> ins;
  for (const Eqn& e : program.eqns) {
    ins.clear();
    for (int v : e.ins) ins.push_back(env[static_cast<size_t>(v)]);
    std::vector<Array> outs = e.prim->eval(ins, e.params);
    for (size_t i = 0; i < outs.size(); ++i)
      env[static_cast<size_t>(e.outs[i])] = std::move(outs[i]);
  }
  std::vector<Array> result;
  for (int v : program.outputs) result.push_back(env[static_cast<size_t>(v)]);
  return result;
}

std::vector<Array> run(const Program& program, const std::vector<Array>& args) {
  if (args.size() != program.inputs.size())
    throw Error("run @" + program.name + ": " + std::to_string(args.size()) +
                " arguments given, the program takes " + std::to_string(program.inputs.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& t = program.type_of(program.inputs[i]);
    if (t.dtype != args[i].dtype() || t.shape != args[i].shape())
      throw Error("run @" + program.name + ": argument " + std::to_string(i) + " is " +
                  std::string(dtype_name(args[i].dtype())) + shape_str(args[i].shape()) +
                  ", the program expects " + t.str());
  }
  return interpret(program, args);
}

}  // namespace drx
