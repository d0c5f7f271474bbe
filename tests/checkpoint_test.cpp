// drx::data's checkpoint codec (drx/data/checkpoint.h): a file written before the codec moved
// into the library still reads, the bytes follow the documented layout, and damage of every
// kind is a drx::Error that names the file and the problem.
#include "drx/data/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/array/error.h"
#include "drx/data/atomic_write.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;
using data::Checkpoint;

// Written by `drx fedavg` of commit 5702ba6 (/tmp/base/build/drx), whose
// tools/fedavg/checkpoint.{h,cpp} are byte-identical to those of commit 84876cc
// (`git diff 84876cc 5702ba6 -- tools/fedavg/checkpoint.h tools/fedavg/checkpoint.cpp` is
// empty), i.e. by the codec as it was before it moved into drx/data:
//   drx fedavg --out DIR --max-examples 200 --clients 4 --cohort 2 --hidden 3 --batch 16
//     --client-lr 0.05 --server-opt fedavgm --server-lr 1 --server-momentum 0.5 --rounds 2
//     --eval-every 1 --checkpoint-every 1 --seed 5 --threads 1 --quiet
// on Fashion-MNIST. Its metrics.csv read:
//   round,train_loss,test_loss,test_accuracy,elapsed_s
//   1,2.421617,2.649918,0.085000,0.347
//   2,2.378935,2.265813,0.030000,0.349
const std::string kFixture = std::string(DRX_SOURCE_DIR) + "/tests/fixtures/checkpoint_v1.bin";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(const std::string& bytes, const std::string& source = "ck.bin") {
  try {
    data::decode_checkpoint(bytes, source);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// CRC-32 (IEEE, reflected, as zlib computes it), independent of zlib. `running[n]` is the
// register after the first n bytes, so the CRC of every prefix costs one pass.
std::vector<uint32_t> running_crc(const std::string& bytes) {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    table[i] = c;
  }
  std::vector<uint32_t> out{0xffffffffu};
  uint32_t c = 0xffffffffu;
  for (char ch : bytes) {
    c = table[(c ^ static_cast<unsigned char>(ch)) & 0xffu] ^ (c >> 8);
    out.push_back(c);
  }
  return out;
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[static_cast<size_t>(k)] = static_cast<char>(v >> (8 * k));
  return s;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[static_cast<size_t>(k)] = static_cast<char>(v >> (8 * k));
  return s;
}

// `body` followed by its CRC-32, so that a decoder gets past the CRC check to the parsing.
std::string with_crc(const std::string& body) {
  return body + le32(running_crc(body).back() ^ 0xffffffffu);
}

std::vector<int64_t> shape_at(const Tree& t, const std::string& layer, const std::string& leaf) {
  return t[layer][leaf].array().shape();
}

TEST(Checkpoint, ReadsAFileWrittenBeforeTheCodecMoved) {
  ASSERT_TRUE(fs::exists(kFixture)) << kFixture;
  const Checkpoint c = data::read_checkpoint(kFixture);

  // The training flags given on the command line, as the run recorded them.
  auto field = [&](const std::string& flag) {
    for (const auto& [f, v] : c.config)
      if (f == flag) return v;
    return std::string("(missing)");
  };
  EXPECT_EQ(field("--max-examples"), "200");
  EXPECT_EQ(field("--clients"), "4");
  EXPECT_EQ(field("--cohort"), "2");
  EXPECT_EQ(field("--hidden"), "3");
  EXPECT_EQ(field("--batch"), "16");
  EXPECT_EQ(std::stod(field("--client-lr")), 0.05);  // printed with 17 digits
  EXPECT_EQ(field("--server-opt"), "fedavgm");
  EXPECT_EQ(field("--server-lr"), "1");
  EXPECT_EQ(field("--server-momentum"), "0.5");
  EXPECT_EQ(field("--seed"), "5");

  EXPECT_EQ(c.round, 2);  // --rounds 2

  // An MLP 784 -> 3 -> 10 (--hidden 3 on 28x28 images, 10 classes), in f32; FedAvgM's server
  // momentum has the parameters' shapes.
  ASSERT_EQ(c.state.kind(), Tree::Kind::dict) << c.state.structure();
  ASSERT_TRUE(c.state.contains("momentum")) << c.state.structure();
  for (const Tree* t : {&c.params, &c.state["momentum"]}) {
    ASSERT_EQ(t->kind(), Tree::Kind::dict) << t->structure();
    ASSERT_EQ(t->keys(), (std::vector<std::string>{"layer0", "layer1"})) << t->structure();
    EXPECT_EQ(shape_at(*t, "layer0", "w"), (std::vector<int64_t>{784, 3}));
    EXPECT_EQ(shape_at(*t, "layer0", "b"), (std::vector<int64_t>{3}));
    EXPECT_EQ(shape_at(*t, "layer1", "w"), (std::vector<int64_t>{3, 10}));
    EXPECT_EQ(shape_at(*t, "layer1", "b"), (std::vector<int64_t>{10}));
    EXPECT_EQ((*t)["layer1"]["w"].array().dtype(), f32);
  }

  // One record per round, every round evaluated (--eval-every 1), as metrics.csv printed them.
  ASSERT_EQ(c.history.size(), 2u);
  const double csv[2][3] = {{2.421617, 2.649918, 0.085}, {2.378935, 2.265813, 0.03}};
  for (size_t i = 0; i < 2; ++i) {
    const data::RoundRecord& r = c.history[i];
    EXPECT_EQ(r.round, static_cast<int64_t>(i + 1));
    EXPECT_TRUE(r.evaluated());
    EXPECT_NEAR(r.train_loss, csv[i][0], 5e-7);
    EXPECT_NEAR(r.test_loss, csv[i][1], 5e-7);
    // 200 test examples: the accuracy is a whole number of 200ths (up to its f32 rounding).
    EXPECT_NEAR(r.test_accuracy * 200, std::round(r.test_accuracy * 200), 1e-4);
    EXPECT_NEAR(r.test_accuracy, csv[i][2], 5e-7);
    EXPECT_TRUE(std::isnan(r.epsilon));  // not stored
  }
  EXPECT_LE(c.history[0].elapsed_s, c.history[1].elapsed_s);

  // Today's encoder writes the same content as the same bytes.
  EXPECT_EQ(data::encode_checkpoint(c), slurp(kFixture));
}

// A checkpoint with one of everything, spelled out byte by byte from the layout that
// drx/data/checkpoint.h documents.
TEST(Checkpoint, LayoutIsAsDocumented) {
  Checkpoint c;
  c.config = {{"--seed", "7"}};
  c.round = 3;
  c.params = Tree::dict({{"w", Tree(Array::from_vector<float>({1.0f, -2.0f}, {2, 1}))}});
  c.state = Tree::list({Tree(Array::scalar<int32_t>(-5))});
  c.history = {{3, 0.5, 0.25, 0.75, 2.0}};

  std::string body = "DRXFEDCK" + le32(1);
  body += le64(1) + le64(6) + "--seed" + le64(1) + "7";
  body += le64(3);
  // params: dict of 1: key "w", array f32 rank 2 dims 2,1, then the floats' bytes.
  body += std::string(1, '\2') + le64(1) + le64(1) + "w";
  body += std::string(1, '\0') + std::string(1, static_cast<char>(f32)) + le32(2) + le64(2) +
          le64(1) + le32(0x3f800000u) + le32(0xc0000000u);
  // state: list of 1: an i32 scalar (rank 0).
  body += std::string(1, '\1') + le64(1);
  body += std::string(1, '\0') + std::string(1, static_cast<char>(i32)) + le32(0) +
          le32(static_cast<uint32_t>(-5));
  // history: 1 row.
  auto f64 = [](double d) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return le64(u);
  };
  body += le64(1) + le64(3) + f64(0.5) + f64(0.25) + f64(0.75) + f64(2.0);

  EXPECT_EQ(data::encode_checkpoint(c), with_crc(body));
}

