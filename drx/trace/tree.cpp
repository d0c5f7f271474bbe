#include "drx/trace/tree.h"

#include <algorithm>
#include <type_traits>

namespace drx {

Tree::Tree(const std::vector<Value>& vs) : kind_(Kind::list) {
  for (const Value& v : vs) children_.emplace_back(v);
}
Tree::Tree(const std::vector<Array>& as) : kind_(Kind::list) {
  for (const Array& a : as) children_.emplace_back(a);
}

Tree Tree::list(std::vector<Tree> children) {
  Tree t;
  t.children_ = std::move(children);
  return t;
}

Tree Tree::dict(std::vector<std::pair<std::string, Tree>> items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Tree t;
  t.kind_ = Kind::dict;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i && items[i].first == items[i - 1].first)
      throw Error("Tree::dict: duplicate key '" + items[i].first + "'");
    t.keys_.push_back(items[i].first);
    t.children_.push_back(std::move(items[i].second));
  }
  return t;
}

const Tree& Tree::operator[](size_t i) const {
  if (kind_ != Kind::list && kind_ != Kind::dict)
    throw Error("Tree[" + std::to_string(i) + "]: a leaf has no children");
  if (i >= children_.size())
    throw Error("Tree[" + std::to_string(i) + "]: index out of range for a tree of " +
                std::to_string(children_.size()) + " children");
  return children_[i];
}

const Tree& Tree::operator[](const std::string& key) const {
  if (kind_ != Kind::dict)
    throw Error("Tree[\"" + key + "\"]: not a dict (structure " + structure() + ")");
  auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
  if (it == keys_.end() || *it != key)
    throw Error("Tree[\"" + key + "\"]: no such key in " + structure());
  return children_[static_cast<size_t>(it - keys_.begin())];
}

bool Tree::contains(const std::string& key) const {
  return kind_ == Kind::dict && std::binary_search(keys_.begin(), keys_.end(), key);
}

const Value& Tree::value() const {
  if (kind_ != Kind::value)
    throw Error("Tree::value: expected a Value leaf, found " +
                std::string(kind_ == Kind::array ? "an Array leaf" : "the subtree " + structure()));
  return value_;
}

const Array& Tree::array() const {
  if (kind_ != Kind::array)
    throw Error("Tree::array: expected an Array leaf, found " +
                std::string(kind_ == Kind::value ? "a Value leaf" : "the subtree " + structure()));
  return array_;
}

std::string Tree::structure() const {
  switch (kind_) {
    case Kind::value:
    case Kind::array:
      return "*";
    case Kind::list: {
      std::string s = "[";
      for (size_t i = 0; i < children_.size(); ++i) {
        if (i) s += ",";
        s += children_[i].structure();
      }
      return s + "]";
    }
    case Kind::dict: {
      std::string s = "{";
      for (size_t i = 0; i < children_.size(); ++i) {
        if (i) s += ",";
        s += keys_[i];
        s += ":";
        s += children_[i].structure();
      }
      return s + "}";
    }
  }
  return "?";
}

namespace {
void collect(const Tree& t, std::vector<Tree>& out) {
  if (t.is_leaf()) {
    out.push_back(t);
    return;
  }
  for (const Tree& c : t.children()) collect(c, out);
}

Tree rebuild(const Tree& s, const std::vector<Tree>& leaves, size_t& pos) {
  if (s.is_leaf()) {
    if (pos >= leaves.size()) throw Error("tree_unflatten: too few leaves for " + s.structure());
    return leaves[pos++];
  }
  std::vector<Tree> kids;
  for (const Tree& c : s.children()) kids.push_back(rebuild(c, leaves, pos));
  if (s.kind() == Tree::Kind::list) return Tree::list(std::move(kids));
  std::vector<std::pair<std::string, Tree>> items;
  for (size_t i = 0; i < kids.size(); ++i) items.emplace_back(s.keys()[i], std::move(kids[i]));
  return Tree::dict(std::move(items));
}
}  // namespace

std::vector<Tree> tree_leaves(const Tree& t) {
  std::vector<Tree> out;
  collect(t, out);
  return out;
}

Tree tree_unflatten(const Tree& structure, const std::vector<Tree>& leaves) {
  size_t pos = 0;
  Tree t = rebuild(structure, leaves, pos);
  if (pos != leaves.size())
    throw Error("tree_unflatten: " + std::to_string(leaves.size()) + " leaves given, structure " +
                structure.structure() + " has " + std::to_string(pos));
  return t;
}

namespace {
void collect_paths(const Tree& t, const std::string& at, std::vector<std::string>& out) {
  if (t.is_leaf()) {
    out.push_back(at);
    return;
  }
  for (size_t i = 0; i < t.size(); ++i)
    collect_paths(t.children()[i],
                  at + (t.kind() == Tree::Kind::dict ? "[\"" + t.keys()[i] + "\"]"
                                                     : "[" + std::to_string(i) + "]"),
                  out);
}

// The leaves of every tree, position by position, after checking the structures agree.
std::vector<std::vector<Tree>> leaves_of(const std::vector<Tree>& trees) {
  if (trees.empty()) throw Error("tree_map: no trees given (expected at least one)");
  std::vector<std::vector<Tree>> out;
  for (size_t k = 0; k < trees.size(); ++k) {
    if (trees[k].structure() != trees[0].structure())
      throw Error("tree_map: trees differ in structure: " + trees[0].structure() + " vs " +
                  trees[k].structure() + " (tree " + std::to_string(k) + ")");
    out.push_back(tree_leaves(trees[k]));
  }
  return out;
}

template <class Leaf>
Tree map_n(const std::function<Leaf(const std::vector<Leaf>&)>& fn,
           const std::vector<Tree>& trees) {
  std::vector<std::vector<Tree>> leaves = leaves_of(trees);
  std::vector<Tree> out;
  std::vector<Leaf> at(trees.size());
  for (size_t i = 0; i < leaves[0].size(); ++i) {
    for (size_t k = 0; k < trees.size(); ++k) {
      if constexpr (std::is_same_v<Leaf, Value>)
        at[k] = leaves[k][i].value();
      else
        at[k] = leaves[k][i].array();
    }
    out.emplace_back(fn(at));
  }
  return tree_unflatten(trees[0], out);
}
}  // namespace

std::vector<std::string> tree_leaf_paths(const Tree& t) {
  std::vector<std::string> out;
  collect_paths(t, "", out);
  return out;
}

Tree tree_map(const std::function<Value(const Value&)>& fn, const Tree& t) {
  std::vector<Tree> leaves;
  for (const Tree& l : tree_leaves(t)) leaves.emplace_back(fn(l.value()));
  return tree_unflatten(t, leaves);
}

Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& t) {
  std::vector<Tree> leaves;
  for (const Tree& l : tree_leaves(t)) leaves.emplace_back(fn(l.array()));
  return tree_unflatten(t, leaves);
}

Tree tree_map(const std::function<Value(const Value&, const Value&)>& fn, const Tree& a,
              const Tree& b) {
  return map_n<Value>([&](const std::vector<Value>& l) { return fn(l[0], l[1]); }, {a, b});
}

Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b) {
  return map_n<Array>([&](const std::vector<Array>& l) { return fn(l[0], l[1]); }, {a, b});
}

Tree tree_map(const std::function<Value(const std::vector<Value>&)>& fn,
              const std::vector<Tree>& trees) {
  return map_n<Value>(fn, trees);
}

Tree tree_map(const std::function<Array(const std::vector<Array>&)>& fn,
              const std::vector<Tree>& trees) {
  return map_n<Array>(fn, trees);
}

}  // namespace drx
