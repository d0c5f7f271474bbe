"""drx.dist under mpirun: a DrJAX FedAvg round written in Python, run on a mesh whose clients
axis spans the ranks (each rank supplying only its own clients' rows), must be bitwise the
round of one process, as must its gradient with respect to the server's parameters and step
size, and the per-client losses it returns placed (collected on rank 0 with gather_rows).
The one-process reference is computed on every rank, by a plain drx.jit of the same functions
on all the rows. 7 clients: an uneven split over 2 and over 3 ranks.

    mpirun -np 2 /usr/bin/python3 tests/python/mpi_fedavg.py --ranks 2   (ctest mpi.python.*)
"""
import argparse
import sys
import traceback

import numpy as np

import drx
import drx.dist

CLIENTS, EXAMPLES, FEATURES, HIDDEN = 7, 6, 5, 4


def loss(params, x, y):
    h = drx.numpy.tanh(x @ params["w1"] + params["b1"])
    return ((h @ params["w2"] - y) ** 2).mean()


def client_update(params, x, y):
    step = lambda i, p: drx.tree_util.tree_map(lambda a, g: a - 0.1 * g, p,
                                               drx.grad(loss)(p, x, y))
    return drx.lax.fori_loop(0, 3, step, params)


@drx.program(placements={"clients": CLIENTS})
def fedavg_round(params, xs, ys, weights):
    """The weighted mean of the clients' updated parameters, the mean of their losses, and
    (placed) each client's loss before its update."""
    locals_ = drx.map_fn(client_update, (drx.broadcast(params), xs, ys))
    losses = drx.map_fn(loss, (drx.broadcast(params), xs, ys))
    return drx.reduce_weighted_mean(locals_, weights), drx.reduce_mean(losses), losses


def loss_after_round(server_lr, params, xs, ys, weights):
    """The cohort's mean loss after one round whose server step is server_lr (differentiated
    with respect to server_lr and params)."""
    new, _, _ = fedavg_round(params, xs, ys, weights)
    moved = drx.tree_util.tree_map(lambda p, n: p + server_lr * (n - p), params, new)
    _, mean_loss, _ = fedavg_round(moved, xs, ys, weights)
    return mean_loss


def data():
    rng = np.random.default_rng(33)
    params = {"w1": rng.normal(size=(FEATURES, HIDDEN)).astype(np.float32),
              "b1": rng.normal(size=HIDDEN).astype(np.float32),
              "w2": rng.normal(size=HIDDEN).astype(np.float32)}
    xs = rng.normal(size=(CLIENTS, EXAMPLES, FEATURES)).astype(np.float32)
    ys = rng.normal(size=(CLIENTS, EXAMPLES)).astype(np.float32)
    weights = rng.uniform(1, 5, size=CLIENTS).astype(np.float32)
    return params, xs, ys, weights


def same_bits(what, got, want):
    got_leaves, want_leaves = drx.tree_util.tree_leaves(got), drx.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, g.shape, w.dtype,
                                                            w.shape)
        assert g.tobytes() == w.tobytes(), f"{what}: not bitwise equal:\n{g}\n{w}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, required=True, help="the ranks mpirun starts")
    args = parser.parse_args()
    drx.set_blas_thread_control(True)

    world = drx.dist.init(timeout_s=120)
    assert drx.dist.init() is world  # idempotent
    assert world.size == args.ranks, (world.size, args.ranks)
    params, xs, ys, weights = data()

    # One process: every client's rows, drx's default mesh.
    want_round = drx.jit(fedavg_round)(params, xs, ys, weights)
    grad_fn = drx.grad(loss_after_round, argnums=(0, 1))
    want_grad = drx.jit(grad_fn)(1.0, params, xs, ys, weights)

    # The ranks: each supplies its own clients' rows only.
    first, end = world.clients(CLIENTS)
    assert (first, end) == (CLIENTS * world.rank // world.size,
                            CLIENTS * (world.rank + 1) // world.size)
    mine = lambda a: drx.dist.place_rows(a[first:end], CLIENTS, world)
    pxs, pys, pw = mine(xs), mine(ys), mine(weights)
    assert not pxs[:first].any() and not pxs[end:].any()  # the others' rows are 0
    for devices in (1, 2):
        mesh = world.mesh("clients", devices_per_process=devices)
        assert mesh.axes == {"clients": devices * world.size}, mesh.axes
        assert "processes" in repr(mesh), repr(mesh)
        new, mean_loss, losses = drx.jit(fedavg_round, mesh=mesh)(params, pxs, pys, pw)
        same_bits(f"round ({devices} devices a rank)", (new, mean_loss), want_round[:2])
        # A placed result holds this rank's rows; rank 0 collects them all.
        same_bits("local rows", drx.dist.local_rows(losses, world), want_round[2][first:end])
        gathered = drx.dist.gather_rows(losses, world, "losses")
        if world.is_root:
            same_bits("gathered losses", gathered, want_round[2])
        got_grad = drx.jit(grad_fn, mesh=mesh)(1.0, params, pxs, pys, pw)
        same_bits(f"gradient ({devices} devices a rank)", got_grad, want_grad)

    # Other ranks' rows are never read: NaN there changes nothing.
    ours = (np.arange(CLIENTS) >= first) & (np.arange(CLIENTS) < end)
    poison = lambda a: np.where(ours.reshape((-1,) + (1,) * (a.ndim - 1)), a,
                                np.nan).astype(a.dtype)
    mesh = world.mesh()
    got = drx.jit(fedavg_round, mesh=mesh)(params, poison(xs), poison(ys), poison(weights))
    same_bits("round, NaN in the other ranks' rows", got[:2], want_round[:2])

    # DrJAX's mesh= on map_fn: the enclosing jit compiles for the process mesh.
    @drx.program(placements={"clients": CLIENTS})
    def mean_loss_on(params, xs, ys):
        return drx.reduce_mean(drx.map_fn(loss, (drx.broadcast(params), xs, ys), mesh=mesh))

    same_bits("mesh= of map_fn", drx.jit(mean_loss_on)(params, pxs, pys), want_round[1])

    # Bytes between the ranks.
    assert world.broadcast(b"from root" if world.is_root else b"ignored") == b"from root"
    parts = world.gather(str(world.rank).encode())
    assert parts == ([str(r).encode() for r in range(world.size)] if world.is_root else None)
    assert world.min(10 - world.rank) == 10 - (world.size - 1)
    if world.size > 1:
        assert world.bytes_sent > 0
    world.barrier()
    if world.is_root:
        print(f"mpi_fedavg: a FedAvg round, its gradient and its placed losses are bitwise "
              f"equal to one process on {world.size} ranks")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # one rank's failure ends the job rather than leave the others waiting
        print(f"rank {drx.dist.world().rank if drx.dist._world else '?'}:", file=sys.stderr)
        traceback.print_exc()
        sys.stderr.flush()
        if drx.dist._world is not None and drx.dist.world().size > 1:
            drx.dist.abort_job(1)
        sys.exit(1)
