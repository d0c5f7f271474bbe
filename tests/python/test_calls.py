"""Calls from Python: arguments read in place, results that never alias them, the C++ call
keys (weak types, structures, fallbacks), buffers and memory over many calls, and DrJAX's
mesh= keyword."""
import collections
import gc

import numpy as np
import pytest

drx = pytest.importorskip("drx")
from drx import _drx  # noqa: E402


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- arguments and results -----------------------------------------------------------------
def test_an_argument_returned_as_it_is_comes_back_as_a_copy():
    x = rng().normal(size=(4, 3))
    ident = drx.jit(lambda a: a)
    y = ident(x)
    assert not np.shares_memory(x, y)
    before = y.copy()
    x[0, 0] = 123.0  # the caller changes its array after the call: the result must not change
    np.testing.assert_array_equal(y, before)
    # Also inside a container, and reshaped (a reshape may share its operand's buffer).
    out = drx.jit(lambda a: {"same": a, "flat": a.reshape(12)})(x)
    assert not np.shares_memory(x, out["same"]) and not np.shares_memory(x, out["flat"])


def test_arguments_of_every_layout_give_the_values_numpy_computes():
    base = rng(1).normal(size=(6, 8))
    f = drx.jit(lambda a: a * 2.0 + 1.0)
    raw = np.zeros(6 * 8 * 8 + 8, np.uint8)
    misaligned = raw[4:4 + 6 * 8 * 8].view(np.float64).reshape(6, 8)  # 4-byte aligned only
    misaligned[...] = base
    for x in [base, base.T, base[::2, 1::3], np.asfortranarray(base), misaligned,
              base.astype(">f8"), base[:, :0], base.astype(np.float16),
              base.astype(np.float32)]:
        np.testing.assert_array_equal(f(x), x.astype(x.dtype.newbyteorder("=")) * 2 + 1)
    b = np.array([True, False, True])
    np.testing.assert_array_equal(drx.jit(lambda v: v & v)(b), b)
    np.testing.assert_array_equal(drx.jit(lambda v: v + 1)(np.arange(5, dtype=np.int8)),
                                  np.arange(1, 6, dtype=np.int8))


