#pragma once
// Private to drx/dist: the ProcessGroup (drx/core/process_group.h) of every
// MPI rank. All its communication is point-to-point and non-blocking, polled
// against a deadline, so a process that stops responding is named instead of
// hanging the others.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "drx/core/process_group.h"

namespace drx::dist {

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, double timeout_s);

  int size() const override { return size_; }
  int rank() const override { return rank_; }
  void reduce(const RowReducer& partial, void* out, const std::string& op) const override;
  void check_same(const std::string& what, const std::string& fingerprint) const override;

  // Sends to[d] to every process d with send[d] set and returns what came from
  // every process s with recv[s] set (a process's own entry is to[rank()]).
  std::vector<std::string> exchange(const std::vector<std::string>& to,
                                    const std::vector<bool>& send, const std::vector<bool>& recv,
                                    const std::string& what) const;
  // Sends `bytes` to every other process and receives theirs.
  std::vector<std::string> all_gather(const std::string& bytes, const std::string& what) const;

  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  // Wall-clock seconds spent in exchanges (waiting for others and moving bytes).
  double seconds_in_exchanges() const { return ns_in_exchanges_.load() * 1e-9; }
  double timeout_s() const { return timeout_s_.load(); }
  void set_timeout_s(double s) { timeout_s_ = s; }

 private:
  [[noreturn]] void abort_job(const std::string& message) const;
  void check(int code, const char* call, const std::string& what) const;

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::atomic<double> timeout_s_;
  mutable std::mutex mu_;     // one exchange at a time: they must pair up in order
  mutable uint64_t seq_ = 0;  // exchanges so far: the tag of the next one
  mutable std::atomic<uint64_t> bytes_sent_{0};
  mutable std::atomic<uint64_t> ns_in_exchanges_{0};
};

// What the processes are doing now ("round 17"), for messages; "" for nothing.
std::string current_activity();

}  // namespace drx::dist
