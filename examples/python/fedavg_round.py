"""A FedAvg round in DrJAX's style from Python, trained for a few rounds on a synthetic
linear-regression task split over clients, and the hypergradient of the round's loss with
respect to the server learning rate.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fedavg_round.py
"""
import numpy as np

import drx

CLIENTS, EXAMPLES, FEATURES = 8, 32, 5


def loss(w, x, y):
    return ((x @ w - y) ** 2).mean()


def client_update(w, x, y, lr=0.1, steps=5):
    # The local steps as one loop, traced once (a Python for loop would unroll them).
    return drx.lax.fori_loop(0, steps, lambda i, v: v - lr * drx.grad(loss)(v, x, y), w)


@drx.program(placements={"clients": CLIENTS})
def fedavg_round(w, xs, ys):
    ws = drx.map_fn(client_update, (drx.broadcast(w), xs, ys))
    return drx.reduce_mean(ws)


@drx.program(placements={"clients": CLIENTS})
def federated_loss(w, xs, ys):
    return drx.reduce_mean(drx.map_fn(loss, (drx.broadcast(w), xs, ys)))


def main():
    rng = np.random.default_rng(0)
    w_true = rng.normal(size=FEATURES)
    xs = rng.normal(size=(CLIENTS, EXAMPLES, FEATURES))
    ys = xs @ w_true + 0.01 * rng.normal(size=(CLIENTS, EXAMPLES))
    w = np.zeros(FEATURES)
    round_fn, loss_fn = drx.jit(fedavg_round), drx.jit(federated_loss)
    first = float(loss_fn(w, xs, ys))
    for r in range(10):
        w = round_fn(w, xs, ys)
        print(f"round {r + 1:2d}: loss {float(loss_fn(w, xs, ys)):.6f}")
    last = float(loss_fn(w, xs, ys))
    assert last < 0.01 * first, (first, last)

    # d loss(after one round with server step size s) / d s, against central differences.
    def loss_after(s, w0):
        w1 = fedavg_round(w0, xs, ys)
        return federated_loss(w0 + s * (w1 - w0), xs, ys)

    w0 = np.zeros(FEATURES)
    h = float(drx.jit(drx.grad(loss_after))(1.0, w0))
    eps = 1e-5
    f = drx.jit(loss_after)
    fd = (float(f(1.0 + eps, w0)) - float(f(1.0 - eps, w0))) / (2 * eps)
    print(f"hypergradient d loss / d server step: {h:.8f} (central differences {fd:.8f})")
    assert abs(h - fd) <= 1e-6 * max(1.0, abs(fd)), (h, fd)


if __name__ == "__main__":
    main()
