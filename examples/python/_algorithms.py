"""What the Python algorithm examples share (as examples/algorithms_common.h does for C++):
synthetic heterogeneous linear-regression data, the client loss in drx, and its float64 NumPy
twin with its gradient, which every example checks its rounds against."""
import numpy as np

import drx
import drx.numpy as dnp

# drx's threads split the products (OpenBLAS on one thread), so results do not depend on
# OpenBLAS's thread count; these examples use NumPy only for small reference loops.
drx.set_blas_thread_control(True)


def make_data(clients=8, examples=16, min_examples=16, dim=5, client_shift=0.3, noise=0.05,
              corrupted=0, corrupt_scale=3.0, validation=64, seed=7):
    """x [clients, examples, dim], y and mask [clients, examples] (mask 1 on a client's real
    examples), and clean validation data (x_val, y_val) from the true weights. Client k's
    labels come from w* + shift_k, so no single w fits every client; the first `corrupted`
    clients get labels of pure noise."""
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=dim)
    x = rng.normal(size=(clients, examples, dim))
    shifts = client_shift * rng.normal(size=(clients, dim))
    y = np.einsum("ced,cd->ce", x, w_true + shifts) + noise * rng.normal(size=(clients, examples))
    y[:corrupted] = corrupt_scale * rng.normal(size=(corrupted, examples))
    counts = rng.integers(min_examples, examples + 1, size=clients)
    mask = (np.arange(examples)[None, :] < counts[:, None]).astype(np.float64)
    x_val = rng.normal(size=(validation, dim))
    y_val = x_val @ w_true + noise * rng.normal(size=validation)
    return x, y, mask, x_val, y_val


def client_loss(w, x, y, mask):
    """One client's mean squared error over its real examples (drx)."""
    return dnp.sum(mask * (x @ w - y) ** 2) / dnp.sum(mask)


def average_loss(w, x, y, mask):
    """Inside a program over "clients": the clients' mean loss at the server's w."""
    return drx.reduce_mean(drx.map_fn(client_loss, (drx.broadcast(w), x, y, mask)))


def np_loss(w, x, y, mask):
    """client_loss in float64 NumPy."""
    return np.sum(mask * (x @ w - y) ** 2) / np.sum(mask)


def np_grad(w, x, y, mask):
    """d np_loss / d w, by hand."""
    return 2.0 * x.T @ (mask * (x @ w - y)) / np.sum(mask)


def check_close(name, got, want, rtol=1e-12):
    """Exits with a message when got differs from the float64 loop's want (its shape, or any
    element by more than rtol relative to the element)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise SystemExit(f"{name}: shape {got.shape} from drx, {want.shape} from the loop")
    err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)) if want.size else 0.0
    if not np.allclose(got, want, rtol=rtol, atol=0):
        raise SystemExit(f"{name}: drx and the float64 loop differ (max relative error {err:.3g})")
