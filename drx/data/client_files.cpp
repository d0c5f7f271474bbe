#include "drx/data/client_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <ostream>

#include "drx/array/error.h"
#include "drx/data/npy.h"

namespace drx::data {

namespace {

namespace fs = std::filesystem;

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

std::string type_of(const Array& a) {
  return std::string(dtype_name(a.dtype())) + shape_str(a.shape());
}

}  // namespace

std::vector<std::string> client_folders(const std::string& dir, int64_t clients,
                                        const std::string& op, std::ostream& warn) {
  const std::string range = "0.." + std::to_string(clients - 1);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(op + ": --clients '" + dir + "' is not a folder");
  std::map<int64_t, fs::path> folders;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !all_digits(name)) {
      warn << op << ": ignoring '" << e.path().string() << "': client folders are named by "
           << "the client's index (" << range << ")\n";
      continue;
    }
    if (name.size() > 18 || std::stoll(name) >= clients)
      throw Error(op + ": client folder '" + e.path().string() + "': the plan has clients " +
                  range);
    const int64_t index = std::stoll(name);
    if (auto [it, fresh] = folders.emplace(index, e.path()); !fresh)
      throw Error(op + ": client " + std::to_string(index) + " is given twice: '" +
                  it->second.string() + "' and '" + e.path().string() + "'");
  }
  std::vector<std::string> out;
  for (int64_t i = 0; i < clients; ++i) {
    auto it = folders.find(i);
    if (it == folders.end())
      throw Error(op + ": client " + std::to_string(i) + " has no folder '" +
                  (fs::path(dir) / std::to_string(i)).string() + "'");
    out.push_back(it->second.string());
  }
  return out;
}

std::string value_file(const std::string& folder, const std::string& name) {
  return (fs::path(folder) / (name + ".npy")).string();
}

Array load_client_value(const std::string& file, const Type& type, const std::string& name,
                        int64_t client, const std::string& op) {
  const std::string who = op + ": client " + std::to_string(client) + ": ";
  if (std::error_code ec; !fs::exists(file, ec)) throw Error(who + "missing '" + file + "'");
  Array a;
  try {
    a = load_npy(file);
  } catch (const Error& e) {
    throw Error(who + e.what());
  }
  if (a.dtype() != type.dtype || a.shape() != type.shape)
    throw Error(who + "'" + file + "' holds " + type_of(a) + ", expected " + type.str() + " (" +
                name + ")");
  return a;
}

Array load_value(const std::string& file, const Type& type, const std::string& name,
                 const std::string& op) {
  if (std::error_code ec; !fs::exists(file, ec))
    throw Error(op + ": missing '" + file + "' (" + name + ", expected " + type.str() + ")");
  Array a;
  try {
    a = load_npy(file);
  } catch (const Error& e) {
    throw Error(op + ": " + e.what());
  }
  if (a.dtype() != type.dtype || a.shape() != type.shape)
    throw Error(op + ": '" + file + "' holds " + type_of(a) + ", expected " + type.str() + " (" +
                name + ")");
  return a;
}

FileClientExecutor::FileClientExecutor(const MapReduceForm& form, const std::string& clients_dir,
                                       std::ostream& warn, std::string outputs_dir, std::string op)
    : folders_(client_folders(clients_dir, form.clients, op, warn)),
      outputs_dir_(std::move(outputs_dir)),
      op_(std::move(op)) {
  // Every client's data are there before any client runs, so a missing file is found at once,
  // not after hours of its predecessors' work.
  for (size_t i = 0; i < folders_.size(); ++i)
    for (const auto& [name, k] : form.client_data)
      if (std::error_code ec; !fs::exists(value_file(folders_[i], name), ec))
        throw Error(op_ + ": client " + std::to_string(i) + ": missing '" +
                    value_file(folders_[i], name) + "' (" + name + ", expected " +
                    form.types.at(name).str() + ")");
}

Array FileClientExecutor::client_data(const ClientStage& stage, int64_t client,
                                      const std::string& name) {
  return load_client_value(value_file(folders_.at(static_cast<size_t>(client)), name),
                           stage.form.types.at(name), name, client, op_);
}

void FileClientExecutor::finished(const ClientStage& stage, int64_t client,
                                  const std::vector<Array>& outputs) {
  if (outputs_dir_.empty()) return;
  const fs::path dir =
      fs::path(outputs_dir_) / ("stage" + std::to_string(stage.index)) / std::to_string(client);
  const std::vector<std::string>& names = stage.stage().client_work.outputs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const fs::path file = value_file(dir.string(), names[k]);
    fs::create_directories(file.parent_path());
    save_npy(file.string(), outputs[k]);
  }
}

}  // namespace drx::data
