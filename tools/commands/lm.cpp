#include <unistd.h>

#include <iostream>
#include <ostream>

#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/lm/options.h"
#include "tools/lm/train.h"

namespace drx::tool {

// Federated training of a transformer language model; tools/lm holds the pieces.
int lm_command(const Args& args, std::ostream& out, std::ostream&) {
  lm::Options o = lm::parse_options(args);
  if (o.help) {
    out << "usage: drx lm " << lm::usage_text() << "\n\n"
        << lm::summary_text() << ".\n\n"
        << lm::details_text();
    return kExitOk;
  }
  const lm::RunSummary summary = lm::run_lm(o, out, std::cerr, ::isatty(STDERR_FILENO) == 1);
  return summary.diverged ? kExitDiverged : kExitOk;
}

}  // namespace drx::tool
