#pragma once
// The process-wide set of primitives, by name: what the parser looks names up
// in. Each family of primitives registers itself where it is defined, with
// DRX_PRIMITIVE_FAMILY, so no lower layer lists the families of higher ones.
//
// libdrx is a static archive, and a linker leaves out archive members nothing
// refers to, which would silently drop a family from the registry. So every
// family defines an extern "C" anchor drx_primitive_family_NAME, and the drx
// CMake target asks its consumers' linker for each anchor (-u), found by
// scanning the sources for DRX_PRIMITIVE_FAMILY at configure time.
#include <memory>
#include <string>
#include <vector>

namespace drx {

class Primitive;

class Registry {
 public:
  // Registers a primitive the registry owns; returns it.
  const Primitive& add(std::unique_ptr<Primitive> p);
  // Registers a primitive that outlives the registry (a static object of its
  // family's file, for code that refers to it directly).
  const Primitive& add(const Primitive& p);
  const Primitive* find(const std::string& name) const;
  std::vector<std::string> names() const;
  std::vector<const Primitive*> all() const { return prims_; }

 private:
  std::vector<std::unique_ptr<Primitive>> owned_;
  std::vector<const Primitive*> prims_;
};

// The primitive called `name`; throws drx::Error for an unknown name.
const Primitive& primitive(const std::string& name);
// nullptr for an unknown name.
const Primitive* find_primitive(const std::string& name);
std::vector<std::string> primitive_names();
// Every registered primitive, in registration order.
std::vector<const Primitive*> registered_primitives();
// The names of the families that registered themselves, sorted.
std::vector<std::string> primitive_families();

namespace detail {
using RegisterFamily = void (*)(Registry&);
int add_primitive_family(const char* name, RegisterFamily fn);
}  // namespace detail

}  // namespace drx

// Defines the registration function of one family of primitives; use at
// namespace scope, followed by the function body, which receives `registry`:
//   DRX_PRIMITIVE_FAMILY(linalg) { registry.add(std::make_unique<DotGeneral>()); }
#define DRX_PRIMITIVE_FAMILY(family)                                               \
  static void drx_register_family_##family(::drx::Registry& registry);             \
  extern "C" const int drx_primitive_family_##family;                              \
  extern "C" const int drx_primitive_family_##family =                             \
      ::drx::detail::add_primitive_family(#family, &drx_register_family_##family); \
  static void drx_register_family_##family([[maybe_unused]] ::drx::Registry& registry)
