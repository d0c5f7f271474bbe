#pragma once
// The processes of a training run (drx fedavg, drx lm): one, or the ranks of `mpirun -np P`
// (drx/dist). Rank r trains the clients [slots·r/P, slots·(r+1)/P) of each
// round's cohort from its own batches; rank 0 alone evaluates, prints and
// writes --out, reads the checkpoint of --resume and sends it to the others
// (no shared filesystem is assumed), and decides when --max-seconds stops.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "drx/array/array.h"
#include "drx/core/mesh.h"

namespace drx::tool::training {

class Ranks {
 public:
  // Starts MPI when `mpi` (--mpi) is set or mpirun started this process, with --mpi-timeout;
  // throws drx::Error naming `command` where drx was built without MPI.
  Ranks(const std::string& command, bool mpi, double mpi_timeout);
  ~Ranks();

  bool distributed() const { return distributed_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // The --threads a rank runs with: `requested` when > 0, else under MPI the
  // host's cores shared by its ranks (0, drx's default, for one process).
  int64_t threads(int64_t requested) const;
  // The mesh the round runs on: the clients axis over every rank (with
  // --devices threads each); nullopt for one process.
  std::optional<Mesh> round_mesh(int64_t devices) const;
  // This rank's slots of a cohort of `slots`.
  std::pair<int64_t, int64_t> clients(int64_t slots) const;
  // A round argument over the cohort from this rank's rows.
  Array placed(const Array& mine, int64_t slots) const;
  // The least of every rank's value.
  int64_t min(int64_t value, const std::string& what) const;
  // Rank 0's answer (what the others pass is ignored).
  bool root_decides(bool value, const std::string& what) const;
  // make() run on rank 0, its bytes sent to every rank.
  std::string from_root(const std::function<std::string()>& make, const std::string& what) const;

  // On rank 0, every rank's rows of a placed result of `slots` rows (each rank's
  // own rows taken from its `global`); other ranks get `global` back
  // (dist::gather_rows).
  Array gather_rows(const Array& global, int64_t slots, const std::string& what) const;
  // `global` ([slots, ...]) as this rank holds a placed value: its own rows,
  // the others 0 (dist::keep_rows); `global` itself for one process. For a
  // resumed checkpoint's per-slot states.
  Array own_rows(const Array& global, int64_t slots, const std::string& what) const;

  // Names the round in the messages of a rank that stops responding, while
  // the result lives.
  std::shared_ptr<void> activity(const std::string& what) const;

  // The most bytes any rank has sent to the others so far (every rank calls it).
  uint64_t most_bytes_sent() const;
  // Seconds this rank has spent in exchanges with the others.
  double seconds_communicating() const;

  // Ends every process of the job after this one printed why (MPI_Abort);
  // returns where the run is one process.
  void abort_job() const;

  // fn(); an exception on one of several ranks is printed and ends the job,
  // since the other ranks would wait for this one forever.
  template <class F>
  auto run_or_abort(F&& fn) const -> decltype(fn()) {
    try {
      return fn();
    } catch (const std::exception& e) {
      if (distributed_ && size_ > 1) {
        report(e.what());
        abort_job();
      }
      throw;
    }
  }

 private:
  void report(const char* what) const;  // "drx: error: rank R: what" on stderr
  bool distributed_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace drx::tool::training
