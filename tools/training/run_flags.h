#pragma once
// The flag groups the training commands (drx fedavg, drx lm) share, registered once: where a
// run reads and writes, its schedule and execution, and the FedAvg family's server optimizer.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "drx/optim/optim.h"
#include "tools/flags.h"

namespace drx::tool::training {

// Data, output, schedule and execution. Each command sets its own defaults for data_dir,
// out_dir, rounds and checkpoint_every.
struct RunFlags {
  RunFlags(std::string data, std::string out, int64_t rounds_, int64_t checkpoint_every_)
      : data_dir(std::move(data)),
        out_dir(std::move(out)),
        rounds(rounds_),
        checkpoint_every(checkpoint_every_) {}
  std::string data_dir;
  std::string out_dir;
  int64_t rounds = 1;
  uint64_t seed = 0;
  int64_t eval_every = 10;
  int64_t checkpoint_every = 10;
  bool resume = false;
  bool overwrite = false;  // start over in an --out that holds an earlier run
  // Stop before a round that would end after this many seconds of the process's run (judged
  // by the last round's duration); 0: no budget. A run always trains at least one round.
  double max_seconds = 0;
  int64_t devices = 1;
  int64_t threads = 0;      // 0: drx's default (under MPI: the cores per process on this host)
  bool mpi = false;         // on when asked, or when mpirun started this process
  double mpi_timeout = 30;  // seconds a rank waits for another before aborting the job
  bool quiet = false;
  bool help = false;  // --help among other flags: print help, run nothing
  // f32, or bf16: products on bf16 operands with f32 accumulation (nn::Policy::bf16());
  // parameters, optimizer state and checkpoints stay f32.
  std::string precision = "f32";
};

// The server optimizer of the FedAvg family (optim::ServerOptimizer's hyperparameters).
struct ServerFlags {
  std::string server_opt = "fedavg";  // fedavg | fedavgm | fedadam | fedyogi | fedadagrad
  // --server-lr; where it is not given, parsing sets default_server_lr(server_opt).
  double server_lr = 1.0;
  double server_momentum = 0.9;                                 // fedavgm
  double adam_beta1 = 0.9, adam_beta2 = 0.99, adam_eps = 1e-3;  // the adaptive ones
  bool adaptive() const;                                        // fedadam, fedyogi or fedadagrad
  optim::ServerOptimizer server_optimizer() const;
};

// Each server optimizer's own default learning rate: 1 for fedavg and fedavgm (the plain
// weighted mean, and Hsu et al. 2019's), 0.03 for fedadam and fedyogi and 0.1 for fedadagrad
// (Reddi et al. 2021's tuned ranges with tau = 1e-3: their step is about lr per coordinate,
// so lr 1 throws the model far off in the first round).
double default_server_lr(const std::string& server_opt);

using Valued = std::map<std::string, flags::Setter>;
using Switches = std::map<std::string, std::function<void()>>;

// Registers --data --out --rounds --seed --eval-every --checkpoint-every --resume --overwrite
// --max-seconds --devices --threads --precision --mpi --mpi-timeout --quiet --help/-h into `o`.
void add_run_flags(const std::string& command, RunFlags& o, Valued& valued, Switches& switches);
// Registers --server-opt --server-lr --server-momentum --adam-beta1 --adam-beta2 --adam-eps.
void add_server_flags(const std::string& command, ServerFlags& o, Valued& valued);

// After parsing: the run flags' combinations (UsageError naming them).
void check_run_flags(const std::string& command, const RunFlags& o);
// After parsing: refuses server flags that do nothing (`used` false: the command's mode has
// no FedAvg server, `why_unused` says which mode does) and resolves the default learning rate.
void check_server_flags(const std::string& command, const std::set<std::string>& given,
                        ServerFlags& o, bool used, const std::string& why_unused);

// --precision where it is not f32 (checkpoints of f32 runs record no precision, as before).
void add_precision_field(std::vector<std::pair<std::string, std::string>>& fields,
                         const RunFlags& o);
// The server flags that shape the trajectory, as checkpoints record them.
void add_server_fields(std::vector<std::pair<std::string, std::string>>& fields,
                       const ServerFlags& o);

// Help text: the server section's flag lines, and the execution section's (`command` names
// the mpirun line).
std::string server_flags_help(const ServerFlags& defaults);
std::string execution_flags_help(const std::string& command, const RunFlags& defaults);
// --data (`what` it holds) and --out, with their defaults.
std::string data_flags_help(const std::string& what, const RunFlags& defaults);
// --rounds --seed (`seeded`: what the seed draws) --eval-every (`evaluation`: of what)
// --checkpoint-every --resume --overwrite --max-seconds.
std::string schedule_flags_help(const RunFlags& defaults, const std::string& seeded,
                                const std::string& evaluation);

}  // namespace drx::tool::training
