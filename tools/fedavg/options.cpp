#include "tools/fedavg/options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "drx/data/idx.h"
#include "tools/cli.h"
#include "tools/flags.h"

namespace drx::tool::fedavg {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCommand = "fedavg";

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& want) {
  throw UsageError(std::string(kCommand) + ": " + flag + " expects " + want + ", got '" + value +
                   "'");
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  return flags::parse_int(kCommand, flag, text, min, max);
}
double parse_real(const std::string& flag, const std::string& text, double min, bool min_open,
                  double max, bool max_open) {
  return flags::parse_real(kCommand, flag, text, min, min_open, max, max_open);
}
std::string parse_choice(const std::string& flag, const std::string& text,
                         const std::vector<std::string>& choices) {
  return flags::parse_choice(kCommand, flag, text, choices);
}
std::string fmt(double v) { return flags::exact(v); }
std::string short_num(double v) { return flags::brief(v); }

std::vector<int64_t> parse_sizes(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? comma : comma - start);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > 65536)
      bad(flag, text, "comma-separated layer sizes in [1, 65536], e.g. 200,200");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string sizes_text(const std::vector<int64_t>& sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s;
}

}  // namespace

Options::Options() : RunFlags(data::kFashionMnistDir, "fedavg-out", 650, 50) {}

Options Options::defaults(const std::string& model) {
  Options d;
  d.model = model;
  if (model == "cnn") {
    // McMahan et al.'s B = 10, E = 1 and lr 0.1 (lr 0.2 diverges in the first round): with the
    // other defaults (IID, 100 clients, cohort 10) 90% test accuracy on Fashion-MNIST in under
    // 600 s on 2 cores (README).
    d.rounds = 90;
    d.batch = 10;
    d.client_lr = 0.1;
  }
  return d;
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  bool epochs_given = false, steps_given = false;
  training::Valued valued = {
      {"--export-rounds", [&](auto&, auto& v) { o.export_rounds = v; }},
      {"--max-examples", [&](auto& f, auto& v) { o.max_examples = parse_int(f, v, 0, INT64_MAX); }},
      {"--clients", [&](auto& f, auto& v) { o.clients = parse_int(f, v, 1, 10000000); }},
      {"--cohort", [&](auto& f, auto& v) { o.cohort = parse_int(f, v, 1, 10000000); }},
      {"--partition",
       [&](auto& f, auto& v) {
         o.partition = parse_choice(f, v, {"iid", "dirichlet", "shards"});
       }},
      {"--alpha", [&](auto& f, auto& v) { o.alpha = parse_real(f, v, 0, true, 1e6, false); }},
      {"--shards-per-client",
       [&](auto& f, auto& v) { o.shards_per_client = parse_int(f, v, 1, 1000000); }},
      {"--model",
       [&](auto& f, auto& v) {
         o.model = parse_choice(f, v, {"mlp", "cnn"});
       }},
      {"--hidden", [&](auto& f, auto& v) { o.hidden = parse_sizes(f, v); }},
      {"--epochs",
       [&](auto& f, auto& v) {
         o.epochs = parse_int(f, v, 1, 100000);
         epochs_given = true;
       }},
      {"--local-steps",
       [&](auto& f, auto& v) {
         o.local_steps = parse_int(f, v, 1, 1000000);
         steps_given = true;
       }},
      {"--batch", [&](auto& f, auto& v) { o.batch = parse_int(f, v, 1, 1000000); }},
      {"--client-lr",
       [&](auto& f, auto& v) { o.client_lr = parse_real(f, v, 0, true, 1e6, false); }},
      {"--client-momentum",
       [&](auto& f, auto& v) { o.client_momentum = parse_real(f, v, 0, false, 1, true); }},
      {"--dp-clip",
       [&](auto& f, auto& v) {
         o.dp_clip = v == "inf" ? INFINITY : parse_real(f, v, 0, true, 1e12, false);
       }},
      {"--dp-noise",
       [&](auto& f, auto& v) { o.dp_noise = parse_real(f, v, 0, false, 1e6, false); }},
      {"--dp-sampling",
       [&](auto& f, auto& v) {
         o.dp_sampling = parse_choice(f, v, {"poisson", "fixed"});
       }},
      {"--dp-delta", [&](auto& f, auto& v) { o.dp_delta = parse_real(f, v, 0, true, 1, true); }},
      {"--dp-quantile",
       [&](auto& f, auto& v) { o.dp_quantile = parse_real(f, v, 0, true, 1, true); }},
      {"--dp-clip-lr",
       [&](auto& f, auto& v) { o.dp_clip_lr = parse_real(f, v, 0, false, 1e6, false); }},
      {"--dp-count-noise",
       [&](auto& f, auto& v) { o.dp_count_noise = parse_real(f, v, 0, false, 1e9, false); }},
  };
  training::Switches switches;
  training::add_run_flags(kCommand, o, valued, switches);
  training::add_server_flags(kCommand, o, valued);
  const std::set<std::string> given = flags::parse(kCommand, args, valued, switches);
  if (o.help) return o;
  // The model's own defaults, where their flags are not given.
  const Options model_defaults = Options::defaults(o.model);
  if (!given.count("--rounds")) o.rounds = model_defaults.rounds;
  if (!given.count("--batch")) o.batch = model_defaults.batch;
  if (!given.count("--client-lr")) o.client_lr = model_defaults.client_lr;
  flags::refuse_unused(kCommand, given, {"--hidden"}, o.model == "mlp", "with --model mlp");
  flags::refuse_unused(kCommand, given, {"--alpha"}, o.partition == "dirichlet",
                       "with --partition dirichlet");
  flags::refuse_unused(kCommand, given, {"--shards-per-client"}, o.partition == "shards",
                       "with --partition shards");
  training::check_server_flags(kCommand, given, o, true, "");
  flags::refuse_unused(kCommand, given, {"--dp-clip-lr", "--dp-count-noise"},
                       given.count("--dp-quantile") > 0, "with --dp-quantile (adaptive clipping)");
  if (epochs_given && steps_given)
    throw UsageError("fedavg: --epochs and --local-steps exclude each other; give one");
  if (o.cohort > o.clients)
    throw UsageError("fedavg: --cohort expects at most --clients (" + std::to_string(o.clients) +
                     ") clients, got '" + std::to_string(o.cohort) + "'");
  const bool dp_flag = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.starts_with("--dp-") && !a.starts_with("--dp-clip=") && a != "--dp-clip";
  });
  if (dp_flag && !o.dp())
    throw UsageError(
        "fedavg: the --dp-* flags need --dp-clip C (the L2 clip that turns on "
        "DP-FedAvg; 'inf' for none)");
  if (o.dp() && std::isinf(o.dp_clip) && o.dp_noise > 0)
    throw UsageError("fedavg: --dp-clip inf with --dp-noise " + fmt(o.dp_noise) +
                     ": the noise's standard deviation is --dp-noise x --dp-clip, infinite; give "
                     "a finite --dp-clip (--dp-clip inf alone means no clipping and no noise)");
  if (o.dp() && o.dp_quantile > 0 && o.dp_noise > 0) {
    const double sigma_b = o.dp_count_noise >= 0 ? o.dp_count_noise : o.cohort / 20.0;
    if (!(2 * sigma_b > o.dp_noise))
      throw UsageError("fedavg: adaptive clipping (--dp-quantile) spends part of --dp-noise " +
                       fmt(o.dp_noise) +
                       " on the unclipped count; it needs 2 x --dp-count-noise "
                       "(here " +
                       fmt(sigma_b) + ") > --dp-noise");
  }
  if (std::error_code ec; !o.export_rounds.empty() && fs::exists(o.export_rounds, ec) &&
                          !fs::is_directory(o.export_rounds, ec))
    throw UsageError("fedavg: --export-rounds '" + o.export_rounds +
                     "' is a file, expected a folder for the rounds' jobs");
  if (o.mpi && !o.export_rounds.empty())
    throw UsageError(
        "fedavg: --export-rounds writes every client's data, which no rank of an MPI run "
        "holds; export from a run of one process");
  training::check_run_flags(kCommand, o);
  return o;
}

