"""drx.optim from Python (issue 33): optax's gradient transformations, schedules, the server
optimizers and the federated rounds, against independent references: optax's update rules
written out in NumPy float64, the committed PyTorch fixture the C++ tests use
(tests/fixtures/torch_optim_fixture.h, made by bench/torch_optim_fixture.py), NumPy loops of
FedAvg and DiLoCo rounds (a NumPy transformer with central-difference gradients for the
language-model rounds). Eager calls are compared bitwise with jitted ones and with the same
update through the C++ API's own jit."""
import collections
import math
import os
import re

import numpy as np
import pytest

drx = pytest.importorskip("drx")
from drx import optim, tree_util  # noqa: E402

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def rng(seed=0):
    return np.random.default_rng(seed)


def flat(tree):
    return np.concatenate([np.ravel(np.asarray(l, dtype=np.float64))
                           for l in tree_util.tree_leaves(tree)])


def unflat(like, vec):
    leaves, treedef = tree_util.tree_flatten(like)
    out, i = [], 0
    for l in leaves:
        n = np.size(l)
        out.append(vec[i:i + n].reshape(np.shape(l)))
        i += n
    return treedef.unflatten(out)


def assert_bitwise(a, b, what=""):
    la, lb = tree_util.tree_leaves(a), tree_util.tree_leaves(b)
    assert tree_util.tree_structure(a) == tree_util.tree_structure(b), what
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, what
        assert x.tobytes() == y.tobytes(), f"{what}: {x} != {y}"


def params0():
    return {"b": np.array([[0.5, -1.0], [0.25, 2.0]]), "w": np.array([1.5, -0.75, 0.3])}


def grads_seq(steps, like=None, seed=1, scale=1.0):
    like = params0() if like is None else like
    n = flat(like).size
    i = np.arange(n)
    return [unflat(like, scale * np.sin(1.3 * (t + 1) + 0.7 * i) * (1 + 0.4 * i) - 0.05 * t)
            for t in range(steps)]


def run_eager(tx, params, grads):
    state = tx.init(params)
    trajectory = []
    for g in grads:
        u, state = tx.update(g, state, params)
        params = optim.apply_updates(params, u)
        trajectory.append(params)
    return trajectory, state


def run_ref(step, params, grads):
    p = flat(params)
    out = []
    for g in grads:
        p = p + step(flat(g), p)
        out.append(p.copy())
    return out


def close(got, want, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(flat(got) if not isinstance(got, np.ndarray) else got, want,
                               rtol=rtol, atol=atol)


# ---- NumPy float64 references of optax's rules (drx/optim/optimizers.h) ----------------------
def lr_at(lr, count):
    return lr(count) if callable(lr) else lr


class RefAdam:
    def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0):
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, b1, b2, eps, weight_decay
        self.m = self.v = 0.0
        self.t = 0

    def __call__(self, g, p):
        self.m = self.b1 * self.m + (1 - self.b1) * g
        self.v = self.b2 * self.v + (1 - self.b2) * g * g
        lr = lr_at(self.lr, self.t)
        self.t += 1
        mhat, vhat = self.m / (1 - self.b1 ** self.t), self.v / (1 - self.b2 ** self.t)
        return -lr * (mhat / (np.sqrt(vhat) + self.eps) + self.wd * p)


class RefYogi:
    def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-3, init=1e-6):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.m = self.v = init
        self.t = 0

    def __call__(self, g, p):
        self.m = self.b1 * self.m + (1 - self.b1) * g
        self.v = self.v - (1 - self.b2) * np.sign(self.v - g * g) * g * g
        self.t += 1
        mhat, vhat = self.m / (1 - self.b1 ** self.t), self.v / (1 - self.b2 ** self.t)
        return -self.lr * mhat / (np.sqrt(vhat) + self.eps)


class RefRmsprop:
    def __init__(self, lr, decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True,
                 centered=False, momentum=0.0, nesterov=False):
        self.__dict__.update(lr=lr, decay=decay, eps=eps, eps_in_sqrt=eps_in_sqrt,
                             centered=centered, mom=momentum, nesterov=nesterov)
        self.v, self.m, self.b = initial_scale, 0.0, 0.0

    def __call__(self, g, p):
        d = self.decay
        self.v = d * self.v + (1 - d) * g * g
        var = self.v
        if self.centered:
            self.m = d * self.m + (1 - d) * g
            var = self.v - self.m * self.m
        s = g / np.sqrt(var + self.eps) if self.eps_in_sqrt else g / (np.sqrt(var) + self.eps)
        u = -self.lr * s
        if self.mom:
            self.b = u + self.mom * self.b
            u = u + self.mom * self.b if self.nesterov else self.b
        return u


class RefAdagrad:
    def __init__(self, lr, init=0.1, eps=1e-7):
        self.lr, self.s, self.eps = lr, init, eps

    def __call__(self, g, p):
        self.s = self.s + g * g
        return -self.lr * g / np.sqrt(self.s + self.eps)


class RefSgd:
    def __init__(self, lr, momentum=0.0, nesterov=False):
        self.lr, self.mom, self.nesterov, self.b, self.t = lr, momentum, nesterov, 0.0, 0

    def __call__(self, g, p):
        lr = lr_at(self.lr, self.t)
        self.t += 1
        if not self.mom:
            return -lr * g
        self.b = g + self.mom * self.b
        return -lr * (g + self.mom * self.b if self.nesterov else self.b)


class RefReddi:
    """fedadam / fedyogi / fedadagrad on g = -delta: u = (-lr m) / (sqrt(v) + tau)."""

    def __init__(self, kind, lr, b1=0.9, b2=0.99, tau=1e-3, initial_v=0.0):
        self.kind, self.lr, self.b1, self.b2, self.tau = kind, lr, b1, b2, tau
        self.m, self.v = 0.0, initial_v

    def __call__(self, g, p):
        self.m = self.b1 * self.m + (1 - self.b1) * g
        g2 = g * g
        if self.kind == "fedadam":
            self.v = self.b2 * self.v + (1 - self.b2) * g2
        elif self.kind == "fedyogi":
            self.v = self.v - (1 - self.b2) * np.sign(self.v - g2) * g2
        else:
            self.v = self.v + g2
        return (-self.lr * self.m) / (np.sqrt(self.v) + self.tau)


