#include "drx/data/partition.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

namespace drx::data {
namespace {

// Far above any simulation; keeps a mistyped count from becoming a huge allocation.
constexpr int64_t kMaxClients = int64_t{1} << 24;

void check_clients(const char* op, int64_t num_clients) {
  if (num_clients < 1 || num_clients > kMaxClients)
    throw Error(std::string(op) + ": num_clients must be in [1, " + std::to_string(kMaxClients) +
                "], got " + std::to_string(num_clients));
}

std::vector<int64_t> label_vector(const char* op, const Array& labels) {
  if (labels.ndim() != 1 || (labels.dtype() != i32 && labels.dtype() != i64))
    throw Error(std::string(op) + ": labels must be i32[N] or i64[N], got " +
                std::string(dtype_name(labels.dtype())) + shape_str(labels.shape()));
  std::vector<int64_t> y(static_cast<size_t>(labels.size()));
  for (int64_t i = 0; i < labels.size(); ++i) {
    y[static_cast<size_t>(i)] =
        labels.dtype() == i32 ? labels.data<int32_t>()[i] : labels.data<int64_t>()[i];
    if (y[static_cast<size_t>(i)] < 0)
      throw Error(std::string(op) + ": label " + std::to_string(y[static_cast<size_t>(i)]) +
                  " at index " + std::to_string(i) + " is negative");
  }
  return y;
}

// Own Fisher-Yates so the permutation depends only on the engine's output sequence.
void shuffle(std::vector<int64_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::uniform_int_distribution<size_t> pick(0, i - 1);
    std::swap(v[i - 1], v[pick(rng)]);
  }
}

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

void sort_clients(Partition& parts) {
  for (auto& p : parts) std::sort(p.begin(), p.end());
}

// Sizes summing to `total`, each >= floor, proportional to `weights` (largest remainder).
std::vector<int64_t> apportion(const std::vector<double>& weights, int64_t total, int64_t floor) {
  size_t k = weights.size();
  int64_t spare = total - floor * static_cast<int64_t>(k);
  double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> sizes(k, floor);
  std::vector<std::pair<double, size_t>> rest(k);
  int64_t given = 0;
  for (size_t i = 0; i < k; ++i) {
    double exact = static_cast<double>(spare) * weights[i] / sum;
    auto whole = static_cast<int64_t>(std::floor(exact));
    sizes[i] += whole;
    given += whole;
    rest[i] = {exact - static_cast<double>(whole), i};
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < spare; ++i, ++given) ++sizes[rest[i % k].second];
  return sizes;
}

}  // namespace

Partition partition_iid(int64_t num_examples, int64_t num_clients, uint64_t seed,
                        double size_sigma) {
  check_clients("partition_iid", num_clients);
  if (num_examples < 0)
    throw Error("partition_iid: num_examples must be non-negative, got " +
                std::to_string(num_examples));
  if (!(size_sigma >= 0.0) || !std::isfinite(size_sigma))
    throw Error("partition_iid: size_sigma must be finite and >= 0, got " +
                std::to_string(size_sigma));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order = iota_vector(num_examples);
  shuffle(order, rng);
  std::vector<int64_t> sizes;
  if (size_sigma == 0.0) {
    sizes.assign(static_cast<size_t>(num_clients), num_examples / num_clients);
    for (int64_t i = 0; i < num_examples % num_clients; ++i) ++sizes[static_cast<size_t>(i)];
  } else {
    if (num_examples < num_clients)
      throw Error("partition_iid: " + std::to_string(num_examples) + " examples cannot give " +
                  std::to_string(num_clients) + " clients at least one each");
    std::normal_distribution<double> z(0.0, 1.0);
    std::vector<double> w(static_cast<size_t>(num_clients));
    for (double& x : w) x = std::exp(size_sigma * z(rng));
    sizes = apportion(w, num_examples, 1);
  }
  Partition parts(static_cast<size_t>(num_clients));
  size_t at = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    parts[k].assign(order.begin() + static_cast<std::ptrdiff_t>(at),
                    order.begin() + static_cast<std::ptrdiff_t>(at + sizes[k]));
    at += static_cast<size_t>(sizes[k]);
  }
  sort_clients(parts);
  return parts;
}

