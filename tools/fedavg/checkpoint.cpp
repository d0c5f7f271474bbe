#include "tools/fedavg/checkpoint.h"

#include <filesystem>

#include "drx/array/error.h"

namespace drx::tool::fedavg {

std::optional<Checkpoint> checkpoint_to_resume(
    const std::string& command, bool resume, bool overwrite, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!resume) {
    // An earlier run's results are not replaced by accident.
    if (!overwrite && std::filesystem::exists(path))
      throw Error(command + ": '" + path +
                  "' holds the checkpoint of an earlier run; pass --resume to continue it, "
                  "--overwrite to start over, or choose another --out");
    return std::nullopt;
  }
  if (!std::filesystem::exists(path))
    throw Error("--resume: no checkpoint '" + path + "' to resume from");
  Checkpoint c = read_checkpoint(path);
  check_same_config(c.config, fields, path);
  return c;
}

}  // namespace drx::tool::fedavg
