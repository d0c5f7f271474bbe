"""Counter-based, splittable random numbers with JAX's names and bits (JAX's default PRNG,
threefry2x32, with jax_threefry_partitionable=True, as with jax_enable_x64).

    key = drx.random.key(0)                       # a NumPy uint32[2]
    k1, k2 = drx.random.split(key)                # split(key, num) is an array [num, 2]
    x = drx.random.normal(k1, (3, 4))             # eager: a compiled call, read-only NumPy out
    drx.jit(lambda k: drx.random.uniform(k, (5,), np.float64))(k2)

A key is a uint32[2] array: NumPy outside a trace, a traced array inside drx.jit, grad, vmap
and map_fn bodies (``drx.random.fold_in(k, drx.client_index())`` gives each client a stream of
its own). Random functions are pure: the same key gives the same numbers, eagerly, under jit and
under vmap (a batch of keys gives one stream per key, that key's own); a key is never advanced
in place. Called on a NumPy key outside a trace, a draw runs as a compiled call (one program per
shape, dtype and bounds); key, split and fold_in on a NumPy key compute on the host. Random
outputs carry no derivative with respect to the key.

Differences from JAX: shapes, dtypes and the bounds of randint are static (Python values);
uniform's bounds may also be traced arrays. Floating draws are float32 (the default, where JAX
with x64 defaults to float64) or float64, no float16 or bfloat16; bits draws uint32 or uint8;
randint draws int32 (the default), int64 or uint32 with a span of at most 2^32 (an int64
randint combines two 32-bit draws, where JAX's combines two 64-bit ones); permutation of an
integer n is an int32 array; bernoulli with a Python float p draws float64 uniforms, as JAX
with x64 does, and p must lie in [0, 1].
"""

import numpy as np

from . import _drx
from ._api import jit
from ._tracer import Error, Tracer, as_value, dtype_name, is_python_scalar

__all__ = [
    "PRNGKey", "bernoulli", "bits", "fold_in", "key", "normal", "permutation", "randint",
    "split", "split2", "threefry2x32", "threefry_2x32", "uniform",
]


# ---- checks --------------------------------------------------------------------------------
def _type_str(x):
    """drx's spelling of x's type ("u32[2]", "f32[]"), for error messages."""
    if isinstance(x, Tracer):
        return x._value.dtype + str(list(x.shape)).replace(" ", "")
    a = np.asarray(x)
    try:
        name = dtype_name(a.dtype)
    except Error:
        name = str(a.dtype)
    return name + str(list(a.shape)).replace(" ", "")


def _check_key(fn, key):
    """key, checked to be a u32[2] key (a Tracer, or a NumPy array outside a trace)."""
    if isinstance(key, Tracer):
        ok = key._value.dtype == "u32" and key.shape == (2,)
    elif isinstance(key, (_drx.Value, _drx.Array)):
        ok = key.dtype == "u32" and key.shape == (2,)
        key = Tracer(key) if isinstance(key, _drx.Value) else key.numpy()
    else:
        try:
            key = np.asarray(key)
        except Exception:  # noqa: BLE001: any object NumPy cannot read is not a key
            raise Error(f"random.{fn}: expected a key of type u32[2], got "
                        f"{type(key).__name__}") from None
        ok = key.dtype == np.uint32 and key.shape == (2,)
    if not ok:
        shape = tuple(key.shape)
        batch = " (for a batch of keys, map over them with drx.vmap)" \
            if len(shape) >= 2 and shape[-1] == 2 else ""
        raise Error(f"random.{fn}: expected a key of type u32[2] (from drx.random.key, split "
                    f"or fold_in), got {_type_str(key)}{batch}")
    return key


