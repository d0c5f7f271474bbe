"""drx.numpy against NumPy itself (float64), eagerly and traced, with gradients by central
differences, vmap against loops, the dtype rules and the errors."""
import numpy as np
import pytest

drx = pytest.importorskip("drx")
import drx.numpy as dnp  # noqa: E402


def rng(seed=0):
    return np.random.default_rng(seed)


X = rng(1).normal(size=(3, 4))
P = rng(2).uniform(0.5, 2.0, size=(3, 4))  # positive: log, sqrt
Y = rng(3).normal(size=(3, 4))
I = rng(4).integers(-7, 8, size=(3, 4))
J = rng(5).integers(1, 5, size=(3, 4)) * np.where(rng(6).random((3, 4)) < 0.5, -1, 1)

UNARY = [
    ("abs", X), ("absolute", X), ("negative", X), ("sign", X), ("square", X), ("exp", X),
    ("expm1", X), ("log", P), ("log1p", P), ("sqrt", P), ("cbrt", X), ("tanh", X),
    ("sin", X), ("cos", X), ("floor", X * 3), ("ceil", X * 3), ("rint", X * 3),
    ("round", np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.4])), ("isfinite", np.array([1.0, np.inf, np.nan])),
    ("arctan", X), ("reciprocal", P), ("exp", I), ("floor", I), ("invert", I),
    ("logical_not", np.array([0.0, 2.0, -1.0])),
]


@pytest.mark.parametrize("name, x", UNARY, ids=[f"{n}-{x.dtype}" for n, x in UNARY])
def test_unary_matches_numpy_eagerly_and_traced(name, x):
    want = getattr(np, name)(x)
    eager = getattr(dnp, name)(x)
    traced = drx.jit(lambda a: getattr(dnp, name)(a))(x)
    for got in (eager, traced):
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-15, atol=1e-300)


BINARY = [
    ("add", X, Y), ("subtract", X, Y), ("multiply", X, Y), ("divide", X, P),
    ("true_divide", I, J), ("power", P, Y), ("maximum", X, Y), ("minimum", X, Y),
    ("arctan2", X, Y), ("less", X, Y), ("less_equal", X, X), ("greater", X, Y),
    ("greater_equal", X, Y), ("equal", I, J), ("not_equal", I, J), ("remainder", I, J),
    ("mod", X * 5, Y), ("fmod", I, J), ("floor_divide", I, J), ("floor_divide", X * 5, Y),
    ("bitwise_and", I, J), ("bitwise_or", I, J), ("bitwise_xor", I, J),
    ("left_shift", np.abs(I), np.array(2)), ("right_shift", I, np.array(1)),
    ("right_shift", np.array([200, 7], np.uint8), np.array(3, np.uint8)),
    ("logical_and", X > 0, Y > 0), ("logical_or", X > 0, Y > 0),
    ("logical_xor", X > 0, Y > 0), ("add", X[0], Y),  # broadcasting
]


@pytest.mark.parametrize("name, a, b", BINARY, ids=[f"{n}-{a.dtype}" for n, a, _ in BINARY])
def test_binary_matches_numpy_eagerly_and_traced(name, a, b):
    want = getattr(np, name)(a, b)
    for got in (getattr(dnp, name)(a, b), drx.jit(lambda p, q: getattr(dnp, name)(p, q))(a, b)):
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-15)


