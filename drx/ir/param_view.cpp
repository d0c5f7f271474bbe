#include "drx/ir/param_view.h"

#include <algorithm>
#include <cstring>

namespace drx::param_view {

std::shared_ptr<const Program> program(const Params& p, const char* key, const std::string& op) {
  const auto* b = std::get_if<std::shared_ptr<const Program>>(&p.at(key, op));
  if (!b || !*b) throw TypeError(op + ": parameter '" + key + "' must be a sub-program (@name)");
  return *b;
}

int64_t count(const Params& p, const char* key, const std::string& op) {
  const int64_t v = p.get_int(key, op);
  if (v < 0)
    throw TypeError(op + ": parameter '" + key + "' is " + std::to_string(v) +
                    ", expected a non-negative integer");
  return v;
}

bool flag(const Params& p, const char* key, const std::string& op) {
  const int64_t v = p.get_int(key, op);
  if (v != 0 && v != 1)
    throw TypeError(op + ": parameter '" + key + "' is " + std::to_string(v) + ", expected 0 or 1");
  return v == 1;
}

void only_keys(const Params& p, const std::string& op, std::initializer_list<const char*> keys) {
  for (const auto& item : p.items()) {
    const std::string& key = item.first;
    const bool known = std::any_of(keys.begin(), keys.end(),
                                   [&](const char* k) { return std::strcmp(k, key.c_str()) == 0; });
    if (known) continue;
    std::string expected;
    for (const char* k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
    throw TypeError(op + ": unknown parameter '" + key + "' (expected exactly " + expected + ")");
  }
}

}  // namespace drx::param_view
