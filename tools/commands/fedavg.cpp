#include <unistd.h>

#include <iostream>
#include <ostream>

#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/fedavg/options.h"
#include "tools/fedavg/train.h"

namespace drx::tool {

// Federated averaging on Fashion-MNIST; tools/fedavg holds the pieces.
int fedavg_command(const Args& args, std::ostream& out, std::ostream& err) {
  fedavg::Options o = fedavg::parse_options(args);
  if (o.help) {
    out << "usage: drx fedavg " << fedavg::usage_text() << "\n\n"
        << fedavg::summary_text() << ".\n\n"
        << fedavg::details_text();
    return kExitOk;
  }
  if (o.dp() && o.dp_noise == 0)
    err << "fedavg: --dp-clip without --dp-noise clips the clients' updates but adds no noise: "
           "this run is not differentially private\n";
  const fedavg::RunSummary summary =
      fedavg::run_fedavg(o, out, std::cerr, ::isatty(STDERR_FILENO) == 1);
  return summary.diverged ? kExitDiverged : kExitOk;
}

}  // namespace drx::tool
