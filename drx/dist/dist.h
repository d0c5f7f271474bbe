#pragma once
// drx across processes and hosts: SPMD multi-controller execution over MPI,
// as JAX runs across hosts. Every process (an MPI rank) runs the same program;
// a mesh axis spans the processes, each with device threads of its own:
//
//   int main(int argc, char** argv) {
//     drx::dist::World& world = drx::dist::init(argc, argv);
//     drx::Mesh mesh = world.mesh("clients", /*devices_per_process=*/2);
//     auto round = drx::jit(round_fn, mesh);
//     // Placed arguments: each process supplies only its own clients' rows.
//     auto [first, end] = world.clients(cohort);
//     Array x = drx::dist::place_rows(my_rows(first, end), cohort, world);
//     Tree out = round(params, x);  // unplaced results: the same on every process
//   }
//
// launched as `mpirun -np P prog`. A placement on the mesh axis is split into
// contiguous client ranges, one per process in rank order (clients·r/P to
// clients·(r+1)/P), and again over the process's devices; unplaced values are
// replicated (each process computes the server's part itself). Reductions
// over the placement combine the processes' partial reductions in drx's
// canonical binary tree over client indices (a reduce-scatter by element
// range, then an all-gather: O(model size) bytes per process, whatever P), so
// results are bitwise those of one process.
//
// Failures: Open MPI cannot let survivors carry on, so a collective that hears
// nothing from a process for Options::timeout_s prints which rank stopped
// responding during what, and aborts the job (MPI_Abort). Processes that call
// different programs or argument types are told so at the call (drx::Error on
// every process). A mesh's programs must be called in the same order on every
// process, from one thread.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/mesh.h"
#include "drx/dist/launch.h"  // launched_by_mpirun()

namespace drx::dist {

struct Options {
  // Seconds a collective waits for another process before reporting it and
  // aborting the job.
  double timeout_s = 30;
};

class World {
 public:
  int rank() const;
  int size() const;
  bool is_root() const { return rank() == 0; }

  // A mesh whose axis `axis` spans every process, `devices_per_process`
  // device threads in each.
  Mesh mesh(const std::string& axis = "clients", int devices_per_process = 1) const;
  // A mesh of several axes (sizes per process) of which `process_axis` spans
  // every process.
  Mesh mesh(std::vector<Mesh::Axis> axes, const std::string& process_axis) const;
  // This process's clients of a placement of `clients` on such a mesh:
  // [first, end).
  std::pair<int64_t, int64_t> clients(int64_t clients) const;

  // Rank 0's `bytes`, on every process (what the others pass is ignored).
  // `what` names the transfer in errors.
  std::string broadcast(const std::string& bytes, const std::string& what) const;
  // On rank 0: every process's `bytes`, in rank order; elsewhere: nothing.
  std::vector<std::string> gather(const std::string& bytes, const std::string& what) const;
  // The least of every process's `value`.
  int64_t min(int64_t value, const std::string& what) const;
  // Returns once every process has called it.
  void barrier(const std::string& what) const;

  // Bytes this process has sent to others so far, and the seconds it has
  // spent in exchanges (waiting for the others included), for benchmarks.
  uint64_t bytes_sent() const;
  double seconds_communicating() const;
  double timeout_s() const;
  void set_timeout_s(double seconds);
};

// Starts MPI (the first call; later calls return the same World, and MPI is
// finalised at exit). Throws drx::Error for a timeout that is not positive.
World& init(int& argc, char**& argv, const Options& options = {});
World& init(const Options& options = {});  // for a program that keeps its argv
// The World of init(); throws drx::Error before it.
World& world();

// Ends every process of the job with `exit_code` (MPI_Abort), for an error
// that only this process met: the others would otherwise wait for it.
[[noreturn]] void abort_job(int exit_code);

// A global array of `clients` rows from this process's rows (`local`, whose
// leading axis is world.clients(clients)'s length): the other processes'
// rows are 0. Throws drx::Error on a wrong row count.
Array place_rows(const Array& local, int64_t clients, const World& world);
// This process's rows of a global array over the placement.
Array local_rows(const Array& global, const World& world);
// `global` with only the rows [rows.first, rows.second) kept and every other
// row 0: what a process holds of a placed value (e.g. a resumed checkpoint's
// per-client states, of which each process keeps its own clients' rows).
// Pass world.clients(global.shape()[0]). Throws drx::Error for a scalar or a
// range outside the leading axis.
Array keep_rows(const Array& global, std::pair<int64_t, int64_t> rows);
// On rank 0, a placed array of `global`'s shape whose rows are every
// process's own rows of its `global` (those of world.clients); the other
// processes get `global` back. Every process must call it. `what` names the
// value in errors.
Array gather_rows(const Array& global, const World& world, const std::string& what);

// Names what the processes are doing (e.g. "round 17") while it lives, for
// the timeout message: "rank 1 stopped responding during reduce_sum of round 17".
class Activity {
 public:
  explicit Activity(std::string what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  std::string previous_;
};

}  // namespace drx::dist
