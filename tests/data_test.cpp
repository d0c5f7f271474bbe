// drx/data: the IDX loader on the real Fashion-MNIST files and on broken ones, federated
// partitions, cohort sampling and masked cohort batches.
#include "drx/data/data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using drx::Array;
using drx::Error;
using drx::Value;
using drx::testing::expect_error;
namespace data = drx::data;

std::string real_file(const std::string& name) {
  return std::string(data::kFashionMnistDir) + "/" + name;
}

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The pixel byte a loaded value came from (the loader stores byte / 255).
int64_t pixel_byte(float x) { return std::lround(static_cast<double>(x) * 255.0); }

// A fresh directory for the broken files, removed afterwards.
class DataIdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("drx-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<unsigned char>& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  fs::path dir_;
};

std::vector<unsigned char> be32(std::vector<uint32_t> words) {
  std::vector<unsigned char> out;
  for (uint32_t w : words)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<unsigned char>(w >> s));
  return out;
}
std::vector<unsigned char> cat(std::vector<unsigned char> a, const std::vector<unsigned char>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// python3: gzip.compress(struct.pack('>II', 0x801, 3) + bytes([7, 0, 9]), mtime=0)
const std::vector<unsigned char> kLabelsGz = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60, 0xe0, 0x60, 0x64, 0x60,
    0x60, 0x60, 0x66, 0x67, 0xe0, 0x04, 0x00, 0xa5, 0x12, 0xd3, 0x72, 0x0b, 0x00, 0x00, 0x00};
// python3: gzip.compress(struct.pack('>IIII', 0x803, 2, 2, 3) +
//   bytes([0, 255, 51, 102, 1, 254, 17, 34, 68, 136, 200, 5]), mtime=0)
const std::vector<unsigned char> kImagesGz = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60, 0xe0, 0x60, 0x66,
    0x60, 0x60, 0x60, 0x82, 0x62, 0x66, 0x86, 0xff, 0xc6, 0x69, 0x8c, 0xff, 0x04, 0x95, 0x5c,
    0x3a, 0x4e, 0xb0, 0x02, 0x00, 0x16, 0x83, 0x79, 0xd8, 0x1c, 0x00, 0x00, 0x00};

// ---- loader on the real files -------------------------------------------------------------

// Reference figures computed once from the raw files, independently of drx:
//   d = gzip.open(path).read(); labels = d[8:]; pixels = d[16:]
//   sum(labels), sum(i * b for i, b in enumerate(labels)),
//   sum(pixels), sum(i * b for i, b in enumerate(pixels)), sum(pixels[:784]), sum(pixels[-784:])
struct Checksums {
  int64_t n, label_sum, label_weighted, pixel_sum, pixel_weighted, first_image, last_image;
};

void check_split(data::Split split, const Checksums& want) {
  data::Dataset d = data::load_fashion_mnist(split);
  ASSERT_EQ(d.images.dtype(), drx::f32);
  ASSERT_EQ(d.labels.dtype(), drx::i32);
  ASSERT_EQ(d.images.shape(), (drx::Shape{want.n, 784}));
  ASSERT_EQ(d.labels.shape(), (drx::Shape{want.n}));
  EXPECT_EQ(d.size(), want.n);

  const int32_t* y = d.labels.data<int32_t>();
  int64_t label_sum = 0, label_weighted = 0;
  std::vector<int64_t> per_class(10, 0);
  for (int64_t i = 0; i < want.n; ++i) {
    ASSERT_GE(y[i], 0);
    ASSERT_LE(y[i], 9);
    label_sum += y[i];
    label_weighted += i * y[i];
    ++per_class[static_cast<size_t>(y[i])];
  }
  EXPECT_EQ(label_sum, want.label_sum);
  EXPECT_EQ(label_weighted, want.label_weighted);
  for (int64_t c : per_class) EXPECT_EQ(c, want.n / 10);  // Fashion-MNIST is balanced

  const float* x = d.images.data<float>();
  int64_t pixel_sum = 0, pixel_weighted = 0, first = 0, last = 0, off_grid = 0;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < d.images.size(); ++i) {
    int64_t b = pixel_byte(x[i]);
    if (std::abs(static_cast<double>(x[i]) - b / 255.0) > 1e-7) ++off_grid;
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    pixel_sum += b;
    pixel_weighted += i * b;
    if (i < 784) first += b;
    if (i >= d.images.size() - 784) last += b;
  }
  EXPECT_EQ(off_grid, 0);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_EQ(pixel_sum, want.pixel_sum);
  EXPECT_EQ(pixel_weighted, want.pixel_weighted);
  EXPECT_EQ(first, want.first_image);
  EXPECT_EQ(last, want.last_image);
}

