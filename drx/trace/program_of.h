#pragma once
// drx::trace: a C++ function on Values (or Trees) as a Program.
#include <concepts>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "drx/ir/program.h"
#include "drx/trace/function.h"

namespace drx {

// Traces a function on inputs of the given types: one type per argument, except
// that a last argument of type std::vector<Value> takes all remaining types
// (so f(std::vector<Value>) takes them all). A TreeFn gets one leaf per type.
Program trace(const TreeFn& fn, const std::vector<Type>& in_types,
              const std::string& name = "main");
namespace detail {
// Like trace(fn, ...), but the types from `fixed` on form one list argument.
Program trace_with_list_tail(const TreeFn& fn, size_t fixed, const std::vector<Type>& in_types,
                             const std::string& name);
// Like trace(fn, examples...) below, for the type-erased function.
Program trace_examples(const TreeFn& fn, const std::vector<Tree>& examples,
                       const std::string& name);
template <class... A>
constexpr bool last_is_value_list(const std::tuple<A...>*) {
  if constexpr (sizeof...(A) == 0)
    return false;
  else
    return std::is_same_v<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>,
                          std::vector<Value>>;
}
}  // namespace detail
template <class F>
Program trace(F f, const std::vector<Type>& in_types, const std::string& name = "main") {
  using Args = typename Signature<F>::args;
  if constexpr (detail::last_is_value_list(static_cast<const Args*>(nullptr)))
    return detail::trace_with_list_tail(erase(std::move(f)), std::tuple_size_v<Args> - 1, in_types,
                                        name);
  else
    return trace(erase(std::move(f)), in_types, name);
}

// What drx::trace accepts as an example argument: an Array, a Tree (of Arrays,
// or of Values inside another trace) or a list of Arrays.
template <class T>
concept TraceExample =
    std::same_as<T, Array> || std::same_as<T, Tree> || std::same_as<T, std::vector<Array>>;

// Traces f on inputs typed like the examples, as jax.make_jaxpr(f)(*examples):
// one example per argument of f; an Array gives its dtype and shape, a Tree or
// list gives an argument of that structure with one program input per leaf (in
// tree_leaves order). Only the examples' types are used, never their values.
//   drx::Program p = drx::trace(loss, params_tree, x_batch, y_batch);
template <class F, TraceExample... E>
Program trace(F f, const E&... examples) {
  if constexpr (std::same_as<std::decay_t<F>, TreeFn>) {
    return detail::trace_examples(f, {to_tree(examples)...}, "main");
  } else {
    static_assert(sizeof...(E) == std::tuple_size_v<typename Signature<F>::args>,
                  "drx::trace(f, examples...): give one example per argument of f");
    return detail::trace_examples(erase(std::move(f)), {to_tree(examples)...}, "main");
  }
}

}  // namespace drx
