"""drx.numpy: drx's array ops with NumPy's names and keywords, as jax.numpy.

    import drx.numpy as dnp
    y = dnp.sum(dnp.exp(x), axis=-1, keepdims=True)

Every function takes traced arrays inside drx.jit, grad, vmap and map_fn, and NumPy arrays
outside (compiled once per options and argument types; the result is a read-only NumPy
array). Dtypes follow JAX with x64: Python numbers are weakly typed, mixed dtypes promote on
JAX's lattice, and functions defined on real numbers (exp, log, divide, mean ...) take
integers as float64.
"""

import numpy as _np

from . import _drx
from ._functions import dtype_or_none as _dtype_or_none
from ._functions import normalize_axes as _normalize_axes
from ._functions import normalize_axis as _normalize_axis
from ._functions import to_tracer as _to_tracer
from ._functions import traced_function as _traced_function
from ._tracer import _FLOATS, _binary, _matmul
from ._tracer import Error as _Error
from ._tracer import Tracer as _Tracer
from ._tracer import dtype_name as _dtype_name
from ._tracer import is_python_scalar as _is_python_scalar
from ._tracer import numpy_dtype as _numpy_dtype
from ._tracer import promote_types as _promote_types
from ._tracer import promoted as _promoted

# Dtypes, as NumPy's (drx takes these, NumPy's dtype objects and drx's names "f32" ...).
bool_, float16, float32, float64 = _np.bool_, _np.float16, _np.float32, _np.float64
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
ndarray = _np.ndarray


def _inexact(t):
    """t in a floating-point dtype: integers and bools become float64 (JAX with x64)."""
    return t if t._value.dtype in _FLOATS else _Tracer(_drx.astype(t._value, "f64"), t._weak)


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__module__ = __name__
    return fn


# ---- elementwise ---------------------------------------------------------------------------
def _unary(name, op, doc, inexact=False):
    def f(x):
        t = _to_tracer(x)
        if inexact:
            t = _inexact(t)
        return _Tracer(op(t._value), t._weak)

    return _traced_function("x")(_named(f, name, doc))


abs = _unary("abs", _drx.abs, "|x|, elementwise.")  # noqa: A001 (NumPy's name)
absolute = abs
negative = _unary("negative", _drx.neg, "-x, elementwise.")
sign = _unary("sign", _drx.sign, "-1, 0 or 1 by the sign of x (NaN stays NaN).")
square = _unary("square", _drx.square, "x * x, elementwise.")
exp = _unary("exp", _drx.exp, "e ** x, elementwise.", inexact=True)
expm1 = _unary("expm1", _drx.expm1, "e ** x - 1, accurate near 0.", inexact=True)
log = _unary("log", _drx.log, "The natural logarithm, elementwise.", inexact=True)
log1p = _unary("log1p", _drx.log1p, "log(1 + x), accurate near 0.", inexact=True)
sqrt = _unary("sqrt", _drx.sqrt, "The square root, elementwise.", inexact=True)
cbrt = _unary("cbrt", _drx.cbrt, "The real cube root, elementwise.", inexact=True)
tanh = _unary("tanh", _drx.tanh, "The hyperbolic tangent, elementwise.", inexact=True)
sin = _unary("sin", _drx.sin, "The sine, elementwise.", inexact=True)
cos = _unary("cos", _drx.cos, "The cosine, elementwise.", inexact=True)
floor = _unary("floor", _drx.floor, "The largest integer <= x.", inexact=True)
ceil = _unary("ceil", _drx.ceil, "The smallest integer >= x.", inexact=True)
rint = _unary("rint", _drx.round, "To the nearest integer, halves to even.", inexact=True)
isfinite = _unary("isfinite", _drx.is_finite, "Neither inf nor NaN (bool).", inexact=True)
invert = _unary("invert", _drx.bitwise_not, "Bitwise not (logical not for bool).")
bitwise_not = invert


