"""Differential privacy for federated learning: DP-FedAvg's pieces (McMahan et al. 2018) and
an RDP accountant, the C++ core's (drx/privacy).

    clipped, norm = drx.privacy.clip_by_l2_norm(update, clip)        # a pytree, scaled
    mean = drx.privacy.noisy_mean(summed, key, noise_multiplier, clip, expected_cohort)
    eps = drx.privacy.compute_epsilon(1.1, sampling_rate=0.01, steps=1000, delta=1e-5)

The pieces on arrays take and return pytrees (dicts, lists, tuples ... of arrays) and run
inside drx.jit, grad, vmap and map_fn bodies on traced values; called on NumPy arrays outside a
trace they run as a compiled call. Numbers that shape the program (noise multipliers, the
expected cohort, adaptive clipping's rates) are static Python numbers; clips, counts and
standard deviations may be traced. The accountant is plain host arithmetic on Python floats.
Every invalid argument raises drx.Error naming the function.
"""

import collections
import math

import numpy as np

from . import _drx
from . import tree_util
from ._tracer import Error, Tracer, as_value, is_python_scalar
from .random import _apply, _check_key

__all__ = [
    "AdaptiveClipping", "Clipped", "DpFedAvgAccounting", "EpsilonAtOrder", "RdpAccountant",
    "adapted_clip", "clip_by_l2_norm", "compute_epsilon", "default_rdp_orders",
    "epsilon_from_rdp", "gaussian_noise_like", "noisy_mean", "rdp_fixed_size_gaussian",
    "rdp_poisson_gaussian", "update_noise_multiplier",
]

Clipped = collections.namedtuple("Clipped", ["update", "norm"])
Clipped.__doc__ = "clip_by_l2_norm's result: the clipped pytree and its global L2 norm before."

EpsilonAtOrder = collections.namedtuple("EpsilonAtOrder", ["epsilon", "order"])
EpsilonAtOrder.__doc__ = "epsilon of (epsilon, delta)-DP and the RDP order attaining it."

AdaptiveClipping = collections.namedtuple(
    "AdaptiveClipping", ["target_quantile", "learning_rate", "count_noise"],
    defaults=(0.5, 0.2, 0.0))
AdaptiveClipping.__doc__ = ("Adaptive clipping's settings (Andrew et al. 2021): the target "
                            "quantile gamma, the learning rate eta, the count's noise std "
                            "sigma_b; adapted_clip(..., **settings._asdict()).")


