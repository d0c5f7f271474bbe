#pragma once
// The building blocks of DP-FedAvg (McMahan et al. 2018, "Learning Differentially Private
// Recurrent Language Models"), on Trees inside drx programs:
//
//   client:  delta_k = clip(delta_k, C) = delta_k * min(1, C / ||delta_k||_2)   (all leaves)
//   server:  delta = (sum_k delta_k + N(0, (z C)^2 I)) / expected cohort size
//
// with uniform client weights and a FIXED denominator (the expected cohort size, qN for
// Poisson sampling), so that one client changes the numerator's sensitivity by at most C and
// the denominator not at all. Adaptive clipping (Andrew et al. 2021, "Differentially Private
// Learning with Adaptive Clipping") moves C towards the target quantile gamma of the clients'
// update norms with the geometric rule C <- C exp(-eta (b - gamma)), b the noisy fraction of
// clients whose norm was at most C; the count's noise shares the privacy budget, so the
// update's noise multiplier becomes z_delta = (z^-2 - (2 sigma_b)^-2)^(-1/2).
#include "drx/core/value.h"
#include "drx/trace/tree.h"

namespace drx::privacy {

struct Clipped {
  Tree update;  // scaled to L2 norm at most clip
  Value norm;   // the norm before clipping
};
// update * min(1, clip / ||update||) over all leaves (a clip of +inf leaves it unchanged; a
// zero update stays zero). clip: a floating scalar Value. A clip known when tracing (a
// constant) must be >= 0 or +inf, else drx::Error; a traced clip that is negative or NaN at run
// time is treated as 0 (the update becomes zero), never as a factor that flips or poisons it.
Clipped clip_by_l2_norm(const Tree& update, const Value& clip);

// Independent N(0, stddev^2) noise for every element of every leaf of `like` (leaf i drawn
// with the key split(key, leaves)[i]), in each leaf's dtype. stddev: a floating scalar Value.
Tree gaussian_noise_like(const Tree& like, const Value& key, const Value& stddev);

// (sum + N(0, (noise_multiplier clip)^2)) / expected_cohort, the DP-FedAvg estimate of the
// mean update from the sum of clipped updates. noise_multiplier 0 adds no noise at all.
// Errors: noise_multiplier NaN, infinite or negative; with noise_multiplier > 0, a clip known
// when tracing that is infinite, NaN or negative (the noise std z * clip would be infinite or
// meaningless).
Tree noisy_mean(const Tree& sum_of_clipped, const Value& key, double noise_multiplier,
                const Value& clip, double expected_cohort);

struct AdaptiveClipping {
  double target_quantile = 0.5;  // gamma
  double learning_rate = 0.2;    // eta
  double count_noise = 0;        // sigma_b, the std of the noise on the unclipped count
};
// The next clip: clip * exp(-eta (b - gamma)), b = (unclipped_count + N(0, sigma_b^2)) /
// expected_cohort.
Value adapted_clip(const Value& clip, const Value& unclipped_count, const Value& key,
                   const AdaptiveClipping& adaptive, double expected_cohort);

// The noise multiplier left for the update when the unclipped count takes its share of a
// total noise multiplier z: (z^-2 - (2 sigma_b)^-2)^(-1/2) (Andrew et al. 2021, Thm. 1).
// Throws drx::Error unless 2 sigma_b > z > 0.
double update_noise_multiplier(double noise_multiplier, double count_noise);

}  // namespace drx::privacy
