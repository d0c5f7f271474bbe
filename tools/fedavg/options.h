#pragma once
// The configuration of a `drx fedavg` run and its command line.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/training/run_flags.h"

namespace drx::tool::fedavg {

// The shared flag groups (tools/training/run_flags.h) and drx fedavg's own.
struct Options : training::RunFlags, training::ServerFlags {
  Options();
  // The defaults of a run of `model` ("mlp": Options()'s; "cnn": its own --rounds, --batch
  // and --client-lr), which parse_options starts from where those flags are not given.
  static Options defaults(const std::string& model);
  int64_t max_examples = 0;  // 0: every example; else the first N of each split
  // Population and partition.
  int64_t clients = 100;
  int64_t cohort = 10;
  std::string partition = "iid";  // iid | dirichlet | shards
  double alpha = 0.5;             // dirichlet
  int64_t shards_per_client = 2;  // shards
  // Model.
  std::string model = "mlp";                 // mlp | cnn (McMahan et al.'s CNN, nn::cnn_apply)
  std::vector<int64_t> hidden = {200, 200};  // mlp
  // Local training: `epochs` passes over each client's data, or exactly `local_steps` steps.
  int64_t epochs = 1;
  int64_t local_steps = 0;  // > 0 replaces epochs
  int64_t batch = 32;
  double client_lr = 0.1;
  double client_momentum = 0.0;
  // DP-FedAvg (McMahan et al. 2018): on when dp_clip > 0 (inf: no clipping).
  double dp_clip = 0;                   // initial L2 clip C of each client's update
  double dp_noise = 0;                  // noise multiplier z: N(0, (z C)^2) on the sum
  std::string dp_sampling = "poisson";  // poisson | fixed
  double dp_delta = 1e-5;
  double dp_quantile = 0;  // adaptive clipping target (Andrew et al. 2021); 0: off
  double dp_clip_lr = 0.2;
  double dp_count_noise = -1;  // sigma_b; < 0: expected cohort / 20
  bool dp() const { return dp_clip > 0; }
  // Each round also as a batch job: its split parts, server inputs, client data and results.
  std::string export_rounds;  // "" = off
};

// Parses the arguments after `drx fedavg`. Throws UsageError naming the flag and what it
// expects for an unknown flag, a missing value or a value out of range.
Options parse_options(const std::vector<std::string>& args);

// The flags that shape the training trajectory, as (flag, value text) in a fixed order.
// A checkpoint records them; --resume refuses one whose fields differ. Rounds, schedule and
// execution flags are left out: a run may be resumed with more rounds or other threads.
std::vector<std::pair<std::string, std::string>> trajectory_fields(const Options& o);

// `drx help fedavg`: the usage line, the one-line summary, and the text describing every flag
// with its default (built from a default Options, so help and behaviour cannot drift apart).
const char* usage_text();
const char* summary_text();
const char* details_text();

}  // namespace drx::tool::fedavg