def _shape(fn, shape):
    """shape as a tuple of non-negative Python ints (an int n is (n,), as NumPy reads it)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise Error(f"random.{fn}: shape must be a tuple of ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise Error(f"random.{fn}: shape {shape!r} must hold Python ints (a static shape), "
                        f"got {d!r}")
        if d < 0:
            raise Error(f"random.{fn}: shape {dims} has a negative dimension")
    return tuple(int(d) for d in dims)


def _dtype(fn, dtype):
    try:
        return dtype_name(dtype)
    except Error:
        raise Error(f"random.{fn}: dtype {dtype!r} is not a dtype drx knows") from None


def _concrete_int(fn, what, x):
    """x as a Python int: a Python or NumPy integer, or a 0-d integer array; else an Error."""
    if isinstance(x, Tracer):
        raise Error(f"random.{fn}: {what} must be a concrete integer (it is static), got a "
                    f"traced {_type_str(x)}")
    if isinstance(x, bool) or isinstance(x, np.bool_):
        raise Error(f"random.{fn}: {what} must be an integer, got {x!r}")
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu":
        return int(x)
    raise Error(f"random.{fn}: {what} must be an integer, got {x!r}")


def _in_int64(fn, what, v):
    if not -2**63 <= v < 2**63:
        raise Error(f"random.{fn}: {what} = {v} does not fit in int64")
    return v


# ---- eager calls ---------------------------------------------------------------------------
_JITTED = {}


def _apply(impl, dynamic, static=()):
    """impl(*dynamic, *static): inline inside a trace; outside one (NumPy arguments), through
    impl's own jit, static arguments being static (JAX runs its random functions the same
    way)."""
    if _drx.in_trace():
        return impl(*dynamic, *static)
    jitted = _JITTED.get(impl)
    if jitted is None:
        n = len(dynamic)
        jitted = _JITTED[impl] = jit(impl, static_argnums=tuple(range(n, n + len(static))))
    return jitted(*dynamic, *static)


def _value(x):
    return as_value(x)


# ---- keys ----------------------------------------------------------------------------------
def key(seed):
    """A PRNG key (uint32[2]) from an integer seed: [seed >> 32, seed & 0xffffffff], as JAX's
    PRNGKey with 64-bit seeds. A Python or NumPy integer gives a NumPy key; a traced integer
    scalar a traced key.

    C++: """
    if isinstance(seed, Tracer):
        return Tracer(_drx.random_key(seed._value))
    s = _in_int64("key", "seed", _concrete_int("key", "seed", seed))
    return _drx.random_key(s).numpy()


PRNGKey = key


def _split_impl(k, n):
    return Tracer(_drx.random_split(k._value, n))


def split(key, num=2):
    """num new keys from key, as one uint32 array of shape [num, 2] (JAX's split: key i is
    fold_in(key, i)). num may be a shape tuple: the keys then have shape num + (2,).

    C++: """
    key = _check_key("split", key)
    shape = _shape("split", num)
    n = int(np.prod(shape, dtype=np.int64))
    if isinstance(key, Tracer):
        out = _split_impl(key, n)
        return out if len(shape) == 1 else out.reshape(shape + (2,))
    out = _drx.random_split(_drx.asarray(key), n).numpy()
    return out if len(shape) == 1 else out.reshape(shape + (2,))


def split2(key):
    """Two new keys from key, as a pair (split(key, 2)[0], split(key, 2)[1]).

    C++: """
    key = _check_key("split2", key)
    if isinstance(key, Tracer):
        a, b = _drx.random_split2(key._value)
        return Tracer(a), Tracer(b)
    a, b = _drx.random_split2(_drx.asarray(key))
    return a.numpy(), b.numpy()


def fold_in(key, data):
    """A new key from key and an integer (taken modulo 2^32): threefry2x32(key, (0, data)).
    data may be a traced integer scalar, e.g. drx.client_index() in a map_fn body.

    C++: """
    key = _check_key("fold_in", key)
    if isinstance(data, Tracer):
        return Tracer(_drx.random_fold_in(_value(key), data._value))
    d = _concrete_int("fold_in", "data", data) % 2**32
    if isinstance(key, Tracer):
        return Tracer(_drx.random_fold_in(key._value, d))
    return _drx.random_fold_in(_drx.asarray(key), d).numpy()


# ---- draws ---------------------------------------------------------------------------------
def _bits_impl(k, shape, dt):
    return Tracer(_drx.random_bits(_value(k), list(shape), dt))


def bits(key, shape=(), dtype=np.uint32):
    """Uniformly random bits of shape: uint32 (the two words of the threefry block at each
    element's flat index, xor-ed), or uint8 (their low byte).

    C++: """
    key = _check_key("bits", key)
    return _apply(_bits_impl, (key,), (_shape("bits", shape), _dtype("bits", dtype)))


def _uniform_impl(k, shape, dt, lo, hi):
    return Tracer(_drx.random_uniform(_value(k), list(shape), dt, lo, hi))


def _uniform_traced_bounds_impl(k, lo, hi, shape, dt):
    """JAX's formula with array bounds: max(lo, u * (hi - lo) + lo), u uniform in [0, 1)."""
    u = _drx.random_uniform(_value(k), list(shape), dt, 0.0, 1.0)
    lo_v, hi_v = _drx.astype(_value(lo), dt), _drx.astype(_value(hi), dt)
    for v in (lo_v, hi_v):
        try:
            np.broadcast_shapes(tuple(v.shape), shape)
        except ValueError:
            raise Error(f"random.uniform: bounds of shape {tuple(v.shape)} do not broadcast to "
                        f"shape {shape}") from None
    scaled = _drx.add(_drx.mul(u, _drx.sub(hi_v, lo_v)), lo_v)
    return Tracer(_drx.maximum(_drx.broadcast_to(lo_v, list(shape)), scaled))


def _is_number(x):
    if isinstance(x, Tracer):
        return False
    return is_python_scalar(x) or isinstance(x, np.generic) or (
        isinstance(x, np.ndarray) and x.ndim == 0)


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0):
    """Uniform samples in [minval, maxval) of shape and a floating dtype (float32 by default):
    23 (float32) or 52 (float64) random mantissa bits give [1, 2), shifted and scaled, never
    below minval. minval and maxval: numbers, or arrays (traced ones too) broadcasting to shape.

    C++: """
    key = _check_key("uniform", key)
    shape, dt = _shape("uniform", shape), _dtype("uniform", dtype)
    if dt not in ("f32", "f64"):
        raise Error(f"random.uniform: dtype {dt}, expected float32 or float64 (randint draws "
                    "integers)")
    if _is_number(minval) and _is_number(maxval):
        lo, hi = float(minval), float(maxval)
        return _apply(_uniform_impl, (key,), (shape, dt, lo, hi))
    return _apply(_uniform_traced_bounds_impl, (key, minval, maxval), (shape, dt))


