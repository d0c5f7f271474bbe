#include "drx/ir/type.h"

namespace drx {

std::string Type::str() const {
  std::string s = std::string(dtype_name(dtype)) + shape_str(shape);
  if (!placement.empty()) s += "@" + placement;
  return s;
}

std::vector<std::string> placement_levels(const std::string& path) {
  std::vector<std::string> levels;
  if (path.empty()) return levels;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    levels.push_back(
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return levels;
    start = dot + 1;
  }
}

int64_t placement_depth(const std::string& path) {
  if (path.empty()) return 0;
  int64_t depth = 1;
  for (char c : path) depth += c == '.';
  return depth;
}

std::string outer_placement(const std::string& path) { return path.substr(0, path.find('.')); }

std::string inner_placement(const std::string& path) {
  size_t dot = path.find('.');
  return dot == std::string::npos ? std::string() : path.substr(dot + 1);
}

std::string nested_placement(const std::string& outer, const std::string& inner) {
  return inner.empty() ? outer : outer + "." + inner;
}

std::string placement_path_problem(const std::string& path) {
  std::vector<std::string> levels = placement_levels(path);
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i].empty())
      return "placement '" + path + "' has an empty level (nested placements are written " +
             "outer.inner, e.g. groups.clients)";
    for (size_t j = 0; j < i; ++j)
      if (levels[j] == levels[i])
        return "placement '" + path + "' nests '" + levels[i] + "' inside itself";
  }
  return {};
}

}  // namespace drx
