#include "drx/core/registry.h"

#include <algorithm>
#include <utility>

#include "drx/core/primitive.h"

namespace drx {

const Primitive& Registry::add(std::unique_ptr<Primitive> p) {
  const Primitive& ref = add(*p);
  owned_.push_back(std::move(p));
  return ref;
}

const Primitive& Registry::add(const Primitive& p) {
  if (find(p.name())) throw Error("primitive '" + p.name() + "' registered twice");
  prims_.push_back(&p);
  return p;
}

const Primitive* Registry::find(const std::string& name) const {
  for (const Primitive* p : prims_)
    if (p->name() == name) return p;
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> n;
  for (const Primitive* p : prims_) n.push_back(p->name());
  std::sort(n.begin(), n.end());
  return n;
}

namespace {
// Families announce themselves during static initialisation, in an order
// that differs between builds; they are sorted by name before running so the
// registry's order is always the same.
std::vector<std::pair<std::string, detail::RegisterFamily>>& families() {
  static std::vector<std::pair<std::string, detail::RegisterFamily>> f;
  return f;
}

const Registry& registry() {
  static const Registry r = [] {
    auto f = families();
    std::sort(f.begin(), f.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Registry reg;
    for (const auto& [name, add_family] : f) add_family(reg);
    return reg;
  }();
  return r;
}
}  // namespace

namespace detail {
int add_primitive_family(const char* name, RegisterFamily fn) {
  families().emplace_back(name, fn);
  return static_cast<int>(families().size());
}
}  // namespace detail

const Primitive* find_primitive(const std::string& name) { return registry().find(name); }

const Primitive& primitive(const std::string& name) {
  if (const Primitive* p = find_primitive(name)) return *p;
  throw Error("unknown primitive '" + name + "'");
}

std::vector<std::string> primitive_names() { return registry().names(); }
std::vector<const Primitive*> registered_primitives() { return registry().all(); }

std::vector<std::string> primitive_families() {
  registry();
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace drx
