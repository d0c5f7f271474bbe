#pragma once
// A synthetic Brown Corpus for tests: 500 documents in 15 genres written to a folder, each a few
// sentences of `word/tag` tokens (the real corpus's layout, far smaller).
#include <filesystem>
#include <fstream>
#include <string>

namespace drx::testing {

// Document i's genre is "genre<i % 15>" and its file "c<a + i % 15><i / 15, two digits>".
// Each starts with the sentences "A/at b/c/nn ./." and "x/y", then `sentences` more of six
// words from a small vocabulary.
inline void write_synthetic_brown(const std::filesystem::path& dir, int sentences = 0) {
  std::filesystem::create_directories(dir);
  std::ofstream cats(dir / "cats.txt");
  static const char* const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"};
  for (int i = 0; i < 500; ++i) {
    const std::string id = "c" + std::string(1, static_cast<char>('a' + i % 15)) +
                           std::to_string(100 + i / 15).substr(1);
    cats << id << " genre" << i % 15 << "\n";
    std::ofstream doc(dir / id);
    doc << "\n\n\tA/at b/c/nn ./.\n\n  x/y\n";
    for (int s = 0; s < sentences; ++s) {
      doc << "\t";
      for (int w = 0; w < 6; ++w) doc << words[(i * 7 + s * 3 + w * w) % 9] << "/nn ";
      doc << "./.\n";
    }
  }
}

}  // namespace drx::testing