TEST(Checkpoint, AnotherVersionIsRefusedNamingIt) {
  std::string bytes = slurp(kFixture);
  ASSERT_GT(bytes.size(), 16u);
  bytes.replace(8, 4, le32(2));
  // With a valid CRC: the version alone is the reason.
  const std::string v2 = with_crc(bytes.substr(0, bytes.size() - 4));
  const std::string message = error_of(v2, "old.bin");
  EXPECT_NE(message.find("old.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("version 2 is not supported (this drx reads version 1)"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of(with_crc(bytes.replace(8, 4, le32(0)).substr(0, bytes.size() - 4)))
                .find("version 0 is not supported"),
            std::string::npos);
}

TEST(Checkpoint, WrongMagicIsRefused) {
  std::string bytes = slurp(kFixture);
  bytes[0] = 'X';
  const std::string message = error_of(with_crc(bytes.substr(0, bytes.size() - 4)));
  EXPECT_NE(message.find("ck.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("wrong magic"), std::string::npos) << message;
  EXPECT_NE(error_of("").find("wrong magic"), std::string::npos);
}

TEST(Checkpoint, AFlippedByteFailsTheCrc) {
  const std::string good = slurp(kFixture);
  ASSERT_GT(good.size(), 1000u);
  // A byte of the parameters, of the history, and of the CRC itself.
  for (size_t i : {good.size() / 2, good.size() - 10, good.size() - 1}) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    const std::string message = error_of(bad);
    EXPECT_NE(message.find("ck.bin: corrupt checkpoint (CRC-32 mismatch"), std::string::npos)
        << "byte " << i << ": " << message;
  }
}

TEST(Checkpoint, EveryTruncationIsRefused) {
  const std::string good = slurp(kFixture);
  ASSERT_GT(good.size(), 16u);
  const std::string body = good.substr(0, good.size() - 4);
  const std::vector<uint32_t> crc = running_crc(body);
  for (size_t n = 0; n < good.size(); ++n) {
    // Cut anywhere, the file fails a check (magic, length or CRC)...
    EXPECT_NE(error_of(good.substr(0, n)), "no error") << "length " << n;
    // ... and cut anywhere with a CRC that matches what is left, the parser finds the end
    // of the data before the end of the structure.
    if (n < body.size()) {
      const std::string cut = body.substr(0, n) + le32(crc[n] ^ 0xffffffffu);
      const std::string message = error_of(cut);
      EXPECT_NE(message.find("ck.bin"), std::string::npos)
          << "body length " << n << ": " << message;
      EXPECT_EQ(message.find("CRC-32 mismatch"), std::string::npos)
          << "body length " << n << ": " << message;
    }
  }
}

// Every dtype, ranks 0 to 3, an empty array, nested lists and dicts.
TEST(Checkpoint, TreesOfEveryDTypeRoundTripBitExactly) {
  std::vector<Tree> leaves;
  uint8_t next = 1;
  for (DType d : kAllDTypes) {
    Array a(d, {2, 3});
    // bool and the 2- and 4-bit integers hold small values in their bytes.
    const bool narrow =
        d == DType::bool_ || d == DType::i2 || d == DType::i4 || d == DType::u2 || d == DType::u4;
    auto* p = static_cast<unsigned char*>(a.raw());
    for (size_t i = 0; i < a.nbytes(); ++i)
      p[i] = narrow ? static_cast<unsigned char>(i % 2) : next++;
    leaves.emplace_back(std::move(a));
  }
  Checkpoint c;
  c.config = {{"--dtypes", "all"}, {"", ""}};
  c.round = 1 << 20;
  c.params = Tree::dict(
      {{"leaves", Tree::list(leaves)},
       {"nested", Tree::list({Tree::dict({{"s", Tree(Array::scalar<double>(-0.0))}}),
                              Tree(Array(f32, {0, 5})), Tree()})},
       {"cube", Tree(Array::from_vector<int64_t>({1, -2, 3, -4, 5, -6, 7, -8}, {2, 2, 2}))}});
  c.state = Tree::dict({});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.history = {{1, nan, nan, nan, 0}, {2, -1.5, 1e300, 0.5, 1e-300}};

  const std::string bytes = data::encode_checkpoint(c);
  const Checkpoint d = data::decode_checkpoint(bytes);
  EXPECT_EQ(d.config, c.config);
  EXPECT_EQ(d.round, c.round);
  EXPECT_EQ(d.params.structure(), c.params.structure());
  EXPECT_EQ(d.state.structure(), c.state.structure());
  const Tree& got = d.params["leaves"];
  ASSERT_EQ(got.size(), kAllDTypes.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const Array& a = got[i].array();
    const Array& want = leaves[i].array();
    EXPECT_EQ(a.dtype(), want.dtype()) << i;
    EXPECT_EQ(a.shape(), want.shape()) << i;
    ASSERT_EQ(a.nbytes(), want.nbytes()) << i;
    EXPECT_EQ(std::memcmp(a.raw(), want.raw(), a.nbytes()), 0) << "dtype " << i;
  }
  EXPECT_TRUE(std::signbit(d.params["nested"][0]["s"].array().item<double>()));
  EXPECT_EQ(d.params["nested"][1].array().shape(), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(d.params["cube"].array().to_vector<int64_t>(),
            (std::vector<int64_t>{1, -2, 3, -4, 5, -6, 7, -8}));
  ASSERT_EQ(d.history.size(), 2u);
  EXPECT_TRUE(std::isnan(d.history[0].train_loss));
  EXPECT_FALSE(d.history[0].evaluated());
  EXPECT_EQ(d.history[1].test_loss, 1e300);
  EXPECT_EQ(d.history[1].elapsed_s, 1e-300);
  EXPECT_EQ(data::encode_checkpoint(d), bytes);
}

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "drx-checkpoint-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CheckpointFiles, WriteNamesTheCommandAndReadNamesTheFile) {
  const Checkpoint c = data::read_checkpoint(kFixture);
  data::write_checkpoint(path("ck.bin"), c, "lm");
  EXPECT_EQ(slurp(path("ck.bin")), slurp(kFixture));
  try {
    data::write_checkpoint(path("no/such/dir/ck.bin"), c, "lm");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("lm: cannot write '" + path("no/such/dir/ck.bin"), 0), 0u)
        << e.what();
  }
  try {
    data::read_checkpoint(path("missing.bin"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path("missing.bin")), std::string::npos) << e.what();
  }
}

// The temporary names write_file_atomically makes are those of mkstemp with its documented
// pattern; is_atomic_temp_of recognises them, and nothing else.
TEST_F(CheckpointFiles, TemporaryNamesOfTheAtomicWriteAreRecognised) {
  for (int i = 0; i < 20; ++i) {
    std::string name = path("checkpoint.bin.tmp.XXXXXX");
    const int fd = ::mkstemp(name.data());
    ASSERT_GE(fd, 0);
    ::close(fd);
    const std::string file = fs::path(name).filename().string();
    EXPECT_TRUE(data::is_atomic_temp_of(file, "checkpoint.bin")) << file;
    EXPECT_FALSE(data::is_atomic_temp_of(file, "metrics.csv")) << file;
  }
  for (const char* other : {"checkpoint.bin", "checkpoint.bin.tmp.", "checkpoint.bin.tmp.abc",
                            "checkpoint.bin.tmp.abcdefg", "checkpoint.bin.tmp.ab-cd_",
                            "checkpoint.bin.tmp/abcdef", "xcheckpoint.bin.tmp.abcdef"})
    EXPECT_FALSE(data::is_atomic_temp_of(other, "checkpoint.bin")) << other;
}

}  // namespace
}  // namespace drx::testing