TEST(DataIdx, FashionMnistTestSplit) {
  check_split(data::Split::test,
              {10000, 45000, 225732341, 573469082, 2247811989637831, 33456, 24390});
}

TEST(DataIdx, FashionMnistTrainSplit) {
  check_split(data::Split::train,
              {60000, 270000, 8087216427, 3431114169, 80794193013333615, 76247, 16684});
}

TEST(DataIdx, FirstLabelsMatchFile) {
  // python3: gzip.open('t10k-labels-idx1-ubyte.gz').read()[8:18]
  Array y = data::read_idx_labels(real_file("t10k-labels-idx1-ubyte.gz"));
  std::vector<int32_t> all = y.to_vector<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.begin() + 10),
            (std::vector<int32_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
}

// ---- loader on small and broken files -----------------------------------------------------

TEST_F(DataIdxFiles, ParsesGzipAndPlainFiles) {
  Array y = data::read_idx_labels(write("l.gz", kLabelsGz));
  EXPECT_EQ(y.dtype(), drx::i32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{7, 0, 9}));

  Array x = data::read_idx_images(write("i.gz", kImagesGz));
  ASSERT_EQ(x.shape(), (drx::Shape{2, 6}));
  EXPECT_TRUE(
      drx::testing::ArrayNear(x,
                              {0, 1, 51 / 255.0, 102 / 255.0, 1 / 255.0, 254 / 255.0, 17 / 255.0,
                               34 / 255.0, 68 / 255.0, 136 / 255.0, 200 / 255.0, 5 / 255.0},
                              0, 1e-7));

  // Uncompressed IDX is read too.
  Array plain = data::read_idx_labels(write("l.idx", cat(be32({0x801, 2}), {3, 4})));
  EXPECT_EQ(plain.to_vector<int32_t>(), (std::vector<int32_t>{3, 4}));
  Array empty = data::read_idx_labels(write("e.idx", be32({0x801, 0})));
  EXPECT_EQ(empty.shape(), (drx::Shape{0}));
}

TEST_F(DataIdxFiles, MissingFile) {
  std::string path = (dir_ / "nope-labels.gz").string();
  expect_error([&] { data::read_idx_labels(path); }, {path, "cannot open"});
  std::string missing_dir = (dir_ / "no-such-dir").string();
  expect_error([&] { data::load_fashion_mnist(data::Split::test, missing_dir); },
               {missing_dir + "/t10k-images-idx3-ubyte.gz", "cannot open"});
}

TEST_F(DataIdxFiles, TruncatedRealFile) {
  std::vector<unsigned char> gz = read_bytes(real_file("t10k-labels-idx1-ubyte.gz"));
  ASSERT_EQ(gz.size(), 5125u);
  for (size_t keep : {gz.size() / 2, gz.size() - 4, size_t{12}}) {
    std::string path = write("cut-" + std::to_string(keep) + ".gz",
                             std::vector<unsigned char>(gz.begin(), gz.begin() + keep));
    expect_error([&] { data::read_idx_labels(path); }, {path});
  }
  // The midpoint cut is reported as a truncation.
  std::string half = (dir_ / ("cut-" + std::to_string(gz.size() / 2) + ".gz")).string();
  expect_error([&] { data::read_idx_labels(half); }, {half, "truncated"});
}

TEST_F(DataIdxFiles, TruncatedImagesInDatasetDirectory) {
  std::vector<unsigned char> gz = read_bytes(real_file("t10k-images-idx3-ubyte.gz"));
  write("t10k-images-idx3-ubyte.gz", std::vector<unsigned char>(gz.begin(), gz.begin() + 100000));
  write("t10k-labels-idx1-ubyte.gz", read_bytes(real_file("t10k-labels-idx1-ubyte.gz")));
  std::string images = (dir_ / "t10k-images-idx3-ubyte.gz").string();
  expect_error([&] { data::load_fashion_mnist(data::Split::test, dir_.string()); },
               {images, "truncated"});
}