# ---- the optimizers ------------------------------------------------------------------------
def test_adam_matches_numpy_eager_jit_scan_and_the_cpp_api_bitwise():
    tx = optim.adam(0.05)
    grads = grads_seq(5)
    traj, state = run_eager(tx, params0(), grads)
    ref = run_ref(RefAdam(0.05), params0(), grads)
    for got, want in zip(traj, ref):
        close(got, want)
    # optax's layout: (scale_by_adam's {"count", "mu", "nu"}, the learning rate's ()), the
    # moments in the params' structure, the count an int32 scalar.
    assert state[1] == () and sorted(state[0]) == ["count", "mu", "nu"]
    assert state[0]["count"].dtype == np.int32 and int(state[0]["count"]) == 5
    assert tree_util.tree_structure(state[0]["mu"]) == tree_util.tree_structure(params0())

    @drx.jit
    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return optim.apply_updates(p, u), s

    p, s = params0(), tx.init(params0())
    for t, g in enumerate(grads):
        p, s = step(p, s, g)
        assert_bitwise(p, traj[t], f"jit step {t}")

    def body(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        return (optim.apply_updates(p, u), s), None

    stacked = tree_util.tree_map(lambda *xs: np.stack(xs), *grads)
    (p_scan, s_scan), _ = drx.lax.scan(body, (params0(), tx.init(params0())), stacked)
    assert_bitwise(p_scan, traj[-1], "scan")
    assert_bitwise(s_scan, state, "scan state")

    # The same update through the C++ API (drx::jit over tx.update), from Python's state.
    s = tx.init(params0())
    for g in grads[:3]:
        u, s_next = tx.update(g, s, params0())
        to_cpp = optim._to_cpp
        cu, cs = drx._drx.optim_reference_update(
            tx._tx, to_cpp(g, "t", False), to_cpp(s, "t", False), to_cpp(params0(), "t", False))
        assert_bitwise(u, optim._rebuild(tree_util.tree_structure(g), cu, "t"), "C++ updates")
        assert_bitwise(s_next, optim._rebuild(tree_util.tree_structure(s), cs, "t"), "C++ state")
        s = s_next


def test_adamw_yogi_rmsprop_adagrad_and_sgd_match_numpy():
    grads = grads_seq(6)
    cases = [
        (optim.adamw(0.05, weight_decay=0.1), RefAdam(0.05, weight_decay=0.1)),
        (optim.adamw(0.01, 0.8, 0.9, 1e-6, 0.3), RefAdam(0.01, 0.8, 0.9, 1e-6, 0.3)),
        (optim.yogi(0.1), RefYogi(0.1)),
        (optim.rmsprop(0.01), RefRmsprop(0.01)),
        (optim.rmsprop(0.02, 0.8, 1e-6, initial_scale=1.0, centered=True, momentum=0.5,
                       nesterov=True),
         RefRmsprop(0.02, 0.8, 1e-6, 1.0, True, True, 0.5, True)),
        (optim.adagrad(0.1), RefAdagrad(0.1)),
        (optim.sgd(0.1, momentum=0.9, nesterov=True), RefSgd(0.1, 0.9, True)),
        (optim.sgd(0.1), RefSgd(0.1)),
    ]
    for tx, ref in cases:
        traj, _ = run_eager(tx, params0(), grads)
        for got, want in zip(traj, run_ref(ref, params0(), grads)):
            close(got, want, rtol=1e-11)


def test_yogi_moves_v_by_the_sign_of_v_minus_g_squared():
    # Large gradients, then small ones: v grows towards g^2, then shrinks (sign flips).
    p = {"w": np.array([0.0, 0.0])}
    gs = [{"w": np.array([3.0, -2.0])}] * 3 + [{"w": np.array([0.01, 0.02])}] * 3
    tx = optim.scale_by_yogi(b1=0.5, b2=0.6, eps=1e-3)
    state = tx.init(p)
    v = np.full(2, 1e-6)
    signs = []
    for g in gs:
        _, state = tx.update(g, state, p)
        g2 = g["w"] ** 2
        signs.append(np.sign(v - g2))
        v = v - 0.4 * np.sign(v - g2) * g2
        np.testing.assert_allclose(state["nu"]["w"], v, rtol=1e-14)
    assert (signs[0] < 0).all() and (signs[-1] > 0).all()


def test_torch_fixture():
    text = open(os.path.join(_ROOT, "tests", "fixtures", "torch_optim_fixture.h")).read()

    def table(name):
        body = re.search(r"\b" + name + r"\[[^=]*=\s*\{(.*?)\};", text, re.S).group(1)
        return np.array([[float(v) for v in row.split(",")]
                         for row in re.findall(r"\{([^{}]*)\}", body)])

    p0 = np.array(re.search(r"kInitialParams\[kParams\] = \{([^}]*)\}", text).group(1)
                  .split(","), dtype=np.float64)
    grads = table("kGrads")
    cases = {
        "kSgd": optim.sgd(0.1),
        "kSgdMomentum": optim.sgd(0.1, 0.9),
        "kSgdNesterov": optim.sgd(0.1, 0.9, True),
        "kAdam": optim.adam(0.05),
        "kAdamW": optim.adamw(0.05, 0.9, 0.999, 1e-8, 0.1),
        "kAdagrad": optim.adagrad(0.1, 0.1, 0.0),
        "kRmsprop": optim.rmsprop(0.01, 0.99, 1e-8, eps_in_sqrt=False),
        "kRmspropCenteredMomentum": optim.rmsprop(0.01, 0.9, 1e-8, eps_in_sqrt=False,
                                                  centered=True, momentum=0.5),
    }
    for name, tx in cases.items():
        def body(carry, g):
            p, s = carry
            u, s = tx.update(g, s, p)
            p = optim.apply_updates(p, u)
            return (p, s), p
        _, ps = drx.lax.scan(body, (p0, tx.init(p0)), grads)
        np.testing.assert_allclose(ps, table(name), rtol=1e-12, atol=1e-12, err_msg=name)


def test_clip_by_global_norm_and_chain_order():
    g = {"a": np.array([3.0, 4.0]), "b": np.array([12.0])}  # global norm 13
    p = tree_util.tree_map(np.zeros_like, g)
    for max_norm, factor in ((6.5, 0.5), (13.0, 1.0), (13.5, 1.0)):
        tx = optim.clip_by_global_norm(max_norm)
        u, s = tx.update(g, tx.init(p), p)
        assert s == ()
        close(u, flat(g) * factor, rtol=1e-15)
    # The momentum sees the clipped gradient in chain(clip, sgd), the raw one in the other order.
    grads = grads_seq(4, scale=3.0)

    def ref_clip_then_sgd(g, p, st={"b": 0.0}):
        n = np.linalg.norm(g)
        g = g if n < 1.0 else g / n
        st["b"] = g + 0.5 * st["b"]
        return -2.0 * st["b"]

    def ref_sgd_then_clip(g, p, st={"b": 0.0}):
        st["b"] = g + 0.5 * st["b"]
        u = -2.0 * st["b"]
        n = np.linalg.norm(u)
        return u if n < 1.0 else u / n

    a, _ = run_eager(optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(2.0, 0.5)),
                     params0(), grads)
    b, _ = run_eager(optim.chain(optim.sgd(2.0, 0.5), optim.clip_by_global_norm(1.0)),
                     params0(), grads)
    close(a[-1], run_ref(ref_clip_then_sgd, params0(), grads)[-1])
    close(b[-1], run_ref(ref_sgd_then_clip, params0(), grads)[-1])
    assert not np.allclose(flat(a[-1]), flat(b[-1]))