std::vector<std::pair<std::string, std::string>> trajectory_fields(const Options& o) {
  std::vector<std::pair<std::string, std::string>> f;
  // The MLP's checkpoints record no model (as before there was a choice), its hidden sizes.
  if (o.model != "mlp") f.emplace_back("--model", o.model);
  f.emplace_back("--max-examples", std::to_string(o.max_examples));
  f.emplace_back("--clients", std::to_string(o.clients));
  f.emplace_back("--cohort", std::to_string(o.cohort));
  f.emplace_back("--partition", o.partition);
  if (o.partition == "dirichlet") f.emplace_back("--alpha", fmt(o.alpha));
  if (o.partition == "shards")
    f.emplace_back("--shards-per-client", std::to_string(o.shards_per_client));
  if (o.model == "mlp") f.emplace_back("--hidden", sizes_text(o.hidden));
  if (o.local_steps > 0)
    f.emplace_back("--local-steps", std::to_string(o.local_steps));
  else
    f.emplace_back("--epochs", std::to_string(o.epochs));
  f.emplace_back("--batch", std::to_string(o.batch));
  f.emplace_back("--client-lr", fmt(o.client_lr));
  f.emplace_back("--client-momentum", fmt(o.client_momentum));
  training::add_server_fields(f, o);
  if (o.dp()) {
    f.emplace_back("--dp-clip", fmt(o.dp_clip));
    f.emplace_back("--dp-noise", fmt(o.dp_noise));
    f.emplace_back("--dp-sampling", o.dp_sampling);
    if (o.dp_quantile > 0) {
      f.emplace_back("--dp-quantile", fmt(o.dp_quantile));
      f.emplace_back("--dp-clip-lr", fmt(o.dp_clip_lr));
      f.emplace_back("--dp-count-noise", fmt(o.dp_count_noise));
    }
  }
  training::add_precision_field(f, o);
  f.emplace_back("--seed", std::to_string(o.seed));
  return f;
}

