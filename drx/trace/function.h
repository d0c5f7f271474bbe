#pragma once
// Adapters between typed user callables and the type-erased functions over
// Trees that the transformations work on. Kept small: the heavy lifting is in
// non-template code over TreeFn.
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "drx/trace/tree.h"

namespace drx {

using TreeFn = std::function<Tree(const std::vector<Tree>&)>;

// ---- conversions between argument/result types and Trees -------------------
inline Tree to_tree(const Value& v) { return Tree(v); }
inline Tree to_tree(const Array& a) { return Tree(a); }
inline Tree to_tree(const Tree& t) { return t; }
inline Tree to_tree(const std::vector<Value>& vs) { return Tree(vs); }
inline Tree to_tree(const std::vector<Array>& as) { return Tree(as); }
inline Tree to_tree(const std::vector<Tree>& ts) { return Tree::list(ts); }
template <class A, class B>
Tree to_tree(const std::pair<A, B>& p) {
  return Tree::list({to_tree(p.first), to_tree(p.second)});
}

template <class T>
struct FromTree;
template <>
struct FromTree<Value> {
  static Value get(const Tree& t) { return t.value(); }
};
template <>
struct FromTree<Array> {
  static Array get(const Tree& t) { return t.array(); }
};
template <>
struct FromTree<Tree> {
  static Tree get(const Tree& t) { return t; }
};
template <class T>
struct FromTree<std::vector<T>> {
  static std::vector<T> get(const Tree& t) {
    if (t.is_leaf() || t.kind() == Tree::Kind::dict)
      throw Error("expected a list, got a tree of structure " + t.structure());
    std::vector<T> out;
    for (const Tree& c : t.children()) out.push_back(FromTree<T>::get(c));
    return out;
  }
};
template <class A, class B>
struct FromTree<std::pair<A, B>> {
  static std::pair<A, B> get(const Tree& t) {
    if (t.is_leaf() || t.size() != 2)
      throw Error("expected a pair, got a tree of structure " + t.structure());
    return {FromTree<A>::get(t[0]), FromTree<B>::get(t[1])};
  }
};
template <class T>
T from_tree(const Tree& t) {
  return FromTree<T>::get(t);
}

// ---- the traced-side type <-> concrete-side type mapping (for jit) --------
template <class T>
struct Concrete {
  using type = T;  // Tree stays Tree
};
template <>
struct Concrete<Value> {
  using type = Array;
};
template <class T>
struct Concrete<std::vector<T>> {
  using type = std::vector<typename Concrete<T>::type>;
};
template <class A, class B>
struct Concrete<std::pair<A, B>> {
  using type = std::pair<typename Concrete<A>::type, typename Concrete<B>::type>;
};
template <class T>
using concrete_t = typename Concrete<T>::type;

// ---- signatures of callables ----------------------------------------------
template <class R, class... A>
struct SignatureOf {
  using result = std::decay_t<R>;
  using args = std::tuple<std::decay_t<A>...>;
  template <template <class...> class T>
  using apply = T<std::decay_t<R>, std::decay_t<A>...>;
};
template <class F>
struct Signature : Signature<decltype(&std::decay_t<F>::operator())> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> : SignatureOf<R, A...> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> : SignatureOf<R, A...> {};
template <class R, class... A>
struct Signature<R (*)(A...)> : SignatureOf<R, A...> {};
template <class R, class... A>
struct Signature<R(A...)> : SignatureOf<R, A...> {};

[[noreturn]] void throw_arity(const char* what, size_t expected, size_t got);

namespace detail {
template <class F, class R, class... A, size_t... I>
Tree call_with_trees(const F& f, const std::vector<Tree>& args, std::index_sequence<I...>) {
  return to_tree(f(from_tree<A>(args[I])...));
}
template <class R, class... A>
struct Eraser {
  template <class F>
  static TreeFn erase(F f) {
    return [f = std::move(f)](const std::vector<Tree>& args) -> Tree {
      if (args.size() != sizeof...(A)) throw_arity("function", sizeof...(A), args.size());
      return call_with_trees<F, R, A...>(f, args, std::index_sequence_for<A...>{});
    };
  }
};
}  // namespace detail

// A typed callable over Values/Trees; the result of every transformation.
template <class Sig>
class Function;
template <class R, class... A>
class Function<R(A...)> {
 public:
  using result_type = R;
  explicit Function(TreeFn fn) : fn_(std::move(fn)) {}
  R operator()(A... args) const { return from_tree<R>(fn_({to_tree(args)...})); }
  const TreeFn& erased() const { return fn_; }

 private:
  TreeFn fn_;
};

namespace detail {
template <class R, class... A>
struct SameOf {
  using type = Function<R(A...)>;
};
}  // namespace detail

// The type-erased form of any callable taking Values, vectors of Values or Trees.
template <class F>
TreeFn erase(F f) {
  using S = Signature<F>;
  return S::template apply<detail::Eraser>::erase(std::move(f));
}
template <class Sig>
TreeFn erase(const Function<Sig>& f) {
  return f.erased();
}

template <class F>
inline constexpr size_t arity_v = std::tuple_size_v<typename Signature<F>::args>;

}  // namespace drx
