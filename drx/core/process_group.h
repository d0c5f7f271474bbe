#pragma once
// The processes a mesh axis spans (drx/dist implements this over MPI). The
// executor splits a placement on that axis into one contiguous range of
// clients per process, in rank order; each process runs its own clients and
// the group combines the processes' partial reductions in the canonical tree,
// so every result bit is the one a single process computes.
#include <cstdint>
#include <string>
#include <utility>

#include "drx/core/row_reducer.h"

namespace drx {

// The clients that part `rank` of `ranks` owns when a placement of `clients` is split into
// contiguous ranges in rank order: [clients·rank/ranks, clients·(rank+1)/ranks). The one
// definition: a process group and the tools that give each process its clients' data must
// agree on it.
inline std::pair<int64_t, int64_t> client_range(int64_t clients, int64_t rank, int64_t ranks) {
  return {clients * rank / ranks, clients * (rank + 1) / ranks};
}

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;

  // Process `rank`'s clients of a placement of `clients`: client_range.
  std::pair<int64_t, int64_t> clients_of(int rank, int64_t clients) const {
    return client_range(clients, rank, size());
  }

  // Every process passes the reduction of its own clients (blocks of the
  // canonical tree); each gets the reduction over all clients in `out`
  // (partial.width() elements). `op` names the operation for errors
  // ("reduce_sum").
  virtual void reduce(const RowReducer& partial, void* out, const std::string& op) const = 0;

  // Throws drx::Error on every process unless all passed the same
  // fingerprint; `what` says what was compared (for the message).
  virtual void check_same(const std::string& what, const std::string& fingerprint) const = 0;
};

}  // namespace drx
