#include "drx/ops/families.h"
#include "drx/ops/primitive.h"

namespace drx {

void register_linalg(Registry&) {}

}  // namespace drx
