"""drx.nn from Python against independent float64 NumPy references: the activations, the
layers (dense, layer_norm, embedding, causal attention with an explicit mask loop, the MLP, a
GPT-2 forward pass), the losses and metrics, gradients against central differences, vmap against
loops, eager calls against jitted ones (bitwise), mixed precision against f32, and the seeded
initialisers against a Python std::mt19937_64 and Box-Muller."""
import math

import numpy as np
import pytest

drx = pytest.importorskip("drx")
nn = drx.nn


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- float64 NumPy references ------------------------------------------------------------
_erf = np.vectorize(math.erf)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_log_softmax(x, axis=-1):
    return x - np_logsumexp(x, axis=axis, keepdims=True)


def np_softmax(x, axis=-1):
    return np.exp(np_log_softmax(x, axis))


def np_layer_norm(x, scale, bias, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scale + bias


def np_attention(q, k, v, heads):
    """Per batch, head and query: softmax over the keys j <= i, by explicit loops."""
    B, t, d = q.shape
    dh = d // heads
    out = np.zeros((B, t, d))
    for b in range(B):
        for h in range(heads):
            cols = slice(h * dh, (h + 1) * dh)
            for i in range(t):
                scores = np.array([q[b, i, cols] @ k[b, j, cols] / math.sqrt(dh)
                                   for j in range(i + 1)])
                w = np.exp(scores - scores.max())
                w /= w.sum()
                out[b, i, cols] = sum(w[j] * v[b, j, cols] for j in range(i + 1))
    return out


def np_mlp(params, x):
    h = x
    for i, key in enumerate(sorted(params)):
        if i > 0:
            h = np.maximum(h, 0)
        h = h @ params[key]["w"] + params[key]["b"]
    return h


def np_ce(logits, labels):
    return -np_log_softmax(logits)[np.arange(len(labels)), labels]


def np_gpt2(c, p, ids, approximate=False):
    """GPT-2's forward pass, written out in NumPy float64."""
    t = ids.shape[1]
    d, H = c.width, c.heads
    x = p["wte"][ids] + p["wpe"][:t]
    b = p["blocks"]
    for layer in range(c.layers):
        g = {k: v[layer] for k, v in b.items()}
        a = np_layer_norm(x, g["ln1_g"], g["ln1_b"], c.ln_eps)
        qkv = a @ g["qkv_w"] + g["qkv_b"]
        att = np_attention(qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:], H)
        x = x + att @ g["attn_w"] + g["attn_b"]
        m = np_layer_norm(x, g["ln2_g"], g["ln2_b"], c.ln_eps)
        x = x + np_gelu(m @ g["fc_w"] + g["fc_b"], approximate) @ g["out_w"] + g["out_b"]
    h = np_layer_norm(x, p["lnf_g"], p["lnf_b"], c.ln_eps)
    return h @ p["wte"].T


def central_difference(f, x, direction, eps=1e-6):
    return (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)


# ---- activations -----------------------------------------------------------------------------
X = rng(1).normal(size=(3, 5)) * 3


@pytest.mark.parametrize("name, ref", [
    ("relu", lambda x: np.maximum(x, 0)),
    ("sigmoid", np_sigmoid),
    ("softplus", lambda x: np.logaddexp(0, x)),
    ("log_sigmoid", lambda x: -np.logaddexp(0, -x)),
    ("gelu", np_gelu),
])
def test_elementwise_activations(name, ref):
    fn = getattr(nn, name)
    np.testing.assert_allclose(fn(X), ref(X), rtol=1e-13, atol=1e-15)
    out32 = fn(X.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, ref(X), rtol=2e-6, atol=1e-6)
    # Stable far out.
    big = np.array([-800.0, 800.0])
    assert np.all(np.isfinite(fn(big)))


def test_gelu_tanh_approximation():
    np.testing.assert_allclose(nn.gelu(X, approximate=True), np_gelu(X, True), rtol=1e-13,
                               atol=1e-15)
    assert not np.allclose(nn.gelu(X, approximate=True), nn.gelu(X), rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, (0, 1), None])
def test_softmax_log_softmax(axis):
    ax = tuple(axis) if isinstance(axis, tuple) else axis
    np.testing.assert_allclose(nn.softmax(X, axis=axis), np_softmax(X, ax), rtol=1e-13)
    np.testing.assert_allclose(nn.log_softmax(X, axis=axis), np_log_softmax(X, ax), rtol=1e-13,
                               atol=1e-14)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp(axis, keepdims):
    got = nn.logsumexp(X, axis=axis, keepdims=keepdims)
    want = np_logsumexp(X, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13)
    # Large values stay finite (the maximum is subtracted).
    np.testing.assert_allclose(nn.logsumexp(np.array([1000.0, 1000.0])), 1000 + math.log(2))


