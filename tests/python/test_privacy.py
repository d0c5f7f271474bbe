"""drx.privacy: DP-FedAvg's clipping, noise, noisy mean and adaptive clipping against NumPy
float64 written here (and central differences for the gradient of clipping), on pytrees,
eagerly, under jit, vmap and in a map_fn round; the RDP accountant against the values TF
Privacy and dp_accounting publish (as tests/privacy_accountant_test.cpp and
tests/dp_accounting_test.cpp cite them) and against the binomial sum written out; errors that
name the function."""
import math

import numpy as np
import pytest

drx = pytest.importorskip("drx")
dp = drx.privacy
rnd = drx.random


def rng(seed=0):
    return np.random.default_rng(seed)


def global_norm(tree):
    return math.sqrt(sum(float(np.sum(np.asarray(l, np.float64) ** 2))
                         for l in drx.tree_util.tree_leaves(tree)))


def tree_allclose(got, want, rtol):
    g, gt = drx.tree_util.tree_flatten(got)
    w, wt = drx.tree_util.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for a, b in zip(g, w):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


def make_tree(seed=0, scale=1.0):
    r = rng(seed)
    return {"w": r.normal(size=(3, 2)) * scale, "b": [r.normal(size=4) * scale,
                                                      np.float64(r.normal() * scale)]}


# ---- clipping -------------------------------------------------------------------------------
def test_clipping_scales_a_tree_above_the_clip_to_exactly_the_clip():
    tree = make_tree(scale=3.0)
    n = global_norm(tree)
    assert n > 2.0
    for clipped, norm in (dp.clip_by_l2_norm(tree, 2.0),
                          drx.jit(dp.clip_by_l2_norm)(tree, 2.0),
                          drx.jit(lambda t: dp.clip_by_l2_norm(t, 2.0))(tree)):
        assert norm == pytest.approx(n, rel=1e-15)
        tree_allclose(clipped, drx.tree_util.tree_map(lambda l: l * (2.0 / n), tree), 1e-14)
        assert global_norm(clipped) == pytest.approx(2.0, rel=1e-15)
    c = dp.clip_by_l2_norm(tree, 2.0)
    assert c.update is c[0] and c.norm is c[1]  # a Clipped(update, norm)


def test_clipping_leaves_a_tree_within_the_clip_unchanged():
    tree = make_tree(1)
    n = global_norm(tree)
    for clip in (n * 1.01, 10, float("inf"), np.float64(n * 2)):
        clipped, norm = dp.clip_by_l2_norm(tree, clip)
        assert norm == pytest.approx(n, rel=1e-15)
        for a, b in zip(drx.tree_util.tree_leaves(clipped), drx.tree_util.tree_leaves(tree)):
            np.testing.assert_array_equal(a, b)
    zero = {"a": np.zeros(3), "b": np.zeros((2, 2))}
    clipped, norm = dp.clip_by_l2_norm(zero, 1.0)
    assert norm == 0 and all(np.all(l == 0) for l in drx.tree_util.tree_leaves(clipped))
    # A clip of 0 zeroes the update; a traced negative clip clips as 0 rather than flipping it.
    assert all(np.all(l == 0) for l in drx.tree_util.tree_leaves(dp.clip_by_l2_norm(tree, 0.0)[0]))
    neg = drx.jit(lambda t, c: dp.clip_by_l2_norm(t, c).update)(tree, -1.0)
    assert all(np.all(l == 0) for l in drx.tree_util.tree_leaves(neg))


def test_clipping_keeps_float32_leaves_float32():
    x = {"a": rng(2).normal(size=5).astype(np.float32) * 10}
    clipped, norm = dp.clip_by_l2_norm(x, 1.0)
    assert clipped["a"].dtype == np.float32
    n = np.linalg.norm(x["a"].astype(np.float64))
    np.testing.assert_allclose(clipped["a"], x["a"] / n, rtol=1e-6)
    assert float(norm) == pytest.approx(n, rel=1e-6)


