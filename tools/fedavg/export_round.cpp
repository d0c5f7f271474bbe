#include "tools/fedavg/export_round.h"

#include <filesystem>
#include <map>
#include <sstream>

#include "drx/data/atomic_write.h"
#include "drx/data/client_files.h"
#include "drx/data/npy.h"
#include "drx/drx.h"
#include "drx/export/mapreduce_driver.h"
#include "drx/export/mapreduce_names.h"
#include "drx/export/mapreduce_plan.h"
#include "drx/ops/primitives.h"

namespace drx::tool::fedavg {
namespace {

namespace fs = std::filesystem;

std::vector<Array> leaves(const Tree& t) {
  std::vector<Array> out;
  for (const Tree& l : tree_leaves(t)) out.push_back(l.array());
  return out;
}

// The job as written runs to the round's results: the one MapReduce driver over the clients'
// files just written (what `drx mapreduce run` does), bitwise against the round in process.
void check_job(int64_t round, const MapReduceForm& form, const std::vector<Array>& inputs,
               size_t server_inputs, const std::string& clients_dir,
               const std::vector<Array>& expected) {
  std::map<std::string, Array> server;
  for (size_t k = 0; k < server_inputs; ++k) server.emplace(form.inputs[k], inputs[k]);
  std::ostringstream warnings;
  data::FileClientExecutor clients(form, clients_dir, warnings, "", "fedavg --export-rounds");
  const std::vector<Array> got =
      run_mapreduce(form, server, clients, {.op = "fedavg --export-rounds"});
  for (size_t k = 0; k < expected.size(); ++k)
    if (!got[k].bitwise_equal(expected[k]))
      throw Error("fedavg --export-rounds: round " + std::to_string(round) + "'s job, run from " +
                  clients_dir + ", gives another " + form.outputs[k] +
                  " than the round in process");
}

}  // namespace

void RoundExporter::write(int64_t round, const optim::RoundSpec& spec, const Tree& params,
                          const Tree& state, const data::Dataset& train, const Array& idx,
                          const Array& mask, const Array& weights, const Tree& result) {
  const fs::path dir = fs::path(dir_) / ("round-" + std::to_string(round));
  // Each client's examples, gathered in the order fedavg_round visits them.
  const int64_t cohort = idx.shape()[0], rows = idx.shape()[1] * idx.shape()[2];
  const Array flat = prims::reshape().evaluate({idx}, Params{{"shape", Shape{cohort * rows}}})[0];
  Shape x_shape = train.images.shape();
  x_shape[0] = rows;
  x_shape.insert(x_shape.begin(), cohort);
  const Array x = prims::reshape().evaluate(
      {prims::take().evaluate({train.images, flat}, Params{{"axis", int64_t{0}}})[0]},
      Params{{"shape", x_shape}})[0];
  const Array y = prims::reshape().evaluate(
      {prims::take().evaluate({train.labels, flat}, Params{{"axis", int64_t{0}}})[0]},
      Params{{"shape", Shape{cohort, rows}}})[0];
  const NamedProgram named = trace_named(optim::fedavg_round_on_client_data(spec),
                                         {"params", "state", "x", "y", "mask", "weights"}, params,
                                         state, x, y, mask, weights);
  const MapReduceForm form = mapreduce_form(named.program, named.names);
  write_mapreduce_plan(form, (dir / "parts").string(), {.op = "fedavg --export-rounds"});

  std::vector<Array> inputs = leaves(params);
  for (const Array& a : leaves(state)) inputs.push_back(a);
  const size_t server_inputs = inputs.size();
  for (const Array& a : {x, y, mask, weights}) inputs.push_back(a);
  // A '/' in a name ("params/dense0/w") is a subfolder.
  auto save = [](const fs::path& file, const Array& a) {
    fs::create_directories(file.parent_path());
    save_npy(file.string(), a);
  };
  for (size_t k = 0; k < server_inputs; ++k)
    save(dir / "server" / (form.inputs[k] + ".npy"), inputs[k]);
  for (int64_t i = 0; i < cohort; ++i) {
    const fs::path mine = dir / "clients" / std::to_string(i);
    save(mine / "client_index.npy", full({}, static_cast<double>(i), DType::i32));
    for (const auto& [name, k] : form.client_data)
      save(mine / (name + ".npy"), client_row(inputs[k], i));
  }
  const std::vector<Array> outputs = leaves(result);  // loss, params, state (dict order)
  for (size_t k = 0; k < outputs.size(); ++k)
    save(dir / "expected" / (form.outputs[k] + ".npy"), outputs[k]);
  check_job(round, form, inputs, server_inputs, (dir / "clients").string(), outputs);
  // Scripts written for SSA-named plans read the carry map; with named plans it is the identity.
  std::string carry;
  if (carried_)
    for (size_t k = 0; k < server_inputs; ++k)
      carry += form.inputs[k] + " " + form.inputs[k] + "\n";
  data::write_file_atomically((dir / "carry").string(), {carry}, "fedavg --export-rounds");
  carried_ = true;
}

}  // namespace drx::tool::fedavg
