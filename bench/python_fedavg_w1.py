"""W1 driven from Python beside W1 driven from C++, in one process, with identical bits.

Workload W1 (issue 5; bench/w1_model.h, bench/fedavg_w1.cpp): one FedAvg round of a 784-H-H-10
ReLU MLP with softmax cross-entropy, f32, `cohort` clients each taking `steps` local SGD steps
(learning rate 0.05) on batches of `batch`, server = mean of the client models. The Python side
writes the model with the drx package (local steps as drx.lax.scan) and jits the round with
drx.jit; the C++ side is the same round written with drx's C++ API (w1::local_train_scan under
drx::jit) in the test module _drx_cpp_reference (tests/python/cpp_reference.cpp), timed by a
C++ loop (W1Round.time_rounds, std::chrono around each call). Both get the same initial
parameters and data (NumPy arrays), run under the same BLAS-thread policy (drx keeps OpenBLAS on
one thread) and the same thread count (DRX_NUM_THREADS, read by both copies of drx).

Per run and side: one warm-up round (the first run's includes the trace and compile), then
`rounds` timed rounds chained from it; runs alternate which side goes first. Reported: the
median over runs of each run's median s/round, Python / C++, GFLOP/s (w1_model.h's count), and
whether the two sides' final parameters are bitwise identical (exit status 1 if not).
Issue 32's target: Python within 5% of C++. Then tracing and compiling the round afresh on
each side (the first call of a new jitted function, on one client with one example a step so
that running it costs next to nothing): issue 33's target is Python at most 2x C++.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_fedavg_w1.py [--runs 3] [--rounds 7]
    PYTHONPATH=build/python /usr/bin/python3 bench/python_fedavg_w1.py --smoke
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import drx  # drx reads DRX_NUM_THREADS at its first parallel op, so --threads may follow

IN, CLASSES, LEARNING_RATE = 784, 10, 0.05


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cohort", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds per run and side")
    ap.add_argument("--runs", type=int, default=3, help="runs per side (interleaved)")
    ap.add_argument("--threads", type=int, default=0,
                    help="drx's thread count on both sides (DRX_NUM_THREADS; default: every "
                         "hardware thread)")
    ap.add_argument("--smoke", action="store_true",
                    help="cohort 4, 2 steps of batch 8, hidden 16, 2 rounds, 1 run (explicit "
                         "sizes given with it win)")
    args = ap.parse_args(argv)
    if args.smoke:
        given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
        for name, value in (("cohort", 4), ("steps", 2), ("batch", 8), ("hidden", 16),
                            ("rounds", 2), ("runs", 1)):
            if f"--{name}" not in given:
                setattr(args, name, value)
    for name in ("cohort", "steps", "batch", "hidden", "rounds", "runs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    return args


# ---- the model, as bench/w1_model.h writes it in C++ -----------------------------------------
def loss(p, x, labels):
    h = drx.nn.relu(x @ p["w1"] + p["b1"])
    h = drx.nn.relu(h @ p["w2"] + p["b2"])
    logits = h @ p["w3"] + p["b3"]
    return -(drx.nn.log_softmax(logits) * drx.nn.one_hot(labels, CLASSES)).sum(axis=1).mean()


def sgd_step(p, xb, yb):
    grads = drx.grad(loss)(p, xb, yb)
    return drx.tree_util.tree_map(lambda w, dw: w - LEARNING_RATE * dw, p, grads)


def local_train_scan(p, x, y, steps, batch):
    per_step = (x.reshape(steps, batch, IN), y.reshape(steps, batch))
    return drx.lax.scan(lambda c, b: (sgd_step(c, b[0], b[1]), None), p, per_step)[0]


def round_program(cohort, steps, batch):
    """One W1 FedAvg round as a drx.program (jit it)."""
    @drx.program(placements={"clients": cohort}, in_placements=["", "clients", "clients"])
    def fedavg_round(server, xs, ys):
        clients = drx.map_fn(lambda p, x, y: local_train_scan(p, x, y, steps, batch),
                             (drx.broadcast(server), xs, ys))
        return drx.reduce_mean(clients)

    return fedavg_round


def make_inputs(cohort, steps, batch, hidden, seed=0):
    """He-normal weights and zero biases (f32), uniform [0, 1) inputs, uniform labels (i32)."""
    rng = np.random.default_rng(seed)
    dims = [IN, hidden, hidden, CLASSES]
    params = {}
    for l in range(3):
        params[f"w{l + 1}"] = rng.normal(0.0, np.sqrt(2.0 / dims[l]),
                                         size=(dims[l], dims[l + 1])).astype(np.float32)
        params[f"b{l + 1}"] = np.zeros(dims[l + 1], np.float32)
    xs = rng.random((cohort, steps * batch, IN), dtype=np.float32)
    ys = rng.integers(0, CLASSES, size=(cohort, steps * batch), dtype=np.int32)
    return params, xs, ys


def round_flops(cohort, steps, batch, hidden):
    """w1::round_flops: 3 x (the forward pass's multiply-adds x 2) per example."""
    return cohort * steps * batch * 2.0 * (IN * hidden + hidden * hidden + hidden * CLASSES) * 3.0


def bitwise_equal(a, b):
    """Same keys, dtypes, shapes and bits."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        u = {4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        if not np.array_equal(x.view(u), y.view(u)):
            return False
    return True


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")),
                        "?")
    except OSError:
        return "?"


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        os.environ["DRX_NUM_THREADS"] = str(args.threads)  # read by both copies of drx
    try:
        import _drx_cpp_reference as ref
    except ImportError as e:
        print(f"python_fedavg_w1: the C++ reference module is not built ({e}); build the "
              "drx_cpp_reference target (DRX_BUILD_TESTS=ON)", file=sys.stderr)
        return 2
    drx.set_blas_thread_control(True)
    ref.set_blas_thread_control(True)

    c, s, b, h = args.cohort, args.steps, args.batch, args.hidden
    params, xs, ys = make_inputs(c, s, b, h)
    py_round = drx.jit(round_program(c, s, b))
    cpp_round = ref.W1Round(c, s, b, h)
    flops = round_flops(c, s, b, h)
    assert flops == cpp_round.flops

    def run_python():
        t0 = time.perf_counter()
        p = py_round(params, xs, ys)  # warm-up
        warm = time.perf_counter() - t0
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            p = py_round(p, xs, ys)
            times.append(time.perf_counter() - t0)
        return warm, times, p

    def run_cpp():
        t0 = time.perf_counter()
        p = cpp_round(params, xs, ys)  # warm-up
        warm = time.perf_counter() - t0
        times = cpp_round.time_rounds(p, xs, ys, args.rounds)
        return warm, times, cpp_round.final_params()

    py_runs, cpp_runs, identical = [], [], True
    for run in range(args.runs):
        order = [("python", run_python), ("c++", run_cpp)]
        if run % 2:
            order.reverse()
        finals = {}
        for side, fn in order:
            warm, times, final = fn()
            finals[side] = final
            (py_runs if side == "python" else cpp_runs).append(statistics.median(times))
            print(f"run {run + 1} {side:6s}: warm-up round {warm * 1e3:.2f} ms; "
                  f"{args.rounds} rounds median {statistics.median(times) * 1e3:.2f} ms, "
                  f"min {min(times) * 1e3:.2f} ms")
        same = bitwise_equal(finals["python"], finals["c++"])
        identical = identical and same
        print(f"run {run + 1}: final parameters bitwise identical: {'yes' if same else 'NO'}")

    # Tracing and compiling (issue 33: Python at most 2x C++): fresh jitted functions of W1's
    # round on both sides, first called on one client holding one example per step, so that
    # running the round (about 0.1 ms) hides nothing of the trace and compile; the program is
    # W1's (the same ops, the scan over `steps`, the same widths) but for those two sizes.
    tiny_params, tiny_xs, tiny_ys = make_inputs(1, s, 1, h, seed=1)
    py_first, cpp_first = [], []
    for run in range(max(args.runs, 5)):
        for side in (("python", "c++") if run % 2 == 0 else ("c++", "python")):
            if side == "python":
                fresh = drx.jit(round_program(1, s, 1))
                t0 = time.perf_counter()
                fresh(tiny_params, tiny_xs, tiny_ys)
                py_first.append(time.perf_counter() - t0)
            else:
                fresh = ref.W1Round(1, s, 1, h)
                t0 = time.perf_counter()
                fresh(tiny_params, tiny_xs, tiny_ys)
                cpp_first.append(time.perf_counter() - t0)

    py_med, cpp_med = statistics.median(py_runs), statistics.median(cpp_runs)
    py_compile, cpp_compile = statistics.median(py_first), statistics.median(cpp_first)
    print(f"cpu: {cpu_name()}; drx threads: {ref.num_threads()} (DRX_NUM_THREADS="
          f"{os.environ.get('DRX_NUM_THREADS', 'unset')}); BLAS-thread control on both sides")
    print(f"W1 FedAvg round: cohort {c}, {s} steps x batch {b}, MLP {IN}-{h}-{h}-{CLASSES}, f32, "
          f"local steps in a scan; {args.runs} runs x {args.rounds} rounds per side")
    print(f"  C++    (drx::jit, C++ loop):      median {cpp_med * 1e3:.3f} ms/round, "
          f"{flops / cpp_med * 1e-9:.3f} GFLOP/s")
    print(f"  Python (drx.jit, Python loop):    median {py_med * 1e3:.3f} ms/round, "
          f"{flops / py_med * 1e-9:.3f} GFLOP/s")
    print(f"  Python / C++ = {py_med / cpp_med:.4f} (target <= 1.05); traces: Python "
          f"{py_round.trace_count}, C++ {cpp_round.trace_count}; bits identical: "
          f"{'yes' if identical else 'NO'}")
    print(f"  trace + compile (a fresh jit's first call on one client, one example a step; "
          f"median of {len(py_first)}): C++ {cpp_compile * 1e3:.1f} ms, Python "
          f"{py_compile * 1e3:.1f} ms, Python / C++ = {py_compile / cpp_compile:.2f} "
          f"(target <= 2)")
    if not identical:
        print("python_fedavg_w1: the Python and C++ rounds' parameters differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
