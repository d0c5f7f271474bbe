#pragma once
// drx::trace: a C++ function on Values (or Trees) as a Program.
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

}  // namespace drx
