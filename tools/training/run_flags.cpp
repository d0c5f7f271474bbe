#include "tools/training/run_flags.h"

#include <sstream>

#include "tools/flags.h"

namespace drx::tool::training {
namespace {

const std::vector<std::string> kServerKinds = {"fedavg", "fedavgm", "fedadam", "fedyogi",
                                               "fedadagrad"};

}  // namespace

bool ServerFlags::adaptive() const {
  return server_opt == "fedadam" || server_opt == "fedyogi" || server_opt == "fedadagrad";
}

optim::ServerOptimizer ServerFlags::server_optimizer() const {
  optim::ServerOptimizer s;
  s.kind = optim::parse_server_kind(server_opt);
  s.lr = server_lr;
  s.momentum = server_momentum;
  s.beta1 = adam_beta1;
  s.beta2 = adam_beta2;
  s.eps = adam_eps;
  return s;
}

double default_server_lr(const std::string& server_opt) {
  if (server_opt == "fedadam" || server_opt == "fedyogi") return 0.03;
  if (server_opt == "fedadagrad") return 0.1;
  return 1.0;
}

void add_run_flags(const std::string& command, RunFlags& o, Valued& valued, Switches& switches) {
  auto count = [command](int64_t& field, int64_t lo, int64_t hi) {
    return [command, &field, lo, hi](auto& f, auto& v) {
      field = flags::parse_int(command, f, v, lo, hi);
    };
  };
  auto positive = [command](double& field, double hi) {
    return [command, &field, hi](auto& f, auto& v) {
      field = flags::parse_real(command, f, v, 0, true, hi, false);
    };
  };
  valued["--data"] = [&o](auto&, auto& v) { o.data_dir = v; };
  valued["--out"] = [&o](auto&, auto& v) { o.out_dir = v; };
  valued["--rounds"] = count(o.rounds, 1, 100000000);
  valued["--seed"] = [command, &o](auto& f, auto& v) { o.seed = flags::parse_seed(command, f, v); };
  valued["--eval-every"] = count(o.eval_every, 1, INT64_MAX);
  valued["--checkpoint-every"] = count(o.checkpoint_every, 1, INT64_MAX);
  valued["--max-seconds"] = positive(o.max_seconds, 1e9);
  valued["--devices"] = count(o.devices, 1, 1024);
  valued["--threads"] = count(o.threads, 1, 1024);
  valued["--mpi-timeout"] = positive(o.mpi_timeout, 1e6);
  valued["--precision"] = [command, &o](auto& f, auto& v) {
    o.precision = flags::parse_choice(command, f, v, {"f32", "bf16"});
  };
  switches["--resume"] = [&o] { o.resume = true; };
  switches["--overwrite"] = [&o] { o.overwrite = true; };
  switches["--quiet"] = [&o] { o.quiet = true; };
  switches["--help"] = [&o] { o.help = true; };
  switches["-h"] = [&o] { o.help = true; };
  switches["--mpi"] = [&o] { o.mpi = true; };
}

void add_server_flags(const std::string& command, ServerFlags& o, Valued& valued) {
  auto fraction = [command](double& field) {  // [0, 1)
    return [command, &field](auto& f, auto& v) {
      field = flags::parse_real(command, f, v, 0, false, 1, true);
    };
  };
  auto positive = [command](double& field) {
    return [command, &field](auto& f, auto& v) {
      field = flags::parse_real(command, f, v, 0, true, 1e6, false);
    };
  };
  valued["--server-opt"] = [command, &o](auto& f, auto& v) {
    o.server_opt = flags::parse_choice(command, f, v, kServerKinds);
  };
  valued["--server-lr"] = positive(o.server_lr);
  valued["--server-momentum"] = fraction(o.server_momentum);
  valued["--adam-beta1"] = fraction(o.adam_beta1);
  valued["--adam-beta2"] = fraction(o.adam_beta2);
  valued["--adam-eps"] = positive(o.adam_eps);
}

void check_run_flags(const std::string& command, const RunFlags& o) {
  if (o.resume && o.overwrite)
    throw UsageError(command + ": --resume and --overwrite exclude each other; give one");
  if (o.out_dir.empty()) throw UsageError(command + ": --out expects a directory, got ''");
  if (o.data_dir.empty()) throw UsageError(command + ": --data expects a directory, got ''");
}

void check_server_flags(const std::string& command, const std::set<std::string>& given,
                        ServerFlags& o, bool used, const std::string& why_unused) {
  flags::refuse_unused(command, given,
                       {"--server-opt", "--server-lr", "--server-momentum", "--adam-beta1",
                        "--adam-beta2", "--adam-eps"},
                       used, why_unused);
  flags::refuse_unused(command, given, {"--server-momentum"}, o.server_opt == "fedavgm",
                       "with --server-opt fedavgm");
  flags::refuse_unused(command, given, {"--adam-beta1", "--adam-eps"}, o.adaptive(),
                       "with --server-opt fedadam, fedyogi or fedadagrad");
  flags::refuse_unused(command, given, {"--adam-beta2"},
                       o.server_opt == "fedadam" || o.server_opt == "fedyogi",
                       "with --server-opt fedadam or fedyogi");
  if (!given.count("--server-lr")) o.server_lr = default_server_lr(o.server_opt);
}

void add_precision_field(std::vector<std::pair<std::string, std::string>>& fields,
                         const RunFlags& o) {
  if (o.precision != "f32") fields.emplace_back("--precision", o.precision);
}

void add_server_fields(std::vector<std::pair<std::string, std::string>>& f, const ServerFlags& o) {
  using flags::exact;
  f.emplace_back("--server-opt", o.server_opt);
  f.emplace_back("--server-lr", exact(o.server_lr));
  if (o.server_opt == "fedavgm") f.emplace_back("--server-momentum", exact(o.server_momentum));
  // The adaptive servers (Reddi et al. 2021) read beta1 and tau; fedadagrad has no beta2.
  if (o.adaptive()) f.emplace_back("--adam-beta1", exact(o.adam_beta1));
  if (o.adaptive() && o.server_opt != "fedadagrad")
    f.emplace_back("--adam-beta2", exact(o.adam_beta2));
  if (o.adaptive()) f.emplace_back("--adam-eps", exact(o.adam_eps));
}

std::string server_flags_help(const ServerFlags& d) {
  using flags::brief;
  std::ostringstream os;
  os << "  --server-opt KIND       fedavg | fedavgm | fedadam | fedyogi | fedadagrad (default "
     << d.server_opt
     << ";\n"
        "                          the last three: Reddi et al. 2021, without bias correction)\n"
     << "  --server-lr LR          server learning rate (default: each optimizer's own: "
     << brief(default_server_lr("fedavg")) << " for fedavg\n"
     << "                          and fedavgm, " << brief(default_server_lr("fedadam"))
     << " for fedadam and fedyogi, " << brief(default_server_lr("fedadagrad"))
     << " for fedadagrad)\n"
     << "  --server-momentum M     fedavgm momentum (default " << brief(d.server_momentum) << ")\n"
     << "  --adam-beta1 B          fedadam/fedyogi/fedadagrad first-moment decay (default "
     << brief(d.adam_beta1) << ")\n"
     << "  --adam-beta2 B          fedadam/fedyogi second-moment decay (default "
     << brief(d.adam_beta2) << ")\n"
     << "  --adam-eps E            fedadam/fedyogi/fedadagrad adaptivity tau (default "
     << brief(d.adam_eps) << ")\n";
  return os.str();
}

std::string data_flags_help(const std::string& what, const RunFlags& d) {
  return "  --data DIR              " + what + " (default " + d.data_dir + ")\n" +
         "  --out DIR               output directory (default " + d.out_dir + ")\n";
}

std::string schedule_flags_help(const RunFlags& d, const std::string& seeded,
                                const std::string& evaluation) {
  std::ostringstream os;
  os << "  --rounds N              rounds to train (default " << d.rounds << ")\n"
     << "  --seed S                seed of " << seeded << " (default " << d.seed << ")\n"
     << "  --eval-every N          " << evaluation << " every N rounds and at the end (default "
     << d.eval_every << ")\n"
     << "  --checkpoint-every N    checkpoint every N rounds and at the end (default "
     << d.checkpoint_every << ")\n"
     << "  --resume                continue from DIR/checkpoint.bin (same training flags;\n"
        "                          --rounds may grow); the result is bit-identical to an\n"
        "                          uninterrupted run\n"
        "  --overwrite             start over in an --out that holds an earlier run's\n"
        "                          checkpoint (without it, or --resume, that is an error)\n"
        "  --max-seconds T         stop before a round that would end after T seconds (judged\n"
        "                          by the last round's), with a checkpoint; at least one round\n";
  return os.str();
}

std::string execution_flags_help(const std::string& command, const RunFlags& d) {
  std::ostringstream os;
  os << "  --devices N             CPU devices along the 'clients' mesh axis (default " << d.devices
     << ")\n"
     << "  --threads N             drx worker threads (default: DRX_NUM_THREADS, else all)\n"
     << "  --precision P           f32 | bf16: products on bf16 operands accumulated in f32\n"
        "                          (oneDNN, where the CPU has AVX512-BF16 or AMX); parameters,\n"
        "                          optimizer state and checkpoints stay f32 (default "
     << d.precision << ")\n"
     << "  --quiet                 no progress output\n"
        "  --mpi                   run as one rank of `mpirun -np P drx "
     << command
     << " ...` (on by\n"
        "                          itself under mpirun): each rank trains its own clients'\n"
        "                          range of each round, reductions combine across ranks in\n"
        "                          the canonical tree (results bitwise those of one process\n"
        "                          with the same --threads); rank 0 evaluates and writes\n"
        "                          --out, and reads the checkpoint of --resume\n"
        "  --mpi-timeout S         seconds a rank waits for another before it reports which\n"
        "                          rank stopped responding and aborts the job (default "
     << flags::brief(d.mpi_timeout) << ")\n";
  return os.str();
}

}  // namespace drx::tool::training
