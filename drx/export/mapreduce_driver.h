#pragma once
// The one driver of a MapReduce form (mapreduce_form.h): the server's side of
// every stage (server_prepare, broadcast, the aggregation streamed in drx's
// canonical client order, server_update) written once, and the clients' work
// behind ClientExecutor, so that where the clients run is a choice of
// executor, not another driver:
//
//   InProcessClientExecutor   compiled client work in this process, the
//                             clients' data rows of the program's inputs
//   data::FileClientExecutor  the same on each client's files DIR/I/NAME.npy
//                             (drx/data/client_files.h; `drx mapreduce run`)
//   dist::RankClientExecutor  each MPI process runs its own block of clients
//                             (drx/dist/rank_clients.h)
//   your own                  derive from ClientExecutor (see its comment for
//                             where MPI ranks, a networked runtime or secure
//                             aggregation plug in)
//
// Whatever the executor, the results are bitwise jit(program)'s when its
// clients' outputs are: the aggregation is the driver's.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "drx/exec/executable.h"
#include "drx/export/mapreduce_form.h"

namespace drx {

// Where a ClientExecutor hands each client's client_work outputs (in
// stage.client_work.outputs order), in client order.
class ClientOutputs {
 public:
  virtual ~ClientOutputs() = default;
  virtual void add_outputs(int64_t client, const std::vector<Array>& outputs) = 0;
};

// Folds one stage's client outputs into its aggregates (stage.aggregations),
// streaming, in the canonical tree over client indices: clients must come in
// order 0, 1, 2, ... It holds O(log clients) partial values, never all the
// clients' outputs.
class StageAggregator : public ClientOutputs {
 public:
  StageAggregator(const MapReduceForm& form, size_t stage);

  // The client outputs the aggregations read (values, then weights), each
  // once: what add() takes.
  const std::vector<std::string>& reads() const { return reads_; }
  // Client `client`'s values of reads(), in that order.
  void add(int64_t client, const std::vector<Array>& values);
  // Client `client`'s whole client_work outputs, in stage.client_work.outputs
  // order (its client state among them is not kept).
  void add_outputs(int64_t client, const std::vector<Array>& outputs) override;
  int64_t clients_added() const { return next_; }

  // The aggregates, in stage.aggregations order. drx::Error unless every
  // client of the form was added.
  std::vector<Array> finish() const;

 private:
  const MapReduceForm& form_;
  size_t stage_;
  std::vector<std::string> reads_;
  std::vector<size_t> read_at_;  // reads_[k] is client_work output read_at_[k]
  std::vector<StreamingAggregate> folds_;
  std::vector<std::pair<size_t, size_t>> fold_reads_;  // (value, weight or npos) in reads_
  int64_t next_ = 0;
};

// What a ClientExecutor is asked to run: stage `index` of `form`, whose
// client work reads the server's `broadcast` values (by name).
struct ClientStage {
  const MapReduceForm& form;
  size_t index;
  const std::map<std::string, Array>& broadcast;
  const Stage& stage() const { return form.stages[index]; }
};

// Runs the clients' work of one stage. The driver calls run() with client
// ranges that cover 0..clients-1 in order, once per stage; run() hands each
// client's client_work outputs to `outputs.add_outputs` in client order.
// A client's state (stage.state_out, read back as a later stage's state_in)
// is the executor's to keep: it stays where the client ran.
//
// The seam for other runtimes: dist::RankClientExecutor runs its process's
// block of clients and hands every process all clients' outputs in client
// order; a networked runtime would send the broadcast values and hand the
// replies on in client order (buffering those that come early). Secure
// aggregation would replace StageAggregator's plain sums by masked ones; it
// is not here yet.
class ClientExecutor {
 public:
  virtual ~ClientExecutor() = default;
  virtual void run(const ClientStage& stage, int64_t begin, int64_t end,
                   ClientOutputs& outputs) = 0;
};

// Runs each client's work compiled as the map_fn body it was cut from, on
// one device, client after client, and keeps each client's state in memory.
// A subclass says where a client's data come from.
class CompiledClientExecutor : public ClientExecutor {
 public:
  void run(const ClientStage& stage, int64_t begin, int64_t end, ClientOutputs& outputs) override;

 protected:
  // Client `client`'s value of the client data `name` (its row of a placed
  // program input), of type form.types.at(name).
  virtual Array client_data(const ClientStage& stage, int64_t client, const std::string& name) = 0;
  // Each client's outputs as it finished (before they are aggregated).
  virtual void finished(const ClientStage&, int64_t /*client*/, const std::vector<Array>&) {}

 private:
  const Program* compiled_for_ = nullptr;
  Executable work_;
  std::map<int64_t, std::map<std::string, Array>> state_;
};

// The clients' data are rows of the program's inputs, as run_mapreduce_form
// takes them (client i's value of a placed input is its row i).
class InProcessClientExecutor : public CompiledClientExecutor {
 public:
  // Keeps references to `inputs`: they must outlive the executor.
  InProcessClientExecutor(const MapReduceForm& form, const std::vector<Array>& inputs);

 protected:
  Array client_data(const ClientStage& stage, int64_t client, const std::string& name) override;

 private:
  std::map<std::string, const Array*> data_;
};

struct MapReduceDriverOptions {
  // How many clients one ClientExecutor::run call covers; 0: all of them.
  int64_t clients_per_call = 0;
  // Names the caller in errors.
  std::string op = "run_mapreduce";
};

// The names of form.inputs the server holds (those not client data), in
// order.
std::vector<std::string> server_input_names(const MapReduceForm& form);

// Runs the form: `server_inputs` holds each of server_input_names(form) (of
// its type in form.types), `clients` runs the clients' work. Returns the
// form's outputs in form.outputs order. drx::Error naming a missing or
// mistyped server input, or an executor that handed clients out of order.
std::vector<Array> run_mapreduce(const MapReduceForm& form,
                                 const std::map<std::string, Array>& server_inputs,
                                 ClientExecutor& clients,
                                 const MapReduceDriverOptions& options = {});

}  // namespace drx
