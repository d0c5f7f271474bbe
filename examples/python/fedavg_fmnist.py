"""FedAvg on Fashion-MNIST from Python with `drx fedavg`'s defaults: 100 clients holding an IID
split of the 60000 training images, a seeded cohort of 10 per round, each client running one
epoch of batch-32 SGD (lr 0.1) on the MLP 784-200-200-10 (drx.nn.mlp_init, softmax
cross-entropy), the server taking the example-weighted mean of the clients' models (FedAvg,
server lr 1), and the test accuracy every 10 rounds, for 650 rounds.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fedavg_fmnist.py
    ... fedavg_fmnist.py --rounds 30 --min-accuracy 0.75       # a quick check
    ... fedavg_fmnist.py --round python                        # the round with a Python loss

The data pipeline is NumPy's: the IDX .gz files read with gzip, pixels scaled to [0, 1] as
float32, the partition, cohorts and batches drawn from NumPy generators seeded with the streams
`drx fedavg` derives from --seed (the same scheme, other random numbers; the initial model is
bitwise `drx fedavg`'s). Each round is one compiled drx program over the placement "clients":

- ``--round cpp`` (the default): ``drx.optim.fedavg_round(RoundSpec)``, the C++ core's MLP round
  that `drx fedavg` runs: the clients gather their batches from the shared training set by
  index, and empty steps are skipped exactly;
- ``--round python``: the generic round ``drx.optim.fedavg_round(loss, sgd, server, cohort,
  step_weight=..., prepare=...)`` with the loss, the step weight and the gather written here
  in Python (drx.nn.mlp_apply, drx.nn.softmax_cross_entropy): the same computation.

The test set is evaluated by a drx.jit of drx.nn.mlp_apply and drx.nn.accuracy. If the data
directory is absent (the default one on a machine without the data set), the example says so
and exits 0; with --min-accuracy A it exits 1 when the final test accuracy is below A.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np

import drx
import drx.numpy as dnp

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
CLASSES = 10
MASK64 = (1 << 64) - 1

# The random streams `drx fedavg` derives from --seed (tools/fedavg/train.cpp).
PARTITION_STREAM, INIT_STREAM, COHORT_STREAM, BATCH_STREAM = 1, 2, 3, 4
COHORT_SUBSTREAM = 0xC0401  # drx::data::sample_cohort's


# ---- seeds: drx::data::derive_seed -----------------------------------------------------------
def _mix(z):
    """SplitMix64's finaliser (drx/data/sampling.cpp)."""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def derive_seed(seed, stream, substream=0):
    """drx::data::derive_seed: the seed of a stream (and substream) of --seed."""
    return _mix(_mix(_mix(seed & MASK64) ^ stream) ^ substream)


# ---- data ------------------------------------------------------------------------------------
def read_idx(path, magic, dims):
    """The u8 payload of an IDX file (gzip) as an array of its header's shape."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise SystemExit(f"fedavg_fmnist: reading {path}: {e}") from None
    if len(raw) < 4 + 4 * dims:
        raise SystemExit(f"fedavg_fmnist: {path}: truncated header")
    got, *shape = struct.unpack(f">{1 + dims}I", raw[:4 + 4 * dims])
    if got != magic:
        raise SystemExit(f"fedavg_fmnist: {path}: bad magic number {got:#010x}, expected "
                         f"{magic:#010x}")
    payload = np.frombuffer(raw, np.uint8, offset=4 + 4 * dims)
    if payload.size != int(np.prod(shape)):
        raise SystemExit(f"fedavg_fmnist: {path}: the header promises {int(np.prod(shape))} "
                         f"bytes, the file holds {payload.size}")
    return payload.reshape(shape)


def load_split(data_dir, prefix):
    """(images f32 [N, 784] in [0, 1], labels i32 [N]) as drx::data::load_fashion_mnist."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 0x803, 3)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 0x801, 1)
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        raise SystemExit(f"fedavg_fmnist: {data_dir}: {prefix} holds images {images.shape} and "
                         f"labels {labels.shape}")
    if labels.max(initial=0) >= CLASSES:
        raise SystemExit(f"fedavg_fmnist: {data_dir}: a {prefix} label is outside [0, 10)")
    x = images.reshape(len(images), -1).astype(np.float32) / np.float32(255)
    return x, labels.astype(np.int32)


