#pragma once
// Learning-rate schedules in the optax style: a schedule maps the step count to a value.
//
// The count is an i32 scalar Value (the number of updates applied so far, 0 at the first
// update) held in the optimizer state, so a scheduled optimizer runs inside any program, as a
// scan carry, and under grad and vmap like any other traced function. The built-in schedules
// return an f64 scalar; the transformation converts it to each leaf's dtype.
#include <cstdint>
#include <functional>
#include <vector>

#include "drx/core/value.h"

namespace drx::optim {

using Schedule = std::function<Value(const Value& count)>;

// `value` at every step.
Schedule constant_schedule(double value);
// From init_value to end_value linearly over transition_steps steps starting at
// transition_begin; init_value before, end_value after. transition_steps 0: init_value always.
Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin = 0);
// init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * min(t, decay_steps) / decay_steps)))^exponent
// + alpha): from init_value down to alpha * init_value at decay_steps, then constant.
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0.0,
                               double exponent = 1.0);
// Linear warmup from init_value to peak_value over warmup_steps, then a cosine decay from
// peak_value to end_value over the remaining decay_steps - warmup_steps (decay_steps is the
// whole length, warmup included, as in optax).
Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value = 0.0,
                                      double exponent = 1.0);
// schedules[0] before boundaries[0], then schedules[k] at (t - boundaries[k-1]) from
// boundaries[k-1] on: each schedule counts from its own start. One boundary fewer than
// schedules, increasing.
Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries);

// The schedule's value at `count`, computed on the host (traced once and interpreted): for
// plots, logs and tests.
double schedule_value(const Schedule& schedule, int64_t count);

}  // namespace drx::optim
