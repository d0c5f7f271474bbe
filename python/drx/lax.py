"""Structured control flow with lax's semantics: loops whose body is traced once (never
unrolled) and compiled as one loop, differentiable to any order.

    carry, ys = drx.lax.scan(step, init, xs)       # step(carry, x) -> (carry, y)
    out = drx.lax.fori_loop(0, 10, body, init)      # body(i, carry) -> carry

    out = drx.lax.cond(pred, true_fun, false_fun, *operands)
    out = drx.lax.while_loop(cond_fun, body_fun, init_val)

and lax's ops (add, exp, dot_general, pad, dynamic_slice, ...): one primitive each, on traced
values inside a trace and compiled on NumPy arrays outside one. Unlike drx.numpy, they do not
promote strong dtypes (lax.add(f32, f64) is an error), as JAX's lax.
"""

import numpy as np

from . import _drx
from . import tree_util
from ._api import _concrete, _flatten_args, _out_leaf, jit
from ._functions import to_tracer, traced_function
from ._tracer import Error, Tracer, dtype_name


def _leaves_of(tree_value):
    """The C++ leaves of one pytree argument (constants inside a trace) and its structure."""
    leaf_lists, weak_lists, trees = _flatten_args((tree_value,))
    return leaf_lists[0], weak_lists[0], trees[0], _concrete(leaf_lists)


def _carry_leaf(new, old_value):
    """A new carry leaf as a Value of the trace, in the old carry's dtype when it is a Python
    number or weakly typed (as JAX promotes weak carries)."""
    value, weak = _out_leaf(new)
    if weak and value.dtype != old_value.dtype:
        value = _drx.astype(value, old_value.dtype)
    return value


