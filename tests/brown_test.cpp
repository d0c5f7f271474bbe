// drx::data::load_brown: the installed corpus against its files (documents, genres, the
// held-out split, byte counts computed here independently), and a synthetic corpus for the
// rules and the error cases.
#include "drx/data/brown.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "test_util.h"
#include "tests/brown_fixture.h"

namespace {

namespace fs = std::filesystem;
using drx::data::BrownDocument;

bool corpus_installed() { return fs::exists(fs::path(drx::data::kBrownCorpusDir) / "cats.txt"); }

// Bytes of a document's plain text from its file, counted without building it: per non-blank
// line, the tokens' lengths less their "/tag", the spaces between them, and the newline.
int64_t plain_bytes(const fs::path& file) {
  std::ifstream in(file);
  int64_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    int64_t tokens = 0;
    for (std::string t; ss >> t; ++tokens) bytes += static_cast<int64_t>(t.rfind('/'));
    if (tokens > 0) bytes += tokens;  // tokens - 1 spaces and one newline
  }
  return bytes;
}

TEST(Brown, TheInstalledCorpusMatchesItsFiles) {
  if (!corpus_installed()) {
    std::printf("NOTICE: the Brown Corpus is not installed in %s (scripts/setup.sh); skipped\n",
                drx::data::kBrownCorpusDir);
    GTEST_SKIP();
  }
  const std::vector<BrownDocument> docs = drx::data::load_brown();
  ASSERT_EQ(docs.size(), 500u);
  std::map<std::string, int> genres, held;
  int64_t total = 0, held_bytes = 0;
  for (const BrownDocument& d : docs) {
    ++genres[d.genre];
    held[d.genre] += d.held_out;
    const int64_t bytes = static_cast<int64_t>(d.text.size());
    EXPECT_EQ(bytes, plain_bytes(fs::path(drx::data::kBrownCorpusDir) / d.id)) << d.id;
    total += bytes;
    if (d.held_out) held_bytes += bytes;
    size_t tokens = 0;
    for (const auto& s : d.sentences) tokens += s.size();
    EXPECT_EQ(
        static_cast<size_t>(std::count(d.text.begin(), d.text.end(), ' ')) + d.sentences.size(),
        tokens)
        << d.id;
  }
  EXPECT_EQ(genres.size(), 15u);
  EXPECT_EQ(genres["learned"], 80);
  EXPECT_EQ(held["learned"], 8);  // indices 5, 15, ..., 75
  EXPECT_EQ(genres["science_fiction"], 6);
  EXPECT_EQ(held["science_fiction"], 1);
  EXPECT_EQ(held["humor"], 1);
  int held_docs = 0;
  for (const auto& [g, n] : held) held_docs += n;
  EXPECT_EQ(held_docs, 51);
  EXPECT_EQ(total, 6127074);
  EXPECT_EQ(held_bytes, 620815);
  // The first sentence of the corpus, by hand from ca01.
  EXPECT_EQ(docs[0].id, "ca01");
  EXPECT_EQ(docs[0].genre, "news");
  EXPECT_EQ(docs[0].text.substr(0, docs[0].text.find('\n')),
            "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent "
            "primary election produced `` no evidence '' that any irregularities took place .");
  EXPECT_EQ(docs[0].sentences[0][1].word, "Fulton");
  EXPECT_EQ(docs[0].sentences[0][1].tag, "np-tl");
  EXPECT_EQ(docs[5].id, "ca06");
  EXPECT_TRUE(docs[5].held_out);
  EXPECT_FALSE(docs[4].held_out);
}

// A corpus of 500 one-line documents in 15 genres written to a temporary folder.
class SyntheticBrown : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("drx_brown_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    drx::testing::write_synthetic_brown(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SyntheticBrown, SentencesWordsSplitAndErrors) {
  const std::vector<BrownDocument> docs = drx::data::load_brown(dir_.string());
  ASSERT_EQ(docs.size(), 500u);
  EXPECT_EQ(docs[0].text, "A b/c .\nx\n");  // the word is what precedes the last '/'
  EXPECT_EQ(docs[0].sentences[0][1].tag, "nn");
  int held = 0;
  for (const BrownDocument& d : docs) held += d.held_out;
  EXPECT_EQ(held, 45);                 // 15 genres of 33 or 34: indices 5, 15, 25 each
  EXPECT_TRUE(docs[5 * 15].held_out);  // genre 0's sixth document

  std::ofstream(dir_ / "ca01") << "The/at untagged word\n";
  drx::testing::expect_error([&] { drx::data::load_brown(dir_.string()); },
                             {"ca01' line 1", "'untagged' is not word/tag"});
  std::ofstream(dir_ / "ca01") << "\n \n";
  drx::testing::expect_error([&] { drx::data::load_brown(dir_.string()); },
                             {"ca01' holds no sentence"});
  fs::remove(dir_ / "ca01");
  drx::testing::expect_error([&] { drx::data::load_brown(dir_.string()); },
                             {"cannot open", "ca01", "scripts/setup.sh"});
  std::ofstream(dir_ / "cats.txt", std::ios::app) << "extra\n";
  drx::testing::expect_error([&] { drx::data::load_brown(dir_.string()); },
                             {"line 501 is not '<file> <genre>'"});
  std::ofstream(dir_ / "cats.txt") << "ca01 news\n";
  drx::testing::expect_error([&] { drx::data::load_brown(dir_.string()); },
                             {"lists 1 documents in 1 genres, expected 500 in 15"});
  drx::testing::expect_error([&] { drx::data::load_brown((dir_ / "nowhere").string()); },
                             {"cannot open", "cats.txt"});
}

}  // namespace
