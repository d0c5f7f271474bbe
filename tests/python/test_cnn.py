"""drx.nn.cnn_init / cnn_apply (McMahan et al.'s CNN) from Python against a float64 NumPy
reference, its gradient through drx.grad, and the errors of a wrong parameter tree."""
import numpy as np
import pytest

drx = pytest.importorskip("drx")
nn = drx.nn


def np_conv_same(x, w, b):
    """x [n, h, w, c], w [kh, kw, c, o] (odd kh, kw), stride 1, SAME, plus bias."""
    kh, kw = w.shape[:2]
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    xp = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    n, h, wd, _ = x.shape
    out = np.zeros((n, h, wd, w.shape[3])) + b
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, i:i + h, j:j + wd, :], w[i, j])
    return out


def np_pool(x):
    n, h, w, c = x.shape
    x = x[:, :h // 2 * 2, :w // 2 * 2, :].reshape(n, h // 2, 2, w // 2, 2, c)
    return x.max(axis=(2, 4))


def np_cnn(p, x):
    h = np_pool(np.maximum(np_conv_same(x, p["conv0"]["w"], p["conv0"]["b"]), 0))
    h = np_pool(np.maximum(np_conv_same(h, p["conv1"]["w"], p["conv1"]["b"]), 0))
    h = h.reshape(h.shape[0], -1)
    h = np.maximum(h @ p["dense0"]["w"] + p["dense0"]["b"], 0)
    return h @ p["dense1"]["w"] + p["dense1"]["b"]


def test_cnn_init_and_apply():
    p = nn.cnn_init(9, 10, 2, 4, seed=3, dtype=np.float64)
    assert sorted(p) == ["conv0", "conv1", "dense0", "dense1"]
    assert p["conv0"]["w"].shape == (5, 5, 2, 32) and p["conv1"]["w"].shape == (5, 5, 32, 64)
    assert p["dense0"]["w"].shape == (2 * 2 * 64, 512) and p["dense1"]["w"].shape == (512, 4)
    np.testing.assert_array_equal(
        p["conv1"]["w"],
        nn.init_array(nn.Init.he_normal, (5, 5, 32, 64), 800, 1600, nn.derive_init_seed(3, 1),
                      np.float64))
    r = np.random.default_rng(0)
    for layer in p.values():
        layer["b"] = r.uniform(-0.2, 0.2, size=layer["b"].shape)
    x = r.uniform(size=(3, 9, 10, 2))
    np.testing.assert_allclose(nn.cnn_apply(p, x), np_cnn(p, x), rtol=1e-11, atol=1e-11)
    # Rows of square images.
    q = nn.cnn_init(8, 8, 1, 3, seed=1, dtype=np.float64)
    rows = r.uniform(size=(2, 64))
    np.testing.assert_allclose(nn.cnn_apply(q, rows), np_cnn(q, rows.reshape(2, 8, 8, 1)),
                               rtol=1e-11, atol=1e-11)
    # Differentiable, and jitted alike.
    y = np.array([0, 2])
    g = drx.grad(lambda p: nn.softmax_cross_entropy(nn.cnn_apply(p, rows), y).mean())(q)
    assert g["conv0"]["w"].shape == (5, 5, 1, 32)
    assert np.all(np.isfinite(g["dense0"]["w"]))


def test_cnn_errors():
    q = nn.cnn_init(8, 8, 1, 3, seed=1)
    with pytest.raises(drx.Error, match="layer 'dense0' expects the 576 features"):
        nn.cnn_apply(q, np.zeros((2, 144), np.float32))
    with pytest.raises(drx.Error, match="params must be a dict {conv0, conv1, dense0, dense1}"):
        nn.cnn_apply(nn.mlp_init([64, 3], 0), np.zeros((2, 64), np.float32))
    with pytest.raises(drx.Error, match="cnn_init"):
        nn.cnn_init(2, 8, 1, 3, seed=0)