@_traced_function("a")
def round(a, decimals=0):  # noqa: A001 (NumPy's name)
    """To the nearest integer, halves to even (decimals=0 only)."""
    if decimals != 0:
        raise _Error(f"drx.numpy.round: only decimals=0 is supported, got {decimals}")
    t = _to_tracer(a)
    return t if t._value.dtype not in _FLOATS else rint(t)  # integers stay, as in NumPy


around = round


@_traced_function("x")
def logical_not(x):
    """not x, elementwise (bool)."""
    return _Tracer(_drx.bitwise_not(_as_bool(_to_tracer(x))._value))


@_traced_function("x")
def reciprocal(x):
    """1 / x, elementwise."""
    return 1.0 / _inexact(_to_tracer(x))


@_traced_function("x")
def arctan(x):
    """The arctangent, elementwise."""
    return arctan2(x, 1.0)


def _binary_fn(name, op, doc, inexact=False):
    def f(x1, x2):
        a, b = _to_tracer(x1), _to_tracer(x2)
        if inexact:
            a, b = _inexact(a), _inexact(b)
        return _binary(op, a, b)

    return _traced_function("x1", "x2")(_named(f, name, doc))


add = _binary_fn("add", _drx.add, "x1 + x2, broadcasting.")
subtract = _binary_fn("subtract", _drx.sub, "x1 - x2, broadcasting.")
multiply = _binary_fn("multiply", _drx.mul, "x1 * x2, broadcasting.")
divide = _binary_fn("divide", _drx.div, "x1 / x2 (true division), broadcasting.", inexact=True)
true_divide = divide
power = _binary_fn("power", _drx.pow, "x1 ** x2, broadcasting.")
maximum = _binary_fn("maximum", _drx.maximum, "The larger of x1 and x2 (NaN wins).")
minimum = _binary_fn("minimum", _drx.minimum, "The smaller of x1 and x2 (NaN wins).")
fmod = _binary_fn("fmod", _drx.remainder, "x1 - x2 * trunc(x1 / x2): the dividend's sign.")
arctan2 = _binary_fn("arctan2", _drx.atan2, "The angle of (x2, x1), in (-pi, pi].",
                     inexact=True)
less = _binary_fn("less", _drx.less, "x1 < x2 (bool).")
less_equal = _binary_fn("less_equal", _drx.less_equal, "x1 <= x2 (bool).")
greater = _binary_fn("greater", _drx.greater, "x1 > x2 (bool).")
greater_equal = _binary_fn("greater_equal", _drx.greater_equal, "x1 >= x2 (bool).")
equal = _binary_fn("equal", _drx.equal, "x1 == x2 (bool).")
not_equal = _binary_fn("not_equal", _drx.not_equal, "x1 != x2 (bool).")
bitwise_and = _binary_fn("bitwise_and", _drx.bitwise_and, "x1 & x2 (integers and bool).")
bitwise_or = _binary_fn("bitwise_or", _drx.bitwise_or, "x1 | x2 (integers and bool).")
bitwise_xor = _binary_fn("bitwise_xor", _drx.bitwise_xor, "x1 ^ x2 (integers and bool).")
left_shift = _binary_fn("left_shift", _drx.shift_left, "x1 << x2 (integers).")


@_traced_function("x1", "x2")
def right_shift(x1, x2):
    """x1 >> x2: arithmetic for signed integers, logical for unsigned (as NumPy)."""
    a, b = _to_tracer(x1), _to_tracer(x2)
    va, vb, weak = _promoted(a, b)
    op = _drx.shift_right_logical if va.dtype.startswith("u") else _drx.shift_right_arithmetic
    return _Tracer(op(va, vb), weak)


@_traced_function("x1", "x2")
def remainder(x1, x2):
    """x1 - x2 * floor(x1 / x2): the divisor's sign, as NumPy's and Python's %."""
    a, b = _to_tracer(x1), _to_tracer(x2)
    va, vb, weak = _promoted(a, b)
    r = _Tracer(_drx.remainder(va, vb), weak)
    b = _Tracer(vb, weak)
    zero = 0
    fix = (r != zero) & ((r < zero) != (b < zero))
    return where(fix, r + b, r)