def partition_iid(n, clients, seed):
    """drx::data::partition_iid's scheme: a seeded permutation of the examples cut into
    `clients` contiguous parts of n // clients (the first n % clients one more), each sorted."""
    order = np.random.default_rng(seed).permutation(n)
    sizes = np.full(clients, n // clients)
    sizes[:n % clients] += 1
    return [np.sort(part) for part in np.split(order, np.cumsum(sizes)[:-1])]


def sample_cohort(clients, cohort, seed, rnd):
    """drx::data::sample_cohort's scheme: `cohort` of `clients` without replacement, sorted,
    from a generator of its own per round."""
    rng = np.random.default_rng(derive_seed(seed, rnd, COHORT_SUBSTREAM))
    return np.sort(rng.choice(clients, size=cohort, replace=False))


def cohort_batches(partition, cohort, seed, rnd, steps, batch, epochs):
    """drx::data::cohort_batches' scheme: client k's examples reshuffled every epoch by a
    generator of (round, k), laid out in batches on a [steps, batch] grid; idx i32 and mask f32
    [cohort, steps, batch] (mask 0 on the padding) and the weights f32 [cohort] (example counts)."""
    idx = np.zeros((len(cohort), steps * batch), np.int32)
    mask = np.zeros((len(cohort), steps * batch), np.float32)
    for j, k in enumerate(cohort):
        rng = np.random.default_rng(derive_seed(seed, rnd, int(k)))
        n = len(partition[k])
        per_epoch = -(-n // batch) * batch  # an epoch's slots: it starts a new batch
        for e in range(epochs):
            idx[j, e * per_epoch:e * per_epoch + n] = rng.permutation(partition[k])
            mask[j, e * per_epoch:e * per_epoch + n] = 1
    weights = np.array([len(partition[k]) for k in cohort], np.float32)
    return idx.reshape(-1, steps, batch), mask.reshape(-1, steps, batch), weights


# ---- the model and the rounds ------------------------------------------------------------------
def batch_loss(params, batch):
    """The mean softmax cross-entropy over a batch's real examples (mask 1)."""
    x, y, mask = batch
    ce = drx.nn.softmax_cross_entropy(drx.nn.mlp_apply(params, x), y)
    return (mask * ce).sum() / dnp.maximum(mask.sum(), 1.0)


def step_examples(batch):
    """A step's real examples: the round skips a step without any."""
    return batch[2].sum()


def gather(shared, data):
    """A client's batches [x, y, mask] with leaves [steps, batch, ...], gathered from the
    training set broadcast to it by its [steps, batch] grid of indices."""
    (x_all, y_all), (idx, mask) = shared, data
    steps, batch = idx.shape
    flat = idx.reshape(steps * batch)
    return (dnp.take(x_all, flat, axis=0).reshape(steps, batch, x_all.shape[1]),
            dnp.take(y_all, flat, axis=0).reshape(steps, batch), mask)


def make_round(kind, args, steps, full_steps):
    """The round as a function (params, state, x_all, y_all, idx, mask, weights) -> dict."""
    server = drx.optim.ServerOptimizer("fedavg", lr=1.0)
    if kind == "cpp":
        return drx.optim.fedavg_round(drx.optim.RoundSpec(
            client=drx.optim.ClientSgd(lr=args.client_lr), server=server, cohort=args.cohort,
            steps=steps, batch=args.batch, full_steps=full_steps))
    r = drx.optim.fedavg_round(batch_loss, drx.optim.sgd(args.client_lr), server, args.cohort,
                               step_weight=step_examples, full_steps=full_steps, prepare=gather)
    return lambda params, state, x_all, y_all, idx, mask, weights: r(
        params, state, {"data": (idx, mask), "weights": weights}, (x_all, y_all))


@drx.jit
def evaluate(params, x, y):
    """(mean cross-entropy, accuracy) of the model on a data set."""
    logits = drx.nn.mlp_apply(params, x)
    return drx.nn.softmax_cross_entropy(logits, y).mean(), drx.nn.accuracy(logits, y)


# ---- the run ---------------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help=f"Fashion-MNIST IDX .gz files (default {DEFAULT_DATA}; if "
                   "the default is absent, a notice and exit 0)")
    p.add_argument("--rounds", type=int, default=650, help="rounds to train (default 650)")
    p.add_argument("--clients", type=int, default=100, help="simulated clients (default 100)")
    p.add_argument("--cohort", type=int, default=10, help="clients per round (default 10)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the partition, init, cohorts and batches (default 0)")
    p.add_argument("--eval-every", type=int, default=10,
                   help="test-set evaluation every N rounds and at the end (default 10)")
    p.add_argument("--min-accuracy", type=float, default=None,
                   help="exit 1 if the final test accuracy is below this (default: no check)")
    p.add_argument("--epochs", type=int, default=1, help="local epochs (default 1)")
    p.add_argument("--batch", type=int, default=32, help="local batch size (default 32)")
    p.add_argument("--client-lr", type=float, default=0.1,
                   help="client SGD learning rate (default 0.1)")
    p.add_argument("--round", choices=("cpp", "python"), default="cpp",
                   help="cpp: drx.optim.fedavg_round(RoundSpec), the C++ MLP round; python: the "
                   "generic round with this file's loss and gather (default cpp)")
    args = p.parse_args(argv)
    for name in ("rounds", "clients", "cohort", "eval_every", "epochs", "batch"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.cohort > args.clients:
        p.error(f"--cohort {args.cohort} exceeds --clients {args.clients}")
    if args.seed < 0:
        p.error("--seed must be non-negative")
    if not args.client_lr > 0:
        p.error("--client-lr must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    # drx splits the products over its own threads, OpenBLAS on one (as `drx fedavg` runs):
    # left to OpenBLAS's threads, concurrent products wait on its lock (5x slower here).
    drx.set_blas_thread_control(True)
    data_dir = args.data or DEFAULT_DATA
    if not os.path.isdir(data_dir):
        if args.data is None:
            print(f"fedavg_fmnist: no Fashion-MNIST in {DEFAULT_DATA} (give --data DIR); "
                  "skipped")
            return 0
        raise SystemExit(f"fedavg_fmnist: --data {data_dir}: no such directory")
    t0 = time.perf_counter()
    x_train, y_train = load_split(data_dir, "train")
    x_test, y_test = load_split(data_dir, "t10k")
    if args.clients > len(x_train):
        raise SystemExit(f"fedavg_fmnist: --clients {args.clients} exceeds the "
                         f"{len(x_train)} training examples")

    partition = partition_iid(len(x_train), args.clients,
                              derive_seed(args.seed, PARTITION_STREAM))
    sizes = [len(part) for part in partition]
    # One program for the run: every cohort runs the largest client's steps (IID: all the
    # same), of which the smallest client's are full (no step without an example).
    steps = args.epochs * -(-max(sizes) // args.batch)
    full_steps = args.epochs * -(-min(sizes) // args.batch)
    round_fn = make_round(args.round, args, steps, full_steps)

    params = drx.nn.mlp_init([x_train.shape[1], 200, 200, CLASSES],
                             derive_seed(args.seed, INIT_STREAM))
    state = drx.optim.ServerOptimizer("fedavg").init(params)
    cohort_seed = derive_seed(args.seed, COHORT_STREAM)
    batch_seed = derive_seed(args.seed, BATCH_STREAM)
    print(f"fedavg_fmnist: {args.clients} clients (IID, {min(sizes)}-{max(sizes)} examples), "
          f"cohort {args.cohort}, {steps} local steps of batch {args.batch}, round "
          f"{args.round}, {drx.num_threads()} threads", flush=True)

    accuracy = float("nan")
    for rnd in range(args.rounds):
        cohort = sample_cohort(args.clients, args.cohort, cohort_seed, rnd)
        idx, mask, weights = cohort_batches(partition, cohort, batch_seed, rnd, steps,
                                            args.batch, args.epochs)
        out = round_fn(params, state, x_train, y_train, idx, mask, weights)
        params, state, train_loss = out["params"], out["state"], float(out["loss"])
        if not np.isfinite(train_loss):
            raise SystemExit(f"fedavg_fmnist: the training loss is {train_loss} at round "
                             f"{rnd + 1}: diverged")
        if (rnd + 1) % args.eval_every == 0 or rnd + 1 == args.rounds:
            test_loss, acc = evaluate(params, x_test, y_test)
            accuracy = float(acc)
            print(f"round {rnd + 1:4d}: train loss {train_loss:.4f}, test loss "
                  f"{float(test_loss):.4f}, test accuracy {accuracy:.4f} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)

    print(f"fedavg_fmnist: test accuracy {accuracy:.4f} after {args.rounds} rounds in "
          f"{time.perf_counter() - t0:.1f} s")
    if args.min_accuracy is not None and not accuracy >= args.min_accuracy:
        print(f"fedavg_fmnist: the test accuracy {accuracy:.4f} is below --min-accuracy "
              f"{args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