def scan(f, init, xs=None, length=None, reverse=False, *, remat=False, checkpoint_every=0):
    """Runs ``f(carry, x) -> (carry, y)`` over the leading axis of xs (a pytree), as
    jax.lax.scan: returns the final carry and the ys stacked along a new leading axis. The
    carry keeps init's structure, shapes and dtypes. ``length`` is required when xs is None.
    ``remat=True`` saves only each iteration's carry for reverse mode and recomputes the rest
    (jax.checkpoint of the body); ``checkpoint_every=k`` saves one carry per k iterations."""
    init_leaves, init_weak, init_tree, init_concrete = _leaves_of(init)
    xs_leaves, xs_weak, xs_tree, xs_concrete = _leaves_of(xs)
    if init_concrete and xs_concrete:  # outside a trace: a compiled call, as JAX's eager scan
        return jit(lambda c, x: scan(f, c, x, length, reverse, remat=remat,
                                     checkpoint_every=checkpoint_every))(init, xs)
    if length is not None and not isinstance(length, (int, np.integer)):
        raise Error(f"drx.lax.scan: length must be an int, got {length!r}")
    if length is None and not xs_leaves:
        raise Error("drx.lax.scan: xs has no arrays, so length must be given")
    y_tree = []

    def body(args):
        carry_leaves, x_leaves = args
        carry = tree_util.tree_unflatten(
            init_tree, [Tracer(v, w) for v, w in zip(carry_leaves, init_weak)])
        x = tree_util.tree_unflatten(xs_tree, [Tracer(v) for v in x_leaves])
        out = f(carry, x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise Error("drx.lax.scan: the body must return a pair (carry, y), got "
                        f"{type(out).__name__}")
        new_leaves, new_tree = tree_util.tree_flatten(out[0])
        if new_tree != init_tree:
            raise Error(f"drx.lax.scan: the body's carry has structure {new_tree}, but init "
                        f"has {init_tree}")
        y_leaves, tree = tree_util.tree_flatten(out[1])
        y_tree[:] = [tree]
        return ([_carry_leaf(n, o) for n, o in zip(new_leaves, carry_leaves)]
                + [_out_leaf(y)[0] for y in y_leaves])

    carry_out, ys_out = _drx.scan(body, init_leaves, xs_leaves,
                                  -1 if length is None else int(length), bool(reverse),
                                  bool(remat), int(checkpoint_every))
    carry = tree_util.tree_unflatten(
        init_tree, [Tracer(v, w) for v, w in zip(carry_out, init_weak)])
    return carry, tree_util.tree_unflatten(y_tree[0], [Tracer(v) for v in ys_out])


def fori_loop(lower, upper, body_fun, init_val):
    """``body_fun(i, val) -> val`` for i = lower, ..., upper - 1 (i an int32 scalar), as
    jax.lax.fori_loop with concrete bounds: a scan, so it is reverse-differentiable."""
    for name, bound in (("lower", lower), ("upper", upper)):
        if isinstance(bound, Tracer) or not isinstance(bound, (int, np.integer)):
            raise Error(f"drx.lax.fori_loop: {name} must be a Python int (traced bounds need "
                        f"drx.lax.while_loop), got {bound!r}")
    leaves, weak, tree, concrete = _leaves_of(init_val)
    if concrete:
        return jit(lambda v: fori_loop(lower, upper, body_fun, v))(init_val)

    def body(args):
        i, carry_leaves = args
        val = tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(carry_leaves, weak)])
        new_leaves, new_tree = tree_util.tree_flatten(body_fun(Tracer(i), val))
        if new_tree != tree:
            raise Error(f"drx.lax.fori_loop: the body returned structure {new_tree}, but "
                        f"init_val has {tree}")
        return [_carry_leaf(n, o) for n, o in zip(new_leaves, carry_leaves)]

    out = _drx.fori_loop(int(lower), int(upper), body, leaves)
    return tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(out, weak)])


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if pred else ``false_fun(*operands)``, as jax.lax.cond: only the
    chosen branch runs; both return the same structure, shapes and dtypes. Differentiable
    (the chosen branch's derivative); under vmap with a batched pred both run and select."""
    if not _drx.in_trace():
        return jit(lambda p, *ops: cond(p, true_fun, false_fun, *ops))(pred, *operands)
    p = to_tracer(pred)
    if p.shape != () or p._value.dtype != "bool":
        if p.shape == () and p._value.dtype != "bool":
            p = p != 0
        else:
            raise Error(f"drx.lax.cond: pred must be a scalar, got shape {p.shape}")
    leaves, weak, tree, _ = _leaves_of(tuple(operands))
    out_tree = []

    def branch(fun):
        def run(args):
            ops = tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(args[0], weak)])
            out_leaves, t = tree_util.tree_flatten(fun(*ops))
            out_tree.append(t)
            return [_out_leaf(l)[0] for l in out_leaves]
        return run

    out = _drx.cond(p._value, branch(true_fun), branch(false_fun), leaves)
    if out_tree[0] != out_tree[-1]:
        raise Error(f"drx.lax.cond: the branches return different structures: {out_tree[0]} "
                    f"and {out_tree[-1]}")
    return tree_util.tree_unflatten(out_tree[0], [Tracer(v) for v in out])


def while_loop(cond_fun, body_fun, init_val):
    """Runs ``val = body_fun(val)`` while ``cond_fun(val)``, as jax.lax.while_loop: the carry
    keeps its structure, shapes and dtypes. Forward-mode differentiable; reverse mode needs a
    known trip count (scan or fori_loop)."""
    leaves, weak, tree, concrete = _leaves_of(init_val)
    if concrete:
        return jit(lambda v: while_loop(cond_fun, body_fun, v))(init_val)

    def carry_of(args):
        return tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(args[0], weak)])

    def test(args):
        c = to_tracer(cond_fun(carry_of(args)))
        if c.shape != ():
            raise Error(f"drx.lax.while_loop: cond_fun must return a boolean scalar, got shape "
                        f"{c.shape}")
        return [c._value if c._value.dtype == "bool" else (c != 0)._value]

    def body(args):
        new_leaves, new_tree = tree_util.tree_flatten(body_fun(carry_of(args)))
        if new_tree != tree:
            raise Error(f"drx.lax.while_loop: body_fun returned structure {new_tree}, but "
                        f"init_val has {tree}")
        return [_carry_leaf(n, o) for n, o in zip(new_leaves, args[0])]

    out = _drx.while_loop(test, body, leaves)
    return tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(out, weak)])