mod = remainder


@_traced_function("x1", "x2")
def floor_divide(x1, x2):
    """floor(x1 / x2), as NumPy's and Python's //."""
    a, b = _to_tracer(x1), _to_tracer(x2)
    va, vb, weak = _promoted(a, b)
    a, b = _Tracer(va, weak), _Tracer(vb, weak)
    if va.dtype in _FLOATS:
        return floor(a / b)
    q = _Tracer(_drx.div(va, vb), weak)  # truncated
    r = _Tracer(_drx.remainder(va, vb), weak)
    zero = 0
    return where((r != zero) & ((r < zero) != (b < zero)), q - 1, q)


def _as_bool(t):
    return t if t._value.dtype == "bool" else t != 0


def _logical(name, op, doc):
    def f(x1, x2):
        return _Tracer(op(_as_bool(_to_tracer(x1))._value, _as_bool(_to_tracer(x2))._value))

    return _traced_function("x1", "x2")(_named(f, name, doc))


logical_and = _logical("logical_and", _drx.bitwise_and, "x1 and x2, elementwise (bool).")
logical_or = _logical("logical_or", _drx.bitwise_or, "x1 or x2, elementwise (bool).")
logical_xor = _logical("logical_xor", _drx.bitwise_xor, "x1 xor x2, elementwise (bool).")


@_traced_function("condition", "x", "y")
def where(condition, x=None, y=None):
    """x where condition holds, else y (broadcasting; x and y promote to one dtype)."""
    if x is None or y is None:
        raise _Error("drx.numpy.where: give both x and y (the one-argument form's result "
                    "has a data-dependent shape)")
    c = _as_bool(_to_tracer(condition))
    a, b = _to_tracer(x), _to_tracer(y)
    va, vb, weak = _promoted(a, b)
    shape = _np.broadcast_shapes(c.shape, va.shape, vb.shape)
    return _Tracer(_drx.where(_drx.broadcast_to(c._value, list(shape)),
                             _drx.broadcast_to(va, list(shape)),
                             _drx.broadcast_to(vb, list(shape))), weak)


@_traced_function("a", "a_min", "a_max")
def clip(a, a_min=None, a_max=None):
    """min(max(a, a_min), a_max), elementwise; either bound may be None."""
    t = _to_tracer(a)
    if a_min is not None:
        t = maximum(t, a_min)
    if a_max is not None:
        t = minimum(t, a_max)
    return t


# ---- products ------------------------------------------------------------------------------
@_traced_function("a", "b")
def matmul(a, b):
    """The matrix product, NumPy's rules (1-D operands _promoted, batch axes broadcast)."""
    return _matmul(_to_tracer(a), _to_tracer(b))


