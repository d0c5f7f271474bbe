#include "drx/privacy/dp_fedavg.h"

#include <cmath>
#include <optional>
#include <string>

#include "drx/core/trace.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"
#include "drx/random/random.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(privacy_dp_fedavg);

namespace drx::privacy {
namespace {

void require_scalar(const char* op, const char* what, const Value& v) {
  const Type& t = v.type();
  if (!is_floating(t.dtype) || !t.shape.empty() || !t.placement.empty())
    throw Error(std::string(op) + ": " + what + " must be an unplaced floating-point scalar, got " +
                t.str());
}

void require_positive(const char* op, const char* what, double v) {
  if (!(v > 0) || !std::isfinite(v))
    throw Error(std::string(op) + ": " + what + " = " + std::to_string(v) +
                ", expected a finite positive number");
}

// The value of a scalar that is fixed when tracing (a constant, possibly converted), so that
// a bad one is an error now rather than a NaN in every round; nullopt when it is computed or
// an input.
std::optional<double> value_when_traced(const Value& v) {
  const Program& p = v.trace()->program;
  for (const Eqn& e : p.eqns) {
    if (e.outs.size() != 1 || e.outs[0] != v.id()) continue;
    if (e.prim == &prims::constant()) {
      const Array& a = e.params.get_array("value", "constant");
      if (a.size() == 1) return a.element_as_double(0);
    } else if (e.prim == &prims::convert() && e.ins.size() == 1) {
      return value_when_traced(Value(v.trace_ptr(), e.ins[0]));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

DRX_PUBLIC_OP(
    "privacy::clip_by_l2_norm", "(update: Tree, clip: Value) -> Clipped{update: Tree, norm: Value}",
    "The update scaled to global L2 norm at most clip (+inf: unchanged), and its norm before.");
Clipped clip_by_l2_norm(const Tree& update, const Value& clip) {
  require_scalar("clip_by_l2_norm", "clip", clip);
  if (std::optional<double> c = value_when_traced(clip); c && !(*c >= 0))
    throw Error("clip_by_l2_norm: clip = " + std::to_string(*c) +
                ", expected a number >= 0 (+inf: no clipping)");
  const Value norm = tree_l2_norm(update).value();
  // A traced clip that is negative or NaN clips as 0: a negative factor would flip the update
  // and NaN would poison it. The factor is bound / norm where that is below 1 (the same bits as
  // min(1, bound / norm)), else exactly 1: also for a zero update and for bound = inf.
  const Value c = astype(clip, norm.dtype());
  const Value zero = scalar_like(c, 0.0);
  const Value bound = where(greater(c, zero), c, zero);
  const Value factor = where(greater(norm, bound), bound / norm, scalar_like(norm, 1.0));
  Tree clipped =
      tree_map([&](const Value& v) { return v * astype(factor, v.dtype()); }, tree_values(update));
  return {clipped, norm};
}

DRX_PUBLIC_OP("privacy::gaussian_noise_like", "(like: Tree, key: Value, stddev: Value) -> Tree",
              "Independent N(0, stddev^2) noise shaped like every leaf of like.");
Tree gaussian_noise_like(const Tree& like, const Value& key, const Value& stddev) {
  require_scalar("gaussian_noise_like", "stddev", stddev);
  std::vector<Tree> leaves = tree_leaves(like);
  std::vector<Value> keys = random::split(key, static_cast<int64_t>(leaves.size()));
  std::vector<Tree> noise;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const DType dt = leaf_dtype(leaves[i]);
    if (!is_floating(dt))
      throw Error("gaussian_noise_like: leaf " + std::to_string(i) + " (" +
                  leaf_type_str(leaves[i]) + ") is not floating-point");
    noise.emplace_back(random::normal(keys[i], leaf_shape(leaves[i]), dt) * astype(stddev, dt));
  }
  return tree_unflatten(like, noise);
}

DRX_PUBLIC_OP("privacy::noisy_mean",
              "(sum_of_clipped: Tree, key: Value, noise_multiplier: double, clip: Value, "
              "expected_cohort: double) -> Tree",
              "DP-FedAvg's mean: (sum + N(0, (z clip)^2)) / expected_cohort.");
Tree noisy_mean(const Tree& sum_of_clipped, const Value& key, double noise_multiplier,
                const Value& clip, double expected_cohort) {
  require_scalar("noisy_mean", "clip", clip);
  require_positive("noisy_mean", "expected_cohort", expected_cohort);
  if (!(noise_multiplier >= 0) || !std::isfinite(noise_multiplier))
    throw Error("noisy_mean: noise_multiplier = " + std::to_string(noise_multiplier) +
                ", expected a finite number >= 0");
  // The noise's std is z * clip: an infinite clip (no clipping, unbounded sensitivity) with
  // noise would add infinite noise to every element.
  if (std::optional<double> c = value_when_traced(clip);
      c && noise_multiplier > 0 && !(*c >= 0 && std::isfinite(*c)))
    throw Error("noisy_mean: clip = " + std::to_string(*c) + " with noise_multiplier = " +
                std::to_string(noise_multiplier) + ": the noise std z * clip is not a finite " +
                "number; with noise the clip must be finite and >= 0 (an infinite clip, no " +
                "clipping, has unbounded sensitivity: use noise_multiplier 0)");
  Tree total = tree_values(sum_of_clipped);
  // z = 0 adds nothing (not 0 * noise, which would be NaN for an infinite clip).
  if (noise_multiplier > 0)
    total = tree_add(total, gaussian_noise_like(total, key, clip * noise_multiplier));
  return tree_map([&](const Value& v) { return v / fill({}, expected_cohort, v.dtype()); }, total);
}

DRX_PUBLIC_OP("privacy::adapted_clip",
              "(clip: Value, unclipped_count: Value, key: Value, adaptive: AdaptiveClipping, "
              "expected_cohort: double) -> Value",
              "The next clip of adaptive clipping: clip exp(-eta (b - gamma)), b the noisy "
              "unclipped fraction.");
Value adapted_clip(const Value& clip, const Value& unclipped_count, const Value& key,
                   const AdaptiveClipping& a, double expected_cohort) {
  require_scalar("adapted_clip", "clip", clip);
  require_scalar("adapted_clip", "unclipped_count", unclipped_count);
  require_positive("adapted_clip", "expected_cohort", expected_cohort);
  if (!(a.target_quantile >= 0 && a.target_quantile <= 1) || !(a.learning_rate >= 0) ||
      !(a.count_noise >= 0) || !std::isfinite(a.learning_rate) || !std::isfinite(a.count_noise))
    throw Error("adapted_clip: target_quantile " + std::to_string(a.target_quantile) +
                ", learning_rate " + std::to_string(a.learning_rate) + ", count_noise " +
                std::to_string(a.count_noise) +
                ": expected a quantile in [0, 1] and non-negative rates");
  Value count = astype(unclipped_count, clip.dtype());
  if (a.count_noise > 0) count = count + random::normal(key, {}, clip.dtype()) * a.count_noise;
  Value fraction = count / expected_cohort;
  return clip * exp((fraction - a.target_quantile) * -a.learning_rate);
}

DRX_PUBLIC_OP("privacy::update_noise_multiplier",
              "(noise_multiplier: double, count_noise: double) -> double",
              "The noise multiplier left for the update when the unclipped count takes its share.");
double update_noise_multiplier(double z, double sigma_b) {
  if (!(z > 0) || !(2 * sigma_b > z) || !std::isfinite(sigma_b))
    throw Error("update_noise_multiplier: noise multiplier " + std::to_string(z) +
                " and count noise " + std::to_string(sigma_b) +
                ": adaptive clipping needs 2 sigma_b > z > 0 (the count's share of the budget "
                "must leave some for the update)");
  return 1.0 / std::sqrt(1.0 / (z * z) - 1.0 / (4 * sigma_b * sigma_b));
}

}  // namespace drx::privacy