def test_one_hot():
    ids = np.array([[0, 2], [3, 1]])
    got = nn.one_hot(ids, 3)
    assert got.dtype == np.float32 and got.shape == (2, 2, 3)
    want = np.zeros((2, 2, 3))
    for i in range(2):
        for j in range(2):
            if ids[i, j] < 3:
                want[i, j, ids[i, j]] = 1  # label 3 is out of range: a zero row
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(nn.one_hot(ids, 3, dtype=np.float64, axis=0),
                                  np.moveaxis(want, -1, 0))
    assert nn.one_hot(ids, 3, dtype=np.int32).dtype == np.int32


def test_weak_python_numbers():
    assert nn.relu(2.0) == 2.0
    # Integers: relu keeps them, the floating functions promote them to float64 (JAX with x64).
    ints = np.array([-2, 0, 3], np.int32)
    assert nn.relu(ints).dtype == np.int32
    np.testing.assert_array_equal(nn.relu(ints), [0, 0, 3])
    assert nn.softmax(ints).dtype == np.float64
    np.testing.assert_allclose(nn.softmax(ints), np_softmax(ints.astype(np.float64)), rtol=1e-14)
    np.testing.assert_allclose(nn.sigmoid(ints), np_sigmoid(ints.astype(np.float64)), rtol=1e-14)
    # Inside a trace a weakly typed result keeps the other operand's dtype.
    x32 = np.ones(3, np.float32)
    assert drx.jit(lambda x: x * nn.sigmoid(0.5))(x32).dtype == np.float32
    x32 = X.astype(np.float32)
    # A Python number label takes the logits' dtype.
    got = nn.sigmoid_binary_cross_entropy(x32, 0.25)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.logaddexp(0, X) - 0.25 * X, rtol=2e-6, atol=1e-6)
    # NumPy operands of different dtypes promote as in JAX (f32 with f64: f64).
    w, b = rng(2).normal(size=(5, 2)), rng(3).normal(size=2)
    assert nn.dense(x32, w, b).dtype == np.float64
    np.testing.assert_allclose(nn.dense(x32, w, b), x32.astype(np.float64) @ w + b, rtol=1e-13)