TEST_F(DataIdxFiles, BadMagic) {
  std::string path = write("m.idx", cat(be32({0x803, 1, 1, 1}), {5}));
  expect_error([&] { data::read_idx_labels(path); }, {path, "bad magic", "0x00000803"});
  std::string labels = write("l.gz", kLabelsGz);
  expect_error([&] { data::read_idx_images(labels); }, {labels, "bad magic", "0x00000801"});
}

TEST_F(DataIdxFiles, SizeDisagreesWithHeader) {
  std::string short_path = write("s.idx", cat(be32({0x801, 5}), {1, 2, 3}));
  expect_error([&] { data::read_idx_labels(short_path); },
               {short_path, "truncated", "5 bytes", "only 3"});
  std::string long_path = write("t.idx", cat(be32({0x801, 2}), {1, 2, 3}));
  expect_error([&] { data::read_idx_labels(long_path); }, {long_path, "trailing"});
  std::string header = write("h.idx", cat(be32({0x803, 1}), {0, 0}));
  expect_error([&] { data::read_idx_images(header); }, {header, "truncated header"});
  // An absurd header is refused before anything is allocated for it.
  std::string huge = write("x.idx", be32({0x803, 0xffffffffu, 65536, 65536}));
  expect_error([&] { data::read_idx_images(huge); }, {huge, "more than any IDX file"});
  std::string zero = write("z.idx", be32({0x803, 1, 0, 28}));
  expect_error([&] { data::read_idx_images(zero); }, {zero, "image size"});
}

TEST_F(DataIdxFiles, CorruptGzip) {
  std::vector<unsigned char> bad_crc = kLabelsGz;
  bad_crc[bad_crc.size() - 8] ^= 0xff;  // first byte of the CRC-32 in the gzip trailer
  std::string path = write("crc.gz", bad_crc);
  expect_error([&] { data::read_idx_labels(path); }, {path, "gzip"});

  std::vector<unsigned char> bad_data = read_bytes(real_file("t10k-labels-idx1-ubyte.gz"));
  for (size_t i = 100; i < 140; ++i) bad_data[i] ^= 0x5a;
  std::string data_path = write("data.gz", bad_data);
  expect_error([&] { data::read_idx_labels(data_path); }, {data_path});
}

