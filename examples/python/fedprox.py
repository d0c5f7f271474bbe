"""FedProx (Li et al. 2020) from Python: FedAvg whose clients add (mu/2) ||v - w||^2 to their
loss, which holds heterogeneous clients near the server's model, averaged with weights by the
clients' example counts. Each round is checked against a float64 NumPy loop over the clients.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fedprox.py
"""
import numpy as np

import drx
import drx.numpy as dnp
from _algorithms import average_loss, check_close, client_loss, make_data, np_grad, np_loss

CLIENTS, K, LR, MU, ROUNDS = 8, 5, 0.05, 0.1, 10


def prox_loss(v, w0, x, y, mask):
    return client_loss(v, x, y, mask) + 0.5 * MU * dnp.sum((v - w0) ** 2)


def client(w0, x, y, mask):
    step = lambda i, v: v - LR * drx.grad(prox_loss)(v, w0, x, y, mask)  # noqa: E731
    return drx.lax.fori_loop(0, K, step, w0)


@drx.program(placements={"clients": CLIENTS})
def fedprox_round(w, x, y, mask):
    local = drx.map_fn(client, (drx.broadcast(w), x, y, mask))
    counts = drx.map_fn(dnp.sum, mask)
    return drx.reduce_weighted_mean(local, counts), average_loss(w, x, y, mask)


def numpy_round(w, x, y, mask):
    local = []
    for xi, yi, mi in zip(x, y, mask):
        v = w.copy()
        for _ in range(K):
            v = v - LR * (np_grad(v, xi, yi, mi) + MU * (v - w))
        local.append(v)
    counts = mask.sum(axis=1)
    loss = np.mean([np_loss(w, *d) for d in zip(x, y, mask)])
    return (counts[:, None] * np.stack(local)).sum(axis=0) / counts.sum(), loss


def main():
    x, y, mask, _, _ = make_data(clients=CLIENTS, min_examples=4)
    round_fn = drx.jit(fedprox_round)
    w = w_ref = np.zeros(x.shape[-1])
    losses = []
    for r in range(ROUNDS):
        (w, loss), (w_ref, loss_ref) = round_fn(w, x, y, mask), numpy_round(w_ref, x, y, mask)
        check_close(f"round {r + 1}", w, w_ref)
        check_close(f"round {r + 1} loss", loss, loss_ref)
        losses.append(float(loss))
        print(f"round {r + 1:2d}: clients' mean loss {losses[-1]:.6f}")
    if not losses[-1] < 0.25 * losses[0]:
        raise SystemExit(f"fedprox: the loss did not fall ({losses[0]} -> {losses[-1]})")


if __name__ == "__main__":
    main()
