// IDX files through zlib's gz* interface, which also reads uncompressed files unchanged.
#include "drx/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace drx::data {
namespace {

constexpr uint32_t kLabelMagic = 0x00000801;  // u8, 1 dimension
constexpr uint32_t kImageMagic = 0x00000803;  // u8, 3 dimensions
// Far above any real IDX file; keeps a corrupt header from asking for terabytes.
constexpr uint64_t kMaxPayload = uint64_t{1} << 34;

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) fail(errno ? std::string("cannot open: ") + std::strerror(errno) : "cannot open");
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() {
    if (file_) gzclose(file_);
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("reading IDX file '" + path_ + "': " + what);
  }

  // Reads up to n bytes into out; returns how many were read (fewer only at end of data).
  // A corrupt stream, including a bad CRC or length in the gzip trailer, throws.
  uint64_t read(void* out, uint64_t n) {
    auto* p = static_cast<unsigned char*>(out);
    uint64_t done = 0;
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
      int got = gzread(file_, p + done, chunk);
      if (got < 0) stream_error();
      if (got == 0) {
        // gzread reports a stream cut short as end of data plus an error state.
        stream_error_if_any();
        break;
      }
      done += static_cast<uint64_t>(got);
    }
    return done;
  }

  uint32_t read_be32(const char* field) {
    unsigned char b[4];
    uint64_t got = read(b, 4);
    if (got != 4) fail("truncated header: file ends inside the " + std::string(field) + " field");
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  // The payload of `n` bytes that the header promises, and nothing after it.
  std::vector<uint8_t> read_payload(uint64_t n, const std::string& what) {
    if (n > kMaxPayload)
      fail("header claims " + std::to_string(n) + " bytes of " + what + ", more than any IDX file");
    // Grow as data arrives rather than trusting the header with one big allocation.
    std::vector<uint8_t> bytes;
    bytes.reserve(std::min<uint64_t>(n, uint64_t{1} << 26));
    constexpr uint64_t kChunk = uint64_t{1} << 20;
    while (bytes.size() < n) {
      uint64_t want = std::min<uint64_t>(kChunk, n - bytes.size());
      size_t old = bytes.size();
      bytes.resize(old + want);
      uint64_t got = read(bytes.data() + old, want);
      bytes.resize(old + got);
      if (got < want)
        fail("truncated: the header promises " + std::to_string(n) + " bytes of " + what +
             " but the file holds only " + std::to_string(bytes.size()));
    }
    unsigned char extra;
    if (read(&extra, 1) != 0)
      fail("trailing data after the " + std::to_string(n) + " bytes of " + what +
           " the header promises");
    return bytes;
  }

 private:
  [[noreturn]] void stream_error() {
    int code = 0;
    const char* msg = gzerror(file_, &code);
    fail(std::string("corrupt or truncated gzip stream: ") + (msg && *msg ? msg : "read error"));
  }
  void stream_error_if_any() {
    int code = 0;
    gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) stream_error();
  }

  std::string path_;
  gzFile file_ = nullptr;
};

void check_magic(GzFile& f, uint32_t expected, const char* kind) {
  uint32_t magic = f.read_be32("magic number");
  if (magic != expected)
    f.fail("bad magic number " + hex(magic) + ", expected " + hex(expected) + " (" + kind + ")");
}

}  // namespace

Array read_idx_images(const std::string& path) {
  GzFile f(path);
  check_magic(f, kImageMagic, "u8 images, 3 dimensions");
  uint64_t n = f.read_be32("image count");
  uint64_t rows = f.read_be32("row count");
  uint64_t cols = f.read_be32("column count");
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536)
    f.fail("implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));
  if (n > kMaxPayload / (rows * cols))
    f.fail("header claims " + std::to_string(n) + " images of " + std::to_string(rows) + "x" +
           std::to_string(cols) + ", more than any IDX file");
  std::vector<uint8_t> bytes = f.read_payload(n * rows * cols, "pixels");
  Array out(f32, {static_cast<int64_t>(n), static_cast<int64_t>(rows * cols)});
  float* p = out.data<float>();
  for (size_t i = 0; i < bytes.size(); ++i) p[i] = static_cast<float>(bytes[i]) / 255.0f;
  return out;
}

Array read_idx_labels(const std::string& path) {
  GzFile f(path);
  check_magic(f, kLabelMagic, "u8 labels, 1 dimension");
  uint64_t n = f.read_be32("label count");
  std::vector<uint8_t> bytes = f.read_payload(n, "labels");
  Array out(i32, {static_cast<int64_t>(n)});
  int32_t* p = out.data<int32_t>();
  for (size_t i = 0; i < bytes.size(); ++i) p[i] = bytes[i];
  return out;
}

Dataset load_fashion_mnist(Split split, const std::string& dir) {
  std::string prefix = dir + "/" + (split == Split::train ? "train" : "t10k");
  std::string images_path = prefix + "-images-idx3-ubyte.gz";
  std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  Dataset d{read_idx_images(images_path), read_idx_labels(labels_path)};
  if (d.images.shape()[1] != 28 * 28)
    throw Error("reading IDX file '" + images_path + "': Fashion-MNIST images are 28x28, got " +
                std::to_string(d.images.shape()[1]) + " pixels per image");
  if (d.images.shape()[0] != d.labels.shape()[0])
    throw Error("Fashion-MNIST in '" + dir + "': " + images_path + " holds " +
                std::to_string(d.images.shape()[0]) + " images but " + labels_path + " holds " +
                std::to_string(d.labels.shape()[0]) + " labels");
  const int32_t* y = d.labels.data<int32_t>();
  for (int64_t i = 0; i < d.labels.size(); ++i)
    if (y[i] < 0 || y[i] >= kFashionMnistClasses)
      throw Error("reading IDX file '" + labels_path + "': label " + std::to_string(y[i]) +
                  " at index " + std::to_string(i) + " is outside [0, " +
                  std::to_string(kFashionMnistClasses) + ")");
  return d;
}

}  // namespace drx::data
