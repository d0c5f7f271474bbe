#include "drx/data/lm_windows.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "drx/array/error.h"
#include "drx/data/sampling.h"

namespace drx::data {
namespace {

void check_range(const char* op, int64_t first, int64_t end, int64_t size, const char* of) {
  if (first < 0 || end < first || end > size)
    throw Error(std::string(op) + ": rows [" + std::to_string(first) + ", " + std::to_string(end) +
                ") are not within the " + std::to_string(size) + " " + of);
}

void check_grid(const char* op, const WindowGrid& g) {
  if (g.steps < 0 || g.batch < 0 || g.context < 1)
    throw Error(std::string(op) + ": steps " + std::to_string(g.steps) + ", batch " +
                std::to_string(g.batch) + ", context " + std::to_string(g.context) +
                " (need steps, batch >= 0 and context >= 1)");
}

// Windows i32[rows, steps, batch, T + 1]: row r's from rng_of(r), each from the document
// document_of(r, rng) at a uniform offset that fits.
template <class RngOf, class DocumentOf>
Array windows_array(int64_t rows, const WindowGrid& g, const RngOf& rng_of,
                    const DocumentOf& document_of) {
  const int64_t T = g.context;
  Array a(DType::i32, {rows, g.steps, g.batch, T + 1});
  int32_t* out = a.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    std::mt19937_64 rng = rng_of(r);
    for (int64_t s = 0; s < g.steps * g.batch; ++s) {
      const std::string& doc = document_of(r, rng);
      if (static_cast<int64_t>(doc.size()) < T + 1)
        throw Error("lm windows: a document of " + std::to_string(doc.size()) +
                    " bytes holds no window of context + 1 = " + std::to_string(T + 1) + " bytes");
      const int64_t at = uniform_below(rng, static_cast<int64_t>(doc.size()) - T);
      for (int64_t i = 0; i <= T; ++i)
        *out++ = static_cast<unsigned char>(doc[static_cast<size_t>(at + i)]);
    }
  }
  return a;
}

}  // namespace

LmCorpus lm_corpus(std::vector<BrownDocument> documents, int64_t context) {
  LmCorpus c;
  for (BrownDocument& d : documents) {
    // The tool's words (`drx lm` prints them as they are).
    if (static_cast<int64_t>(d.text.size()) < context + 2)
      throw Error("lm: document " + d.id + " has " + std::to_string(d.text.size()) +
                  " bytes, fewer than --context + 2 = " + std::to_string(context + 2));
    (d.held_out ? c.held_out : c.train).push_back(std::move(d.text));
  }
  return c;
}

std::vector<std::string> eval_windows(const LmCorpus& corpus, int64_t context,
                                      int64_t per_document) {
  if (context < 1) throw Error("eval_windows: context " + std::to_string(context) + " (need >= 1)");
  std::vector<std::string> w;
  const auto T = static_cast<size_t>(context);
  for (const std::string& doc : corpus.held_out)
    for (size_t k = 0;
         k < static_cast<size_t>(std::max<int64_t>(per_document, 0)) && k * T + T + 1 <= doc.size();
         ++k)
      w.push_back(doc.substr(k * T, T + 1));
  return w;
}

LmBaselines lm_baselines(const LmCorpus& corpus, const std::vector<std::string>& windows) {
  std::vector<double> unigram(256, 0), first(256, 0);
  std::vector<double> pairs(256 * 256, 0);
  for (const std::string& doc : corpus.train)
    for (size_t i = 0; i + 1 < doc.size(); ++i) {
      const auto a = static_cast<unsigned char>(doc[i]), b = static_cast<unsigned char>(doc[i + 1]);
      ++first[a];
      ++pairs[a * 256 + b];
    }
  double n = 0, bigram = 0;
  for (const std::string& w : windows)
    for (size_t i = 1; i < w.size(); ++i) {
      const auto a = static_cast<unsigned char>(w[i - 1]), b = static_cast<unsigned char>(w[i]);
      ++unigram[b];
      ++n;
      bigram -= std::log2((pairs[a * 256 + b] + 0.5) / (first[a] + 0.5 * 128));
    }
  double entropy = 0;
  for (double k : unigram)
    if (k > 0) entropy -= k / n * std::log2(k / n);
  return {entropy, bigram / n};
}

