#include <optional>
#include <ostream>
#include <string>

#include "drx/data/atomic_write.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/commands/program_files.h"

namespace drx::tool {
namespace {

struct ImportFlags {
  std::optional<std::string> file;
  std::optional<std::string> output;  // -o FILE; standard output when absent
};

ImportFlags parse_import_flags(const Args& args) {
  ImportFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-o" || a == "--output") {
      if (i + 1 == args.size())
        throw UsageError("import: " + a + " needs a file, e.g. -o prog.drx");
      if (flags.output) throw UsageError("import: -o is given twice");
      flags.output = args[++i];
    } else if (a.starts_with("-") && a != "-") {
      throw UsageError("import: unknown flag '" + a + "'");
    } else if (flags.file) {
      throw UsageError("import: one module file expected, got '" + *flags.file + "' and '" + a +
                       "'");
    } else {
      flags.file = a;
    }
  }
  if (!flags.file) throw UsageError("import: missing the StableHLO module FILE");
  return flags;
}

}  // namespace

int import_command(const Args& args, std::ostream& out, std::ostream& err) {
  const ImportFlags flags = parse_import_flags(args);
  const std::string text =
      import_text(load_mlir(*flags.file, "import"), *flags.file, "import", err);
  if (flags.output)
    data::write_file_atomically(*flags.output, {text}, "import");
  else
    out << text;
  return 0;
}

}  // namespace drx::tool
