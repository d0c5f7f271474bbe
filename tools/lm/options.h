#pragma once
// The configuration of a `drx lm` run and its command line.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/training/run_flags.h"

namespace drx::tool::lm {

// The shared flag groups (tools/training/run_flags.h) and drx lm's own.
struct Options : training::RunFlags, training::ServerFlags {
  Options();
  // Algorithm.
  std::string algorithm = "fedavg";  // fedavg (the FedAvg family) | diloco
  int64_t cohort = 8;                // fedavg: documents per round
  int64_t workers = 4;               // diloco: the fixed workers
  int64_t local_steps = 8;
  int64_t batch = 8;  // windows per step
  // Model.
  int64_t context = 64, layers = 2, width = 64, heads = 4;
  // Local (client, inner) optimizer.
  std::string client_opt = "adamw";  // adamw | sgd
  double client_lr = 3e-3;
  double client_momentum = 0.0;  // sgd
  double weight_decay = 0.01;    // adamw
  // DiLoCo: the outer optimizer (Nesterov momentum SGD).
  double outer_lr = 0.7, outer_momentum = 0.9;
  int64_t eval_windows = 8;  // per held-out document

  bool diloco() const { return algorithm == "diloco"; }
  int64_t clients_per_round() const { return diloco() ? workers : cohort; }
};

// Parses the arguments after `drx lm`; throws UsageError naming the flag and what it expects.
Options parse_options(const std::vector<std::string>& args);

// The flags that shape the training trajectory (checkpointed; --resume refuses others).
std::vector<std::pair<std::string, std::string>> trajectory_fields(const Options& o);

const char* usage_text();
const char* summary_text();
const char* details_text();

}  // namespace drx::tool::lm
