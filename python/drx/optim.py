"""drx.optim: optax's gradient transformations and schedules, and the federated round, from
the C++ core's drx/optim.

    tx = drx.optim.chain(drx.optim.clip_by_global_norm(1.0), drx.optim.adam(1e-3))
    state = tx.init(params)                           # params: any pytree of float arrays
    updates, state = tx.update(grads, state, params)  # eagerly, or inside jit/scan/map_fn
    params = drx.optim.apply_updates(params, updates)

Conventions (optax's, with drx's C++ equations and checks):

- A GradientTransformation has ``init(params) -> state`` and ``update(updates, state,
  params=None) -> (updates, state)``; updates are what you ADD to the params (sgd's is
  ``-lr * g``). The updates keep the pytree structure of the updates given.
- A state is a pytree of arrays that drx.jit, drx.lax.scan and map_fn carry: the C++ state
  with its dicts as dicts ({"count", "mu", "nu"} ...), its lists as tuples (a chain's state is
  the tuple of its parts' states; a transformation without state has the state ``()``), and
  the parts like params (moments) in the params' own pytree types. The step count is an
  int32 scalar. ``update`` returns a state of the structure it was given.
- Called on NumPy arrays outside a trace, ``update`` runs through its own compiled program
  (drx.jit, one per transformation object and signature), as JAX runs optax eagerly; ``init``
  and ``apply_updates`` work on the host arrays directly. Results are read-only NumPy arrays.
  Inside a trace everything works on traced values and inlines.
- A learning rate is a number, a schedule (``linear_schedule(...)``, any function of the int32
  step count returning a float scalar), or a traced scalar (a constant schedule, so that
  drx.grad can differentiate through it); with a schedule the state counts steps.
- Hyperparameters shape the program: they are Python numbers, checked when the transformation
  is made. Every error is a drx.Error naming the function ("adam: ...").

The federated round (``fedavg_round``) takes the model's loss as a Python function over
pytrees and runs the clients' local steps, the aggregation and the server optimizer as one drx
program over the placement "clients" (drx/optim/federated_round.h). ``fedavg_round(spec)``,
``lm_fedavg_round``, ``diloco_round`` and the evaluations are the C++ core's ready-made rounds
for its MLP and transformer, whose params are the C++ models' trees (nested dicts of arrays).
"""

import collections
import dataclasses

import numpy as np

from . import _drx
from . import tree_util
from ._api import jit, vmap
from ._tracer import Error, Tracer, as_value, dtype_name, is_python_scalar, weak_array

__all__ = [
    "ClientSgd", "DpSpec", "FederatedRound", "GradientTransformation", "LmRoundSpec",
    "LocalOptimizer", "LocalSteps", "OuterNesterov", "RoundSpec", "Schedule", "ServerKind",
    "ServerOptimizer", "adagrad", "adam", "adamw", "add_decayed_weights", "apply_updates",
    "chain", "clip_by_global_norm", "constant_schedule", "cosine_decay_schedule",
    "diloco_inner_init", "diloco_round", "dp_round_state", "evaluate_fn", "fedadagrad",
    "fedadam", "fedavg_round", "fedavg_round_body", "fedavg_round_on_client_data", "fedyogi",
    "identity", "join_schedules", "linear_schedule", "lm_evaluate_fn", "lm_fedavg_round",
    "local_steps", "parse_server_kind", "rmsprop", "scale", "scale_by_adam",
    "scale_by_learning_rate", "scale_by_rms", "scale_by_rss", "scale_by_schedule",
    "scale_by_stddev", "scale_by_yogi", "schedule_value", "server_kind_name", "sgd", "trace",
    "warmup_cosine_decay_schedule", "yogi",
]


# ---- trees across the boundary -------------------------------------------------------------
def _cpp_leaf(x, traced, what):
    """A leaf for the C++ side: inside a trace a Value (concrete leaves become constants),
    outside one an Array (a NumPy array viewed in place: the C++ side copies what it returns)."""
    if isinstance(x, Tracer):
        return x._value
    if isinstance(x, (_drx.Value, _drx.Array)):
        return _drx.constant(x.copy()) if traced and isinstance(x, _drx.Array) else x
    try:
        if traced:
            return as_value(x)
        if is_python_scalar(x):
            return weak_array(x)
        return _drx.asarray(x if type(x) is np.ndarray else np.asarray(x), False)
    except (TypeError, ValueError) as e:
        raise Error(f"{what}: a leaf of type {type(x).__name__} is not an array ({e})") from None


_SORTED_DICTS = (dict, collections.defaultdict)  # the dicts tree_util flattens by sorted key


def _nested(tree, leaf):
    """A pytree as the C++ side's form: a dict with string keys stays a dict (C++ sorts keys as
    tree_util does), every other node becomes the list of its children in tree_util's order,
    and leaves become leaf(x). So the C++ Tree's leaves come in tree_util's order."""
    if type(tree) in _SORTED_DICTS and all(type(k) is str for k in tree):
        return {k: _nested(v, leaf) for k, v in tree.items()}
    children, treedef = tree_util.tree_flatten(tree, is_leaf=lambda y: y is not tree)
    if tree_util.treedef_is_strict_leaf(treedef) and children and children[0] is tree:
        return leaf(tree)
    return [_nested(c, leaf) for c in children]


def _to_cpp(tree, what, traced=None):
    """_nested with leaves converted for the C++ side (Values inside a trace, else Arrays)."""
    if traced is None:
        traced = _drx.in_trace()
    return _nested(tree, lambda x: _cpp_leaf(x, traced, what))


def _cpp_leaves(nested):
    """The leaves of a C++ result in the Tree's canonical order (dicts come key-sorted)."""
    if isinstance(nested, dict):
        return [l for v in nested.values() for l in _cpp_leaves(v)]
    if isinstance(nested, (list, tuple)):
        return [l for v in nested for l in _cpp_leaves(v)]
    return [nested]


def _wrap(x):
    """A C++ result leaf for Python: a Tracer inside a trace, a read-only NumPy array outside."""
    if isinstance(x, _drx.Value):
        return Tracer(x)
    return x.numpy() if isinstance(x, _drx.Array) else x


def _rebuild(treedef, nested, what):
    """A C++ result as a pytree of structure treedef."""
    leaves = _cpp_leaves(nested)
    if len(leaves) != treedef.num_leaves:
        raise Error(f"{what}: the result has {len(leaves)} leaves where {treedef} has "
                    f"{treedef.num_leaves}")
    return treedef.unflatten([_wrap(l) for l in leaves])


