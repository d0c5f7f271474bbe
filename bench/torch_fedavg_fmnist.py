#!/usr/bin/env python3
"""FedAvg on Fashion-MNIST in PyTorch with the hyperparameters of `drx fedavg`.

The peer for issue 6: the same model (MLP 784-200-200-10, ReLU, He-normal
weights, zero biases), data (pixels / 255, the same IID / Dirichlet(alpha) /
shards partition schemes), client training (E epochs of batch B over each
client's own data, a fresh shuffle per epoch, the partial last batch kept,
SGD with PyTorch momentum), aggregation (the clients' deltas weighted by their
example counts) and server optimisers (fedavg, fedavgm, fedadam) as drx, from
its own random streams. Prints one JSON line per evaluation and a final one:

  /usr/bin/python3 bench/torch_fedavg_fmnist.py --rounds 250 --partition iid
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(y.astype(np.int64))


def partition(labels, args, rng):
    n = len(labels)
    if args.partition == "iid":
        return np.array_split(rng.permutation(n), args.clients)
    if args.partition == "dirichlet":
        parts = [[] for _ in range(args.clients)]
        for c in range(int(labels.max()) + 1):
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet([args.alpha] * args.clients)
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(int)
            for k, piece in enumerate(np.split(idx, cuts)):
                parts[k].extend(piece.tolist())
        return [np.array(sorted(p), dtype=np.int64) for p in parts]
    order = np.argsort(labels + rng.random(n), kind="stable")
    shards = np.array_split(order, args.clients * args.shards_per_client)
    deal = rng.permutation(len(shards))
    return [np.concatenate([shards[j] for j in deal[k::args.clients]]) for k in range(args.clients)]


def mlp(hidden):
    dims = [784] + hidden + [10]
    layers = []
    for i in range(len(dims) - 1):
        lin = torch.nn.Linear(dims[i], dims[i + 1])
        torch.nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
        torch.nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i + 2 < len(dims):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def local_train(model, server, x, y, args, gen):
    with torch.no_grad():
        for p, s in zip(model.parameters(), server):
            p.copy_(s)
    opt = torch.optim.SGD(model.parameters(), lr=args.client_lr, momentum=args.client_momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    for _ in range(args.epochs):
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), args.batch):
            b = order[i:i + args.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], float(np.mean(losses)) if losses else 0.0


def evaluate(model, params, x, y):
    with torch.no_grad():
        for p, s in zip(model.parameters(), params):
            p.copy_(s)
        logits = model(x)
        return (float(torch.nn.functional.cross_entropy(logits, y)),
                float((logits.argmax(1) == y).float().mean()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--rounds", type=int, default=650)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--cohort", type=int, default=10)
    ap.add_argument("--partition", choices=["iid", "dirichlet", "shards"], default="iid")
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--shards-per-client", type=int, default=2)
    ap.add_argument("--hidden", default="200,200")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--client-lr", type=float, default=0.1)
    ap.add_argument("--client-momentum", type=float, default=0.0)
    ap.add_argument("--server-opt", choices=["fedavg", "fedavgm", "fedadam"], default="fedavg")
    ap.add_argument("--server-lr", type=float, default=1.0)
    ap.add_argument("--server-momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--max-examples", type=int, default=0, help="use the first N of each split")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    x_train, y_train = load(args.data, "train")
    x_test, y_test = load(args.data, "test")
    if args.max_examples:
        x_train, y_train = x_train[:args.max_examples], y_train[:args.max_examples]
        x_test, y_test = x_test[:args.max_examples], y_test[:args.max_examples]
    parts = partition(y_train.numpy(), args, rng)
    sizes = np.array([len(p) for p in parts], dtype=np.float64)

    model = mlp([int(h) for h in args.hidden.split(",")])
    server = [p.detach().clone() for p in model.parameters()]
    state = {"m": [torch.zeros_like(p) for p in server], "v": [torch.zeros_like(p) for p in server]}
    start = time.perf_counter()
    acc = float("nan")
    for r in range(1, args.rounds + 1):
        cohort = np.sort(rng.choice(args.clients, size=args.cohort, replace=False))
        total = sizes[cohort].sum()
        delta = [torch.zeros_like(p) for p in server]
        round_loss = 0.0
        for k in cohort:
            if sizes[k] == 0:
                continue
            idx = torch.from_numpy(np.asarray(parts[k], dtype=np.int64))
            params, loss = local_train(model, server, x_train[idx], y_train[idx], args, gen)
            w = sizes[k] / total
            round_loss += w * loss
            for d, p, s in zip(delta, params, server):
                d += w * (p - s)
        if total > 0:
            if args.server_opt == "fedavg":
                server = [s + args.server_lr * d for s, d in zip(server, delta)]
            elif args.server_opt == "fedavgm":
                state["m"] = [args.server_momentum * m + d for m, d in zip(state["m"], delta)]
                server = [s + args.server_lr * m for s, m in zip(server, state["m"])]
            else:
                state["m"] = [0.9 * m + 0.1 * d for m, d in zip(state["m"], delta)]
                state["v"] = [0.99 * v + 0.01 * d * d for v, d in zip(state["v"], delta)]
                server = [s + args.server_lr * m / (v.sqrt() + 1e-3)
                          for s, m, v in zip(server, state["m"], state["v"])]
        if r % args.eval_every == 0 or r == args.rounds:
            test_loss, acc = evaluate(model, server, x_test, y_test)
            print(json.dumps({"peer": "torch-fedavg", "round": r, "train_loss": round(round_loss, 5),
                              "test_loss": round(test_loss, 5), "test_accuracy": round(acc, 5),
                              "elapsed_s": round(time.perf_counter() - start, 3)}), flush=True)
    print(json.dumps({"peer": "torch-fedavg", "final": True, "partition": args.partition,
                      "alpha": args.alpha, "rounds": args.rounds, "test_accuracy": round(acc, 5),
                      "seconds": round(time.perf_counter() - start, 3),
                      "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
