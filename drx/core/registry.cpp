#include <algorithm>

#include "drx/ops/families.h"
#include "drx/core/primitive.h"

namespace drx {

void Registry::add(std::unique_ptr<Primitive> p) {
  if (find(p->name())) throw Error("primitive '" + p->name() + "' registered twice");
  prims_.push_back(std::move(p));
}

const Primitive* Registry::find(const std::string& name) const {
  for (const auto& p : prims_)
    if (p->name() == name) return p.get();
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> n;
  for (const auto& p : prims_) n.push_back(p->name());
  std::sort(n.begin(), n.end());
  return n;
}

namespace {
const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    for (auto* add_family : primitive_families()) add_family(reg);
    return reg;
  }();
  return r;
}
}  // namespace

const Primitive* find_primitive(const std::string& name) { return registry().find(name); }

const Primitive& primitive(const std::string& name) {
  if (const Primitive* p = find_primitive(name)) return *p;
  throw Error("unknown primitive '" + name + "'");
}

std::vector<std::string> primitive_names() { return registry().names(); }

MaybeValues Primitive::jvp(const Values&, const MaybeValues&, const Values&, const Params&) const {
  throw Error(name_ + ": forward-mode differentiation (jvp) is not defined for this primitive");
}
MaybeValues Primitive::vjp(const Values&, const Values&, const MaybeValues&, const Params&) const {
  throw Error(name_ + ": reverse-mode differentiation (vjp) is not defined for this primitive");
}
std::vector<Batched> Primitive::vmap(const std::vector<Batched>&, int64_t, const Params&) const {
  throw Error(name_ + ": batching (vmap) is not defined for this primitive");
}

}  // namespace drx
