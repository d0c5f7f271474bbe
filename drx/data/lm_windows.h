#pragma once
// Byte-level language-model data from the Brown Corpus (drx/data/brown.h): the train and
// held-out documents, the held-out evaluation windows, the unigram and bigram baselines, and the
// training windows of a round for FedAvg (one client per document) and DiLoCo (each worker a
// round-robin shard of the documents). A window is context + 1 consecutive bytes: the model
// reads the first `context` and predicts each of the last `context`.
//
// Every random window is a function of (seed, client or worker) alone, drawn with
// std::mt19937_64 and uniform_below, so the same on every platform and on every rank.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/data/brown.h"

namespace drx::data {

struct LmCorpus {
  std::vector<std::string> train, held_out;  // the documents' bytes, in load_brown's order
};

// The documents' texts split by BrownDocument::held_out. Throws drx::Error (worded for
// `drx lm`'s --context) for a document of fewer than context + 2 bytes: it would hold no window.
LmCorpus lm_corpus(std::vector<BrownDocument> documents, int64_t context);

// The held-out windows: per held-out document, those at offsets 0, T, 2T, ... (T = context) that
// fit, the first `per_document` of them.
std::vector<std::string> eval_windows(const LmCorpus& corpus, int64_t context,
                                      int64_t per_document);

// Bits per byte of two baselines on the bytes a model is evaluated on (each window's bytes but
// its first): the entropy of their own byte frequencies (unigram), and the cross-entropy of a
// byte bigram model counted on the training documents, P(b | a) = (n(a b) + 0.5) /
// (n(a) + 0.5 * 128).
struct LmBaselines {
  double unigram_bpb = 0, bigram_bpb = 0;
};
LmBaselines lm_baselines(const LmCorpus& corpus, const std::vector<std::string>& windows);

// A uniform integer in [0, n), n > 0, from one 64-bit draw (rng() % n: the bias is below 2^-40
// for n < 2^24, and unlike std::uniform_int_distribution the result is the same on every
// platform).
int64_t uniform_below(std::mt19937_64& rng, int64_t n);

// The shape of a round's windows: i32[rows, steps, batch, context + 1].
struct WindowGrid {
  int64_t steps = 1, batch = 1, context = 1;
};

// FedAvg's windows for the slots [first, end) of `cohort` (document ids into `documents`): slot
// k's steps * batch windows come from document cohort[k] at offsets uniform over those that fit,
// drawn from std::mt19937_64(derive_seed(seed, cohort[k])). i32[end - first, steps, batch,
// context + 1]. Throws drx::Error for a slot range outside the cohort or a document id out of
// range.
Array cohort_windows(const std::vector<std::string>& documents, const std::vector<int64_t>& cohort,
                     int64_t first, int64_t end, uint64_t seed, const WindowGrid& grid);

// FedAvg's client weights for the slots [first, end) of `cohort`: f32 document lengths in bytes.
Array cohort_document_lengths(const std::vector<std::string>& documents,
                              const std::vector<int64_t>& cohort, int64_t first, int64_t end);

// DiLoCo's data: worker w trains on the documents i with i % workers == w, each window from a
// document chosen with probability proportional to its length. Keeps a reference to
// `documents`, which must outlive it.
class WorkerShards {
 public:
  // Throws drx::Error (worded for `drx lm`'s --workers) when a worker would have no document.
  WorkerShards(const std::vector<std::string>& documents, int64_t workers);

  int64_t workers() const { return static_cast<int64_t>(shards_.size()); }
  // Worker w's document ids, ascending, and the running sums of their lengths.
  const std::vector<int64_t>& documents(int64_t worker) const;
  const std::vector<double>& cumulative_lengths(int64_t worker) const;

  // The windows of workers [first, end): worker w's come from std::mt19937_64(derive_seed(seed,
  // w)), each a document by length (uniform_below of the total length, located in the running
  // sums) and then an offset uniform over those that fit. i32[end - first, steps, batch,
  // context + 1]. Throws drx::Error for a worker range outside [0, workers()).
  Array windows(int64_t first, int64_t end, uint64_t seed, const WindowGrid& grid) const;

 private:
  const std::vector<std::string>& docs_;
  std::vector<std::vector<int64_t>> shards_;
  std::vector<std::vector<double>> cumulative_;
};

}  // namespace drx::data