def test_per_example_clipping_under_vmap_is_a_loop():
    batch = rng(3).normal(size=(6, 4)) * np.array([[0.1], [1], [3], [0.5], [2], [5]])
    got_u, got_n = drx.vmap(lambda e: dp.clip_by_l2_norm(e, 1.0))(batch)
    for i, e in enumerate(batch):
        n = np.linalg.norm(e)
        np.testing.assert_allclose(got_n[i], n, rtol=1e-15)
        np.testing.assert_allclose(got_u[i], e * min(1.0, 1.0 / n), rtol=1e-14)


@pytest.mark.parametrize("scale", [0.2, 3.0])  # within the clip, and above it
def test_gradient_through_clipping_matches_central_differences(scale):
    x0 = rng(4).normal(size=5) * scale
    w = rng(5).normal(size=5)

    def loss(x):
        return (dp.clip_by_l2_norm({"x": x}, 1.0).update["x"] * w).sum()

    g = drx.grad(loss)(x0)
    eps = 1e-6
    fd = np.array([(drx.jit(loss)(x0 + eps * e) - drx.jit(loss)(x0 - eps * e)) / (2 * eps)
                   for e in np.eye(5)])
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    # By hand: below the clip the identity's; above it, C (w - x (x.w) / |x|^2) / |x|.
    n = np.linalg.norm(x0)
    want = w if n <= 1.0 else (w - x0 * (x0 @ w) / n**2) / n
    np.testing.assert_allclose(g, want, rtol=1e-12)


# ---- noise and the noisy mean ---------------------------------------------------------------
def test_gaussian_noise_is_normal_draws_from_split_keys():
    like = {"b": np.zeros((2, 3), np.float32), "a": np.zeros(4)}  # leaves in order a, b
    k = rnd.key(17)
    noise = dp.gaussian_noise_like(like, k, 2.5)
    keys = rnd.split(k, 2)
    assert noise["a"].dtype == np.float64 and noise["b"].dtype == np.float32
    np.testing.assert_array_equal(noise["a"], rnd.normal(keys[0], (4,), np.float64) * 2.5)
    np.testing.assert_array_equal(noise["b"], rnd.normal(keys[1], (2, 3)) * np.float32(2.5))
    traced = drx.jit(lambda k, s: dp.gaussian_noise_like(like, k, s))(k, 2.5)
    np.testing.assert_array_equal(traced["a"], noise["a"])


def test_gaussian_noise_has_the_standard_deviation_asked_for():
    n = 100_000
    z = dp.gaussian_noise_like([np.zeros(n)], rnd.key(3), 0.7)[0]
    assert abs(z.mean()) < 6 * 0.7 / math.sqrt(n)
    assert abs(z.var() - 0.49) < 6 * 0.49 * math.sqrt(2 / n)


def test_noisy_mean_is_numpys():
    total = make_tree(6, scale=4.0)
    k = rnd.key(8)
    # No noise: the sum over the expected cohort.
    tree_allclose(dp.noisy_mean(total, k, 0.0, 1.0, 8), drx.tree_util.tree_map(
        lambda l: np.asarray(l) / 8.0, total), 1e-15)
    # With noise: (sum + z C N(0, 1)) / m, the normals those of gaussian_noise_like.
    z, c, m = 1.1, 0.5, 12.0
    leaves, tree = drx.tree_util.tree_flatten(total)
    keys = rnd.split(k, len(leaves))
    want = [(np.asarray(l) + rnd.normal(keys[i], np.shape(l), np.float64) * (z * c)) / m
            for i, l in enumerate(leaves)]
    want = drx.tree_util.tree_unflatten(tree, want)
    tree_allclose(dp.noisy_mean(total, k, z, c, m), want, 1e-15)
    tree_allclose(drx.jit(lambda t, k, c: dp.noisy_mean(t, k, z, c, m))(total, k, c), want, 1e-15)
    # Its standard deviation over many coordinates: z C / m.
    many = dp.noisy_mean([np.zeros(100_000)], rnd.key(9), z, c, m)[0]
    sd = z * c / m
    assert abs(many.mean()) < 6 * sd / math.sqrt(1e5)
    assert abs(many.var() - sd**2) < 6 * sd**2 * math.sqrt(2 / 1e5)