@_traced_function("a", "b")
def dot(a, b):
    """The dot product: matmul for 1-D and 2-D operands, a scaling for 0-D ones."""
    ta, tb = _to_tracer(a), _to_tracer(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return ta * tb
    if ta.ndim > 2 or tb.ndim > 2:
        raise _Error(f"drx.numpy.dot: operands of {ta.ndim} and {tb.ndim} dimensions; for more "
                    "than 2, use matmul or drx.lax.dot_general")
    return _matmul(ta, tb)


@_traced_function("a", "b")
def vdot(a, b):
    """The dot product of a and b flattened."""
    return dot(ravel(a), ravel(b))


@_traced_function("a", "b")
def outer(a, b):
    """a[:, None] * b[None, :] of a and b flattened."""
    return ravel(a)[:, None] * ravel(b)[None, :]


# ---- reductions ----------------------------------------------------------------------------
def _reduction(name, op, doc, inexact=False, accumulate_bool=False):
    def f(a, axis=None, dtype=None, keepdims=False):
        t = _to_tracer(a)
        if dtype is not None:
            t = _Tracer(_drx.astype(t._value, _dtype_name(dtype)), t._weak)
        elif inexact:
            t = _inexact(t)
        elif accumulate_bool and t._value.dtype == "bool":
            t = _Tracer(_drx.astype(t._value, "i64"), t._weak)
        axes = _normalize_axes(axis, t.ndim, f"drx.numpy.{name}")
        return _Tracer(op(t._value, axes, keepdims), t._weak)

    return _traced_function("a")(_named(f, name, doc))


sum = _reduction("sum", _drx.sum, "The sum over axis (None: all), NumPy's keywords.",  # noqa: A001
                 accumulate_bool=True)
mean = _reduction("mean", _drx.mean, "The mean over axis (None: all); integers as float64.",
                  inexact=True)
max = _reduction("max", _drx.max, "The largest element over axis (None: all).")  # noqa: A001
min = _reduction("min", _drx.min, "The smallest element over axis (None: all).")  # noqa: A001
amax, amin = max, min
prod = _reduction("prod", _drx.prod, "The product over axis (None: all); its gradient is exact "  # noqa: A001
                  "at zeros.", accumulate_bool=True)


def _spread(name, op, doc):
    def f(a, axis=None, dtype=None, ddof=0, keepdims=False):
        t = _to_tracer(a)
        t = t.astype(dtype) if dtype is not None else _inexact(t)
        axes = _normalize_axes(axis, t.ndim, f"drx.numpy.{name}")
        return _Tracer(op(t._value, axes, keepdims, int(ddof)), t._weak)

    return _traced_function("a")(_named(f, name, doc))


var = _spread("var", _drx.var, "The variance over axis (None: all), dividing by n - ddof.")
std = _spread("std", _drx.std, "The standard deviation over axis (None: all): sqrt(var).")


def einsum(subscripts, *operands):
    """Einstein summation with NumPy's subscripts ('ij,jk->ik', '...ij,...jk->...ik', implicit
    output); operands promote to one dtype first, as jnp.einsum does."""
    return _einsum(subscripts, list(operands))


@_traced_function("operands")
def _einsum(subscripts, operands):
    ts = [_to_tracer(x) for x in operands]
    if not ts:
        raise _Error("drx.numpy.einsum: needs at least one operand")
    ts, weak = _common(ts)
    return _Tracer(_drx.einsum(subscripts, [t._value for t in ts]), weak)


@_traced_function("a")
def all(a, axis=None, keepdims=False):  # noqa: A001 (NumPy's name)
    """Whether every element over axis is true (nonzero)."""
    t = _as_bool(_to_tracer(a))
    i = _Tracer(_drx.astype(t._value, "u8"))
    return min(i, axis=axis, keepdims=keepdims) != 0


@_traced_function("a")
def any(a, axis=None, keepdims=False):  # noqa: A001 (NumPy's name)
    """Whether some element over axis is true (nonzero)."""
    t = _as_bool(_to_tracer(a))
    i = _Tracer(_drx.astype(t._value, "u8"))
    return max(i, axis=axis, keepdims=keepdims) != 0


def _arg_reduction(name, op, doc):
    def f(a, axis=None, keepdims=False):
        t = _to_tracer(a)
        if axis is None:
            if keepdims:
                raise _Error(f"drx.numpy.{name}: keepdims needs an axis")
            return _Tracer(op(_drx.reshape(t._value, [t.size]), 0, False))
        return _Tracer(op(t._value, _normalize_axis(axis, t.ndim, f"drx.numpy.{name}"),
                         keepdims))

    return _traced_function("a")(_named(f, name, doc))


argmax = _arg_reduction("argmax", _drx.argmax, "The index of the largest element (first of "
                        "ties) along axis (None: of the flattened array).")
argmin = _arg_reduction("argmin", _drx.argmin, "The index of the smallest element (first of "
                        "ties) along axis (None: of the flattened array).")


@_traced_function("a")
def cumsum(a, axis=None, dtype=None):
    """Running sums along axis (None: of the flattened array)."""
    t = _to_tracer(a)
    if dtype is not None:
        t = t.astype(dtype)
    if axis is None:
        t, axis = ravel(t), 0
    return _Tracer(_drx.cumsum(t._value, _normalize_axis(axis, t.ndim, "drx.numpy.cumsum")),
                  t._weak)


@_traced_function("a")
def sort(a, axis=-1):
    """a sorted along axis, ascending (stable; NaN last)."""
    t = _to_tracer(a)
    if axis is None:
        t, axis = ravel(t), 0
    return _Tracer(_drx.sort(t._value, _normalize_axis(axis, t.ndim, "drx.numpy.sort")), t._weak)


@_traced_function("a")
def argsort(a, axis=-1):
    """The indices that sort a along axis (stable)."""
    t = _to_tracer(a)
    if axis is None:
        t, axis = ravel(t), 0
    return _Tracer(_drx.argsort(t._value, _normalize_axis(axis, t.ndim, "drx.numpy.argsort")))


# ---- shapes --------------------------------------------------------------------------------
@_traced_function("a")
def reshape(a, newshape):
    """a with shape newshape (one entry may be -1)."""
    if isinstance(newshape, (int, _np.integer)):
        newshape = (newshape,)
    return _to_tracer(a).reshape(tuple(newshape))


@_traced_function("a")
def ravel(a):
    """a flattened to one dimension."""
    t = _to_tracer(a)
    return t.reshape((t.size,))


@_traced_function("a")
def transpose(a, axes=None):
    """a with its axes permuted (None: reversed)."""
    t = _to_tracer(a)
    perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(
        _normalize_axis(x, t.ndim, "drx.numpy.transpose") for x in axes)
    if sorted(perm) != list(range(t.ndim)):
        raise _Error(f"drx.numpy.transpose: axes {axes!r} is not a permutation of "
                    f"{t.ndim} axes")
    return t.transpose(perm)


@_traced_function("a")
def swapaxes(a, axis1, axis2):
    """a with axes axis1 and axis2 exchanged."""
    t = _to_tracer(a)
    perm = list(range(t.ndim))
    i, j = (_normalize_axis(x, t.ndim, "drx.numpy.swapaxes") for x in (axis1, axis2))
    perm[i], perm[j] = perm[j], perm[i]
    return t.transpose(tuple(perm))


@_traced_function("a")
def moveaxis(a, source, destination):
    """a with axis source moved to position destination."""
    t = _to_tracer(a)
    s = _normalize_axis(source, t.ndim, "drx.numpy.moveaxis")
    d = _normalize_axis(destination, t.ndim, "drx.numpy.moveaxis")
    return _Tracer(_drx.move_axis(t._value, s, d), t._weak)


@_traced_function("a")
def expand_dims(a, axis):
    """a with a new axis of size 1 at each position in axis."""
    t = _to_tracer(a)
    axes = [axis] if isinstance(axis, (int, _np.integer)) else list(axis)
    out_ndim = t.ndim + len(axes)
    for x in sorted(_normalize_axis(x, out_ndim, "drx.numpy.expand_dims") for x in axes):
        t = _Tracer(_drx.expand_dims(t._value, x), t._weak)
    return t


@_traced_function("a")
def squeeze(a, axis=None):
    """a without its axes of size 1 (or only those in axis, which must have size 1)."""
    t = _to_tracer(a)
    axes = ([i for i, d in enumerate(t.shape) if d == 1] if axis is None
            else _normalize_axes(axis, t.ndim, "drx.numpy.squeeze"))
    for x in reversed(axes):
        if t.shape[x] != 1:
            raise _Error(f"drx.numpy.squeeze: axis {x} has size {t.shape[x]}, not 1")
        t = _Tracer(_drx.squeeze(t._value, x), t._weak)
    return t


def _common(ts):
    """Tracers _promoted to one dtype (pairwise, as JAX's lattice is associative)."""
    out = ts[0]
    for t in ts[1:]:
        out = _Tracer(_promoted(out, t)[0], out._weak and t._weak)
    to = out._value.dtype
    weak = out._weak
    return [t if t._value.dtype == to else _Tracer(_drx.astype(t._value, to)) for t in ts], weak


@_traced_function("arrays")
def concatenate(arrays, axis=0):
    """The arrays joined along an existing axis (None: flattened first)."""
    ts = [_to_tracer(x) for x in arrays]
    if not ts:
        raise _Error("drx.numpy.concatenate: needs at least one array")
    if axis is None:
        ts, axis = [ravel(t) for t in ts], 0
    ts, weak = _common(ts)
    ax = _normalize_axis(axis, ts[0].ndim, "drx.numpy.concatenate")
    return _Tracer(_drx.concatenate([t._value for t in ts], ax), weak)


@_traced_function("arrays")
def stack(arrays, axis=0):
    """The arrays (of one shape) joined along a new axis."""
    ts = [_to_tracer(x) for x in arrays]
    if not ts:
        raise _Error("drx.numpy.stack: needs at least one array")
    return concatenate([expand_dims(t, axis) for t in ts], axis=axis)


@_traced_function("a", "indices")
def take(a, indices, axis=None):
    """Elements of a at indices along axis (None: of the flattened array)."""
    t = _to_tracer(a)
    if axis is None:
        t, axis = ravel(t), 0
    i = _to_tracer(indices)
    if i._value.dtype not in ("i32", "i64", "u32", "i16", "i8", "u8", "u16", "u64"):
        raise _Error(f"drx.numpy.take: indices must be integers, got {i._value.dtype}")
    return _Tracer(_drx.take(t._value, i._value, _normalize_axis(axis, t.ndim, "drx.numpy.take")),
                  t._weak)


@_traced_function("array")
def broadcast_to(array, shape):
    """array broadcast to shape, NumPy's rules."""
    t = _to_tracer(array)
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
    return _Tracer(_drx.broadcast_to(t._value, list(shape)), t._weak)


@_traced_function("m")
def flip(m, axis=None):
    """m with the order of elements along axis reversed (None: every axis)."""
    t = _to_tracer(m)
    return _Tracer(_drx.reverse(t._value, _normalize_axes(axis, t.ndim, "drx.numpy.flip")),
                  t._weak)


@_traced_function("array", "constant_values")
def pad(array, pad_width, mode="constant", constant_values=0):
    """array padded with constant_values: pad_width an int, a (before, after) pair, or one
    pair per axis (mode "constant" only)."""
    if mode != "constant":
        raise _Error(f"drx.numpy.pad: only mode='constant' is supported, got {mode!r}")
    t = _to_tracer(array)
    widths = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (t.ndim, 2))
    if (widths < 0).any():
        raise _Error(f"drx.numpy.pad: negative pad_width {pad_width!r}")
    v = _to_tracer(constant_values)
    v = _Tracer(_drx.astype(v._value, t._value.dtype)) if v._value.dtype != t._value.dtype else v
    return _Tracer(_drx.pad(t._value, v._value, [int(w) for w in widths[:, 0]],
                           [int(w) for w in widths[:, 1]], [0] * t.ndim), t._weak)


