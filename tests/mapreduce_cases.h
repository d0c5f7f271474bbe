#pragma once
// Programs over a placement that the MapReduce-form tests share.
#include <vector>

#include "drx/drx.h"

namespace drx::testing {

// Two stages: each of 4 clients trains the model one gradient step on its rows (a map_fn), the
// server averages; then every client compares its own model with the average on its data. The
// locally trained models cross the stages: client state.
//   (w f64[3], x f64[4, 6, 3] @clients, y f64[4, 6] @clients) -> (w1, max gap, sum gap)
inline auto personalised_evaluation_program() {
  return program({{"clients", 4}},
                 [](Value w, Value x, Value y) {
                   Value local = map_fn(
                       [](Value wk, Value xk, Value yk) {
                         Value g = grad([](Value v, Value a, Value b) {
                           return sum(square(matmul(a, v) - b));
                         })(wk, xk, yk);
                         return wk - 0.1 * g;
                       },
                       broadcast(w), x, y);
                   Value w1 = reduce_mean(local);
                   Value gap = map_fn(
                       [](Value lk, Value gk, Value xk, Value yk) {
                         return sum(square(matmul(xk, lk) - yk)) - sum(square(matmul(xk, gk) - yk));
                       },
                       local, broadcast(w1), x, y);
                   return std::vector<Value>{w1, reduce_max(gap), reduce_sum(gap)};
                 },
                 {"", "clients", "clients"});
}

// Top-level ops on placed values that work row by row (a weighted mean's products, numbers
// meeting placed values), the client index, and max/min over 5 clients:
//   (w f32[4], x f32[5, 4] @clients, wt f32[5] @clients) -> 3 server values
inline auto weighted_mean_program() {
  return program({{"clients", 5}},
                 [](Value w, Value x, Value wt) {
                   Value y =
                       map_fn([](Value a, Value b) { return a * b + astype(client_index(), f32); },
                              broadcast(w), x);
                   Value z = exp(y * 2.0);
                   return std::vector<Value>{reduce_weighted_mean(z, wt) + reduce_mean(x),
                                             reduce_min(x), sum(reduce_max(y))};
                 },
                 {"", "clients", "clients"});
}

}  // namespace drx::testing
