// drx split: a program's MapReduce form on disk.
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>

#include "drx/drx.h"
#include "drx/export/mapreduce_form.h"
#include "drx/export/mapreduce_names.h"
#include "drx/export/mapreduce_plan.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/commands/program_files.h"
#include "tools/flags.h"

namespace drx::tool {
namespace {

namespace fs = std::filesystem;

size_t bytes_of(const MapReduceForm& form, const std::vector<std::string>& names) {
  size_t n = 0;
  for (const std::string& name : names) {
    const Type& t = form.types.at(name);
    n += static_cast<size_t>(t.size()) * dtype_size(t.dtype);
  }
  return n;
}

// "a,b,c" as names, checked; a program file has no names of its own.
std::vector<std::string> name_list(const std::string& text, size_t want, const char* flag) {
  std::vector<std::string> names;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    names.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    check_form_name(names.back(), std::string("split: ") + flag);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (names.size() != want)
    throw UsageError(std::string("split: ") + flag + " names " + std::to_string(names.size()) +
                     " values, but the program has " + std::to_string(want));
  return names;
}

// The flags' names; a list not given is arg0, arg1, ... for the inputs and out (one output)
// or out/0, out/1, ... for the outputs, as drx::form_names names a traced function's.
FormNames names_of(const Program& p, const std::optional<std::string>& inputs,
                   const std::optional<std::string>& outputs) {
  FormNames names;
  if (inputs) {
    names.inputs = name_list(*inputs, p.inputs.size(), "--input-names");
  } else {
    for (size_t k = 0; k < p.inputs.size(); ++k) names.inputs.push_back("arg" + std::to_string(k));
  }
  if (outputs) {
    names.outputs = name_list(*outputs, p.outputs.size(), "--output-names");
  } else {
    for (size_t k = 0; k < p.outputs.size(); ++k)
      names.outputs.push_back(p.outputs.size() == 1 ? "out" : "out/" + std::to_string(k));
  }
  return names;
}

}  // namespace

int split_command(const Args& args, std::ostream& out, std::ostream&) {
  std::optional<std::string> file, dir, format, input_names, output_names;
  for (size_t i = 0; i < args.size(); ++i) {
    if (flags::take_value("split", args, i, "--out", dir) ||
        flags::take_value("split", args, i, "--format", format) ||
        flags::take_value("split", args, i, "--input-names", input_names) ||
        flags::take_value("split", args, i, "--output-names", output_names)) {
    } else if (args[i].starts_with("-") && args[i] != "-") {
      throw UsageError("split: unknown flag '" + args[i] + "'");
    } else if (file) {
      throw UsageError("split: one program file expected, got '" + *file + "' and '" + args[i] +
                       "'");
    } else {
      file = args[i];
    }
  }
  if (!file) throw UsageError("split: missing the program FILE");
  if (!dir) throw UsageError("split: missing --out DIR, the folder for the parts");
  if (format && *format != "drx" && *format != "stablehlo")
    throw UsageError("split: --format is drx or stablehlo, got '" + *format + "'");
  if (std::error_code ec; fs::exists(*dir, ec) && !fs::is_directory(*dir, ec))
    throw UsageError("split: --out '" + *dir + "' is a file, expected a folder for the parts");
  const Program p = names_mlir_file(*file) ? results_only(load_mlir(*file, "split"))
                                           : load_program(*file, "split");
  const MapReduceForm form = input_names || output_names
                                 ? mapreduce_form(p, names_of(p, input_names, output_names))
                                 : mapreduce_form(p);
  write_mapreduce_plan(form, *dir, {.stablehlo = format && *format == "stablehlo", .op = "split"});
  out << "split @" << p.name << " over '" << form.placement << "' (" << form.clients
      << " clients) into " << form.stages.size() << " stage" << (form.stages.size() == 1 ? "" : "s")
      << " in " << *dir << "\n";
  for (size_t i = 0; i < form.stages.size(); ++i) {
    const Stage& s = form.stages[i];
    out << "  stage " << i << ": broadcast " << bytes_of(form, s.broadcast)
        << " bytes per client, client data " << s.client_data.size() << " inputs, upload "
        << bytes_of(form, s.client_work.outputs) << " bytes per client (" << s.aggregations.size()
        << " aggregations, " << s.state_out.size() << " values kept as client state)\n";
  }
  return 0;
}

}  // namespace drx::tool
