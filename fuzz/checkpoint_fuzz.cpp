// libFuzzer target: arbitrary bytes as a checkpoint file (drx/data/checkpoint.h). `--resume` reads
// whatever is on disk, so a damaged or hostile file must give a drx::Error, never a crash or
// an out-of-bounds read. What decodes must survive encode/decode unchanged.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "drx/data/checkpoint.h"
#include "drx/drx.h"

namespace {

namespace dd = drx::data;

void decode_and_round_trip(const std::string& bytes) {
  dd::Checkpoint c;
  try {
    c = dd::decode_checkpoint(bytes, "fuzz");
  } catch (const drx::Error&) {
    return;
  }
  // encode(decode(x)) need not equal x byte for byte, but one more round trip must be exact.
  const std::string once = dd::encode_checkpoint(c);
  const dd::Checkpoint again = dd::decode_checkpoint(once, "fuzz re-encoded");
  if (again.round != c.round || again.config != c.config ||
      again.history.size() != c.history.size())
    __builtin_trap();
  if (dd::encode_checkpoint(again) != once) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  decode_and_round_trip(bytes);  // as given: almost always stops at the CRC check
  // A mutation almost never keeps the trailing CRC-32 valid, which would leave everything
  // behind the check unfuzzed. So also decode the bytes with their CRC made to match.
  if (size >= 4) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size - 4)));
    std::memcpy(bytes.data() + size - 4, &crc, 4);  // little-endian, as checkpoint.h says
    decode_and_round_trip(bytes);
  }
  return 0;
}
