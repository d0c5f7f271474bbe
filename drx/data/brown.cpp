#include "drx/data/brown.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "drx/array/error.h"

namespace drx::data {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("brown corpus: cannot open '" + path + "' (install it with scripts/setup.sh)");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("brown corpus: cannot read '" + path + "'");
  return ss.str();
}

std::vector<std::string> split_whitespace(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream ss(line);
  for (std::string word; ss >> word;) out.push_back(word);
  return out;
}

void parse_document(const std::string& path, BrownDocument& doc) {
  std::istringstream lines(read_file(path));
  int64_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::vector<std::string> tokens = split_whitespace(line);
    if (tokens.empty()) continue;
    std::vector<BrownToken>& sentence = doc.sentences.emplace_back();
    for (const std::string& t : tokens) {
      const size_t slash = t.rfind('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == t.size())
        throw Error("brown corpus: '" + path + "' line " + std::to_string(number) + ": token '" +
                    t + "' is not word/tag");
      if (!sentence.empty()) doc.text += ' ';
      doc.text.append(t, 0, slash);
      sentence.push_back({t.substr(0, slash), t.substr(slash + 1)});
    }
    doc.text += '\n';
  }
  if (doc.sentences.empty()) throw Error("brown corpus: '" + path + "' holds no sentence");
}

}  // namespace

std::vector<BrownDocument> load_brown(const std::string& dir) {
  const std::string cats_path = dir + "/cats.txt";
  std::istringstream cats(read_file(cats_path));
  std::vector<BrownDocument> docs;
  std::map<std::string, int64_t> seen_in_genre;
  std::set<std::string> ids;
  int64_t number = 0;
  for (std::string line; std::getline(cats, line);) {
    ++number;
    const std::vector<std::string> fields = split_whitespace(line);
    if (fields.empty()) continue;
    if (fields.size() != 2)
      throw Error("brown corpus: '" + cats_path + "' line " + std::to_string(number) +
                  " is not '<file> <genre>': '" + line + "'");
    if (fields[0].find('/') != std::string::npos || !ids.insert(fields[0]).second)
      throw Error("brown corpus: '" + cats_path + "' line " + std::to_string(number) +
                  " names file '" + fields[0] + "' twice or outside the corpus");
    BrownDocument& doc = docs.emplace_back();
    doc.id = fields[0];
    doc.genre = fields[1];
    doc.held_out = seen_in_genre[doc.genre]++ % 10 == 5;
  }
  if (static_cast<int64_t>(docs.size()) != kBrownDocuments ||
      static_cast<int64_t>(seen_in_genre.size()) != kBrownGenres)
    throw Error("brown corpus: '" + cats_path + "' lists " + std::to_string(docs.size()) +
                " documents in " + std::to_string(seen_in_genre.size()) + " genres, expected " +
                std::to_string(kBrownDocuments) + " in " + std::to_string(kBrownGenres));
  for (BrownDocument& doc : docs) parse_document(dir + "/" + doc.id, doc);
  return docs;
}

}  // namespace drx::data
