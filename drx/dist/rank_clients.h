#pragma once
// The clients' work of a MapReduce form over the processes of an MPI job: the
// ClientExecutor of the one driver (drx/export/mapreduce_driver.h) for ranks.
//
// Every process runs the driver (the server's parts replicated, as drx/dist
// runs unplaced values); each runs only its own block of clients
// (World::clients, contiguous in rank order) with a local executor, and
// every process then receives every client's outputs in client order, so the
// aggregates, and the results, are bitwise those of one process running all
// the clients. A client's state stays on the process that ran it.
//
// It sends every client's outputs to every process (O(clients x outputs)
// bytes): a reference and a seam, not the fast path; jit over a dist mesh
// reduces in O(model size) bytes per process.
#include "drx/dist/dist.h"
#include "drx/export/mapreduce_driver.h"

namespace drx::dist {

class RankClientExecutor : public ClientExecutor {
 public:
  // `local` runs this process's clients (e.g. an InProcessClientExecutor or
  // a data::FileClientExecutor over this process's files); both must
  // outlive this executor. Every process must call run() with the same
  // ranges, in the same order (the driver does).
  RankClientExecutor(const World& world, ClientExecutor& local);
  void run(const ClientStage& stage, int64_t begin, int64_t end, ClientOutputs& outputs) override;

 private:
  const World& world_;
  ClientExecutor& local_;
};

}  // namespace drx::dist