# ---- lax-level ops: one primitive each, no implicit promotion of strong dtypes ------------
def _lax_operands(*xs):
    """Tracers whose weakly typed members take the strong members' dtype (lax.add(x, 2.0));
    strong dtypes must already agree (drx's error names the op otherwise)."""
    ts = [to_tracer(x) for x in xs]
    strong = [t for t in ts if not t._weak]
    if strong:
        d = strong[0]._value.dtype
        ts = [Tracer(_drx.astype(t._value, d)) if t._weak and t._value.dtype != d else t
              for t in ts]
    return ts


def _lax_unary(name, op):
    def f(x):
        (t,) = _lax_operands(x)
        return Tracer(op(t._value), t._weak)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = _drx_doc(op)
    return traced_function("x")(f)


def _lax_binary(name, op):
    def f(x, y):
        a, b = _lax_operands(x, y)
        return Tracer(op(a._value, b._value), a._weak and b._weak)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = _drx_doc(op)
    return traced_function("x", "y")(f)


def _drx_doc(op):
    return (op.__doc__ or "").split("\n\n", 1)[-1].strip() or None


neg = _lax_unary("neg", _drx.neg)
exp = _lax_unary("exp", _drx.exp)
expm1 = _lax_unary("expm1", _drx.expm1)
log = _lax_unary("log", _drx.log)
log1p = _lax_unary("log1p", _drx.log1p)
tanh = _lax_unary("tanh", _drx.tanh)
logistic = _lax_unary("logistic", _drx.logistic)
sqrt = _lax_unary("sqrt", _drx.sqrt)
rsqrt = _lax_unary("rsqrt", _drx.rsqrt)
cbrt = _lax_unary("cbrt", _drx.cbrt)
abs = _lax_unary("abs", _drx.abs)
sign = _lax_unary("sign", _drx.sign)
sin = _lax_unary("sin", _drx.sin)
cos = _lax_unary("cos", _drx.cos)
erf = _lax_unary("erf", _drx.erf)
erf_inv = _lax_unary("erf_inv", _drx.erf_inv)
square = _lax_unary("square", _drx.square)
is_finite = _lax_unary("is_finite", _drx.is_finite)
floor = _lax_unary("floor", _drx.floor)
ceil = _lax_unary("ceil", _drx.ceil)
bitwise_not = _lax_unary("bitwise_not", _drx.bitwise_not)
stop_gradient = _lax_unary("stop_gradient", _drx.stop_gradient)

add = _lax_binary("add", _drx.add)
sub = _lax_binary("sub", _drx.sub)
mul = _lax_binary("mul", _drx.mul)
div = _lax_binary("div", _drx.div)
pow = _lax_binary("pow", _drx.pow)
max = _lax_binary("max", _drx.maximum)  # noqa: A001 (lax's name)
min = _lax_binary("min", _drx.minimum)  # noqa: A001 (lax's name)
rem = _lax_binary("rem", _drx.remainder)
atan2 = _lax_binary("atan2", _drx.atan2)
lt = _lax_binary("lt", _drx.less)
le = _lax_binary("le", _drx.less_equal)
gt = _lax_binary("gt", _drx.greater)
ge = _lax_binary("ge", _drx.greater_equal)
eq = _lax_binary("eq", _drx.equal)
ne = _lax_binary("ne", _drx.not_equal)
bitwise_and = _lax_binary("bitwise_and", _drx.bitwise_and)
bitwise_or = _lax_binary("bitwise_or", _drx.bitwise_or)
bitwise_xor = _lax_binary("bitwise_xor", _drx.bitwise_xor)
shift_left = _lax_binary("shift_left", _drx.shift_left)
shift_right_logical = _lax_binary("shift_right_logical", _drx.shift_right_logical)
shift_right_arithmetic = _lax_binary("shift_right_arithmetic", _drx.shift_right_arithmetic)
not_, and_, or_, xor = bitwise_not, bitwise_and, bitwise_or, bitwise_xor