TEST_F(DataIdxFiles, DatasetFilesDisagree) {
  // Two 28x28 images but three labels.
  std::vector<unsigned char> images = be32({0x803, 2, 28, 28});
  images.resize(16 + 2 * 784, 0);
  write("t10k-images-idx3-ubyte.gz", images);
  write("t10k-labels-idx1-ubyte.gz", kLabelsGz);
  expect_error([&] { data::load_fashion_mnist(data::Split::test, dir_.string()); },
               {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", "2 images", "3 labels"});

  // A label outside the ten classes.
  write("t10k-labels-idx1-ubyte.gz", cat(be32({0x801, 2}), {3, 10}));
  expect_error([&] { data::load_fashion_mnist(data::Split::test, dir_.string()); },
               {"t10k-labels-idx1-ubyte.gz", "label 10", "index 1"});

  // Images that are not 28x28.
  std::vector<unsigned char> small = cat(be32({0x803, 2, 2, 3}), std::vector<unsigned char>(12));
  write("t10k-images-idx3-ubyte.gz", small);
  expect_error([&] { data::load_fashion_mnist(data::Split::test, dir_.string()); },
               {"t10k-images-idx3-ubyte.gz", "28x28"});
}

// ---- partitions ---------------------------------------------------------------------------

Array train_labels() {
  static const Array y = data::read_idx_labels(real_file("train-labels-idx1-ubyte.gz"));
  return y;
}

// Every index in [0, n) is held by exactly one client, and each client's list is ascending.
::testing::AssertionResult ExactCover(const data::Partition& parts, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (size_t k = 0; k < parts.size(); ++k) {
    for (size_t i = 0; i < parts[k].size(); ++i) {
      int64_t e = parts[k][i];
      if (e < 0 || e >= n)
        return ::testing::AssertionFailure() << "client " << k << " holds index " << e;
      if (i > 0 && parts[k][i - 1] >= e)
        return ::testing::AssertionFailure() << "client " << k << " is not strictly ascending";
      ++seen[static_cast<size_t>(e)];
    }
  }
  for (int64_t e = 0; e < n; ++e)
    if (seen[static_cast<size_t>(e)] != 1)
      return ::testing::AssertionFailure()
             << "example " << e << " held " << seen[static_cast<size_t>(e)] << " times";
  return ::testing::AssertionSuccess();
}

// Mean over non-empty clients of the largest fraction of one class in the client.
double mean_max_class_fraction(const data::Partition& parts, const Array& labels) {
  const int32_t* y = labels.data<int32_t>();
  double total = 0;
  int used = 0;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    std::vector<int64_t> count(10, 0);
    for (int64_t e : p) ++count[static_cast<size_t>(y[e])];
    total += static_cast<double>(*std::max_element(count.begin(), count.end())) /
             static_cast<double>(p.size());
    ++used;
  }
  return total / used;
}

TEST(DataPartition, IidEqualSizes) {
  data::Partition p = data::partition_iid(1003, 10, 7);
  ASSERT_EQ(p.size(), 10u);
  EXPECT_TRUE(ExactCover(p, 1003));
  for (size_t k = 0; k < 10; ++k) EXPECT_EQ(p[k].size(), k < 3 ? 101u : 100u);
  // Shuffled, not consecutive ranges: client 0 holds examples from across the range.
  EXPECT_GT(p[0].back() - p[0].front(), 800);
  // More clients than examples: some clients are empty, the cover is still exact.
  data::Partition tiny = data::partition_iid(3, 5, 1);
  EXPECT_TRUE(ExactCover(tiny, 3));
}

TEST(DataPartition, IidUnequalSizes) {
  data::Partition p = data::partition_iid(60000, 100, 3, 1.0);
  EXPECT_TRUE(ExactCover(p, 60000));
  size_t lo = 60000, hi = 0;
  for (const auto& c : p) lo = std::min(lo, c.size()), hi = std::max(hi, c.size());
  EXPECT_GE(lo, 1u);
  EXPECT_GT(hi, 4 * lo);  // log-normal with sigma 1 over 100 clients spans well over 4x
  EXPECT_TRUE(ExactCover(data::partition_iid(10, 10, 3, 2.0), 10));  // every client exactly 1
}

TEST(DataPartition, DirichletCoversAndSkewGrowsAsAlphaShrinks) {
  Array y = train_labels();
  std::map<double, double> skew;
  for (double alpha : {0.1, 0.5, 100.0}) {
    double total = 0;
    for (uint64_t seed : {1, 2, 3}) {
      data::Partition p = data::partition_dirichlet(y, 100, alpha, seed);
      ASSERT_EQ(p.size(), 100u);
      EXPECT_TRUE(ExactCover(p, 60000)) << "alpha " << alpha;
      total += mean_max_class_fraction(p, y);
    }
    skew[alpha] = total / 3;
  }
  // IID would give about 0.1 plus sampling noise; alpha 0.1 leaves most clients with one class.
  EXPECT_LT(skew[100.0], 0.2);
  EXPECT_GT(skew[0.5], skew[100.0] + 0.2);
  EXPECT_GT(skew[0.1], skew[0.5] + 0.1);
  EXPECT_GT(skew[0.1], 0.6);
}

TEST(DataPartition, DirichletClientSizesVaryAndMinimumHolds) {
  Array y = train_labels();
  data::Partition p = data::partition_dirichlet(y, 50, 0.1, 11, 20);
  EXPECT_TRUE(ExactCover(p, 60000));
  size_t lo = 60000, hi = 0;
  for (const auto& c : p) lo = std::min(lo, c.size()), hi = std::max(hi, c.size());
  EXPECT_GE(lo, 20u);
  EXPECT_GT(hi, 2 * lo);
  // Tiny alpha: draws underflow to zero, and the limit (one client per class) is used.
  data::Partition one_hot = data::partition_dirichlet(y, 10, 1e-4, 5);
  EXPECT_TRUE(ExactCover(one_hot, 60000));
  const int32_t* lab = y.data<int32_t>();
  for (int32_t c = 0; c < 10; ++c) {
    int holders = 0;
    for (const auto& part : one_hot)
      holders += std::any_of(part.begin(), part.end(), [&](int64_t e) { return lab[e] == c; });
    EXPECT_EQ(holders, 1) << "class " << c;
  }
  expect_error([&] { data::partition_dirichlet(y, 100, 0.1, 1, 601); },
               {"partition_dirichlet", "min_client_size"});
  // Possible in principle, but no Dirichlet draw over 2 clients with alpha tiny splits a class.
  Array two = Array::from_vector<int32_t>({0, 0, 0, 0}, {4});
  expect_error([&] { data::partition_dirichlet(two, 2, 1e-6, 1, 2); },
               {"partition_dirichlet", "no draw"});
}

TEST(DataPartition, ShardsGiveFewClassesPerClient) {
  Array y = train_labels();
  data::Partition p = data::partition_shards(y, 100, 2, 9);
  EXPECT_TRUE(ExactCover(p, 60000));
  const int32_t* lab = y.data<int32_t>();
  for (const auto& c : p) {
    EXPECT_EQ(c.size(), 600u);  // 200 shards of 300; each class is 6000 = 20 whole shards
    std::set<int32_t> classes;
    for (int64_t e : c) classes.insert(lab[e]);
    EXPECT_LE(classes.size(), 2u);
  }
  // Uneven: 23 examples in 3 x 2 = 6 shards of sizes 4,4,4,4,4,3.
  std::vector<int32_t> small(23);
  for (int i = 0; i < 23; ++i) small[static_cast<size_t>(i)] = i % 4;
  data::Partition q = data::partition_shards(Array::from_vector(small, {23}), 3, 2, 1);
  EXPECT_TRUE(ExactCover(q, 23));
  std::multiset<size_t> sizes;
  for (const auto& c : q) sizes.insert(c.size());
  EXPECT_EQ(*sizes.rbegin() + *sizes.begin() + *std::next(sizes.begin()), 23u);
  EXPECT_GE(*sizes.begin(), 7u);
  EXPECT_LE(*sizes.rbegin(), 8u);
}

TEST(DataPartition, SeededAndReproducible) {
  Array y = train_labels();
  EXPECT_EQ(data::partition_iid(60000, 20, 5), data::partition_iid(60000, 20, 5));
  EXPECT_NE(data::partition_iid(60000, 20, 5), data::partition_iid(60000, 20, 6));
  EXPECT_EQ(data::partition_iid(60000, 20, 5, 0.5), data::partition_iid(60000, 20, 5, 0.5));
  EXPECT_NE(data::partition_iid(60000, 20, 5, 0.5), data::partition_iid(60000, 20, 6, 0.5));
  EXPECT_EQ(data::partition_dirichlet(y, 20, 0.3, 5), data::partition_dirichlet(y, 20, 0.3, 5));
  EXPECT_NE(data::partition_dirichlet(y, 20, 0.3, 5), data::partition_dirichlet(y, 20, 0.3, 6));
  EXPECT_EQ(data::partition_shards(y, 20, 3, 5), data::partition_shards(y, 20, 3, 5));
  EXPECT_NE(data::partition_shards(y, 20, 3, 5), data::partition_shards(y, 20, 3, 6));
}

TEST(DataPartition, BadArguments) {
  Array y = Array::from_vector<int32_t>({0, 1, 2, 1}, {4});
  expect_error([] { data::partition_iid(10, 0, 1); }, {"partition_iid", "num_clients"});
  expect_error([] { data::partition_iid(-1, 2, 1); }, {"partition_iid", "num_examples"});
  expect_error([] { data::partition_iid(3, 5, 1, 1.0); }, {"partition_iid", "at least one"});
  expect_error([] { data::partition_iid(3, 2, 1, -1.0); }, {"partition_iid", "size_sigma"});
  expect_error([&] { data::partition_dirichlet(y, 2, 0.0, 1); }, {"alpha"});
  expect_error([&] { data::partition_dirichlet(y, 2, NAN, 1); }, {"alpha"});
  expect_error(
      [&] {
        data::partition_dirichlet(Array::from_vector<int32_t>({0, -1}, {2}), 2, 1, 1);
      },
      {"negative"});
  expect_error([&] { data::partition_dirichlet(drx::zeros({4}), 2, 1, 1); }, {"i32[N] or i64[N]"});
  expect_error([&] { data::partition_shards(y, 3, 2, 1); }, {"partition_shards", "4 examples"});
  expect_error([&] { data::partition_shards(y, int64_t{1} << 40, 1, 1); }, {"num_clients"});
  // i64 labels work too.
  Array y64 = Array::from_vector<int64_t>({1, 0, 1, 0}, {4});
  EXPECT_TRUE(ExactCover(data::partition_shards(y64, 2, 1, 3), 4));
}

// ---- cohort sampling ----------------------------------------------------------------------

TEST(DataSampling, CohortIsDistinctSortedAndReproducible) {
  std::set<std::vector<int64_t>> distinct_rounds;
  for (int64_t round = 0; round < 50; ++round) {
    std::vector<int64_t> c = data::sample_cohort(100, 10, 42, round);
    ASSERT_EQ(c.size(), 10u);
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
    EXPECT_EQ(std::set<int64_t>(c.begin(), c.end()).size(), 10u);  // without replacement
    for (int64_t id : c) EXPECT_TRUE(id >= 0 && id < 100);
    EXPECT_EQ(c, data::sample_cohort(100, 10, 42, round));
    distinct_rounds.insert(c);
  }
  EXPECT_EQ(distinct_rounds.size(), 50u);
  EXPECT_NE(data::sample_cohort(100, 10, 42, 3), data::sample_cohort(100, 10, 43, 3));
  std::vector<int64_t> all = data::sample_cohort(7, 7, 1, 0);
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(data::sample_cohort(7, 0, 1, 0).empty());
}

TEST(DataSampling, CohortIsUniform) {
  // 4000 rounds of 10 of 100: each client expected 400 times, sd about 19.
  std::vector<int> hits(100, 0);
  for (int64_t round = 0; round < 4000; ++round)
    for (int64_t id : data::sample_cohort(100, 10, 7, round)) ++hits[static_cast<size_t>(id)];
  for (int h : hits) {
    EXPECT_GT(h, 300);
    EXPECT_LT(h, 500);
  }
}

TEST(DataSampling, BadArguments) {
  expect_error([] { data::sample_cohort(5, 6, 1, 0); }, {"sample_cohort", "6 of 5"});
  expect_error([] { data::sample_cohort(5, -1, 1, 0); }, {"sample_cohort"});
  expect_error([] { data::sample_cohort(5, 2, 1, -1); }, {"sample_cohort", "round"});
}

// ---- batching -----------------------------------------------------------------------------

// Clients of sizes 0, 1, 5, 8, 13, 20 holding disjoint ranges of [0, 47).
data::Partition uneven_clients() {
  data::Partition p;
  int64_t next = 0;
  for (int64_t n : {0, 1, 5, 8, 13, 20}) {
    std::vector<int64_t> c;
    for (int64_t i = 0; i < n; ++i) c.push_back(next++);
    p.push_back(c);
  }
  return p;
}

// Real examples a client has at step s (cycling semantics): full batches, then the remainder.
int64_t expected_count(int64_t n, int64_t s, int64_t b, int64_t max_epochs) {
  if (n == 0) return 0;
  int64_t per_epoch = (n + b - 1) / b;
  if (max_epochs > 0 && s / per_epoch >= max_epochs) return 0;
  return s % per_epoch == per_epoch - 1 ? n - (per_epoch - 1) * b : b;
}

TEST(DataBatching, MasksCountEachClientsExamples) {
  data::Partition clients = uneven_clients();
  std::vector<int64_t> cohort = {5, 0, 2, 4, 1, 3};
  const int64_t steps = 9, b = 4;
  data::CohortBatches cb = data::cohort_batches(clients, cohort, {steps, b, 0, 17, 3});
  ASSERT_EQ(cb.idx.dtype(), drx::i32);
  ASSERT_EQ(cb.mask.dtype(), drx::f32);
  ASSERT_EQ(cb.idx.shape(), (drx::Shape{6, steps, b}));
  ASSERT_EQ(cb.mask.shape(), (drx::Shape{6, steps, b}));
  EXPECT_TRUE(drx::testing::ArrayNear(cb.sizes, {20, 0, 5, 13, 1, 8}, 0, 0));
  const int32_t* idx = cb.idx.data<int32_t>();
  const float* mask = cb.mask.data<float>();
  for (size_t j = 0; j < cohort.size(); ++j) {
    const auto& own = clients[static_cast<size_t>(cohort[j])];
    auto n = static_cast<int64_t>(own.size());
    int64_t per_epoch = n == 0 ? 1 : (n + b - 1) / b;
    std::multiset<int64_t> epoch_seen;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t real = 0;
      for (int64_t i = 0; i < b; ++i) {
        size_t at = static_cast<size_t>((static_cast<int64_t>(j) * steps + s) * b + i);
        ASSERT_TRUE(mask[at] == 0.0f || mask[at] == 1.0f);
        if (mask[at] == 1.0f) {
          EXPECT_EQ(i, real) << "real examples come first in a step";
          ++real;
          EXPECT_TRUE(std::binary_search(own.begin(), own.end(), idx[at]))
              << "client " << cohort[j] << " got example " << idx[at];
          epoch_seen.insert(idx[at]);
        } else {
          EXPECT_EQ(idx[at], 0) << "padding points at example 0";
        }
      }
      EXPECT_EQ(real, expected_count(n, s, b, 0)) << "client " << cohort[j] << " step " << s;
      if (n > 0 && s % per_epoch == per_epoch - 1) {
        // A complete epoch uses each of the client's examples exactly once.
        EXPECT_EQ(epoch_seen, std::multiset<int64_t>(own.begin(), own.end()));
        epoch_seen.clear();
      }
    }
  }
}