def test_building_blocks():
    p = params0()
    g = grads_seq(2)
    x, g0, g1 = flat(p), flat(g[0]), flat(g[1])

    def two_steps(tx):
        s = tx.init(p)
        u0, s = tx.update(g[0], s, p)
        u1, s = tx.update(g[1], s, p)
        return flat(u0), flat(u1), s

    u0, u1, s = two_steps(optim.identity())
    assert s == () and (u0 == g0).all() and (u1 == g1).all()
    u0, _, _ = two_steps(optim.scale(-0.5))
    close(u0, -0.5 * g0)
    u0, u1, s = two_steps(optim.trace(0.9))
    close(u1, g1 + 0.9 * g0)
    u0, u1, _ = two_steps(optim.trace(0.9, nesterov=True))
    close(u1, g1 + 0.9 * (g1 + 0.9 * g0))
    u0, _, _ = two_steps(optim.add_decayed_weights(0.1))
    close(u0, g0 + 0.1 * x)
    u0, u1, s = two_steps(optim.scale_by_learning_rate(0.5))
    assert s == ()
    close(u1, -0.5 * g1)
    u0, u1, s = two_steps(optim.scale_by_learning_rate(optim.linear_schedule(1.0, 0.0, 4)))
    close(u0, -g0), close(u1, -0.75 * g1)
    assert int(s["count"]) == 2
    u0, u1, s = two_steps(optim.scale_by_schedule(lambda c: 2.0 ** c.astype("float64")))
    close(u1, 2.0 * g1)
    u0, u1, s = two_steps(optim.scale_by_rms(0.5, 1e-8))
    close(u1, g1 / np.sqrt(0.5 * (0.5 * g0 ** 2) + 0.5 * g1 ** 2 + 1e-8))
    u0, u1, s = two_steps(optim.scale_by_stddev(0.5, 1e-8, eps_in_sqrt=False))
    m, v = 0.25 * g0 + 0.5 * g1, 0.25 * g0 ** 2 + 0.5 * g1 ** 2
    close(u1, g1 / (np.sqrt(v - m * m) + 1e-8), rtol=1e-11)
    u0, u1, s = two_steps(optim.scale_by_rss(0.0, 0.0))
    close(u1, g1 / np.sqrt(g0 ** 2 + g1 ** 2))
    u0, u1, s = two_steps(optim.scale_by_adam(0.5, 0.5, 0.0))
    close(u0, g0 / np.abs(g0))


# ---- schedules ---------------------------------------------------------------------------
def np_linear(i, e, n, b, t):
    return (i - e) * (1 - min(max(t - b, 0), n) / n) + e


def np_cosine(v, n, alpha, exponent, t):
    return v * ((1 - alpha) * (0.5 * (1 + math.cos(math.pi * min(t, n) / n))) ** exponent + alpha)


def test_schedules_at_steps_and_boundaries():
    cases = [
        (optim.constant_schedule(0.3), lambda t: 0.3),
        (optim.linear_schedule(1.0, 0.1, 4, transition_begin=2),
         lambda t: np_linear(1.0, 0.1, 4, 2, t)),
        (optim.cosine_decay_schedule(2.0, 6, alpha=0.1, exponent=2.0),
         lambda t: np_cosine(2.0, 6, 0.1, 2.0, t)),
        # Warmup 3 steps from 0.1 to 1, then cosine to 0.05 at step 10 (the whole length).
        (optim.warmup_cosine_decay_schedule(0.1, 1.0, 3, 10, end_value=0.05),
         lambda t: np_linear(0.1, 1.0, 3, 0, t) if t < 3
         else np_cosine(1.0, 7, 0.05, 1.0, t - 3)),
        # Each joined schedule counts from its own start.
        (optim.join_schedules([optim.constant_schedule(1.0), optim.linear_schedule(1.0, 0.0, 4),
                               lambda c: 0.25 + 0.0 * c], [3, 7]),
         lambda t: 1.0 if t < 3 else np_linear(1.0, 0.0, 4, 0, t - 3) if t < 7 else 0.25),
    ]
    counts = np.arange(13)
    for sched, ref in cases:
        want = np.array([ref(int(t)) for t in counts])
        host = np.array([optim.schedule_value(sched, int(t)) for t in counts])
        eager = np.array([sched(int(t)) for t in counts])
        np.testing.assert_allclose(host, want, rtol=1e-14, atol=1e-15, err_msg=sched.name)
        assert (eager == host).all()
        np.testing.assert_allclose(sched(counts), want, rtol=1e-14, atol=1e-15)
        inside = np.array([drx.jit(lambda c: sched(c))(np.int32(t)) for t in (2, 3, 7)])
        np.testing.assert_allclose(inside, want[[2, 3, 7]], rtol=1e-14, atol=1e-15)
    # Schedules as learning rates: adam with a warmup cosine schedule, and with a Python one.
    grads = grads_seq(5)
    sched = optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 5)
    traj, state = run_eager(optim.adam(sched), params0(), grads)
    ref = run_ref(RefAdam(lambda t: optim.schedule_value(sched, t)), params0(), grads)
    close(traj[-1], ref[-1])
    assert int(state[1]["count"]) == 5
    traj, _ = run_eager(optim.sgd(lambda c: 0.1 / (1.0 + c.astype("float64"))), params0(), grads)
    close(traj[-1], run_ref(RefSgd(lambda t: 0.1 / (1 + t)), params0(), grads)[-1])


