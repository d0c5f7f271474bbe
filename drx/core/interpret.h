#pragma once
// The reference interpreter: a program run equation by equation on each
// primitive's reference semantics (Primitive::eval). It is the test oracle
// every compiled path is checked against.
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/ir/program.h"

namespace drx {

// Runs `program` op by op on the reference kernels. The arguments must have
// the program's input types (run() checks them; interpret() trusts them).
std::vector<Array> interpret(const Program& program, const std::vector<Array>& args);

// Throws a drx::Error naming `what` and the program unless `args` match the
// program's inputs in number, dtypes and shapes.
void check_arguments(const std::string& what, const Program& program,
                     const std::vector<Array>& args);

// Runs any program on concrete arrays (checks their number, dtypes and shapes).
std::vector<Array> run(const Program& program, const std::vector<Array>& args);

}  // namespace drx
