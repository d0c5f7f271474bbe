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


def test_cond_runs_the_chosen_branch_and_differentiates():
    def f(x, n):
        return drx.lax.cond(n > 0, lambda a, k: (a * a).sum() * k, lambda a, k: -a.sum(), x, 2.0)

    x = np.array([1.0, 2.0, 3.0])
    assert drx.jit(f)(x, np.int32(1)) == 28.0 and drx.jit(f)(x, np.int32(-1)) == -6.0
    assert drx.lax.cond(True, lambda a: a + 1, lambda a: a - 1, np.float32(1.0)) == 2.0
    np.testing.assert_allclose(drx.jit(drx.grad(f))(x, np.int32(1)), 4 * x, rtol=1e-15)
    np.testing.assert_allclose(drx.jit(drx.grad(f))(x, np.int32(0)), -np.ones(3), rtol=1e-15)
    # Under vmap a batched predicate selects per example.
    out = drx.vmap(lambda a, n: drx.lax.cond(n > 0, lambda v: v * 2.0, lambda v: v * 0.0, a))(
        np.ones((4, 2)), np.array([1, 0, 1, 0], np.int32))
    np.testing.assert_array_equal(out, [[2, 2], [0, 0], [2, 2], [0, 0]])
    with pytest.raises(drx.Error, match="cond"):
        drx.lax.cond(True, lambda a: a, lambda a: a.sum(), np.ones(2))
    with pytest.raises(drx.Error, match="pred must be a scalar"):
        drx.jit(lambda p: drx.lax.cond(p, lambda: 1.0, lambda: 0.0))(np.array([True, False]))


def test_while_loop_matches_a_python_loop():
    def collatz_steps(n):
        def body(c):
            k, steps = c
            return drx.numpy.where(k % 2 == 0, k // 2, 3 * k + 1), steps + 1
        return drx.lax.while_loop(lambda c: c[0] != 1, body, (n, np.int32(0)))[1]

    def py_steps(n):
        s = 0
        while n != 1:
            n, s = (n // 2 if n % 2 == 0 else 3 * n + 1), s + 1
        return s

    for n in (1, 6, 27):
        assert drx.jit(collatz_steps)(np.int32(n)) == py_steps(n)
    # Forward-mode derivative of a loop with a data-dependent trip count.
    f = lambda x: drx.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * x, c[1] + 1),  # noqa
                                     (x, np.int32(0)))[0]
    out, t = drx.jit(lambda x: drx.jvp(f, (x,), (1.0,)))(1.5)
    assert out == 1.5 ** 4 and t == 4 * 1.5 ** 3
    with pytest.raises(drx.Error, match="cond_fun must return a boolean scalar"):
        drx.lax.while_loop(lambda c: c > 0, lambda c: c - 1, np.ones(2))


def test_dot_general_matches_einsum():
    r = rng(4)
    a, b = r.normal(size=(2, 3, 4)), r.normal(size=(2, 4, 5))
    out = drx.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
    np.testing.assert_allclose(out, np.einsum("bij,bjk->bik", a, b), rtol=1e-14)
    c = r.normal(size=(4, 3))
    np.testing.assert_allclose(drx.lax.dot_general(a, c, (((1, 2), (1, 0)), ((), ()))),
                               np.einsum("bij,ji->b", a, c), rtol=1e-14)
    bf = drx.jit(lambda x, y: drx.lax.dot_general(
        x.astype("bf16"), y.astype("bf16"), (((1,), (0,)), ((), ())),
        preferred_element_type=np.float32))(a[0].astype(np.float32), c.astype(np.float32)[:, :2])
    assert bf.dtype == np.float32
    with pytest.raises(drx.Error, match="dimension_numbers must be"):
        drx.lax.dot_general(a, b, ((2,), (1,)))


