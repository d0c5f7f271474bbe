#pragma once
// Reading datasets stored as (gzipped) IDX files, the format of MNIST and Fashion-MNIST.
#include <string>

#include "drx/array/array.h"

namespace drx::data {

// Where Debian's `dataset-fashion-mnist` package installs the four IDX .gz files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;

// An image classification dataset: images f32[N, rows*cols] in [0, 1], labels i32[N].
struct Dataset {
  Array images;
  Array labels;
  int64_t size() const { return labels.size(); }
};

enum class Split { train, test };

// An IDX image file (magic 0x00000803, u8 [N, rows, cols]) as f32[N, rows*cols], each byte
// divided by 255. The file may be gzipped or plain. Anything wrong with it (missing,
// unreadable, corrupt gzip stream, wrong magic, a size that does not match the header,
// trailing bytes) throws drx::Error naming the file and the problem.
Array read_idx_images(const std::string& path);

// An IDX label file (magic 0x00000801, u8 [N]) as i32[N]. Errors as read_idx_images.
Array read_idx_labels(const std::string& path);

// The train (60000) or test (10000) split of Fashion-MNIST from `dir`. Also checks that the
// image and label files agree on N and that every label is in [0, 10).
Dataset load_fashion_mnist(Split split, const std::string& dir = kFashionMnistDir);

}  // namespace drx::data
