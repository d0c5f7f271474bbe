// Byte-level language-model data (drx/data/lm_windows.h): the corpus split, the held-out
// windows, the baselines, and a round's training windows for FedAvg and DiLoCo.
#include "drx/data/lm_windows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "drx/array/error.h"
#include "drx/data/sampling.h"

namespace drx::data {
namespace {

BrownDocument doc(const std::string& id, const std::string& text, bool held_out) {
  BrownDocument d;
  d.id = id;
  d.text = text;
  d.held_out = held_out;
  return d;
}

// Document i's bytes come from an alphabet of its own ([32 i + 1, 32 i + 31], cycling), so a
// window names its document, and find() tells whether it is a substring of it.
std::vector<std::string> distinct_documents(const std::vector<size_t>& lengths) {
  std::vector<std::string> docs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::string d(lengths[i], '\0');
    for (size_t j = 0; j < d.size(); ++j) d[j] = static_cast<char>(32 * i + 1 + j % 31);
    docs.push_back(d);
  }
  return docs;
}

std::string window_at(const Array& a, int64_t index, int64_t T) {
  std::string w(static_cast<size_t>(T + 1), '\0');
  for (int64_t i = 0; i <= T; ++i)
    w[static_cast<size_t>(i)] = static_cast<char>(a.data<int32_t>()[index * (T + 1) + i]);
  return w;
}

// The document a window came from (by its alphabet).
int64_t source(const std::string& w) { return (static_cast<unsigned char>(w[0]) - 1) / 32; }

TEST(LmWindows, CorpusSplitsByHeldOutAndRefusesShortDocuments) {
  const LmCorpus c =
      lm_corpus({doc("a", "train one", false), doc("b", "held", true), doc("c", "two!", false)}, 2);
  EXPECT_EQ(c.train, (std::vector<std::string>{"train one", "two!"}));
  EXPECT_EQ(c.held_out, (std::vector<std::string>{"held"}));
  try {
    lm_corpus({doc("ca01", "abc", false)}, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "lm: document ca01 has 3 bytes, fewer than --context + 2 = 4");
  }
}

TEST(LmWindows, EvalWindowsTileEachHeldOutDocument) {
  LmCorpus c;
  c.held_out = {"0123456789", "abcd", "xyz"};
  // T = 3: offsets 0, 3, 6 fit 10 bytes (6 + 4 = 10), 9 does not; "abcd" holds one; "xyz" none.
  EXPECT_EQ(eval_windows(c, 3, 5), (std::vector<std::string>{"0123", "3456", "6789", "abcd"}));
  EXPECT_EQ(eval_windows(c, 3, 2), (std::vector<std::string>{"0123", "3456", "abcd"}));
  EXPECT_TRUE(eval_windows(c, 3, 0).empty());
}

// Training "abab" counts the pairs ab twice and ba once (n(a) = 2, n(b) = 1). The window "aab"
// is evaluated on its last two bytes: a after a, b after a.
TEST(LmWindows, BaselinesByHand) {
  LmCorpus c;
  c.train = {"abab"};
  const LmBaselines b = lm_baselines(c, {"aab"});
  EXPECT_DOUBLE_EQ(b.unigram_bpb, 1.0);  // a and b once each
  // -(log2(0.5 / 66) + log2(2.5 / 66)) / 2
  EXPECT_NEAR(b.bigram_bpb, (std::log2(66 / 0.5) + std::log2(66 / 2.5)) / 2, 1e-12);
  // Two windows: bytes a, b (twice), a: unigram entropy of {1/4 a... } = H(2/4, 2/4) = 1 again;
  // with "abb" added: b after a, b after b (never seen: n(bb) = 0, n(b) = 1).
  const LmBaselines two = lm_baselines(c, {"aab", "abb"});
  EXPECT_NEAR(two.unigram_bpb, -(0.25 * std::log2(0.25) + 0.75 * std::log2(0.75)), 1e-12);
  EXPECT_NEAR(two.bigram_bpb,
              (std::log2(66 / 0.5) + 2 * std::log2(66 / 2.5) + std::log2(65 / 0.5)) / 4, 1e-12);
}

// std::mt19937_64's first output from its default seed 5489 is 14514284786278117030 (C++
// standard, [rand.predef]: its 10000th is 9981545732273789042).
TEST(LmWindows, UniformBelowIsOneDrawModuloN) {
  std::mt19937_64 rng;
  EXPECT_EQ(uniform_below(rng, 1000), 14514284786278117030ULL % 1000);
  std::mt19937_64 again;
  again.discard(9999);
  EXPECT_EQ(uniform_below(again, 1 << 20),
            static_cast<int64_t>(9981545732273789042ULL % (1 << 20)));
  EXPECT_THROW(uniform_below(rng, 0), Error);
}

TEST(LmWindows, CohortWindowsComeFromEachSlotsDocument) {
  const std::vector<std::string> docs = distinct_documents({40, 9, 100, 25, 60});
  const std::vector<int64_t> cohort = {4, 0, 2, 1};
  const WindowGrid g{3, 2, 8};
  const Array w = cohort_windows(docs, cohort, 1, 4, 99, g);
  ASSERT_EQ(w.shape(), (Shape{3, 3, 2, 9}));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t k = 0; k < 6; ++k) {
      const std::string win = window_at(w, r * 6 + k, 8);
      EXPECT_EQ(source(win), cohort[static_cast<size_t>(1 + r)]);
      EXPECT_NE(docs[static_cast<size_t>(source(win))].find(win), std::string::npos);
    }
  EXPECT_EQ(cohort_document_lengths(docs, cohort, 1, 4).to_vector<float>(),
            (std::vector<float>{40, 100, 9}));
  EXPECT_THROW(cohort_windows(docs, cohort, 2, 5, 99, g), Error);
  EXPECT_THROW(cohort_windows(docs, {7}, 0, 1, 99, g), Error);
}

