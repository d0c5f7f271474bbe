#!/usr/bin/env python3
"""FedAvg on Fashion-MNIST in PyTorch with the hyperparameters of `drx fedavg`.

The peer for issue 6: the same model (MLP 784-200-200-10, ReLU, He-normal
weights, zero biases; or, with --model cnn, issue 34's CNN of McMahan et al.),
data (pixels / 255, the same IID / Dirichlet(alpha) /
shards partition schemes), client training (E epochs of batch B over each
client's own data, a fresh shuffle per epoch, the partial last batch kept,
SGD with PyTorch momentum), aggregation (the clients' deltas weighted by their
example counts) and server optimisers (fedavg, fedavgm, fedadam) as drx, from
its own random streams. Prints one JSON line per evaluation and a final one:

  /usr/bin/python3 bench/torch_fedavg_fmnist.py --rounds 250 --partition iid
  /usr/bin/python3 bench/torch_fedavg_fmnist.py --model cnn --client-lr 0.05 --rounds 20

--model cnn (issue 34): each row reshaped to [B, 1, 28, 28] (NCHW); conv 5x5
1->32, padding 2 (SAME), bias, ReLU, max-pool 2x2 stride 2; conv 5x5 32->64,
padding 2, ReLU, max-pool 2x2; flatten (3136); dense 3136->512, ReLU; dense
512->10 logits. He-normal weights N(0, 2 / fan_in) (fan_in = 25 * C_in for a
conv, in_features for a dense layer), zero biases. --hidden is for the MLP only.
--precision bf16 runs each client's forward pass (and loss) under
torch.autocast("cpu", dtype=torch.bfloat16); parameters, gradients, the
optimisers and evaluation stay f32.
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


def cnn():
    """McMahan et al.'s CNN for 28x28 grey images (issue 34), on rows of 784 pixels."""
    layers = [torch.nn.Unflatten(1, (1, 28, 28)),
              torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
              torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
              torch.nn.Flatten(),
              torch.nn.Linear(64 * 7 * 7, 512), torch.nn.ReLU(),
              torch.nn.Linear(512, 10)]
    for layer in layers:
        if isinstance(layer, (torch.nn.Conv2d, torch.nn.Linear)):
            # fan_in mode: 25 * C_in for the convs, in_features for the dense layers.
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            torch.nn.init.zeros_(layer.bias)
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
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], float(np.mean(losses)) if losses else 0.0


def evaluate(model, params, x, y, chunk=0):
    """Test loss and accuracy, in f32. chunk > 0 runs the test set in pieces of that many
    rows (the CNN's activations for 10000 images at once would take about 1 GB)."""
    with torch.no_grad():
        for p, s in zip(model.parameters(), params):
            p.copy_(s)
        if chunk <= 0:
            logits = model(x)
            return (float(torch.nn.functional.cross_entropy(logits, y)),
                    float((logits.argmax(1) == y).float().mean()))
        loss_sum, correct = 0.0, 0
        for i in range(0, len(x), chunk):
            logits = model(x[i:i + chunk])
            loss_sum += float(torch.nn.functional.cross_entropy(logits, y[i:i + chunk], reduction="sum"))
            correct += int((logits.argmax(1) == y[i:i + chunk]).sum())
        return loss_sum / len(x), correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--rounds", type=int, default=650)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--cohort", type=int, default=10)
    ap.add_argument("--partition", choices=["iid", "dirichlet", "shards"], default="iid")
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--shards-per-client", type=int, default=2)
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--hidden", default=None, help="the MLP's hidden widths (default 200,200)")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: clients' forward passes under torch.autocast (CPU, bfloat16)")
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
    if args.model == "cnn" and args.hidden is not None:
        ap.error("--hidden sets the MLP's widths; it does not apply to --model cnn")
    if args.hidden is None:
        args.hidden = "200,200"
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

    if args.model == "cnn":
        model, eval_chunk = cnn(), 1000
    else:
        model, eval_chunk = mlp([int(h) for h in args.hidden.split(",")]), 0
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
            test_loss, acc = evaluate(model, server, x_test, y_test, eval_chunk)
            print(json.dumps({"peer": "torch-fedavg", "round": r, "train_loss": round(round_loss, 5),
                              "test_loss": round(test_loss, 5), "test_accuracy": round(acc, 5),
                              "elapsed_s": round(time.perf_counter() - start, 3)}), flush=True)
    print(json.dumps({"peer": "torch-fedavg", "final": True, "model": args.model,
                      "precision": args.precision, "partition": args.partition,
                      "alpha": args.alpha, "rounds": args.rounds, "test_accuracy": round(acc, 5),
                      "seconds": round(time.perf_counter() - start, 3),
                      "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
