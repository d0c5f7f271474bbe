#include "drx/ops/families.h"
#include "drx/ops/primitive.h"

namespace drx {

void register_shape_ops(Registry&) {}

}  // namespace drx
