// drx aggregate: the fold of the clients' outputs of one stage of a split
// program, read from files.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <ostream>

#include "drx/data/client_files.h"
#include "drx/drx.h"
#include "drx/export/mapreduce_driver.h"
#include "drx/export/mapreduce_plan.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/flags.h"

namespace drx::tool {
namespace {

namespace fs = std::filesystem;

}  // namespace

int aggregate_command(const Args& args, std::ostream& out, std::ostream& err) {
  std::optional<std::string> plan_path, stage_text, clients_dir, out_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (flags::take_value("aggregate", args, i, "--stage", stage_text) ||
        flags::take_value("aggregate", args, i, "--clients", clients_dir) ||
        flags::take_value("aggregate", args, i, "--out", out_dir))
      continue;
    if (args[i].starts_with("-"))
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

  const std::vector<std::string> folders =
      data::client_folders(*clients_dir, form.clients, "aggregate", err);
  StageAggregator folds(form, stage);
  for (int64_t i = 0; i < form.clients; ++i) {
    std::vector<Array> values;
    for (const std::string& name : folds.reads())
      values.push_back(
          data::load_client_value(data::value_file(folders[static_cast<size_t>(i)], name),
                                  form.types.at(name), name, i, "aggregate"));
    folds.add(i, values);
  }
  // Everything is folded before anything is written.
  const std::vector<Array> results = folds.finish();
  fs::create_directories(*out_dir);
  for (size_t k = 0; k < results.size(); ++k) {
    const fs::path file = data::value_file(*out_dir, s.aggregations[k].server_value);
    fs::create_directories(file.parent_path());
    save_npy(file.string(), results[k]);
  }
  out << "aggregated " << form.clients << " clients into " << results.size() << " value"
      << (results.size() == 1 ? "" : "s") << " in " << *out_dir << "\n";
  return 0;
}

}  // namespace drx::tool