# ---- creation and conversion ---------------------------------------------------------------
def _shape(shape):
    return (int(shape),) if isinstance(shape, (int, _np.integer)) else tuple(int(d) for d in shape)


def full(shape, fill_value, dtype=None):
    """An array of shape filled with fill_value (dtype: fill_value's, or NumPy's default)."""
    if not _drx.in_trace():
        return _np.full(_shape(shape), fill_value, dtype=dtype)
    if isinstance(fill_value, _Tracer):
        t = fill_value if dtype is None else fill_value.astype(dtype)
        return broadcast_to(t, _shape(shape))
    name = _dtype_name(dtype if dtype is not None else _np.asarray(fill_value).dtype)
    return _Tracer(_drx.fill(list(_shape(shape)), float(fill_value), name))


def zeros(shape, dtype=float64):
    """An array of zeros (float64 by default, as NumPy and JAX with x64)."""
    return full(shape, 0, dtype)


def ones(shape, dtype=float64):
    """An array of ones (float64 by default)."""
    return full(shape, 1, dtype)


def empty(shape, dtype=float64):
    """An array of zeros: drx has no uninitialised memory."""
    return zeros(shape, dtype)


@_traced_function("a")
def full_like(a, fill_value, dtype=None):
    """An array of a's shape (and dtype, unless given) filled with fill_value."""
    t = _to_tracer(a)
    name = _dtype_or_none(dtype) or t._value.dtype
    return _Tracer(_drx.fill(list(t.shape), float(fill_value), name))


