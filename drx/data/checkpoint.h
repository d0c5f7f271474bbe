#pragma once
// Checkpoints of a training run (drx fedavg, drx lm): the configuration it was started with,
// the rounds completed, the model parameters and the optimiser state (Trees of Arrays) and
// the record of every round so far. A run resumed from its checkpoint continues exactly.
//
// Format version 1 (kCheckpointVersion), little-endian; strings and byte blocks are a u64
// length then the bytes:
//   "DRXFEDCK" (8 bytes, kCheckpointMagic), u32 version = 1,
//   u64 field count, then per field: string flag, string value   (the run's configuration),
//   i64 rounds completed,
//   tree params, tree optimiser state,
//   u64 row count, then per row: i64 round, f64 train_loss, f64 test_loss,
//                                f64 test_accuracy, f64 elapsed_s,
//   u32 CRC-32 (zlib's crc32) of every byte before it.
// A tree is a tag byte then: 0 array: u8 dtype (drx::DType's value), u32 rank, i64 dims...,
// its raw bytes in row-major order; 1 list: u64 count, trees; 2 dict: u64 count,
// (string key, tree)...
// Any change to these bytes takes a new version number; a reader refuses versions it does not
// know rather than guess (tests/fixtures/checkpoint_v1.bin pins version 1).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "drx/data/round_record.h"
#include "drx/trace/tree.h"

namespace drx::data {

inline constexpr char kCheckpointMagic[] = "DRXFEDCK";
inline constexpr uint32_t kCheckpointVersion = 1;

// (flag, value) pairs in the order the run lists them.
using ConfigFields = std::vector<std::pair<std::string, std::string>>;

struct Checkpoint {
  ConfigFields config;
  int64_t round = 0;                 // rounds completed
  Tree params;                       // Tree of Arrays
  Tree state;                        // Tree of Arrays
  std::vector<RoundRecord> history;  // epsilon is not stored: decoded records have NaN
};

// Throws drx::Error if a tree holds a traced Value rather than Arrays.
std::string encode_checkpoint(const Checkpoint& c);
// Throws drx::Error naming `source` and the problem for a wrong magic, an unsupported version,
// a CRC mismatch, a truncated file or any inconsistent field; never reads out of bounds.
Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source = "checkpoint");

// Atomic (write_file_atomically); `op`, the command writing, starts any error message.
void write_checkpoint(const std::string& path, const Checkpoint& c, std::string_view op);
Checkpoint read_checkpoint(const std::string& path);

// Throws drx::Error, starting with `source`, naming the first flag whose value differs (or is
// missing on one side): a run resumes only with the configuration it was started with.
void check_same_config(const ConfigFields& saved, const ConfigFields& current,
                       const std::string& source);

}  // namespace drx::data