def _plain(nested):
    """A C++ result with its dicts as dicts and lists as lists."""
    if isinstance(nested, dict):
        return {k: _plain(v) for k, v in nested.items()}
    if isinstance(nested, list):
        return [_plain(v) for v in nested]
    return _wrap(nested)


def _unmark(nested, params_def):
    """A state from init (params wrapped in the marker dict) as Python's state: dicts, tuples,
    and the parts like params rebuilt with the params' pytree types."""
    if isinstance(nested, dict):
        if len(nested) == 1 and _drx.optim_params_marker in nested:
            return _rebuild(params_def, nested[_drx.optim_params_marker], "init")
        return {k: _unmark(v, params_def) for k, v in nested.items()}
    if isinstance(nested, list):
        return tuple(_unmark(v, params_def) for v in nested)
    return _wrap(nested)


def _layout(nested):
    """The structure of a C++ tree (to compare two): dict keys, list lengths, leaves."""
    if isinstance(nested, dict):
        return ("d",) + tuple((k, _layout(v)) for k, v in sorted(nested.items()))
    if isinstance(nested, (list, tuple)):
        return ("l",) + tuple(_layout(v) for v in nested)
    return "*"


def _tree_of(treedef, arg):
    """An argument the C++ side passed to a Python function (its leaves: a list, or one Value)
    as a pytree of Tracers of structure treedef."""
    leaves = arg if isinstance(arg, list) else [arg]
    return treedef.unflatten([Tracer(v) for v in leaves])


def _scalar_value(x, what):
    """A user function's scalar result as a Value of the trace (a Python number as f64)."""
    if isinstance(x, Tracer):
        return x._value
    if is_python_scalar(x):
        return as_value(float(x))
    try:
        return as_value(x)
    except (TypeError, ValueError):
        raise Error(f"{what} must return an array, got {type(x).__name__}") from None


def _leaf_values(tree, what):
    """The leaves of a user function's pytree result as Values, and its structure."""
    leaves, treedef = tree_util.tree_flatten(tree)
    return [_scalar_value(l, what) for l in leaves], treedef


# ---- hyperparameters ------------------------------------------------------------------------
def _float(x, name, what):
    if isinstance(x, Tracer):
        raise Error(f"{what}: {name} must be a Python number (it shapes the program), got a "
                    "traced array")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise Error(f"{what}: {name} must be a number, got {type(x).__name__}") from None


def _int(x, name, what):
    if isinstance(x, (bool, np.bool_)) or isinstance(x, Tracer):
        raise Error(f"{what}: {name} must be an integer, got {type(x).__name__}")
    try:
        return int(x.__index__())
    except (AttributeError, TypeError):
        raise Error(f"{what}: {name} must be an integer, got {type(x).__name__}") from None


# ---- schedules ------------------------------------------------------------------------------
class Schedule:
    """A schedule: a function of the step count (an int32 scalar, the updates applied so far)
    returning a float scalar, as optax's schedules. drx's built-in schedules are C++ ones; any
    Python function of the count (``lambda count: 0.1 * 0.5 ** (count // 100)``, written with
    drx's operators) can be wrapped as ``Schedule(fn)`` or passed wherever a schedule goes.

    ``schedule(count)``: inside a trace a traced f64 scalar (count may be traced); on a Python
    int a NumPy float64 (computed on the host, as schedule_value); on an integer array the
    values at each count.
    """

    __slots__ = ("_s", "name", "_eager")

    def __init__(self, fn, name=None):
        if isinstance(fn, _drx.optim_Schedule):
            self._s = fn
        elif isinstance(fn, Schedule):
            self._s = fn._s
        elif callable(fn):
            self._s = _schedule_from_fn(fn, name or getattr(fn, "__name__", "schedule"))
        else:
            raise Error(f"Schedule: expected a function of the step count, got "
                        f"{type(fn).__name__}")
        self.name = name or self._s.name
        self._eager = None

    def __call__(self, count):
        if isinstance(count, Tracer) or _drx.in_trace():
            return Tracer(self._s(_count_value(count)))
        c = np.asarray(count)
        if c.ndim == 0 and np.issubdtype(c.dtype, np.integer):
            return np.float64(schedule_value(self, int(c)))
        if not np.issubdtype(c.dtype, np.integer):
            raise Error(f"{self.name}: the step count must be an integer, got {c.dtype}")
        if self._eager is None:
            self._eager = jit(vmap(lambda t: self(t)))  # the C++ schedules take scalars
        return self._eager(c.astype(np.int32))

    def __repr__(self):
        return f"<drx.optim.Schedule {self.name}>"


def _count_value(count):
    if isinstance(count, Tracer):
        return count._value
    if isinstance(count, (int, np.integer)) and not isinstance(count, bool):
        return _drx.constant(_drx.asarray(np.asarray(count, dtype=np.int32)))
    return as_value(count)


def _schedule_from_fn(fn, name):
    """A Python function of the count as a C++ Schedule."""
    def flat(args):
        return [_scalar_value(fn(Tracer(args[0])), f"the schedule {name}")]
    return _drx.optim_schedule_from_fn(flat, name)


def _schedule(s, what):
    """A schedule argument as the C++ Schedule."""
    if isinstance(s, Schedule):
        return s._s
    if isinstance(s, _drx.optim_Schedule):
        return s
    if callable(s):
        return _schedule_from_fn(s, getattr(s, "__name__", "schedule"))
    raise Error(f"{what}: expected a schedule (a drx.optim schedule or a function of the step "
                f"count), got {type(s).__name__}")


def _learning_rate(lr, what):
    """A learning rate for the C++ side: a float, or a C++ Schedule (a schedule, a function of
    the count, or a traced scalar as a constant schedule)."""
    if isinstance(lr, Tracer):
        value = lr
        return _schedule_from_fn(lambda count: value, "traced learning rate")
    if isinstance(lr, (Schedule, _drx.optim_Schedule)) or callable(lr):
        return _schedule(lr, what)
    return _float(lr, "the learning rate", what)


def constant_schedule(value):
    """``value`` at every step (optax.constant_schedule)."""
    return Schedule(_drx.optim_constant_schedule(_float(value, "value", "constant_schedule")))