@_traced_function("a")
def zeros_like(a, dtype=None):
    """Zeros of a's shape and dtype (unless given)."""
    return full_like(a, 0, dtype)


@_traced_function("a")
def ones_like(a, dtype=None):
    """Ones of a's shape and dtype (unless given)."""
    return full_like(a, 1, dtype)


def arange(start, stop=None, step=1, dtype=None):
    """Evenly spaced values in [start, stop) (concrete bounds), NumPy's dtype rules."""
    values = _np.arange(start, stop, step, dtype=dtype)
    if not _drx.in_trace():
        return values
    if values.dtype.kind in "iu" and step == 1 and (start if stop is not None else 0) == 0:
        return _Tracer(_drx.arange(values.size, _dtype_name(values.dtype)))
    return _Tracer(_drx.constant(_drx.asarray(values)))


def eye(N, M=None, k=0, dtype=float64):
    """Ones on the k-th diagonal of an N x M array, zeros elsewhere."""
    values = _np.eye(N, M, k, dtype=dtype)
    return values if not _drx.in_trace() else _Tracer(_drx.constant(_drx.asarray(values)))


def asarray(a, dtype=None):
    """a as an array of this trace (a traced value stays itself), or a NumPy array outside."""
    if not _drx.in_trace() and not isinstance(a, _Tracer):
        return _np.asarray(a, dtype=dtype)
    t = _to_tracer(a)
    return t if dtype is None else t.astype(dtype)


