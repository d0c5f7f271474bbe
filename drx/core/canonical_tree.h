#pragma once
// drx's canonical reduction tree over client indices: the one definition that every reduction
// over a placement follows, so that each gives the same bits (the interpreter's reduce_sum/max/
// min, the executor's TreeStack, the MapReduce form's StreamingReduce, the StableHLO lowering,
// and the processes of a ProcessGroup, which exchange RowReducer blocks).
//
// A range of n > 1 clients splits at the largest power of two below n; the left part is the
// left operand. Its subtrees are therefore exactly the aligned blocks (2^k clients starting at
// a multiple of 2^k), which is what lets a reduction be computed from any cut of the clients
// into aligned blocks: neighbouring blocks that are the two halves of one subtree combine at
// once, and what remains at the end (the tree's left subtrees down its right spine, largest
// first) folds from the right.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "drx/core/row_reducer.h"

namespace drx::canonical_tree {

// The size of the left subtree of a range of n > 1 clients.
constexpr int64_t split(int64_t n) {
  int64_t half = 1;
  while (half * 2 < n) half *= 2;
  return half;
}

// Clients [lo, hi) (hi > lo) reduced in the tree: leaf(i) is client i's value, combine(left,
// right) joins two subtrees' values. The left subtree is evaluated first.
template <class Leaf, class Combine>
auto reduce(int64_t lo, int64_t hi, const Leaf& leaf, const Combine& combine) {
  if (hi - lo == 1) return leaf(lo);
  const int64_t mid = lo + split(hi - lo);
  auto left = reduce(lo, mid, leaf, combine);
  auto right = reduce(mid, hi, leaf, combine);
  return combine(std::move(left), std::move(right));
}

// Whether two neighbouring reduced blocks (`right` starts where `left` ends) are the two halves
// of one subtree, which the tree combines next.
constexpr bool halves(RowReducer::Block left, RowReducer::Block right) {
  return left.size == right.size && left.start % (2 * left.size) == 0;
}

// The reduction of `count` > 0 blocks, in client order, no two of them halves of one subtree:
// block(b) is block b's value, combine(left, right) as in reduce.
template <class BlockValue, class Combine>
auto fold_right(size_t count, const BlockValue& block, const Combine& combine) {
  auto acc = block(count - 1);
  for (size_t b = count - 1; b-- > 0;) acc = combine(block(b), std::move(acc));
  return acc;
}

}  // namespace drx::canonical_tree
