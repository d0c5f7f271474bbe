#include "drx/ir/type.h"

namespace drx {

std::string Type::str() const {
  std::string s = std::string(dtype_name(dtype)) + shape_str(shape);
  if (!placement.empty()) s += "@" + placement;
  return s;
}

}  // namespace drx
