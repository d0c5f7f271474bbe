#include "drx/data/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>

#include "drx/array/error.h"
#include "drx/data/atomic_write.h"

namespace drx::data {
namespace {

// Array bytes are stored as they sit in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "checkpoints assume a little-endian host");

constexpr size_t kMagicSize = sizeof(kCheckpointMagic) - 1;
constexpr int kMaxDepth = 64;
constexpr uint32_t kMaxRank = 64;

enum Tag : uint8_t { kArray = 0, kList = 1, kDict = 2 };

class Writer {
 public:
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  template <class T>
  void num(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    num<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void tree(const Tree& t) {
    switch (t.kind()) {
      case Tree::Kind::array: {
        const Array& a = t.array();
        num<uint8_t>(kArray);
        num<uint8_t>(static_cast<uint8_t>(a.dtype()));
        num<uint32_t>(static_cast<uint32_t>(a.ndim()));
        for (int64_t d : a.shape()) num<int64_t>(d);
        bytes(a.raw(), a.nbytes());
        return;
      }
      case Tree::Kind::list:
        num<uint8_t>(kList);
        num<uint64_t>(t.size());
        for (const Tree& c : t.children()) tree(c);
        return;
      case Tree::Kind::dict:
        num<uint8_t>(kDict);
        num<uint64_t>(t.size());
        for (size_t i = 0; i < t.size(); ++i) {
          str(t.keys()[i]);
          tree(t.children()[i]);
        }
        return;
      case Tree::Kind::value:
        break;
    }
    throw Error("checkpoint: cannot save a traced Value; expected a Tree of Arrays");
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Every read checks the remaining length first, so a damaged file can only produce an Error.
class Reader {
 public:
  Reader(std::string_view bytes, size_t end, std::string source)
      : data_(bytes.data()), end_(end), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(source_ + ": corrupt checkpoint (" + what + " at byte " + std::to_string(pos_) +
                ")");
  }
  void need(uint64_t n, const char* what) const {
    if (n > end_ - pos_) fail(std::string("truncated ") + what);
  }
  template <class T>
  T num(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str(const char* what) {
    uint64_t n = num<uint64_t>(what);
    need(n, what);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items that each take at least `min_bytes`: bounded by what is left.
  uint64_t count(uint64_t min_bytes, const char* what) {
    uint64_t n = num<uint64_t>(what);
    if (n > (end_ - pos_) / min_bytes) fail(std::string("impossible ") + what);
    return n;
  }
  Tree tree(int depth) {
    if (depth > kMaxDepth) fail("trees nested too deeply");
    uint8_t tag = num<uint8_t>("tree tag");
    if (tag == kArray) {
      uint8_t d = num<uint8_t>("dtype");
      if (d >= std::size(kAllDTypes)) fail("unknown dtype " + std::to_string(d));
      DType dtype = static_cast<DType>(d);
      uint32_t rank = num<uint32_t>("rank");
      if (rank > kMaxRank) fail("rank " + std::to_string(rank) + " too large");
      Shape shape;
      uint64_t elements = 1;
      bool empty = false;
      for (uint32_t i = 0; i < rank; ++i) {
        int64_t dim = num<int64_t>("shape");
        if (dim < 0 || dim > (int64_t{1} << 40))
          fail("dimension " + std::to_string(dim) + " out of range");
        shape.push_back(dim);
        if (dim == 0) empty = true;
        // The whole array must fit in what is left, which also bounds the product.
        if (!empty && static_cast<uint64_t>(dim) > (end_ - pos_) / elements + 1)
          fail("array larger than the file");
        if (!empty) elements *= static_cast<uint64_t>(dim);
      }
      uint64_t nbytes = empty ? 0 : elements * dtype_size(dtype);
      need(nbytes, "array data");
      Array a(dtype, shape);
      if (nbytes) std::memcpy(a.raw(), data_ + pos_, nbytes);
      pos_ += nbytes;
      return Tree(std::move(a));
    }
    if (tag == kList) {
      uint64_t n = count(1, "list length");
      std::vector<Tree> children;
      for (uint64_t i = 0; i < n; ++i) children.push_back(tree(depth + 1));
      return Tree::list(std::move(children));
    }
    if (tag == kDict) {
      uint64_t n = count(9, "dict size");
      std::vector<std::pair<std::string, Tree>> items;
      for (uint64_t i = 0; i < n; ++i) {
        std::string key = str("dict key");
        for (const auto& item : items)
          if (item.first == key) fail("duplicate dict key '" + key + "'");
        items.emplace_back(std::move(key), tree(depth + 1));
      }
      return Tree::dict(std::move(items));
    }
    fail("unknown tree tag " + std::to_string(tag));
  }
  size_t pos() const { return pos_; }

 private:
  const char* data_;
  size_t end_;
  size_t pos_ = 0;
  std::string source_;
};

uint32_t crc_of(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths; feed large buffers in pieces.
  while (n > 0) {
    uInt piece = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), piece);
    data += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
  Writer w;
  w.bytes(kCheckpointMagic, kMagicSize);
  w.num<uint32_t>(kCheckpointVersion);
  w.num<uint64_t>(c.config.size());
  for (const auto& [flag, value] : c.config) {
    w.str(flag);
    w.str(value);
  }
  w.num<int64_t>(c.round);
  w.tree(c.params);
  w.tree(c.state);
  w.num<uint64_t>(c.history.size());
  for (const RoundRecord& r : c.history) {
    w.num<int64_t>(r.round);
    w.num<double>(r.train_loss);
    w.num<double>(r.test_loss);
    w.num<double>(r.test_accuracy);
    w.num<double>(r.elapsed_s);
  }
  uint32_t crc = crc_of(w.out().data(), w.out().size());
  w.num<uint32_t>(crc);
  return std::move(w.out());
}

Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source) {
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kCheckpointMagic, kMagicSize) != 0)
    throw Error(source + ": not a drx checkpoint (wrong magic, expected \"" +
                std::string(kCheckpointMagic) + "\")");
  if (bytes.size() < kMagicSize + 4 + 4)
    throw Error(source + ": corrupt checkpoint (truncated: " + std::to_string(bytes.size()) +
                " bytes)");
  uint32_t version;
  std::memcpy(&version, bytes.data() + kMagicSize, 4);
  if (version != kCheckpointVersion)
    throw Error(source + ": checkpoint version " + std::to_string(version) +
                " is not supported (this drx reads version " + std::to_string(kCheckpointVersion) +
                ")");
  const size_t body = bytes.size() - 4;
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + body, 4);
  if (crc_of(bytes.data(), body) != stored)
    throw Error(source +
                ": corrupt checkpoint (CRC-32 mismatch: the file is truncated or "
                "damaged)");

