#pragma once
#include <string>

#include "drx/array/dtype.h"

namespace drx {

// The static type of a value: element type, shape, and (for placed values) the
// name of the placement whose size is the leading axis. An empty placement means
// the value is unplaced ("on the server").
struct Type {
  DType dtype = DType::f32;
  Shape shape;
  std::string placement;

  Type() = default;
  Type(DType d, Shape s, std::string p = {})
      : dtype(d), shape(std::move(s)), placement(std::move(p)) {}
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t size() const { return num_elements(shape); }
  bool operator==(const Type& o) const = default;
  std::string str() const;  // "f32[2,3]" or "f32[8,3]@clients"
};

}  // namespace drx