class RoundingMethod:
    """How lax.round breaks ties: halves away from zero, or to even."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


@traced_function("x")
def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001 (lax's name)
    """x rounded to an integer value: halves away from zero (the default, as lax.round) or to
    even (RoundingMethod.TO_NEAREST_EVEN)."""
    t = to_tracer(x)
    op = _drx.round if rounding_method == RoundingMethod.TO_NEAREST_EVEN else _drx.round_away
    return Tracer(op(t._value), t._weak)


@traced_function("min", "x", "max")
def clamp(min, x, max):  # noqa: A002 (lax's names)
    """min(max(x, min), max), as lax.clamp (the bounds first and last)."""
    lo, t, hi = _lax_operands(min, x, max)
    return Tracer(_drx.clip(t._value, lo._value, hi._value), t._weak)


@traced_function("pred", "on_true", "on_false")
def select(pred, on_true, on_false):
    """on_true where pred else on_false (same shapes), as lax.select."""
    p = to_tracer(pred)
    a, b = _lax_operands(on_true, on_false)
    return Tracer(_drx.where(p._value, a._value, b._value), a._weak and b._weak)


@traced_function("x")
def convert_element_type(x, new_dtype):
    """x converted to new_dtype."""
    return Tracer(_drx.astype(to_tracer(x)._value, dtype_name(new_dtype)))


@traced_function("x")
def bitcast_convert_type(x, new_dtype):
    """x's bits read as new_dtype (a narrower dtype adds a trailing axis, as lax does)."""
    return Tracer(_drx.bitcast_convert(to_tracer(x)._value, dtype_name(new_dtype)))


@traced_function("lhs", "rhs")
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """The general product, as lax.dot_general: dimension_numbers is
    ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``; the result's axes are
    the batch axes, then lhs's free axes, then rhs's. preferred_element_type: a wider result
    dtype (bf16 operands, f32 result)."""
    del precision  # drx's products are at full precision of their dtypes
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise Error("drx.lax.dot_general: dimension_numbers must be ((lhs_contracting, "
                    f"rhs_contracting), (lhs_batch, rhs_batch)), got {dimension_numbers!r}") \
            from None
    a, b = _lax_operands(lhs, rhs)
    return Tracer(_drx.dot_general(a._value, b._value, list(lc), list(rc), list(lb), list(rb),
                                   None if preferred_element_type is None
                                   else dtype_name(preferred_element_type)))


@traced_function("operand")
def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """operand's axis i placed at result axis broadcast_dimensions[i] of shape."""
    t = to_tracer(operand)
    return Tracer(_drx.broadcast_in_dim(t._value, list(shape), list(broadcast_dimensions)),
                  t._weak)


@traced_function("operand")
def reshape(operand, new_sizes):
    """operand with shape new_sizes (row-major order kept)."""
    t = to_tracer(operand)
    return Tracer(_drx.reshape(t._value, list(new_sizes)), t._weak)


@traced_function("operand")
def transpose(operand, permutation):
    """operand's axes permuted: result axis i is operand axis permutation[i]."""
    t = to_tracer(operand)
    return Tracer(_drx.transpose(t._value, list(permutation)), t._weak)


