// drx mapreduce run: a whole MapReduce plan over files, through the one driver
// (drx/export/mapreduce_driver.h) with the clients' work on their own files.
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>

#include "drx/data/client_files.h"
#include "drx/data/npy.h"
#include "drx/export/mapreduce_driver.h"
#include "drx/export/mapreduce_plan.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace drx::tool {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOp = "mapreduce run";

struct RunFlags {
  std::optional<std::string> plan, clients, server, out, client_outputs;
};

RunFlags parse_flags(const Args& args) {
  RunFlags f;
  const std::vector<std::pair<std::string, std::optional<std::string>*>> flags = {
      {"--clients", &f.clients},
      {"--server", &f.server},
      {"--out", &f.out},
      {"--client-outputs", &f.client_outputs}};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool matched = false;
    for (const auto& [name, into] : flags) {
      std::optional<std::string> value;
      if (a == name) {
        if (i + 1 == args.size())
          throw UsageError(std::string(kOp) + ": " + name + " needs a value, a folder");
        value = args[++i];
      } else if (a.starts_with(name + "=")) {
        value = a.substr(name.size() + 1);
      } else {
        continue;
      }
      if (*into) throw UsageError(std::string(kOp) + ": " + name + " is given twice");
      *into = value;
      matched = true;
      break;
    }
    if (matched) continue;
    if (a.starts_with("-")) throw UsageError(std::string(kOp) + ": unknown flag '" + a + "'");
    if (f.plan)
      throw UsageError(std::string(kOp) + ": one PLAN.json expected, got '" + *f.plan + "' and '" +
                       a + "'");
    f.plan = a;
  }
  if (!f.plan || !f.clients || !f.server || !f.out)
    throw UsageError(std::string(kOp) +
                     ": needs PLAN.json --clients DIR --server DIR --out DIR (missing " +
                     (!f.plan      ? "PLAN.json"
                      : !f.clients ? "--clients"
                      : !f.server  ? "--server"
                                   : "--out") +
                     ")");
  for (const auto& [name, dir] : {std::pair{"--clients", f.clients}, {"--server", f.server}})
    if (std::error_code ec; !fs::is_directory(*dir, ec))
      throw UsageError(std::string(kOp) + ": " + name + " '" + *dir + "' is not a folder");
  for (const auto& [name, dir] :
       {std::pair{"--out", f.out}, {"--client-outputs", f.client_outputs}})
    if (std::error_code ec; dir && fs::exists(*dir, ec) && !fs::is_directory(*dir, ec))
      throw UsageError(std::string(kOp) + ": " + name + " '" + *dir +
                       "' is a file, expected a folder");
  return f;
}

int run(const Args& args, std::ostream& out, std::ostream& err) {
  const RunFlags f = parse_flags(args);
  const MapReduceForm form = read_mapreduce_plan(*f.plan, kOp);
  std::map<std::string, Array> server;
  for (const std::string& name : server_input_names(form))
    server[name] =
        data::load_value(data::value_file(*f.server, name), form.types.at(name), name, kOp);
  data::FileClientExecutor clients(form, *f.clients, err, f.client_outputs.value_or(""), kOp);
  const std::vector<Array> outputs =
      run_mapreduce(form, server, clients, {.clients_per_call = 0, .op = kOp});
  // Written once the whole plan ran: a failure part-way leaves --out as it was.
  for (size_t k = 0; k < outputs.size(); ++k) {
    const fs::path file = data::value_file(*f.out, form.outputs[k]);
    fs::create_directories(file.parent_path());
    save_npy(file.string(), outputs[k]);
  }
  out << "ran " << form.stages.size() << " stage" << (form.stages.size() == 1 ? "" : "s")
      << " over " << form.clients << " client" << (form.clients == 1 ? "" : "s") << "; wrote "
      << outputs.size() << " output" << (outputs.size() == 1 ? "" : "s") << " in " << *f.out
      << "\n";
  return 0;
}

}  // namespace

int mapreduce_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.empty())
    throw UsageError(
        "mapreduce: needs a subcommand: run PLAN.json --clients DIR --server DIR "
        "--out DIR");
  if (args[0] != "run")
    throw UsageError("mapreduce: unknown subcommand '" + args[0] + "' (the one subcommand is run)");
  return run(Args(args.begin() + 1, args.end()), out, err);
}

}  // namespace drx::tool
