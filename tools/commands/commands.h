#pragma once
// One function per subcommand of the drx program. Each gets the arguments
// after its name, writes its normal output to `out` and notes to `err`, and
// throws UsageError for a bad command line or drx::Error for anything else
// that goes wrong.
#include <iosfwd>
#include <string>
#include <vector>

namespace drx::tool {

using Args = std::vector<std::string>;

struct Command {
  const char* name;
  const char* usage;    // arguments, e.g. "FILE [--arg VALUES]..."
  const char* summary;  // one line
  const char* details;  // the rest of `drx help NAME`
  int (*run)(const Args& args, std::ostream& out, std::ostream& err);
};

int demo_command(const Args& args, std::ostream& out, std::ostream& err);
int run_command(const Args& args, std::ostream& out, std::ostream& err);
int check_command(const Args& args, std::ostream& out, std::ostream& err);
int import_command(const Args& args, std::ostream& out, std::ostream& err);
int export_command(const Args& args, std::ostream& out, std::ostream& err);
int split_command(const Args& args, std::ostream& out, std::ostream& err);
int aggregate_command(const Args& args, std::ostream& out, std::ostream& err);
int mapreduce_command(const Args& args, std::ostream& out, std::ostream& err);
int fedavg_command(const Args& args, std::ostream& out, std::ostream& err);
int lm_command(const Args& args, std::ostream& out, std::ostream& err);

// Every subcommand, in the order `drx help` lists them.
const std::vector<Command>& commands();

}  // namespace drx::tool
