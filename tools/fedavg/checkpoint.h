#pragma once
// Checkpoints of a FedAvg run's server state.
//
// Binary layout, little-endian (strings and byte blocks are a u64 length then the bytes):
//   "DRXFEDCK" (8 bytes), u32 version (1),
//   u64 field count, then per field: string flag, string value   (the run's configuration),
//   i64 rounds completed,
//   tree params, tree server-optimiser state,
//   u64 row count, then per row: i64 round, f64 train_loss, f64 test_loss,
//                                f64 test_accuracy, f64 elapsed_s,
//   u32 CRC-32 (zlib's crc32) of every byte before it.
// A tree is a tag byte then: 0 array: u8 dtype, u32 rank, i64 dims..., its raw bytes in
// row-major order; 1 list: u64 count, trees; 2 dict: u64 count, (string key, tree)...
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/trace/tree.h"
#include "tools/fedavg/metrics.h"

namespace drx::tool::fedavg {

inline constexpr char kCheckpointMagic[] = "DRXFEDCK";
inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  std::vector<std::pair<std::string, std::string>> config;  // (flag, value) as trajectory_fields
  int64_t round = 0;                                        // rounds completed
  Tree params;                                              // Tree of Arrays
  Tree state;                                               // Tree of Arrays
  std::vector<MetricsRow> history;
};

std::string encode_checkpoint(const Checkpoint& c);
// Throws drx::Error (naming `source` and the problem) for a wrong magic, an unsupported
// version, a CRC mismatch, a truncated file or any inconsistent field; never reads out of
// bounds.
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& source = "checkpoint");

void write_checkpoint(const std::string& path, const Checkpoint& c);  // atomic
Checkpoint read_checkpoint(const std::string& path);

// Throws drx::Error naming the first flag whose value differs (or is missing on one side).
void check_same_config(const std::vector<std::pair<std::string, std::string>>& saved,
                       const std::vector<std::pair<std::string, std::string>>& current,
                       const std::string& source);

// What a run of `command` starts from: with --resume (`resume`) the checkpoint at `path`, its
// configuration checked against `fields` (check_same_config); without, nothing, after refusing to
// replace an earlier run's checkpoint unless `overwrite`. Throws drx::Error naming the way out.
std::optional<Checkpoint> checkpoint_to_resume(
    const std::string& command, bool resume, bool overwrite, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace drx::tool::fedavg