  Reader r(bytes, body, source);
  r.need(kMagicSize + 4, "header");
  for (size_t i = 0; i < kMagicSize + 4; ++i) r.num<uint8_t>("header");
  Checkpoint c;
  uint64_t fields = r.count(16, "field count");
  for (uint64_t i = 0; i < fields; ++i) {
    std::string flag = r.str("field name");
    c.config.emplace_back(std::move(flag), r.str("field value"));
  }
  c.round = r.num<int64_t>("round");
  if (c.round < 0) r.fail("negative round");
  c.params = r.tree(0);
  c.state = r.tree(0);
  uint64_t rows = r.count(40, "row count");
  for (uint64_t i = 0; i < rows; ++i) {
    RoundRecord m;
    m.round = r.num<int64_t>("metrics");
    m.train_loss = r.num<double>("metrics");
    m.test_loss = r.num<double>("metrics");
    m.test_accuracy = r.num<double>("metrics");
    m.elapsed_s = r.num<double>("metrics");
    c.history.push_back(m);
  }
  if (r.pos() != body) r.fail("trailing bytes");
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c, std::string_view op) {
  const std::string bytes = encode_checkpoint(c);
  write_file_atomically(path, {bytes}, op);
}

Checkpoint read_checkpoint(const std::string& path) {
  return decode_checkpoint(read_file(path, "read_checkpoint"), path);
}

void check_same_config(const ConfigFields& saved, const ConfigFields& current,
                       const std::string& source) {
  auto find = [](const auto& fields, const std::string& flag) -> const std::string* {
    for (const auto& [f, v] : fields)
      if (f == flag) return &v;
    return nullptr;
  };
  auto refuse = [&](const std::string& flag, const std::string* was, const std::string* now) {
    throw Error(source + ": cannot resume: the checkpoint was written with " +
                (was ? flag + " " + *was : "no " + flag) + " but this run has " +
                (now ? flag + " " + *now : "no " + flag) +
                " (resume with the same training flags, or use another --out)");
  };
  for (const auto& [flag, value] : current) {
    const std::string* was = find(saved, flag);
    if (!was || *was != value) refuse(flag, was, &value);
  }
  for (const auto& [flag, value] : saved)
    if (!find(current, flag)) refuse(flag, &value, nullptr);
}

}  // namespace drx::data