def test_python_operators_floor_as_python_does():
    a, b = np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])
    mod, div = drx.jit(lambda p, q: (p % q, p // q))(a, b)
    np.testing.assert_array_equal(mod, a % b)
    np.testing.assert_array_equal(div, a // b)
    np.testing.assert_array_equal(drx.jit(lambda p: p % 3.0)(X * 5), (X * 5) % 3.0)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "amax", "amin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_take_numpys_keywords(name, axis, keepdims):
    want = getattr(np, name)(X, axis=axis, keepdims=keepdims)
    got = drx.jit(lambda a: getattr(dnp, name)(a, axis=axis, keepdims=keepdims))(X)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_more_reductions():
    b = X > 0
    for name in ("all", "any"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(getattr(dnp, name)(b, axis=axis),
                                          getattr(np, name)(b, axis=axis))
    assert dnp.sum(b).dtype == np.int64 and dnp.sum(b) == b.sum()
    assert dnp.mean(I).dtype == np.float64
    np.testing.assert_allclose(dnp.mean(I, axis=0), I.mean(axis=0), rtol=1e-15)
    assert dnp.sum(X, dtype=np.float32).dtype == np.float32
    for name in ("argmax", "argmin"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(getattr(dnp, name)(X, axis=axis),
                                          getattr(np, name)(X, axis=axis))
    np.testing.assert_allclose(dnp.cumsum(X, axis=1), np.cumsum(X, axis=1), rtol=1e-15)
    np.testing.assert_allclose(dnp.cumsum(X), np.cumsum(X), rtol=1e-14)
    np.testing.assert_array_equal(dnp.sort(X, axis=0), np.sort(X, axis=0))
    np.testing.assert_array_equal(dnp.argsort(X), np.argsort(X, kind="stable"))


def test_shapes_match_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    cases = [
        (lambda m: m.reshape(a, (4, -1)), lambda: a.reshape(4, -1)),
        (lambda m: m.ravel(a), lambda: a.ravel()),
        (lambda m: m.transpose(a), lambda: a.transpose()),
        (lambda m: m.transpose(a, (1, 0, 2)), lambda: a.transpose(1, 0, 2)),
        (lambda m: m.swapaxes(a, 0, 2), lambda: np.swapaxes(a, 0, 2)),
        (lambda m: m.moveaxis(a, 0, -1), lambda: np.moveaxis(a, 0, -1)),
        (lambda m: m.expand_dims(a, (0, -1)), lambda: np.expand_dims(a, (0, -1))),
        (lambda m: m.squeeze(a[:1, :, :1]), lambda: np.squeeze(a[:1, :, :1])),
        (lambda m: m.squeeze(a[:1], axis=0), lambda: np.squeeze(a[:1], axis=0)),
        (lambda m: m.concatenate([a, a], axis=1), lambda: np.concatenate([a, a], axis=1)),
        (lambda m: m.concatenate([a, a], axis=None), lambda: np.concatenate([a, a], axis=None)),
        (lambda m: m.stack([a, a + 1], axis=1), lambda: np.stack([a, a + 1], axis=1)),
        (lambda m: m.take(a, np.array([2, 0]), axis=2), lambda: np.take(a, [2, 0], axis=2)),
        (lambda m: m.take(a, np.array([5, 1])), lambda: np.take(a, [5, 1])),
        (lambda m: m.broadcast_to(a[0, 0], (2, 4)), lambda: np.broadcast_to(a[0, 0], (2, 4))),
        (lambda m: m.flip(a, 1), lambda: np.flip(a, 1)),
        (lambda m: m.flip(a), lambda: np.flip(a)),
        (lambda m: m.pad(a, ((1, 0), (0, 2), (1, 1)), constant_values=-1.0),
         lambda: np.pad(a, ((1, 0), (0, 2), (1, 1)), constant_values=-1.0)),
        (lambda m: m.pad(a, 1), lambda: np.pad(a, 1)),
        (lambda m: m.where(a > 5, a, -a), lambda: np.where(a > 5, a, -a)),
        (lambda m: m.where(a > 5, a, 0), lambda: np.where(a > 5, a, 0.0)),
        (lambda m: m.clip(a, 3, 10), lambda: np.clip(a, 3, 10)),
        (lambda m: m.clip(a, None, 10), lambda: np.clip(a, None, 10)),
        (lambda m: m.matmul(a, a[0].T), lambda: np.matmul(a, a[0].T)),
        (lambda m: m.dot(a[0], a[1].T), lambda: np.dot(a[0], a[1].T)),
        (lambda m: m.vdot(a[0], a[1]), lambda: np.vdot(a[0], a[1])),
        (lambda m: m.outer(a[0, 0], a[1, 1]), lambda: np.outer(a[0, 0], a[1, 1])),
        (lambda m: m.zeros_like(a), lambda: np.zeros_like(a)),
        (lambda m: m.ones_like(a, dtype=np.int32), lambda: np.ones_like(a, dtype=np.int32)),
        (lambda m: m.full_like(a, 2.5), lambda: np.full_like(a, 2.5)),
        (lambda m: m.astype(a, np.float32), lambda: a.astype(np.float32)),
    ]
    for i, (ours, theirs) in enumerate(cases):
        want = theirs()
        for got in (ours(dnp), drx.jit(lambda x, f=ours: f(dnp))(a[0, 0])):
            assert got.shape == want.shape and got.dtype == want.dtype, (i, got, want)
            np.testing.assert_array_equal(got, want, err_msg=str(i))


def test_creation_inside_and_outside_a_trace():
    for make in (lambda m: m.zeros((2, 3)), lambda m: m.ones(3, dtype=np.float32),
                 lambda m: m.full((2, 2), 7, dtype=np.int32), lambda m: m.arange(5),
                 lambda m: m.arange(1, 7, 2, dtype=np.float32), lambda m: m.eye(3, k=1),
                 lambda m: m.asarray([1.0, 2.0])):
        want = make(np)
        outside = make(dnp)
        inside = drx.jit(lambda x, f=make: f(dnp))(np.zeros(()))
        for got in (outside, inside):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    assert dnp.shape(np.ones((2, 3))) == (2, 3) and dnp.ndim(np.ones(2)) == 1
    assert drx.jit(lambda x: dnp.full(x.shape, x.sum()))(np.ones(3)).tolist() == [3.0] * 3


def test_result_type_is_jaxs():
    assert dnp.result_type(np.float32, np.float64) == np.float64
    assert dnp.result_type(np.ones(2, np.float32), 2.0) == np.float32
    assert dnp.result_type(np.ones(2, np.int32), 2.0) == np.float64
    assert dnp.result_type(np.int8, np.uint8) == np.int16
    assert dnp.result_type(np.int64, np.float16) == np.float16


def test_gradients_through_numpy_functions_match_central_differences():
    def f(w):
        h = dnp.tanh(dnp.matmul(X, w))
        return dnp.sum(dnp.where(h > 0, h, 0.1 * h) ** 2) + dnp.mean(dnp.exp(-dnp.abs(w)))

    def f_np(w):
        h = np.tanh(X @ w)
        return np.sum(np.where(h > 0, h, 0.1 * h) ** 2) + np.mean(np.exp(-np.abs(w)))

    w = rng(7).normal(size=(4, 2))
    g = drx.jit(drx.grad(f))(w)
    eps = 1e-6
    fd = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        e = np.zeros_like(w)
        e[i] = eps
        fd[i] = (f_np(w + e) - f_np(w - e)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_vmap_of_numpy_functions_matches_a_loop():
    def per_row(r):
        return dnp.concatenate([dnp.sort(r), dnp.cumsum(r)]) * dnp.max(r)

    out = drx.vmap(per_row)(X)
    want = np.stack([np.concatenate([np.sort(r), np.cumsum(r)]) * r.max() for r in X])
    np.testing.assert_allclose(out, want, rtol=1e-15)


def test_eager_calls_compile_once_per_options():
    x = rng(8).normal(size=(5, 2))
    before = dict(dnp.sum.compiled)
    for k in range(3):
        np.testing.assert_allclose(dnp.sum(x + k, axis=(0,), keepdims=True),
                                   (x + k).sum(axis=0, keepdims=True), rtol=1e-15)
    new = [f for key, f in dnp.sum.compiled.items() if key not in before]
    assert len(new) == 1 and new[0].trace_count == 1
    dnp.sum(x.astype(np.float32), axis=(0,), keepdims=True)  # new argument types: new trace
    assert new[0].trace_count == 2


def test_errors_name_the_function_and_what_was_expected():
    with pytest.raises(drx.Error, match="drx.numpy.sum: axis 2 is out of range"):
        dnp.sum(X, axis=2)
    with pytest.raises(drx.Error, match="drx.numpy.transpose: axes .* is not a permutation"):
        dnp.transpose(X, (0, 0))
    with pytest.raises(drx.Error, match="drx.numpy.squeeze: axis 0 has size 3"):
        dnp.squeeze(X, axis=0)
    with pytest.raises(drx.Error, match="give both x and y"):
        drx.jit(lambda a: dnp.where(a > 0))(X)
    with pytest.raises(drx.Error, match="only mode='constant'"):
        dnp.pad(X, 1, mode="edge")
    with pytest.raises(drx.Error, match="indices must be integers"):
        dnp.take(X, np.array([0.5]))
    with pytest.raises(drx.Error, match="must be hashable"):
        dnp.sum(X, axis={0: 1})
    with pytest.raises(TypeError, match="drx.numpy.sum"):
        dnp.sum(X, axes=0)


def test_prod_var_std_and_einsum_match_numpy():
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            np.testing.assert_allclose(dnp.prod(P, axis=axis, keepdims=keepdims),
                                       np.prod(P, axis=axis, keepdims=keepdims), rtol=1e-14)
            for ddof in (0, 1):
                np.testing.assert_allclose(dnp.var(X, axis=axis, ddof=ddof, keepdims=keepdims),
                                           np.var(X, axis=axis, ddof=ddof, keepdims=keepdims),
                                           rtol=1e-13)
                np.testing.assert_allclose(dnp.std(X, axis=axis, ddof=ddof, keepdims=keepdims),
                                           np.std(X, axis=axis, ddof=ddof, keepdims=keepdims),
                                           rtol=1e-13)
    assert dnp.prod(np.array([True, True])).dtype == np.int64
    assert dnp.var(I).dtype == np.float64
    # prod's gradient at a zero is the product of the others.
    np.testing.assert_array_equal(drx.jit(drx.grad(dnp.prod))(np.array([2.0, 0.0, 3.0, 4.0])),
                                  [0.0, 24.0, 0.0, 0.0])
    r = rng(9)
    a, b, c = r.normal(size=(2, 3)), r.normal(size=(3, 4)), r.normal(size=(4, 5))
    bat_a, bat_b = r.normal(size=(6, 2, 3)), r.normal(size=(6, 3, 4))
    for spec, ops in [("ij,jk->ik", (a, b)), ("ij,jk", (a, b)), ("ij,jk,kl->il", (a, b, c)),
                      ("...ij,...jk->...ik", (bat_a, bat_b)), ("nij,njk->nki", (bat_a, bat_b)),
                      ("ij->ji", (a,)), ("ij->", (a,)), ("i,j->ij", (a[0], b[0])),
                      ("ij,jk->k", (a, b))]:
        want = np.einsum(spec, *ops)
        for got in (dnp.einsum(spec, *ops), drx.jit(lambda *o, s=spec: dnp.einsum(s, *o))(*ops)):
            assert got.shape == want.shape, spec
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14, err_msg=spec)
    assert dnp.einsum("ij,jk", a.astype(np.float32), b).dtype == np.float64  # promoted
    with pytest.raises(drx.Error, match="einsum: 'ii->i'.*diagonal"):
        dnp.einsum("ii->i", np.ones((3, 3)))
