"""What a small jitted call costs from Python, beside the same call from C++ in one run.

The function is exec_bench's BM_Dispatch10OpsJit (ten primitive equations on f32[4] arrays:
the executor's per-call cost, nearly all of it dispatch); the C++ side is that benchmark,
run here; the Python side is drx.jit of the same ten ops, timed per call (best of 5 blocks).
Issue 32's target is a Python call at most 7x the C++ one.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call_overhead.py [--build build]
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np

import drx
from drx import _drx


def op(fn, *ts):
    return drx.Tracer(fn(*[t._value for t in ts]))


def ten_ops(x, y):
    a = x * y
    b = a + x
    c = op(_drx.exp, b)
    d = c - y
    e = op(_drx.tanh, d)
    f = e * e
    g = f / (c + y)
    h = op(_drx.maximum, g, x)
    return h.sum(axis=0)


def python_us(calls=20000, blocks=5):
    f = drx.jit(ten_ops)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, 4).astype(np.float32), rng.uniform(-1, 1, 4).astype(np.float32)
    for _ in range(1000):
        f(x, y)
    best = float("inf")
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(calls):
            f(x, y)
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return best


def cxx_us(build):
    exe = os.path.join(build, "bench", "drx_exec_bench")
    out = subprocess.run([exe, "--benchmark_filter=BM_Dispatch10OpsJit$",
                          "--benchmark_repetitions=5", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[runs[0]["time_unit"]]
    return min(b["real_time"] for b in runs) * unit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    drx.set_blas_thread_control(True)
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    c = cxx_us(args.build)
    p = python_us()
    print(f"cpu: {cpu}")
    print(f"ten ops on f32[4], one jitted call: C++ {c:.2f} us, Python {p:.2f} us, "
          f"Python / C++ = {p / c:.2f}x (target <= 7x)")


if __name__ == "__main__":
    main()
