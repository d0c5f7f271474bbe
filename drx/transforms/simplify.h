#pragma once
#include "drx/ir/program.h"

namespace drx {

// Dead-code elimination, common-subexpression elimination, constant folding
// and algebraic no-ops (x*1, x+0, ...). Returns an equivalent program.
Program simplify(const Program& p);
// Dead-code elimination alone.
Program eliminate_dead_code(const Program& p);

}  // namespace drx