# ---- the server optimizers -----------------------------------------------------------------
def test_fedopt_transformations_and_server_optimizer_match_numpy():
    grads = grads_seq(4)
    for make, kind in ((optim.fedadam, "fedadam"), (optim.fedyogi, "fedyogi")):
        traj, state = run_eager(make(0.1, 0.8, 0.9, 1e-2, 1e-4), params0(), grads)
        ref = run_ref(RefReddi(kind, 0.1, 0.8, 0.9, 1e-2, 1e-4), params0(), grads)
        close(traj[-1], ref[-1])
        assert sorted(state) == ["m", "v"]
    traj, _ = run_eager(optim.fedadagrad(0.1, 0.8, 1e-2), params0(), grads)
    close(traj[-1], run_ref(RefReddi("fedadagrad", 0.1, 0.8, 0.9, 1e-2), params0(), grads)[-1])

    # ServerOptimizer: the paper's layout, m a moment of delta (x + lr m / (sqrt(v) + tau)).
    server = optim.ServerOptimizer("fedadam", lr=0.3, beta1=0.5, beta2=0.7, eps=1e-2)
    assert server.kind == optim.ServerKind.fedadam
    p, s = params0(), server.init(params0())
    x, m, v = flat(p), 0.0, 0.0
    for delta in grads[:3]:
        p, s = server.apply(p, delta, s)
        d = flat(delta)
        m, v = 0.5 * m + 0.5 * d, 0.7 * v + 0.3 * d * d
        x = x + 0.3 * m / (np.sqrt(v) + 1e-2)
        close(p, x), close(s["m"], m), close(s["v"], v)
    fedavgm = optim.ServerOptimizer("fedavgm", lr=1.0, momentum=0.5)
    s = fedavgm.init(params0())
    assert list(s) == ["momentum"]
    p, s = fedavgm.apply(params0(), grads[0], s)
    close(p, flat(params0()) + flat(grads[0]))
    assert optim.server_kind_name(optim.parse_server_kind("fedyogi")) == "fedyogi"
    assert optim.server_kind_name("fedavgm") == "fedavgm"
    assert server.transformation().name == "fedadam"


# ---- pytrees, transformations and nesting ------------------------------------------------
Pair = collections.namedtuple("Pair", ["kernel", "bias"])


def test_state_keeps_the_params_pytree_types_through_jit_scan_and_map_fn():
    params = {"layers": [Pair(np.ones(3), np.zeros(2)), Pair(np.full(3, 2.0), np.ones(2))],
              "extra": (np.array(0.5),), "by_id": {7: np.arange(2.0), 3: np.array(-1.0)}}
    grads = [tree_util.tree_map(lambda x, t=t: np.cos(x + t), params) for t in range(3)]
    tx = optim.chain(optim.trace(0.5), optim.adam(0.1))
    state = tx.init(params)
    assert isinstance(state[1][0]["mu"]["layers"][1], Pair)
    assert tree_util.tree_structure(state[0]["trace"]) == tree_util.tree_structure(params)
    traj, state = run_eager(tx, params, grads)

    def ref_step(g, p, st={"t": 0.0}, adam=RefAdam(0.1)):
        st["t"] = g + 0.5 * st["t"]
        return adam(st["t"], p)
    close(traj[-1], run_ref(ref_step, params, grads)[-1])

    @drx.jit
    def train(p, gs):
        def body(carry, g):
            p, s = carry
            u, s = tx.update(g, s, p)
            return (optim.apply_updates(p, u), s), None
        return drx.lax.scan(body, (p, tx.init(p)), gs)[0]

    stacked = tree_util.tree_map(lambda *xs: np.stack(xs), *grads)
    p_scan, s_scan = train(params, stacked)
    assert_bitwise(p_scan, traj[-1], "scan in jit")
    assert_bitwise(s_scan, state, "scan state")

    # One Adam step per client inside a map_fn body of a program.
    K = 3
    ws = rng(2).normal(size=(K, 4))
    gs = rng(3).normal(size=(K, 4))

    @drx.program(placements={"clients": K})
    def per_client(ws, gs):
        def client(w, g):
            t = optim.adam(0.1)
            u, _ = t.update(g, t.init(w), w)
            return optim.apply_updates(w, u)
        return drx.map_fn(client, (ws, gs))

    out = drx.jit(per_client)(ws, gs)
    for k in range(K):
        np.testing.assert_allclose(out[k], ws[k] + RefAdam(0.1)(gs[k], ws[k]), rtol=1e-13)


def test_gradient_through_a_traced_learning_rate():
    # L(lr) = sum((p - lr g)^2) after one sgd step: dL/dlr = -2 sum((p - lr g) g).
    p, g = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -0.4])

    def loss(lr):
        tx = optim.sgd(lr)
        u, _ = tx.update(g, tx.init(p), p)
        return (optim.apply_updates(p, u) ** 2).sum()

    np.testing.assert_allclose(drx.grad(loss)(0.7), -2 * ((p - 0.7 * g) * g).sum(), rtol=1e-14)


