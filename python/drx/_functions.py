"""Array functions written once, on Tracers, and callable both inside a trace and on NumPy
arrays (drx.numpy's and drx.lax's functions, as jnp's and lax's are).

Inside a trace the function runs as written. Outside one it runs compiled, as JAX runs a
jnp function on concrete arrays: its array arguments go through drx.jit, and its other
arguments (axes, shapes, dtypes) key one jitted function each, so repeated calls with the
same options and argument types trace and compile once.
"""

import functools
import inspect

import numpy as np

from . import _drx
from ._api import jit
from ._tracer import Error, Tracer, as_value, dtype_name, is_python_scalar, weak_array


def to_tracer(x):
    """x as a Tracer of the current trace: a Python number stays weakly typed."""
    if isinstance(x, Tracer):
        return x
    if is_python_scalar(x):
        return Tracer(_drx.constant(weak_array(x)), True)
    return Tracer(as_value(x))


def dtype_or_none(dtype):
    """drx's name of a dtype argument (NumPy's or drx's spelling), or None."""
    return None if dtype is None else dtype_name(dtype)


def _frozen(v):
    """A hashable stand-in for an option's value (lists become tuples, dtypes their names)."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(e) for e in v)
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    try:
        hash(v)
    except TypeError:
        raise Error(f"drx: option {v!r} must be hashable (a number, a tuple, a dtype)") from None
    return v


def traced_function(*array_params):
    """Decorates fn (written on Tracers); array_params names its array arguments, each an
    array-like, a Python number, None or a sequence of those. The other arguments are
    options: outside a trace, one compiled function per distinct set of options."""

    def decorate(fn):
        signature = inspect.signature(fn)
        compiled = {}

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if _drx.in_trace():
                return fn(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{fn.__module__}.{fn.__name__}: {e}") from None
            names = tuple(n for n in bound.arguments if n in array_params)
            options = tuple((n, _frozen(v)) for n, v in bound.arguments.items()
                            if n not in array_params)
            key = (names, options)
            f = compiled.get(key)
            if f is None:
                fixed = dict(options)

                def call(*arrays):
                    return fn(**fixed, **dict(zip(names, arrays)))

                f = compiled[key] = jit(call)
            return f(*(bound.arguments[n] for n in names))

        wrapper.compiled = compiled  # for inspection: one jitted function per options
        return wrapper

    return decorate


def normalize_axis(axis, ndim, what):
    """A non-negative axis, or a drx.Error naming `what` for one out of range."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise Error(f"{what}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise Error(f"{what}: axis {axis} is out of range for an array of {ndim} dimensions")
    return int(axis) % max(ndim, 1)


def normalize_axes(axis, ndim, what):
    """axis=None (every axis), an int or a sequence of ints, as a sorted list."""
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = sorted(normalize_axis(a, ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise Error(f"{what}: repeated axis in {axis!r}")
    return out
