// drx split and drx aggregate: a program's MapReduce form on disk, and the
// fold of the clients' outputs of one stage.
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>

#include "drx/drx.h"
#include "drx/export/mapreduce_form.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/commands/mapreduce_plan.h"
#include "tools/commands/program_files.h"

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

// "--name VALUE" or "--name=VALUE" at args[i].
std::optional<std::string> flag_value(const Args& args, size_t& i, const std::string& name,
                                      const char* cmd) {
  const std::string& a = args[i];
  if (a == name) {
    if (i + 1 == args.size()) throw UsageError(std::string(cmd) + ": " + name + " needs a value");
    return args[++i];
  }
  if (a.starts_with(name + "=")) return a.substr(name.size() + 1);
  return std::nullopt;
}

}  // namespace

int split_command(const Args& args, std::ostream& out, std::ostream&) {
  std::optional<std::string> file, dir, format;
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto v = flag_value(args, i, "--out", "split")) {
      dir = v;
    } else if (auto f = flag_value(args, i, "--format", "split")) {
      format = f;
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
  const MapReduceForm form = mapreduce_form(p);
  write_mapreduce_plan(form, *dir, format && *format == "stablehlo");
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

int aggregate_command(const Args& args, std::ostream& out, std::ostream& err) {
  std::optional<std::string> plan_path, stage_text, clients_dir, out_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto v = flag_value(args, i, "--stage", "aggregate"))
      stage_text = v;
    else if (auto c = flag_value(args, i, "--clients", "aggregate"))
      clients_dir = c;
    else if (auto o = flag_value(args, i, "--out", "aggregate"))
      out_dir = o;
    else if (args[i].starts_with("-"))
      throw UsageError("aggregate: unknown flag '" + args[i] + "'");
    else if (plan_path)
      throw UsageError("aggregate: one plan.json expected");
    else
      plan_path = args[i];
  }
  if (!plan_path || !stage_text || !clients_dir || !out_dir)
    throw UsageError("aggregate: needs PLAN.json --stage S --clients DIR --out DIR");
  const MapReduceForm form = read_mapreduce_plan(*plan_path, "aggregate");
  // Digits only: std::stoul would read "-1" as the largest size_t.
  const std::string stages = "0.." + std::to_string(form.stages.size() - 1);
  size_t stage = 0;
  if (stage_text->empty() || stage_text->size() > 9 ||
      !std::all_of(stage_text->begin(), stage_text->end(),
                   [](unsigned char ch) { return std::isdigit(ch); }))
    throw UsageError("aggregate: --stage '" + *stage_text +
                     "' is not a stage number (the plan's stages are " + stages + ")");
  stage = std::stoul(*stage_text);
  if (stage >= form.stages.size())
    throw UsageError("aggregate: --stage " + *stage_text + " is out of range: the plan has " +
                     std::to_string(form.stages.size()) + " stage" +
                     (form.stages.size() == 1 ? "" : "s") + " (" + stages + ")");
  const Stage& s = form.stages[stage];

  // One folder per client, named by its index; each index once.
  std::map<int64_t, fs::path> folders;
  std::error_code ec;
  if (!fs::is_directory(*clients_dir, ec))
    throw Error("aggregate: --clients '" + *clients_dir + "' is not a folder");
  for (const fs::directory_entry& e : fs::directory_iterator(*clients_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.empty() ||
        !std::all_of(name.begin(), name.end(), [](unsigned char ch) { return std::isdigit(ch); })) {
      // Not silently: a folder meant as a client's but misnamed would otherwise just be missing.
      err << "aggregate: ignoring '" << e.path().string() << "': client folders are named by "
          << "the client's index (0.." << form.clients - 1 << ")\n";
      continue;
    }
    if (name.size() > 18)
      throw Error("aggregate: client folder '" + e.path().string() + "': the plan has clients 0.." +
                  std::to_string(form.clients - 1));
    const int64_t index = std::stoll(name);
    if (index >= form.clients)
      throw Error("aggregate: client folder '" + e.path().string() + "': the plan has clients 0.." +
                  std::to_string(form.clients - 1));
    if (auto [it, fresh] = folders.emplace(index, e.path()); !fresh)
      throw Error("aggregate: client " + std::to_string(index) + " is given twice: '" +
                  it->second.string() + "' and '" + e.path().string() + "'");
  }
  std::vector<StreamingAggregate> folds;
  for (const AggregationSpec& a : s.aggregations)
    folds.emplace_back(a, form.types.at(a.client_value),
                       a.weight.empty() ? Type() : form.types.at(a.weight));
  for (int64_t i = 0; i < form.clients; ++i) {
    auto it = folders.find(i);
    if (it == folders.end())
      throw Error("aggregate: client " + std::to_string(i) + " has no folder '" +
                  (fs::path(*clients_dir) / std::to_string(i)).string() + "'");
    // Loads one client value, checked against the plan's type.
    auto load = [&](const std::string& name) {
      const fs::path file = it->second / (name + ".npy");
      if (!fs::exists(file))
        throw Error("aggregate: client " + std::to_string(i) + ": missing '" + file.string() + "'");
      Array a;
      try {
        a = load_npy(file.string());
      } catch (const Error& e) {
        throw Error("aggregate: client " + std::to_string(i) + ": " + e.what());
      }
      const Type& want = form.types.at(name);
      if (a.dtype() != want.dtype || a.shape() != want.shape)
        throw Error("aggregate: client " + std::to_string(i) + ": '" + file.string() + "' holds " +
                    std::string(dtype_name(a.dtype())) + shape_str(a.shape()) + ", expected " +
                    want.str() + " (" + name + ")");
      return a;
    };
    for (size_t k = 0; k < folds.size(); ++k) {
      const AggregationSpec& a = s.aggregations[k];
      const Array value = load(a.client_value);
      if (a.weight.empty()) {
        folds[k].add(value);
      } else {
        const Array w = load(a.weight);
        folds[k].add(value, &w);
      }
    }
  }
  // Everything is folded before anything is written.
  std::vector<Array> results;
  for (const StreamingAggregate& f : folds) results.push_back(f.finish());
  fs::create_directories(*out_dir);
  for (size_t k = 0; k < results.size(); ++k)
    save_npy((fs::path(*out_dir) / (s.aggregations[k].server_value + ".npy")).string(), results[k]);
  out << "aggregated " << form.clients << " clients into " << results.size() << " value"
      << (results.size() == 1 ? "" : "s") << " in " << *out_dir << "\n";
  return 0;
}

}  // namespace drx::tool
