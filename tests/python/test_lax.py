"""drx.lax's loops from Python (scan, fori_loop) against NumPy loops in float64 and central
differences, and their errors."""
import numpy as np
import pytest

drx = pytest.importorskip("drx")


def rng(seed=0):
    return np.random.default_rng(seed)


def numpy_scan(f, init, xs, reverse=False):
    carry, ys = init, []
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        carry, y = f(carry, xs[i])
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, np.stack(ys)


def step(c, x):
    h = c["h"] * 0.5 + np.tanh(x) if isinstance(x, np.ndarray) else c["h"] * 0.5 + _tanh(x)
    return {"h": h, "n": c["n"] + 1}, (h * h).sum()


def _tanh(t):
    return drx.Tracer(drx._drx.tanh(t._value))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_a_numpy_loop(reverse):
    xs = rng(1).normal(size=(5, 3))
    init = {"h": np.zeros(3), "n": np.int32(0)}
    (carry, ys) = drx.lax.scan(step, init, xs, reverse=reverse)
    want_c, want_ys = numpy_scan(step, init, xs, reverse)
    np.testing.assert_allclose(carry["h"], want_c["h"], rtol=1e-14)
    assert carry["n"] == 5 and carry["n"].dtype == np.int32
    np.testing.assert_allclose(ys, want_ys, rtol=1e-14)
    # Under jit, and with a Python-number carry (weak: it takes the body's dtype).
    out = drx.jit(lambda xs: drx.lax.scan(lambda c, x: (c + x.sum(), c), 0.0, xs))(xs)
    np.testing.assert_allclose(out[0], xs.sum(), rtol=1e-14)
    np.testing.assert_allclose(out[1], np.concatenate([[0.0], np.cumsum(xs.sum(1))[:-1]]),
                               rtol=1e-14)


def test_scan_without_xs_takes_a_length():
    carry, ys = drx.lax.scan(lambda c, _: (c * 2.0, c), np.float64(1.0), None, length=4)
    assert carry == 16.0
    np.testing.assert_array_equal(ys, [1.0, 2.0, 4.0, 8.0])


@pytest.mark.parametrize("options", [{}, {"remat": True}, {"checkpoint_every": 2}])
def test_grad_through_scan_matches_central_differences(options):
    xs = rng(2).normal(size=(6, 3))

    def loss(w, xs):
        def body(c, x):
            c = c * w + x
            return c, (c * c).sum()
        c, ys = drx.lax.scan(body, np.zeros(3), xs, **options)
        return (c * c).sum() + ys.sum()

    def loss_np(w):
        c, total = np.zeros(3), 0.0
        for x in xs:
            c = c * w + x
            total += (c * c).sum()
        return (c * c).sum() + total

    w = np.array([0.5, -0.3, 0.8])
    g = drx.jit(drx.grad(loss))(w, xs)
    eps = 1e-6
    fd = np.array([(loss_np(w + eps * e) - loss_np(w - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    # Second order: the Hessian-vector product against differences of the gradient.
    v = np.array([1.0, 2.0, -1.0])
    hv = drx.jit(lambda w: drx.jvp(lambda u: drx.grad(loss)(u, xs), (w,), (v,))[1])(w)
    g_np = drx.jit(drx.grad(loss))
    np.testing.assert_allclose(hv, (g_np(w + eps * v, xs) - g_np(w - eps * v, xs)) / (2 * eps),
                               rtol=1e-6, atol=1e-8)


def test_fori_loop_matches_a_python_loop_and_differentiates():
    out = drx.lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i, 1.0)
    want = 1.0
    for i in range(5):
        want = want * 1.5 + i
    assert out == want and out.dtype == np.float64
    g = drx.jit(drx.grad(lambda x: drx.lax.fori_loop(2, 5, lambda i, v: v * x, x)))(1.3)
    np.testing.assert_allclose(g, 4 * 1.3 ** 3, rtol=1e-15)
    assert drx.lax.fori_loop(3, 1, lambda i, v: v + 1.0, np.float32(2.0)) == 2.0


def test_loop_errors_name_the_loop_and_what_was_expected():
    xs = np.ones((3, 2))
    with pytest.raises(drx.Error, match="scan: the body must return a pair"):
        drx.lax.scan(lambda c, x: c, np.zeros(2), xs)
    with pytest.raises(drx.Error, match="scan: the body's carry has structure"):
        drx.lax.scan(lambda c, x: ((c, c), None), np.zeros(2), xs)
    with pytest.raises(drx.Error, match="a carry keeps its type"):
        drx.lax.scan(lambda c, x: (c.sum(), None), np.zeros(2), xs)
    with pytest.raises(drx.Error, match="length must be given"):
        drx.lax.scan(lambda c, x: (c, None), np.zeros(2), None)
    with pytest.raises(drx.Error, match="fori_loop: upper must be a Python int"):
        drx.jit(lambda n: drx.lax.fori_loop(0, n, lambda i, v: v, 1.0))(np.int32(3))
    with pytest.raises(drx.Error, match="fori_loop: the body returned structure"):
        drx.lax.fori_loop(0, 2, lambda i, v: (v, v), 1.0)
