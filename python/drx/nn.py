"""Neural-network building blocks, with jax.nn's and flax's names: activations, dense layers,
LayerNorm, embeddings, causal attention, a ReLU MLP and a GPT-2 style transformer whose
parameters are pytrees (nested dicts of arrays), the classification losses and metrics of
federated training, seeded initialisers, and mixed-precision policies (drx/nn in C++).

    params = drx.nn.mlp_init([784, 200, 10], seed=0)          # {"layer0": {"b", "w"}, ...}
    def loss(params, x, y):
        return drx.nn.softmax_cross_entropy(drx.nn.mlp_apply(params, x), y).mean()
    grads = drx.jit(drx.grad(loss))(params, x, y)

Every function over arrays works on traced values (inside drx.jit, grad, vmap, map_fn ...) and
on NumPy arrays outside any trace, where it runs as a compiled call (one program per
signature and static arguments, as JAX runs jax.nn's functions eagerly). Operands of different
dtypes promote as JAX's do (Python numbers are weakly typed). Errors are drx.Error.
"""

import dataclasses
import enum
import operator

import numpy as np

from . import _drx
from . import tree_util
from ._api import jit
from ._tracer import _FLOATS, Error, Tracer, as_value, dtype_name, is_python_scalar, promoted

__all__ = [
    "Init", "Policy", "TransformerConfig", "accuracy", "batch_norm", "batch_norm_stats",
    "causal_attention", "cnn_apply", "cnn_init", "conv2d", "correct", "dense", "group_norm",
    "derive_init_seed", "dot_general", "embedding", "gelu", "init_array", "layer_norm",
    "avg_pool", "log_sigmoid", "log_softmax", "logsumexp", "masked_mean_loss", "matmul",
    "max_pool", "mlp_apply",
    "mlp_init", "normal_array", "one_hot", "relu", "sigmoid", "sigmoid_binary_cross_entropy",
    "softmax", "softmax_cross_entropy", "softplus", "transformer_init", "transformer_logits",
    "transformer_loss",
]


# ---- calling convention ---------------------------------------------------------------------
_EAGER = {}  # (function name, static arguments) -> its jit


def _eager(key, fn, args):
    """fn(*args) on concrete arguments: through a jit of fn, one per key (the function's name
    and its static arguments), compiled once per signature as any jit."""
    jitted = _EAGER.get(key)
    if jitted is None:
        jitted = _EAGER.setdefault(key, jit(fn))
    return jitted(*args)


def _array_arg(x):
    """An array argument for the eager path: lists and other array-likes become NumPy arrays
    (a Python number stays one, weakly typed; a DLPack tensor is left to jit, which reads it
    in place)."""
    if isinstance(x, (np.ndarray, Tracer)) or is_python_scalar(x) or hasattr(x, "__dlpack__"):
        return x
    if x is None:
        raise Error("drx.nn: None is not an array")
    return np.asarray(x)


def _tracer(x):
    """x as a Tracer of the current trace (a Python number weakly typed)."""
    if isinstance(x, Tracer):
        return x
    return Tracer(as_value(x), is_python_scalar(x))


def _float_tracer(x):
    """x as a Tracer of a floating dtype: integers and bools become float64, as JAX's
    floating functions promote them with x64 (the weak flag kept)."""
    t = _tracer(x)
    return t if t._value.dtype in _FLOATS else Tracer(_drx.astype(t._value, "f64"), t._weak)


def _common(*xs):
    """The Values of xs in one dtype, promoted as JAX promotes (weak Python numbers take the
    others' dtype), and whether the result is weakly typed."""
    ts = [_tracer(x) for x in xs]
    acc = ts[0]
    for t in ts[1:]:
        va, _, weak = promoted(acc, t)
        acc = Tracer(va, weak)
    to = acc._value.dtype
    return [t._value if t._value.dtype == to else _drx.astype(t._value, to) for t in ts], acc._weak


def _static_int(x, name, what):
    try:
        return operator.index(x)
    except TypeError:
        raise Error(f"{what}: {name} must be an int, got {x!r}") from None


def _seed(x, name, what):
    v = _static_int(x, name, what)
    if not 0 <= v < 1 << 64:
        raise Error(f"{what}: {name} must be in [0, 2**64), got {v}")
    return v


