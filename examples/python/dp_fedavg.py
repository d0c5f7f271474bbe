"""DP-FedAvg (McMahan et al. 2018) from Python, as examples/dp_fedavg_lib.h: each of the 32
clients of the population joins a round with probability q = 0.25 (Poisson sampling, drawn by
the client from its own stream, drx.random.fold_in(k, drx.client_index())), runs K local SGD
steps and clips its update to L2 norm C (drx.privacy.clip_by_l2_norm); the server adds
N(0, (z C)^2) to the sum of the participants' clipped updates and divides by the expected cohort
size q N (drx.privacy.noisy_mean). The rounds run on a mesh of 4 devices and must be bitwise the
one-device result; each round is checked against a float64 NumPy loop (its random draws taken
from drx.random on their own), and drx.privacy.RdpAccountant's epsilon at the integer orders
against the subsampled Gaussian's RDP written out in NumPy. Prints the loss, the cohort size and
epsilon (the accountant's, over its default orders: what examples/dp_fedavg.cpp prints) per
round.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/dp_fedavg.py
"""
import math

import numpy as np

import drx
from _algorithms import average_loss, check_close, client_loss, make_data, np_grad, np_loss

CLIENTS, DEVICES, Q, CLIP, NOISE, K, LR, ROUNDS = 32, 4, 0.25, 0.5, 1.0, 5, 0.05, 15
DELTA, SEED = 1e-3, 0  # delta of the reported (epsilon, delta), below 1 / population
PLACED = ["", "", "clients", "clients", "clients"]


def client(w0, k, x, y, mask):
    joins = drx.random.bernoulli(drx.random.fold_in(k, drx.client_index()), Q)
    v = drx.lax.fori_loop(0, K, lambda i, v: v - LR * drx.grad(client_loss)(v, x, y, mask), w0)
    clipped = drx.privacy.clip_by_l2_norm(v - w0, CLIP).update
    return joins.astype(np.float64) * clipped, joins.astype(np.int32)


@drx.program(placements={"clients": CLIENTS}, in_placements=PLACED)
def dp_round(w, key, x, y, mask):
    sample_key, noise_key = drx.random.split2(key)
    clipped, joined = drx.map_fn(client, (drx.broadcast(w), drx.broadcast(sample_key), x, y,
                                          mask))
    mean = drx.privacy.noisy_mean(drx.reduce_sum(clipped), noise_key, NOISE, CLIP, Q * CLIENTS)
    return w + mean, drx.reduce_sum(joined)


@drx.program(placements={"clients": CLIENTS}, in_placements=["", "clients", "clients", "clients"])
def loss_program(w, x, y, mask):
    return average_loss(w, x, y, mask)


def numpy_round(w, key, x, y, mask):
    """The round in float64 NumPy; only the random draws come from drx.random (on their own:
    client k's participation from fold_in(sample_key, k), the noise of noisy_mean's single
    leaf from split(noise_key, 1)[0])."""
    sample_key, noise_key = drx.random.split2(key)
    total, cohort = np.zeros_like(w), 0
    for k, (xk, yk, mk) in enumerate(zip(x, y, mask)):
        if not drx.random.bernoulli(drx.random.fold_in(sample_key, k), Q):
            continue
        cohort += 1
        v = w.copy()
        for _ in range(K):
            v = v - LR * np_grad(v, xk, yk, mk)
        total += min(1.0, CLIP / np.linalg.norm(v - w)) * (v - w)
    noise = drx.random.normal(drx.random.split(noise_key, 1)[0], w.shape, np.float64)
    return w + (total + NOISE * CLIP * noise) / (Q * CLIENTS), cohort


def numpy_epsilon(rounds, orders):
    """epsilon after `rounds` rounds at integer orders: the Poisson-subsampled Gaussian's RDP
    (Mironov, Talwar, Zhang 2019: log sum_k C(a, k) (1-q)^(a-k) q^k exp((k^2 - k) / (2 z^2)),
    over a - 1) times the rounds, to (epsilon, delta) by Balle et al. 2020's conversion."""
    eps = []
    for a in orders:
        terms = [math.lgamma(a + 1) - math.lgamma(k + 1) - math.lgamma(a - k + 1) +
                 k * math.log(Q) + (a - k) * math.log1p(-Q) + (k * k - k) / (2 * NOISE ** 2)
                 for k in range(a + 1)]
        top = max(terms)
        rdp = rounds * (top + math.log(sum(math.exp(t - top) for t in terms))) / (a - 1)
        eps.append(rdp + math.log((a - 1) / a) - (math.log(DELTA) + math.log(a)) / (a - 1))
    return max(0.0, min(eps))


def bitwise_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main():
    x, y, mask, _, _ = make_data(clients=CLIENTS, min_examples=8)
    on_mesh = drx.jit(dp_round, mesh=drx.Mesh({"clients": DEVICES}))
    on_one, loss_fn = drx.jit(dp_round), drx.jit(loss_program)
    # Poisson sampling, add/remove-one neighbours: the expected cohort q N of N clients.
    accountant = drx.privacy.RdpAccountant("poisson", round(Q * CLIENTS), CLIENTS, NOISE)
    integer_orders = list(range(2, 64)) + [128, 256, 512]
    by_integers = drx.privacy.RdpAccountant("poisson", round(Q * CLIENTS), CLIENTS, NOISE,
                                            orders=integer_orders)
    w = ref = np.zeros(x.shape[-1])
    start = float(loss_fn(w, x, y, mask))
    print(f"DP-FedAvg: {CLIENTS} clients, q = {Q}, clip {CLIP}, noise multiplier {NOISE}, "
          f"{DEVICES} devices")
    print(f"round  0: loss {start:.6f}")
    cohorts = set()
    for r in range(ROUNDS):
        key = drx.random.fold_in(drx.random.key(SEED), r)
        out = on_mesh(w, key, x, y, mask)
        if not all(bitwise_equal(a, b) for a, b in zip(out, on_one(w, key, x, y, mask))):
            raise SystemExit(f"round {r + 1}: the mesh of {DEVICES} devices changed the bits")
        (w, cohort), (ref, ref_cohort) = out, numpy_round(ref, key, x, y, mask)
        check_close(f"round {r + 1} w", w, ref)
        if cohort != ref_cohort:
            raise SystemExit(f"round {r + 1}: {cohort} clients joined, the NumPy loop {ref_cohort}")
        loss = float(loss_fn(w, x, y, mask))
        check_close(f"round {r + 1} loss", loss, np.mean([np_loss(ref, *d) for d in
                                                          zip(x, y, mask)]))
        accountant.step()
        by_integers.step()
        check_close(f"round {r + 1} epsilon", by_integers.epsilon(DELTA).epsilon,
                    numpy_epsilon(r + 1, integer_orders))
        epsilon = accountant.epsilon(DELTA).epsilon
        cohorts.add(int(cohort))
        print(f"round {r + 1:2d}: loss {loss:.6f}, cohort {int(cohort):2d}, epsilon {epsilon:.4g}")
    print(f"(epsilon at delta = {DELTA}; {DEVICES} devices vs 1: bitwise equal)")
    if not (loss < 0.5 * start and len(cohorts) > 1):
        raise SystemExit(f"dp_fedavg: the loss did not fall below half its start ({start} -> "
                         f"{loss}) or the cohort never changed size ({cohorts})")


if __name__ == "__main__":
    main()
