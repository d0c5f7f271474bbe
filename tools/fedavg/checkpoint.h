#pragma once
// What `drx fedavg` and `drx lm` do with checkpoints beyond the format: whether a run resumes
// one (--resume, --overwrite). The format itself is drx::data's (drx/data/checkpoint.h); its
// names are repeated here so that the tools' code reads as before.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/data/checkpoint.h"
#include "tools/fedavg/metrics.h"

namespace drx::tool::fedavg {

using data::check_same_config;
using data::Checkpoint;
using data::decode_checkpoint;
using data::encode_checkpoint;
using data::kCheckpointMagic;
using data::kCheckpointVersion;
using data::read_checkpoint;
using data::write_checkpoint;

// The tools' checkpoints have always been written under the name of `drx fedavg`.
inline void write_checkpoint(const std::string& path, const Checkpoint& c) {
  data::write_checkpoint(path, c, "fedavg");
}

// What a run of `command` starts from: with --resume (`resume`) the checkpoint at `path`, its
// configuration checked against `fields` (check_same_config); without, nothing, after refusing to
// replace an earlier run's checkpoint unless `overwrite`. Throws drx::Error naming the way out.
std::optional<Checkpoint> checkpoint_to_resume(
    const std::string& command, bool resume, bool overwrite, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace drx::tool::fedavg