def test_adapted_clip_is_the_geometric_rule():
    k = rnd.key(4)
    gamma, eta, m = 0.5, 0.2, 10.0
    for count in (0, 3, 5, 10):
        want = 1.5 * math.exp(-eta * (count / m - gamma))
        assert dp.adapted_clip(1.5, count, k, m) == pytest.approx(want, rel=1e-15)
        assert dp.adapted_clip(1.5, np.float64(count), k, m, target_quantile=gamma,
                               learning_rate=eta) == pytest.approx(want, rel=1e-15)
    # With noise on the count: count + sigma N(0, 1), the normal drawn with the key itself.
    sigma = 2.0
    noisy = count + sigma * float(rnd.normal(k, (), np.float64))
    want = 1.5 * math.exp(-0.3 * (noisy / m - 0.7))
    got = dp.adapted_clip(1.5, count, k, m, target_quantile=0.7, learning_rate=0.3,
                          count_noise=sigma)
    assert got == pytest.approx(want, rel=1e-14)
    settings = dp.AdaptiveClipping(target_quantile=0.7, learning_rate=0.3, count_noise=sigma)
    assert drx.jit(lambda c, n, k: dp.adapted_clip(c, n, k, m, **settings._asdict()))(
        1.5, np.int32(count), k) == pytest.approx(want, rel=1e-14)


def test_update_noise_multiplier_is_andrew_et_al():
    for z, s in ((1.0, 5.0), (0.8, 0.5), (2.0, 100.0)):
        want = (z**-2 - (2 * s) ** -2) ** -0.5
        assert dp.update_noise_multiplier(z, s) == pytest.approx(want, rel=1e-15)


def test_a_dp_fedavg_round_in_map_fn_is_numpys():
    clients, clip, z = 4, 1.0, 0.5
    w0 = rng(10).normal(size=3)
    xs = rng(11).normal(size=(clients, 3)) * np.array([[0.1], [1.0], [2.0], [0.3]])

    @drx.program(placements={"clients": clients})
    def dp_round(w, xs, key):
        def client(w, x):
            clipped, norm = dp.clip_by_l2_norm({"delta": x - w}, clip)
            return clipped, (norm <= clip).astype(np.float64)
        updates, unclipped = drx.map_fn(client, (drx.broadcast(w), xs))
        k_noise, k_count = rnd.split(key)
        mean = dp.noisy_mean(drx.reduce_sum(updates), k_noise, z, clip, clients)
        new_clip = dp.adapted_clip(clip, drx.reduce_sum(unclipped), k_count, clients)
        return w + mean["delta"], new_clip

    key = rnd.key(12)
    w1, new_clip = drx.jit(dp_round)(w0, xs, key)
    deltas = xs - w0
    norms = np.linalg.norm(deltas, axis=1)
    clipped = deltas * np.minimum(1.0, clip / norms)[:, None]
    k_noise, k_count = rnd.split(key)
    noise = rnd.normal(rnd.split(k_noise, 1)[0], (3,), np.float64) * (z * clip)
    np.testing.assert_allclose(w1, w0 + (clipped.sum(0) + noise) / clients, rtol=1e-14)
    b = (norms <= clip).sum() / clients
    assert new_clip == pytest.approx(clip * math.exp(-0.2 * (b - 0.5)), rel=1e-15)


