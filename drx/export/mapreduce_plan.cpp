#include "drx/export/mapreduce_plan.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "drx/array/dtype.h"
#include "drx/array/error.h"
#include "drx/core/program_text.h"
#include "drx/export/stablehlo.h"

namespace drx {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Plans before schemas had only this "format"; they are schema 1.
const char* const kLegacyFormat = "drx-mapreduce-plan-1";
const char* const kFormat = "drx-mapreduce-plan";
const char* const kParts[] = {"server_prepare", "client_work", "server_update"};

std::string part_file(size_t stage, const char* part) {
  return "stage" + std::to_string(stage) + "." + part;
}

json type_json(const Type& t) {
  return {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}};
}

Type type_from(const json& j) {
  return Type(dtype_from_name(j.at("dtype").get<std::string>()), j.at("shape").get<Shape>());
}

// Written beside the target and renamed over it, so that a reader (a batch
// job polling the folder) sees the old file or the whole new one. drx/data's
// atomic write is a layer above this one.
void write_text(const fs::path& path, const std::string& text, const std::string& op) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(op + ": cannot write '" + path.string() + "'");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(op + ": cannot write '" + path.string() + "': " + ec.message());
  }
}

std::string read_text(const fs::path& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open '" + path.string() + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(where + ": cannot read '" + path.string() + "'");
  return ss.str();
}

Program load_part(const fs::path& file, const std::string& where) {
  const std::string text = read_text(file, where);
  try {
    Program p = parse_program(text);
    verify(p);
    return p;
  } catch (const Error& e) {
    throw Error(where + ": part '" + file.string() + "': " + e.what());
  }
}

std::string lines(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += n + "\n";
  return s;
}

const Part& part_of(const Stage& s, size_t k) {
  return k == 0 ? s.server_prepare : k == 1 ? s.client_work : s.server_update;
}
Part& part_of(Stage& s, size_t k) {
  return k == 0 ? s.server_prepare : k == 1 ? s.client_work : s.server_update;
}

// 1 for a plan written before schemas; drx::Error for anything else unknown.
int schema_of(const json& plan, const std::string& where) {
  const std::string format = plan.value("format", std::string("missing"));
  if (format != kFormat && format != kLegacyFormat)
    throw Error(where + ": not a MapReduce plan (format " + format + ", expected " + kFormat + ")");
  if (!plan.contains("schema")) return 1;
  const json& s = plan.at("schema");
  if (!s.is_number_integer() || s.get<int64_t>() < 1 || s.get<int64_t>() > kMapReducePlanSchema)
    throw Error(where + ": plan schema " + s.dump() +
                " is not supported (this drx reads schemas 1 to " +
                std::to_string(kMapReducePlanSchema) + "; a newer drx wrote it?)");
  return s.get<int>();
}

}  // namespace

void write_mapreduce_plan(const MapReduceForm& form, const std::string& dir,
                          const MapReducePlanOptions& options) {
  const std::string& op = options.op;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(op + ": cannot create the plan folder '" + dir + "': " + ec.message());
  json plan;
  plan["format"] = kFormat;
  plan["schema"] = kMapReducePlanSchema;
  plan["placement"] = form.placement;
  plan["clients"] = form.clients;
  plan["inputs"] = form.inputs;
  plan["outputs"] = form.outputs;
  json data = json::object();
  for (const auto& [name, k] : form.client_data) data[name] = k;
  plan["client_data_inputs"] = data;
  json types = json::object();
  for (const auto& [name, t] : form.types) types[name] = type_json(t);
  plan["types"] = types;
  plan["stages"] = json::array();
  for (size_t i = 0; i < form.stages.size(); ++i) {
    const Stage& s = form.stages[i];
    json stage;
    for (size_t k = 0; k < 3; ++k) {
      const Part& part = part_of(s, k);
      const std::string base = part_file(i, kParts[k]);
      write_text(fs::path(dir) / (base + ".drx"), to_string(part.program), op);
      write_text(fs::path(dir) / (base + ".inputs"), lines(part.inputs), op);
      write_text(fs::path(dir) / (base + ".outputs"), lines(part.outputs), op);
      stage[kParts[k]] = {
          {"file", base + ".drx"}, {"inputs", part.inputs}, {"outputs", part.outputs}};
    }
    if (options.stablehlo) {
      write_text(fs::path(dir) / (part_file(i, "client_work") + ".mlir"),
                 to_stablehlo(s.client_work.program), op);
      stage["client_work"]["stablehlo_file"] = part_file(i, "client_work") + ".mlir";
    }
    stage["broadcast"] = s.broadcast;
    stage["client_data"] = s.client_data;
    stage["state_in"] = s.state_in;
    stage["state_out"] = s.state_out;
    stage["aggregations"] = json::array();
    for (const AggregationSpec& a : s.aggregations)
      stage["aggregations"].push_back({{"client_value", a.client_value},
                                       {"kind", aggregation_name(a.kind)},
                                       {"weight", a.weight},
                                       {"server_value", a.server_value}});
    plan["stages"].push_back(stage);
  }
  write_text(fs::path(dir) / "plan.json", plan.dump(2) + "\n", op);
}

