#include <algorithm>
#include <charconv>
#include <optional>
#include <ostream>
#include <string>

#include "drx/data/atomic_write.h"
#include "drx/export/stablehlo.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/commands/program_files.h"

namespace drx::tool {
namespace {

struct ExportFlags {
  std::optional<std::string> file;
  std::optional<std::string> output;  // -o FILE; standard output when absent
  std::vector<Mesh::Axis> mesh;
  StableHloOptions options;
};

// "clients=4" or "groups=2,clients=4".
std::vector<Mesh::Axis> parse_mesh(const std::string& text) {
  std::vector<Mesh::Axis> axes;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const size_t eq = item.find('=');
    int size = 0;
    const std::string digits = eq == std::string::npos ? "" : item.substr(eq + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (eq == std::string::npos || eq == 0 || ec != std::errc() ||
        end != digits.data() + digits.size())
      throw UsageError(
          "export: --mesh expects NAME=DEVICES[,NAME=DEVICES...], e.g. --mesh "
          "clients=4, got '" +
          text + "'");
    axes.emplace_back(item.substr(0, eq), size);
    at = comma + 1;
  }
  return axes;
}

ExportFlags parse_export_flags(const Args& args) {
  ExportFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* example) -> const std::string& {
      if (i + 1 == args.size())
        throw UsageError("export: " + a + " needs a value, e.g. " + example);
      return args[++i];
    };
    if (a == "-o" || a == "--output") {
      if (flags.output) throw UsageError("export: -o is given twice");
      flags.output = value("-o round.mlir");
    } else if (a == "--mesh") {
      // A second --mesh replaced the first without a word.
      if (!flags.mesh.empty())
        throw UsageError(
            "export: --mesh is given twice; name every axis in one, e.g. --mesh "
            "groups=2,clients=4");
      flags.mesh = parse_mesh(value("--mesh clients=4"));
    } else if (a == "--generic") {
      flags.options.generic = true;
    } else if (a == "--gspmd") {
      flags.options.gspmd = true;
    } else if (a == "--single-reduce") {
      flags.options.single_reduce = true;
    } else if (a == "--allow-idle-devices") {
      flags.options.allow_idle_devices = true;
    } else if (a.starts_with("-") && a != "-") {
      throw UsageError("export: unknown flag '" + a + "'");
    } else if (flags.file) {
      throw UsageError("export: one program file expected, got '" + *flags.file + "' and '" + a +
                       "'");
    } else {
      flags.file = a;
    }
  }
  if (!flags.file) throw UsageError("export: missing the program FILE");
  return flags;
}

}  // namespace

int export_command(const Args& args, std::ostream& out, std::ostream&) {
  const ExportFlags flags = parse_export_flags(args);
  const Program p = names_mlir_file(*flags.file) ? results_only(load_mlir(*flags.file, "export"))
                                                 : load_program(*flags.file, "export");
  const Mesh mesh = flags.mesh.empty() ? Mesh() : Mesh(flags.mesh);
  const std::string text = to_stablehlo(p, mesh, flags.options);
  if (flags.output)
    data::write_file_atomically(*flags.output, {text}, "export");
  else
    out << text;
  return 0;
}

}  // namespace drx::tool
