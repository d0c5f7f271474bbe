#include "drx/ops/op_table.h"

#include <algorithm>
#include <mutex>

#include "drx/array/error.h"

namespace drx {
namespace {

// Function-local statics: registrations run during static initialisation, in any order of
// translation units, so the table must exist before the first of them.
struct Table {
  std::mutex mu;
  std::vector<OpInfo> ops;  // sorted by qualified_name()
  std::vector<std::string> files;
};
Table& table() {
  static Table t;
  return t;
}

OpInfo split_name(std::string_view name) {
  OpInfo info;
  const size_t cut = name.rfind("::");
  // The last "::" separates the namespace: no op name ("tanh", "operator+") contains one.
  info.module = cut == std::string_view::npos ? "drx" : "drx::" + std::string(name.substr(0, cut));
  info.name = std::string(cut == std::string_view::npos ? name : name.substr(cut + 2));
  return info;
}

std::string qualify(std::string_view name) {
  if (name.starts_with("drx::")) return std::string(name);
  return "drx::" + std::string(name);
}

}  // namespace

void register_public_op(std::string_view name, std::string_view signature, std::string_view doc) {
  if (name.empty() || signature.empty() || doc.empty())
    throw Error("register_public_op: op '" + std::string(name) +
                "' needs a name, a signature and a one-line doc (got signature '" +
                std::string(signature) + "', doc '" + std::string(doc) + "')");
  if (name.starts_with("drx::") || name.starts_with("::"))
    throw Error("register_public_op: name '" + std::string(name) +
                "' must be qualified below drx (\"tanh\", \"nn::relu\")");
  OpInfo info = split_name(name);
  info.signature = std::string(signature);
  info.doc = std::string(doc);
  Table& t = table();
  std::lock_guard lock(t.mu);
  const std::string q = info.qualified_name();
  auto at = std::lower_bound(
      t.ops.begin(), t.ops.end(), q,
      [](const OpInfo& o, const std::string& k) { return o.qualified_name() < k; });
  if (at != t.ops.end() && at->qualified_name() == q)
    throw Error("register_public_op: " + q +
                " is registered twice (register each op once, where it is defined, with all its "
                "overloads in one signature; first: '" +
                at->signature + "', again: '" + info.signature + "')");
  t.ops.insert(at, std::move(info));
}

const std::vector<OpInfo>& public_ops() { return table().ops; }

const OpInfo* find_public_op(std::string_view qualified_name) {
  const std::string q = qualify(qualified_name);
  const std::vector<OpInfo>& ops = public_ops();
  auto at = std::lower_bound(ops.begin(), ops.end(), q, [](const OpInfo& o, const std::string& k) {
    return o.qualified_name() < k;
  });
  return at != ops.end() && at->qualified_name() == q ? &*at : nullptr;
}

std::vector<std::string> public_op_files() {
  Table& t = table();
  std::lock_guard lock(t.mu);
  std::vector<std::string> files = t.files;
  std::sort(files.begin(), files.end());
  return files;
}

namespace detail {

int add_public_op(const char* name, const char* signature, const char* doc) {
  register_public_op(name, signature, doc);
  return 0;
}

int add_public_op_file(const char* tag) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  t.files.emplace_back(tag);
  return 0;
}

}  // namespace detail
}  // namespace drx