TEST(DataBatching, EpochLimitUsesEachExampleExactlyEpochsTimes) {
  data::Partition clients = uneven_clients();
  std::vector<int64_t> cohort = {0, 1, 2, 3, 4, 5};
  // Largest client 20 with batch 3: 7 steps per epoch, so 2 epochs are 14 steps.
  EXPECT_EQ(data::steps_for_epochs(clients, cohort, 2, 3), 14);
  EXPECT_EQ(data::steps_for_epochs(clients, {0}, 2, 3), 0);
  data::CohortBatches cb = data::cohort_batches(clients, cohort, {14, 3, 2, 1, 0});
  const int32_t* idx = cb.idx.data<int32_t>();
  const float* mask = cb.mask.data<float>();
  for (int64_t j = 0; j < 6; ++j) {
    std::map<int64_t, int> uses;
    for (int64_t s = 0; s < 14; ++s) {
      int64_t real = 0;
      for (int64_t i = 0; i < 3; ++i) {
        int64_t at = (j * 14 + s) * 3 + i;
        if (mask[at] == 1.0f) ++real, ++uses[idx[at]];
      }
      EXPECT_EQ(real, expected_count(static_cast<int64_t>(clients[static_cast<size_t>(j)].size()),
                                     s, 3, 2));
    }
    EXPECT_EQ(uses.size(), clients[static_cast<size_t>(j)].size());
    for (auto [example, count] : uses) EXPECT_EQ(count, 2) << "example " << example;
  }
}