# ---- the RDP accountant: published values ---------------------------------------------------
def tutorial_orders():
    """TF Privacy's 2019 MNIST tutorial's orders: 1.1, 1.2, ..., 10.9, then 12..63."""
    return [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def test_tf_privacy_mnist_tutorial_table():
    # tensorflow/privacy tutorials/README.md "Select Parameters" and "Expected Output": batch
    # 256 of 60000, 234 steps an epoch, delta 1e-5, Mironov 2017's conversion.
    for noise, epochs, eps in ((1.12, 60, 2.92), (0.6, 30, 9.74), (1.2, 10, 1.20),
                               (1.12, 1, 1.00), (1.12, 2, 1.04)):
        acct = dp.RdpAccountant("poisson", 256, 60000, noise, tutorial_orders())
        acct.step(epochs * 234)
        assert acct.epsilon(1e-5, "mironov2017").epsilon == pytest.approx(eps, rel=0.01)
        got = dp.compute_epsilon(noise, 256 / 60000, epochs * 234, 1e-5,
                                 orders=tutorial_orders(), conversion="mironov2017")
        assert got == pytest.approx(acct.epsilon(1e-5, "mironov2017").epsilon, rel=1e-12)


def test_tf_privacy_compute_dp_sgd_privacy():
    # tensorflow_privacy/privacy/analysis/compute_dp_sgd_privacy_test.py (Test0..Test2).
    for n, batch, noise, epochs, delta, eps, order in (
            (60000, 150, 1.3, 15, 1e-5, 0.7242234026109595, 19.0),
            (100000, 100, 1.0, 30, 1e-7, 1.4154988495444842, 13.0),
            (100000000, 1024, 0.1, 10, 1e-7, 5907982.3113978775, 1.25)):
        steps = math.ceil(epochs * n / batch)
        acct = dp.RdpAccountant("poisson", batch, n, noise).step(steps)
        got = acct.epsilon(delta)
        assert got.epsilon == pytest.approx(eps, rel=0.01)
        assert got.order == order
        assert dp.compute_epsilon(noise, batch / n, steps, delta) == pytest.approx(
            got.epsilon, rel=1e-12)


def test_tf_privacy_rdp_values():
    inf = float("inf")
    # rdp_privacy_accountant_test.py test_compute_rdp_poisson_sampled_gaussian.
    got = dp.rdp_poisson_gaussian(0.01, 2.5, [1.5, 2.5, 5, 50, 100, inf]) * 50
    np.testing.assert_allclose(got[:5], [6.5007e-04, 1.0854e-03, 2.1808e-03, 2.3846e-02,
                                         1.6742e+02], rtol=1e-3)
    assert got[5] == inf
    # rdp_accountant_test.py test_compute_rdp_scalar.
    assert dp.rdp_poisson_gaussian(0.1, 2, [5])[0] * 10 == pytest.approx(0.07737, rel=1e-4)
    # rdp_accountant_test.py test_compute_rdp_sequence_without_replacement (Wang et al.).
    orders = [1.001, 1.5, 2.5, 5, 50, 100, 256, 512, 1024, inf]
    got = dp.rdp_fixed_size_gaussian(600, 60000, 2.5, orders) * 50
    np.testing.assert_allclose(got[:9], [0.003470, 0.003470, 0.004638, 0.0087633, 0.098474,
                                         167.766388, 792.838516, 1817.35871, 3865.55029],
                               rtol=0.01)
    assert got[9] == inf
    assert np.all(dp.rdp_fixed_size_gaussian(600, 60000, 2.5, orders[:9], "general_theorem9")
                  >= got[:9] / 50)


def test_published_conversions():
    # rdp_accountant_test.py test_check_composition, Mironov 2017's conversion.
    orders = [1.25, 1.5, 1.75, 2., 2.5, 3., 4., 5., 6., 7., 8., 10., 12., 14., 16., 20., 24.,
              28., 32., 64., 256.]
    total = (dp.rdp_poisson_gaussian(1e-4, 0.4, orders) * 40000
             + dp.rdp_poisson_gaussian(0.1, 2, orders) * 100)
    e = dp.epsilon_from_rdp(orders, total, 1e-5, "mironov2017")
    assert e.epsilon == pytest.approx(8.509656, rel=1e-5) and e.order == 2.5
    assert dp.epsilon_from_rdp(orders, total, 1e-5).epsilon <= 8.509656
    # dp_accounting rdp_privacy_accountant_test.py test_compute_epsilon_delta_pure_dp.
    e = dp.epsilon_from_rdp(list(range(2, 33)), [1.1] * 31, 1e-5)
    assert e.epsilon == pytest.approx(1.32783806176, abs=1e-9) and e.order == 32


# ---- the accountant: independent references -------------------------------------------------
def binomial_rdp(q, z, alpha):
    """log A_alpha / (alpha - 1), A_alpha = sum_k C(alpha,k) (1-q)^(alpha-k) q^k
    exp((k^2 - k) / (2 z^2)), summed in log space."""
    terms = [math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
             + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * z * z)
             for k in range(alpha + 1)]
    top = max(terms)
    return (top + math.log(sum(math.exp(t - top) for t in terms))) / (alpha - 1)


