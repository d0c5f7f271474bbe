"""Hierarchical FedAvg from Python, with nested placements: 4 edge groups of 8 clients each;
every server round each group runs two FedAvg rounds among its clients (three local SGD steps
each) and the server averages the groups. The program also gives the gradient of the loss after
the round with respect to the clients' learning rate. It runs on a mesh of 4 groups and must be
bitwise the one-device result; rounds are checked against float64 NumPy loops and the gradient
against central differences.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/hierarchical_fedavg.py
"""
import numpy as np

import drx
from _algorithms import check_close, client_loss, make_data, np_grad, np_loss

GROUPS, CLIENTS, K, GROUP_ROUNDS, ROUNDS = 4, 8, 3, 2, 6
PLACEMENTS = {"groups": GROUPS, "clients": CLIENTS}
PLACED = ["", "", "groups.clients", "groups.clients", "groups.clients"]


def two_level_round(w, lr, x, y, mask):
    # Server values reach a map_fn body only as its arguments: lr is broadcast with w.
    def group(wg, lrg, xg, yg, mg):
        def client(v, lri, xi, yi, mi):
            return drx.lax.fori_loop(
                0, K, lambda i, u: u - lri * drx.grad(client_loss)(u, xi, yi, mi), v)

        for _ in range(GROUP_ROUNDS):
            wg = drx.reduce_mean(drx.map_fn(client, (drx.broadcast(wg, "clients"),
                                                     drx.broadcast(lrg, "clients"), xg, yg, mg)))
        return wg

    return drx.reduce_mean(drx.map_fn(group, (drx.broadcast(w, "groups"),
                                              drx.broadcast(lr, "groups"), x, y, mask)))


def loss_after(w, lr, x, y, mask):
    w1 = two_level_round(w, lr, x, y, mask)
    per_group = drx.map_fn(lambda wg, xg, yg, mg: average_loss_in_group(wg, xg, yg, mg),
                           (drx.broadcast(w1, "groups"), x, y, mask))
    return drx.reduce_mean(per_group)


def average_loss_in_group(wg, xg, yg, mg):
    return drx.reduce_mean(drx.map_fn(client_loss, (drx.broadcast(wg, "clients"), xg, yg, mg)))


@drx.program(placements=PLACEMENTS, in_placements=PLACED)
def server_round(w, lr, x, y, mask):
    loss, (dw, dlr) = drx.value_and_grad(loss_after, argnums=(0, 1))(w, lr, x, y, mask)
    return two_level_round(w, lr, x, y, mask), loss, dw, dlr


def numpy_two_level(w, lr, x, y, mask):
    groups = []
    for xg, yg, mg in zip(x, y, mask):
        wg = w
        for _ in range(GROUP_ROUNDS):
            local = []
            for xi, yi, mi in zip(xg, yg, mg):
                v = wg
                for _ in range(K):
                    v = v - lr * np_grad(v, xi, yi, mi)
                local.append(v)
            wg = np.mean(local, axis=0)
        groups.append(wg)
    return np.mean(groups, axis=0)


def numpy_loss_after(w, lr, x, y, mask):
    w1 = numpy_two_level(w, lr, x, y, mask)
    return np.mean([np_loss(w1, *d) for d in zip(x.reshape(-1, *x.shape[2:]),
                                                  y.reshape(-1, y.shape[-1]),
                                                  mask.reshape(-1, mask.shape[-1]))])


def main():
    x, y, mask, _, _ = make_data(clients=GROUPS * CLIENTS, client_shift=0.3)
    x, y, mask = (a.reshape(GROUPS, CLIENTS, *a.shape[1:]) for a in (x, y, mask))
    lr = 0.05
    on_one = drx.jit(server_round)
    on_mesh = drx.jit(server_round, mesh=drx.Mesh({"groups": GROUPS}))
    w = np.zeros(x.shape[-1])
    for r in range(ROUNDS):
        out = on_one(w, lr, x, y, mask)
        for a, b in zip(out, on_mesh(w, lr, x, y, mask)):
            if not np.array_equal(a, b):
                raise SystemExit(f"round {r + 1}: the mesh of {GROUPS} groups changed the bits")
        w1, loss, dw, dlr = out
        check_close(f"round {r + 1} model", w1, numpy_two_level(w, lr, x, y, mask))
        check_close(f"round {r + 1} loss", loss, numpy_loss_after(w, lr, x, y, mask))
        if r == 0:
            eps = 1e-6
            fd = (numpy_loss_after(w, lr + eps, x, y, mask) -
                  numpy_loss_after(w, lr - eps, x, y, mask)) / (2 * eps)
            check_close("d loss / d lr", dlr, fd, rtol=1e-6)
        print(f"round {r + 1}: loss after the round {float(loss):.6f}, |dL/dw| "
              f"{np.linalg.norm(dw):.4f}, dL/dlr {float(dlr):.4f}")
        w = w1


if __name__ == "__main__":
    main()
