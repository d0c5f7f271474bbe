#!/usr/bin/python3
"""Timing peer (issue 34): one FedAvg round of McMahan et al.'s CNN in PyTorch.

The model of `torch_fedavg_fmnist.py --model cnn`, which the drx bench
`fedavg_cnn_round` matches: rows of 784 pixels reshaped to [B, 1, 28, 28]
(NCHW); conv 5x5 1->32, padding 2, bias, ReLU, max-pool 2x2 stride 2; conv 5x5
32->64, padding 2, bias, ReLU, max-pool 2x2; flatten (3136); dense 3136->512,
ReLU; dense 512->10; softmax cross-entropy. He-normal weights, zero biases.

A round: `--cohort` clients each start from the server model and take `--steps`
plain SGD steps (lr 0.05) on batches of `--batch` examples of their own; the
server model becomes the mean of the client models. Data is synthetic with
Fashion-MNIST's shapes (x uniform in [0, 1), labels uniform in 0..9): the time
does not depend on the values. Rounds are chained; one warm-up round, then
`--rounds` timed rounds give the median and the minimum.

Variants: `loop`, a Python loop over clients, each a torch.nn.Module trained
with torch.optim.SGD (what FL simulators do); `vmap`, functorch's vmap of a
functional client update (functorch.grad through the local steps) over the
clients, the batched form of the W1 peer (shared/peers/torch_fedavg.py).
Precisions: `f32`; `bf16`, each forward pass and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (parameters, gradients and the SGD
update stay f32). A variant that fails under this torch version (e.g. vmap
without a batching rule) prints a JSON line with "error" instead.

FLOPs, counted by hand per example (multiply-add = 2):
  conv0: 2 * (32*28*28 outputs) * 1 * 25    =  1,254,400
  conv1: 2 * (64*14*14 outputs) * 32 * 25   = 20,070,400
  dense: 2 * 3136 * 512 + 2 * 512 * 10      =  3,221,504
  forward                                   = 24,546,304 (24.5 MFLOP)
A training step counts 3x the forward (backward = 2x forward; conv0's unneeded
input gradient is counted all the same), so a round is
cohort * steps * batch * 3 * 24,546,304 FLOP (235.6 GFLOP at the defaults).
ReLU, pooling, softmax and the SGD update are not counted.

Prints one JSON line per (variant, precision):
  {"peer": "torch", "model": "cnn", "variant", "precision", "threads", "cohort",
   "steps", "batch", "median_s", "min_s", "gflops"}

  /usr/bin/python3 bench/torch_fedavg_cnn_round.py --threads 1
  /usr/bin/python3 bench/torch_fedavg_cnn_round.py --threads 2 --variant vmap --precision bf16
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

LR = 0.05
FWD_FLOPS_PER_EXAMPLE = (2 * 32 * 28 * 28 * 1 * 25 + 2 * 64 * 14 * 14 * 32 * 25
                         + 2 * 3136 * 512 + 2 * 512 * 10)
SHAPES = [(32, 1, 5, 5), (32,), (64, 32, 5, 5), (64,), (512, 3136), (512,), (10, 512), (10,)]


def init_params(gen):
    """He-normal weights N(0, 2 / fan_in), zero biases, in PyTorch's layouts."""
    params = []
    for shape in SHAPES:
        if len(shape) == 1:
            params.append(torch.zeros(shape))
        else:
            fan_in = 1
            for d in shape[1:]:
                fan_in *= d
            params.append(torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5)
    return params


def forward(params, x):
    w0, b0, w1, b1, w2, b2, w3, b3 = params
    h = x.reshape(-1, 1, 28, 28)
    h = F.max_pool2d(F.relu(F.conv2d(h, w0, b0, padding=2)), 2, 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, w1, b1, padding=2)), 2, 2)
    h = F.relu(F.linear(h.flatten(1), w2, b2))
    return F.linear(h, w3, b3)


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv1 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.dense0 = torch.nn.Linear(3136, 512)
        self.dense1 = torch.nn.Linear(512, 10)

    def forward(self, x):
        h = x.reshape(-1, 1, 28, 28)
        h = F.max_pool2d(F.relu(self.conv0(h)), 2, 2)
        h = F.max_pool2d(F.relu(self.conv1(h)), 2, 2)
        h = F.relu(self.dense0(h.flatten(1)))
        return self.dense1(h)


def make_loop_round(X, Y, bf16):
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    cohort, steps = X.shape[0], X.shape[1]

    def round_loop(server):
        acc = [torch.zeros_like(p) for p in server]
        for c in range(cohort):
            with torch.no_grad():
                for p, s in zip(model.parameters(), server):
                    p.copy_(s)
            for s in range(steps):
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    loss = F.cross_entropy(model(X[c, s]), Y[c, s])
                loss.backward()
                opt.step()
            with torch.no_grad():
                for a, p in zip(acc, model.parameters()):
                    a += p
        return [a / cohort for a in acc]

    return round_loop


def make_vmap_round(X, Y, bf16):
    import functorch

    steps = X.shape[1]

    def loss_fn(params, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return F.cross_entropy(forward(params, x), y)

    grad_fn = functorch.grad(loss_fn)

    def client_update(params, xs, ys):
        for s in range(steps):
            g = grad_fn(params, xs[s], ys[s])
            params = [p - LR * gi for p, gi in zip(params, g)]
        return params

    vclient = functorch.vmap(client_update, in_dims=(None, 0, 0))

    def round_vmap(server):
        return [o.mean(0) for o in vclient(server, X, Y)]

    return round_vmap


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cohort", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds, after one warm-up round")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--variant", choices=["loop", "vmap", "both"], default="both")
    ap.add_argument("--precision", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(a.seed)
    X = torch.rand(a.cohort, a.steps, a.batch, 784, generator=gen)
    Y = torch.randint(0, 10, (a.cohort, a.steps, a.batch), generator=gen)
    server0 = init_params(gen)
    flops = a.cohort * a.steps * a.batch * 3 * FWD_FLOPS_PER_EXAMPLE

    variants = ["loop", "vmap"] if a.variant == "both" else [a.variant]
    precisions = ["f32", "bf16"] if a.precision == "both" else [a.precision]
    makers = {"loop": make_loop_round, "vmap": make_vmap_round}
    for variant in variants:
        for precision in precisions:
            row = {"peer": "torch", "model": "cnn", "variant": variant, "precision": precision,
                   "threads": torch.get_num_threads(), "cohort": a.cohort, "steps": a.steps,
                   "batch": a.batch}
            try:
                f = makers[variant](X, Y, precision == "bf16")
                s = f(server0)  # warm-up
                times = []
                for _ in range(a.rounds):
                    t = time.perf_counter()
                    s = f(s)
                    times.append(time.perf_counter() - t)
                if not all(bool(torch.isfinite(p).all()) for p in s):
                    raise RuntimeError("the round produced non-finite parameters")
            except Exception as e:  # a missing batching rule, autocast under functorch, ...
                row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                print(json.dumps(row), flush=True)
                continue
            med = statistics.median(times)
            row.update({"median_s": round(med, 5), "min_s": round(min(times), 5),
                        "gflops": round(flops / med / 1e9, 2), "torch": torch.__version__})
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
