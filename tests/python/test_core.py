"""`import drx`: jit, the transformations, DrJAX's placements, tracers and errors, against
NumPy float64 references, central finite differences and loops."""
import collections

import numpy as np
import pytest

drx = pytest.importorskip("drx")


def rng(seed=0):
    return np.random.default_rng(seed)


def central_difference(f, x, eps=1e-6):
    """d f / d x of a float64 NumPy function, by central differences."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# ---- jit ---------------------------------------------------------------------------------
def test_jit_runs_on_numpy_and_returns_read_only_numpy():
    x = rng().normal(size=(3, 4))
    y = drx.jit(lambda a: np.float64(2.0) * a + 1.0)(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float64
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert not y.flags.writeable
    with pytest.raises(ValueError):
        y[0, 0] = 1.0


def test_jit_traces_once_per_signature_and_static_args_key_the_cache():
    calls = []

    def f(x, n):
        calls.append(n)
        return x * n

    jf = drx.jit(f, static_argnums=1)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(jf(x, 2), 2 * x)
    np.testing.assert_array_equal(jf(x + 1, 2), 2 * (x + 1))
    assert calls == [2]
    np.testing.assert_array_equal(jf(x, 3), 3 * x)
    np.testing.assert_array_equal(jf(np.ones(4, np.float32), 3), np.full(4, 3.0))
    assert calls == [2, 3, 3]
    assert jf.trace_count == 3


def test_pytrees_in_and_out_keep_their_structure():
    Pair = collections.namedtuple("Pair", "a b")

    def f(params, batch):
        return {"sum": params["w"] @ batch.a + params["b"], "n": batch.b * 2}

    params = {"w": np.eye(2, dtype=np.float32), "b": np.float32(1.0) * np.ones(2, np.float32)}
    batch = Pair(np.array([1.0, 2.0], np.float32), np.array(3, np.int32))
    out = drx.jit(f)(params, batch)
    assert sorted(out) == ["n", "sum"]
    np.testing.assert_array_equal(out["sum"], [2.0, 3.0])
    assert out["n"] == 6 and out["n"].dtype == np.int32


def test_python_numbers_are_weakly_typed():
    x = np.ones(3, np.float32)
    assert drx.jit(lambda a: a * 2)(x).dtype == np.float32
    assert drx.jit(lambda a, s: a * s)(x, 2.5).dtype == np.float32
    # A NumPy scalar is strongly typed: float32 * float64 is float64, as in JAX with x64.
    assert drx.jit(lambda a, s: a * s)(x, np.float64(2.5)).dtype == np.float64
    # Float64 stays float64 (JAX with x64).
    assert drx.jit(lambda a: a + 1)(np.ones(2)).dtype == np.float64
    # An integer array meeting a Python float becomes float64.
    assert drx.jit(lambda a: a * 0.5)(np.arange(3)).dtype == np.float64


def test_jit_nests_inside_grad():
    inner = drx.jit(lambda x: (x * x).sum())
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(drx.grad(inner)(x), 2 * x, rtol=1e-15)
    np.testing.assert_allclose(drx.jit(drx.grad(lambda v: inner(v) * 3.0))(x), 6 * x, rtol=1e-15)


# ---- grad ----------------------------------------------------------------------------------
def loss_np(w, x, y):
    return np.mean((np.tanh(x @ w) - y) ** 2)


def tanh(t):
    # drx.numpy comes with the next part of the Python layer; the core's op is enough here.
    from drx import _drx
    return drx.Tracer(_drx.tanh(t._value), t.weak_type)


def loss(w, x, y):
    return ((tanh(x @ w) - y) ** 2).mean()


def test_grad_matches_central_differences_in_float64():
    r = rng(1)
    w, x, y = r.normal(size=3), r.normal(size=(5, 3)), r.normal(size=5)
    g = drx.grad(loss)(w, x, y)
    np.testing.assert_allclose(g, central_difference(lambda v: loss_np(v, x, y), w), rtol=1e-7)


def test_grad_argnums_and_value_and_grad():
    r = rng(2)
    w, x, y = r.normal(size=3), r.normal(size=(4, 3)), r.normal(size=4)
    gw, gx = drx.grad(loss, argnums=(0, 1))(w, x, y)
    np.testing.assert_allclose(gw, central_difference(lambda v: loss_np(v, x, y), w), rtol=1e-7)
    np.testing.assert_allclose(gx, central_difference(lambda v: loss_np(w, v, y), x), rtol=1e-6)
    value, g = drx.value_and_grad(loss)(w, x, y)
    assert value == pytest.approx(loss_np(w, x, y), rel=1e-14)
    np.testing.assert_allclose(g, gw, rtol=1e-15)


def test_grad_of_a_dict_has_the_dicts_structure():
    def f(p):
        return (p["a"] * p["a"]).sum() + (p["b"] * 3.0).sum()

    g = drx.grad(f)({"b": np.ones(2), "a": np.array([1.0, 2.0])})
    assert list(g) == ["a", "b"]
    np.testing.assert_array_equal(g["a"], [2.0, 4.0])
    np.testing.assert_array_equal(g["b"], [3.0, 3.0])


def test_grad_has_aux():
    def f(x):
        return (x * x).sum(), {"twice": x * 2.0}

    g, aux = drx.grad(f, has_aux=True)(np.array([1.0, 3.0]))
    np.testing.assert_array_equal(g, [2.0, 6.0])
    np.testing.assert_array_equal(aux["twice"], [2.0, 6.0])
    (v, aux2), g2 = drx.value_and_grad(f, has_aux=True)(np.array([1.0, 3.0]))
    assert v == 10.0
    np.testing.assert_array_equal(g2, g)


def test_second_and_third_derivatives():
    def f(x):
        return (x * x * x).sum()  # d/dx = 3x^2, d2 = 6x, d3 = 6

    x = np.array([0.5, -2.0])
    np.testing.assert_allclose(drx.grad(f)(x), 3 * x * x, rtol=1e-15)
    d2 = drx.grad(lambda v: drx.grad(f)(v).sum())(x)
    np.testing.assert_allclose(d2, 6 * x, rtol=1e-15)
    d3 = drx.grad(lambda v: drx.grad(lambda u: drx.grad(f)(u).sum())(v).sum())(x)
    np.testing.assert_allclose(d3, [6.0, 6.0], rtol=1e-15)


def test_grad_of_a_non_scalar_is_an_error_naming_grad():
    with pytest.raises(drx.Error, match="grad: the function must return one floating-point"):
        drx.grad(lambda x: x * 2.0)(np.ones(3))


# ---- vmap, jvp, vjp ----------------------------------------------------------------------
def test_vmap_matches_a_loop_with_an_unbatched_argument():
    r = rng(3)
    xs, w = r.normal(size=(6, 4)), r.normal(size=(4, 2))
    out = drx.vmap(lambda x, m: x @ m, in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(out, np.stack([x @ w for x in xs]), rtol=1e-15)
    out1 = drx.vmap(lambda x: x.sum(), in_axes=1)(xs)
    np.testing.assert_allclose(out1, xs.sum(axis=0), rtol=1e-15)


def test_per_example_gradients_by_vmap_of_grad():
    r = rng(4)
    w, xs, ys = r.normal(size=3), r.normal(size=(5, 2, 3)), r.normal(size=(5, 2))
    per = drx.vmap(drx.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    for i in range(5):
        np.testing.assert_allclose(per[i], drx.grad(loss)(w, xs[i], ys[i]), rtol=1e-14)


def test_jvp_is_the_directional_derivative():
    r = rng(5)
    w, x, y, v = r.normal(size=3), r.normal(size=(4, 3)), r.normal(size=4), r.normal(size=3)
    out, tangent = drx.jvp(lambda a: loss(a, x, y), (w,), (v,))
    assert out == pytest.approx(loss_np(w, x, y), rel=1e-14)
    eps = 1e-6
    fd = (loss_np(w + eps * v, x, y) - loss_np(w - eps * v, x, y)) / (2 * eps)
    assert tangent == pytest.approx(fd, rel=1e-7)


def test_vjp_inside_jit_agrees_with_jvp():
    r = rng(6)
    x, u, v = r.normal(size=(3,)), r.normal(size=(3,)), r.normal(size=(2,))
    m = r.normal(size=(2, 3))

    def f(a):
        return m @ tanh(a)

    def both(a, t, c):
        out, pullback = drx.vjp(f, a)
        (ct,) = pullback(c)
        _, jt = drx.jvp(f, (a,), (t,))
        return (ct * t).sum(), (jt * c).sum()

    lhs, rhs = drx.jit(both)(x, u, v)
    assert lhs == pytest.approx(rhs, rel=1e-13)  # <vjp(c), t> = <c, jvp(t)>


def test_make_program_prints_the_ir():
    text = drx.make_program(lambda x: (x * 2.0).sum())(np.ones((2, 3), np.float32))
    assert "program @main (%0: f32[2,3]) -> (f32[])" in text
    assert "sum[axes=[0,1]]" in text


# ---- DrJAX --------------------------------------------------------------------------------
def client_update(w, x, y):
    return w - 0.1 * drx.grad(loss)(w, x, y)


def test_fedavg_round_matches_a_numpy_loop():
    r = rng(7)
    w0, xs, ys = r.normal(size=3), r.normal(size=(8, 5, 3)), r.normal(size=(8, 5))

    @drx.program(placements={"clients": 8})
    def fedavg_round(w, xs, ys):
        ws = drx.map_fn(client_update, (drx.broadcast(w), xs, ys))
        return drx.reduce_mean(ws)

    w1 = drx.jit(fedavg_round)(w0, xs, ys)

    def grad_np(w, x, y):
        p = np.tanh(x @ w)
        return x.T @ (2 * (p - y) * (1 - p * p)) / len(y)

    want = np.mean([w0 - 0.1 * grad_np(w0, xs[i], ys[i]) for i in range(8)], axis=0)
    np.testing.assert_allclose(w1, want, rtol=1e-13)


def test_reductions_and_weighted_mean_and_client_index():
    xs = np.arange(12.0).reshape(4, 3)
    weights = np.array([1.0, 2.0, 3.0, 4.0])

    @drx.program(placements={"clients": 4})
    def stats(xs, weights):
        scaled = drx.map_fn(lambda x: x * drx.client_index().astype(np.float64), xs)
        return (drx.reduce_sum(xs), drx.reduce_max(xs), drx.reduce_min(xs),
                drx.reduce_weighted_mean(xs, weights), drx.reduce_sum(scaled))

    s, mx, mn, wm, sc = drx.jit(stats)(xs, weights)
    np.testing.assert_array_equal(s, xs.sum(0))
    np.testing.assert_array_equal(mx, xs.max(0))
    np.testing.assert_array_equal(mn, xs.min(0))
    np.testing.assert_allclose(wm, (weights[:, None] * xs).sum(0) / weights.sum(), rtol=1e-15)
    np.testing.assert_array_equal(sc, (np.arange(4)[:, None] * xs).sum(0))


def test_map_fn_unpacks_tuples_and_namedtuples_but_not_lists():
    Batch = collections.namedtuple("Batch", "x y")
    xs, ys = np.ones((2, 3)), np.full((2, 3), 2.0)

    @drx.program(placements={"clients": 2})
    def f(xs, ys):
        a = drx.map_fn(lambda x, y: x * y, Batch(xs, ys))
        b = drx.map_fn(lambda pair: pair[0] + pair[1], [xs, ys])
        return drx.reduce_sum(a), drx.reduce_sum(b)

    a, b = drx.jit(f)(xs, ys)
    np.testing.assert_array_equal(a, [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(b, [6.0, 6.0, 6.0])


def test_federated_hypergradient_of_the_server_learning_rate():
    r = rng(8)
    w0, xs, ys = r.normal(size=3), r.normal(size=(4, 5, 3)), r.normal(size=(4, 5))

    def after_round(lr):
        @drx.program(placements={"clients": 4})
        def rnd(w, xs, ys):
            g = drx.reduce_mean(drx.map_fn(lambda a, x, y: drx.grad(loss)(a, x, y),
                                           (drx.broadcast(w), xs, ys)))
            w1 = w - lr * g
            return drx.reduce_mean(drx.map_fn(loss, (drx.broadcast(w1), xs, ys)))
        return rnd(w0, xs, ys)

    def after_round_np(lr):
        def grad_np(w, x, y):
            p = np.tanh(x @ w)
            return x.T @ (2 * (p - y) * (1 - p * p)) / len(y)
        g = np.mean([grad_np(w0, xs[i], ys[i]) for i in range(4)], axis=0)
        return np.mean([loss_np(w0 - lr * g, xs[i], ys[i]) for i in range(4)])

    h = drx.grad(after_round)(0.3)
    eps = 1e-6
    assert h == pytest.approx((after_round_np(0.3 + eps) - after_round_np(0.3 - eps)) / (2 * eps),
                              rel=1e-6)


def test_placement_calls_outside_a_program_raise():
    with pytest.raises(drx.Error, match="map_fn"):
        drx.map_fn(lambda x: x, np.ones((2, 3)))
    with pytest.raises(drx.Error, match="broadcast"):
        drx.jit(lambda w: drx.broadcast(w))(np.ones(3))


# ---- tracers ----------------------------------------------------------------------------
def test_python_control_flow_on_a_traced_value_raises_concretization_error():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(drx.ConcretizationError, match="drx.lax.cond") as info:
        drx.jit(f)(np.ones(3))
    assert isinstance(info.value, TypeError) and isinstance(info.value, drx.Error)
    with pytest.raises(TypeError):
        drx.jit(lambda x: float(x))(np.float64(1.0))


def test_user_exceptions_propagate_unchanged():
    class Mine(Exception):
        pass

    def f(x):
        raise Mine("from user code")

    with pytest.raises(Mine, match="from user code"):
        drx.jit(f)(np.ones(2))
    with pytest.raises(Mine):
        drx.grad(lambda x: f(x))(np.ones(2))


def test_drx_errors_are_value_errors_with_drxs_message():
    assert issubclass(drx.Error, ValueError)
    with pytest.raises(drx.Error, match=r"f32\[2,3\].*f32\[4\]|\[2,3\].*\[4\]"):
        drx.jit(lambda a, b: a + b)(np.ones((2, 3), np.float32), np.ones(4, np.float32))


def test_operators_shape_and_methods_against_numpy():
    r = rng(9)
    x, y = r.normal(size=(3, 4)), r.normal(size=(3, 4))

    def f(a, b):
        return (a + b, a - b, a * b, a / b, -a, abs(a), a ** 2.0, a < b, a >= b, a == a,
                a.T, a.reshape(4, 3), a.reshape(-1), a.sum(axis=0), a.mean(axis=1, keepdims=True),
                a.max(), a.min(axis=(0, 1)), a @ b.T, 2.0 - a, 1.0 / b, a.astype(np.float32))

    got = drx.jit(f)(x, y)
    want = f(x, y)
    for g, w in zip(got, want):
        assert g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-15, atol=1e-15)


def test_tracer_properties():
    seen = {}

    def f(x):
        seen.update(shape=x.shape, dtype=x.dtype, ndim=x.ndim, size=x.size, length=len(x))
        return x

    drx.jit(f)(np.ones((2, 5), np.float32))
    assert seen == {"shape": (2, 5), "dtype": np.dtype(np.float32), "ndim": 2, "size": 10,
                    "length": 2}


def test_indexing_matches_numpy():
    x = np.arange(60.0).reshape(3, 4, 5)
    idx = np.array([2, 0, 2])
    cases = [
        lambda a: a[1], lambda a: a[-1, 2], lambda a: a[:, 1:3], lambda a: a[..., ::2],
        lambda a: a[None, 0], lambda a: a[:, ::-1], lambda a: a[idx], lambda a: a[:, [3, 1]],
        lambda a: a[1:, None, :, 4],
    ]
    for case in cases:
        np.testing.assert_array_equal(drx.jit(case)(x), case(x))
    with pytest.raises(IndexError):
        drx.jit(lambda a: a[3])(x)


def test_at_set_and_add_and_their_gradients():
    x = np.arange(6.0).reshape(3, 2)
    out = drx.jit(lambda a: (a.at[1].set(10.0), a.at[[0, 2]].add(np.ones((2, 2))),
                             a.at[0:2].set(a[2])))(x)
    want_set = x.copy(); want_set[1] = 10.0
    want_add = x.copy(); want_add[[0, 2]] += 1.0
    want_slice = x.copy(); want_slice[0:2] = x[2]
    for g, w in zip(out, (want_set, want_add, want_slice)):
        np.testing.assert_array_equal(g, w)
    # d/dx sum(x.at[1].set(0) * 3) = 3 except row 1.
    g = drx.grad(lambda a: (a.at[1].set(0.0) * 3.0).sum())(x)
    np.testing.assert_array_equal(g, [[3.0, 3.0], [0.0, 0.0], [3.0, 3.0]])


# ---- DrJAX's documented behaviours ------------------------------------------------------
def test_a_program_called_with_the_wrong_number_of_arguments_raises():
    @drx.program(placements={"clients": 2})
    def f(a, b):
        return drx.reduce_sum(drx.map_fn(lambda x, y: x * y, (a, b)))

    with pytest.raises(TypeError):
        drx.jit(f)(np.ones((2, 3)))


def test_an_error_inside_map_fn_propagates_with_where_it_was_raised():
    @drx.program(placements={"clients": 2})
    def f(a):
        return drx.reduce_sum(drx.map_fn(lambda x: x @ np.ones((4, 4)), a))

    with pytest.raises(drx.Error, match=r"(?s)matmul: .*\n  in .*map_fn"):
        drx.jit(f)(np.ones((2, 3)))

    class Mine(Exception):
        pass

    def boom(x):
        raise Mine("in a client")

    @drx.program(placements={"clients": 2})
    def g(a):
        return drx.reduce_sum(drx.map_fn(boom, a))

    with pytest.raises(Mine, match="in a client"):
        drx.jit(g)(np.ones((2, 3)))


def test_broadcast_outside_a_program_names_the_operation():
    with pytest.raises(drx.Error, match="broadcast"):
        drx.jit(lambda w: drx.broadcast(w))(np.ones(3))


# ---- threads and memory -------------------------------------------------------------------
def test_python_threads_call_one_jitted_function_at_once():
    import threading

    traces = []

    def f(x):
        traces.append(x.shape)
        return (x * x).sum(axis=0)

    jf = drx.jit(f)
    inputs = [rng(i).normal(size=(64, 32)) for i in range(8)]
    results = [None] * 8
    errors = []

    def work(i):
        try:
            for _ in range(50):
                results[i] = jf(inputs[i])
        except Exception as e:  # reported below: a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert traces == [(64, 32)]  # one trace for the one signature
    for x, r in zip(inputs, results):
        np.testing.assert_array_equal(r, (x * x).sum(axis=0))


def test_a_process_forked_after_drx_ran_can_use_drx():
    import os

    @drx.program(placements={"clients": 8})
    def r(w, xs):
        return drx.reduce_mean(drx.map_fn(lambda a, x: (a * x).sum() * a,
                                          (drx.broadcast(w), xs)))

    f = drx.jit(r, mesh=drx.Mesh({"clients": 2}))
    np.testing.assert_array_equal(f(np.ones(3), np.ones((8, 3))), [3.0, 3.0, 3.0])
    pid = os.fork()
    if pid == 0:  # the child: a new program on the same mesh, then the parent's compiled one
        ok = False
        try:
            ok = (np.array_equal(drx.jit(r, mesh=drx.Mesh({"clients": 2}))(
                      np.full(3, 2.0), np.ones((8, 3))), [12.0] * 3)
                  and np.array_equal(f(np.ones(3), np.ones((8, 3))), [3.0] * 3))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_hierarchical_fedavg_with_nested_placements_and_its_gradient():
    xs = rng(10).normal(size=(2, 3, 4))

    @drx.program(placements={"groups": 2, "clients": 3}, in_placements=["", "groups.clients"])
    def two_level(w, xs):
        def group(wg, xg):
            per_client = drx.map_fn(lambda a, x: a * (x * x).sum(),
                                    (drx.broadcast(wg, "clients"), xg))
            return drx.reduce_mean(per_client)

        return drx.reduce_mean(drx.map_fn(group, (drx.broadcast(w, "groups"), xs)))

    w = np.array([1.0, -2.0])
    want = np.mean([[w * (x * x).sum() for x in g] for g in xs], axis=(0, 1))
    np.testing.assert_allclose(drx.jit(two_level)(w, xs), want, rtol=1e-15)
    g = drx.grad(lambda w, xs: (two_level(w, xs) ** 2.0).sum())(w, xs)
    np.testing.assert_allclose(g, 2 * want * np.mean((xs * xs).sum(-1)), rtol=1e-14)
    # A nested placement must be named for broadcast.
    with pytest.raises(drx.Error, match="several placements"):
        drx.jit(drx.program(lambda w: drx.reduce_mean(drx.broadcast(w)),
                            placements={"groups": 2, "clients": 3}))(np.ones(5))


def test_vmap_in_axes_are_pytree_prefixes_as_in_jax():
    r = rng(11)
    params = {"w": r.normal(size=(3, 2)), "scale": np.float64(2.0) * np.ones(2)}
    batch = {"x": r.normal(size=(5, 3)), "y": r.normal(size=(2, 5))}

    def f(p, b):
        return (b["x"] @ p["w"]) * p["scale"] - b["y"]

    out = drx.vmap(f, in_axes=(None, {"x": 0, "y": 1}))(params, batch)
    want = np.stack([f(params, {"x": batch["x"][i], "y": batch["y"][:, i]}) for i in range(5)])
    np.testing.assert_allclose(out, want, rtol=1e-15)
    # A per-leaf None inside a prefix, and out_axes per output leaf.
    out2 = drx.vmap(lambda p, x: (x @ p["w"], p["scale"] * 1.0),
                    in_axes=({"w": None, "scale": 0}, 0), out_axes=(1, 0))(
        {"w": params["w"], "scale": np.ones((5, 2))}, batch["x"])
    np.testing.assert_allclose(out2[0], (batch["x"] @ params["w"]).T, rtol=1e-15)
    np.testing.assert_array_equal(out2[1], np.ones((5, 2)))
    with pytest.raises(drx.Error, match="prefix"):
        drx.vmap(f, in_axes=(None, [0, 1]))(params, batch)
    with pytest.raises(drx.Error, match="one entry per"):
        drx.vmap(f, in_axes=(0,))(params, batch)


def test_vjp_pullback_takes_python_numbers_and_numpy_in_the_outputs_dtype():
    def f(a):
        def g(x):
            return (x * x).sum(), x * 3.0

        (s, t), pullback = drx.vjp(g, a)
        (from_number,) = pullback((1.0, np.zeros(3, np.float32)))
        (from_array,) = pullback((np.float32(2.0), np.ones(3, np.float32)))
        return from_number, from_array

    x = np.array([1.0, 2.0, 3.0], np.float32)
    a, b = drx.jit(f)(x)
    assert a.dtype == np.float32 and b.dtype == np.float32
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, 2 * 2 * x + 3.0)
    with pytest.raises(drx.Error, match="structure"):
        drx.jit(lambda v: drx.vjp(lambda x: x * 2.0, v)[1]((1.0, 2.0)))(x)