def test_grad_and_vmap_through_an_update():
    tx = optim.adam(0.1)

    def f(p):
        u, _ = tx.update(p ** 3, tx.init(p), p)
        return (optim.apply_updates(p, u) ** 2).sum()

    def np_f(p):
        return ((p + RefAdam(0.1)(p ** 3, p)) ** 2).sum()

    p, h = np.array([0.5, -1.0, 2.0]), 1e-6
    numeric = [(np_f(p + h * e) - np_f(p - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(drx.grad(f)(p), numeric, rtol=1e-7)

    ps, gs = rng(1).normal(size=(4, 3)), rng(2).normal(size=(4, 3))
    out = drx.vmap(lambda p, g: optim.apply_updates(p, tx.update(g, tx.init(p), p)[0]))(ps, gs)
    for i in range(4):
        np.testing.assert_allclose(out[i], ps[i] + RefAdam(0.1)(gs[i], ps[i]), rtol=1e-13)


def test_python_defined_transformations_chain_with_drx_ones():
    def init(params):
        return ()

    def update(updates, state, params=None):
        return tree_util.tree_map(lambda u: 2.0 * u, updates), state

    double = optim.GradientTransformation(init, update, "double")
    tx = optim.chain(double, optim.sgd(0.1, 0.5))
    grads = grads_seq(3)
    traj, state = run_eager(tx, params0(), grads)
    close(traj[-1], run_ref(RefSgd(0.2, 0.5), params0(), grads)[-1])
    assert state[0] == () and "trace" in state[1][0]
    init_fn, update_fn = optim.sgd(0.1)
    assert init_fn(params0()) == ()

    @drx.jit
    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return optim.apply_updates(p, u), s
    p, s = step(params0(), tx.init(params0()), grads[0])
    assert_bitwise(p, traj[0])
    with pytest.raises(drx.Error,
                       match=r"fedavg_round: client_tx: chain\(double, sgd\) is made of Python"):
        optim.fedavg_round(lambda p, b: 0.0, tx, optim.sgd(1.0), 2)


def test_errors_name_the_function():
    p = params0()
    g = grads_seq(1)[0]
    adam_state = optim.adam(0.1).init(p)
    cases = [
        # Wrong state structure.
        (lambda: optim.sgd(0.1, 0.9).update(g, adam_state, p),
         "sgd: trace: the state of structure"),
        (lambda: optim.adam(0.1).update(g, (), p), r"adam: chain\(scale_by_adam, "),
        (lambda: optim.adam(0.1).update(g, optim.adam(0.1).init({"w": p["w"]}), p),
         r"adam: .*state\[\"mu\"\]"),
        (lambda: optim.clip_by_global_norm(1.0).update(g, adam_state, p),
         "clip_by_global_norm: expected the empty state"),
        # Mismatched trees.
        (lambda: optim.adam(0.1).update({"w": g["w"]}, adam_state, p), "adam: params of structure"),
        (lambda: optim.apply_updates(p, {"w": g["w"]}), "apply_updates: updates of structure"),
        (lambda: optim.apply_updates(p, tree_util.tree_map(lambda x: x.astype(np.float32), g)),
         r"apply_updates: updates\[\"b\"\] is f32"),
        (lambda: optim.adamw(0.1).update(g, optim.adamw(0.1).init(p)),
         "adamw: .*add_decayed_weights: params of structure"),
        (lambda: optim.sgd(0.1).update({"b": np.arange(4).reshape(2, 2), "w": g["w"]}, (), None),
         "sgd: grads"),
        # Bad hyperparameters.
        (lambda: optim.adam(0.1, b1=1.5), r"adam: scale_by_adam: b1 must be in \[0, 1\)"),
        (lambda: optim.sgd(-1.0), "sgd: the learning rate must be finite and >= 0"),
        (lambda: optim.sgd(0.1, momentum=-0.5), "sgd: momentum"),
        (lambda: optim.sgd("fast"), "sgd: the learning rate must be a number, got str"),
        (lambda: optim.rmsprop(0.1, decay=2.0), "rmsprop: scale_by_rms: decay"),
        (lambda: optim.clip_by_global_norm(0.0), "clip_by_global_norm: max_norm must be"),
        (lambda: optim.fedadam(0.1, b2=1.0), "fedadam: b2"),
        (lambda: optim.linear_schedule(1.0, 0.0, -1), "linear_schedule: transition_steps"),
        (lambda: optim.linear_schedule(1.0, 0.0, 2.5), "linear_schedule: transition_steps must "
                                                       "be an integer"),
        (lambda: optim.join_schedules([optim.constant_schedule(1.0)], [3]),
         "join_schedules: 1 schedules need 0 boundaries"),
        (lambda: optim.warmup_cosine_decay_schedule(0.0, 1.0, 5, 5),
         "warmup_cosine_decay_schedule: decay_steps"),
        (lambda: optim.schedule_value(optim.constant_schedule(1.0), -1), "schedule_value: count"),
        (lambda: optim.scale_by_schedule(3.0), "scale_by_schedule: expected a schedule"),
        (lambda: optim.adam(lambda c: c).update(g, optim.adam(lambda c: c).init(p), p),
         "adam: .*the schedule returned i32"),
        (lambda: optim.chain(optim.sgd(0.1), "adam"), "chain: part 1 is a str"),
        (lambda: optim.parse_server_kind("fedsgd"), "unknown server optimizer 'fedsgd'"),
        (lambda: optim.ServerOptimizer("fedsgd"), "unknown server optimizer"),
        (lambda: optim.fedavg_round(lambda p, b: 0.0, optim.sgd(0.1), optim.sgd(1.0), 0),
         "fedavg_round: cohort must be >= 1"),
        (lambda: optim.fedavg_round(lambda p, b: 0.0, optim.sgd(0.1), optim.sgd(1.0), 2,
                                    full_steps=1), "fedavg_round: full_steps 1 without a "
                                                   "step_weight"),
        (lambda: optim.dp_round_state((), math.inf, np.zeros(2, np.uint32), "f64",
                                      optim.DpSpec(noise_multiplier=1.0)),
         "dp_round_state: clip inf with noise"),
        (lambda: optim.dp_round_state((), 1.0, np.zeros(3, np.uint32), "f64"),
         "dp_round_state: the key must be u32"),
    ]
    for fn, pattern in cases:
        with pytest.raises(drx.Error, match=pattern):
            fn()


# ---- the federated round -------------------------------------------------------------------
K, STEPS, B, D = 3, 2, 4, 3


def lin_loss(p, batch):
    r = batch["x"] @ p["w"] + p["b"] - batch["y"]
    return (r * r).mean()


def np_lin_grad(p, x, y):
    r = x @ p["w"] + p["b"] - y
    return float((r * r).mean()), {"b": 2 * r.mean(), "w": 2 * x.T @ r / len(y)}


def round_data(seed=0):
    r = rng(seed)
    params = {"b": np.array(0.1), "w": r.normal(size=D)}
    data = {"x": r.normal(size=(K, STEPS, B, D)), "y": r.normal(size=(K, STEPS, B))}
    return params, data, np.array([1.0, 2.0, 0.5])


def np_client(p, batches, lr, mom):
    p = {k: np.array(v, dtype=np.float64) for k, v in p.items()}
    buf = {k: 0.0 for k in p}
    losses = []
    for x, y in batches:
        l, g = np_lin_grad(p, x, y)
        losses.append(l)
        for k in p:
            buf[k] = g[k] + mom * buf[k]
            p[k] = p[k] - lr * buf[k]
    return p, float(np.mean(losses))


def np_fedavg(params, data, weights, lr=0.1, mom=0.5):
    deltas, losses = [], []
    for k in range(K):
        pk, lk = np_client(params, zip(data["x"][k], data["y"][k]), lr, mom)
        deltas.append({n: pk[n] - params[n] for n in params})
        losses.append(lk)
    w = weights / weights.sum()
    delta = {n: sum(w[k] * deltas[k][n] for k in range(K)) for n in params}
    return delta, float((w * np.array(losses)).sum())


def test_fedavg_round_with_a_python_loss_matches_numpy():
    params, data, weights = round_data()
    rnd = optim.fedavg_round(lin_loss, optim.sgd(0.1, 0.5), optim.sgd(1.0), K)
    clients = {"data": data, "weights": weights}
    out = rnd(params, optim.sgd(1.0).init(params), clients)
    delta, loss = np_fedavg(params, data, weights)
    close(out["params"], flat({n: params[n] + delta[n] for n in params}), rtol=1e-13)
    np.testing.assert_allclose(out["loss"], loss, rtol=1e-13)
    assert out["state"] == ()
    # Eager (the round's own jit) and inside the caller's jit: the same bits.
    assert_bitwise(drx.jit(rnd)(params, (), clients), out, "jit")

    # A server optimizer: fedadam on the pseudo-gradient -delta, state {"m", "v"}.
    server = optim.fedadam(0.05, 0.9, 0.99, 1e-3)
    rnd = optim.fedavg_round(lin_loss, optim.sgd(0.1, 0.5), server, K)
    state = server.init(params)
    ref = RefReddi("fedadam", 0.05, 0.9, 0.99, 1e-3)
    x = flat(params)
    for _ in range(2):
        out = rnd(params, state, clients)
        delta, _ = np_fedavg(params, data, weights)
        x = x + ref(-flat(delta), x)
        params, state = out["params"], out["state"]
        close(params, x, rtol=1e-12)
    close(state["m"], ref.m, rtol=1e-12)
    # A ServerOptimizer works as the server too, with its own layout.
    rnd = optim.fedavg_round(lin_loss, optim.sgd(0.1, 0.5), optim.ServerOptimizer("fedavg"), K)
    out = rnd(*round_data()[:1], (), clients)
    close(out["params"], flat(round_data()[0]) + flat(np_fedavg(*round_data())[0]), rtol=1e-13)


def test_fedavg_round_options_prepare_step_weight_metrics_aggregate_and_client_state():
    r = rng(4)
    params = {"b": np.array(0.0), "w": r.normal(size=D)}
    shared = {"x_all": r.normal(size=(20, D)), "y_all": r.normal(size=20)}
    idx = r.integers(0, 20, size=(K, STEPS, B)).astype(np.int32)
    mask = (r.random(size=(K, STEPS, B)) < 0.7).astype(np.float64)
    mask[1, 0] = 0.0  # client 1's first step is empty: skipped, momentum included
    weights = np.array([1.0, 1.0, 3.0])

    def prepare(sh, data):
        return {"m": data["mask"], "x": sh["x_all"][data["idx"]], "y": sh["y_all"][data["idx"]]}

    def masked_loss(p, b):
        res = b["x"] @ p["w"] + p["b"] - b["y"]
        return (b["m"] * res * res).sum() / drx.Tracer(drx._drx.maximum(
            b["m"].sum()._value, drx._drx.scalar_like(b["m"].sum()._value, 1.0)))

    def metrics(p, start, batches, loss):
        return {"loss": loss, "moved": ((p["w"] - start["w"]) ** 2).sum()}

    def aggregate(placed):
        return drx.reduce_sum(placed)

    tx = optim.sgd(0.2, 0.5)
    client_states = tree_util.tree_map(lambda x: np.stack([x] * K), tx.init(params))
    rnd = optim.fedavg_round(masked_loss, tx, optim.sgd(1.0), K, prepare=prepare,
                             step_weight=lambda b: b["m"].sum(), metrics=metrics,
                             client_state=True, aggregate=aggregate, name="my_round")
    clients = {"data": {"idx": idx, "mask": mask}, "weights": weights, "state": client_states}
    out = rnd(params, (), clients, shared)

    deltas, losses, moved, bufs = [], [], [], []
    for k in range(K):
        p = {n: np.array(v) for n, v in params.items()}
        buf = {n: 0.0 for n in p}
        loss_sum = count = 0.0
        for t in range(STEPS):
            m = mask[k, t]
            n = m.sum()
            if n == 0:
                continue
            x, y = shared["x_all"][idx[k, t]], shared["y_all"][idx[k, t]]
            res = x @ p["w"] + p["b"] - y
            loss_sum += (m * res * res).sum() / max(n, 1) * max(n, 1)
            count += n
            g = {"b": 2 * (m * res).sum() / n, "w": 2 * x.T @ (m * res) / n}
            for q in p:
                buf[q] = g[q] + 0.5 * buf[q]
                p[q] = p[q] - 0.2 * buf[q]
        deltas.append({q: p[q] - params[q] for q in p})
        losses.append(loss_sum / max(count, 1))
        moved.append(((p["w"] - params["w"]) ** 2).sum())
        bufs.append(buf)
    w = weights / weights.sum()
    want = {q: params[q] + sum(w[k] * deltas[k][q] for k in range(K)) for q in params}
    close(out["params"], flat(want), rtol=1e-13)
    np.testing.assert_allclose(out["loss"], (w * np.array(losses)).sum(), rtol=1e-13)
    np.testing.assert_allclose(out["metrics"]["moved"], moved, rtol=1e-12)
    np.testing.assert_allclose(out["metrics"]["loss"], losses, rtol=1e-13)
    trace = out["client_state"][0]["trace"]
    np.testing.assert_allclose(trace["w"], np.stack([b["w"] for b in bufs]), rtol=1e-13)
    # The aggregation given is the default one: the same bits without it.
    plain = optim.fedavg_round(masked_loss, tx, optim.sgd(1.0), K, prepare=prepare,
                               step_weight=lambda b: b["m"].sum(), client_state=True)
    assert_bitwise(plain(params, (), clients, shared)["params"], out["params"])
    # Errors inside the user's functions and of the inputs name the round.
    with pytest.raises(drx.Error, match="my_round: clients must be the dict"):
        rnd(params, (), {"data": clients["data"], "weights": weights}, shared)
    with pytest.raises(drx.Error, match="my_round: weights must be floating"):
        rnd(params, (), dict(clients, weights=np.ones(K, np.int32)), shared)


def test_fedavg_round_body_in_a_program_and_local_steps():
    params, data, weights = round_data()
    tx, server = optim.sgd(0.1, 0.5), optim.sgd(1.0)

    @drx.program(placements={"clients": K}, in_placements=["", "clients", "clients"])
    def my_round(p, d, w):
        return optim.fedavg_round_body(lin_loss, tx, server, K, p, (),
                                       {"data": d, "weights": w})

    got = drx.jit(my_round)(params, data, weights)
    want = optim.fedavg_round(lin_loss, tx, server, K)(params, (), {"data": data,
                                                                    "weights": weights})
    assert_bitwise(got, want, "fedavg_round_body")
    with pytest.raises(drx.Error, match="fedavg_round_body works on traced values"):
        optim.fedavg_round_body(lin_loss, tx, server, K, params, (), {})

    batches = {"x": data["x"][0], "y": data["y"][0]}
    r = optim.local_steps(lin_loss, tx, params, tx.init(params), batches)
    p_ref, l_ref = np_client(params, zip(batches["x"], batches["y"]), 0.1, 0.5)
    close(r.params, flat(p_ref), rtol=1e-13)
    np.testing.assert_allclose(r.loss, l_ref, rtol=1e-13)
    assert isinstance(r, optim.LocalSteps) and "trace" in r.opt_state[0]


def test_dp_round_state_and_a_dp_round_without_noise():
    params, data, _ = round_data()
    key = np.array([0, 42], np.uint32)
    state = optim.dp_round_state((), 1e9, key, "f64", optim.DpSpec(expected_cohort=K))
    assert state["dp"]["clip"].dtype == np.float64 and state["server"] == ()
    dp = optim.DpSpec(noise_multiplier=0.0, expected_cohort=K)
    rnd = optim.fedavg_round(lin_loss, optim.sgd(0.1, 0.5), optim.sgd(1.0), K, dp=dp)
    ones = np.ones(K)
    out = rnd(params, state, {"data": data, "weights": ones})
    delta, _ = np_fedavg(params, data, ones)
    close(out["params"], flat({n: params[n] + delta[n] for n in params}), rtol=1e-12)
    assert out["state"]["dp"]["key"].tolist() != key.tolist()
    assert out["state"]["dp"]["clip"] == 1e9


# ---- the C++ core's MLP round --------------------------------------------------------------
def np_mlp_grad(p, x, y, m):
    z1 = x @ p["layer0"]["w"] + p["layer0"]["b"]
    a1 = np.maximum(z1, 0)
    z2 = a1 @ p["layer1"]["w"] + p["layer1"]["b"]
    lse = np.log(np.exp(z2 - z2.max(1, keepdims=True)).sum(1)) + z2.max(1)
    ce = lse - z2[np.arange(len(y)), y]
    n = max(m.sum(), 1.0)
    dz2 = (np.exp(z2 - lse[:, None]) - np.eye(z2.shape[1])[y]) * m[:, None] / n
    dz1 = (dz2 @ p["layer1"]["w"].T) * (z1 > 0)
    g = {"layer0": {"b": dz1.sum(0), "w": x.T @ dz1}, "layer1": {"b": dz2.sum(0), "w": a1.T @ dz2}}
    return (m * ce).sum() / n, g, (m * (z2.argmax(1) == y)).sum()


def test_mlp_round_on_both_data_layouts_and_evaluate_fn_match_numpy():
    r = rng(5)
    Kc, S, Bc, N = 2, 2, 3, 12
    params = {"layer0": {"b": r.normal(size=4) * 0.1, "w": r.normal(size=(3, 4))},
              "layer1": {"b": np.zeros(2), "w": r.normal(size=(4, 2))}}
    x_all, y_all = r.normal(size=(N, 3)), r.integers(0, 2, size=N).astype(np.int32)
    idx = r.integers(0, N, size=(Kc, S, Bc)).astype(np.int32)
    mask = np.ones((Kc, S, Bc))
    mask[0, 1, 2] = 0.0
    mask[1, 1] = 0.0  # an empty step: skipped
    weights = np.array([3.0, 1.0])
    spec = optim.RoundSpec(client=optim.ClientSgd(lr=0.5, momentum=0.3), cohort=Kc, steps=S,
                           batch=Bc)
    out = optim.fedavg_round(spec)(params, (), x_all, y_all, idx, mask, weights)
    x_rows = x_all[idx].reshape(Kc, S * Bc, 3)
    y_rows = y_all[idx].reshape(Kc, S * Bc)
    same = optim.fedavg_round_on_client_data(spec)(params, (), x_rows, y_rows, mask, weights)
    assert_bitwise(same, out, "fedavg_round_on_client_data")

    deltas, losses = [], []
    for k in range(Kc):
        p = tree_util.tree_map(np.array, params)
        buf = tree_util.tree_map(np.zeros_like, params)
        loss_sum = count = 0.0
        for t in range(S):
            n = mask[k, t].sum()
            if n == 0:
                continue
            ids = idx[k, t]
            l, g, _ = np_mlp_grad(p, x_all[ids], y_all[ids], mask[k, t])
            loss_sum, count = loss_sum + l * max(n, 1), count + n
            buf = tree_util.tree_map(lambda gi, bi: gi + 0.3 * bi, g, buf)
            p = tree_util.tree_map(lambda pi, bi: pi - 0.5 * bi, p, buf)
        deltas.append(flat(p) - flat(params))
        losses.append(loss_sum / max(count, 1))
    w = weights / weights.sum()
    close(out["params"], flat(params) + w[0] * deltas[0] + w[1] * deltas[1], rtol=1e-12)
    np.testing.assert_allclose(out["loss"], (w * np.array(losses)).sum(), rtol=1e-13)

    ev = optim.evaluate_fn(Kc)(params, x_all, y_all, idx, mask)
    ce = correct = 0.0
    for k in range(Kc):
        for t in range(S):
            l, _, c = np_mlp_grad(params, x_all[idx[k, t]], y_all[idx[k, t]], mask[k, t])
            ce, correct = ce + l * max(mask[k, t].sum(), 1), correct + c
    np.testing.assert_allclose(ev["loss"], ce / mask.sum(), rtol=1e-13)
    np.testing.assert_allclose(ev["accuracy"], correct / mask.sum(), rtol=1e-14)
    with pytest.raises(drx.Error, match="fedavg_round: idx"):
        optim.fedavg_round(spec)(params, (), x_all, y_all, idx[:, :1], mask[:, :1], weights)


# ---- the transformer rounds: DiLoCo and FedAvg, against a NumPy transformer ----------------
MODEL = {"vocab": 5, "context": 3, "layers": 1, "width": 4, "heads": 2, "mlp": 6}
_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def np_lm_loss(p, windows):
    Bw, t = windows.shape[0], windows.shape[1] - 1
    d, H = MODEL["width"], MODEL["heads"]
    dh = d // H
    ids, targets = windows[:, :t], windows[:, 1:]
    x = p["wte"][ids] + p["wpe"][:t]
    for layer in range(MODEL["layers"]):
        b = {k: v[layer] for k, v in p["blocks"].items()}
        qkv = np_layer_norm(x, b["ln1_g"], b["ln1_b"]) @ b["qkv_w"] + b["qkv_b"]

        def heads(z):
            return z.reshape(Bw, t, H, dh).transpose(0, 2, 1, 3)
        q = heads(qkv[..., :d] / math.sqrt(dh))
        k, v = heads(qkv[..., d:2 * d]), heads(qkv[..., 2 * d:])
        s = np.where(np.tril(np.ones((t, t), bool)), q @ k.transpose(0, 1, 3, 2), -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        h = x + (a @ v).transpose(0, 2, 1, 3).reshape(Bw, t, d) @ b["attn_w"] + b["attn_b"]
        f = np_layer_norm(h, b["ln2_g"], b["ln2_b"]) @ b["fc_w"] + b["fc_b"]
        x = h + (0.5 * f * (1 + _erf(f / math.sqrt(2)))) @ b["out_w"] + b["out_b"]
    logits = np_layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    return (lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]).mean()


def central_grad(f, p, h=1e-5):
    leaves, treedef = tree_util.tree_flatten(p)
    leaves = [np.array(l, dtype=np.float64) for l in leaves]
    grads = []
    for leaf in leaves:
        g, lf = np.zeros(leaf.size), leaf.reshape(-1)
        for i in range(leaf.size):
            old = lf[i]
            lf[i] = old + h
            up = f(treedef.unflatten(leaves))
            lf[i] = old - h
            down = f(treedef.unflatten(leaves))
            lf[i] = old
            g[i] = (up - down) / (2 * h)
        grads.append(g.reshape(leaf.shape))
    return treedef.unflatten(grads)


def lm_params(seed=6):
    r = rng(seed)
    L, d, m, V, T = (MODEL[k] for k in ("layers", "width", "mlp", "vocab", "context"))
    shapes = {"attn_b": (L, d), "attn_w": (L, d, d), "fc_b": (L, m), "fc_w": (L, d, m),
              "ln1_b": (L, d), "ln1_g": (L, d), "ln2_b": (L, d), "ln2_g": (L, d),
              "out_b": (L, d), "out_w": (L, m, d), "qkv_b": (L, 3 * d), "qkv_w": (L, d, 3 * d)}
    blocks = {k: r.normal(size=s) * 0.4 + (1.0 if k.endswith("_g") else 0.0)
              for k, s in shapes.items()}
    return {"blocks": blocks, "lnf_b": r.normal(size=d) * 0.1, "lnf_g": 1 + 0.1 * r.normal(size=d),
            "wpe": r.normal(size=(T, d)) * 0.5, "wte": r.normal(size=(V, d)) * 0.5}


def np_lm_client(p, windows, lr, mom, buf=None):
    buf = tree_util.tree_map(np.zeros_like, p) if buf is None else buf
    losses = []
    for w in windows:
        losses.append(np_lm_loss(p, w))
        g = central_grad(lambda q: np_lm_loss(q, w), p)
        buf = tree_util.tree_map(lambda gi, bi: gi + mom * bi, g, buf)
        p = tree_util.tree_map(lambda pi, bi: pi - lr * bi, p, buf)
    return p, float(np.mean(losses)), buf


def test_lm_rounds_diloco_and_evaluation_match_a_numpy_transformer():
    params = lm_params()
    Kw, S, Bw = 2, 2, 2
    windows = rng(7).integers(0, MODEL["vocab"], size=(Kw, S, Bw, MODEL["context"] + 1))
    windows = windows.astype(np.int32)
    spec = optim.LmRoundSpec(model=MODEL, client=optim.LocalOptimizer("sgd", lr=0.3, momentum=0.5),
                             cohort=Kw, steps=S, batch=Bw)

    # The held-out evaluation: the forward pass agrees with NumPy's.
    ev = optim.lm_evaluate_fn(MODEL, Kw)(params, windows[:, 0], np.array([[1.0, 1.0], [1.0, 0.0]]))
    want = sum(np_lm_loss(params, windows[k, 0, i:i + 1]) for k, i in ((0, 0), (0, 1), (1, 0)))
    np.testing.assert_allclose(ev["loss_sum"], want * MODEL["context"], rtol=1e-12)
    assert ev["count"] == 3 * MODEL["context"]
    if hasattr(getattr(drx, "nn", None), "TransformerConfig"):  # drx.nn's config works as well
        config = drx.nn.TransformerConfig(**MODEL)
        mask = np.array([[1.0, 1.0], [1.0, 0.0]])
        assert_bitwise(optim.lm_evaluate_fn(config, Kw)(params, windows[:, 0], mask), ev)

    # Two DiLoCo rounds: the workers continue their own inner momentum; outer Nesterov.
    outer = optim.OuterNesterov(lr=0.7, momentum=0.9)
    rnd = optim.diloco_round(spec, outer)
    outer_state = outer.transformation().init(params)
    inner = optim.diloco_inner_init(spec, params)
    assert inner[0]["trace"]["wte"].shape == (Kw,) + params["wte"].shape
    p_ref, bufs, outer_buf = params, [None] * Kw, tree_util.tree_map(np.zeros_like, params)
    p = params
    for _ in range(2):
        out = rnd(p, outer_state, inner, windows)
        p, outer_state, inner = out["params"], out["state"], out["inner"]
        ends, losses = [], []
        for k in range(Kw):
            pk, lk, bufs[k] = np_lm_client(p_ref, windows[k], 0.3, 0.5, bufs[k])
            ends.append(pk)
            losses.append(lk)
        g = tree_util.tree_map(lambda p0, *pk: p0 - np.mean(pk, axis=0), p_ref, *ends)
        outer_buf = tree_util.tree_map(lambda b, gi: 0.9 * b + gi, outer_buf, g)
        p_ref = tree_util.tree_map(lambda x, gi, b: x - 0.7 * (gi + 0.9 * b), p_ref, g, outer_buf)
        np.testing.assert_allclose(flat(p), flat(p_ref), rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(out["loss"], np.mean(losses), rtol=1e-9)
    np.testing.assert_allclose(flat(inner[0]["trace"]), flat(tree_util.tree_map(
        lambda *b: np.stack(b), *bufs)), rtol=1e-6, atol=1e-8)

    # A FedAvg round of the language model, weighted, with the server's fedavg step.
    fed = optim.lm_fedavg_round(optim.LmRoundSpec(
        model=MODEL, client=optim.LocalOptimizer("sgd", lr=0.3), cohort=Kw, steps=S, batch=Bw))
    weights = np.array([1.0, 3.0])
    out = fed(params, (), windows, weights)
    ends = [np_lm_client(params, windows[k], 0.3, 0.0)[0] for k in range(Kw)]
    want = tree_util.tree_map(lambda p0, a, b: p0 + 0.25 * (a - p0) + 0.75 * (b - p0),
                              params, *ends)
    np.testing.assert_allclose(flat(out["params"]), flat(want), rtol=1e-7, atol=1e-8)


def test_every_public_optim_op_has_a_documented_python_name():
    for name, _, _ in drx._drx.public_ops():
        if name.startswith("drx::optim::"):
            short = name[len("drx::optim::"):]
            assert hasattr(optim, short), f"drx.optim has no {short}"
            assert getattr(optim, short).__doc__, f"drx.optim.{short} has no docstring"
    for name in optim.__all__:
        assert getattr(optim, name).__doc__, name
