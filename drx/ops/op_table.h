#pragma once
// The table of drx's public ops: each op's name, namespace, signature and one-line doc,
// registered next to its definition with DRX_PUBLIC_OP, so bindings (the Python layer) and
// documentation read one list and a coverage test can compare it with the API headers.
//
// libdrx is a static archive, and a linker leaves out archive members nothing refers to, which
// would silently drop their ops from the table. So every file that registers ops also says
// DRX_PUBLIC_OPS_FILE(tag) once, at the start of a line: it defines an extern "C" anchor
// drx_public_ops_TAG, and the drx CMake target asks its consumers' linker for each anchor (-u),
// found by scanning the sources at configure time (as for DRX_PRIMITIVE_FAMILY).
#include <string>
#include <string_view>
#include <vector>

namespace drx {

struct OpInfo {
  std::string name;       // as called in C++: "tanh", "relu", "operator+"
  std::string module;     // its namespace: "drx", "drx::nn", "drx::random"
  std::string signature;  // human-readable; overloads separated by " | "
  std::string doc;        // one line
  // module + "::" + name: "drx::tanh", "drx::nn::relu".
  std::string qualified_name() const { return module + "::" + name; }
};

// Every registered op, sorted by qualified name.
const std::vector<OpInfo>& public_ops();
// The op of that qualified name ("drx::nn::relu"; the leading "drx::" may be left out: "tanh",
// "nn::relu"); nullptr if none.
const OpInfo* find_public_op(std::string_view qualified_name);
// The tags of the files that registered ops (DRX_PUBLIC_OPS_FILE), sorted.
std::vector<std::string> public_op_files();

// Adds an op; `name` is qualified below drx ("tanh", "nn::relu"). Throws drx::Error when the
// name is registered already or a field is empty: each op is registered once, where it is
// defined, with its overloads in one signature.
void register_public_op(std::string_view name, std::string_view signature, std::string_view doc);

namespace detail {
int add_public_op(const char* name, const char* signature, const char* doc);
int add_public_op_file(const char* tag);
}  // namespace detail

}  // namespace drx

#define DRX_PUBLIC_OP_CONCAT2(a, b) a##b
#define DRX_PUBLIC_OP_CONCAT(a, b) DRX_PUBLIC_OP_CONCAT2(a, b)

// Registers one public op at namespace scope, next to its definition:
//   DRX_PUBLIC_OP("tanh", "(x: Value) -> Value", "Elementwise hyperbolic tangent.");
// A registration that fails (a duplicate name) ends the program at start-up with the error.
#define DRX_PUBLIC_OP(name, signature, doc)                                          \
  [[maybe_unused]] static const int DRX_PUBLIC_OP_CONCAT(drx_public_op_, __LINE__) = \
      ::drx::detail::add_public_op(name, signature, doc)

// Once per file that uses DRX_PUBLIC_OP, at the start of a line (CMake scans for it); `tag` is
// a unique lower-case identifier, conventionally the file's layer and stem.
#define DRX_PUBLIC_OPS_FILE(tag)             \
  extern "C" const int drx_public_ops_##tag; \
  extern "C" const int drx_public_ops_##tag = ::drx::detail::add_public_op_file(#tag)