def linear_schedule(init_value, end_value, transition_steps, transition_begin=0):
    """From init_value to end_value linearly over transition_steps steps starting at
    transition_begin; init_value before, end_value after (optax.linear_schedule).
    transition_steps 0: init_value always."""
    what = "linear_schedule"
    return Schedule(_drx.optim_linear_schedule(
        _float(init_value, "init_value", what), _float(end_value, "end_value", what),
        _int(transition_steps, "transition_steps", what),
        _int(transition_begin, "transition_begin", what)))


def cosine_decay_schedule(init_value, decay_steps, alpha=0.0, exponent=1.0):
    """init_value * ((1 - alpha) * (0.5 (1 + cos(pi min(t, decay_steps) / decay_steps)))
    ** exponent + alpha): from init_value down to alpha * init_value at decay_steps, then
    constant (optax.cosine_decay_schedule)."""
    what = "cosine_decay_schedule"
    return Schedule(_drx.optim_cosine_decay_schedule(
        _float(init_value, "init_value", what), _int(decay_steps, "decay_steps", what),
        _float(alpha, "alpha", what), _float(exponent, "exponent", what)))


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps,
                                 end_value=0.0, exponent=1.0):
    """Linear warmup from init_value to peak_value over warmup_steps, then a cosine decay to
    end_value at decay_steps (the whole length, warmup included), as
    optax.warmup_cosine_decay_schedule."""
    what = "warmup_cosine_decay_schedule"
    return Schedule(_drx.optim_warmup_cosine_decay_schedule(
        _float(init_value, "init_value", what), _float(peak_value, "peak_value", what),
        _int(warmup_steps, "warmup_steps", what), _int(decay_steps, "decay_steps", what),
        _float(end_value, "end_value", what), _float(exponent, "exponent", what)))


def join_schedules(schedules, boundaries):
    """schedules[0] before boundaries[0], then schedules[k] at t - boundaries[k-1] from
    boundaries[k-1] on: each schedule counts from its own start (optax.join_schedules).
    One boundary fewer than schedules, increasing."""
    what = "join_schedules"
    return Schedule(_drx.optim_join_schedules(
        [_schedule(s, what) for s in schedules],
        [_int(b, "every boundary", what) for b in boundaries]))


def schedule_value(schedule, count):
    """The schedule's value at ``count`` (a Python int in [0, 2^31)), computed on the host
    (traced once and interpreted): for plots, logs and tests. Returns a Python float."""
    return _drx.optim_schedule_value(_schedule(schedule, "schedule_value"),
                                     _int(count, "count", "schedule_value"))


# ---- gradient transformations ----------------------------------------------------------------
class GradientTransformation:
    """optax's GradientTransformation: ``init(params) -> state`` and
    ``update(updates, state, params=None) -> (updates, state)``; unpacks as
    ``init, update = tx``.

    drx.optim's functions return C++ ones (their ``name`` is the C++ name, e.g.
    ``"chain(clip_by_global_norm, adam)"``). ``GradientTransformation(init, update)`` makes one
    from Python functions, as optax's does: it works on its own and in ``chain``, but not as a
    federated round's client or server optimizer, which run in C++.
    """

    __slots__ = ("_tx", "_init_fn", "_update_fn", "name", "_eager")

    def __init__(self, init, update, name=None):
        if not (callable(init) and callable(update)):
            raise Error("GradientTransformation: init and update must be functions")
        self._tx = None
        self._init_fn, self._update_fn = init, update
        self.name = name or getattr(update, "__qualname__", "GradientTransformation")
        self._eager = None

    @classmethod
    def _of(cls, tx):
        self = cls.__new__(cls)
        self._tx, self._init_fn, self._update_fn = tx, None, None
        self.name = tx.name
        self._eager = None
        return self

    def init(self, params):
        """The initial state for params (a pytree of floating-point arrays)."""
        if self._tx is None:
            return self._init_fn(params)
        what = f"{self.name}.init"
        params_def = tree_util.tree_structure(params)
        return _unmark(_drx.optim_init(self._tx, _to_cpp(params, what)), params_def)

    def update(self, updates, state, params=None):
        """(updates to add to the params, the next state) for the gradients ``updates``;
        ``params``: the current params, needed by add_decayed_weights (and checked against the
        updates by the optimizers when given)."""
        if self._tx is None:
            return self._update_fn(updates, state, params)
        if not _drx.in_trace():
            if self._eager is None:
                self._eager = jit(self._update_traced)
            return self._eager(updates, state, params)
        return self._update_traced(updates, state, params)

    def _update_traced(self, updates, state, params):
        what = f"{self.name}.update"
        updates_def = tree_util.tree_structure(updates)
        if params is not None:
            params_def = tree_util.tree_structure(params)
            if params_def != updates_def:
                raise Error(f"{self.name}: params of structure {params_def} do not match the "
                            f"updates of structure {updates_def}")
        cpp_state = _to_cpp(state, what, True)
        new_updates, new_state = _drx.optim_update(
            self._tx, _to_cpp(updates, what, True), cpp_state,
            [] if params is None else _to_cpp(params, what, True))
        if _layout(new_state) != _layout(cpp_state):
            raise Error(f"{self.name}: the state returned has another structure than the one "
                        "given")
        return (_rebuild(updates_def, new_updates, what),
                _rebuild(tree_util.tree_structure(state), new_state, what))

    def __iter__(self):
        return iter((self.init, self.update))

    def __repr__(self):
        return f"<drx.optim.GradientTransformation {self.name}>"


def _cpp_tx(tx, what):
    """tx's C++ GradientTransformation; a drx.Error for one made of Python functions."""
    if isinstance(tx, GradientTransformation) and tx._tx is not None:
        return tx._tx
    if isinstance(tx, GradientTransformation):
        raise Error(f"{what}: {tx.name} is made of Python functions; this needs one of "
                    "drx.optim's transformations (they run in C++)")
    raise Error(f"{what}: expected a drx.optim GradientTransformation, got {type(tx).__name__}")


def identity():
    """Updates = grads; no state (optax.identity)."""
    return GradientTransformation._of(_drx.optim_identity())


def scale(step_size):
    """Updates = step_size * grads; no state (optax.scale)."""
    return GradientTransformation._of(_drx.optim_scale(_float(step_size, "step_size", "scale")))


def scale_by_schedule(step_size_fn):
    """Updates = step_size_fn(count) * grads; state {"count"} (optax.scale_by_schedule)."""
    return GradientTransformation._of(
        _drx.optim_scale_by_schedule(_schedule(step_size_fn, "scale_by_schedule")))


