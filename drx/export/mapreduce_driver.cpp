// The server's side of a MapReduce form, once, over any ClientExecutor.
#include "drx/export/mapreduce_driver.h"

#include <algorithm>

#include "drx/array/array.h"
#include "drx/array/error.h"

namespace drx {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? kNone : static_cast<size_t>(it - names.begin());
}

std::string plural(int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

StageAggregator::StageAggregator(const MapReduceForm& form, size_t stage)
    : form_(form), stage_(stage) {
  if (stage >= form.stages.size())
    throw Error("StageAggregator: stage " + std::to_string(stage) + " of a form with " +
                plural(static_cast<int64_t>(form.stages.size()), "stage"));
  const Stage& s = form.stages[stage];
  auto read = [&](const std::string& name) {
    size_t k = index_of(reads_, name);
    if (k != kNone) return k;
    const size_t at = index_of(s.client_work.outputs, name);
    if (at == kNone)
      throw Error("StageAggregator: stage " + std::to_string(stage) + " aggregates '" + name +
                  "', which its client work does not output");
    reads_.push_back(name);
    read_at_.push_back(at);
    return reads_.size() - 1;
  };
  for (const AggregationSpec& a : s.aggregations) {
    folds_.emplace_back(a, form.types.at(a.client_value),
                        a.weight.empty() ? Type() : form.types.at(a.weight));
    const size_t value = read(a.client_value);
    fold_reads_.emplace_back(value, a.weight.empty() ? kNone : read(a.weight));
  }
}

void StageAggregator::add(int64_t client, const std::vector<Array>& values) {
  if (client != next_)
    throw Error("aggregate: stage " + std::to_string(stage_) + ": client " +
                std::to_string(client) + "'s outputs came when client " + std::to_string(next_) +
                "'s were expected (clients are aggregated in order 0.." +
                std::to_string(form_.clients - 1) + ")");
  if (client >= form_.clients)
    throw Error("aggregate: stage " + std::to_string(stage_) + ": client " +
                std::to_string(client) + ", but the form has clients 0.." +
                std::to_string(form_.clients - 1));
  if (values.size() != reads_.size())
    throw Error("aggregate: stage " + std::to_string(stage_) + ": client " +
                std::to_string(client) + " gave " + plural(values.size(), "value") + ", expected " +
                std::to_string(reads_.size()));
  for (size_t k = 0; k < folds_.size(); ++k) {
    const auto [value, weight] = fold_reads_[k];
    folds_[k].add(values[value], weight == kNone ? nullptr : &values[weight]);
  }
  ++next_;
}

void StageAggregator::add_outputs(int64_t client, const std::vector<Array>& outputs) {
  const Part& work = form_.stages[stage_].client_work;
  if (outputs.size() != work.outputs.size())
    throw Error("aggregate: stage " + std::to_string(stage_) + ": client " +
                std::to_string(client) + " gave " + plural(outputs.size(), "output") +
                ", its client work has " + std::to_string(work.outputs.size()));
  std::vector<Array> values;
  for (size_t at : read_at_) values.push_back(outputs[at]);
  add(client, values);
}

std::vector<Array> StageAggregator::finish() const {
  if (next_ != form_.clients)
    throw Error("aggregate: stage " + std::to_string(stage_) + ": the outputs of " +
                plural(next_, "client") + " were aggregated, expected all " +
                std::to_string(form_.clients));
  std::vector<Array> out;
  for (const StreamingAggregate& f : folds_) out.push_back(f.finish());
  return out;
}

void CompiledClientExecutor::run(const ClientStage& stage, int64_t begin, int64_t end,
                                 ClientOutputs& outputs) {
  const Stage& s = stage.stage();
  if (compiled_for_ != &s.client_work.program) {
    // Compiled as the map_fn body it was cut from, so its products take a map body's path.
    CompileOptions as_map_body;
    as_map_body.map_body = true;
    work_ = compile(s.client_work.program, as_map_body);
    compiled_for_ = &s.client_work.program;
  }
  const std::vector<std::string>& data = s.client_data;
  for (int64_t i = begin; i < end; ++i) {
    std::map<std::string, Array>& mine = state_[i];
    std::vector<Array> args;
    for (const std::string& name : s.client_work.inputs) {
      if (name == "client_index") {
        args.push_back(full({}, static_cast<double>(i), DType::i32));
      } else if (std::find(data.begin(), data.end(), name) != data.end()) {
        args.push_back(client_data(stage, i, name));
      } else if (auto it = mine.find(name); it != mine.end()) {
        args.push_back(it->second);
      } else if (auto b = stage.broadcast.find(name); b != stage.broadcast.end()) {
        args.push_back(b->second);
      } else {
        throw Error("mapreduce: stage " + std::to_string(stage.index) + ": client " +
                    std::to_string(i) + "'s work reads '" + name +
                    "', which is neither its data, its state nor a broadcast value");
      }
    }
    const std::vector<Array> outs = work_.run(args);
    finished(stage, i, outs);
    for (const std::string& name : s.state_out)
      mine[name] = outs.at(index_of(s.client_work.outputs, name));
    outputs.add_outputs(i, outs);
  }
}

InProcessClientExecutor::InProcessClientExecutor(const MapReduceForm& form,
                                                 const std::vector<Array>& inputs) {
  for (const auto& [name, k] : form.client_data) {
    if (k >= inputs.size())
      throw Error("InProcessClientExecutor: client data '" + name + "' is program input " +
                  std::to_string(k) + ", but " + plural(inputs.size(), "input") + " were given");
    data_[name] = &inputs[k];
  }
}

Array InProcessClientExecutor::client_data(const ClientStage&, int64_t client,
                                           const std::string& name) {
  return client_row(*data_.at(name), client);
}

std::vector<std::string> server_input_names(const MapReduceForm& form) {
  std::vector<std::string> names;
  for (const std::string& name : form.inputs)
    if (!form.client_data.count(name)) names.push_back(name);
  return names;
}

std::vector<Array> run_mapreduce(const MapReduceForm& form,
                                 const std::map<std::string, Array>& server_inputs,
                                 ClientExecutor& clients, const MapReduceDriverOptions& options) {
  const std::string& op = options.op;
  std::map<std::string, Array> server;
  for (const std::string& name : server_input_names(form)) {
    auto it = server_inputs.find(name);
    if (it == server_inputs.end())
      throw Error(op + ": no value for the server input '" + name + "'");
    if (auto t = form.types.find(name);
        t != form.types.end() &&
        (it->second.dtype() != t->second.dtype || it->second.shape() != t->second.shape))
      throw Error(op + ": the server input '" + name + "' holds " +
                  std::string(dtype_name(it->second.dtype())) + shape_str(it->second.shape()) +
                  ", expected " + t->second.str());
    server[name] = it->second;
  }
  auto from_server = [&](const std::string& name) -> const Array& {
    auto it = server.find(name);
    if (it == server.end()) throw Error(op + ": no server value '" + name + "'");
    return it->second;
  };
  auto run_part = [&](const Part& part) {
    std::vector<Array> args;
    for (const std::string& name : part.inputs) args.push_back(from_server(name));
    const std::vector<Array> outs = compile(part.program, CompileOptions{}).run(args);
    for (size_t k = 0; k < outs.size(); ++k) server[part.outputs[k]] = outs[k];
  };
  const int64_t step = options.clients_per_call > 0 ? options.clients_per_call : form.clients;
  for (size_t index = 0; index < form.stages.size(); ++index) {
    const Stage& stage = form.stages[index];
    run_part(stage.server_prepare);
    std::map<std::string, Array> broadcast;
    for (const std::string& name : stage.broadcast) broadcast[name] = from_server(name);
    StageAggregator aggregator(form, index);
    const ClientStage view{form, index, broadcast};
    for (int64_t begin = 0; begin < form.clients; begin += step)
      clients.run(view, begin, std::min(form.clients, begin + step), aggregator);
    const std::vector<Array> aggregates = aggregator.finish();
    for (size_t a = 0; a < aggregates.size(); ++a)
      server[stage.aggregations[a].server_value] = aggregates[a];
    run_part(stage.server_update);
  }
  std::vector<Array> outs;
  for (const std::string& name : form.outputs) outs.push_back(from_server(name));
  return outs;
}

}  // namespace drx
