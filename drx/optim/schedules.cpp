#include "drx/optim/schedules.h"

#include <numbers>
#include <string>
#include <utility>

#include "drx/core/interpret.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/program_of.h"

DRX_PUBLIC_OPS_FILE(optim_schedules);

namespace drx::optim {

namespace {

Value as_f64(const Value& count) { return astype(count, DType::f64); }

void check_steps(const char* op, const char* name, int64_t steps, int64_t least) {
  if (steps < least)
    throw Error(std::string(op) + ": " + name + " must be >= " + std::to_string(least) + ", got " +
                std::to_string(steps));
}

}  // namespace

DRX_PUBLIC_OP("optim::constant_schedule", "(value: double) -> Schedule", "value at every step.");
Schedule constant_schedule(double value) {
  detail::check_finite("constant_schedule", "value", value);
  return [value](const Value&) { return fill({}, value, DType::f64); };
}

DRX_PUBLIC_OP("optim::linear_schedule",
              "(init_value: double, end_value: double, transition_steps: int64, transition_begin: "
              "int64 = 0) -> Schedule",
              "Linear from init_value to end_value over transition_steps steps.");
Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin) {
  const char* op = "linear_schedule";
  detail::check_finite(op, "init_value", init_value);
  detail::check_finite(op, "end_value", end_value);
  check_steps(op, "transition_steps", transition_steps, 0);
  check_steps(op, "transition_begin", transition_begin, 0);
  if (transition_steps == 0) return constant_schedule(init_value);
  const double steps = static_cast<double>(transition_steps);
  const double begin = static_cast<double>(transition_begin);
  return [=](const Value& count) {
    Value t = minimum(maximum(as_f64(count) - begin, 0.0), steps);
    Value remaining = 1.0 - t / steps;
    return (init_value - end_value) * remaining + end_value;
  };
}

DRX_PUBLIC_OP(
    "optim::cosine_decay_schedule",
    "(init_value: double, decay_steps: int64, alpha: double = 0, exponent: double = 1) -> Schedule",
    "Cosine decay from init_value to alpha * init_value over decay_steps.");
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha,
                               double exponent) {
  const char* op = "cosine_decay_schedule";
  detail::check_finite(op, "init_value", init_value);
  check_steps(op, "decay_steps", decay_steps, 1);
  detail::check_finite(op, "alpha", alpha);
  detail::check_finite(op, "exponent", exponent);
  const double steps = static_cast<double>(decay_steps);
  return [=](const Value& count) {
    Value t = minimum(as_f64(count), steps);
    Value cosine = 0.5 * (1.0 + cos(std::numbers::pi * t / steps));
    Value shaped = exponent == 1.0 ? cosine : pow(cosine, exponent);
    return init_value * ((1.0 - alpha) * shaped + alpha);
  };
}

DRX_PUBLIC_OP("optim::warmup_cosine_decay_schedule",
              "(init_value: double, peak_value: double, warmup_steps: int64, decay_steps: int64, "
              "end_value: double = 0, exponent: double = 1) -> Schedule",
              "Linear warmup to peak_value, then cosine decay to end_value.");
Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value, double exponent) {
  const char* op = "warmup_cosine_decay_schedule";
  detail::check_finite(op, "peak_value", peak_value);
  detail::check_finite(op, "end_value", end_value);
  check_steps(op, "warmup_steps", warmup_steps, 0);
  if (decay_steps <= warmup_steps)
    throw Error(std::string(op) + ": decay_steps (the whole length, warmup included) must exceed " +
                "warmup_steps = " + std::to_string(warmup_steps) + ", got " +
                std::to_string(decay_steps));
  // The decay ends at end_value: alpha is its fraction of the peak (0 for a zero peak).
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  return join_schedules(
      {linear_schedule(init_value, peak_value, warmup_steps),
       cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)},
      {warmup_steps});
}

DRX_PUBLIC_OP("optim::join_schedules",
              "(schedules: vector<Schedule>, boundaries: vector<int64>) -> Schedule",
              "Schedules one after another, each counting from its own start.");
Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries) {
  const char* op = "join_schedules";
  if (schedules.empty()) throw Error(std::string(op) + ": no schedules given");
  if (boundaries.size() + 1 != schedules.size())
    throw Error(std::string(op) + ": " + std::to_string(schedules.size()) + " schedules need " +
                std::to_string(schedules.size() - 1) + " boundaries, got " +
                std::to_string(boundaries.size()));
  for (size_t i = 0; i < boundaries.size(); ++i) {
    check_steps(op, "every boundary", boundaries[i], 0);
    if (i > 0 && boundaries[i] <= boundaries[i - 1])
      throw Error(std::string(op) + ": boundaries must increase, got " +
                  std::to_string(boundaries[i - 1]) + " then " + std::to_string(boundaries[i]));
  }
  for (const Schedule& s : schedules)
    if (!s) throw Error(std::string(op) + ": an empty Schedule was given");
  return [op, schedules = std::move(schedules),
          boundaries = std::move(boundaries)](const Value& count) {
    Value out = detail::in_dtype(detail::scheduled(op, schedules[0], count), DType::f64);
    for (size_t i = 0; i < boundaries.size(); ++i) {
      const double b = static_cast<double>(boundaries[i]);
      Value later =
          detail::in_dtype(detail::scheduled(op, schedules[i + 1], count - b), DType::f64);
      out = where(less(count, scalar_like(count, b)), out, later);
    }
    return out;
  };
}

DRX_PUBLIC_OP("optim::schedule_value", "(schedule: Schedule, count: int64) -> double",
              "A schedule's value at count, computed on the host.");
double schedule_value(const Schedule& schedule, int64_t count) {
  if (count < 0 || count > INT32_MAX)
    throw Error("schedule_value: count must be in [0, 2^31), got " + std::to_string(count));
  Program p = drx::trace(
      [&](Value c) {
        return detail::in_dtype(detail::scheduled("schedule_value", schedule, c), DType::f64);
      },
      {Type(DType::i32, {})});
  return run(p, {Array::scalar<int32_t>(static_cast<int32_t>(count))})[0].item<double>();
}

}  // namespace drx::optim