def scale_by_learning_rate(learning_rate):
    """Updates = -learning_rate * grads; a schedule: -lr(count) * grads with state {"count"},
    else no state (optax.scale_by_learning_rate)."""
    what = "scale_by_learning_rate"
    return GradientTransformation._of(
        _drx.optim_scale_by_learning_rate(_learning_rate(learning_rate, what)))


def trace(decay, nesterov=False):
    """Momentum: t = grads + decay * t; updates t (Nesterov: grads + decay * t). State
    {"trace"} (optax.trace)."""
    return GradientTransformation._of(
        _drx.optim_trace(_float(decay, "decay", "trace"), bool(nesterov)))


def add_decayed_weights(weight_decay=0.0):
    """Updates = grads + weight_decay * params (decoupled weight decay); no state; update needs
    the params (optax.add_decayed_weights)."""
    return GradientTransformation._of(_drx.optim_add_decayed_weights(
        _float(weight_decay, "weight_decay", "add_decayed_weights")))


def clip_by_global_norm(max_norm):
    """Rescales the updates to global L2 norm max_norm when their norm is max_norm or more:
    norm < max_norm ? g : g / norm * max_norm. No state (optax.clip_by_global_norm)."""
    return GradientTransformation._of(_drx.optim_clip_by_global_norm(
        _float(max_norm, "max_norm", "clip_by_global_norm")))