MapReduceForm read_mapreduce_plan(const std::string& plan_path, const std::string& op) {
  const std::string where = op + ": '" + plan_path + "'";
  json plan;
  try {
    plan = json::parse(read_text(plan_path, op));
  } catch (const json::exception& e) {
    throw Error(where + ": not a JSON plan: " + e.what());
  }
  try {
    schema_of(plan, where);  // schemas 1 and 2 differ only in the names they allow
    MapReduceForm form;
    form.placement = plan.at("placement").get<std::string>();
    form.clients = plan.at("clients").get<int64_t>();
    if (form.clients < 1)
      throw Error(where + ": clients is " + std::to_string(form.clients) + ", expected at least 1");
    form.inputs = plan.at("inputs").get<std::vector<std::string>>();
    form.outputs = plan.at("outputs").get<std::vector<std::string>>();
    for (const auto& [name, k] : plan.at("client_data_inputs").items())
      form.client_data[name] = k.get<size_t>();
    for (const auto& [name, t] : plan.at("types").items()) form.types[name] = type_from(t);
    const fs::path dir = fs::path(plan_path).parent_path();
    for (const json& sj : plan.at("stages")) {
      Stage s;
      for (size_t k = 0; k < 3; ++k) {
        const json& pj = sj.at(kParts[k]);
        Part& part = part_of(s, k);
        const fs::path file = dir / pj.at("file").get<std::string>();
        if (std::error_code ec; !fs::exists(file, ec))
          throw Error(where + ": its part '" + file.string() +
                      "' is missing: parts are read from the plan's own folder '" +
                      (dir.empty() ? std::string(".") : dir.string()) +
                      "', so keep plan.json beside the files drx split wrote");
        part.program = load_part(file, where);
        part.inputs = pj.at("inputs").get<std::vector<std::string>>();
        part.outputs = pj.at("outputs").get<std::vector<std::string>>();
        if (part.inputs.size() != part.program.inputs.size() ||
            part.outputs.size() != part.program.outputs.size())
          throw Error(where + ": " + kParts[k] + " names " + std::to_string(part.inputs.size()) +
                      " inputs and " + std::to_string(part.outputs.size()) +
                      " outputs, but its program has " +
                      std::to_string(part.program.inputs.size()) + " and " +
                      std::to_string(part.program.outputs.size()));
      }
      s.broadcast = sj.at("broadcast").get<std::vector<std::string>>();
      s.client_data = sj.at("client_data").get<std::vector<std::string>>();
      s.state_in = sj.at("state_in").get<std::vector<std::string>>();
      s.state_out = sj.at("state_out").get<std::vector<std::string>>();
      for (const json& aj : sj.at("aggregations")) {
        AggregationSpec a{aj.at("client_value").get<std::string>(),
                          aggregation_from_name(aj.at("kind").get<std::string>()),
                          aj.value("weight", std::string()),
                          aj.at("server_value").get<std::string>()};
        for (const std::string* name : {&a.client_value, &a.server_value})
          if (!form.types.count(*name)) throw Error(where + ": no type for '" + *name + "'");
        if (!a.weight.empty() && !form.types.count(a.weight))
          throw Error(where + ": no type for '" + a.weight + "'");
        s.aggregations.push_back(a);
      }
      form.stages.push_back(std::move(s));
    }
    return form;
  } catch (const json::exception& e) {
    throw Error(where + ": malformed plan: " + e.what());
  }
}

}  // namespace drx
