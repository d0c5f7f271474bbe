"""DiLoCo (Douillard et al. 2023) from Python, as examples/diloco_lib.h: each of 4 workers runs
H = 10 inner AdamW steps (drx.optim.adamw; its state is a fori_loop carry and stays with the
worker from one outer step to the next, placed at "clients"), and the server applies SGD with
Nesterov momentum (drx.optim.sgd(0.7, 0.5, nesterov=True)) to the pseudo-gradient
w - mean(w_i). Every outer step is checked against a float64 NumPy loop with AdamW and Nesterov
SGD written out as optax defines them: the model, the outer momentum buffer and every worker's
AdamW moments (to 1e-12 relative; the signed ones, mu and the buffer, relative to their largest
entry) and step counts (exactly). Prints the workers' mean loss and its gap to the least possible
loss per outer step.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/diloco.py
"""
import numpy as np

import drx
from _algorithms import average_loss, check_close, client_loss, make_data, np_grad, np_loss

WORKERS, H, ROUNDS = 4, 10, 12
LR, B1, B2, EPS, WEIGHT_DECAY = 0.02, 0.9, 0.999, 1e-8, 1e-4  # inner AdamW
OUTER_LR, OUTER_MOMENTUM = 0.7, 0.5  # the paper's momentum is 0.9 (for language models)
INNER = drx.optim.adamw(LR, B1, B2, EPS, WEIGHT_DECAY)
OUTER = drx.optim.sgd(OUTER_LR, OUTER_MOMENTUM, nesterov=True)
PLACED = ["", "", "clients", "clients", "clients", "clients"]


def worker(w0, s0, x, y, mask):
    def step(i, carry):
        v, s = carry
        updates, s = INNER.update(drx.grad(client_loss)(v, x, y, mask), s, v)
        return drx.optim.apply_updates(v, updates), s

    return drx.lax.fori_loop(0, H, step, (w0, s0))


@drx.program(placements={"clients": WORKERS}, in_placements=PLACED)
def outer_step(w, outer_state, inner_states, x, y, mask):
    local, inner_states = drx.map_fn(worker, (drx.broadcast(w), inner_states, x, y, mask))
    updates, outer_state = OUTER.update(w - drx.reduce_mean(local), outer_state, w)
    w = drx.optim.apply_updates(w, updates)
    return w, outer_state, inner_states, average_loss(w, x, y, mask)


@drx.program(placements={"clients": WORKERS}, in_placements=[""])
def inner_init(w):
    return drx.broadcast(INNER.init(w))  # every worker's fresh AdamW state


def check_scaled(name, got, want, rtol=1e-12):
    """check_close for arrays of signed averages (AdamW's first moments, the Nesterov buffer)
    whose entries pass near zero as the gradients change sign: such an entry is a difference of
    nearly equal numbers and keeps fewer relative digits (8.5e-13 for a first moment of 3e-5
    here, where the rest agree to 1e-14), so the error is measured against the array's largest
    entry (1e-15 to 7e-14 here)."""
    got, want = np.asarray(got), np.asarray(want)
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    if not err <= rtol:
        raise SystemExit(f"{name}: drx and the float64 loop differ (error {err:.3g} of the "
                         "largest entry)")


def numpy_outer_step(w, b, m, v, t, x, y, mask):
    """optax's adamw (bias-corrected Adam plus decoupled weight decay) and sgd with Nesterov
    momentum (trace: b = g + mu b; update -lr (g + mu b)) in float64; m, v [workers, dim] and
    t [workers] are the workers' AdamW states (updated in place)."""
    local = []
    for k, (xk, yk, mk) in enumerate(zip(x, y, mask)):
        p = w.copy()
        for _ in range(H):
            g = np_grad(p, xk, yk, mk)
            t[k] += 1
            m[k] = B1 * m[k] + (1 - B1) * g
            v[k] = B2 * v[k] + (1 - B2) * g * g
            m_hat, v_hat = m[k] / (1 - B1 ** t[k]), v[k] / (1 - B2 ** t[k])
            p = p - LR * (m_hat / (np.sqrt(v_hat) + EPS) + WEIGHT_DECAY * p)
        local.append(p)
    g = w - np.mean(local, axis=0)
    b = g + OUTER_MOMENTUM * b
    w = w - OUTER_LR * (g + OUTER_MOMENTUM * b)
    return w, b, np.mean([np_loss(w, *d) for d in zip(x, y, mask)])


def main():
    # Workers with nearly i.i.d. shards, as in the paper.
    x, y, mask, _, _ = make_data(clients=WORKERS, examples=32, min_examples=32, client_shift=0.1)
    dim = x.shape[-1]
    a = sum(xi.T @ (mi[:, None] * xi) / mi.sum() for xi, mi in zip(x, mask))
    rhs = sum(xi.T @ (mi * yi) / mi.sum() for xi, yi, mi in zip(x, y, mask))
    best = np.mean([np_loss(np.linalg.solve(a, rhs), *d) for d in zip(x, y, mask)])
    step = drx.jit(outer_step)
    w = np.zeros(dim)
    outer_state, inner_states = OUTER.init(w), drx.jit(inner_init)(w)
    ref_w, ref_b = w, np.zeros(dim)
    ref_m, ref_v, ref_t = np.zeros((WORKERS, dim)), np.zeros((WORKERS, dim)), np.zeros(WORKERS)
    start = np.mean([np_loss(w, *d) for d in zip(x, y, mask)]) - best
    print(f"DiLoCo: {WORKERS} workers, H = {H} inner AdamW steps, outer Nesterov lr {OUTER_LR} "
          f"momentum {OUTER_MOMENTUM}")
    print(f"outer  0: workers' loss {best + start:.6f}, gap to the least {start:.3e}")
    for r in range(ROUNDS):
        w, outer_state, inner_states, loss = step(w, outer_state, inner_states, x, y, mask)
        ref_w, ref_b, ref_loss = numpy_outer_step(ref_w, ref_b, ref_m, ref_v, ref_t, x, y, mask)
        adam = inner_states[0]  # adamw's state: (scale_by_adam's, weight decay's (), lr's ())
        check_close(f"outer step {r + 1} w", w, ref_w)
        check_scaled(f"outer step {r + 1} Nesterov buffer", outer_state[0]["trace"], ref_b)
        check_scaled(f"outer step {r + 1} AdamW mu", adam["mu"], ref_m)
        check_close(f"outer step {r + 1} AdamW nu", adam["nu"], ref_v)
        if not np.array_equal(adam["count"], ref_t) or adam["count"].shape != (WORKERS,):
            raise SystemExit(f"outer step {r + 1}: AdamW counts {adam['count']}, want {ref_t}")
        check_close(f"outer step {r + 1} loss", loss, ref_loss)
        gap = float(loss) - best
        print(f"outer {r + 1:2d}: workers' loss {float(loss):.6f}, gap to the least {gap:.3e}")
    if not gap < 0.01 * start:
        raise SystemExit(f"diloco: the gap to the least loss stayed at {gap} (start {start})")


if __name__ == "__main__":
    main()
