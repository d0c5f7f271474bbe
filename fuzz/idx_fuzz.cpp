// libFuzzer target: arbitrary bytes as an IDX dataset file, read both as images and as labels.
// The loaders take a path and go through zlib's gz* layer, which passes plain files through,
// so one file exercises both the gzip and the uncompressed paths. A corrupt file must give a
// drx::Error, and a header must never make the loader allocate what the file cannot hold.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "drx/data/idx.h"
#include "drx/drx.h"

namespace {

// One file per process: libFuzzer's -jobs/-workers run several processes side by side.
// Removed at a normal exit; after a crash it holds the crashing input, which is harmless. The
// string is never destroyed because the atexit handler runs after static destructors.
const std::string& temp_path() {
  static const std::string* const path = [] {
    auto* p = new std::string("/tmp/drx_idx_fuzz_" + std::to_string(getpid()) + ".idx");
    std::atexit([] { std::remove(temp_path().c_str()); });
    return p;
  }();
  return *path;
}

void write_file(const uint8_t* data, size_t size) {
  // A fresh file each time, not one truncated and rewritten: on ext4 that pattern makes
  // close() start writeback (auto_da_alloc), which cost about 2 ms per execution.
  std::remove(temp_path().c_str());
  FILE* f = std::fopen(temp_path().c_str(), "wb");
  if (!f) __builtin_trap();  // the harness, not the loader, is broken
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_file(data, size);
  try {
    drx::Array images = drx::data::read_idx_images(temp_path());
    // Documented result: f32[N, rows*cols] with every value byte/255 in [0, 1].
    if (images.ndim() != 2 || images.dtype() != drx::DType::f32) __builtin_trap();
    for (int64_t i = 0; i < images.size(); ++i) {
      float v = images.data<float>()[i];
      if (!(v >= 0.0f && v <= 1.0f)) __builtin_trap();
    }
  } catch (const drx::Error&) {
  }
  try {
    drx::Array labels = drx::data::read_idx_labels(temp_path());
    if (labels.ndim() != 1 || labels.dtype() != drx::DType::i32) __builtin_trap();
  } catch (const drx::Error&) {
  }
  return 0;
}