# ---- helpers -------------------------------------------------------------------------------
def _leaves(fn, tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    try:
        return [as_value(l) for l in leaves], treedef
    except (TypeError, ValueError) as e:
        raise Error(f"{fn}: a leaf of the tree is not an array: {e}") from None


def _rebuild(treedef, values):
    return tree_util.tree_unflatten(treedef, [Tracer(v) for v in values])


def _scalar_arg(x):
    """A Python number as a float (weak f64 in a trace, as the C++ wants floating scalars)."""
    return float(x) if is_python_scalar(x) else x


def _concrete_value(x):
    """x's value when it is a concrete scalar (a number or a 0-d NumPy array), else None."""
    if isinstance(x, Tracer):
        return None
    if is_python_scalar(x) or isinstance(x, np.generic):
        return float(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "fiub":
        return float(x)
    return None


def _static_number(fn, what, x):
    if isinstance(x, Tracer):
        raise Error(f"{fn}: {what} must be a concrete Python number (it is static), got a "
                    "traced value")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise Error(f"{fn}: {what} must be a number, got {x!r}") from None


def _floating(v, dtype):
    """A Value of an integer or bool dtype converted to dtype (counts are often integers)."""
    return v if v.dtype in ("f16", "bf16", "f32", "f64") else _drx.astype(v, dtype)


# ---- DP-FedAvg's pieces --------------------------------------------------------------------
def _clip_impl(tree, clip):
    values, treedef = _leaves("clip_by_l2_norm", tree)
    out, norm = _drx.privacy_clip_by_l2_norm(values, as_value(clip))
    return Clipped(_rebuild(treedef, out), Tracer(norm))


def clip_by_l2_norm(tree, clip):
    """tree (a pytree of floating arrays) scaled by min(1, clip / ||tree||), ||tree|| the global
    L2 norm over all leaves, and that norm before clipping: a Clipped(update, norm). clip: a
    floating scalar (a Python number too) >= 0; +inf leaves the tree unchanged, a zero tree
    stays zero. A traced clip that is negative or NaN at run time clips to zero.

    C++: """
    c = _concrete_value(clip)
    if c is not None and not c >= 0:
        raise Error(f"clip_by_l2_norm: clip = {c}, expected a number >= 0 (+inf: no clipping)")
    return _apply(_clip_impl, (tree, _scalar_arg(clip)))


def _noise_impl(like, key, stddev):
    values, treedef = _leaves("gaussian_noise_like", like)
    noise = _drx.privacy_gaussian_noise_like(values, as_value(key), as_value(stddev))
    return _rebuild(treedef, noise)


def gaussian_noise_like(like, key, stddev):
    """Independent N(0, stddev^2) noise shaped like every leaf of like (a pytree of floating
    arrays), in each leaf's dtype; leaf i (in tree_util's order) is drawn with the key
    drx.random.split(key, number of leaves)[i]. stddev: a floating scalar.

    C++: """
    key = _check_key("gaussian_noise_like", key)
    return _apply(_noise_impl, (like, key, _scalar_arg(stddev)))


def _noisy_mean_impl(tree, key, clip, noise_multiplier, expected_cohort):
    values, treedef = _leaves("noisy_mean", tree)
    out = _drx.privacy_noisy_mean(values, as_value(key), noise_multiplier, as_value(clip),
                                  expected_cohort)
    return _rebuild(treedef, out)


def noisy_mean(sum_of_clipped, key, noise_multiplier, clip, expected_cohort):
    """DP-FedAvg's estimate of the mean update: (sum_of_clipped + N(0, (noise_multiplier clip)^2))
    / expected_cohort, for every leaf of the pytree sum_of_clipped (noise from
    gaussian_noise_like(sum_of_clipped, key, noise_multiplier * clip)). noise_multiplier 0 adds
    no noise at all. noise_multiplier and expected_cohort are static numbers; clip a floating
    scalar, finite and >= 0 when there is noise.

    C++: """
    key = _check_key("noisy_mean", key)
    z = _static_number("noisy_mean", "noise_multiplier", noise_multiplier)
    m = _static_number("noisy_mean", "expected_cohort", expected_cohort)
    c = _concrete_value(clip)
    if c is not None and z > 0 and not (c >= 0 and math.isfinite(c)):
        raise Error(f"noisy_mean: clip = {c} with noise_multiplier = {z}: the noise std "
                    "z * clip is not a finite number; with noise the clip must be finite and "
                    ">= 0")
    return _apply(_noisy_mean_impl, (sum_of_clipped, key, _scalar_arg(clip)), (z, m))


def _adapted_clip_impl(clip, count, key, gamma, eta, sigma, m):
    c = as_value(clip)
    n = _floating(as_value(count), c.dtype)
    return Tracer(_drx.privacy_adapted_clip(c, n, as_value(key), gamma, eta, sigma, m))


def adapted_clip(clip, unclipped_count, key, expected_cohort, *, target_quantile=0.5,
                 learning_rate=0.2, count_noise=0.0):
    """Adaptive clipping's next clip (Andrew et al. 2021): clip * exp(-learning_rate (b -
    target_quantile)), b = (unclipped_count + N(0, count_noise^2)) / expected_cohort the noisy
    fraction of clients whose update norm was at most clip. clip: a floating scalar;
    unclipped_count: a scalar (an integer count is converted to clip's dtype); the rest static
    numbers (AdaptiveClipping holds the three settings).

    C++: """
    key = _check_key("adapted_clip", key)
    statics = tuple(_static_number("adapted_clip", name, v) for name, v in (
        ("target_quantile", target_quantile), ("learning_rate", learning_rate),
        ("count_noise", count_noise), ("expected_cohort", expected_cohort)))
    return _apply(_adapted_clip_impl, (_scalar_arg(clip), unclipped_count, key), statics)


def update_noise_multiplier(noise_multiplier, count_noise):
    """The noise multiplier left for the update when adaptive clipping's unclipped count (noise
    std count_noise) takes its share of a total noise multiplier z: (z^-2 - (2
    count_noise)^-2)^(-1/2) (Andrew et al. 2021, Thm. 1). Needs 2 count_noise > z > 0.

    C++: """
    return _drx.privacy_update_noise_multiplier(
        _static_number("update_noise_multiplier", "noise_multiplier", noise_multiplier),
        _static_number("update_noise_multiplier", "count_noise", count_noise))


# ---- the RDP accountant --------------------------------------------------------------------
def default_rdp_orders():
    """The RDP orders used by default: 1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5, the
    integers 5..63, 128, 256, 512 (72 orders; TF Privacy's compute_dp_sgd_privacy list)."""
    return list(_drx.privacy_default_rdp_orders())


def _orders(orders):
    return default_rdp_orders() if orders is None else [float(o) for o in np.ravel(orders)]


def rdp_poisson_gaussian(q, noise_multiplier, orders=None):
    """RDP at each order (a NumPy float64 array) of ONE step of the Poisson-subsampled Gaussian
    mechanism: sampling rate q, noise std noise_multiplier times the L2 sensitivity, neighbours
    that add or remove one example (Mironov, Talwar, Zhang 2019). Orders: > 1, the default
    list when None. Multiply by the number of steps to compose."""
    return np.array(_drx.privacy_rdp_poisson_gaussian(float(q), float(noise_multiplier),
                                                      _orders(orders)))


def rdp_fixed_size_gaussian(cohort_size, population, noise_multiplier, orders=None,
                            bound="gaussian_theorem27"):
    """RDP at each order of ONE step of drawing exactly cohort_size of population without
    replacement and adding Gaussian noise, neighbours that replace one example (Wang, Balle,
    Kasiviswanathan 2019: bound "gaussian_theorem27", TF Privacy's, or "general_theorem9")."""
    return np.array(_drx.privacy_rdp_fixed_size_gaussian(
        int(cohort_size), int(population), float(noise_multiplier), _orders(orders), bound))


def epsilon_from_rdp(orders, rdp, delta, conversion="balle2020"):
    """The smallest epsilon of (epsilon, delta)-DP over the orders from per-order RDP totals,
    and the order attaining it: EpsilonAtOrder(epsilon, order). conversion: "balle2020" (Balle
    et al. 2020, TF Privacy's and Opacus's today) or "mironov2017" (Mironov 2017, Prop. 3)."""
    e, o = _drx.privacy_epsilon_from_rdp([float(v) for v in np.ravel(orders)],
                                         [float(v) for v in np.ravel(rdp)], float(delta),
                                         conversion)
    return EpsilonAtOrder(e, o)


def compute_epsilon(noise_multiplier, sampling_rate, steps, delta, *, orders=None,
                    conversion="balle2020"):
    """epsilon of (epsilon, delta)-DP after `steps` steps of the Poisson-subsampled Gaussian
    mechanism (DP-SGD's, DP-FedAvg's with Poisson sampling) with this noise multiplier and
    sampling rate: steps * rdp_poisson_gaussian(...) converted by epsilon_from_rdp, the best
    over the orders (the default list when None). 0 steps cost 0."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise Error(f"compute_epsilon: steps = {steps!r}, expected an int >= 0")
    orders = _orders(orders)
    rdp = rdp_poisson_gaussian(sampling_rate, noise_multiplier, orders) * int(steps)
    return epsilon_from_rdp(orders, rdp, delta, conversion).epsilon


class RdpAccountant:
    """Accumulates identical steps of one subsampled Gaussian mechanism: sampling "poisson"
    (q = cohort_size / population, add/remove-one neighbours) or "fixed_size" (exactly
    cohort_size of population, replace-one neighbours), noise std noise_multiplier times the L2
    sensitivity. RDP composes by addition over steps; epsilon(delta) is the best conversion
    over the orders."""

    def __init__(self, sampling, cohort_size, population, noise_multiplier, orders=None):
        self._acct = _drx.privacy_RdpAccountant(
            sampling, int(cohort_size), int(population), float(noise_multiplier),
            None if orders is None else _orders(orders))

    def step(self, count=1):
        """Records count (>= 0) more steps."""
        self._acct.step(int(count))
        return self

    def epsilon(self, delta, conversion="balle2020"):
        """EpsilonAtOrder(epsilon, order) after steps steps (epsilon 0 before the first)."""
        return EpsilonAtOrder(*self._acct.epsilon(float(delta), conversion))

    def rdp(self):
        """RDP at each order after steps steps."""
        return np.array(self._acct.rdp())

    steps = property(lambda self: self._acct.steps, doc="Steps recorded so far.")
    sampling = property(lambda self: self._acct.sampling, doc='"poisson" or "fixed_size".')
    sampling_rate = property(lambda self: self._acct.sampling_rate,
                             doc="cohort_size / population.")
    noise_multiplier = property(lambda self: self._acct.noise_multiplier)
    orders = property(lambda self: list(self._acct.orders))
    rdp_per_step = property(lambda self: np.array(self._acct.rdp_per_step),
                            doc="RDP of one step at each order.")

    def __repr__(self):
        return (f"RdpAccountant({self.sampling!r}, sampling_rate={self.sampling_rate}, "
                f"noise_multiplier={self.noise_multiplier}, steps={self.steps})")


class DpFedAvgAccounting:
    """DP-FedAvg's accounting convention: `cohort` of `clients` a round, noise std
    noise_multiplier * clip on the clipped sum. "poisson" sampling is accounted with
    add/remove-one neighbours at noise_multiplier; "fixed_size" with replace-one neighbours at
    noise_multiplier / 2 (swapping one clipped update moves the sum by up to 2 clip)."""

    def __init__(self, sampling, cohort, clients, noise_multiplier):
        self._acct = _drx.privacy_DpFedAvgAccounting(sampling, int(cohort), int(clients),
                                                     float(noise_multiplier))

    def epsilon(self, rounds, delta):
        """epsilon of (epsilon, delta)-DP after `rounds` rounds (Balle et al. 2020's conversion,
        the best over the default orders); 0 for 0 rounds."""
        return self._acct.epsilon(int(rounds), float(delta))

    sampling = property(lambda self: self._acct.sampling)
    accounted_noise_multiplier = property(
        lambda self: self._acct.accounted_noise_multiplier,
        doc="The accountant's multiplier: z for poisson, z / 2 for fixed_size.")
    orders = property(lambda self: list(self._acct.orders))
    rdp_per_round = property(lambda self: np.array(self._acct.rdp_per_round))

    def __repr__(self):
        return (f"DpFedAvgAccounting({self.sampling!r}, accounted_noise_multiplier="
                f"{self.accounted_noise_multiplier})")


# Each DP-FedAvg function's docstring ends with its C++ counterpart's public-op table entry.
_CPP = {name: name + sig + "\n\n    " + doc for name, sig, doc in _drx.public_ops()}
for _f in (clip_by_l2_norm, gaussian_noise_like, noisy_mean, adapted_clip,
           update_noise_multiplier):
    _f.__doc__ += _CPP.get("drx::privacy::" + _f.__name__, "drx::privacy::" + _f.__name__)
del _f
