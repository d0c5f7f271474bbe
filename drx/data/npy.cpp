// The byte layout of a .npy file around its header dict (drx/data/npy_header.h):
//   "\x93NUMPY", major, minor, header length (u16 LE for 1.0, u32 LE for 2.0/3.0),
//   the header text, then the data in the header's byte order and element order.
#include "drx/data/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "drx/data/atomic_write.h"
#include "drx/data/npy_header.h"

namespace drx {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kPrefixSize = 8;  // magic + major + minor
// np.save aligns the data to 64 bytes so that memory-mapped arrays are aligned.
constexpr size_t kDataAlignment = 64;

std::string escaped(std::string_view bytes) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\')
      out += static_cast<char>(c);
    else
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
  }
  return out;
}

// A reading error: "<op>: '<name>': <what>".
class Reader {
 public:
  Reader(std::string_view op, const std::string& name) : op_(op), name_(name) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(std::string(op_) + ": '" + name_ + "': " + what);
  }

 private:
  std::string_view op_;
  const std::string& name_;
};

// Where a .npy file is read from: a byte string or an open file.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t remaining() const = 0;
  // Reads n <= remaining() bytes.
  virtual void read(void* out, uint64_t n) = 0;
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t remaining() const override { return bytes_.size(); }
  void read(void* out, uint64_t n) override {
    if (n) std::memcpy(out, bytes_.data(), n);
    bytes_.remove_prefix(n);
  }

 private:
  std::string_view bytes_;
};

class FileSource : public ByteSource {
 public:
  FileSource(const std::string& path, const Reader& reader) : reader_(reader) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) reader_.fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      reader_.fail(std::string("cannot stat: ") + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      reader_.fail("not a regular file");
    }
    remaining_ = static_cast<uint64_t>(st.st_size);
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  ~FileSource() override { ::close(fd_); }

  uint64_t remaining() const override { return remaining_; }
  void read(void* out, uint64_t n) override {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      ssize_t got = ::read(fd_, p, chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) reader_.fail(std::string("cannot read: ") + std::strerror(errno));
      if (got == 0) reader_.fail("the file became shorter while it was being read");
      p += got;
      n -= static_cast<uint64_t>(got);
      remaining_ -= static_cast<uint64_t>(got);
    }
  }

 private:
  const Reader& reader_;
  int fd_ = -1;
  uint64_t remaining_ = 0;
};

uint64_t read_little_endian(const unsigned char* b, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | b[i];
  return v;
}

void swap_bytes(void* data, int64_t count, size_t item) {
  auto* p = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i, p += item) std::reverse(p, p + item);
}

// `fortran` holds its elements in column-major order; returns them row-major.
Array from_fortran_order(const Array& fortran) {
  const Shape& shape = fortran.shape();
  Array c(fortran.dtype(), shape);
  const int64_t n = fortran.size();
  if (n == 0) return c;
  const size_t item = dtype_size(fortran.dtype());
  const size_t rank = shape.size();
  // With at most one axis both orders are the same bytes.
  if (rank <= 1) {
    std::memcpy(c.raw(), fortran.raw(), c.nbytes());
    return c;
  }
  Shape column_stride(shape.size()), index(shape.size());
  column_stride[0] = 1;
  for (size_t k = 1; k < rank; ++k) column_stride[k] = column_stride[k - 1] * shape[k - 1];
  const auto* src = static_cast<const unsigned char*>(fortran.raw());
  auto* dst = static_cast<unsigned char*>(c.raw());
  int64_t at = 0;  // column-major offset of `index`
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * item, src + static_cast<size_t>(at) * item, item);
    for (size_t k = rank; k-- > 0;) {  // next row-major index: the last axis moves fastest
      if (++index[k] < shape[k]) {
        at += column_stride[k];
        break;
      }
      at -= (shape[k] - 1) * column_stride[k];
      index[k] = 0;
    }
  }
  return c;
}

std::string shape_words(const Shape& shape) {
  return shape.empty() ? "() (a scalar)" : shape_str(shape);
}