def _normal_impl(k, shape, dt):
    return Tracer(_drx.random_normal(_value(k), list(shape), dt))


def normal(key, shape=(), dtype=np.float32):
    """Standard normal samples of shape and a floating dtype: sqrt(2) erfinv(u), u uniform in
    (-1, 1) (JAX's formula).

    C++: """
    key = _check_key("normal", key)
    shape, dt = _shape("normal", shape), _dtype("normal", dtype)
    if dt not in ("f32", "f64"):
        raise Error(f"random.normal: dtype {dt}, expected float32 or float64")
    return _apply(_normal_impl, (key,), (shape, dt))


def _bernoulli_number_impl(k, p, shape):
    return Tracer(_drx.random_bernoulli(_value(k), p, list(shape)))


def _bernoulli_array_impl(k, p, shape):
    return Tracer(_drx.random_bernoulli(_value(k), _value(p), list(shape)))


def bernoulli(key, p=np.float32(0.5), shape=None):
    """Bool samples, true with probability p: uniform(key, shape, p's dtype) < p (JAX's
    formula; a Python float p is float64, as in JAX with x64). p: a number in [0, 1] or a
    floating array (traced too) broadcasting to shape; shape=None takes p's shape.

    C++: """
    key = _check_key("bernoulli", key)
    if isinstance(p, Tracer):
        if p._value.dtype not in ("f32", "f64"):
            raise Error(f"random.bernoulli: p must be float32 or float64, got {_type_str(p)}")
        p_shape = tuple(p.shape)
    else:
        p = np.asarray(p)
        if p.dtype not in (np.float32, np.float64):
            raise Error(f"random.bernoulli: p must be float32 or float64, got {_type_str(p)}")
        if not np.all((p >= 0) & (p <= 1)):
            raise Error(f"random.bernoulli: p = {p.tolist()!r}, expected 0 <= p <= 1")
        p_shape = p.shape
    shape = p_shape if shape is None else _shape("bernoulli", shape)
    try:
        ok = np.broadcast_shapes(p_shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise Error(f"random.bernoulli: p of shape {p_shape} does not broadcast to shape {shape}")
    if not isinstance(p, Tracer) and p.ndim == 0 and p.dtype == np.float32:
        return _apply(_bernoulli_number_impl, (key,), (float(p), shape))
    return _apply(_bernoulli_array_impl, (key, p), (shape,))


def _randint_impl(k, shape, lo, hi, dt):
    return Tracer(_drx.random_randint(_value(k), list(shape), lo, hi, dt))


def randint(key, shape, minval, maxval, dtype=np.int32):
    """Integers uniform in [minval, maxval) of shape: int32 (the default), int64 or uint32,
    with a span of at most 2^32 (JAX's algorithm on two 32-bit draws). minval and maxval are
    concrete integers; maxval <= minval gives minval.

    C++: """
    key = _check_key("randint", key)
    shape, dt = _shape("randint", shape), _dtype("randint", dtype)
    lo = _in_int64("randint", "minval", _concrete_int("randint", "minval", minval))
    hi = _in_int64("randint", "maxval", _concrete_int("randint", "maxval", maxval))
    return _apply(_randint_impl, (key,), (shape, lo, hi, dt))


def _permutation_n_impl(k, n):
    return Tracer(_drx.random_permutation(_value(k), n))


def _permutation_x_impl(k, x, axis):
    return Tracer(_drx.random_permutation(_value(k), _value(x), axis))


def permutation(key, x, axis=0, independent=False):
    """A random permutation of range(x) (an int32 array) when x is an integer, else x with its
    entries along axis shuffled by one (JAX's shuffle: sorting by random 32-bit keys).
    independent=True (JAX's independent shuffles of each slice) is not supported.

    C++: """
    key = _check_key("permutation", key)
    if independent:
        raise Error("random.permutation: independent=True is not supported (drx permutes "
                    "whole slices along axis)")
    if not isinstance(x, Tracer) and np.ndim(x) == 0:
        n = _concrete_int("permutation", "x (an integer, or an array with an axis)", x)
        if n < 0:
            raise Error(f"random.permutation: n = {n}, expected a non-negative count")
        return _apply(_permutation_n_impl, (key,), (n,))
    if isinstance(x, Tracer) and x.ndim == 0:
        raise Error("random.permutation: x must be a concrete integer or an array with an axis, "
                    f"got a traced {_type_str(x)}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise Error(f"random.permutation: axis must be an int, got {axis!r}")
    if not isinstance(x, Tracer):
        x = np.asarray(x)
    return _apply(_permutation_x_impl, (key, x), (int(axis),))


# ---- the block function --------------------------------------------------------------------
def _u32_operand(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic)):
        return x
    return np.asarray(x, dtype=np.uint32)  # Python ints and lists of them


def _threefry_impl(k0, k1, x0, x1):
    y0, y1 = _drx.threefry2x32(_value(k0), _value(k1), _value(x0), _value(x1))
    return Tracer(y0), Tracer(y1)


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 block function (20 rounds) on uint32 key words k0, k1 and counter words
    x0, x1, all of one shape: returns the two result words (y0, y1), elementwise.

    C++: """
    return _apply(_threefry_impl, tuple(_u32_operand(a) for a in (k0, k1, x0, x1)))


def _threefry_2x32_impl(keypair, count):
    k = _value(keypair)
    c = _value(count)
    if k.dtype != "u32" or tuple(k.shape) != (2,) or c.dtype != "u32":
        raise Error("random.threefry_2x32: expected a u32[2] key pair and a u32 count, got "
                    f"{_type_str(Tracer(k))} and {_type_str(Tracer(c))}")
    n = int(np.prod(c.shape, dtype=np.int64))
    flat = _drx.reshape(c, [n])
    if n % 2:
        flat = _drx.concatenate([flat, _drx.fill([1], 0.0, "u32")], 0)
    half = (n + 1) // 2
    x0, x1 = _drx.slice(flat, [0], [half]), _drx.slice(flat, [half], [2 * half])
    k0 = _drx.broadcast_to(_drx.reshape(_drx.slice(k, [0], [1]), []), [half])
    k1 = _drx.broadcast_to(_drx.reshape(_drx.slice(k, [1], [2]), []), [half])
    y0, y1 = _drx.threefry2x32(k0, k1, x0, x1)
    out = _drx.slice(_drx.concatenate([y0, y1], 0), [0], [n])
    return Tracer(_drx.reshape(out, list(c.shape)))


def threefry_2x32(keypair, count):
    """JAX's threefry_2x32(keypair, count): the block function applied to count (a uint32 array)
    flattened, padded to an even length and cut into halves (x0 | x1), the words (y0 | y1)
    returned in count's shape. keypair: a uint32[2] key or a pair of uint32 scalars."""
    if isinstance(keypair, (tuple, list)) and len(keypair) == 2 and not any(
            isinstance(k, Tracer) for k in keypair):
        keypair = np.asarray([np.uint32(k) for k in keypair], dtype=np.uint32)
    elif isinstance(keypair, (tuple, list)):
        raise Error("random.threefry_2x32: pass a traced key pair as one u32[2] array")
    return _apply(_threefry_2x32_impl, (keypair, _u32_operand(count)))


# Each function's docstring ends with its C++ counterpart's entry in the public-op table.
_CPP = {name: name + sig + "\n\n    " + doc for name, sig, doc in _drx.public_ops()}
for _f, _name in ((key, "random::key"), (split, "random::split"), (split2, "random::split2"),
                  (fold_in, "random::fold_in"), (bits, "random::bits"),
                  (uniform, "random::uniform"), (normal, "random::normal"),
                  (bernoulli, "random::bernoulli"), (randint, "random::randint"),
                  (permutation, "random::permutation"), (threefry2x32, "threefry2x32")):
    _f.__doc__ += _CPP.get("drx::" + _name, "drx::" + _name)
del _f, _name
