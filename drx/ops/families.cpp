#include "drx/ops/families.h"

namespace drx {

std::vector<RegisterFamily> primitive_families() {
  return {register_elementwise,    register_reductions, register_linalg,
          register_shape_ops,      register_indexing,   register_constants,
          register_placement_cast, register_mapreduce,  register_control_flow};
}

}  // namespace drx