Array decode(ByteSource& src, const Reader& reader) {
  unsigned char prefix[kPrefixSize] = {};
  const size_t have = static_cast<size_t>(std::min<uint64_t>(src.remaining(), kPrefixSize));
  src.read(prefix, have);
  const std::string_view start(reinterpret_cast<const char*>(prefix),
                               std::min(have, kMagic.size()));
  if (have == 0) reader.fail("not a .npy file: it is empty");
  if (start != kMagic.substr(0, start.size()))
    reader.fail(
        "not a .npy file: bad magic string (a .npy file starts with \\x93NUMPY, this one "
        "with '" +
        escaped(start) + "')");
  if (have < kPrefixSize)
    reader.fail("truncated header: the file ends after " + std::to_string(have) +
                " bytes, inside the magic string and format version");

  const int major = prefix[6], minor = prefix[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    reader.fail("format version " + std::to_string(major) + "." + std::to_string(minor) +
                ", which drx does not read (it reads 1.0, 2.0 and 3.0)");
  const size_t length_size = major == 1 ? 2 : 4;
  unsigned char length_bytes[4] = {};
  if (src.remaining() < length_size)
    reader.fail("truncated header: the file ends inside the header length field");
  src.read(length_bytes, length_size);
  const uint64_t header_length = read_little_endian(length_bytes, length_size);
  if (header_length > src.remaining())
    reader.fail("truncated header: the header length field says " + std::to_string(header_length) +
                " bytes, but only " + std::to_string(src.remaining()) + " follow");
  std::string text(static_cast<size_t>(header_length), '\0');
  src.read(text.data(), header_length);

  data::NpyHeader h;
  try {
    h = data::parse_npy_header(text);
  } catch (const Error& e) {
    reader.fail(e.what());
  }

  const uint64_t item = dtype_size(h.dtype);
  // Checked dimension by dimension, so no partial product (which strides would
  // also compute) overflows, even in a shape that holds a 0 further on.
  uint64_t count = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                              static_cast<uint64_t>(d) / item)
      reader.fail("shape " + shape_str(h.shape) +
                  " is too large: its size in bytes overflows "
                  "64 bits");
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t need = count * item;
  const uint64_t left = src.remaining();
  const std::string what = "shape " + shape_words(h.shape) + " of '" +
                           data::npy_descr(h.dtype, h.byte_order) + "' needs " +
                           std::to_string(need) + " data bytes";
  if (left < need)
    reader.fail("truncated data: " + what + ", but the file has only " + std::to_string(left) +
                " after the header");
  if (left > need)
    reader.fail("data size mismatch: " + what + ", but the file has " + std::to_string(left) +
                " after the header (" + std::to_string(left - need) + " too many)");

  Array out(h.dtype, h.shape);
  src.read(out.raw(), need);
  if (item > 1 && h.byte_order != std::endian::native) swap_bytes(out.raw(), out.size(), item);
  if (h.dtype == DType::bool_) {
    // NumPy writes bools as 0 and 1; drx's kernels rely on that.
    auto* b = out.data<uint8_t>();
    for (int64_t i = 0; i < out.size(); ++i) b[i] = b[i] != 0;
  }
  if (h.fortran_order && h.shape.size() > 1) out = from_fortran_order(out);
  return out;
}

// Magic string, version, header length and the padded header text.
std::string header_block(const Array& array) {
  const std::string dict =
      data::format_npy_header({array.dtype(), std::endian::little, false, array.shape()});
  // Spaces and a final newline pad the header so the data starts on an aligned offset.
  auto padded = [&](size_t before) {
    const size_t unpadded = before + dict.size() + 1;
    return dict + std::string((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment, ' ') +
           '\n';
  };
  std::string text = padded(kPrefixSize + 2);
  unsigned char major = 1;
  size_t length_size = 2;
  if (text.size() > std::numeric_limits<uint16_t>::max()) {
    major = 2;  // only the length field differs: 4 bytes
    length_size = 4;
    text = padded(kPrefixSize + 4);
  }
  std::string out(kMagic);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < length_size; ++i)
    out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}

// The array's elements as little-endian bytes: a view of its buffer on a
// little-endian machine, else a swapped copy kept in `swapped`.
std::string_view little_endian_data(const Array& array, std::string& swapped) {
  std::string_view bytes(static_cast<const char*>(array.raw()), array.nbytes());
  const size_t item = dtype_size(array.dtype());
  if constexpr (std::endian::native == std::endian::little) return bytes;
  if (item == 1) return bytes;
  swapped.assign(bytes);
  swap_bytes(swapped.data(), array.size(), item);
  return swapped;
}

}  // namespace

std::string encode_npy(const Array& array) {
  std::string swapped;
  return header_block(array) + std::string(little_endian_data(array, swapped));
}

void save_npy(const std::string& path, const Array& array) {
  const std::string header = header_block(array);
  std::string swapped;
  data::write_file_atomically(path, {header, little_endian_data(array, swapped)}, "save_npy");
}

Array load_npy(const std::string& path) {
  Reader reader("load_npy", path);
  FileSource src(path, reader);
  return decode(src, reader);
}

Array decode_npy(std::string_view bytes, const std::string& source) {
  Reader reader("decode_npy", source);
  MemorySource src(bytes);
  return decode(src, reader);
}

}  // namespace drx