# ---- layers ----------------------------------------------------------------------------------
def test_dense_layer_norm_embedding():
    r = rng(4)
    x, w, b = r.normal(size=(2, 3, 4)), r.normal(size=(4, 5)), r.normal(size=5)
    np.testing.assert_allclose(nn.dense(x, w, b), x @ w + b, rtol=1e-13)
    scale, bias = r.normal(size=4), r.normal(size=4)
    np.testing.assert_allclose(nn.layer_norm(x, scale, bias), np_layer_norm(x, scale, bias),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(nn.layer_norm(x, scale, bias, eps=0.5),
                               np_layer_norm(x, scale, bias, 0.5), rtol=1e-12, atol=1e-13)
    table, ids = r.normal(size=(7, 3)), np.array([[6, 0], [2, 2]], np.int32)
    got = nn.embedding(table, ids)
    assert got.shape == (2, 2, 3)
    np.testing.assert_array_equal(got, table[ids])


def test_causal_attention_matches_a_mask_loop():
    r = rng(5)
    q, k, v = (r.normal(size=(2, 5, 6)) for _ in range(3))
    for heads in (1, 2, 3):
        np.testing.assert_allclose(nn.causal_attention(q, k, v, heads),
                                   np_attention(q, k, v, heads), rtol=1e-12, atol=1e-13)


def test_mlp_init_and_apply():
    params = nn.mlp_init([4, 6, 5, 3], seed=7, weight_init="glorot_uniform", dtype=np.float64)
    assert sorted(params) == ["layer0", "layer1", "layer2"]
    assert params["layer1"]["w"].shape == (6, 5) and params["layer1"]["b"].shape == (5,)
    assert params["layer1"]["w"].dtype == np.float64
    np.testing.assert_array_equal(params["layer2"]["b"], np.zeros(3))
    x = rng(6).normal(size=(8, 4))
    np.testing.assert_allclose(nn.mlp_apply(params, x), np_mlp(params, x), rtol=1e-12)
    # Each layer's weights: init_array with the layer's derived seed.
    for layer, (fan_in, fan_out) in enumerate([(4, 6), (6, 5), (5, 3)]):
        np.testing.assert_array_equal(
            params[f"layer{layer}"]["w"],
            nn.init_array(nn.Init.glorot_uniform, (fan_in, fan_out), fan_in, fan_out,
                          nn.derive_init_seed(7, layer), np.float64))
    deep = nn.mlp_init([2] * 12, 0)
    assert sorted(deep)[0] == "layer00" and sorted(deep)[-1] == "layer10"


def test_losses_and_metrics():
    r = rng(7)
    logits = r.normal(size=(6, 4))
    labels = np.array([0, 3, 1, 1, 2, 0])
    np.testing.assert_allclose(nn.softmax_cross_entropy(logits, labels), np_ce(logits, labels),
                               rtol=1e-13)
    probs = r.uniform(size=(6, 4))
    s = np_sigmoid(logits)
    np.testing.assert_allclose(nn.sigmoid_binary_cross_entropy(logits, probs),
                               -probs * np.log(s) - (1 - probs) * np.log(1 - s), rtol=1e-12)
    mask = np.array([1, 0, 1, 1, 0, 0], np.float32)
    np.testing.assert_allclose(nn.masked_mean_loss(logits, labels, mask),
                               np_ce(logits, labels)[mask == 1].mean(), rtol=1e-13)
    assert nn.masked_mean_loss(logits, labels, np.zeros(6, np.int32)) == 0.0
    tied = logits.copy()
    tied[0] = [2.0, 2.0, 0.0, 2.0]  # first maximum: index 0, which is the label
    tied[1] = [1.0, 0.0, 1.0, 1.0]  # first maximum 0, label 3: wrong
    want = (np.argmax(tied, axis=1) == labels).astype(np.float64)
    np.testing.assert_array_equal(nn.correct(tied, labels), want)
    assert nn.accuracy(tied, labels) == pytest.approx(want.mean(), rel=1e-15)
    assert nn.correct(tied.astype(np.float32), labels).dtype == np.float32


# ---- gradients against central differences ---------------------------------------------------
def _directional_check(f, args, argnum, seed, rtol=1e-6):
    """grad(f) along a random direction against a central difference of f."""
    g = drx.grad(f, argnums=argnum)(*args)
    d = rng(seed).normal(size=np.shape(args[argnum]))

    def along(a):
        full = list(args)
        full[argnum] = a
        return float(drx.jit(f)(*full))

    want = central_difference(along, args[argnum], d)
    assert float(np.sum(g * d)) == pytest.approx(want, rel=rtol, abs=1e-9)


def test_gradients_layer_norm_cross_entropy_attention():
    r = rng(8)
    x, scale, bias = r.normal(size=(3, 5)), r.normal(size=5), r.normal(size=5)
    weights = r.normal(size=(3, 5))

    def ln(x, scale, bias):
        return (nn.layer_norm(x, scale, bias) * weights).sum()

    for a in range(3):
        _directional_check(ln, (x, scale, bias), a, seed=10 + a)

    logits, labels = r.normal(size=(4, 3)), np.array([2, 0, 1, 1])

    def ce(logits):
        return nn.softmax_cross_entropy(logits, labels).mean()

    _directional_check(ce, (logits,), 0, seed=20)
    # The exact gradient: (softmax - one_hot) / n.
    g = drx.grad(ce)(logits)
    np.testing.assert_allclose(g, (np_softmax(logits) - np.eye(3)[labels]) / 4, rtol=1e-12,
                               atol=1e-15)

    q, k, v = (r.normal(size=(1, 4, 4)) for _ in range(3))
    wo = r.normal(size=(1, 4, 4))

    def att(q, k, v):
        return (nn.causal_attention(q, k, v, 2) * wo).sum()

    for a in range(3):
        _directional_check(att, (q, k, v), a, seed=30 + a)


def test_grad_through_params_dicts():
    params = nn.mlp_init([3, 4, 2], seed=1, dtype=np.float64)
    x, y = rng(9).normal(size=(5, 3)), np.array([0, 1, 1, 0, 1])

    def loss(p):
        return nn.softmax_cross_entropy(nn.mlp_apply(p, x), y).mean()

    g = drx.jit(drx.grad(loss))(params)
    assert drx.tree_util.tree_structure(g) == drx.tree_util.tree_structure(params)
    d = drx.tree_util.tree_map(lambda a: rng(11).normal(size=a.shape), params)
    inner = sum(np.sum(a * b) for a, b in zip(drx.tree_util.tree_leaves(g),
                                               drx.tree_util.tree_leaves(d)))

    def along(eps):
        p = drx.tree_util.tree_map(lambda a, b: a + eps * b, params, d)
        return np.mean(np_ce(np_mlp(p, x), y))

    assert inner == pytest.approx((along(1e-6) - along(-1e-6)) / 2e-6, rel=1e-6)


# ---- vmap, jit, map_fn -----------------------------------------------------------------------
def test_vmap_matches_loops():
    r = rng(12)
    xs, scale, bias = r.normal(size=(4, 3, 5)), r.normal(size=5), r.normal(size=5)
    got = drx.vmap(nn.layer_norm, in_axes=(0, None, None))(xs, scale, bias)
    np.testing.assert_allclose(got, np.stack([np_layer_norm(x, scale, bias) for x in xs]),
                               rtol=1e-12, atol=1e-13)
    logits, labels = r.normal(size=(3, 4, 6)), r.integers(0, 6, size=(3, 4))
    got = drx.vmap(nn.softmax_cross_entropy)(logits, labels)
    np.testing.assert_allclose(got, np.stack([np_ce(l, y) for l, y in zip(logits, labels)]),
                               rtol=1e-13)
    qs = r.normal(size=(3, 2, 4, 4))
    got = drx.vmap(lambda q: nn.causal_attention(q, q, q, 2))(qs)
    np.testing.assert_allclose(got, np.stack([np_attention(q, q, q, 2) for q in qs]),
                               rtol=1e-12, atol=1e-13)
    ws = r.normal(size=(3, 5, 2))
    got = drx.vmap(nn.dense, in_axes=(None, 0, None))(xs[0], ws, bias[:2])
    np.testing.assert_allclose(got, np.stack([xs[0] @ w + bias[:2] for w in ws]), rtol=1e-13)


def test_eager_is_bitwise_the_jitted_call():
    r = rng(13)
    x = r.normal(size=(4, 6)).astype(np.float32)
    w, b = r.normal(size=(6, 3)).astype(np.float32), r.normal(size=3).astype(np.float32)
    labels = np.array([0, 2, 1, 1])
    cases = [
        (nn.gelu, (x,)), (nn.softmax, (x,)), (nn.log_softmax, (x,)), (nn.logsumexp, (x,)),
        (nn.dense, (x, w, b)), (lambda *a: nn.dense(*a, policy="bf16"), (x, w, b)),
        (nn.layer_norm, (x, np.ones(6, np.float32), np.zeros(6, np.float32))),
        (nn.softmax_cross_entropy, (x, labels)), (nn.accuracy, (x, labels)),
    ]
    for fn, args in cases:
        eager, jitted = fn(*args), drx.jit(fn)(*args)
        assert eager.dtype == jitted.dtype
        np.testing.assert_array_equal(eager.view(np.uint32), jitted.view(np.uint32))
    c = nn.TransformerConfig(vocab=11, context=6, layers=2, width=8, heads=2)
    p = nn.transformer_init(c, 3)
    ids = r.integers(0, 11, size=(2, 5))
    # The config crosses jit as a static node of the argument tree.
    np.testing.assert_array_equal(nn.transformer_logits(c, p, ids),
                                  drx.jit(nn.transformer_logits)(c, p, ids))
    # The eager path compiles once per signature and static arguments.
    nn.softmax(x, axis=0)
    traces = nn._EAGER[("softmax", 0)].trace_count
    nn.softmax(x + 1, axis=0)
    assert nn._EAGER[("softmax", 0)].trace_count == traces


def test_in_a_federated_program():
    """Each client's MLP loss by map_fn, averaged: as a loop over the clients."""
    params = nn.mlp_init([3, 4, 2], seed=2, dtype=np.float64)
    r = rng(14)
    xs, ys = r.normal(size=(5, 6, 3)), r.integers(0, 2, size=(5, 6))

    @drx.program(placements={"clients": 5})
    def mean_loss(p, xs, ys):
        def client(p, x, y):
            return nn.softmax_cross_entropy(nn.mlp_apply(p, x), y).mean()
        return drx.reduce_mean(drx.map_fn(client, (drx.broadcast(p), xs, ys)))

    want = np.mean([np_ce(np_mlp(params, x), y).mean() for x, y in zip(xs, ys)])
    assert float(drx.jit(mean_loss)(params, xs, ys)) == pytest.approx(want, rel=1e-13)


# ---- the transformer -------------------------------------------------------------------------
CONFIG = nn.TransformerConfig(vocab=13, context=8, layers=2, width=12, heads=3, mlp=20)


def test_transformer_parameters_and_init():
    p = nn.transformer_init(CONFIG, 0)
    leaves = drx.tree_util.tree_leaves(p)
    assert sum(a.size for a in leaves) == CONFIG.parameters()
    assert all(a.dtype == np.float32 for a in leaves)
    assert p["blocks"]["qkv_w"].shape == (2, 12, 36) and p["wte"].shape == (13, 12)
    assert p["blocks"]["fc_w"].shape == (2, 12, 20) and CONFIG.mlp_width() == 20
    assert nn.TransformerConfig(width=64, heads=4).mlp_width() == 256
    assert CONFIG.head_width() == 4
    np.testing.assert_array_equal(p["blocks"]["ln1_g"], np.ones((2, 12)))
    np.testing.assert_array_equal(p["blocks"]["qkv_b"], np.zeros((2, 36)))
    big = nn.transformer_init(nn.TransformerConfig(vocab=256, layers=2, width=64, heads=4), 1,
                              np.float64)
    assert big["wte"].std() == pytest.approx(0.02, rel=0.03)
    assert big["blocks"]["out_w"].std() == pytest.approx(0.02 / math.sqrt(4), rel=0.03)
    same = nn.transformer_init(nn.TransformerConfig(vocab=256, layers=2, width=64, heads=4), 1,
                               np.float64)
    np.testing.assert_array_equal(big["wte"], same["wte"])


@pytest.mark.parametrize("scan_layers", [True, False])
def test_transformer_matches_a_numpy_gpt2(scan_layers):
    c = nn.TransformerConfig(vocab=13, context=8, layers=2, width=12, heads=3, mlp=20,
                             scan_layers=scan_layers)
    p = nn.transformer_init(c, 5, np.float64)
    # Non-trivial LayerNorm and bias parameters, so every one of them is exercised.
    p = drx.tree_util.tree_map(lambda a: a + 0.1 * rng(a.size).normal(size=a.shape), p)
    windows = rng(15).integers(0, 13, size=(2, 8))
    logits = nn.transformer_logits(c, p, windows[:, :7])
    want = np_gpt2(c, p, windows[:, :7])
    np.testing.assert_allclose(logits, want, rtol=1e-11, atol=1e-12)
    loss = nn.transformer_loss(c, p, windows)
    ce = np_ce(want.reshape(-1, 13), windows[:, 1:].reshape(-1))
    assert float(loss) == pytest.approx(ce.mean(), rel=1e-12)


def test_transformer_loss_at_init_and_gradient():
    c = nn.TransformerConfig(vocab=32, context=8, layers=1, width=16, heads=2)
    p = nn.transformer_init(c, 0, np.float64)
    windows = rng(16).integers(0, 32, size=(4, 8))
    loss, g = drx.jit(drx.value_and_grad(lambda p, w: nn.transformer_loss(c, p, w)))(p, windows)
    assert float(loss) == pytest.approx(math.log(32), abs=0.05)
    d = drx.tree_util.tree_map(lambda a: rng(17).normal(size=a.shape), p)
    inner = sum(np.sum(a * b) for a, b in zip(drx.tree_util.tree_leaves(g),
                                               drx.tree_util.tree_leaves(d)))
    f = drx.jit(lambda p: nn.transformer_loss(c, p, windows))

    def along(eps):
        return float(f(drx.tree_util.tree_map(lambda a, b: a + eps * b, p, d)))

    assert inner == pytest.approx((along(1e-6) - along(-1e-6)) / 2e-6, rel=1e-5)


# ---- mixed precision -------------------------------------------------------------------------
def test_bf16_policy_close_to_f32():
    r = rng(18)
    x, w, b = (r.normal(size=s).astype(np.float32) for s in [(8, 16), (16, 4), (4,)])
    f32 = nn.dense(x, w, b)
    for policy in ("bf16", nn.Policy.bf16()):
        got = nn.dense(x, w, b, policy=policy)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, f32, rtol=0.05, atol=0.05)
        assert not np.array_equal(got, f32)  # the products really ran on bf16 operands
    np.testing.assert_array_equal(nn.dense(x, w, b, policy="f32"), f32)
    np.testing.assert_allclose(nn.matmul(x, w, "bf16"), x @ w, rtol=0.05, atol=0.05)
    np.testing.assert_allclose(nn.dot_general(x, w, (((1,), (0,)), ((), ())), "bf16"), x @ w,
                               rtol=0.05, atol=0.05)
    np.testing.assert_allclose(nn.dot_general(x, w, (((1,), (0,)), ((), ()))), x @ w,
                               rtol=1e-5, atol=1e-5)
    q = r.normal(size=(2, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(nn.causal_attention(q, q, q, 2, policy="bf16"),
                               np_attention(q, q, q, 2), rtol=0.05, atol=0.05)
    params = nn.mlp_init([16, 8, 4], 0)
    np.testing.assert_allclose(nn.mlp_apply(params, x, policy="bf16"), nn.mlp_apply(params, x),
                               rtol=0.05, atol=0.05)
    c32 = nn.TransformerConfig(vocab=16, context=8, layers=1, width=16, heads=2)
    cbf = nn.TransformerConfig(vocab=16, context=8, layers=1, width=16, heads=2, policy="bf16")
    assert cbf.policy == nn.Policy.bf16() and cbf.policy.name == "bf16"
    p = nn.transformer_init(c32, 0)
    windows = r.integers(0, 16, size=(2, 8))
    assert float(nn.transformer_loss(cbf, p, windows)) == pytest.approx(
        float(nn.transformer_loss(c32, p, windows)), abs=0.02)


def test_policies():
    assert nn.Policy.full(np.float64) == nn.Policy("f64", "f64", "f64")
    assert nn.Policy.full(np.float64).name == "f64"
    assert nn.Policy.named("f32") == nn.Policy()
    assert nn.Policy("f32", "bf16", "f32") == nn.Policy.bf16()
    assert nn.Policy("f32", "f16", "f32").name == "f32/f16/f32"
    p64 = nn.Policy.full(np.float64)
    x = rng(19).normal(size=(3, 4)).astype(np.float32)
    assert nn.matmul(x, x.T, p64).dtype == np.float64


# ---- initialisers ----------------------------------------------------------------------------
_M64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64, as the C++ standard specifies it."""

    def __init__(self, seed=5489):
        self.mt = [seed & _M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & _M64)
        self.index = 312

    def __call__(self):
        if self.index == 312:
            for i in range(312):
                y = (self.mt[i] & ~0x7FFFFFFF & _M64) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                self.mt[i] = self.mt[(i + 156) % 312] ^ (y >> 1) ^ (
                    0xB5026F5AA96619E9 if y & 1 else 0)
            self.index = 0
        x = self.mt[self.index]
        self.index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & _M64


def test_reference_generator_is_the_standards():
    g = MT19937_64()
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042  # [rand.predef]: the 10000th output of the default seed


def reference_normal(n, stddev, seed):
    g = MT19937_64(seed)
    out = []
    while len(out) < n:
        r = math.sqrt(-2.0 * math.log(1.0 - (g() >> 11) * 2.0 ** -53))
        t = 2.0 * math.pi * ((g() >> 11) * 2.0 ** -53)
        out += [stddev * r * math.cos(t), stddev * r * math.sin(t)]
    return np.array(out[:n])


def splitmix(x):
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def test_initialisers_match_the_specified_generators():
    for seed in (0, 42, 2 ** 64 - 1):
        np.testing.assert_array_equal(nn.normal_array((3, 5), 0.5, seed, np.float64),
                                      reference_normal(15, 0.5, seed).reshape(3, 5))
        np.testing.assert_array_equal(nn.normal_array(7, 1.0, seed),
                                      reference_normal(7, 1.0, seed).astype(np.float32))
    np.testing.assert_array_equal(nn.init_array("he_normal", (4, 3), 4, 3, 9, np.float64),
                                  reference_normal(12, math.sqrt(2 / 4), 9).reshape(4, 3))
    np.testing.assert_array_equal(nn.init_array("lecun_normal", (5,), 5, 1, 9, np.float64),
                                  reference_normal(5, math.sqrt(1 / 5), 9))
    g = MT19937_64(3)
    limit = math.sqrt(6 / (4 + 3))
    want = [limit * (2.0 * ((g() >> 11) * 2.0 ** -53) - 1.0) for _ in range(12)]
    np.testing.assert_array_equal(nn.init_array("glorot_uniform", (4, 3), 4, 3, 3, np.float64),
                                  np.array(want).reshape(4, 3))
    for seed, stream in [(0, 0), (1, 2), (2 ** 64 - 1, 7)]:
        assert nn.derive_init_seed(seed, stream) == splitmix(seed ^ splitmix(stream))


@pytest.mark.parametrize("init", list(nn.Init))
def test_initialiser_shapes_dtypes_seeds(init):
    for dtype in (np.float32, np.float64):
        a = nn.init_array(init, (7, 5), 7, 5, 42, dtype)
        assert a.shape == (7, 5) and a.dtype == dtype
        np.testing.assert_array_equal(a, nn.init_array(init.value, (7, 5), 7, 5, 42, dtype))
        if init != nn.Init.zeros:
            assert not np.array_equal(a, nn.init_array(init, (7, 5), 7, 5, 43, dtype))
        else:
            np.testing.assert_array_equal(a, np.zeros((7, 5)))


def test_initialiser_statistics():
    fan_in, fan_out = 300, 200
    n = fan_in * fan_out
    for init, std in [("he_normal", math.sqrt(2 / fan_in)), ("lecun_normal", math.sqrt(1 / fan_in))]:
        a = nn.init_array(init, (fan_in, fan_out), fan_in, fan_out, 7).astype(np.float64)
        assert abs(a.mean()) < 5 * std / math.sqrt(n)
        assert a.std() == pytest.approx(std, rel=0.02)
    limit = math.sqrt(6 / (fan_in + fan_out))
    g = nn.init_array("glorot_uniform", (fan_in, fan_out), fan_in, fan_out, 7, np.float64)
    assert np.abs(g).max() <= limit and np.abs(g).max() > 0.999 * limit
    assert g.std() == pytest.approx(limit / math.sqrt(3), rel=0.02)
    s = nn.normal_array((n,), 3.0, 1)
    assert s.std() == pytest.approx(3.0, rel=0.02)


# ---- errors ----------------------------------------------------------------------------------
def _raises(match, fn, *args, **kwargs):
    with pytest.raises(drx.Error, match=match):
        fn(*args, **kwargs)


def test_errors():
    x = np.ones((2, 3))
    _raises("dense: expected x", nn.dense, x, np.ones((4, 2)), np.ones(2))
    _raises("layer_norm: expected", nn.layer_norm, x, np.ones(2), np.ones(3))
    _raises("embedding: expected", nn.embedding, np.ones((4, 2)), np.ones(3))
    _raises("causal_attention: expected", nn.causal_attention, *[np.ones((1, 2, 6))] * 3, 4)
    _raises("causal_attention: heads must be an int", nn.causal_attention,
            *[np.ones((1, 2, 6))] * 3, 1.5)
    _raises("softmax_cross_entropy: expected", nn.softmax_cross_entropy, x, np.ones(2))
    _raises("masked_mean_loss: mask", nn.masked_mean_loss, x, np.zeros(2, np.int32), np.ones(3))
    _raises("softmax: axis", nn.softmax, x, 2.5)
    _raises("one_hot: labels must be integer", nn.one_hot, x, 3)
    _raises("init_array: unknown initialiser 'he_uniform'", nn.init_array, "he_uniform",
            (2, 2), 2, 2, 0)
    _raises("mlp_init: unknown initialiser", nn.mlp_init, [2, 3], 0, "orthogonal")
    _raises("mlp_init: layer sizes must be positive", nn.mlp_init, [2, 0, 3], 0)
    _raises(r"init_array\(he_normal.*dtype must be f32 or f64", nn.init_array, "he_normal",
            (2, 2), 2, 2, 0, np.int32)
    _raises(r"init_array\(he_normal, \[2,2\], f32\): fan_in and fan_out must be positive", nn.init_array, "he_normal",
            (2, 2), 0, 2, 0)
    _raises(r"init_array: seed must be in \[0, 2\*\*64\)", nn.init_array, "zeros", (2,), 1, 1,
            -1)
    _raises("normal_array: stddev", nn.normal_array, (2,), -1.0, 0)
    _raises("mlp_apply: params must be a non-empty dict", nn.mlp_apply, [np.ones(2)], x)
    _raises("mlp_apply: layer 'layer0' must be a dict", nn.mlp_apply, {"layer0": np.ones(2)}, x)
    _raises("dot_general: dimension_numbers must be", nn.dot_general, x, x, ((1,), (1,)))
    _raises("policy 'f16' is not known", nn.dense, x, np.ones((3, 2)), np.ones(2), "f16")
    _raises("Policy::full: dtype must be f32 or f64", nn.Policy.full, np.int32)
    _raises("Policy.compute: dtype", nn.Policy, "f32", "float128", "f32")
    _raises("transformer: width 10 is not a multiple of heads 3",
            nn.TransformerConfig(width=10, heads=3).check)
    _raises("transformer: vocab must be positive", nn.transformer_init,
            nn.TransformerConfig(vocab=0), 0)
    _raises("TransformerConfig: heads must be an int", nn.TransformerConfig, heads=2.5)
    _raises("transformer_init: config must be a drx.nn.TransformerConfig", nn.transformer_init,
            {"vocab": 3}, 0)
    p = nn.transformer_init(CONFIG, 0)
    _raises("transformer_logits: ids must be integer", nn.transformer_logits, CONFIG, p,
            np.zeros((1, 9), np.int32))
    _raises("transformer: params.wte is f32", nn.transformer_logits,
            nn.TransformerConfig(vocab=14, context=8, layers=2, width=12, heads=3, mlp=20), p,
            np.zeros((1, 3), np.int32))
    _raises("transformer_loss: windows must be integer", nn.transformer_loss, CONFIG, p,
            np.zeros((1, 1), np.int32))
    # Inside a trace, with the transformation's context.
    with pytest.raises(drx.Error, match="dense: expected"):
        drx.jit(lambda a: nn.dense(a, np.ones((4, 2)), np.ones(2)))(x)


def test_every_cpp_nn_op_has_a_documented_python_name():
    names = {o[0].split("::")[-1] for o in drx._drx.public_ops() if "nn::" in o[0]}
    assert names  # the table lists drx::nn
    for name in names:
        assert callable(getattr(nn, name)), name
    for name in nn.__all__:
        assert getattr(nn, name).__doc__, name


# ---- convolutional layers ------------------------------------------------------------------
def np_conv2d(x, w, b, strides, pads, groups=1):
    """NHWC x HWIO + b by loops, with explicit (low, high) pads."""
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw, ci, o = w.shape
    oh = (xp.shape[1] - kh) // strides[0] + 1
    ow = (xp.shape[2] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, o))
    per = o // groups
    for f in range(o):
        g = f // per
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw,
                           g * ci:(g + 1) * ci]
                out[:, i, j, f] = np.einsum("bhwc,hwc->b", patch, w[..., f]) + b[f]
    return out


def test_conv2d_matches_numpy_loops():
    r = rng(40)
    x, w, b = r.normal(size=(2, 5, 6, 4)), r.normal(size=(3, 2, 4, 3)), r.normal(size=3)
    np.testing.assert_allclose(nn.conv2d(x, w, b, (2, 1)),  # SAME by default
                               np_conv2d(x, w, b, (2, 1), ((1, 1), (0, 1))), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nn.conv2d(x, w, b, padding="VALID"),
                               np_conv2d(x, w, b, (1, 1), ((0, 0), (0, 0))), rtol=1e-12, atol=1e-12)
    wg, bg = r.normal(size=(3, 3, 2, 4)), r.normal(size=4)
    np.testing.assert_allclose(nn.conv2d(x, wg, bg, feature_group_count=2),
                               np_conv2d(x, wg, bg, (1, 1), ((1, 1), (1, 1)), groups=2),
                               rtol=1e-12, atol=1e-12)
    xf, wf, bf = (a.astype(np.float32) for a in (x, w, b))
    got = nn.conv2d(xf, wf, bf, policy="bf16")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np_conv2d(x, w, b, (1, 1), ((1, 1), (0, 1))), rtol=0.05,
                               atol=0.05)
    with pytest.raises(drx.Error, match="conv2d"):
        nn.conv2d(x[0], w, b)


def test_batch_norm_training_and_evaluation():
    r = rng(41)
    x, scale, bias = r.normal(size=(4, 3, 2, 5)) * 2 + 1, r.normal(size=5), r.normal(size=5)
    running = nn.batch_norm_stats(5, np.float64)
    np.testing.assert_array_equal(running["var"], np.ones(5))
    y, new = nn.batch_norm(x, scale, bias, running, training=True, momentum=0.9)
    mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5) * scale + bias, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(new["mean"], 0.1 * mean, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(new["var"], 0.9 + 0.1 * var, rtol=1e-13)
    y_eval, same = nn.batch_norm(x, scale, bias, new, training=False)
    np.testing.assert_allclose(y_eval, (x - new["mean"]) / np.sqrt(new["var"] + 1e-5) * scale +
                               bias, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(same["mean"], new["mean"])
    # Inside a jitted training step, the state threads through as any pytree.
    step = drx.jit(lambda a, s: nn.batch_norm(a, scale, bias, s, True, 0.9))
    _, s1 = step(x, running)
    np.testing.assert_allclose(s1["var"], new["var"], rtol=1e-14)
    with pytest.raises(drx.Error, match="running must be a dict"):
        nn.batch_norm(x, scale, bias, (running["mean"], running["var"]), True)


def test_group_norm_matches_numpy():
    r = rng(42)
    x, scale, bias = r.normal(size=(2, 3, 4, 6)), r.normal(size=6), r.normal(size=6)
    g = x.reshape(2, 3, 4, 3, 2)
    mean, var = g.mean(axis=(1, 2, 4), keepdims=True), g.var(axis=(1, 2, 4), keepdims=True)
    want = ((g - mean) / np.sqrt(var + 1e-5)).reshape(x.shape) * scale + bias
    np.testing.assert_allclose(nn.group_norm(x, 3, scale, bias), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(drx.Error, match="num_groups 4"):
        nn.group_norm(x, 4, scale, bias)
