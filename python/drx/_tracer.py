"""Traced arrays as Python sees them: drx's Value with Python's operators.

A Tracer wraps a ``_drx.Value`` (a variable of the program being traced) and a weak-type
flag: a Python number passed as an argument is weakly typed, as in JAX, so it takes the
dtype of the array it meets (``x * 2`` keeps x's dtype). NumPy arrays and NumPy scalars are
strongly typed. Using a traced value where Python needs a concrete one (``if x > 0:``,
``float(x)``) raises ConcretizationError, naming the structured control flow to use instead.
"""

import numpy as np

from . import _drx

Error = _drx.Error


class ConcretizationError(Error, TypeError):
    """A traced value was used where Python needs a concrete one (control flow, float())."""


_FLOATS = ("f16", "bf16", "f32", "f64")
_NUMPY_DTYPES = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.float32,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
}
_DRX_DTYPES = {
    np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
    np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64", np.dtype(np.bool_): "bool",
}


def dtype_name(dtype):
    """drx's name for a dtype given as a drx name, a NumPy dtype or a NumPy scalar type."""
    if isinstance(dtype, str) and dtype in _NUMPY_DTYPES:
        return dtype
    try:
        return _DRX_DTYPES[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise Error(f"drx: no drx dtype for {dtype!r}") from None


def numpy_dtype(name):
    """The NumPy dtype of drx's dtype name (bf16 arrays come back as float32)."""
    return np.dtype(_NUMPY_DTYPES[name])


def is_python_scalar(x):
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def weak_array(x):
    """A Python number as a 0-d drx Array: bool, i64 or f64 (weakly typed by the caller)."""
    if isinstance(x, bool):
        return _drx.asarray(np.asarray(x, dtype=np.bool_))
    if isinstance(x, int):
        return _drx.asarray(np.asarray(x, dtype=np.int64))
    return _drx.asarray(np.asarray(x, dtype=np.float64))


def as_value(x):
    """x as a Value of the current trace: a Tracer's own, or a constant."""
    if isinstance(x, Tracer):
        return x._value
    if isinstance(x, _drx.Value):
        return x
    if is_python_scalar(x):
        return _drx.constant(weak_array(x))
    return _drx.constant(_drx.asarray(np.asarray(x)))


def _binary(op, a, b):
    """op on two operands, at least one a Tracer, with JAX's weak typing of Python numbers."""
    if not isinstance(a, Tracer):
        return _binary_reflected(op, b, a)
    if isinstance(b, Tracer):
        va, vb, weak = promoted(a, b)
        return Tracer(op(va, vb), weak)
    if is_python_scalar(b):
        va = _promote_for_scalar(a._value, b)
        return Tracer(op(va, _drx.scalar_like(va, float(b))), a._weak)
    return _binary(op, a, Tracer(as_value(b)))  # a NumPy operand: strongly typed


def _bits(dtype):
    return 8 if dtype == "bool" else int(dtype.lstrip("biuf")) if dtype != "bf16" else 16


def promote_types(a, b):
    """JAX's promotion of two dtypes of the same weakness (jax_enable_x64): bool < integers <
    floats; within floats the wider (f16 with bf16: f32); within integers of one signedness
    the wider; a signed and an unsigned integer: the signed one if wider, else the signed type
    twice the unsigned's width (u64 with any signed integer: f64)."""
    if a == b:
        return a
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return a if ka > kb else b
    if ka == 2:
        return "f32" if {a, b} == {"f16", "bf16"} else max(a, b, key=_bits)
    if (a[0] == "i") == (b[0] == "i"):
        return max(a, b, key=_bits)
    signed, unsigned = (a, b) if a[0] == "i" else (b, a)
    if _bits(unsigned) < _bits(signed):
        return signed
    return "f64" if _bits(unsigned) == 64 else f"i{2 * _bits(unsigned)}"


def promoted(a, b):
    """Two Tracers' values in the dtype JAX computes them in, and whether the result is weakly
    typed: strong meets strong (or weak meets weak) by promote_types; weak meets strong by
    _join_weak."""
    va, vb = a._value, b._value
    if va.dtype == vb.dtype:
        return va, vb, a._weak and b._weak
    if a._weak != b._weak:
        if a._weak:
            return _join_weak(va, vb)
        vb, va, weak = _join_weak(vb, va)
        return va, vb, weak
    to = promote_types(va.dtype, vb.dtype)
    return (va if va.dtype == to else _drx.astype(va, to),
            vb if vb.dtype == to else _drx.astype(vb, to), a._weak)


def _kind(dtype):
    """0 for bool, 1 for integers, 2 for floating point: the order of JAX's type lattice."""
    return 0 if dtype == "bool" else 2 if dtype in _FLOATS else 1


def _join_weak(weak_value, strong_value):
    """A weakly typed value meeting a strong one, as in JAX: the strong dtype wins within a
    kind (bool < integer < float); a weak value of a higher kind keeps its own dtype (f64, i64)
    and the result stays weak. Returns (weak side, strong side, weak result)."""
    if _kind(weak_value.dtype) > _kind(strong_value.dtype):
        return weak_value, _drx.astype(strong_value, weak_value.dtype), True
    return _drx.astype(weak_value, strong_value.dtype), strong_value, False


def _binary_reflected(op, t, other):
    """op(other, t) for a Tracer t and a non-Tracer other."""
    if is_python_scalar(other):
        vt = _promote_for_scalar(t._value, other)
        return Tracer(op(_drx.scalar_like(vt, float(other)), vt), t._weak)
    return _binary(op, Tracer(as_value(other)), t)


def _promote_for_scalar(v, scalar):
    """An integer or bool array meeting a Python float becomes f64, and a bool array meeting a
    Python int i64, as in JAX with x64 (a weak number of a higher kind sets the dtype)."""
    if isinstance(scalar, float) and v.dtype not in _FLOATS:
        return _drx.astype(v, "f64")
    if isinstance(scalar, int) and not isinstance(scalar, bool) and v.dtype == "bool":
        return _drx.astype(v, "i64")
    return v


def _matmul(a, b):
    a = a if isinstance(a, Tracer) else Tracer(as_value(a))
    b = b if isinstance(b, Tracer) else Tracer(as_value(b))
    va, vb, weak = promoted(a, b)
    return Tracer(_drx.matmul(va, vb), weak)


def _numpy():
    from . import numpy  # drx.numpy builds on this module
    return numpy


def _concrete_error(what):
    return ConcretizationError(
        f"{what} of a traced array: its value is not known while the function is traced. "
        "Use drx.lax.cond or drx.lax.while_loop for control flow on traced values, or mark "
        "the argument static (drx.jit(f, static_argnums=...)).")


def _axes(axis, ndim):
    if axis is None:
        return None
    if isinstance(axis, int):
        axis = (axis,)
    return sorted(a + ndim if a < 0 else a for a in axis)


class Tracer:
    """A traced array inside drx.jit, grad, vmap, map_fn and the other transformations."""

    __slots__ = ("_value", "_weak")
    __array_priority__ = 1000  # NumPy defers to the reflected operators below

    def __init__(self, value, weak=False):
        self._value = value
        self._weak = weak

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: numpy_dtype(self._value.dtype))
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    weak_type = property(lambda self: self._weak)
    placement = property(lambda self: self._value.placement or None)

    def __repr__(self):
        return repr(self._value)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    # Python needs concrete values here.
    def __bool__(self):
        raise _concrete_error("bool()")

    def __float__(self):
        raise _concrete_error("float()")

    def __int__(self):
        raise _concrete_error("int()")

    def __index__(self):
        raise _concrete_error("Using as an index")

    def __array__(self, dtype=None):
        raise _concrete_error("numpy.asarray()")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    # Arithmetic.
    def __add__(self, o): return _binary(_drx.add, self, o)
    def __radd__(self, o): return _binary_reflected(_drx.add, self, o)
    def __sub__(self, o): return _binary(_drx.sub, self, o)
    def __rsub__(self, o): return _binary_reflected(_drx.sub, self, o)
    def __mul__(self, o): return _binary(_drx.mul, self, o)
    def __rmul__(self, o): return _binary_reflected(_drx.mul, self, o)
    def __truediv__(self, o): return _binary(_drx.div, self._to_float(), o)
    def __rtruediv__(self, o): return _binary_reflected(_drx.div, self._to_float(), o)
    def __pow__(self, o): return _binary(_drx.pow, self, o)
    def __rpow__(self, o): return _binary_reflected(_drx.pow, self, o)
    # Python's and NumPy's % and // floor (the divisor's sign); drx's remainder truncates.
    def __mod__(self, o): return _numpy().remainder(self, o)
    def __rmod__(self, o): return _numpy().remainder(o, self)
    def __floordiv__(self, o): return _numpy().floor_divide(self, o)
    def __rfloordiv__(self, o): return _numpy().floor_divide(o, self)
    def __matmul__(self, o): return _matmul(self, o)
    def __rmatmul__(self, o): return _matmul(o, self)
    def __neg__(self): return Tracer(_drx.neg(self._value), self._weak)
    def __pos__(self): return self
    def __abs__(self): return Tracer(_drx.abs(self._value), self._weak)
    def __lt__(self, o): return _binary(_drx.less, self, o)._strong()
    def __le__(self, o): return _binary(_drx.less_equal, self, o)._strong()
    def __gt__(self, o): return _binary(_drx.greater, self, o)._strong()
    def __ge__(self, o): return _binary(_drx.greater_equal, self, o)._strong()
    def __eq__(self, o): return _binary(_drx.equal, self, o)._strong()
    def __ne__(self, o): return _binary(_drx.not_equal, self, o)._strong()
    def __and__(self, o): return _binary(_drx.bitwise_and, self, o)
    def __or__(self, o): return _binary(_drx.bitwise_or, self, o)
    def __xor__(self, o): return _binary(_drx.bitwise_xor, self, o)
    def __invert__(self): return Tracer(_drx.bitwise_not(self._value), self._weak)
    __hash__ = None  # == is elementwise

    def _strong(self):
        return Tracer(self._value, False)

    def _to_float(self):
        if self._value.dtype in _FLOATS:
            return self
        return Tracer(_drx.astype(self._value, "f64"), self._weak)

    # Methods as on NumPy arrays.
    @property
    def T(self):
        return self.transpose()

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        perm = axes or tuple(reversed(range(self.ndim)))
        return Tracer(_drx.transpose(self._value, list(perm)), self._weak)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(shape)
        if shape.count(-1) > 1:
            raise Error(f"reshape: at most one -1 in {tuple(shape)}")
        if -1 in shape:
            known = 1
            for d in shape:
                known *= d if d != -1 else 1
            shape[shape.index(-1)] = self.size // known if known else 0
        return Tracer(_drx.reshape(self._value, shape), self._weak)

    def astype(self, dtype):
        return Tracer(_drx.astype(self._value, dtype_name(dtype)))

    def _reduce(self, fn, axis, keepdims):
        return Tracer(fn(self._value, _axes(axis, self.ndim), keepdims), self._weak)

    def sum(self, axis=None, keepdims=False): return self._reduce(_drx.sum, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self._to_float()._reduce(_drx.mean, axis, keepdims)
    def max(self, axis=None, keepdims=False): return self._reduce(_drx.max, axis, keepdims)
    def min(self, axis=None, keepdims=False): return self._reduce(_drx.min, axis, keepdims)

    def __getitem__(self, index):
        from ._indexing import getitem
        return getitem(self, index)

    @property
    def at(self):
        from ._indexing import IndexUpdateHelper
        return IndexUpdateHelper(self)