def balle_epsilon(orders, rdp, delta):
    return max(0.0, min(r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
                        for a, r in zip(orders, rdp)))


def test_poisson_rdp_is_the_binomial_sum_and_the_conversions_are_by_hand():
    for q in (0.001, 0.1, 0.5):
        for z in (0.7, 1.0, 3.0):
            got = dp.rdp_poisson_gaussian(q, z, list(range(2, 13)))
            want = [binomial_rdp(q, z, a) for a in range(2, 13)]
            np.testing.assert_allclose(got, want, rtol=1e-9)
    a, r, delta = 8.0, 0.7, 1e-5
    assert dp.epsilon_from_rdp([a], [r], delta, "mironov2017").epsilon == pytest.approx(
        r + math.log(1 / delta) / (a - 1), rel=1e-14)
    assert dp.epsilon_from_rdp([a], [r], delta).epsilon == pytest.approx(
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1), rel=1e-14)


def test_accountants_compose_and_dp_fedavg_uses_its_convention():
    orders = dp.default_rdp_orders()
    assert len(orders) == 72 and orders[:5] == [1.25, 1.5, 1.75, 2, 2.25] and orders[-1] == 512
    acct = dp.RdpAccountant("fixed_size", 64, 10000, 1.1)
    assert acct.epsilon(1e-6).epsilon == 0 and acct.sampling == "fixed_size"
    acct.step(2).step(3)
    assert acct.steps == 5 and acct.sampling_rate == 64 / 10000
    one = dp.rdp_fixed_size_gaussian(64, 10000, 1.1)
    np.testing.assert_allclose(acct.rdp_per_step, one, rtol=0)
    np.testing.assert_allclose(acct.rdp(), 5 * one, rtol=1e-12)
    assert acct.epsilon(1e-6).epsilon == pytest.approx(balle_epsilon(orders, 5 * one, 1e-6),
                                                       rel=1e-12)
    # Full cohort: the plain Gaussian, z for add/remove (poisson), z / 2 for replace-one.
    z = 1.5
    poisson = dp.DpFedAvgAccounting("poisson", 40, 40, z)
    fixed = dp.DpFedAvgAccounting("fixed_size", 40, 40, z)
    assert poisson.accounted_noise_multiplier == 1.5 and fixed.accounted_noise_multiplier == 0.75
    o = np.array(poisson.orders)
    np.testing.assert_allclose(poisson.rdp_per_round, o / (2 * 1.5**2), rtol=1e-9)
    np.testing.assert_allclose(fixed.rdp_per_round, o / (2 * 0.75**2), rtol=1e-9)
    assert poisson.epsilon(10, 1e-5) == pytest.approx(
        balle_epsilon(o, 10 * o / (2 * 1.5**2), 1e-5), abs=1e-9)
    assert fixed.epsilon(10, 1e-5) > poisson.epsilon(10, 1e-5)
    assert poisson.epsilon(0, 1e-5) == 0
    assert dp.compute_epsilon(1.0, 0.01, 0, 1e-5) == 0


# ---- errors ---------------------------------------------------------------------------------
def raises(*words):
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(drx.Error)
            self.info = self.ctx.__enter__()

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            for w in words:
                assert w in str(self.info.value), (w, str(self.info.value))
            return handled
    return Check()