TEST(DataBatching, SeededPerRoundAndPerClient) {
  data::Partition clients = uneven_clients();
  data::BatchOptions o{6, 4, 0, 9, 2};
  data::CohortBatches a = data::cohort_batches(clients, {3, 5}, o);
  data::CohortBatches b = data::cohort_batches(clients, {3, 5}, o);
  EXPECT_TRUE(a.idx.bitwise_equal(b.idx));
  EXPECT_TRUE(a.mask.bitwise_equal(b.mask));
  // A client's batches do not depend on who else is in the cohort.
  data::CohortBatches alone = data::cohort_batches(clients, {5}, o);
  std::vector<int32_t> all = a.idx.to_vector<int32_t>(), five = alone.idx.to_vector<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(all.begin() + 24, all.end()), five);
  data::BatchOptions next = o;
  next.round = 3;
  EXPECT_FALSE(data::cohort_batches(clients, {3, 5}, next).idx.bitwise_equal(a.idx));
  data::BatchOptions other = o;
  other.seed = 10;
  EXPECT_FALSE(data::cohort_batches(clients, {3, 5}, other).idx.bitwise_equal(a.idx));
}

// One masked SGD gradient of a linear least-squares loss per (client, step), through drx,
// equals the plain mean over that step's real examples computed with loops: padding (which
// points at example 0, whose loss is not zero) contributes nothing.
TEST(DataBatching, MaskedLossEqualsUnpaddedComputation) {
  const int64_t n = 47, d = 3, b = 4, steps = 6;
  Array x = drx::testing::random_array({n, d}, drx::f64, 1);
  Array t = drx::testing::random_array({n}, drx::f64, 2);
  Array w = drx::testing::random_array({d}, drx::f64, 3);
  data::Partition clients = uneven_clients();
  data::CohortBatches cb = data::cohort_batches(clients, {4, 1, 0, 2}, {steps, b, 0, 5, 0});
  auto loss = [](Value w, Value x, Value t, Value idx, Value mask) {
    Value xb = drx::take(x, idx), tb = drx::take(t, idx);
    Value r = drx::matmul(xb, w) - tb;
    Value m = drx::astype(mask, drx::f64);
    return drx::sum(m * r * r) / drx::maximum(drx::sum(m), 1.0);
  };
  auto value_and_grad = drx::jit(drx::value_and_grad(loss));
  const int32_t* idx = cb.idx.data<int32_t>();
  const float* mask = cb.mask.data<float>();
  const double *xp = x.data<double>(), *tp = t.data<double>(), *wp = w.data<double>();
  int checked = 0;
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> step_idx(idx + (j * steps + s) * b, idx + (j * steps + s + 1) * b);
      std::vector<float> step_mask(mask + (j * steps + s) * b, mask + (j * steps + s + 1) * b);
      auto [value, grad] = value_and_grad(w, x, t, Array::from_vector(step_idx, {b}),
                                          Array::from_vector(step_mask, {b}));
      // Reference: only the real examples, no padding at all.
      std::vector<int64_t> real;
      for (int64_t i = 0; i < b; ++i)
        if (step_mask[static_cast<size_t>(i)] == 1.0f)
          real.push_back(step_idx[static_cast<size_t>(i)]);
      double want_loss = 0;
      std::vector<double> want_grad(d, 0.0);
      for (int64_t e : real) {
        double r = -tp[e];
        for (int64_t k = 0; k < d; ++k) r += xp[e * d + k] * wp[k];
        want_loss += r * r;
        for (int64_t k = 0; k < d; ++k) want_grad[static_cast<size_t>(k)] += 2 * r * xp[e * d + k];
      }
      double count = real.empty() ? 1.0 : static_cast<double>(real.size());
      for (double& g : want_grad) g /= count;
      EXPECT_NEAR(value.item<double>(), want_loss / count, 1e-12);
      EXPECT_TRUE(drx::testing::ArrayNear(grad, want_grad, 1e-12, 1e-12));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

TEST(DataBatching, EvalBatchesCoverEveryExampleOnce) {
  data::CohortBatches cb = data::eval_batches(10000, 3, 128);
  // Shards of 3334, 3333, 3333; ceil(3334 / 128) = 27 steps.
  ASSERT_EQ(cb.idx.shape(), (drx::Shape{3, 27, 128}));
  EXPECT_TRUE(drx::testing::ArrayNear(cb.sizes, {3334, 3333, 3333}, 0, 0));
  std::vector<int> seen(10000, 0);
  const int32_t* idx = cb.idx.data<int32_t>();
  const float* mask = cb.mask.data<float>();
  for (int64_t i = 0; i < cb.idx.size(); ++i) {
    if (mask[i] == 1.0f) {
      ASSERT_TRUE(idx[i] >= 0 && idx[i] < 10000);
      ++seen[static_cast<size_t>(idx[i])];
      // Shard j holds a contiguous range.
      int64_t shard = i / (27 * 128);
      int64_t begin = shard == 0 ? 0 : 3334 + (shard - 1) * 3333;
      EXPECT_TRUE(idx[i] >= begin && idx[i] < begin + (shard == 0 ? 3334 : 3333));
    } else {
      EXPECT_EQ(idx[i], 0);
    }
  }
  for (int s : seen) ASSERT_EQ(s, 1);
  data::CohortBatches none = data::eval_batches(0, 2, 8);
  EXPECT_EQ(none.idx.shape(), (drx::Shape{2, 0, 8}));
}

TEST(DataBatching, BadArguments) {
  data::Partition clients = uneven_clients();
  expect_error(
      [&] {
        data::cohort_batches(clients, {6}, {1, 4, 0, 0, 0});
      },
      {"cohort_batches", "client id 6"});
  expect_error([&] { data::cohort_batches(clients, {1}, {1, 0, 0, 0, 0}); }, {"batch_size"});
  expect_error([&] { data::cohort_batches(clients, {1}, {-1, 4, 0, 0, 0}); }, {"steps"});
  expect_error([&] { data::cohort_batches(clients, {1}, {1, 4, -1, 0, 0}); }, {"max_epochs"});
  expect_error([&] { data::cohort_batches(clients, {1}, {1, 4, 0, 0, -2}); }, {"round"});
  expect_error(
      [&] {
        data::cohort_batches(clients, {1}, {int64_t{1} << 40, 1 << 20, 0, 0, 0});
      },
      {"too large"});
  data::Partition wide = {{int64_t{1} << 33}};
  expect_error([&] { data::cohort_batches(wide, {0}, {1, 4, 0, 0, 0}); }, {"i32"});
  expect_error([&] { data::steps_for_epochs(clients, {9}, 1, 4); }, {"client id 9"});
  expect_error([] { data::eval_batches(10, 0, 4); }, {"eval_batches"});
}

}  // namespace
