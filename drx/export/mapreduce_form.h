#pragma once
// The MapReduce form of a program over a placement: the program cut into
// stages that a batch system or a federated runtime can run where the data
// live (TFF's MapReduceForm, generalised to any number of rounds of
// server-client communication). See docs/ARCHITECTURE.md, "Interpreting out".
//
// Every value that crosses parts has a name after its variable in
// simplify(program): "v12" is the server value %12, "c12" one client's row of
// the placed value %12, "client_index" the client's global index (i32[]).
// mapreduce_form(program, names) gives the program's inputs, client data and
// outputs the caller's names instead ("params/w", "x", "loss"; see
// mapreduce_names.h), so that a round's outputs carry into the next round's
// inputs by name.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/ir/program.h"

namespace drx {

enum class Aggregation { sum, mean, weighted_mean, max, min };
const char* aggregation_name(Aggregation a);
// drx::Error naming the choices for anything but the five names.
Aggregation aggregation_from_name(const std::string& name);

// A standalone program whose inputs and outputs are named values.
struct Part {
  Program program;
  std::vector<std::string> inputs, outputs;
};

// How one client output is folded over the clients into a server value:
// in drx's canonical tree over client indices (see docs/ARCHITECTURE.md,
// "Determinism"). mean divides the sum by the number of clients;
// weighted_mean is sum(w x) / sum(w) with w the client output `weight`.
struct AggregationSpec {
  std::string client_value;  // a client_work output
  Aggregation kind = Aggregation::sum;
  std::string weight;        // weighted_mean only
  std::string server_value;  // the result's name
};

struct Stage {
  Part server_prepare;                 // server values -> server values
  std::vector<std::string> broadcast;  // the server values every client receives
  // One client: client_index, its rows of the placed program inputs
  // (client_data), the broadcast values and the client state it kept from
  // earlier stages (state_in) -> the values to aggregate, then state_out.
  Part client_work;
  std::vector<std::string> client_data, state_in, state_out;
  std::vector<AggregationSpec> aggregations;
  Part server_update;  // server values and the aggregates -> server values
};

struct MapReduceForm {
  std::string placement;  // the split placement ("clients")
  int64_t clients = 0;    // its size
  // The name of each program input ("v3" for a server input; a placed input
  // "c5": client i receives row i) and the server value of each output.
  std::vector<std::string> inputs, outputs;
  // The clients' data: each name's client i holds row i of program input k.
  std::map<std::string, size_t> client_data;
  std::vector<Stage> stages;
  std::map<std::string, Type> types;  // of every name; client values per client, unplaced
};

// Splits `program` (simplified first, as jit does) over its one placement.
// drx::Error naming the equation for what has no MapReduce form: a loop or
// branch that communicates with the clients inside its body, values leaving
// a placement other than by reduce_sum/max/min, work across clients' rows at
// the top level, nested placements at the top level, placed outputs.
MapReduceForm mapreduce_form(const Program& program);

// One name per program input and per program output (mapreduce_names.h makes
// them from a traced function's argument and result trees).
struct FormNames {
  std::vector<std::string> inputs, outputs;
};
// The form above with the program's inputs (server inputs and client data)
// and outputs under `names`; values between parts keep their SSA names.
// An output may take the name of an input of its type (an update in place: a
// round's params): a runner that keeps one value per name then reads the
// input until the output replaces it. The output is written where it is
// computed when no later part reads the input, else copied by the last
// server_update, as is an output that is an input or another output
// unchanged under a different name. drx::Error for a wrong count, an invalid,
// reserved or repeated name, an update in place of another type, or an input
// the server reads whole that the clients also get row by row (one name
// cannot denote both).
MapReduceForm mapreduce_form(const Program& program, const FormNames& names);

// Folds client rows into one value in drx's canonical tree over client
// indices, holding the O(log clients) partial rows of the tree, so the
// result is bitwise that of reduce_sum/max/min over all rows at once.
// Rows must be added in client order 0, 1, 2, ...
class StreamingReduce {
 public:
  StreamingReduce(Aggregation kind, Type row);  // kind sum, max or min
  void add(const Array& row);
  int64_t count() const { return count_; }
  // The reduction of the rows added (zeros for a sum of none).
  Array finish() const;

 private:
  Aggregation kind_;
  Type row_;
  int64_t count_ = 0;
  std::vector<std::pair<int64_t, Array>> blocks_;  // (rows, partial), sizes decreasing
};

// One AggregationSpec, streaming: the client's value (and for weighted_mean
// its weight, of the type weight_row) in client order.
class StreamingAggregate {
 public:
  StreamingAggregate(const AggregationSpec& spec, Type row, Type weight_row = Type());
  void add(const Array& value, const Array* weight = nullptr);
  Array finish() const;

 private:
  AggregationSpec spec_;
  Type row_, weight_row_;
  StreamingReduce main_, weights_;
};

// The name the form gives stage `stage`'s client work ("stage0_client_work"),
// and whether `p` bears such a name. Such a program is one client's work:
// compiled as the map_fn body it was cut from (CompileOptions::map_body), it
// gives bitwise what the whole program computes for that client. `drx run`
// compiles it so on its own.
std::string client_work_name(int stage);
bool is_client_work(const Program& p);

// Row i of a: client i's value of an array placed at (or laid out over) the
// clients.
Array client_row(const Array& a, int64_t i);

// Runs the form's parts one after another in this process: each server part
// once, each stage's client work once per client in isolation (compiled on
// one device), aggregation in the canonical order. Equal, bitwise, to
// jit(program) on the inputs, on any mesh.
std::vector<Array> run_mapreduce_form(const MapReduceForm& form, const std::vector<Array>& inputs);

}  // namespace drx