const char* usage_text() { return "[--data DIR] [--out DIR] [--rounds N] [FLAGS...]"; }

const char* summary_text() {
  return "train an MLP or a CNN on Fashion-MNIST with federated averaging (simulated clients)";
}

const char* details_text() {
  static const std::string text = [] {
    const Options d;
    const Options cnn = Options::defaults("cnn");
    std::ostringstream os;
    os << "Simulates cross-device federated learning: the training set is split among --clients\n"
          "clients; every round a seeded cohort of --cohort clients trains the server's model\n"
          "locally with SGD and the server averages their updates. The whole round is one drx\n"
          "program over the placement 'clients'. Progress goes to stderr; the final summary to\n"
          "stdout. Files in --out: metrics.csv and metrics.svg (rewritten at every evaluation)\n"
          "and checkpoint.bin (the server state), all replaced atomically.\n"
          "\n"
          "data and output:\n"
       << training::data_flags_help("Fashion-MNIST IDX .gz files", d)
       << "  --max-examples N        use only the first N examples of each split (default all)\n"
          "population:\n"
          "  --clients N             simulated clients (default "
       << d.clients << ")\n"
       << "  --cohort N              clients per round (default " << d.cohort << ")\n"
       << "  --partition KIND        iid | dirichlet | shards (default " << d.partition << ")\n"
       << "  --alpha A               Dirichlet concentration, smaller = more label skew (default "
       << short_num(d.alpha) << ")\n"
       << "  --shards-per-client N   label-sorted shards per client (default "
       << d.shards_per_client << ")\n"
       << "model and local training:\n"
          "  --model KIND            mlp (a ReLU MLP) | cnn (McMahan et al.'s CNN: two 5x5\n"
          "                          convolutions of 32 and 64 channels with 2x2 max pooling,\n"
          "                          dense 512, on the 28x28 images) (default "
       << d.model << ");\n"
       << "                          cnn has its own defaults: --rounds " << cnn.rounds
       << ", --batch " << cnn.batch << ", --client-lr " << short_num(cnn.client_lr) << "\n"
       << "  --hidden N,N,...        hidden layer sizes of the ReLU MLP (default "
       << sizes_text(d.hidden) << ")\n"
       << "  --epochs E              local epochs over each client's data (default " << d.epochs
       << ")\n"
       << "  --local-steps S         exactly S local steps instead of --epochs\n"
          "  --batch B               local batch size (default "
       << d.batch << "; cnn " << cnn.batch << ")\n"
       << "  --client-lr LR          client SGD learning rate (default " << short_num(d.client_lr)
       << "; cnn " << short_num(cnn.client_lr) << ")\n"
       << "  --client-momentum M     client SGD momentum, 0 = plain SGD (default "
       << short_num(d.client_momentum) << ")\n"
       << "server:\n"
       << training::server_flags_help(d)
       << "differential privacy (DP-FedAvg, McMahan et al. 2018):\n"
          "  --dp-clip C             clip each client's update to L2 norm C (inf: no clipping)\n"
          "                          and turn DP-FedAvg on: uniform weights, noise on the sum,\n"
          "                          divided by the expected cohort size\n"
          "  --dp-noise Z            noise multiplier: N(0, (Z C)^2) per parameter (default "
       << short_num(d.dp_noise) << ")\n"
       << "  --dp-sampling KIND      poisson (each client joins with probability cohort/clients;\n"
          "                          add/remove-one DP) | fixed (--cohort without replacement;\n"
          "                          replace-one DP) (default "
       << d.dp_sampling << ")\n"
       << "  --dp-delta D            delta of the reported (epsilon, delta) (default "
       << short_num(d.dp_delta) << ")\n"
       << "  --dp-quantile G         adaptive clipping towards quantile G of the update norms\n"
          "                          (Andrew et al. 2021; default off)\n"
          "  --dp-clip-lr ETA        adaptive clipping's geometric learning rate (default "
       << short_num(d.dp_clip_lr) << ")\n"
       << "  --dp-count-noise S      std of the noise on the unclipped count (default cohort/20)\n"
          "                          epsilon (RDP accountant, drx/privacy/accountant.h) is "
          "printed\n"
          "                          at every evaluation and written to metrics.csv\n"
       << "schedule:\n"
       << training::schedule_flags_help(d, "the partition, init, cohorts and batches",
                                        "test-set evaluation")
       << "  --export-rounds DIR     also write each round as a batch job in DIR/round-N: the\n"
          "                          split parts of the round over the clients' own data,\n"
          "                          the server's inputs, each client's data and the round's\n"
          "                          results (examples/batch_fedavg.sh runs them)\n"
          "execution:\n"
       << training::execution_flags_help(kCommand, d)
       << "\n"
          "Every flag also takes the form --flag=VALUE.\n";
    return os.str();
  }();
  return text.c_str();
}

}  // namespace drx::tool::fedavg
