#include "drx/data/batching.h"

#include <algorithm>
#include <limits>
#include <random>
#include <string>

#include "drx/data/sampling.h"

namespace drx::data {
namespace {

constexpr int64_t kMaxSlots = int64_t{1} << 31;

void check_batch_size(const char* op, int64_t batch_size) {
  if (batch_size < 1)
    throw Error(std::string(op) + ": batch_size must be at least 1, got " +
                std::to_string(batch_size));
}

int64_t steps_per_epoch(int64_t n, int64_t batch_size) { return (n + batch_size - 1) / batch_size; }

// Writes one client's [steps, batch] grid. `epoch_order(e)` gives the client's examples in the
// order of epoch e.
template <class EpochOrder>
void fill_client(const std::string& op, int64_t n, int64_t steps, int64_t batch_size,
                 int64_t max_epochs, EpochOrder epoch_order, int32_t* idx, float* mask) {
  int64_t per_epoch = steps_per_epoch(n, batch_size);
  if (per_epoch == 0) return;
  int64_t epoch = -1;
  std::vector<int64_t> order;
  for (int64_t s = 0; s < steps; ++s) {
    int64_t e = s / per_epoch, b = s % per_epoch;
    if (max_epochs > 0 && e >= max_epochs) break;
    if (e != epoch) order = epoch_order(epoch = e);
    int64_t begin = b * batch_size, end = std::min(n, begin + batch_size);
    for (int64_t i = begin; i < end; ++i) {
      int64_t example = order[static_cast<size_t>(i)];
      if (example < 0 || example > std::numeric_limits<int32_t>::max())
        throw Error(op + ": example index " + std::to_string(example) +
                    " does not fit an i32 index in [0, 2^31)");
      idx[s * batch_size + (i - begin)] = static_cast<int32_t>(example);
      mask[s * batch_size + (i - begin)] = 1.0f;
    }
  }
}

CohortBatches make_grid(const std::string& op, int64_t rows, int64_t steps, int64_t batch_size) {
  if (steps < 0) throw Error(op + ": steps must be non-negative, got " + std::to_string(steps));
  if (rows > kMaxSlots)
    throw Error(op + ": " + std::to_string(rows) + " rows is too many (at most 2^31)");
  if (rows > 0 && steps > 0 && (steps > kMaxSlots / rows || steps * rows > kMaxSlots / batch_size))
    throw Error(op + ": a grid of " + std::to_string(rows) + " x " + std::to_string(steps) + " x " +
                std::to_string(batch_size) + " slots is too large (at most 2^31)");
  Shape shape{rows, steps, batch_size};
  return {Array(i32, shape), Array(f32, shape), Array(f32, {rows})};
}

}  // namespace

CohortBatches cohort_batches(const Partition& clients, const std::vector<int64_t>& cohort,
                             const BatchOptions& o) {
  const std::string op = "cohort_batches";
  check_batch_size(op.c_str(), o.batch_size);
  if (o.max_epochs < 0)
    throw Error(op + ": max_epochs must be non-negative, got " + std::to_string(o.max_epochs));
  if (o.round < 0) throw Error(op + ": round must be non-negative, got " + std::to_string(o.round));
  for (int64_t c : cohort)
    if (c < 0 || c >= static_cast<int64_t>(clients.size()))
      throw Error(op + ": client id " + std::to_string(c) + " is outside [0, " +
                  std::to_string(clients.size()) + ")");
  auto rows = static_cast<int64_t>(cohort.size());
  CohortBatches out = make_grid(op, rows, o.steps, o.batch_size);
  int64_t stride = o.steps * o.batch_size;
  for (int64_t j = 0; j < rows; ++j) {
    int64_t id = cohort[static_cast<size_t>(j)];
    const std::vector<int64_t>& data = clients[static_cast<size_t>(id)];
    std::mt19937_64 rng(
        derive_seed(o.seed, static_cast<uint64_t>(o.round), static_cast<uint64_t>(id)));
    auto epoch_order = [&](int64_t) {
      std::vector<int64_t> order = data;
      for (size_t i = order.size(); i > 1; --i)
        std::swap(order[i - 1], order[std::uniform_int_distribution<size_t>(0, i - 1)(rng)]);
      return order;
    };
    auto n = static_cast<int64_t>(data.size());
    fill_client(op, n, o.steps, o.batch_size, o.max_epochs, epoch_order,
                out.idx.data<int32_t>() + j * stride, out.mask.data<float>() + j * stride);
    out.sizes.data<float>()[j] = static_cast<float>(n);
  }
  return out;
}

int64_t steps_for_epochs(const Partition& clients, const std::vector<int64_t>& cohort,
                         int64_t epochs, int64_t batch_size) {
  check_batch_size("steps_for_epochs", batch_size);
  if (epochs < 0)
    throw Error("steps_for_epochs: epochs must be non-negative, got " + std::to_string(epochs));
  int64_t most = 0;
  for (int64_t c : cohort) {
    if (c < 0 || c >= static_cast<int64_t>(clients.size()))
      throw Error("steps_for_epochs: client id " + std::to_string(c) + " is outside [0, " +
                  std::to_string(clients.size()) + ")");
    most = std::max(
        most,
        steps_per_epoch(static_cast<int64_t>(clients[static_cast<size_t>(c)].size()), batch_size));
  }
  return epochs * most;
}

CohortBatches eval_batches(int64_t num_examples, int64_t num_shards, int64_t batch_size) {
  const std::string op = "eval_batches";
  check_batch_size(op.c_str(), batch_size);
  if (num_examples < 0 || num_shards < 1)
    throw Error(op + ": need num_examples >= 0 and num_shards >= 1, got " +
                std::to_string(num_examples) + " and " + std::to_string(num_shards));
  if (num_examples > std::numeric_limits<int32_t>::max())
    throw Error(op + ": " + std::to_string(num_examples) + " examples do not fit i32 indices");
  int64_t base = num_examples / num_shards, extra = num_examples % num_shards;
  int64_t steps = steps_per_epoch(base + (extra > 0 ? 1 : 0), batch_size);
  CohortBatches out = make_grid(op, num_shards, steps, batch_size);
  int64_t stride = steps * batch_size;
  for (int64_t j = 0; j < num_shards; ++j) {
    int64_t begin = j * base + std::min(j, extra);
    int64_t n = base + (j < extra ? 1 : 0);
    auto in_order = [&](int64_t) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = begin + i;
      return order;
    };
    fill_client(op, n, steps, batch_size, 1, in_order, out.idx.data<int32_t>() + j * stride,
                out.mask.data<float>() + j * stride);
    out.sizes.data<float>()[j] = static_cast<float>(n);
  }
  return out;
}

}  // namespace drx::data
