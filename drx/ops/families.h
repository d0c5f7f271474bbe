#pragma once
#include <vector>

namespace drx {

class Registry;

// Each family of primitives registers its members; one line per family here
// and in families.cpp is all a new family needs.
void register_elementwise(Registry& r);
void register_reductions(Registry& r);
void register_linalg(Registry& r);
void register_shape_ops(Registry& r);
void register_indexing(Registry& r);
void register_constants(Registry& r);
void register_placement_cast(Registry& r);
void register_mapreduce(Registry& r);
void register_control_flow(Registry& r);  // drx/transforms/cond.cpp

using RegisterFamily = void (*)(Registry&);
std::vector<RegisterFamily> primitive_families();

}  // namespace drx