Partition partition_dirichlet(const Array& labels, int64_t num_clients, double alpha, uint64_t seed,
                              int64_t min_client_size) {
  const char* op = "partition_dirichlet";
  check_clients(op, num_clients);
  if (!(alpha > 0.0) || !std::isfinite(alpha))
    throw Error("partition_dirichlet: alpha must be finite and > 0, got " + std::to_string(alpha));
  std::vector<int64_t> y = label_vector(op, labels);
  auto n = static_cast<int64_t>(y.size());
  if (min_client_size < 0 || (min_client_size > 0 && min_client_size > n / num_clients))
    throw Error("partition_dirichlet: min_client_size " + std::to_string(min_client_size) +
                " is impossible for " + std::to_string(n) + " examples over " +
                std::to_string(num_clients) + " clients");
  int64_t num_classes = n == 0 ? 0 : *std::max_element(y.begin(), y.end()) + 1;
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < n; ++i)
    by_class[static_cast<size_t>(y[static_cast<size_t>(i)])].push_back(i);

  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gamma(alpha, 1.0);
  auto k = static_cast<size_t>(num_clients);
  constexpr int kMaxDraws = 1000;
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    Partition parts(k);
    for (auto& members : by_class) {
      shuffle(members, rng);
      std::vector<double> p(k);
      double sum = 0.0;
      for (double& x : p) sum += (x = gamma(rng));
      if (!(sum > 0.0) || !std::isfinite(sum)) {
        // Tiny alpha can underflow every draw to 0; the limit of Dir(alpha) is a one-hot.
        std::fill(p.begin(), p.end(), 0.0);
        p[std::uniform_int_distribution<size_t>(0, k - 1)(rng)] = sum = 1.0;
      }
      auto m = static_cast<int64_t>(members.size());
      double cum = 0.0;
      int64_t start = 0;
      for (size_t c = 0; c < k; ++c) {
        cum += p[c];
        int64_t end = c + 1 == k ? m
                                 : std::min<int64_t>(m, static_cast<int64_t>(std::floor(
                                                            cum / sum * static_cast<double>(m))));
        end = std::max(end, start);
        parts[c].insert(parts[c].end(), members.begin() + start, members.begin() + end);
        start = end;
      }
    }
    bool ok = std::all_of(parts.begin(), parts.end(), [&](const auto& p) {
      return static_cast<int64_t>(p.size()) >= min_client_size;
    });
    if (ok) {
      sort_clients(parts);
      return parts;
    }
  }
  throw Error("partition_dirichlet: no draw in " + std::to_string(kMaxDraws) +
              " gave every one of " + std::to_string(num_clients) + " clients at least " +
              std::to_string(min_client_size) + " examples (alpha " + std::to_string(alpha) +
              "); use fewer clients, a larger alpha or a smaller minimum");
}

Partition partition_shards(const Array& labels, int64_t num_clients, int64_t shards_per_client,
                           uint64_t seed) {
  const char* op = "partition_shards";
  check_clients(op, num_clients);
  std::vector<int64_t> y = label_vector(op, labels);
  auto n = static_cast<int64_t>(y.size());
  if (shards_per_client < 1 || shards_per_client > n / num_clients)
    throw Error("partition_shards: " + std::to_string(num_clients) + " clients x " +
                std::to_string(shards_per_client) + " shards need shards_per_client >= 1 and at " +
                "most one shard per example, but there are " + std::to_string(n) + " examples");
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order = iota_vector(n);
  shuffle(order, rng);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return y[static_cast<size_t>(a)] < y[static_cast<size_t>(b)];
  });
  int64_t num_shards = num_clients * shards_per_client;
  std::vector<int64_t> shard_ids = iota_vector(num_shards);
  shuffle(shard_ids, rng);
  Partition parts(static_cast<size_t>(num_clients));
  for (int64_t s = 0; s < num_shards; ++s) {
    int64_t shard = shard_ids[static_cast<size_t>(s)];
    // The first n % num_shards shards hold one extra example.
    int64_t base = n / num_shards, extra = n % num_shards;
    int64_t begin = shard * base + std::min(shard, extra);
    int64_t end = begin + base + (shard < extra ? 1 : 0);
    auto& dst = parts[static_cast<size_t>(s / shards_per_client)];
    dst.insert(dst.end(), order.begin() + begin, order.begin() + end);
  }
  sort_clients(parts);
  return parts;
}

}  // namespace drx::data
