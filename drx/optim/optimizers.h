#pragma once
// Optimizers as GradientTransformations (drx/optim/transform.h), following optax's equations
// and defaults; g is the gradient, t the step count after this update (1 at the first), and
// each returns updates to ADD to the params (apply_updates).
//
//   sgd      u = -lr * g; with momentum mu: b = g + mu * b, u = -lr * b
//            (Nesterov: u = -lr * (g + mu * b)). PyTorch SGD with dampening 0 is the same.
//   adam     m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
//            u = -lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)   (bias-corrected)
//   adamw    u = -lr * (adam's direction + weight_decay * params)
//   adagrad  s = s + g^2 (s starts at initial_accumulator_value), u = -lr * g / sqrt(s + eps)
//   rmsprop  v = decay v + (1 - decay) g^2 (v starts at initial_scale),
//            u = -lr * g / sqrt(v + eps)   (eps_in_sqrt, optax's default)
//            u = -lr * g / (sqrt(v) + eps) (eps_in_sqrt = false, PyTorch's form);
//            centered: v - m^2 in place of v, m = decay m + (1 - decay) g;
//            momentum mu: b = u + mu * b applied after the learning rate, u = b.
//   yogi     m = b1 m + (1 - b1) g, v = v - (1 - b2) sign(v - g^2) g^2 (both start at
//            initial_accumulator_value), u = -lr * m_hat / (sqrt(v_hat) + eps), bias-corrected
//            as in adam (as optax's scale_by_yogi does today).
//
// Where PyTorch's torch.optim differs (pass these to match it):
//   RMSprop  alpha (= decay) defaults to 0.99, not 0.9, and eps is added outside the square
//            root: rmsprop(lr, 0.99, 1e-8, {.eps_in_sqrt = false}) is torch's RMSprop;
//            centered and momentum then match torch's too.
//   Adagrad  initial_accumulator_value defaults to 0 and eps (1e-10) is added outside the
//            square root, g / (sqrt(s) + eps): with eps = 0 on both sides and the same
//            initial_accumulator_value the two agree exactly; lr_decay has no counterpart.
//   AdamW    weight_decay defaults to 1e-2 (optax and drx: 1e-4); torch applies
//            p *= 1 - lr * weight_decay before the Adam step, the same update.
//   Adam     identical equations (torch rounds them in another order).
//
// Server optimizers of Reddi et al. 2021, "Adaptive Federated Optimization", Algorithm 2,
// applied to the pseudo-gradient g = -delta (delta: the clients' mean model change), with
// tau the adaptivity (the eps outside the root) and no bias correction:
//   m = b1 m + (1 - b1) g
//   fedadagrad: v = v + g^2;  fedyogi: v = v - (1 - b2) sign(v - g^2) g^2;
//   fedadam: v = b2 v + (1 - b2) g^2
//   u = (-lr * m) / (sqrt(v) + tau)    (x + u = x + lr * m_paper / (sqrt(v) + tau), where
//                                       the paper's m_paper, a moment of delta, is -m)
// v starts at initial_v (drx's FedAdam has always started at 0; the paper's analysis assumes
// a start of at least tau^2, which initial_v = tau * tau gives).
#include "drx/optim/transform.h"

namespace drx::optim {

// ---- the scaling steps the optimizers are chains of (updates not yet scaled by -lr) ----
// {"count", "mu", "nu"}: m_hat / (sqrt(v_hat + eps_root) + eps).
GradientTransformation scale_by_adam(double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                                     double eps_root = 0.0);
// {"sum_of_squares"}: g / sqrt(s + eps) where s > 0, else 0.
GradientTransformation scale_by_rss(double initial_accumulator_value = 0.1, double eps = 1e-7);
// {"nu"}: g / sqrt(v + eps), or g / (sqrt(v) + eps) when !eps_in_sqrt.
GradientTransformation scale_by_rms(double decay = 0.9, double eps = 1e-8,
                                    double initial_scale = 0.0, bool eps_in_sqrt = true);
// {"mu", "nu"}: as scale_by_rms with the variance v - m^2 in place of v.
GradientTransformation scale_by_stddev(double decay = 0.9, double eps = 1e-8,
                                       double initial_scale = 0.0, bool eps_in_sqrt = true);
// {"count", "mu", "nu"}: yogi's bias-corrected m_hat / (sqrt(v_hat + eps_root) + eps).
GradientTransformation scale_by_yogi(double b1 = 0.9, double b2 = 0.999, double eps = 1e-3,
                                     double eps_root = 0.0,
                                     double initial_accumulator_value = 1e-6);

// ---- optimizers -------------------------------------------------------------------------
GradientTransformation sgd(const LearningRate& lr, double momentum = 0.0, bool nesterov = false);
GradientTransformation adam(const LearningRate& lr, double b1 = 0.9, double b2 = 0.999,
                            double eps = 1e-8);
GradientTransformation adamw(const LearningRate& lr, double b1 = 0.9, double b2 = 0.999,
                             double eps = 1e-8, double weight_decay = 1e-4);
GradientTransformation adagrad(const LearningRate& lr, double initial_accumulator_value = 0.1,
                               double eps = 1e-7);
struct RmspropOptions {
  double initial_scale = 0.0;  // the start of v (PyTorch: 0, TF1: 1)
  bool eps_in_sqrt = true;     // optax: sqrt(v + eps); false: sqrt(v) + eps (PyTorch)
  bool centered = false;       // divide by the variance estimate v - m^2
  double momentum = 0.0;       // 0: none
  bool nesterov = false;
};
GradientTransformation rmsprop(const LearningRate& lr, double decay = 0.9, double eps = 1e-8,
                               const RmspropOptions& options = {});
GradientTransformation yogi(const LearningRate& lr, double b1 = 0.9, double b2 = 0.999,
                            double eps = 1e-3);

// ---- server optimizers on pseudo-gradients (Reddi et al. 2021) ---------------------------
// State {"m", "v"} (and "count" when lr is a schedule).
GradientTransformation fedadam(const LearningRate& lr, double b1 = 0.9, double b2 = 0.99,
                               double tau = 1e-3, double initial_v = 0.0);
GradientTransformation fedyogi(const LearningRate& lr, double b1 = 0.9, double b2 = 0.99,
                               double tau = 1e-3, double initial_v = 0.0);
GradientTransformation fedadagrad(const LearningRate& lr, double b1 = 0.9, double tau = 1e-3,
                                  double initial_v = 0.0);

}  // namespace drx::optim
