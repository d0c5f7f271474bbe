#pragma once
// The tools' former names for drx/data/atomic_write.h, which now holds the one implementation.
// To be removed once no tool file includes this header.
#include <string>
#include <string_view>

#include "drx/data/atomic_write.h"

namespace drx::tool::fedavg {

using data::is_atomic_temp_of;

// The tools' outputs have always been written under the name of `drx fedavg`.
inline void write_file_atomic(const std::string& path, std::string_view bytes) {
  data::write_file_atomically(path, {bytes}, "fedavg");
}

inline std::string read_file(const std::string& path) { return data::read_file(path, "fedavg"); }

}  // namespace drx::tool::fedavg