def _shape(shape, what):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise Error(f"{what}: shape must be a sequence of ints, got {shape!r}") from None


def _dtype(dtype, what):
    try:
        return dtype_name(dtype)
    except Error:
        raise Error(f"{what}: dtype {dtype!r} is not a drx dtype") from None


def _axes(axis, what):
    """axis as a hashable static argument: None, an int, or a tuple of ints."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(_static_int(a, "axis", what) for a in axis)
    return _static_int(axis, "axis", what)


# ---- precision policies ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Policy:
    """Mixed precision, as jmp's and flax's policies: the dtype parameters are kept in
    (``param``), the dtype products compute in (``compute``) and the dtype activations, losses
    and statistics are returned in (``output``), as drx dtype names ("f32", "bf16", ...).

    ``Policy.full(np.float32)`` computes everything in one dtype; ``Policy.bf16()`` keeps f32
    parameters and runs every product on bf16 operands with f32 accumulation and results
    (PyTorch's CPU autocast). Wherever a policy is taken, the strings "f32", "f64" and "bf16"
    name these policies. Policies are static: they are part of a jit's signature."""

    param: str = "f32"
    compute: str = "f32"
    output: str = "f32"

    def __post_init__(self):
        for f in ("param", "compute", "output"):
            object.__setattr__(self, f, _dtype(getattr(self, f), f"Policy.{f}"))

    @staticmethod
    def full(dtype=np.float32):
        """Everything in one dtype (float32 or float64): products as written."""
        p = _drx.NnPolicy.full(_dtype(dtype, "Policy.full"))
        return Policy(p.param, p.compute, p.output)

    @staticmethod
    def bf16():
        """Parameters f32, products on bf16 operands with f32 accumulation and results."""
        p = _drx.NnPolicy.bf16()
        return Policy(p.param, p.compute, p.output)

    @staticmethod
    def named(name):
        """The policy "f32", "f64" (full) or "bf16"."""
        if isinstance(name, Policy):
            return name
        if not isinstance(name, str):
            raise Error(f"drx.nn: a policy must be a drx.nn.Policy or one of 'f32', 'f64', "
                        f"'bf16', got {name!r}")
        p = _drx.NnPolicy.named(name)
        return Policy(p.param, p.compute, p.output)

    @property
    def name(self):
        """The policy's name: "f32", "f64", "bf16", or param/compute/output for another."""
        return self._cpp().name()

    def _cpp(self):
        return _drx.NnPolicy(self.param, self.compute, self.output)


# Static when passed through jit (no array leaves; equality is part of the signature).
tree_util.register_dataclass(Policy, data_fields=(), meta_fields=("param", "compute", "output"))


def _policy(policy):
    """None, a Policy, or a policy's name, as a Policy (None stays None)."""
    return None if policy is None else Policy.named(policy)


def _cpp_policy(policy):
    return None if policy is None else policy._cpp()


# ---- activations ----------------------------------------------------------------------------
def _unary(name, op, x, to_float=True):
    if not _drx.in_trace():
        return _eager((name,), lambda a: _unary(name, op, a, to_float), (_array_arg(x),))
    t = _float_tracer(x) if to_float else _tracer(x)
    return Tracer(op(t._value), t._weak)


def relu(x):
    """max(x, 0) elementwise (jax.nn.relu); its derivative at 0 is 0."""
    return _unary("relu", _drx.relu, x, to_float=False)


def sigmoid(x):
    """1 / (1 + exp(-x)) elementwise, stable for large |x| (jax.nn.sigmoid)."""
    return _unary("sigmoid", _drx.sigmoid, x)


def softplus(x):
    """log(1 + exp(x)) elementwise, stable for large |x| (jax.nn.softplus)."""
    return _unary("softplus", _drx.softplus, x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x) elementwise (jax.nn.log_sigmoid)."""
    return _unary("log_sigmoid", _drx.log_sigmoid, x)


def gelu(x, approximate=False):
    """The Gaussian error linear unit x * Phi(x) elementwise: the exact erf form, or with
    ``approximate=True`` the tanh approximation
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). (jax.nn.gelu's default is the
    approximation; drx's, as torch's and flax's exact GELU, is the erf form.)"""
    approximate = bool(approximate)
    if not _drx.in_trace():
        return _eager(("gelu", approximate), lambda a: gelu(a, approximate), (_array_arg(x),))
    t = _float_tracer(x)
    return Tracer(_drx.gelu(t._value, approximate), t._weak)


def _all_axes(v):
    return list(range(v.ndim))


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis`` (an int, a tuple of ints, or None for every axis),
    computed stably (jax.nn.logsumexp / jax.scipy.special.logsumexp)."""
    axis, keepdims = _axes(axis, "logsumexp"), bool(keepdims)
    if not _drx.in_trace():
        return _eager(("logsumexp", axis, keepdims), lambda a: logsumexp(a, axis, keepdims),
                      (_array_arg(x),))
    t = _float_tracer(x)
    v = t._value
    axes = _all_axes(v) if axis is None else [axis] if isinstance(axis, int) else list(axis)
    return Tracer(_drx.logsumexp(v, axes, keepdims), t._weak)


def _softmax_like(name, x, axis):
    axis = _axes(axis, name)
    if not _drx.in_trace():
        return _eager((name, axis), lambda a: _softmax_like(name, a, axis), (_array_arg(x),))
    t = _float_tracer(x)
    v = t._value
    if isinstance(axis, tuple) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, int):
        op = _drx.softmax if name == "softmax" else _drx.log_softmax
        return Tracer(op(v, axis), t._weak)
    # Several axes (or all: None): x - logsumexp(x) over them.
    axes = _all_axes(v) if axis is None else list(axis)
    out = _drx.sub(v, _drx.logsumexp(v, axes, True))
    if name == "softmax":
        out = _drx.exp(out)
    return Tracer(out, t._weak)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis`` (an int; a tuple of ints or None normalises over
    several or all axes), computed stably (jax.nn.softmax)."""
    return _softmax_like("softmax", x, axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along ``axis`` (an int, a tuple of ints, or None for every axis)
    (jax.nn.log_softmax)."""
    return _softmax_like("log_softmax", x, axis)


def one_hot(x, num_classes, dtype=np.float32, axis=-1):
    """One-hot encoding of the integer array x over ``num_classes`` classes: x.shape with a new
    axis of size num_classes (last, or at ``axis``) holding 1 at each label and 0 elsewhere; a
    label outside [0, num_classes) gives a row of zeros (jax.nn.one_hot)."""
    n = _static_int(num_classes, "num_classes", "one_hot")
    dt = _dtype(dtype, "one_hot")
    axis = _static_int(axis, "axis", "one_hot")
    if not _drx.in_trace():
        return _eager(("one_hot", n, dt, axis), lambda a: one_hot(a, n, dt, axis),
                      (_array_arg(x),))
    v = _tracer(x)._value
    out = _drx.one_hot(v, n, dt)
    nd = v.ndim + 1
    if not -nd <= axis < nd:
        raise Error(f"one_hot: axis {axis} is out of range for a result of {nd} dimensions")
    axis %= nd
    if axis != nd - 1:
        perm = list(range(nd - 1))
        perm.insert(axis, nd - 1)
        out = _drx.transpose(out, perm)
    return Tracer(out)


# ---- products under a policy ----------------------------------------------------------------
def matmul(a, b, policy=None):
    """a @ b (numpy.matmul's shapes); under ``policy`` the operands in its compute dtype and the
    result in its output dtype (bf16 operands accumulate in f32)."""
    policy = _policy(policy)
    if not _drx.in_trace():
        return _eager(("matmul", policy), lambda x, y: matmul(x, y, policy),
                      (_array_arg(a), _array_arg(b)))
    (va, vb), weak = _common(a, b)
    if policy is None:
        return Tracer(_drx.matmul(va, vb), weak)
    return Tracer(_drx.nn_matmul(va, vb, policy._cpp()))


def _dimension_numbers(dimension_numbers):
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(operator.index(d) for d in ds) for ds in (lc, rc, lb, rb))
        return (lc, rc), (lb, rb)
    except (TypeError, ValueError):
        raise Error("dot_general: dimension_numbers must be ((lhs_contracting, "
                    "rhs_contracting), (lhs_batch, rhs_batch)), as jax.lax.dot_general's, got "
                    f"{dimension_numbers!r}") from None


def dot_general(lhs, rhs, dimension_numbers, policy=None):
    """jax.lax.dot_general: contracts lhs's and rhs's dimensions named by
    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``; the
    result's axes are the batch axes, then lhs's free axes, then rhs's. Under ``policy``: the
    operands in its compute dtype, the result in its output dtype."""
    policy, dims = _policy(policy), _dimension_numbers(dimension_numbers)
    if not _drx.in_trace():
        return _eager(("dot_general", dims, policy), lambda x, y: dot_general(x, y, dims, policy),
                      (_array_arg(lhs), _array_arg(rhs)))
    (vl, vr), weak = _common(lhs, rhs)
    flat = [list(d) for pair in dims for d in pair]
    if policy is None:
        return Tracer(_drx.dot_general(vl, vr, *flat), weak)
    return Tracer(_drx.nn_dot_general(vl, vr, *flat, policy._cpp()))


# ---- layers ---------------------------------------------------------------------------------
def dense(x, w, b, policy=None):
    """x @ w + b for x [..., in], w [in, out], b [out] (flax's Dense). Under ``policy`` (a
    Policy or "f32"/"f64"/"bf16"): the product in its compute dtype, into its output dtype,
    plus b in the output dtype."""
    policy = _policy(policy)
    if not _drx.in_trace():
        return _eager(("dense", policy), lambda *a: dense(*a, policy),
                      (_array_arg(x), _array_arg(w), _array_arg(b)))
    (vx, vw, vb), _ = _common(x, w, b)
    return Tracer(_drx.nn_dense(vx, vw, vb, _cpp_policy(policy)))


def layer_norm(x, scale, bias, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * scale + bias over the last axis, with the population
    variance (flax's LayerNorm, torch.nn.LayerNorm); scale and bias have the last axis's
    size."""
    eps = float(eps)
    if not _drx.in_trace():
        return _eager(("layer_norm", eps), lambda *a: layer_norm(*a, eps),
                      (_array_arg(x), _array_arg(scale), _array_arg(bias)))
    (vx, vs, vb), _ = _common(x, scale, bias)
    return Tracer(_drx.nn_layer_norm(vx, vs, vb, eps))


def conv2d(x, w, b, strides=None, padding="SAME", feature_group_count=1, policy=None):
    """A 2-D convolution layer with bias in flax's layout: x [N, H, W, C], w [kh, kw,
    C / feature_group_count, O], b [O] -> [N, H', W', O]; padding "SAME" (H' = ceil(H /
    stride)) or "VALID"; strides None are 1s. Under ``policy``: the convolution on
    compute-dtype operands into the output dtype."""
    policy = _policy(policy)
    stride = [_static_int(s, "strides", "conv2d") for s in (strides or ())]
    groups = _static_int(feature_group_count, "feature_group_count", "conv2d")
    if not isinstance(padding, str):
        raise Error(f"conv2d: padding must be 'SAME' or 'VALID', got {padding!r}")
    if not _drx.in_trace():
        return _eager(("conv2d", tuple(stride), padding, groups, policy),
                      lambda *a: conv2d(*a, stride, padding, groups, policy),
                      (_array_arg(x), _array_arg(w), _array_arg(b)))
    (vx, vw, vb), _ = _common(x, w, b)
    return Tracer(_drx.nn_conv2d(vx, vw, vb, stride, padding, groups, _cpp_policy(policy)))


def batch_norm_stats(features, dtype=np.float32):
    """Running statistics for batch_norm to start from: {"mean": zeros, "var": ones} of
    [features]."""
    n = _static_int(features, "features", "batch_norm_stats")
    if n < 0:
        raise Error(f"batch_norm_stats: features must be >= 0, got {n}")
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise Error(f"batch_norm_stats: dtype must be floating, got {dt}")
    return {"mean": np.zeros(n, dt), "var": np.ones(n, dt)}


def batch_norm(x, scale, bias, running, training, momentum=0.99, eps=1e-5):
    """Batch normalisation over every axis but the last, as flax's BatchNorm, with its running
    statistics as explicit state: returns (y, new_running), running and new_running dicts
    {"mean", "var"} of [features]. training=True normalises by the batch's mean and population
    variance and moves the running statistics: momentum * running + (1 - momentum) * batch;
    training=False normalises by the running statistics and returns them unchanged."""
    if not isinstance(running, dict) or set(running) != {"mean", "var"}:
        raise Error("batch_norm: running must be a dict {'mean', 'var'} (batch_norm_stats), got "
                    f"{running!r}")
    training, momentum, eps = bool(training), float(momentum), float(eps)
    if not _drx.in_trace():
        return _eager(("batch_norm", training, momentum, eps),
                      lambda xx, s, b, r: batch_norm(xx, s, b, r, training, momentum, eps),
                      (_array_arg(x), _array_arg(scale), _array_arg(bias),
                       {k: _array_arg(v) for k, v in running.items()}))
    (vx, vs, vb, vm, vv), _ = _common(x, scale, bias, running["mean"], running["var"])
    y, mean, var = _drx.nn_batch_norm(vx, vs, vb, vm, vv, training, momentum, eps)
    return Tracer(y), {"mean": Tracer(mean), "var": Tracer(var)}


def group_norm(x, num_groups, scale, bias, eps=1e-5):
    """Group normalisation, as flax's GroupNorm: x [N, ..., C], C split into num_groups groups,
    each example's group normalised over the spatial axes and the group's features; scale
    and bias [C]."""
    groups = _static_int(num_groups, "num_groups", "group_norm")
    eps = float(eps)
    if not _drx.in_trace():
        return _eager(("group_norm", groups, eps), lambda *a: group_norm(a[0], groups, *a[1:], eps),
                      (_array_arg(x), _array_arg(scale), _array_arg(bias)))
    (vx, vs, vb), _ = _common(x, scale, bias)
    return Tracer(_drx.nn_group_norm(vx, groups, vs, vb, eps))


def embedding(table, ids):
    """Rows ``ids`` (an integer array of any shape) of ``table`` [vocabulary, dim]: an array of
    ids.shape + [dim] (flax's Embed); its gradient scatters into the table."""
    if not _drx.in_trace():
        return _eager(("embedding",), embedding, (_array_arg(table), _array_arg(ids)))
    return Tracer(_drx.nn_embedding(_tracer(table)._value, _tracer(ids)._value))


def causal_attention(q, k, v, heads, policy=None):
    """Causal multi-head self-attention of q, k, v [batch, t, d] with ``heads`` heads (d a
    multiple of heads): per head softmax(q k^T / sqrt(d / heads), key j > query i masked) v,
    heads concatenated back to [batch, t, d]. Under ``policy`` both products run on its compute
    dtype, the scores and softmax in its output dtype."""
    heads, policy = _static_int(heads, "heads", "causal_attention"), _policy(policy)
    if not _drx.in_trace():
        return _eager(("causal_attention", heads, policy),
                      lambda *a: causal_attention(*a, heads, policy),
                      (_array_arg(q), _array_arg(k), _array_arg(v)))
    (vq, vk, vv), _ = _common(q, k, v)
    return Tracer(_drx.nn_causal_attention(vq, vk, vv, heads, _cpp_policy(policy)))


def _param_leaves(params, what):
    """The leaves of a params pytree and its structure."""
    leaves, tree = tree_util.tree_flatten(params)
    if not leaves:
        raise Error(f"{what}: params has no arrays")
    return leaves, tree


class Init(str, enum.Enum):
    """The initialisers of init_array and mlp_init (each also accepted as its string):
    glorot_uniform U(-l, l) with l = sqrt(6 / (fan_in + fan_out)); he_normal N(0, 2 / fan_in);
    lecun_normal N(0, 1 / fan_in); zeros."""

    glorot_uniform = "glorot_uniform"
    he_normal = "he_normal"
    lecun_normal = "lecun_normal"
    zeros = "zeros"


def _init_name(init, what):
    if isinstance(init, Init):
        return init.value
    if not isinstance(init, str):
        raise Error(f"{what}: the initialiser must be a string (glorot_uniform, he_normal, "
                    f"lecun_normal or zeros), got {init!r}")
    return init


def mlp_init(sizes, seed, weight_init="he_normal", dtype=np.float32):
    """Parameters of a ReLU MLP with layer sizes ``sizes = [in, hidden..., out]``: a dict
    {"layer0": {"b": [out], "w": [in, out]}, ...} of NumPy arrays (keys zero-padded beyond 10
    layers, so sorted order is layer order); weights drawn from ``weight_init`` (each layer a
    stream derived from ``seed``), biases zero. Seeded and platform-independent."""
    sizes = [_static_int(s, "sizes", "mlp_init") for s in sizes]
    return _drx.nn_mlp_init(sizes, _seed(seed, "seed", "mlp_init"),
                            _init_name(weight_init, "mlp_init"), _dtype(dtype, "mlp_init"))


def mlp_apply(params, x, policy=None):
    """The MLP of ``params`` (as mlp_init makes them) on x [..., in]: dense layers in key order
    with ReLU between them; returns the logits (no final activation). Under ``policy`` each
    layer's product runs in its compute dtype. x and the parameters promote to one dtype."""
    policy = _policy(policy)
    if not _drx.in_trace():
        return _eager(("mlp_apply", policy), lambda p, a: mlp_apply(p, a, policy),
                      (params, _array_arg(x)))
    leaves, tree = _param_leaves(params, "mlp_apply")
    values, _ = _common(x, *leaves)
    p = tree_util.tree_unflatten(tree, values[1:])
    return Tracer(_drx.nn_mlp_apply(p, values[0], _cpp_policy(policy)))


def cnn_init(height, width, channels, classes, seed, dtype=np.float32):
    """Parameters of McMahan et al.'s CNN for images [height, width, channels]: a dict
    {"conv0": {"b": [32], "w": [5, 5, channels, 32]}, "conv1": {"b": [64], "w": [5, 5, 32, 64]},
    "dense0": {"b": [512], "w": [(height // 4) * (width // 4) * 64, 512]},
    "dense1": {"b": [classes], "w": [512, classes]}} of NumPy arrays; He-normal weights (each
    layer a stream derived from ``seed``, as mlp_init's), zero biases."""
    dims = [_static_int(v, n, "cnn_init") for v, n in
            ((height, "height"), (width, "width"), (channels, "channels"), (classes, "classes"))]
    return _drx.nn_cnn_init(*dims, _seed(seed, "seed", "cnn_init"), _dtype(dtype, "cnn_init"))


def cnn_apply(params, x, policy=None):
    """McMahan et al.'s CNN of ``params`` (as cnn_init makes them) on x: images [B, H, W, C] or
    rows [B, H * W * C] of square images. Two 5x5 SAME convolutions (32 and 64 channels) each
    with ReLU and 2x2 max pooling, dense 512 with ReLU, dense to the logits. Under ``policy``
    the convolutions and products run in its compute dtype."""
    policy = _policy(policy)
    if not _drx.in_trace():
        return _eager(("cnn_apply", policy), lambda p, a: cnn_apply(p, a, policy),
                      (params, _array_arg(x)))
    leaves, tree = _param_leaves(params, "cnn_apply")
    values, _ = _common(x, *leaves)
    p = tree_util.tree_unflatten(tree, values[1:])
    return Tracer(_drx.nn_cnn_apply(p, values[0], _cpp_policy(policy)))


# ---- losses and metrics ---------------------------------------------------------------------
def _logits_labels(name, op, logits, labels):
    if not _drx.in_trace():
        return _eager((name,), lambda a, b: _logits_labels(name, op, a, b),
                      (_array_arg(logits), _array_arg(labels)))
    return Tracer(op(_tracer(logits)._value, _tracer(labels)._value))


def softmax_cross_entropy(logits, labels):
    """Per-example softmax cross-entropy -log softmax(logits)[label] of logits [n, classes]
    and integer labels [n]: an array [n] (optax's softmax_cross_entropy_with_integer_labels)."""
    return _logits_labels("softmax_cross_entropy", _drx.nn_softmax_cross_entropy, logits,
                          labels)


def sigmoid_binary_cross_entropy(logits, labels):
    """Elementwise -labels log(sigmoid(logits)) - (1 - labels) log(1 - sigmoid(logits)),
    computed stably as softplus(logits) - labels * logits (optax's); labels are probabilities,
    promoted with logits to one dtype, broadcasting against them."""
    if not _drx.in_trace():
        return _eager(("sigmoid_binary_cross_entropy",), sigmoid_binary_cross_entropy,
                      (_array_arg(logits), _array_arg(labels)))
    (vl, vy), _ = _common(logits, labels)
    return Tracer(_drx.nn_sigmoid_binary_cross_entropy(vl, vy))


def masked_mean_loss(logits, labels, mask):
    """sum(mask * ce) / max(sum(mask), 1) with ce the softmax cross-entropy of logits [n,
    classes] and integer labels [n]: the mean over the real examples (mask 1, any numeric dtype)
    of a padded batch; a fully masked batch gives 0 and a zero gradient."""
    if not _drx.in_trace():
        return _eager(("masked_mean_loss",), masked_mean_loss,
                      (_array_arg(logits), _array_arg(labels), _array_arg(mask)))
    return Tracer(_drx.nn_masked_mean_loss(_tracer(logits)._value, _tracer(labels)._value,
                                           _tracer(mask)._value))


def correct(logits, labels):
    """1 where the first index of the largest logit equals the integer label, else 0: an array
    [n] in logits' dtype (not differentiated)."""
    return _logits_labels("correct", _drx.nn_correct, logits, labels)


def accuracy(logits, labels):
    """mean(correct(logits, labels)): the fraction of examples classified right."""
    return _logits_labels("accuracy", _drx.nn_accuracy, logits, labels)


# ---- initialisers ---------------------------------------------------------------------------
def init_array(init, shape, fan_in, fan_out, seed, dtype=np.float32):
    """A NumPy array of ``shape`` drawn from ``init`` (an Init or its name: "glorot_uniform",
    "he_normal", "lecun_normal", "zeros") for a layer with these fans, float32 or float64.
    Seeded and platform-independent (std::mt19937_64 bits, Box-Muller normals): the same seed
    gives the same bits everywhere."""
    what = "init_array"
    return _drx.nn_init_array(_init_name(init, what), list(_shape(shape, what)),
                              _static_int(fan_in, "fan_in", what),
                              _static_int(fan_out, "fan_out", what), _seed(seed, "seed", what),
                              _dtype(dtype, what))


def normal_array(shape, stddev, seed, dtype=np.float32):
    """A NumPy array of ``shape`` of N(0, stddev^2) samples (float32 or float64), seeded and
    platform-independent as init_array."""
    what = "normal_array"
    return _drx.nn_normal_array(list(_shape(shape, what)), float(stddev),
                                _seed(seed, "seed", what), _dtype(dtype, what))


def derive_init_seed(seed, stream):
    """The seed of stream ``stream`` (a layer, a leaf) of a model seeded with ``seed``:
    decorrelated from the other streams' (SplitMix64 of both). An int in [0, 2**64)."""
    return _drx.nn_derive_init_seed(_seed(seed, "seed", "derive_init_seed"),
                                    _seed(stream, "stream", "derive_init_seed"))


# ---- the transformer ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer language model (GPT-2's architecture): token and learned
    position embeddings, ``layers`` pre-LayerNorm blocks of causal multi-head self-attention and
    a GELU MLP, a final LayerNorm, and logits from the token embedding (tied output).

    vocab: token ids in [0, vocab); context: the longest input; width: the residual stream d
    (a multiple of heads); mlp: the MLP's hidden width (0: 4 d); ln_eps: LayerNorm's epsilon;
    scan_layers: the blocks as one scan (False: unrolled); policy: a Policy or its name
    ("f32", "bf16": f32 parameters, bf16 products). Static when passed through jit."""

    vocab: int = 256
    context: int = 64
    layers: int = 2
    width: int = 64
    heads: int = 4
    mlp: int = 0
    ln_eps: float = 1e-5
    scan_layers: bool = True
    policy: Policy = dataclasses.field(default_factory=Policy)

    def __post_init__(self):
        for f in ("vocab", "context", "layers", "width", "heads", "mlp"):
            object.__setattr__(self, f, _static_int(getattr(self, f), f, "TransformerConfig"))
        try:
            object.__setattr__(self, "ln_eps", float(self.ln_eps))
        except (TypeError, ValueError):
            raise Error(f"TransformerConfig: ln_eps must be a number, got {self.ln_eps!r}") \
                from None
        object.__setattr__(self, "scan_layers", bool(self.scan_layers))
        object.__setattr__(self, "policy",
                           Policy() if self.policy is None else Policy.named(self.policy))

    def _cpp(self):
        c = _drx.NnTransformerConfig()
        for f in ("vocab", "context", "layers", "width", "heads", "mlp", "ln_eps",
                  "scan_layers"):
            setattr(c, f, getattr(self, f))
        c.policy = self.policy._cpp()
        return c

    def mlp_width(self):
        """The MLP's hidden width: mlp, or 4 * width when mlp is 0."""
        return self.mlp if self.mlp > 0 else 4 * self.width

    def head_width(self):
        """width // heads."""
        return self.width // self.heads

    def check(self):
        """Raises drx.Error naming the field for a non-positive size or width % heads != 0."""
        self._cpp().check()

    def parameters(self):
        """The number of parameters (the tied embedding counted once)."""
        return self._cpp().parameters()


tree_util.register_dataclass(TransformerConfig, data_fields=(),
                             meta_fields=tuple(f.name for f in
                                               dataclasses.fields(TransformerConfig)))


def _config(config, what):
    if not isinstance(config, TransformerConfig):
        raise Error(f"{what}: config must be a drx.nn.TransformerConfig, got "
                    f"{type(config).__name__}")
    return config


def transformer_init(config, seed, dtype=np.float32):
    """GPT-2's initialisation of ``config``'s parameters, seeded: a dict of NumPy arrays
    {"blocks": {"attn_b" [L,d], "attn_w" [L,d,d], "fc_b" [L,m], "fc_w" [L,d,m], "ln1_b",
    "ln1_g", "ln2_b", "ln2_g" [L,d], "out_b" [L,d], "out_w" [L,m,d], "qkv_b" [L,3d],
    "qkv_w" [L,d,3d]}, "lnf_b" [d], "lnf_g" [d], "wpe" [context,d], "wte" [vocab,d]}: weights
    N(0, 0.02^2), the two projections into the residual stream N(0, (0.02/sqrt(2L))^2), biases
    0, LayerNorm gains 1. The blocks are stacked along a leading layer axis."""
    what = "transformer_init"
    return _drx.nn_transformer_init(_config(config, what)._cpp(), _seed(seed, "seed", what),
                                    _dtype(dtype, what))


def _transformer(name, op, config, params, ids):
    config = _config(config, name)
    if not _drx.in_trace():
        return _eager((name, config), lambda p, i: _transformer(name, op, config, p, i),
                      (params, _array_arg(ids)))
    leaves, tree = _param_leaves(params, name)
    p = tree_util.tree_unflatten(tree, [_tracer(l)._value for l in leaves])
    return Tracer(op(config._cpp(), p, _tracer(ids)._value))


def transformer_logits(config, params, ids):
    """Next-token logits [batch, t, vocab] for integer ids [batch, t], t <= context, of the
    transformer ``config`` with ``params`` (as transformer_init makes them, in one floating
    dtype)."""
    return _transformer("transformer_logits", _drx.nn_transformer_logits, config, params, ids)


def transformer_loss(config, params, windows):
    """The mean next-token cross-entropy (nats) of integer windows [batch, t + 1]: inputs
    windows[:, :t], targets windows[:, 1:]."""
    return _transformer("transformer_loss", _drx.nn_transformer_loss, config, params, windows)



# ---- pooling --------------------------------------------------------------------------------
def max_pool(x, window_shape, strides=None, padding="VALID"):
    """The largest element of each window, as flax.linen.max_pool: x [N, spatial..., C] (or
    without the batch axis), padding "SAME" or "VALID". Its gradient goes to the first largest
    element of each window."""
    return _pool_call("max_pool", x, window_shape, strides, padding)


def avg_pool(x, window_shape, strides=None, padding="VALID", count_include_pad=True):
    """The mean of each window, as flax.linen.avg_pool (count_include_pad=False divides by the
    elements that are not padding)."""
    return _pool_call("avg_pool", x, window_shape, strides, padding, bool(count_include_pad))


def _pool_call(name, x, window_shape, strides, padding, *extra):
    window = tuple(_static_int(w, "window_shape", name) for w in window_shape)
    stride = tuple(_static_int(s, "strides", name) for s in (strides or ()))
    if not isinstance(padding, str):
        raise Error(f"{name}: padding must be 'SAME' or 'VALID', got {padding!r}")
    op = getattr(_drx, "nn_" + name)

    def run(a):
        t = _float_tracer(a)
        return Tracer(op(t._value, list(window), list(stride), padding, *extra), t._weak)

    if isinstance(x, Tracer) or _drx.in_trace():
        return run(x)
    return _eager((name, window, stride, padding) + extra, run, (_array_arg(x),))