array = asarray


@_traced_function("x")
def astype(x, dtype):
    """x converted to dtype."""
    return _to_tracer(x).astype(dtype)


def shape(a):
    """a's shape (a tuple of ints, also for traced values)."""
    return tuple(a.shape) if hasattr(a, "shape") else _np.shape(a)


def ndim(a):
    """a's number of dimensions."""
    return len(shape(a))


def size(a):
    """a's number of elements."""
    n = 1
    for d in shape(a):
        n *= d
    return n


def result_type(*arrays_and_dtypes):
    """The dtype drx computes a mix of arrays, dtypes and Python numbers in: JAX's lattice,
    Python numbers weakly typed (they set the dtype only when of a higher kind)."""
    strong = [_dtype_name(x if isinstance(x, (type, _np.dtype, str)) else x.dtype)
              for x in arrays_and_dtypes if not _is_python_scalar(x)]
    weak = [_WEAK[type(x)] for x in arrays_and_dtypes if _is_python_scalar(x)]
    out = None
    for d in strong or weak:
        out = d if out is None else _promote_types(out, d)
    for d in weak if strong else []:
        if _KIND[d] > (0 if out == "bool" else 2 if out in _FLOATS else 1):
            out = d
    if out is None:
        raise _Error("drx.numpy.result_type: needs at least one argument")
    return _numpy_dtype(out)


_WEAK = {bool: "bool", int: "i64", float: "f64"}
_KIND = {"bool": 0, "i64": 1, "f64": 2}
