"""Bitwise parity of drx from Python with drx from C++ (issue 32): the same programs written
with the drx package here and with drx's C++ API in the _drx_cpp_reference module
(tests/python/cpp_reference.cpp, built with the tests), run on the same NumPy inputs, must give
the same dtypes and the same bits. Each program is also checked against a NumPy float64
reference, so that two equally wrong sides cannot pass. The programs: the FedAvg round of
examples/python/fedavg_round.py and its hypergradient, local steps as a drx.lax.scan inside a
round and its gradient, hierarchical FedAvg over nested placements (values, gradients and a
training round), and W1 (bench/python_fedavg_w1.py's model) at a smoke size.
"""
import importlib.util
import os

import numpy as np
import pytest

drx = pytest.importorskip("drx", reason="drx's extension is not built")
try:
    import _drx_cpp_reference as ref
except ImportError as e:
    # The build's own run (ctest sets DRX_PYTHON_BUILT, and builds the module with the tests)
    # must not skip a module that fails to import.
    if os.environ.get("DRX_PYTHON_BUILT"):
        raise ImportError(f"_drx_cpp_reference was built but does not import: {e}") from e
    print(f"NOTICE: the C++ reference module _drx_cpp_reference is not built ({e}: the "
          "drx_cpp_reference target, DRX_BUILD_TESTS=ON); the C++ parity tests are skipped")
    pytest.skip("_drx_cpp_reference is not built", allow_module_level=True)

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _load(relative, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_ROOT, relative))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The example itself: its round is the program the C++ module's fedavg_round mirrors.
example = _load("examples/python/fedavg_round.py", "drx_example_fedavg_round")
w1bench = _load("bench/python_fedavg_w1.py", "drx_bench_python_fedavg_w1")

LR, STEPS = 0.1, 5  # client_update's defaults in the example, kLr and kLocalSteps in C++


@pytest.fixture(autouse=True, scope="module")
def _same_blas_policy():
    # conftest turns drx._drx's control on; the reference module's copy of drx is separate.
    ref.set_blas_thread_control(True)
    yield
    ref.set_blas_thread_control(False)