class _DLPackOnly:
    """An array exporter known only by its DLPack protocol (as a PyTorch tensor is)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_arguments_are_read_through_numpy():
    x = rng(3).normal(size=(2, 3)).astype(np.float32)
    out = drx.jit(lambda a: a * 2.0)(_DLPackOnly(x))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x * 2)
    torch = pytest.importorskip("torch")  # bench machines install it (scripts/setup_bench.sh)
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    out = drx.jit(lambda a: a * 2.0)(t)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    np.testing.assert_array_equal(drx.jit(lambda a: a + 1)(t[:, 1:]), t[:, 1:].numpy() + 1)


def test_arrays_inside_a_trace_become_constants_that_do_not_follow_the_callers_array():
    w = np.ones(3)

    @drx.jit
    def f(x):
        return drx.jit(lambda a, b: a + b)(x, w)  # w is concrete inside f's trace

    np.testing.assert_array_equal(f(np.zeros(3)), np.ones(3))
    w[:] = 5.0  # f's program holds its own copy of w, as JAX's constants
    np.testing.assert_array_equal(f(np.zeros(3)), np.ones(3))


# ---- keys ----------------------------------------------------------------------------------
def test_calls_are_keyed_by_structure_dtype_shape_and_weak_type():
    traces = []

    def f(a, b):
        traces.append(1)
        return a["x"] * b

    jf = drx.jit(f)
    x32 = np.ones(3, np.float32)
    r1 = jf({"x": x32}, 2.0)  # a Python float: weak, so f32 wins
    assert r1.dtype == np.float32
    jf({"x": x32 * 3}, 5.0)  # same key: no new trace
    assert len(traces) == 1
    r2 = jf({"x": x32}, np.float32(2.0))  # a NumPy scalar: strong (tree_util's path)
    assert r2.dtype == np.float32 and len(traces) == 2
    assert jf({"x": x32}, np.float64(2.0)).dtype == np.float64  # strong f64: promoted
    jf({"x": np.ones(4, np.float32)}, 2.0)  # another shape
    jf({"x": x32}, 2)  # a Python int: weak i64, f32 still wins
    assert len(traces) == 5
    assert jf.trace_count == 5


def test_a_weak_number_of_a_higher_kind_sets_the_dtype_as_in_jax():
    out = drx.jit(lambda i, f: i + f)(np.int32(3), 1.5)  # weak float + int32: float64
    assert out.dtype == np.float64 and out == 4.5
    # Still weak: a strong f32 met next wins, whether an argument or a NumPy constant.
    out = drx.jit(lambda i, f, g: (i + f) * g)(np.int32(3), 1.5, np.float32(2.0))
    assert out.dtype == np.float32 and out == 9.0
    out = drx.jit(lambda i, f: np.float32(2.0) * (i + f))(np.int32(3), 1.5)
    assert out.dtype == np.float32 and out == 9.0
    out = drx.jit(lambda b, n: b + n)(np.array([True, False]), 2)  # weak int + bool: int64
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [3, 2])


@pytest.mark.parametrize("a, b, want", [
    (np.float32, np.float64, np.float64), (np.int32, np.uint32, np.int64),
    (np.int8, np.uint8, np.int16), (np.uint64, np.int8, np.float64),
    (np.int64, np.float16, np.float16), (np.bool_, np.int8, np.int8),
    (np.uint8, np.uint16, np.uint16), (np.int16, np.uint8, np.int16),
])
def test_strong_dtypes_promote_as_jax_does_with_x64(a, b, want):
    # JAX's lattice, not NumPy's (NumPy makes int64 + float16 a float64).
    x, y = np.array([1, 0, 1], a), np.array([2, 3, 1], b)
    out = drx.jit(lambda p, q: p + q)(x, y)
    assert out.dtype == want
    np.testing.assert_array_equal(out, x.astype(want) + y.astype(want))
    assert drx.jit(lambda p, q: q * p)(x, y).dtype == want


def test_matmul_and_python_numbers_promote_too():
    m32, m64 = np.ones((2, 3), np.float32), np.ones((3, 2))
    assert drx.jit(lambda p, q: p @ q)(m32, m64).dtype == np.float64
    out = drx.jit(lambda b: b + 1)(np.array([True, False]))  # weak int meets bool: int64
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [2, 1])


def test_c_keys_and_tree_utils_path_agree():
    Point = collections.namedtuple("Point", "x y")
    args = ({"b": np.arange(3.0), "a": [np.ones(2), None, (1.5, True)]}, np.float64(1.0))
    flat = _drx.flatten_call(args[:1])
    assert flat is not None
    leaves, key = flat
    # Dicts by sorted key, as tree_util flattens them.
    want = drx.tree_util.tree_leaves(args[0])
    assert len(leaves[0]) == len(want)
    for got, w in zip(leaves[0], want):
        np.testing.assert_array_equal(got.numpy(), np.asarray(w))
    # Subclasses of the built-in containers, NumPy scalars and non-str dict keys go to
    # tree_util's path.
    for arg in [Point(1.0, 2.0), np.float32(1.0), {1: np.ones(2)},
                collections.OrderedDict(a=1.0)]:
        assert _drx.flatten_call((arg,)) is None
    # Both paths give one signature's call the same result.
    f = drx.jit(lambda t, s: t["b"].sum() * s + t["a"][0].sum() + t["a"][2][0])
    np.testing.assert_array_equal(f(*args), 3.0 * 1.0 + 2.0 + 1.5)
    assert _drx.flatten_call(((2 ** 70,),)) is None  # too large for i64: tree_util's error
    with pytest.raises(OverflowError):
        drx.jit(lambda t: t[0])((2 ** 70,))


# ---- buffers and memory --------------------------------------------------------------------
def test_buffers_and_python_memory_return_to_baseline_over_many_calls():
    import tracemalloc

    jf = drx.jit(lambda x, y: (x @ y).sum())
    g = drx.grad(lambda w, x: ((x @ w) ** 2).sum())
    x, w = np.ones((8, 8)), np.ones(8)
    for _ in range(200):
        jf(x, x)
        g(w, x)
    gc.collect()
    buffers = _drx.live_array_buffers()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(50000):
        jf(x, x)
        g(w, x)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes of Python memory kept by 10^5 calls"
    assert _drx.live_array_buffers() == buffers
    # The count moves: a result held alive holds its buffer.
    held = jf(x, x)
    assert _drx.live_array_buffers() == buffers + 1
    del held
    gc.collect()
    assert _drx.live_array_buffers() == buffers


# ---- DrJAX's mesh= -------------------------------------------------------------------------
def test_mesh_on_broadcast_and_map_fn_reaches_jit():
    xs = rng(2).normal(size=(6, 3))

    def round_with(mesh_b, mesh_m):
        @drx.program(placements={"clients": 6})
        def r(w, xs):
            ws = drx.broadcast(w, mesh=mesh_b)
            return drx.reduce_mean(drx.map_fn(lambda a, x: a * x, (ws, xs), mesh=mesh_m))
        return r

    w = np.array([1.0, 2.0, 3.0])
    want = w * xs.mean(axis=0)
    two = drx.Mesh({"clients": 2})
    for mb, mm in [(two, None), (None, two), (two, two), (None, None)]:
        np.testing.assert_allclose(drx.jit(round_with(mb, mm))(w, xs), want, rtol=1e-15)
    # The mesh is jit's: an axis naming no placement is jit's error, with its suggestion.
    with pytest.raises(drx.Error, match="names no placement.*Did you mean 'clients'"):
        drx.jit(round_with(drx.Mesh({"client": 2}), None))(w, xs)
    with pytest.raises(drx.Error, match="broadcast: mesh .* differs from the mesh .* given to jit"):
        drx.jit(round_with(two, None), mesh=drx.Mesh({"clients": 3}))(w, xs)
    with pytest.raises(drx.Error, match="map_fn: mesh .* that broadcast asked for"):
        drx.jit(round_with(two, drx.Mesh({"clients": 3})))(w, xs)
    with pytest.raises(drx.Error, match="mesh must be a drx.Mesh"):
        drx.jit(round_with({"clients": 2}, None))(w, xs)
    # Exported, the program's mesh= shards it as a mesh given to to_stablehlo would.
    asked = drx.to_stablehlo(round_with(two, None), w, xs)
    assert asked == drx.to_stablehlo(round_with(None, None), w, xs, mesh=two)
    assert "sdy.mesh" in asked and "sdy.mesh" not in drx.to_stablehlo(round_with(None, None), w, xs)
    with pytest.raises(drx.Error, match="differs from the mesh .* the program asks for"):
        drx.to_stablehlo(round_with(two, None), w, xs, mesh=drx.Mesh({"clients": 3}))
    # Results do not depend on the mesh: bitwise the same on 1, 2 and 3 devices.
    r1 = drx.jit(round_with(None, None))(w, xs)
    for n in (2, 3):
        np.testing.assert_array_equal(
            drx.jit(round_with(drx.Mesh({"clients": n}), None))(w, xs), r1)
