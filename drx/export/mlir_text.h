#pragma once
// Private to drx/export: MLIR text of constants and operations, in the
// pretty and the generic form.
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/lowering.h"

namespace drx::mlir_text {

// dense<...> for the array's elements (a splat, nested lists, or a hex blob
// for large float arrays), exact for every dtype; without the ": type".
std::string dense(const Array& a);

// One operation, with its regions already printed (each "{\n...}" text).
struct OpText {
  std::vector<std::string> results;  // SSA names (one "%5:2" group is written for several)
  std::string op;
  std::vector<std::string> operands;
  std::vector<Type> operand_types;
  MlirAttributes attributes;
  std::vector<Type> result_types;
  std::vector<std::string> regions;
};

// The pretty form where drx knows it (elementwise ops of one type, constants),
// else the generic form; `generic` forces the generic form.
std::string op_line(const OpText& op, bool generic);

std::string function_type(const std::vector<Type>& ins, const std::vector<Type>& outs);
std::string attribute_dict(const MlirAttributes& attributes);

}  // namespace drx::mlir_text