def _uint(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_bitwise(py, cpp, what, program_text=None):
    """Same dtype, shape and bits; on a mismatch the message carries both programs' IR."""
    py, cpp = np.asarray(py), np.asarray(cpp)
    assert py.dtype == cpp.dtype, f"{what}: dtype {py.dtype} from Python, {cpp.dtype} from C++"
    assert py.shape == cpp.shape, f"{what}: shape {py.shape} from Python, {cpp.shape} from C++"
    if not np.array_equal(_uint(py), _uint(cpp)):
        diff = np.max(np.abs(py.astype(np.float64) - cpp.astype(np.float64)))
        msg = f"{what}: the bits differ (max |difference| {diff:.3g})"
        if program_text is not None:
            msg += (f"\n--- Python program ---\n{program_text()}"
                    f"\n--- C++ program ---\n{ref.last_program_text()}")
        raise AssertionError(msg)


def _data(seed, clients, examples, features, dtype):
    r = np.random.default_rng(seed)
    w_true = r.normal(size=features)
    xs = r.normal(size=(clients, examples, features))
    ys = xs @ w_true + 0.01 * r.normal(size=(clients, examples))
    w = 0.1 * r.normal(size=features)
    return w.astype(dtype), xs.astype(dtype), ys.astype(dtype)


# ---- NumPy float64 references ----------------------------------------------------------------
def np_grad(w, x, y):  # d mean((x w - y)^2) / d w
    return 2.0 / len(y) * x.T @ (x @ w - y)


def np_client_update(w, x, y, batches=None):
    """STEPS steps on all of x (the example's client_update), or with batches=k one step on
    each of k consecutive batches (the scan's)."""
    pairs = [(x, y)] * STEPS if batches is None else zip(np.split(x, batches), np.split(y, batches))
    for xb, yb in pairs:
        w = w - LR * np_grad(w, xb, yb)
    return w


def np_round(w, xs, ys, batches=None):
    return np.mean([np_client_update(w, x, y, batches) for x, y in zip(xs, ys)], axis=0)


def np_loss(w, xs, ys):
    return np.mean([np.mean((x @ w - y) ** 2) for x, y in zip(xs, ys)])


def np_hier_round(w, xs, ys):
    return np.mean([np_round(w, xg, yg) for xg, yg in zip(xs, ys)], axis=0)


def np_hier_loss(w, xs, ys):
    return np.mean([np_loss(w, xg, yg) for xg, yg in zip(xs, ys)])


def central_gradient(f, w, eps=1e-5):
    """Central differences of f at w, coordinate by coordinate (exact up to rounding for the
    quadratics here)."""
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = eps
        g[i] = (f(w + e) - f(w - e)) / (2 * eps)
    return g


def f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


# ---- a. the FedAvg round of examples/python/fedavg_round.py ----------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fedavg_round_is_bitwise_the_cpp_round(dtype):
    assert example.client_update.__defaults__ == (LR, STEPS), "the example's client_update " \
        "changed: change kLr and kLocalSteps in tests/python/cpp_reference.cpp with it"
    w, xs, ys = _data(1, example.CLIENTS, example.EXAMPLES, example.FEATURES, dtype)
    py = drx.jit(example.fedavg_round)(w, xs, ys)
    cpp = ref.fedavg_round(w, xs, ys)
    assert py.dtype == dtype
    assert_bitwise(py, cpp, "fedavg_round",
                   lambda: drx.make_program(example.fedavg_round)(w, xs, ys))
    np.testing.assert_allclose(py, np_round(*f64(w, xs, ys)), **TOL[dtype])
    # Chained rounds stay equal, and the federated loss too.
    for _ in range(3):
        py, cpp = drx.jit(example.fedavg_round)(py, xs, ys), ref.fedavg_round(cpp, xs, ys)
    assert_bitwise(py, cpp, "fedavg_round, 4 rounds chained")
    assert_bitwise(drx.jit(example.federated_loss)(py, xs, ys), ref.federated_loss(cpp, xs, ys),
                   "federated_loss")


# ---- b. its hypergradient --------------------------------------------------------------------
def loss_after(s, w0, xs, ys):
    w1 = example.fedavg_round(w0, xs, ys)
    return example.federated_loss(w0 + s * (w1 - w0), xs, ys)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hypergradient_is_bitwise_the_cpp_hypergradient(dtype):
    w, xs, ys = _data(2, example.CLIENTS, example.EXAMPLES, example.FEATURES, dtype)
    py = drx.jit(drx.grad(loss_after))(1.0, w, xs, ys)
    cpp = ref.fedavg_hypergradient(1.0, w, xs, ys)
    assert py.dtype == np.float64  # s is a Python number: weakly typed f64
    assert_bitwise(py, cpp, "hypergradient",
                   lambda: drx.make_program(drx.grad(loss_after))(1.0, w, xs, ys))
    w64, xs64, ys64 = f64(w, xs, ys)
    w1 = np_round(w64, xs64, ys64)
    eps = 1e-4  # the loss is quadratic in s: central differences are exact up to rounding
    fd = (np_loss(w64 + (1 + eps) * (w1 - w64), xs64, ys64)
          - np_loss(w64 + (1 - eps) * (w1 - w64), xs64, ys64)) / (2 * eps)
    np.testing.assert_allclose(py, fd, rtol=1e-3 if dtype == np.float32 else 1e-7)


def test_the_example_hypergradient_with_data_as_constants_matches_too():
    """The example's own form: xs and ys closed over (constants of the trace), in float64."""
    w, xs, ys = _data(3, example.CLIENTS, example.EXAMPLES, example.FEATURES, np.float64)
    py = drx.jit(drx.grad(lambda s, w0: loss_after(s, w0, xs, ys)))(1.0, w)
    assert_bitwise(py, ref.fedavg_hypergradient(1.0, w, xs, ys), "hypergradient (constants)")


# ---- c. local steps as a scan ----------------------------------------------------------------
SCAN_CLIENTS, SCAN_STEPS, SCAN_BATCH, SCAN_FEATURES = 4, 3, 8, 5


def client_update_scan(w, x, y):
    per_step = (x.reshape(SCAN_STEPS, SCAN_BATCH, SCAN_FEATURES), y.reshape(SCAN_STEPS, SCAN_BATCH))

    def step(wc, batch):
        xb, yb = batch
        return wc - LR * drx.grad(example.loss)(wc, xb, yb), None

    return drx.lax.scan(step, w, per_step)[0]


@drx.program(placements={"clients": SCAN_CLIENTS})
def scan_round(w, xs, ys):
    return drx.reduce_mean(drx.map_fn(client_update_scan, (drx.broadcast(w), xs, ys)))


@drx.program(placements={"clients": SCAN_CLIENTS})
def scan_federated_loss(w, xs, ys):
    return drx.reduce_mean(drx.map_fn(example.loss, (drx.broadcast(w), xs, ys)))


def loss_after_scan_round(w, xs, ys):
    return scan_federated_loss(scan_round(w, xs, ys), xs, ys)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scan_of_local_steps_and_its_gradient_are_bitwise_the_cpp_ones(dtype):
    w, xs, ys = _data(4, SCAN_CLIENTS, SCAN_STEPS * SCAN_BATCH, SCAN_FEATURES, dtype)
    py = drx.jit(scan_round)(w, xs, ys)
    assert_bitwise(py, ref.scan_fedavg_round(w, xs, ys, SCAN_STEPS, SCAN_BATCH), "scan round",
                   lambda: drx.make_program(scan_round)(w, xs, ys))
    w64, xs64, ys64 = f64(w, xs, ys)
    np.testing.assert_allclose(py, np_round(w64, xs64, ys64, batches=SCAN_STEPS), **TOL[dtype])

    g = drx.jit(drx.grad(loss_after_scan_round))(w, xs, ys)
    assert g.dtype == dtype
    assert_bitwise(g, ref.scan_fedavg_grad(w, xs, ys, SCAN_STEPS, SCAN_BATCH), "scan gradient",
                   lambda: drx.make_program(drx.grad(loss_after_scan_round))(w, xs, ys))
    want = central_gradient(
        lambda v: np_loss(np_round(v, xs64, ys64, batches=SCAN_STEPS), xs64, ys64), w64)
    np.testing.assert_allclose(g, want, **(TOL[dtype] if dtype == np.float32 else
                                           dict(rtol=1e-7, atol=1e-9)))


# ---- d. hierarchical FedAvg: nested placements -----------------------------------------------
GROUPS, GROUP_CLIENTS = 2, 3


@drx.program(placements={"groups": GROUPS, "clients": GROUP_CLIENTS},
             in_placements=["", "groups.clients"])
def two_level(w, xs):
    """tests/python/test_core.py's two-level program."""
    def group(wg, xg):
        per_client = drx.map_fn(lambda a, x: a * (x * x).sum(), (drx.broadcast(wg, "clients"), xg))
        return drx.reduce_mean(per_client)

    return drx.reduce_mean(drx.map_fn(group, (drx.broadcast(w, "groups"), xs)))


def two_level_objective(w, xs):
    return (two_level(w, xs) ** 2.0).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_level_program_and_its_gradient_are_bitwise_the_cpp_ones(dtype):
    r = np.random.default_rng(10)
    xs = r.normal(size=(GROUPS, GROUP_CLIENTS, 4)).astype(dtype)
    w = np.array([1.0, -2.0], dtype)
    py = drx.jit(two_level)(w, xs)
    assert_bitwise(py, ref.two_level(w, xs), "two_level",
                   lambda: drx.make_program(two_level)(w, xs))
    w64, xs64 = f64(w, xs)
    want = np.mean([[w64 * (x * x).sum() for x in g] for g in xs64], axis=(0, 1))
    np.testing.assert_allclose(py, want, **TOL[dtype])
    g = drx.jit(drx.grad(two_level_objective))(w, xs)
    assert_bitwise(g, ref.two_level_grad(w, xs), "two_level gradient",
                   lambda: drx.make_program(drx.grad(two_level_objective))(w, xs))
    np.testing.assert_allclose(g, 2 * want * np.mean((xs64 * xs64).sum(-1)), **TOL[dtype])


HIER = dict(placements={"groups": GROUPS, "clients": GROUP_CLIENTS},
            in_placements=["", "groups.clients", "groups.clients"])


@drx.program(**HIER)
def hier_round(w, xs, ys):
    def group(wg, xg, yg):
        return drx.reduce_mean(
            drx.map_fn(example.client_update, (drx.broadcast(wg, "clients"), xg, yg)))

    return drx.reduce_mean(drx.map_fn(group, (drx.broadcast(w, "groups"), xs, ys)))


@drx.program(**HIER)
def hier_loss(w, xs, ys):
    def group(wg, xg, yg):
        return drx.reduce_mean(drx.map_fn(example.loss, (drx.broadcast(wg, "clients"), xg, yg)))

    return drx.reduce_mean(drx.map_fn(group, (drx.broadcast(w, "groups"), xs, ys)))


def loss_after_hier_round(w, xs, ys):
    return hier_loss(hier_round(w, xs, ys), xs, ys)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hierarchical_fedavg_training_and_its_gradient_are_bitwise_the_cpp_ones(dtype):
    w, xs, ys = _data(11, GROUPS * GROUP_CLIENTS, 16, 5, dtype)
    xs, ys = xs.reshape(GROUPS, GROUP_CLIENTS, 16, 5), ys.reshape(GROUPS, GROUP_CLIENTS, 16)
    py, cpp = w, w
    for r in range(3):  # three training rounds, chained on each side
        py, cpp = drx.jit(hier_round)(py, xs, ys), ref.hier_round(cpp, xs, ys)
        assert_bitwise(py, cpp, f"hierarchical round {r + 1}",
                       lambda: drx.make_program(hier_round)(w, xs, ys))
    w64, xs64, ys64 = f64(w, xs, ys)
    want = w64
    for _ in range(3):
        want = np_hier_round(want, xs64, ys64)
    np.testing.assert_allclose(py, want, **TOL[dtype])
    assert np_hier_loss(want, xs64, ys64) < 0.5 * np_hier_loss(w64, xs64, ys64)  # it trains

    g = drx.jit(drx.grad(loss_after_hier_round))(w, xs, ys)
    assert_bitwise(g, ref.hier_round_grad(w, xs, ys), "hierarchical round gradient",
                   lambda: drx.make_program(drx.grad(loss_after_hier_round))(w, xs, ys))
    want_g = central_gradient(lambda v: np_hier_loss(np_hier_round(v, xs64, ys64), xs64, ys64),
                              w64)
    np.testing.assert_allclose(g, want_g, **(TOL[dtype] if dtype == np.float32 else
                                             dict(rtol=1e-7, atol=1e-9)))


# ---- e. W1 at a smoke size -------------------------------------------------------------------
def np_w1_round(params, xs, ys, steps, batch, lr):
    """W1's FedAvg round in NumPy float64: the MLP's backward pass written out."""
    p0 = {k: np.asarray(v, np.float64) for k, v in params.items()}
    clients = []
    for x, y in zip(xs.astype(np.float64), ys):
        p = dict(p0)
        for s in range(steps):
            xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
            a1 = xb @ p["w1"] + p["b1"]
            h1 = np.maximum(a1, 0)
            a2 = h1 @ p["w2"] + p["b2"]
            h2 = np.maximum(a2, 0)
            logits = h2 @ p["w3"] + p["b3"]
            z = logits - logits.max(axis=1, keepdims=True)
            prob = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
            d3 = (prob - np.eye(w1bench.CLASSES)[yb]) / batch
            d2 = (d3 @ p["w3"].T) * (a2 > 0)
            d1 = (d2 @ p["w2"].T) * (a1 > 0)
            grads = {"w3": h2.T @ d3, "b3": d3.sum(0), "w2": h1.T @ d2, "b2": d2.sum(0),
                     "w1": xb.T @ d1, "b1": d1.sum(0)}
            p = {k: p[k] - lr * grads[k] for k in p}
        clients.append(p)
    return {k: np.mean([c[k] for c in clients], axis=0) for k in p0}


def test_w1_round_from_python_is_bitwise_the_cpp_round():
    cohort, steps, batch, hidden = 4, 2, 8, 16
    params, xs, ys = w1bench.make_inputs(cohort, steps, batch, hidden, seed=3)
    round_py = drx.jit(w1bench.round_program(cohort, steps, batch))
    round_cpp = ref.W1Round(cohort, steps, batch, hidden)
    py = round_py(params, xs, ys)
    cpp = round_cpp(params, xs, ys)
    assert sorted(py) == sorted(cpp) == ["b1", "b2", "b3", "w1", "w2", "w3"]
    for k in py:
        assert_bitwise(py[k], cpp[k], f"W1 round, {k}")
    # Two more rounds chained: Python's loop, and C++'s own loop (time_rounds).
    for _ in range(2):
        py = round_py(py, xs, ys)
    seconds = round_cpp.time_rounds(cpp, xs, ys, 2)
    assert len(seconds) == 2 and all(t > 0 for t in seconds)
    final = round_cpp.final_params()
    assert w1bench.bitwise_equal(py, final)
    assert round_py.trace_count == 1 and round_cpp.trace_count == 1
    # Against float64 NumPy, relative to the largest parameter (as fedavg_w1 --check).
    want = np_w1_round(params, xs, ys, steps, batch, ref.W1_LEARNING_RATE)
    got = round_cpp(params, xs, ys)
    scale = max(np.abs(v).max() for v in want.values())
    err = max(np.abs(got[k] - want[k]).max() for k in want)
    assert err <= 1e-5 * scale, err


# ---- the comparison can fail -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_learning_rate_one_ulp_off_is_caught(dtype):
    """A program differing only in the last bit of the client learning rate (in the data's
    dtype) gives results within rounding of the C++ program's, but not its bits: assert_bitwise
    fails. (Rewrites drx's simplifier makes exact are not caught, and need not be: ``** 2`` as
    ``x * x``, ``.mean()`` as ``.sum() / n`` or ``(y - x @ w) ** 2`` give the same bits.)"""
    lr_off = float(np.nextafter(dtype(LR), dtype(1.0)))

    def client_update_off(w, x, y):
        return example.client_update(w, x, y, lr=lr_off)

    @drx.program(placements={"clients": example.CLIENTS})
    def round_off(w, xs, ys):
        return drx.reduce_mean(drx.map_fn(client_update_off, (drx.broadcast(w), xs, ys)))

    w, xs, ys = _data(5, example.CLIENTS, example.EXAMPLES, example.FEATURES, dtype)
    py = drx.jit(round_off)(w, xs, ys)
    cpp = ref.fedavg_round(w, xs, ys)
    np.testing.assert_allclose(py, cpp, rtol=1e-5 if dtype == np.float32 else 1e-13)
    with pytest.raises(AssertionError, match="the bits differ"):
        assert_bitwise(py, cpp, "fedavg_round with lr + 1 ulp")
    other = np.float64 if dtype == np.float32 else np.float32
    with pytest.raises(AssertionError, match="dtype"):
        assert_bitwise(py.astype(other), cpp, "fedavg_round in another dtype")