def test_bad_arguments_are_errors_naming_the_function():
    tree, k = make_tree(), rnd.key(0)
    with raises("clip_by_l2_norm", "clip = -1"):
        dp.clip_by_l2_norm(tree, -1.0)
    with raises("clip_by_l2_norm", "clip = -1"):  # a constant of the trace
        drx.jit(lambda t: dp.clip_by_l2_norm(t, -1.0))(tree)
    with raises("clip_by_l2_norm", "floating-point scalar", "i32"):
        dp.clip_by_l2_norm(tree, np.int32(1))
    with raises("clip_by_l2_norm", "floating-point scalar", "f64[2]"):
        dp.clip_by_l2_norm(tree, np.ones(2))
    with raises("gaussian_noise_like", "not floating-point"):
        dp.gaussian_noise_like([np.zeros(3, np.int32)], k, 1.0)
    with raises("gaussian_noise_like", "u32[3]"):
        dp.gaussian_noise_like(tree, np.zeros(3, np.uint32), 1.0)
    with raises("noisy_mean", "clip = inf"):
        dp.noisy_mean(tree, k, 1.0, float("inf"), 10)
    with raises("noisy_mean", "noise_multiplier = -1"):
        dp.noisy_mean(tree, k, -1.0, 1.0, 10)
    with raises("noisy_mean", "expected_cohort"):
        dp.noisy_mean(tree, k, 1.0, 1.0, 0)
    with raises("noisy_mean", "noise_multiplier", "static"):
        drx.jit(lambda z: dp.noisy_mean(tree, k, z, 1.0, 10))(1.0)
    with raises("adapted_clip", "target_quantile 1.5"):
        dp.adapted_clip(1.0, 3, k, 10, target_quantile=1.5)
    with raises("update_noise_multiplier", "2 sigma_b > z > 0"):
        dp.update_noise_multiplier(1.0, 0.4)
    with raises("rdp_poisson_gaussian", "q = 1.5"):
        dp.rdp_poisson_gaussian(1.5, 1.0)
    with raises("rdp_fixed_size_gaussian", "cohort size = 11"):
        dp.rdp_fixed_size_gaussian(11, 10, 1.0)
    with raises("rdp_fixed_size_gaussian", "bound 'x'"):
        dp.rdp_fixed_size_gaussian(1, 10, 1.0, bound="x")
    with raises("epsilon_from_rdp", "delta = 0"):
        dp.epsilon_from_rdp([2, 3], [0.1, 0.2], 0)
    with raises("epsilon_from_rdp", "conversion 'x'"):
        dp.epsilon_from_rdp([2, 3], [0.1, 0.2], 1e-5, "x")
    with raises("RdpAccountant", "sampling 'x'"):
        dp.RdpAccountant("x", 1, 10, 1.0)
    with raises("RdpAccountant", "cohort size = 300"):
        dp.RdpAccountant("poisson", 300, 200, 1.0)
    with raises("RdpAccountant::step", "count = -1"):
        dp.RdpAccountant("poisson", 1, 10, 1.0).step(-1)
    with raises("RdpAccountant::epsilon", "delta = 2"):
        dp.RdpAccountant("poisson", 1, 10, 1.0).epsilon(2.0)
    with raises("compute_epsilon", "steps"):
        dp.compute_epsilon(1.0, 0.01, 1.5, 1e-5)
    with raises("RdpAccountant", "cohort size = 11"):
        dp.DpFedAvgAccounting("fixed_size", 11, 10, 1.0)


# ---- every C++ privacy op has a Python name with a docstring --------------------------------
def test_every_public_privacy_op_has_a_python_function():
    table = [o[0] for o in drx._drx.public_ops() if "privacy" in o[0]]
    assert table, "the public-op table lists drx::privacy's ops"
    for name in table:
        fn = getattr(dp, name.rsplit("::", 1)[1])
        assert fn.__doc__ and name in fn.__doc__, name
        assert fn.__name__ in dp.__all__