def test_lax_ops_against_numpy_and_their_strict_dtypes():
    x, y = rng(5).normal(size=(3, 4)), rng(6).normal(size=(3, 4))
    lax = drx.lax
    np.testing.assert_allclose(lax.add(x, y), x + y, rtol=1e-15)
    np.testing.assert_allclose(lax.max(x, y), np.maximum(x, y))
    np.testing.assert_allclose(lax.rsqrt(np.abs(x) + 1), 1 / np.sqrt(np.abs(x) + 1), rtol=1e-15)
    np.testing.assert_allclose(lax.logistic(x), 1 / (1 + np.exp(-x)), rtol=1e-15)
    np.testing.assert_allclose(lax.clamp(-0.5, x, 0.5), np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(lax.select(x > 0, x, y), np.where(x > 0, x, y))
    half = np.array([0.5, 1.5, 2.5, -0.5, -2.5])
    np.testing.assert_array_equal(lax.round(half), [1.0, 2.0, 3.0, -1.0, -3.0])
    np.testing.assert_array_equal(
        lax.round(half, lax.RoundingMethod.TO_NEAREST_EVEN), np.round(half))
    np.testing.assert_array_equal(lax.pad(np.arange(3.0), -1.0, [(1, 2, 1)]),
                                  [-1, 0, -1, 1, -1, 2, -1, -1])
    np.testing.assert_array_equal(lax.slice(x, (1, 0), (3, 2)), x[1:3, 0:2])
    np.testing.assert_array_equal(
        drx.jit(lambda a, i: lax.dynamic_slice(a, (i, 1), (2, 2)))(x, np.int32(1)), x[1:3, 1:3])
    np.testing.assert_array_equal(
        lax.dynamic_update_slice(x, np.zeros((1, 2)), (np.int32(2), np.int32(2)))[2, 2:], [0, 0])
    vals, idx = lax.top_k(x, 2)
    np.testing.assert_array_equal(vals, -np.sort(-x, axis=1)[:, :2])
    np.testing.assert_array_equal(idx, np.argsort(-x, axis=1, kind="stable")[:, :2])
    np.testing.assert_array_equal(lax.broadcast_in_dim(x[0], (2, 4), (1,)), [x[0], x[0]])
    np.testing.assert_array_equal(lax.iota(np.int32, 4), [0, 1, 2, 3])
    np.testing.assert_array_equal(lax.broadcasted_iota(np.int32, (2, 3), 1), [[0, 1, 2]] * 2)
    np.testing.assert_allclose(lax.reduce_sum(x, (1,)), x.sum(1), rtol=1e-15)
    np.testing.assert_array_equal(lax.argmax(x, 1), np.argmax(x, 1))
    assert lax.argmax(x, 1, index_dtype=np.int64).dtype == np.int64
    np.testing.assert_allclose(lax.cumsum(x, 1, reverse=True),
                               np.cumsum(x[:, ::-1], 1)[:, ::-1], rtol=1e-15)
    assert lax.add(x.astype(np.float32), 2.0).dtype == np.float32  # weak: takes f32
    with pytest.raises(drx.Error, match="dtype"):
        lax.add(x.astype(np.float32), x)  # lax does not promote strong dtypes
    with pytest.raises(drx.Error, match="unit strides"):
        lax.slice(x, (0, 0), (3, 4), (2, 1))


def numpy_conv(x, w, strides, padding, lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups=1):
    """NCHW x OIHW -> NCHW in float64 loops: dilate the input, pad, slide the dilated kernel."""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    dh, dw = lhs_dilation
    xd = np.zeros((n, c, (h - 1) * dh + 1, (wd - 1) * dw + 1))
    xd[:, :, ::dh, ::dw] = x
    (pl, ph), (ql, qh) = padding
    xp = np.zeros((n, c, xd.shape[2] + pl + ph, xd.shape[3] + ql + qh))
    xp[:, :, pl:pl + xd.shape[2], ql:ql + xd.shape[3]] = xd
    rh, rw = rhs_dilation
    ekh, ekw = (kh - 1) * rh + 1, (kw - 1) * rw + 1
    oh = (xp.shape[2] - ekh) // strides[0] + 1
    ow = (xp.shape[3] - ekw) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    per = o // groups
    for b in range(n):
        for f in range(o):
            g = f // per
            for i in range(oh):
                for j in range(ow):
                    patch = xp[b, g * ci:(g + 1) * ci, i * strides[0]:i * strides[0] + ekh:rh,
                               j * strides[1]:j * strides[1] + ekw:rw]
                    out[b, f, i, j] = np.sum(patch * w[f])
    return out


@pytest.mark.parametrize("kw", [
    dict(strides=(1, 1), padding=((0, 0), (0, 0))),
    dict(strides=(2, 1), padding=((1, 2), (0, 1))),
    dict(strides=(1, 2), padding=((1, 1), (1, 1)), lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
    dict(strides=(1, 1), padding=((1, 1), (1, 1)), groups=2),
])
def test_conv_general_dilated_matches_numpy_loops(kw):
    r = rng(12)
    groups = kw.get("groups", 1)
    x, w = r.normal(size=(2, 4, 6, 5)), r.normal(size=(6, 4 // groups, 3, 2))
    want = numpy_conv(x, w, **kw)
    got = drx.lax.conv_general_dilated(
        x, w, kw["strides"], kw["padding"], lhs_dilation=kw.get("lhs_dilation"),
        rhs_dilation=kw.get("rhs_dilation"), feature_group_count=groups)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # The same in NHWC / HWIO layouts.
    nhwc = drx.lax.conv_general_dilated(
        x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), kw["strides"], kw["padding"],
        lhs_dilation=kw.get("lhs_dilation"), rhs_dilation=kw.get("rhs_dilation"),
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)
    np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


def test_conv_same_padding_and_gradient_match_numpy():
    r = rng(13)
    x, w = r.normal(size=(1, 2, 5, 5)), r.normal(size=(3, 2, 3, 3))
    assert drx.lax.padtype_to_pads((5, 5), (3, 3), (2, 2), "SAME") == [(1, 1), (1, 1)]
    np.testing.assert_allclose(drx.lax.conv(x, w, (2, 2), "SAME"),
                               numpy_conv(x, w, (2, 2), ((1, 1), (1, 1))), rtol=1e-12)
    loss = lambda a, b: (drx.lax.conv(a, b, (1, 1), "VALID") ** 2).sum()  # noqa: E731
    g = drx.jit(drx.grad(loss, argnums=1))(x, w)
    eps, fd = 1e-6, np.zeros_like(w)
    for i in np.ndindex(w.shape):
        e = np.zeros_like(w)
        e[i] = eps
        fd[i] = ((numpy_conv(x, w + e, (1, 1), ((0, 0), (0, 0))) ** 2).sum() -
                 (numpy_conv(x, w - e, (1, 1), ((0, 0), (0, 0))) ** 2).sum()) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_pooling_and_reduce_window_match_numpy():
    r = rng(14)
    x = r.normal(size=(2, 6, 5, 3))  # NHWC
    mp = drx.nn.max_pool(x, (2, 2), (2, 2), "VALID")
    want = x[:, :6, :4].reshape(2, 3, 2, 2, 2, 3).max(axis=(2, 4))
    np.testing.assert_array_equal(mp, want)
    ap = drx.nn.avg_pool(x, (2, 2), (2, 2), "VALID")
    np.testing.assert_allclose(ap, x[:, :6, :4].reshape(2, 3, 2, 2, 2, 3).mean(axis=(2, 4)),
                               rtol=1e-14)
    s = drx.lax.reduce_window(x, None, "add", (1, 3, 2, 1), (1, 1, 1, 1),
                              ((0, 0), (1, 1), (0, 0), (0, 0)))
    xp = np.pad(x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    want_s = sum(xp[:, i:i + 6, j:j + 4] for i in range(3) for j in range(2))
    np.testing.assert_allclose(s, want_s, rtol=1e-13)
    # Max pooling's gradient goes to each window's largest element.
    g = drx.jit(drx.grad(lambda a: drx.nn.max_pool(a, (2, 2), (2, 2), "VALID").sum()))(x)
    want_g = np.zeros_like(x)
    for b in range(2):
        for i in range(3):
            for j in range(2):
                for c in range(3):
                    win = x[b, 2 * i:2 * i + 2, 2 * j:2 * j + 2, c]
                    k = np.unravel_index(np.argmax(win), win.shape)
                    want_g[b, 2 * i + k[0], 2 * j + k[1], c] += 1
    np.testing.assert_array_equal(g, want_g)
    with pytest.raises(drx.Error, match="computation must be one of"):
        drx.lax.reduce_window(x, None, "mul", (1, 2, 2, 1))


@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (3, 2)])
def test_conv_transpose_is_a_scatter_of_the_kernel(strides):
    # transpose_kernel: each input element adds the kernel (its I features out, O in) times
    # itself at its strided place: the VALID result has (n - 1) * s + k rows.
    r = rng(15)
    y, w = r.normal(size=(2, 3, 4, 5)), r.normal(size=(3, 2, 4, 5))  # NHWC, HWIO
    sh, sw = strides
    want = np.zeros((2, 2 * sh + 3, 3 * sw + 2, 4))
    for i in range(3):
        for j in range(4):
            want[:, i * sh:i * sh + 3, j * sw:j * sw + 2] += np.einsum("bo,acio->baci", y[:, i, j], w)
    got = drx.lax.conv_transpose(y, w, strides, "VALID", transpose_kernel=True)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # Without transpose_kernel the kernel is used as stored: flipped spatially, O and I as given.
    w_io = np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
    np.testing.assert_allclose(drx.lax.conv_transpose(y, w_io, strides, "VALID"), want,
                               rtol=1e-12, atol=1e-12)
    # NCHW layouts name the same computation.
    nchw = drx.lax.conv_transpose(y.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), strides,
                                  "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                  transpose_kernel=True)
    np.testing.assert_allclose(nchw, want.transpose(0, 3, 1, 2), rtol=1e-12, atol=1e-12)
    assert drx.lax.conv_transpose(y, w, strides, "SAME", transpose_kernel=True).shape == \
        (2, 3 * sh, 4 * sw, 4)
    with pytest.raises(drx.Error, match="SAME or VALID"):
        drx.lax.conv_transpose(y, w, strides, "FULL")
