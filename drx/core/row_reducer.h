#pragma once
// A partial reduction over client indices in drx's canonical binary tree (a
// range is split at the largest power of two below its length, left operand
// first), as a list of aligned blocks: a block of 2^k clients starting at a
// multiple of 2^k, reduced. drx/exec implements it (TreeStack); a
// ProcessGroup (drx/core/process_group.h) moves its blocks between
// processes, so it is described here in bytes, independent of the dtype.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace drx {

class RowReducer {
 public:
  struct Block {
    int64_t start, size;  // clients [start, start + size)
  };
  virtual ~RowReducer() = default;
  // Adds one client's row (client index `client`, pushed in increasing order).
  virtual void push_row(int64_t client, const void* row) = 0;
  // Adds a reduced block whose clients all follow those pushed so far.
  virtual void push_block(Block block, const void* row) = 0;
  // Adds every block of `other` (whose clients all follow this one's).
  virtual void push_blocks(const RowReducer& other) = 0;
  // Forgets everything pushed, keeping its storage for the next pushes.
  virtual void clear() = 0;
  // Writes the reduction of everything pushed (0s when nothing was).
  virtual void finish(void* out) const = 0;
  // An empty reducer of the same kind and dtype over rows of `width` elements.
  virtual std::unique_ptr<RowReducer> empty_like(int64_t width) const = 0;
  std::unique_ptr<RowReducer> empty_like() const { return empty_like(width()); }

  virtual int64_t width() const = 0;
  virtual size_t element_bytes() const = 0;
  virtual size_t blocks() const = 0;
  virtual Block block(size_t b) const = 0;
  virtual const void* block_row(size_t b) const = 0;
};

}  // namespace drx
