"""A FedAvg round in DrJAX's style split into its MapReduce form, written as a plan, and run
with each client's work in a separate process, for a few rounds.

The driver writes the plan (drx.mapreduce_form(...).write_plan) and each client's data as
NAME.npy files; worker processes (multiprocessing, spawned: fresh interpreters sharing nothing
with the driver) read the plan with drx.read_mapreduce_plan and run one client's work each
(form.run_part(stage, "client_work", ...)) from the files, writing its outputs; the driver
aggregates them in drx's canonical order (form.drive's StageAggregator) and runs the server's
parts. Every round must equal the same round run in process by drx.jit, bitwise. The plan names
its values after the round's arguments and results (params/w1, xs, loss, ...), so a round's
params/... results are the next round's inputs of the same names.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/mapreduce_processes.py
"""
import multiprocessing
import os
import sys
import tempfile

import numpy as np

import drx

# Products round as OpenBLAS's thread count decides: keep every process on one thread.
drx.set_blas_thread_control(True)

CLIENTS, EXAMPLES, FEATURES, HIDDEN, ROUNDS = 6, 16, 5, 7, 3


def loss(params, x, y):
    h = drx.numpy.tanh(x @ params["w1"] + params["b1"])
    return ((h @ params["w2"] - y) ** 2).mean()


def client_update(params, x, y, lr=0.1, steps=3):
    for _ in range(steps):
        g = drx.grad(loss)(params, x, y)
        params = drx.tree_util.tree_map(lambda p, d: p - lr * d, params, g)
    return params


@drx.program(placements={"clients": CLIENTS})
def fedavg_round(params, xs, ys, weights):
    updated = drx.map_fn(client_update, (drx.broadcast(params), xs, ys))
    losses = drx.map_fn(loss, (drx.broadcast(params), xs, ys))
    return {"params": drx.reduce_weighted_mean(updated, weights),
            "loss": drx.reduce_mean(losses)}


# ---- a worker process ----------------------------------------------------------------------
_plans = {}


def client_task(job):
    """One client's work of one stage: inputs from the first folder holding each, outputs to
    out_dir. Runs in a worker process, which knows only the plan and the files."""
    plan, stage, client, folders, out_dir = job
    form = _plans.get(plan)
    if form is None:
        form = _plans[plan] = drx.read_mapreduce_plan(plan)
    work = form.stages[stage].client_work
    values = {}
    for name in work.inputs:
        if name == "client_index":
            continue
        found = [d for d in folders if os.path.exists(form.value_file(d, name))]
        if not found:
            raise RuntimeError(f"client {client}: no file for its input '{name}' in {folders}")
        values.update(form.load_values(found[0], [name]))
    outputs = form.run_part(stage, "client_work", values, client=client)
    form.save_values(out_dir, outputs)
    return os.getpid()


# ---- the driver ----------------------------------------------------------------------------
def check(ok, what):
    if not ok:
        sys.exit(f"mapreduce_processes: FAILED: {what}")


def main():
    rng = np.random.default_rng(0)
    params = {"w1": 0.5 * rng.normal(size=(FEATURES, HIDDEN)), "b1": np.zeros(HIDDEN),
              "w2": 0.5 * rng.normal(size=HIDDEN)}
    w_true = rng.normal(size=FEATURES)
    xs = rng.normal(size=(CLIENTS, EXAMPLES, FEATURES))
    ys = np.sin(xs @ w_true) + 0.05 * rng.normal(size=(CLIENTS, EXAMPLES))
    weights = rng.integers(1, 10, size=CLIENTS).astype(np.float64)  # e.g. example counts

    with tempfile.TemporaryDirectory(prefix="drx_mapreduce_processes_") as work:
        run_rounds(work, params, xs, ys, weights)


def run_rounds(work, params, xs, ys, weights):
    form = drx.mapreduce_form(fedavg_round, params, xs, ys, weights)
    plan = form.write_plan(os.path.join(work, "plan"))
    print(f"{form}\n  plan: {plan}")
    for s in form.stages:
        print(f"  {s}")
    # Each client's data, in its own folder (as a client would hold it).
    for i in range(CLIENTS):
        form.save_values(os.path.join(work, "clients", str(i)),
                         form.client_values(i, params, xs, ys, weights))

    # The driver knows the plan and the server's values only.
    driver = drx.read_mapreduce_plan(plan)
    server = form.server_values(params, xs, ys, weights)
    reference = drx.jit(fedavg_round)
    worker_pids = set()
    with multiprocessing.get_context("spawn").Pool(processes=2) as pool:
        for r in range(1, ROUNDS + 1):
            def run_clients(stage, broadcast):
                shared = os.path.join(work, f"round{r}", f"stage{stage.index}", "broadcast")
                driver.save_values(shared, broadcast)
                outs = [os.path.join(work, f"round{r}", f"stage{stage.index}", "clients", str(i))
                        for i in range(CLIENTS)]
                jobs = [(plan, stage.index, i, [os.path.join(work, "clients", str(i)), shared],
                         outs[i]) for i in range(CLIENTS)]
                worker_pids.update(pool.map(client_task, jobs))
                for i in range(CLIENTS):  # in client order: the aggregation's canonical order
                    outputs = driver.load_values(outs[i], stage.client_work.outputs)
                    # Client state a later stage reads stays in the client's folder.
                    driver.save_values(os.path.join(work, "clients", str(i)),
                                       {n: outputs[n] for n in stage.state_out})
                    yield outputs

            results = dict(zip(driver.outputs, driver.drive(server, run_clients)))
            want = reference(params, xs, ys, weights)
            want_leaves = {"loss": want["loss"],
                           **{f"params/{k}": v for k, v in want["params"].items()}}
            for name, value in want_leaves.items():
                check(np.asarray(results[name]).tobytes() == np.asarray(value).tobytes(),
                      f"round {r}: {name} differs from drx.jit's")
            print(f"round {r}: loss {float(results['loss']):.6f}; {CLIENTS} clients in worker "
                  f"processes, bitwise equal to drx.jit's round")
            # The round's params/... results are the next round's inputs of the same names.
            server = {n: results[n] for n in driver.server_inputs}
            params = want["params"]
    check(os.getpid() not in worker_pids and len(worker_pids) >= 1,
          "the clients did not run in worker processes")
    print(f"mapreduce_processes: {ROUNDS} rounds, client work in processes {sorted(worker_pids)}"
          f" (driver {os.getpid()}), all bitwise equal to drx.jit")


if __name__ == "__main__":
    main()