TEST(LmWindows, WorkerShardsAreRoundRobin) {
  const std::vector<std::string> docs = distinct_documents({20, 20, 20, 20, 20, 20, 20});
  const WorkerShards s(docs, 3);
  EXPECT_EQ(s.documents(0), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(s.documents(1), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(s.documents(2), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(s.cumulative_lengths(0), (std::vector<double>{20, 40, 60}));
  const WindowGrid g{4, 5, 6};
  const Array w = s.windows(1, 3, 7, g);
  ASSERT_EQ(w.shape(), (Shape{2, 4, 5, 7}));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t k = 0; k < 20; ++k) {
      const std::string win = window_at(w, r * 20 + k, 6);
      EXPECT_EQ(source(win) % 3, 1 + r);
      EXPECT_NE(docs[static_cast<size_t>(source(win))].find(win), std::string::npos);
    }
  try {
    WorkerShards(docs, 8);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "lm: --workers 8 leaves worker 7 without documents");
  }
  EXPECT_THROW(s.windows(2, 4, 7, g), Error);
}

// Documents of 100, 300 and 600 bytes in one worker's shard: 12000 windows should split about
// 1 : 3 : 6 (binomial standard deviation at most 0.0046; the bound is 4 of them).
TEST(LmWindows, WorkersChooseDocumentsByLength) {
  const std::vector<std::string> docs = distinct_documents({100, 300, 600});
  const WorkerShards s(docs, 1);
  const WindowGrid g{120, 100, 4};
  const Array w = s.windows(0, 1, 2024, g);
  std::vector<double> count(3, 0);
  for (int64_t k = 0; k < 12000; ++k) ++count[static_cast<size_t>(source(window_at(w, k, 4)))];
  EXPECT_NEAR(count[0] / 12000, 0.1, 0.02);
  EXPECT_NEAR(count[1] / 12000, 0.3, 0.02);
  EXPECT_NEAR(count[2] / 12000, 0.6, 0.02);
}

// ---- tools/lm/train.cpp before the move, copied: the library's windows are bitwise these ----

int64_t below(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

template <class Pick>
Array todays_windows(int64_t context, int64_t local_steps, int64_t batch, int64_t rows,
                     const Pick& pick) {
  const int64_t T = context;
  Array a(DType::i32, {rows, local_steps, batch, T + 1});
  int32_t* out = a.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    std::mt19937_64 rng = pick.rng(r);
    for (int64_t s = 0; s < local_steps * batch; ++s) {
      const std::string& doc = pick.document(r, rng);
      const int64_t at = below(rng, static_cast<int64_t>(doc.size()) - T);
      for (int64_t i = 0; i <= T; ++i)
        *out++ = static_cast<unsigned char>(doc[static_cast<size_t>(at + i)]);
    }
  }
  return a;
}

struct FedAvgPick {
  const std::vector<std::string>& docs;
  const std::vector<int64_t>& cohort;
  int64_t first;
  uint64_t seed;
  std::mt19937_64 rng(int64_t r) const {
    return std::mt19937_64(derive_seed(seed, static_cast<uint64_t>(cohort[first + r])));
  }
  const std::string& document(int64_t r, std::mt19937_64&) const {
    return docs[static_cast<size_t>(cohort[static_cast<size_t>(first + r)])];
  }
};

struct DilocoPick {
  const std::vector<std::string>& docs;
  const std::map<int64_t, std::vector<int64_t>>& shards;
  const std::map<int64_t, std::vector<double>>& cumulative;
  int64_t first;
  uint64_t seed;
  std::mt19937_64 rng(int64_t r) const {
    return std::mt19937_64(derive_seed(seed, static_cast<uint64_t>(first + r)));
  }
  const std::string& document(int64_t r, std::mt19937_64& rng) const {
    const std::vector<double>& cum = cumulative.at(first + r);
    const double u = static_cast<double>(below(rng, static_cast<int64_t>(cum.back())));
    const auto at = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
    return docs[static_cast<size_t>(shards.at(first + r)[static_cast<size_t>(at)])];
  }
};

bool same_bits(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// A checksum of every byte and its position, for values pinned below.
int64_t weighted_sum(const Array& a) {
  int64_t s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.data<int32_t>()[i] * (i % 7 + 1);
  return s;
}

std::vector<std::string> varied_documents() {
  std::vector<std::string> docs;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 23; ++i) {
    std::string d(static_cast<size_t>(20 + rng() % 300), '\0');
    for (char& c : d) c = static_cast<char>(rng() % 256);
    docs.push_back(d);
  }
  return docs;
}

TEST(LmWindows, BitwiseTheToolsFedAvgWindows) {
  const std::vector<std::string> docs = varied_documents();
  const uint64_t seed = derive_seed(derive_seed(11, 3), 4);  // the tool's window seed of round 4
  const std::vector<int64_t> cohort = sample_cohort(23, 6, derive_seed(11, 2), 4);
  ASSERT_EQ(cohort, (std::vector<int64_t>{0, 3, 5, 11, 16, 19}));
  // Pinned from the tool's code: bytes 0, 1, 17, the last, and the checksum.
  const Array all = cohort_windows(docs, cohort, 0, 6, seed, {3, 4, 16});
  EXPECT_EQ(all.data<int32_t>()[0], 139);
  EXPECT_EQ(all.data<int32_t>()[1], 233);
  EXPECT_EQ(all.data<int32_t>()[17], 19);
  EXPECT_EQ(all.data<int32_t>()[all.size() - 1], 52);
  EXPECT_EQ(weighted_sum(all), 654085);
  for (const auto& [first, end] : {std::pair<int64_t, int64_t>{0, 6}, {2, 5}}) {
    const Array today =
        todays_windows(16, 3, 4, end - first, FedAvgPick{docs, cohort, first, seed});
    EXPECT_TRUE(same_bits(cohort_windows(docs, cohort, first, end, seed, {3, 4, 16}), today))
        << "slots [" << first << ", " << end << ")";
  }
}

TEST(LmWindows, BitwiseTheToolsDilocoWindows) {
  const std::vector<std::string> docs = varied_documents();
  const int64_t workers = 4;
  std::map<int64_t, std::vector<int64_t>> shards;
  for (int64_t i = 0; i < static_cast<int64_t>(docs.size()); ++i) shards[i % workers].push_back(i);
  std::map<int64_t, std::vector<double>> cumulative;
  for (const auto& [w, ids] : shards) {
    double total = 0;
    for (int64_t i : ids)
      cumulative[w].push_back(total += static_cast<double>(docs[static_cast<size_t>(i)].size()));
  }
  const WorkerShards s(docs, workers);
  const uint64_t seed = derive_seed(derive_seed(11, 3), 9);
  const Array all = s.windows(0, 4, seed, {3, 4, 16});
  EXPECT_EQ(all.data<int32_t>()[0], 206);
  EXPECT_EQ(all.data<int32_t>()[1], 153);
  EXPECT_EQ(all.data<int32_t>()[17], 148);
  EXPECT_EQ(all.data<int32_t>()[all.size() - 1], 34);
  EXPECT_EQ(weighted_sum(all), 411875);
  for (const auto& [first, end] : {std::pair<int64_t, int64_t>{0, 4}, {1, 3}}) {
    const Array today =
        todays_windows(16, 3, 4, end - first, DilocoPick{docs, shards, cumulative, first, seed});
    EXPECT_TRUE(same_bits(s.windows(first, end, seed, {3, 4, 16}), today))
        << "workers [" << first << ", " << end << ")";
  }
}

}  // namespace
}  // namespace drx::data
