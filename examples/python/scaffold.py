"""SCAFFOLD (Karimireddy et al. 2020, option II) from Python: each local step is corrected by
control variates. The server keeps its model w, its variate c and one variate per client of
the population (c_all); each round a cohort reads its rows (take, placed at "clients") and the
updated rows go back with .at[cohort].set. Every round is checked against a float64 NumPy
loop, and the population's loss must approach the least possible loss.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/scaffold.py
"""
import numpy as np

import drx
import drx.numpy as dnp
from _algorithms import check_close, client_loss, make_data, np_grad, np_loss

POPULATION, COHORT, K, LR, SERVER_LR, ROUNDS = 16, 8, 5, 0.05, 1.0, 12


def client(w0, c0, ci, x, y, mask):
    def step(i, v):
        return v - LR * (drx.grad(client_loss)(v, x, y, mask) - ci + c0)

    wi = drx.lax.fori_loop(0, K, step, w0)
    return wi - w0, ci - c0 + (w0 - wi) / (K * LR)  # model delta, c_i+


# Everything starts on the server (the cohort's leading size is the placement's, so say so).
@drx.program(placements={"clients": COHORT}, in_placements=[""] * 7)
def scaffold_round(w, c, c_all, cohort, x, y, mask):
    def rows(v):
        return drx.place(dnp.take(v, cohort, axis=0), "clients")

    ci = rows(c_all)
    delta, ci_new = drx.map_fn(client, (drx.broadcast(w), drx.broadcast(c), ci, rows(x),
                                        rows(y), rows(mask)))
    fraction = COHORT / POPULATION
    return (w + SERVER_LR * drx.reduce_mean(delta),
            c + fraction * drx.reduce_mean(ci_new - ci),
            c_all.at[cohort].set(drx.place(ci_new, "")))


def numpy_round(w, c, c_all, cohort, x, y, mask):
    deltas, news = [], []
    for k in cohort:
        v = w.copy()
        for _ in range(K):
            v = v - LR * (np_grad(v, x[k], y[k], mask[k]) - c_all[k] + c)
        deltas.append(v - w)
        news.append(c_all[k] - c + (w - v) / (K * LR))
    c_all = c_all.copy()
    old = c_all[cohort].copy()
    c_all[cohort] = np.stack(news)
    return (w + SERVER_LR * np.mean(deltas, axis=0),
            c + COHORT / POPULATION * np.mean(np.stack(news) - old, axis=0), c_all)


def population_loss(w, x, y, mask):
    return np.mean([np_loss(w, *d) for d in zip(x, y, mask)])


def main():
    x, y, mask, _, _ = make_data(clients=POPULATION, client_shift=0.6)
    dim = x.shape[-1]
    # The least possible population loss: the least-squares fit of the clients' mean loss.
    a = sum(xi.T @ (mi[:, None] * xi) / mi.sum() for xi, mi in zip(x, mask))
    b = sum(xi.T @ (mi * yi) / mi.sum() for xi, yi, mi in zip(x, y, mask))
    best = population_loss(np.linalg.solve(a, b), x, y, mask)
    round_fn = drx.jit(scaffold_round)
    state = ref = (np.zeros(dim), np.zeros(dim), np.zeros((POPULATION, dim)))
    rng = np.random.default_rng(3)
    for r in range(ROUNDS):
        cohort = rng.choice(POPULATION, COHORT, replace=False).astype(np.int32)
        state = round_fn(*state, cohort, x, y, mask)
        ref = numpy_round(*ref, cohort, x, y, mask)
        for name, got, want in zip(("w", "c", "c_all"), state, ref):
            check_close(f"round {r + 1} {name}", got, want)
        gap = population_loss(state[0], x, y, mask) - best
        print(f"round {r + 1:2d}: population loss {best + gap:.6f}, gap to the least {gap:.2e}")
    if not gap < 1e-3:
        raise SystemExit(f"scaffold: the gap to the least loss stayed at {gap}")


if __name__ == "__main__":
    main()
