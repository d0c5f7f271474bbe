"""Learned aggregation weights from Python: the server keeps one logit per client, aggregates
the clients' models with weights softmax(logits) over the clients (drx.placement_softmax), and
learns the logits by the gradient of a validation loss after the round (federated AD through
the broadcast, the local steps and the weighted aggregate). Two of the eight clients have labels
of pure noise: their weights must fall. The hypergradient is checked against central
differences of a float64 NumPy loop.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/learned_aggregation.py
"""
import numpy as np

import drx
import drx.numpy as dnp
from _algorithms import check_close, client_loss, make_data, np_grad

CLIENTS, K, LR, HYPER_LR, ROUNDS = 8, 5, 0.05, 2.0, 12
PLACED = ["", "", "clients", "clients", "clients", "", ""]


def local_model(w0, x, y, mask):
    return drx.lax.fori_loop(0, K, lambda i, v: v - LR * drx.grad(client_loss)(v, x, y, mask), w0)


def aggregate(w, logits, x, y, mask):
    local = drx.map_fn(local_model, (drx.broadcast(w), x, y, mask))
    weights = drx.placement_softmax(drx.place(logits, "clients"))
    return drx.reduce_sum(drx.map_fn(lambda a, wi: a * wi, (weights, local)))


@drx.program(placements={"clients": CLIENTS}, in_placements=PLACED)
def hyper_objective(w, logits, x, y, mask, x_val, y_val):
    return dnp.mean((x_val @ aggregate(w, logits, x, y, mask) - y_val) ** 2)


@drx.program(placements={"clients": CLIENTS}, in_placements=PLACED)
def round_program(w, logits, x, y, mask, x_val, y_val):
    return aggregate(w, logits, x, y, mask)


def numpy_objective(w, logits, x, y, mask, x_val, y_val):
    local = []
    for xi, yi, mi in zip(x, y, mask):
        v = w.copy()
        for _ in range(K):
            v = v - LR * np_grad(v, xi, yi, mi)
        local.append(v)
    a = np.exp(logits - logits.max())
    a /= a.sum()
    w1 = (a[:, None] * np.stack(local)).sum(axis=0)
    return np.mean((x_val @ w1 - y_val) ** 2)


def main():
    data = make_data(clients=CLIENTS, client_shift=0.2, corrupted=2)
    x, y, mask, x_val, y_val = data
    value_and_hypergrad = drx.jit(drx.value_and_grad(hyper_objective, argnums=1))
    step = drx.jit(round_program)
    w, logits = np.zeros(x.shape[-1]), np.zeros(CLIENTS)
    uniform_w = w
    for r in range(ROUNDS):
        loss, g = value_and_hypergrad(w, logits, *data)
        if r == 0:  # the hypergradient against central differences of the NumPy loop
            eps, fd = 1e-6, np.zeros(CLIENTS)
            for i in range(CLIENTS):
                e = np.zeros(CLIENTS)
                e[i] = eps
                fd[i] = (numpy_objective(w, logits + e, *data) -
                         numpy_objective(w, logits - e, *data)) / (2 * eps)
            check_close("hypergradient", g, fd, rtol=1e-6)
            check_close("objective", loss, numpy_objective(w, logits, *data))
        logits = logits - HYPER_LR * g
        w = step(w, logits, *data)
        uniform_w = step(uniform_w, np.zeros(CLIENTS), *data)
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        val = lambda v: np.mean((x_val @ v - y_val) ** 2)  # noqa: E731
        print(f"round {r + 1:2d}: validation loss learned {val(w):.5f}, uniform "
              f"{val(uniform_w):.5f}; weights {np.array2string(weights, precision=3)}")
    if not (weights[:2].max() < weights[2:].min() and val(w) < val(uniform_w)):
        raise SystemExit("learned_aggregation: the corrupted clients' weights did not fall")


if __name__ == "__main__":
    main()