@traced_function("operand")
def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (lax's name)
    """operand[start:limit] on every axis (unit strides)."""
    if strides is not None and any(s != 1 for s in strides):
        raise Error(f"drx.lax.slice: only unit strides are supported, got {strides!r}")
    t = to_tracer(operand)
    return Tracer(_drx.slice(t._value, list(start_indices), list(limit_indices)), t._weak)


@traced_function("operand", "start_indices")
def dynamic_slice(operand, start_indices, slice_sizes):
    """operand's block of slice_sizes at traced start_indices (clamped into range)."""
    t = to_tracer(operand)
    starts = [to_tracer(s)._value for s in start_indices]
    return Tracer(_drx.dynamic_slice(t._value, starts, list(slice_sizes)), t._weak)


@traced_function("operand", "update", "start_indices")
def dynamic_update_slice(operand, update, start_indices):
    """operand with update written at traced start_indices (clamped into range)."""
    t, u = to_tracer(operand), to_tracer(update)
    starts = [to_tracer(s)._value for s in start_indices]
    return Tracer(_drx.dynamic_update_slice(t._value, u._value, starts), t._weak)


@traced_function("operand", "padding_value")
def pad(operand, padding_value, padding_config):
    """operand padded per axis by (low, high, interior), as lax.pad (negative low/high crop)."""
    t, v = _lax_operands(operand, padding_value)
    lo, hi, interior = (list(c) for c in zip(*padding_config)) if padding_config else ([], [], [])
    return Tracer(_drx.pad(t._value, v._value, lo, hi, interior), t._weak)


@traced_function("operands")
def concatenate(operands, dimension):
    """operands (one dtype) joined along dimension."""
    ts = _lax_operands(*operands)
    return Tracer(_drx.concatenate([t._value for t in ts], dimension))


@traced_function("operand")
def rev(operand, dimensions):
    """operand reversed along dimensions."""
    t = to_tracer(operand)
    return Tracer(_drx.reverse(t._value, list(dimensions)), t._weak)


@traced_function("operand")
def expand_dims(operand, dimensions):
    """operand with size-1 axes inserted at dimensions (of the result)."""
    t = to_tracer(operand)
    for d in sorted(dimensions):
        t = Tracer(_drx.expand_dims(t._value, d), t._weak)
    return t


@traced_function("operand")
def squeeze(operand, dimensions):
    """operand without the size-1 axes dimensions."""
    t = to_tracer(operand)
    for d in sorted(dimensions, reverse=True):
        t = Tracer(_drx.squeeze(t._value, d), t._weak)
    return t


def iota(dtype, size):
    """[0, 1, ..., size - 1] of dtype."""
    if not _drx.in_trace():
        return np.arange(size, dtype=dtype)
    return Tracer(_drx.iota([size], 0, dtype_name(dtype)))


def broadcasted_iota(dtype, shape, dimension):
    """Each element's index along dimension, of shape and dtype."""
    if not _drx.in_trace():
        return jit(lambda: broadcasted_iota(dtype, shape, dimension))()
    return Tracer(_drx.iota(list(shape), dimension, dtype_name(dtype)))


def full(shape, fill_value, dtype=None):
    """An array of shape filled with fill_value."""
    from .numpy import full as numpy_full
    return numpy_full(shape, fill_value, dtype)


@traced_function("operand")
def sort(operand, dimension=-1, is_stable=True):
    """operand sorted ascending along dimension (stable; NaN last)."""
    del is_stable  # drx's sort is always stable
    t = to_tracer(operand)
    return Tracer(_drx.sort(t._value, dimension), t._weak)


@traced_function("operand")
def top_k(operand, k):
    """(values, indices) of the k largest elements along the last axis, largest first."""
    t = to_tracer(operand)
    values, indices = _drx.top_k(t._value, k)
    return Tracer(values, t._weak), Tracer(indices)


@traced_function("operand")
def cumsum(operand, axis=0, reverse=False):
    """Running sums along axis (from the end with reverse)."""
    t = to_tracer(operand)
    return Tracer(_drx.cumsum(t._value, axis, reverse), t._weak)


@traced_function("operand")
def argmax(operand, axis, index_dtype=np.int32):
    """The index of the largest element along axis (first of ties)."""
    out = Tracer(_drx.argmax(to_tracer(operand)._value, axis, False))
    return out if dtype_name(index_dtype) == out._value.dtype else out.astype(index_dtype)


@traced_function("operand")
def argmin(operand, axis, index_dtype=np.int32):
    """The index of the smallest element along axis (first of ties)."""
    out = Tracer(_drx.argmin(to_tracer(operand)._value, axis, False))
    return out if dtype_name(index_dtype) == out._value.dtype else out.astype(index_dtype)


def _lax_reduction(name, op):
    def f(operand, axes):
        t = to_tracer(operand)
        return Tracer(op(t._value, list(axes), False), t._weak)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{name} over axes, as lax.{name}."
    return traced_function("operand")(f)


reduce_sum = _lax_reduction("reduce_sum", _drx.sum)
reduce_max = _lax_reduction("reduce_max", _drx.max)
reduce_min = _lax_reduction("reduce_min", _drx.min)


# ---- convolutions --------------------------------------------------------------------------
def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) pads per spatial dim for padding "SAME", "SAME_LOWER" or "VALID", as JAX's
    lax.padtype_to_pads (window_shape already dilated)."""
    return [tuple(p) for p in _drx.padtype_to_pads(list(in_shape), list(window_shape),
                                                   list(window_strides), str(padding))]


def _conv_dims(dimension_numbers, ndim):
    """JAX's dimension numbers as drx's three lists [batch, feature, spatial...]: None (lax's
    NCHW / OIHW / NCHW), three layout strings ("NHWC", "HWIO", "NHWC": spatial dims matched by
    letter, in the kernel's order) or three (batch-or-out, feature-or-in, spatial) tuples."""
    if dimension_numbers is None:
        default = list(range(ndim))
        return [default, default, default]
    try:
        lhs, rhs, out = dimension_numbers
    except (TypeError, ValueError):
        raise Error("drx.lax.conv_general_dilated: dimension_numbers must be None, three layout "
                    f"strings or three dimension tuples, got {dimension_numbers!r}") from None
    if isinstance(lhs, str):
        if not (len(lhs) == len(rhs) == len(out) == ndim):
            raise Error(f"drx.lax.conv_general_dilated: layouts {dimension_numbers!r} must each "
                        f"have {ndim} letters")
        spatial = [c for c in rhs if c not in "OI"]
        try:
            return [[lhs.index("N"), lhs.index("C")] + [lhs.index(c) for c in spatial],
                    [rhs.index("O"), rhs.index("I")] + [rhs.index(c) for c in spatial],
                    [out.index("N"), out.index("C")] + [out.index(c) for c in spatial]]
        except ValueError:
            raise Error(f"drx.lax.conv_general_dilated: layouts {dimension_numbers!r} do not "
                        "name N and C, O and I, and the same spatial letters") from None
    return [[d[0], d[1]] + list(d[2]) for d in (lhs, rhs, out)]


@traced_function("lhs", "rhs")
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """StableHLO's convolution, as jax.lax.conv_general_dilated: padding "SAME", "SAME_LOWER",
    "VALID" or (low, high) pairs; dimension_numbers None (NCHW/OIHW/NCHW), layout strings such
    as ("NHWC", "HWIO", "NHWC"), or dimension tuples; feature and batch groups; a wider
    preferred_element_type (bf16 -> f32, i8 -> i32). Differentiable to any order."""
    del precision  # drx computes at its dtypes' full precision
    a, b = _lax_operands(lhs, rhs)
    dims = _conv_dims(dimension_numbers, a.ndim)
    strides = list(window_strides)
    if isinstance(padding, str):
        window = [(b.shape[d] - 1) * (rhs_dilation[k] if rhs_dilation else 1) + 1
                  for k, d in enumerate(dims[1][2:])]
        padding = padtype_to_pads([a.shape[d] for d in dims[0][2:]], window, strides, padding)
    return Tracer(_drx.conv_general_dilated(
        a._value, b._value, strides, [tuple(p) for p in padding], list(lhs_dilation or []),
        list(rhs_dilation or []), [], dims, int(feature_group_count), int(batch_group_count),
        None if preferred_element_type is None else dtype_name(preferred_element_type)))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """jax.lax.conv: lhs [N, C, spatial...], rhs [O, I, window...], result [N, O, spatial...]."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def _channels_last(ndim):
    """conv_transpose's default layouts (JAX's): NHWC input and result, HWIO kernel."""
    spatial = list(range(1, ndim - 1))
    return [[0, ndim - 1] + spatial, [ndim - 1, ndim - 2] + list(range(ndim - 2)),
            [0, ndim - 1] + spatial]


@traced_function("lhs", "rhs")
def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None):
    """jax.lax.conv_transpose: the input gradient of a strided convolution, as a convolution of
    lhs dilated by ``strides``. dimension_numbers None means ("NHWC", "HWIO", "NHWC") (JAX's
    default here, unlike conv_general_dilated's); padding "SAME" (the result is in * stride),
    "VALID" or (low, high) pairs; transpose_kernel flips the kernel's spatial dims and swaps its
    I and O, so a forward convolution's kernel gives exactly that convolution's input
    gradient."""
    del precision
    a, b = _lax_operands(lhs, rhs)
    dims = (_channels_last(a.ndim) if dimension_numbers is None
            else _conv_dims(dimension_numbers, a.ndim))
    pads = padding if isinstance(padding, str) else _pairs(padding, "drx.lax.conv_transpose")
    return Tracer(_drx.conv_transpose(a._value, b._value, [int(s) for s in strides], pads,
                                      [int(r) for r in (rhs_dilation or [])], dims,
                                      bool(transpose_kernel)))


# ---- windowed reductions -------------------------------------------------------------------
_WINDOW_BODIES = {"add": "sum", "sum": "sum", "max": "max", "min": "min", "or": "any",
                  "any": "any", "and": "all", "all": "all"}


def _pairs(padding, what):
    try:
        return [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        raise Error(f"{what}: padding must be (low, high) pairs, got {padding!r}") from None


@traced_function("operand", "init_value")
def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding=None, base_dilation=None, window_dilation=None):
    """StableHLO's reduce_window, as jax.lax.reduce_window with a named computation ("add",
    "max", "min", "or", "and"): window sizes, strides, (low, high) padding, base and window
    dilation; init_value None means the computation's identity."""
    body = _WINDOW_BODIES.get(computation) if isinstance(computation, str) else None
    if body is None:
        raise Error("drx.lax.reduce_window: computation must be one of "
                    f"{sorted(_WINDOW_BODIES)}, got {computation!r}")
    t = to_tracer(operand)
    init = None
    if init_value is not None:
        (t, i) = _lax_operands(t, init_value)
        init = i._value
    return Tracer(_drx.reduce_window(
        t._value, init, body, list(window_dimensions), list(window_strides or []),
        _pairs(padding or [], "drx.lax.reduce_window"), list(base_dilation or []),
        list(window_dilation or [])), t._weak)


@traced_function("operand", "source")
def select_and_scatter_add(source, operand, select_prim="ge", window_dimensions=(),
                           window_strides=None, padding=None):
    """The transpose of max (select "ge") or min ("le") pooling, as lax's
    _select_and_scatter_add: each source element added where its window of operand selects
    (ties: the first element in window order)."""
    a, b = _lax_operands(operand, source)
    return Tracer(_drx.select_and_scatter_add(
        a._value, b._value, str(select_prim).upper(), list(window_dimensions),
        list(window_strides or []), _pairs(padding or [], "drx.lax.select_and_scatter_add")))