def chain(*args):
    """The transformations applied in order, each to the previous one's updates; the state is
    the tuple of their states (optax.chain)."""
    for i, t in enumerate(args):
        if not isinstance(t, GradientTransformation):
            raise Error(f"chain: part {i} is a {type(t).__name__}, not a GradientTransformation")
    if all(t._tx is not None for t in args):
        return GradientTransformation._of(_drx.optim_chain([t._tx for t in args]))
    parts = tuple(args)
    name = "chain(" + ", ".join(t.name for t in parts) + ")"

    def init(params):
        return tuple(t.init(params) for t in parts)

    def update(updates, state, params=None):
        if not isinstance(state, (tuple, list)) or len(state) != len(parts):
            raise Error(f"{name}: expected a tuple of {len(parts)} states (one per "
                        f"transformation), got {tree_util.tree_structure(state)}")
        states = []
        for t, s in zip(parts, state):
            updates, s = t.update(updates, s, params)
            states.append(s)
        return updates, tuple(states)

    return GradientTransformation(init, update, name)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0):
    """Adam's bias-corrected m_hat / (sqrt(v_hat + eps_root) + eps), before the learning rate;
    state {"count", "mu", "nu"} (optax.scale_by_adam)."""
    w = "scale_by_adam"
    return GradientTransformation._of(_drx.optim_scale_by_adam(
        _float(b1, "b1", w), _float(b2, "b2", w), _float(eps, "eps", w),
        _float(eps_root, "eps_root", w)))


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad's g / sqrt(s + eps), s the sum of squares (from initial_accumulator_value);
    0 where s is 0. State {"sum_of_squares"} (optax.scale_by_rss)."""
    w = "scale_by_rss"
    return GradientTransformation._of(_drx.optim_scale_by_rss(
        _float(initial_accumulator_value, "initial_accumulator_value", w),
        _float(eps, "eps", w)))


def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True):
    """RMSprop's g / sqrt(v + eps) (eps_in_sqrt=False: g / (sqrt(v) + eps)), v the moving
    average of g^2 from initial_scale. State {"nu"} (optax.scale_by_rms)."""
    w = "scale_by_rms"
    return GradientTransformation._of(_drx.optim_scale_by_rms(
        _float(decay, "decay", w), _float(eps, "eps", w),
        _float(initial_scale, "initial_scale", w), bool(eps_in_sqrt)))


def scale_by_stddev(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True):
    """Centred RMSprop's scaling: scale_by_rms with the variance v - m^2 in place of v.
    State {"mu", "nu"} (optax.scale_by_stddev)."""
    w = "scale_by_stddev"
    return GradientTransformation._of(_drx.optim_scale_by_stddev(
        _float(decay, "decay", w), _float(eps, "eps", w),
        _float(initial_scale, "initial_scale", w), bool(eps_in_sqrt)))


def scale_by_yogi(b1=0.9, b2=0.999, eps=1e-3, eps_root=0.0, initial_accumulator_value=1e-6):
    """Yogi's bias-corrected scaling: m = b1 m + (1 - b1) g, v = v - (1 - b2) sign(v - g^2) g^2
    (both from initial_accumulator_value), m_hat / (sqrt(v_hat + eps_root) + eps). State
    {"count", "mu", "nu"} (optax.scale_by_yogi)."""
    w = "scale_by_yogi"
    return GradientTransformation._of(_drx.optim_scale_by_yogi(
        _float(b1, "b1", w), _float(b2, "b2", w), _float(eps, "eps", w),
        _float(eps_root, "eps_root", w),
        _float(initial_accumulator_value, "initial_accumulator_value", w)))


def sgd(learning_rate, momentum=None, nesterov=False):
    """Stochastic gradient descent: u = -lr g; with momentum mu, b = g + mu b, u = -lr b
    (Nesterov: -lr (g + mu b)); PyTorch's SGD with dampening 0. State () (a schedule: the
    count's), or ({"trace"}, ...) with momentum (optax.sgd)."""
    return GradientTransformation._of(_drx.optim_sgd(
        _learning_rate(learning_rate, "sgd"),
        0.0 if momentum is None else _float(momentum, "momentum", "sgd"), bool(nesterov)))


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    """Adam: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
    u = -lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) (optax.adam)."""
    w = "adam"
    return GradientTransformation._of(_drx.optim_adam(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(b2, "b2", w),
        _float(eps, "eps", w)))


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4):
    """Adam with decoupled weight decay: u = -lr (adam's direction + weight_decay * params);
    update needs the params (optax.adamw)."""
    w = "adamw"
    return GradientTransformation._of(_drx.optim_adamw(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(b2, "b2", w),
        _float(eps, "eps", w), _float(weight_decay, "weight_decay", w)))


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad: s = s + g^2 (from initial_accumulator_value), u = -lr g / sqrt(s + eps)
    (optax.adagrad)."""
    w = "adagrad"
    return GradientTransformation._of(_drx.optim_adagrad(
        _learning_rate(learning_rate, w),
        _float(initial_accumulator_value, "initial_accumulator_value", w),
        _float(eps, "eps", w)))


def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True,
            centered=False, momentum=None, nesterov=False):
    """RMSprop: v = decay v + (1 - decay) g^2 (from initial_scale), u = -lr g / sqrt(v + eps)
    (eps_in_sqrt=False: / (sqrt(v) + eps), PyTorch's form); centered divides by v - m^2;
    momentum mu accumulates the scaled steps (optax.rmsprop). PyTorch's RMSprop is
    ``rmsprop(lr, 0.99, 1e-8, eps_in_sqrt=False)``."""
    w = "rmsprop"
    return GradientTransformation._of(_drx.optim_rmsprop(
        _learning_rate(learning_rate, w), _float(decay, "decay", w), _float(eps, "eps", w),
        _float(initial_scale, "initial_scale", w), bool(eps_in_sqrt), bool(centered),
        0.0 if momentum is None else _float(momentum, "momentum", w), bool(nesterov)))


def yogi(learning_rate, b1=0.9, b2=0.999, eps=1e-3):
    """Yogi: scale_by_yogi then -lr (optax.yogi)."""
    w = "yogi"
    return GradientTransformation._of(_drx.optim_yogi(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(b2, "b2", w),
        _float(eps, "eps", w)))


def fedadam(learning_rate, b1=0.9, b2=0.99, tau=1e-3, initial_v=0.0):
    """Server Adam on pseudo-gradients g = -delta (Reddi et al. 2021, Algorithm 2, no bias
    correction): m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, u = (-lr m) / (sqrt(v) + tau).
    State {"m", "v"} (and "count" with a schedule)."""
    w = "fedadam"
    return GradientTransformation._of(_drx.optim_fedadam(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(b2, "b2", w),
        _float(tau, "tau", w), _float(initial_v, "initial_v", w)))


def fedyogi(learning_rate, b1=0.9, b2=0.99, tau=1e-3, initial_v=0.0):
    """Server Yogi on pseudo-gradients: as fedadam with v = v - (1 - b2) sign(v - g^2) g^2
    (Reddi et al. 2021)."""
    w = "fedyogi"
    return GradientTransformation._of(_drx.optim_fedyogi(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(b2, "b2", w),
        _float(tau, "tau", w), _float(initial_v, "initial_v", w)))


def fedadagrad(learning_rate, b1=0.9, tau=1e-3, initial_v=0.0):
    """Server Adagrad on pseudo-gradients: as fedadam with v = v + g^2 (Reddi et al. 2021)."""
    w = "fedadagrad"
    return GradientTransformation._of(_drx.optim_fedadagrad(
        _learning_rate(learning_rate, w), _float(b1, "b1", w), _float(tau, "tau", w),
        _float(initial_v, "initial_v", w)))


def apply_updates(params, updates):
    """params + updates, leaf by leaf (the same structure, dtypes and shapes), as
    optax.apply_updates: on NumPy arrays on the host, on traced values inside a trace."""
    params_def = tree_util.tree_structure(params)
    updates_def = tree_util.tree_structure(updates)
    if params_def != updates_def:
        raise Error(f"apply_updates: updates of structure {updates_def} do not match params of "
                    f"structure {params_def}")
    traced = _drx.in_trace()
    out = _drx.optim_apply_updates(_to_cpp(params, "apply_updates", traced),
                                   _to_cpp(updates, "apply_updates", traced))
    return _rebuild(params_def, out, "apply_updates")


# ---- the server optimizers of the federated round ------------------------------------------
ServerKind = _drx.optim_ServerKind  # fedavg, fedavgm, fedadam, fedyogi, fedadagrad


def parse_server_kind(name):
    """The ServerKind named "fedavg", "fedavgm", "fedadam", "fedyogi" or "fedadagrad"."""
    if isinstance(name, ServerKind):
        return name
    if not isinstance(name, str):
        raise Error(f"parse_server_kind: expected a name, got {type(name).__name__}")
    return _drx.optim_parse_server_kind(name)


def server_kind_name(kind):
    """The name of a ServerKind ("fedadam", ...)."""
    return _drx.optim_server_kind_name(parse_server_kind(kind))


def _eager_or_traced(fun):
    """fun run through its own drx.jit on arrays outside a trace (made on first use)."""
    cache = []

    def call(*args):
        if _drx.in_trace():
            return fun(*args)
        if not cache:
            cache.append(jit(fun))
        return cache[0](*args)
    return call


@dataclasses.dataclass
class ServerOptimizer:
    """The federated round's server step on the clients' mean update delta (C++
    drx::optim::ServerOptimizer), with the state layouts drx's fedavg tool checkpoints:
    fedavg: x + lr delta, state (); fedavgm: heavy-ball momentum, {"momentum"}; fedadam,
    fedyogi, fedadagrad (Reddi et al. 2021, eps = tau): {"m", "v"}, m a moment of delta."""

    kind: object = "fedavg"  # a ServerKind or its name
    lr: float = 1.0
    momentum: float = 0.9  # fedavgm
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-3

    def __post_init__(self):
        self.kind = parse_server_kind(self.kind)
        self._apply = _eager_or_traced(self._apply_traced)

    def transformation(self):
        """The GradientTransformation of the pseudo-gradient -delta for this kind."""
        return GradientTransformation._of(_drx.optim_server_transformation(self))

    def init(self, params):
        """The initial server state for params."""
        return _unmark(_drx.optim_server_init(self, _to_cpp(params, "ServerOptimizer.init")),
                       tree_util.tree_structure(params))

    def apply(self, params, delta, state):
        """One server step: (new params, new state) from the clients' mean update delta."""
        return self._apply(params, delta, state)

    def _apply_traced(self, params, delta, state):
        what = "ServerOptimizer.apply"
        params_def = tree_util.tree_structure(params)
        new_params, new_state = _drx.optim_server_apply(
            self, _to_cpp(params, what, True), _to_cpp(delta, what, True),
            _to_cpp(state, what, True))
        return (_rebuild(params_def, new_params, what),
                _rebuild(tree_util.tree_structure(state), new_state, what))


@dataclasses.dataclass
class ClientSgd:
    """The MLP round's client optimizer (drx::optim::ClientSgd): sgd(lr, momentum)."""

    lr: float = 0.05
    momentum: float = 0.0

    def transformation(self):
        """sgd(lr, momentum)."""
        return GradientTransformation._of(_drx.optim_client_sgd_transformation(self))


@dataclasses.dataclass
class DpSpec:
    """DP-FedAvg in the round (drx::optim::DpSpec, McMahan et al. 2018): clipped client
    updates, Gaussian noise of std noise_multiplier * clip on their sum, the fixed denominator
    expected_cohort; adaptive clipping (Andrew et al. 2021) when target_quantile > 0."""

    noise_multiplier: float = 0.0
    expected_cohort: float = 10.0
    target_quantile: float = 0.0
    clip_lr: float = 0.2
    count_noise: float = 0.0


@dataclasses.dataclass
class RoundSpec:
    """The C++ core's MLP round (drx::optim::RoundSpec): client SGD, a ServerOptimizer, the
    cohort, local steps and batch, optional DP, and the precision policy (None: the params'
    dtype; a drx.nn.Policy or its name "f32", "f64", "bf16")."""

    client: ClientSgd = dataclasses.field(default_factory=ClientSgd)
    server: ServerOptimizer = dataclasses.field(default_factory=ServerOptimizer)
    cohort: int = 10
    steps: int = 1
    batch: int = 32
    full_steps: int = 0
    dp: object = None  # a DpSpec
    policy: object = None  # None (the params' dtype), a drx.nn.Policy or its name


@dataclasses.dataclass
class LocalOptimizer:
    """The transformer rounds' local optimizer (drx::optim::LocalOptimizer): "adamw" (with
    torch.optim.AdamW's defaults) or "sgd"."""

    kind: str = "adamw"
    lr: float = 3e-3
    momentum: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01

    def transformation(self):
        """adamw(lr, b1, b2, eps, weight_decay) or sgd(lr, momentum)."""
        return GradientTransformation._of(_drx.optim_local_optimizer_transformation(self))


@dataclasses.dataclass
class LmRoundSpec:
    """The transformer rounds' configuration (drx::optim::LmRoundSpec). model: a
    drx.nn.TransformerConfig, or any object or dict with its fields (vocab, context, layers,
    width, heads, mlp, ln_eps, scan_layers, policy); missing ones keep C++'s defaults."""

    model: object = None
    client: LocalOptimizer = dataclasses.field(default_factory=LocalOptimizer)
    server: ServerOptimizer = dataclasses.field(default_factory=ServerOptimizer)
    cohort: int = 8
    steps: int = 8
    batch: int = 8


@dataclasses.dataclass
class OuterNesterov:
    """DiLoCo's outer optimizer: SGD with Nesterov momentum on params - mean worker params."""

    lr: float = 0.7
    momentum: float = 0.9

    def transformation(self):
        """sgd(lr, momentum, nesterov=True)."""
        return GradientTransformation._of(_drx.optim_outer_nesterov_transformation(self))


def dp_round_state(server_state, clip, key, dtype, dp=None):
    """The state a DP-FedAvg round starts from: ``{"dp": {"clip": [] in dtype, "key": the
    u32[2] key}, "server": server_state}``. clip may be inf (no clipping); given the round's
    DpSpec, an infinite clip with noise is refused (the noise's std would be infinite)."""
    what = "dp_round_state"
    if isinstance(key, Tracer):
        raise Error(f"{what}: the key must be a concrete u32[2] array, got a traced one")
    key = np.asarray(key)
    out = _drx.optim_dp_round_state(_float(clip, "clip", what), _drx.asarray(key, False),
                                    dtype_name(dtype), dp)
    return {"dp": {k: _wrap(v) for k, v in out["dp"].items()}, "server": server_state}


# ---- the federated round -----------------------------------------------------------------
class _RoundCall:
    """One traced round call: the user's functions over the lists of leaves the C++ side
    passes, rebuilt as pytrees with this call's structures."""

    def __init__(self, spec, params_def, batch_def, shared_def=None, data_def=None):
        self.spec = spec
        self.params_def, self.batch_def = params_def, batch_def
        self.shared_def, self.data_def = shared_def, data_def
        self.metrics_def = None

    def loss(self, args):
        out = self.spec.loss(_tree_of(self.params_def, args[0]), _tree_of(self.batch_def, args[1]))
        return [_scalar_value(out, f"{self.spec.name}: the loss function")]

    def step_weight(self, args):
        out = self.spec.step_weight(_tree_of(self.batch_def, args[0]))
        return [_scalar_value(out, f"{self.spec.name}: step_weight")]

    def prepare(self, args):
        out = self.spec.prepare(_tree_of(self.shared_def, args[0]),
                                _tree_of(self.data_def, args[1]))
        values, self.batch_def = _leaf_values(out, f"{self.spec.name}: prepare")
        return values

    def metrics(self, args):
        out = self.spec.metrics(_tree_of(self.params_def, args[0]),
                                _tree_of(self.params_def, args[1]),
                                _tree_of(self.batch_def, args[2]), Tracer(args[3]))
        values, self.metrics_def = _leaf_values(out, f"{self.spec.name}: metrics")
        return values

    def aggregate(self, args):
        zeros = self.params_def.unflatten([0] * self.params_def.num_leaves)
        parts = {"delta": zeros, "loss": 0, "weight": 0}
        if self.spec.dp is not None:
            parts["unclipped"] = 0
        placed_def = tree_util.tree_structure(parts)
        out = self.spec.aggregate(_tree_of(placed_def, args[0]))
        values, out_def = _leaf_values(out, f"{self.spec.name}: aggregate")
        if out_def != placed_def:
            raise Error(f"{self.spec.name}: aggregate must return the structure it was given "
                        f"({placed_def}), got {out_def}")
        return values

    def functions(self):
        """The C++ binding's function arguments (None for those not given)."""
        s = self.spec
        return dict(step_weight=self.step_weight if s.step_weight else None,
                    prepare=self.prepare if s.prepare else None,
                    metrics=self.metrics if s.metrics else None,
                    aggregate=self.aggregate if s.aggregate else None)


class FederatedRound:
    """One federated round as a drx program over the placement "clients" (drx's generic round,
    drx/optim/federated_round.h); made by fedavg_round(loss, client_tx, server, cohort, ...).

    ``round(params, state, clients, shared=None) -> dict``: clients is the dict
    ``{"data": pytree with leaves [cohort, steps, ...], "weights": float [cohort]}`` (and
    ``"state"``: the clients' optimizer states, leaves [cohort, ...], with client_state=True);
    shared: a pytree broadcast to every client for ``prepare``. The result: ``"loss"`` (the
    weighted mean of the clients' losses), ``"params"``, ``"state"`` (and ``"client_state"``,
    ``"metrics"`` placed at clients when asked for). On NumPy arrays it runs compiled (its own
    drx.jit); inside a trace it inlines.
    """

    def __init__(self, loss, client_tx, server, cohort, *, name="fedavg_round",
                 step_weight=None, full_steps=0, prepare=None, client_state=False,
                 metrics=None, dp=None, aggregate=None):
        if not isinstance(name, str):
            raise Error(f"fedavg_round: name must be a string, got {type(name).__name__}")
        for fn_name, fn in (("loss", loss), ("step_weight", step_weight),
                            ("prepare", prepare), ("metrics", metrics),
                            ("aggregate", aggregate)):
            if fn is not None and not callable(fn):
                raise Error(f"{name}: {fn_name} must be a function, got {type(fn).__name__}")
        if loss is None:
            raise Error(f"{name}: the loss function is missing")
        self.name = name
        self.loss, self.step_weight, self.prepare = loss, step_weight, prepare
        self.metrics, self.aggregate, self.dp = metrics, aggregate, dp
        self.client_tx = _cpp_tx(client_tx, f"{name}: client_tx")
        if isinstance(server, ServerOptimizer):
            self.server = server
        else:
            self.server = _cpp_tx(server, f"{name}: server (a GradientTransformation of the "
                                  "pseudo-gradient or a ServerOptimizer)")
        self.cohort = _int(cohort, "cohort", name)
        self.full_steps = _int(full_steps, "full_steps", name)
        self.client_state = bool(client_state)
        self._make(_RoundCall(self, None, None))  # checks the configuration now
        self._eager = None

    def _make(self, call, body_args=None):
        args = (call.loss, self.client_tx, self.server, self.cohort, self.name)
        f = call.functions()
        rest = (f["step_weight"], self.full_steps, f["prepare"], self.client_state, f["metrics"],
                self.dp, f["aggregate"])
        if body_args is None:
            return _drx.optim_fedavg_round(*args, *rest)
        return _drx.optim_fedavg_round_body(*args, *rest, *body_args)

    def __call__(self, params, state, clients, shared=None):
        if not _drx.in_trace():
            if self._eager is None:
                self._eager = jit(lambda p, s, c, sh: self._traced(p, s, c, sh, False))
            return self._eager(params, state, clients, shared)
        return self._traced(params, state, clients, shared, False)

    def _traced(self, params, state, clients, shared, body):
        what = self.name
        if not isinstance(clients, dict):
            raise Error(f"{what}: clients must be the dict {{'data', 'weights'}} (and 'state' "
                        f"with client_state), got {type(clients).__name__}")
        params_def = tree_util.tree_structure(params)
        data_def = tree_util.tree_structure(clients.get("data"))
        call = _RoundCall(self, params_def, data_def, tree_util.tree_structure(shared),
                          data_def)
        cpp = [_to_cpp(params, what, True), _to_cpp(state, what, True),
               _to_cpp(clients, what, True), _to_cpp(shared, what, True)]
        out = self._make(call, cpp) if body else self._make(call)(cpp)
        result = {"loss": Tracer(out["loss"]),
                  "params": _rebuild(params_def, out["params"], what),
                  "state": _rebuild(tree_util.tree_structure(state), out["state"], what)}
        if "client_state" in out:
            result["client_state"] = _rebuild(tree_util.tree_structure(clients.get("state")),
                                              out["client_state"], what)
        if "metrics" in out:
            result["metrics"] = _rebuild(call.metrics_def, out["metrics"], what)
        return result


def fedavg_round(loss, client_tx=None, server=None, cohort=None, *, name="fedavg_round",
                 step_weight=None, full_steps=0, prepare=None, client_state=False, metrics=None,
                 dp=None, aggregate=None):
    """One federated-averaging round as a traced function (drx::optim::fedavg_round).

    ``fedavg_round(loss, client_tx, server, cohort, ...)``: any model's round (a
    FederatedRound): client k starts from params (and client_tx.init(params), or its state in
    clients["state"] with client_state=True), runs one step of ``loss(params, batch) -> []``
    and client_tx per local step (the leading axis of its data), and the server applies
    ``server`` (a GradientTransformation of the pseudo-gradient -delta, or a ServerOptimizer)
    to delta = sum_k w_k (params_k - params) / sum_k w_k. A round of total weight 0 changes
    nothing. Options (drx::optim::FederatedRoundSpec): ``step_weight(batch) -> []`` (a step's
    real examples: empty steps are skipped exactly) and ``full_steps`` (leading steps known to
    be full), ``prepare(shared, data) -> batches`` per client, ``client_state``,
    ``metrics(params, start, batches, loss) -> pytree`` per client, ``dp`` (a DpSpec; the
    state is then dp_round_state(...)), ``aggregate(placed) -> sums`` (secure summation's
    place: the sum over clients of every leaf of {"delta", "loss", "weight"[, "unclipped"]}),
    ``name`` (for errors).

    ``fedavg_round(spec)`` with a RoundSpec: the C++ core's MLP round
    ``(params, state, x_all, y_all, idx i32[cohort, steps, batch], mask, weights) ->
    {"loss", "params", "state"}``, clients gathering their rows of the shared dataset.
    """
    if isinstance(loss, RoundSpec):
        if client_tx is not None or server is not None or cohort is not None:
            raise Error("fedavg_round: with a RoundSpec, give no other argument")
        return _CppRound(_drx.optim_mlp_fedavg_round(loss), 7, {"params": 0, "state": 1})
    if client_tx is None or server is None or cohort is None:
        raise Error("fedavg_round: give (loss, client_tx, server, cohort), or a RoundSpec")
    return FederatedRound(loss, client_tx, server, cohort, name=name, step_weight=step_weight,
                          full_steps=full_steps, prepare=prepare, client_state=client_state,
                          metrics=metrics, dp=dp, aggregate=aggregate)


def fedavg_round_body(loss, client_tx, server, cohort, params, state, clients, shared=None,
                      **options):
    """The generic round (fedavg_round's) on traced values, inside a function decorated with
    ``drx.program(placements={"clients": cohort})``: clients holds the placed "data" and
    "weights" (and "state"), shared the unplaced inputs. options: fedavg_round's. Returns
    its dict."""
    r = FederatedRound(loss, client_tx, server, cohort, **options)
    if not _drx.in_trace():
        raise Error(f"{r.name}: fedavg_round_body works on traced values inside a drx.program "
                    "run by drx.jit; use fedavg_round for a round of its own")
    return r._traced(params, state, clients, shared, True)


LocalSteps = collections.namedtuple("LocalSteps", ["params", "opt_state", "loss"])
LocalSteps.__doc__ = "local_steps' result: the final params and optimizer state, the loss."


def local_steps(loss, client_tx, start, opt_state, batches, step_weight=None, full_steps=0):
    """One client's local steps from ``start`` with optimizer state ``opt_state`` over its
    batches (a pytree with leaves [steps, ...]), as one scan: per step ``(l, g) =
    value_and_grad(loss)(params, batch)``, then client_tx. Returns LocalSteps(params,
    opt_state, loss), loss the mean of the steps' losses before their updates (with
    ``step_weight(batch)``: weighted by it, empty steps skipped exactly)."""
    what = "local_steps"
    tx = _cpp_tx(client_tx, f"{what}: client_tx")
    if step_weight is not None and not callable(step_weight):
        raise Error(f"{what}: step_weight must be a function")
    full = _int(full_steps, "full_steps", what)

    def traced(start, opt_state, batches):
        spec = _LocalSpec(loss, step_weight, what)
        start_def = tree_util.tree_structure(start)
        call = _RoundCall(spec, start_def, tree_util.tree_structure(batches))
        out = _drx.optim_local_steps(
            call.loss, tx, _to_cpp(start, what, True), _to_cpp(opt_state, what, True),
            _to_cpp(batches, what, True), call.step_weight if step_weight else None, full)
        return LocalSteps(_rebuild(start_def, out["params"], what),
                          _rebuild(tree_util.tree_structure(opt_state), out["opt_state"], what),
                          Tracer(out["loss"]))

    if not _drx.in_trace():
        return jit(traced)(start, opt_state, batches)
    return traced(start, opt_state, batches)


_LocalSpec = collections.namedtuple("_LocalSpec", ["loss", "step_weight", "name"])


class _CppRound:
    """A C++ round or evaluation over fixed arguments: on NumPy arrays compiled (its own
    drx.jit), inside a trace inlined. Result dicts: the entries in ``rebuild`` take the
    structure of that argument (params, state ...), the others come as they are."""

    def __init__(self, fn, nargs, rebuild):
        self._fn, self._nargs, self._rebuild = fn, nargs, rebuild
        self.name = fn.name
        self._eager = None

    def __call__(self, *args):
        if len(args) != self._nargs:
            raise Error(f"{self.name}: expected {self._nargs} arguments, got {len(args)}")
        if not _drx.in_trace():
            if self._eager is None:
                self._eager = jit(self._traced)
            return self._eager(*args)
        return self._traced(*args)

    def _traced(self, *args):
        out = self._fn([_to_cpp(a, self.name, True) for a in args])
        return {k: (_rebuild(tree_util.tree_structure(args[self._rebuild[k]]), v, self.name)
                    if k in self._rebuild else _plain(v)) for k, v in out.items()}

    def __repr__(self):
        return f"<drx.optim {self.name}>"


def fedavg_round_on_client_data(spec):
    """The MLP round of ``fedavg_round(spec)`` with the clients holding their examples:
    ``(params, state, x [cohort, steps * batch, ...] @clients, y integer [cohort, steps *
    batch], mask [cohort, steps, batch], weights [cohort]) -> {"loss", "params", "state"}``;
    the same bits as the gathering round."""
    if not isinstance(spec, RoundSpec):
        raise Error(f"fedavg_round_on_client_data: expected a RoundSpec, got "
                    f"{type(spec).__name__}")
    return _CppRound(_drx.optim_fedavg_round_on_client_data(spec), 6, {"params": 0, "state": 1})


def evaluate_fn(shards):
    """The MLP's evaluation over shards: ``(params, x_all, y_all, idx i32[shards, steps,
    batch], mask) -> {"loss", "accuracy"}`` over the real examples."""
    return _CppRound(_drx.optim_evaluate_fn(_int(shards, "shards", "evaluate_fn")), 5, {})


def lm_fedavg_round(spec):
    """One FedAvg-family round of the C++ core's transformer language model:
    ``(params, server state, windows i32[cohort, steps, batch, context + 1], weights [cohort])
    -> {"loss", "params", "state"}`` (spec: an LmRoundSpec; params as the C++
    transformer_init makes them, state ``spec.server.init(params)``)."""
    if not isinstance(spec, LmRoundSpec):
        raise Error(f"lm_fedavg_round: expected an LmRoundSpec, got {type(spec).__name__}")
    return _CppRound(_drx.optim_lm_fedavg_round(spec), 4, {"params": 0, "state": 1})


def diloco_round(spec, outer=None):
    """One DiLoCo round (Douillard et al. 2023) of the transformer: each worker continues its
    own inner optimizer state for spec.steps local steps, then an outer Nesterov step on
    params - mean_k params_k: ``(params, outer state, inner states (leaves [workers, ...]),
    windows i32[workers, steps, batch, context + 1]) -> {"inner", "loss", "params",
    "state"}``. outer: an OuterNesterov (default lr 0.7, momentum 0.9); its state is
    ``outer.transformation().init(params)``, the inner states diloco_inner_init's."""
    if not isinstance(spec, LmRoundSpec):
        raise Error(f"diloco_round: expected an LmRoundSpec, got {type(spec).__name__}")
    outer = OuterNesterov() if outer is None else outer
    return _CppRound(_drx.optim_diloco_round(spec, outer), 4,
                     {"params": 0, "state": 1, "inner": 2})


def diloco_inner_init(spec, params):
    """The DiLoCo workers' first inner states: spec.client's init(params), stacked
    spec.cohort times (NumPy arrays with a leading [workers] axis)."""
    what = "diloco_inner_init"
    if not isinstance(spec, LmRoundSpec):
        raise Error(f"{what}: expected an LmRoundSpec, got {type(spec).__name__}")
    leaves = tree_util.tree_leaves(params)
    if any(isinstance(l, Tracer) for l in leaves):
        raise Error(f"{what}: params must be concrete arrays (it builds host state)")
    return _unmark(_drx.optim_diloco_inner_init(spec, _to_cpp(params, what, False)),
                   tree_util.tree_structure(params))


def lm_evaluate_fn(model, shards):
    """Held-out evaluation of the transformer over shards: ``(params, windows i32[shards, n,
    context + 1], mask [shards, n]) -> {"loss_sum", "count"}`` (summed next-token
    cross-entropy in nats over the unmasked windows' positions, and their number). model: a
    drx.nn.TransformerConfig (or an object or dict with its fields)."""
    return _CppRound(_drx.optim_lm_evaluate_fn(model, _int(shards, "shards", "lm_evaluate_fn")),
                     3, {})
