#pragma once
// A synthetic Fashion-MNIST for tests: IDX files (plain bytes; the loader reads them through
// zlib, which passes plain data through) of a learnable 10-class problem, in which class c
// lights up pixel block c.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace drx::testing {

inline void write_synthetic_fashion(const std::filesystem::path& dir, int64_t train_n = 400,
                                    int64_t test_n = 200) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(7);
  auto write_split = [&](const std::string& prefix, int64_t n) {
    std::string images, labels;
    auto be32 = [](std::string& s, uint32_t v) {
      for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
    };
    be32(images, 0x803), be32(images, static_cast<uint32_t>(n)), be32(images, 28), be32(images, 28);
    be32(labels, 0x801), be32(labels, static_cast<uint32_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int c = static_cast<int>(rng() % 10);
      labels.push_back(static_cast<char>(c));
      for (int p = 0; p < 784; ++p) {
        int v = static_cast<int>(rng() % 60);
        if (p / 78 == c) v += 150;
        images.push_back(static_cast<char>(v));
      }
    }
    std::ofstream(dir / (prefix + "-images-idx3-ubyte.gz"), std::ios::binary) << images;
    std::ofstream(dir / (prefix + "-labels-idx1-ubyte.gz"), std::ios::binary) << labels;
  };
  write_split("train", train_n);
  write_split("t10k", test_n);
}

}  // namespace drx::testing