int64_t uniform_below(std::mt19937_64& rng, int64_t n) {
  if (n <= 0) throw Error("uniform_below: n = " + std::to_string(n) + " (need n > 0)");
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

Array cohort_windows(const std::vector<std::string>& documents, const std::vector<int64_t>& cohort,
                     int64_t first, int64_t end, uint64_t seed, const WindowGrid& grid) {
  check_range("cohort_windows", first, end, static_cast<int64_t>(cohort.size()), "cohort slots");
  check_grid("cohort_windows", grid);
  for (int64_t k = first; k < end; ++k)
    if (cohort[static_cast<size_t>(k)] < 0 ||
        cohort[static_cast<size_t>(k)] >= static_cast<int64_t>(documents.size()))
      throw Error("cohort_windows: slot " + std::to_string(k) + " names document " +
                  std::to_string(cohort[static_cast<size_t>(k)]) + " of " +
                  std::to_string(documents.size()));
  return windows_array(
      end - first, grid,
      [&](int64_t r) {
        return std::mt19937_64(
            derive_seed(seed, static_cast<uint64_t>(cohort[static_cast<size_t>(first + r)])));
      },
      [&](int64_t r, std::mt19937_64&) -> const std::string& {
        return documents[static_cast<size_t>(cohort[static_cast<size_t>(first + r)])];
      });
}

Array cohort_document_lengths(const std::vector<std::string>& documents,
                              const std::vector<int64_t>& cohort, int64_t first, int64_t end) {
  check_range("cohort_document_lengths", first, end, static_cast<int64_t>(cohort.size()),
              "cohort slots");
  Array weights(DType::f32, {end - first});
  for (int64_t k = first; k < end; ++k)
    weights.data<float>()[k - first] = static_cast<float>(
        documents.at(static_cast<size_t>(cohort[static_cast<size_t>(k)])).size());
  return weights;
}

WorkerShards::WorkerShards(const std::vector<std::string>& documents, int64_t workers)
    : docs_(documents) {
  if (workers < 1)
    throw Error("lm: --workers " + std::to_string(workers) + " (need at least 1 worker)");
  shards_.resize(static_cast<size_t>(workers));
  for (int64_t i = 0; i < static_cast<int64_t>(documents.size()); ++i)
    shards_[static_cast<size_t>(i % workers)].push_back(i);
  // The tool's words (`drx lm` prints them as they are).
  for (int64_t w = 0; w < workers; ++w)
    if (shards_[static_cast<size_t>(w)].empty())
      throw Error("lm: --workers " + std::to_string(workers) + " leaves worker " +
                  std::to_string(w) + " without documents");
  cumulative_.resize(shards_.size());
  for (size_t w = 0; w < shards_.size(); ++w) {
    double total = 0;
    for (int64_t i : shards_[w])
      cumulative_[w].push_back(total += static_cast<double>(docs_[static_cast<size_t>(i)].size()));
  }
}

const std::vector<int64_t>& WorkerShards::documents(int64_t worker) const {
  check_range("WorkerShards::documents", worker, worker + 1, workers(), "workers");
  return shards_[static_cast<size_t>(worker)];
}

const std::vector<double>& WorkerShards::cumulative_lengths(int64_t worker) const {
  check_range("WorkerShards::cumulative_lengths", worker, worker + 1, workers(), "workers");
  return cumulative_[static_cast<size_t>(worker)];
}

Array WorkerShards::windows(int64_t first, int64_t end, uint64_t seed,
                            const WindowGrid& grid) const {
  check_range("WorkerShards::windows", first, end, workers(), "workers");
  check_grid("WorkerShards::windows", grid);
  return windows_array(
      end - first, grid,
      [&](int64_t r) {
        return std::mt19937_64(derive_seed(seed, static_cast<uint64_t>(first + r)));
      },
      [&](int64_t r, std::mt19937_64& rng) -> const std::string& {
        const auto w = static_cast<size_t>(first + r);
        const std::vector<double>& cum = cumulative_[w];
        const double u = static_cast<double>(uniform_below(rng, static_cast<int64_t>(cum.back())));
        const auto at = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
        return docs_[static_cast<size_t>(shards_[w][static_cast<size_t>(at)])];
      });
}

}  // namespace drx::data
