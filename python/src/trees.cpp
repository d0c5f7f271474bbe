// Trees between Python and C++ for the binding files: nested Python dicts (string keys), lists
// and tuples of leaves as drx::Trees and back, and the copy that keeps a result from being the
// caller's NumPy memory.
#include "python/src/bindings.h"

namespace drx::python {

Tree nested_to_tree(py::handle h, const std::string& what, const std::string& path) {
  if (py::isinstance<py::dict>(h)) {
    std::vector<std::pair<std::string, Tree>> items;
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(h)) {
      if (!py::isinstance<py::str>(k))
        throw Error(what + ": a dict" + (path.empty() ? "" : " at " + path) +
                    " has a key that is not a string: " + py::repr(k).cast<std::string>());
      const std::string key = k.cast<std::string>();
      items.emplace_back(key, nested_to_tree(v, what, path + "." + key));
    }
    return Tree::dict(std::move(items));
  }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    std::vector<Tree> children;
    size_t i = 0;
    for (py::handle c : h)
      children.push_back(nested_to_tree(c, what, path + "[" + std::to_string(i++) + "]"));
    return Tree::list(std::move(children));
  }
  if (h.is_none()) return Tree();
  if (py::isinstance<Value>(h)) return Tree(h.cast<Value>());
  if (py::isinstance<Array>(h)) return Tree(h.cast<Array>());
  throw Error(what + ": " + (path.empty() ? "an argument" : "the leaf at " + path) +
              " must be an array, or a dict, list or tuple of arrays, got " +
              py::str(py::type::of(h)).cast<std::string>());
}

py::object tree_to_nested(const Tree& t, bool arrays_as_numpy) {
  if (t.kind() == Tree::Kind::array && arrays_as_numpy) return array_to_numpy(t.array());
  if (t.is_leaf()) return leaf_to_py(t);
  if (t.kind() == Tree::Kind::dict) {
    py::dict d;
    for (size_t i = 0; i < t.size(); ++i)
      d[py::str(t.keys()[i])] = tree_to_nested(t.children()[i], arrays_as_numpy);
    return d;
  }
  py::list l;
  for (const Tree& c : t.children()) l.append(tree_to_nested(c, arrays_as_numpy));
  return l;
}

Tree unalias(const Tree& t, const Tree& inputs) {
  std::vector<Array> in;
  for (const Tree& leaf : tree_leaves(inputs))
    if (leaf.kind() == Tree::Kind::array) in.push_back(leaf.array());
  if (in.empty()) return t;
  std::vector<Tree> leaves = tree_leaves(t);
  for (Tree& leaf : leaves)
    if (leaf.kind() == Tree::Kind::array) leaf = Tree(copy_unless_owned(leaf.array(), in));
  return tree_unflatten(t, leaves);
}

}  // namespace drx::python
