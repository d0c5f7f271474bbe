#pragma once
// Private to drx/exec: reductions over client indices in the canonical binary
// tree (drx/core/canonical_tree.h: a range is split at the largest power of
// two below its length, left operand first), computed from any sequence of
// aligned blocks in client order.
//
// A TreeStack holds the reductions of consecutive aligned blocks of clients
// (a block of 2^k clients starting at a multiple of 2^k). Two neighbouring
// blocks that are the halves of the next larger aligned block are combined as
// soon as both exist, exactly as the tree combines them; at the end the stack
// holds the binary decomposition of the client count and is folded from the
// right, which is how the tree combines those pieces. So rows can be pushed
// one client at a time (only O(log n) rows stay live), and the stacks of
// devices that each reduced a contiguous shard can be pushed, in order, into
// one stack: every way of cutting the clients gives the same bits.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "drx/array/dtype.h"
#include "drx/core/canonical_tree.h"
#include "drx/core/reduction.h"
#include "drx/core/row_reducer.h"

namespace drx::exec {

template <class T, ReduceKind K>
class TreeStack : public RowReducer {
 public:
  explicit TreeStack(int64_t width) : width_(static_cast<size_t>(width)) {}

  void push_row(int64_t client, const void* row) override {
    push(client, 1, static_cast<const T*>(row));
  }
  void push_block(Block block, const void* row) override {
    push(block.start, block.size, static_cast<const T*>(row));
  }
  void push_blocks(const RowReducer& other) override {
    const auto& o = static_cast<const TreeStack&>(other);
    for (size_t b = 0; b < o.blocks_.size(); ++b)
      push(o.blocks_[b].start, o.blocks_[b].size, o.row(b));
  }
  void clear() override { blocks_.clear(); }
  void finish(void* out) const override {
    T* y = static_cast<T*>(out);
    if (blocks_.empty()) {
      std::fill(y, y + width_, T{0});
      return;
    }
    // The last block's row is copied to y, which then accumulates in place.
    const size_t last = blocks_.size() - 1;
    std::memcpy(y, row(last), width_ * sizeof(T));
    canonical_tree::fold_right(
        blocks_.size(), [&](size_t b) -> const T* { return b == last ? y : row(b); },
        [&](const T* left, const T* acc) -> const T* {
          for (size_t k = 0; k < width_; ++k) y[k] = reduce_combine<K>(left[k], acc[k]);
          return y;
        });
  }
  std::unique_ptr<RowReducer> empty_like(int64_t width) const override {
    return std::make_unique<TreeStack>(width);
  }
  using RowReducer::empty_like;

  int64_t width() const override { return static_cast<int64_t>(width_); }
  size_t element_bytes() const override { return sizeof(T); }
  size_t blocks() const override { return blocks_.size(); }
  Block block(size_t b) const override { return blocks_[b]; }
  const void* block_row(size_t b) const override { return row(b); }

 private:
  const T* row(size_t b) const { return rows_[b].get(); }
  T* row(size_t b) { return rows_[b].get(); }

  void push(int64_t start, int64_t size, const T* data) {
    blocks_.push_back({start, size});
    // A row per level of the stack, kept when the stack shrinks or is cleared (not zeroed:
    // every row is written before it is read).
    if (rows_.size() < blocks_.size()) rows_.emplace_back(new T[std::max<size_t>(width_, 1)]);
    if (width_) std::memcpy(row(blocks_.size() - 1), data, width_ * sizeof(T));
    while (blocks_.size() >= 2) {
      Block& left = blocks_[blocks_.size() - 2];
      const Block& right = blocks_.back();
      if (!canonical_tree::halves(left, right)) break;
      T* l = row(blocks_.size() - 2);
      const T* r = row(blocks_.size() - 1);
      for (size_t k = 0; k < width_; ++k) l[k] = reduce_combine<K>(l[k], r[k]);
      left.size *= 2;
      blocks_.pop_back();
    }
  }

  size_t width_;
  std::vector<Block> blocks_;
  std::vector<std::unique_ptr<T[]>> rows_;
};

// A reducer for rows of `width` elements of `dtype`, or nullptr for a dtype
// it does not cover (bool).
std::unique_ptr<RowReducer> make_row_reducer(DType dtype, ReduceKind kind, int64_t width);

}  // namespace drx::exec
