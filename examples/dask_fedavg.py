#!/usr/bin/python3
"""FedAvg on Fashion-MNIST with the client work mapped over a Dask cluster.

`drx fedavg --export-rounds` trains in process and writes each round as a job (the round's
MapReduce parts, the server's inputs, each client's data). This script runs the rounds from
those files on a Dask LocalCluster of worker processes on loopback: the client work of each
stage is mapped over the clients as Dask tasks (each task runs `drx run` on that client's files,
as a Beam DoFn or a cluster job would), `drx aggregate` folds the results in drx's canonical
order, and the server parts run on the driver. Every round's results must equal drx fedavg's
in-process results bitwise. The plan names its values after the round's arguments and results
(params/dense0/w, x, loss, ...): a value NAME is the file NAME.npy, a '/' a subfolder, and a
round's params/... and state/... results are the next round's inputs of the same names.

    /usr/bin/python3 examples/dask_fedavg.py --drx build/drx [--work DIR] [--rounds N]

Needs Debian's python3-distributed (scripts/setup.sh installs it).
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time


def run_part(drx, parts, base, out, *inputs):
    """drx run PARTS/BASE.drx on NAME.npy inputs (first folder holding each), outputs to OUT."""
    args = [drx, "run", os.path.join(parts, base + ".drx")]
    with open(os.path.join(parts, base + ".inputs")) as f:
        for name in f.read().split():
            found = [d for d in inputs if os.path.exists(os.path.join(d, name + ".npy"))]
            if not found:
                raise RuntimeError(f"{base}: no input {name}.npy in {inputs}")
            args += ["--arg", os.path.join(found[0], name + ".npy")]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(parts, base + ".outputs")) as f:
        for name in f.read().split():
            path = os.path.join(out, name + ".npy")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            args += ["--out", path]
    subprocess.run(args, check=True)


def npy_files(folder):
    """The .npy files under FOLDER, as paths relative to it (a value's name and '.npy')."""
    return sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, files in os.walk(folder) for f in files if f.endswith(".npy"))


def client_task(drx, parts, base, out, data, server):
    """One client's work on a Dask worker: returns the seconds it took."""
    t0 = time.perf_counter()
    run_part(drx, parts, base, out, data, server)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drx", default="drx")
    ap.add_argument("--work", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", default=None, help="Fashion-MNIST folder (drx fedavg --data)")
    a = ap.parse_args()
    drx = os.path.abspath(a.drx) if os.sep in a.drx else a.drx
    work = a.work or tempfile.mkdtemp(prefix="dask_fedavg_")
    rounds_dir = os.path.join(work, "rounds")
    cmd = [drx, "fedavg", "--rounds", str(a.rounds), "--clients", "20", "--cohort", "4",
           "--max-examples", "3000", "--hidden", "32", "--local-steps", "4", "--quiet",
           "--overwrite", "--out", os.path.join(work, "fedavg"), "--export-rounds", rounds_dir]
    if a.data:
        cmd += ["--data", a.data]
    subprocess.run(cmd, check=True)

    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:
        print(f"dask_fedavg: skipped: {e} (scripts/setup.sh installs python3-distributed)")
        return

    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        previous = None
        for r in range(1, a.rounds + 1):
            job = os.path.join(rounds_dir, f"round-{r}")
            parts = os.path.join(job, "parts")
            server = os.path.join(work, "dask", f"round-{r}", "server")
            os.makedirs(server, exist_ok=True)
            # Round 1's initial params and state, then the previous round's results of the
            # same names.
            source = os.path.join(job, "server") if previous is None else previous
            for name in npy_files(os.path.join(job, "server")):
                os.makedirs(os.path.dirname(os.path.join(server, name)), exist_ok=True)
                with open(os.path.join(source, name), "rb") as src, \
                        open(os.path.join(server, name), "wb") as dst:
                    dst.write(src.read())
            clients = sorted(int(c) for c in os.listdir(os.path.join(job, "clients")))
            stages = len([f for f in os.listdir(parts) if f.endswith(".client_work.drx")])
            for s in range(stages):
                run_part(drx, parts, f"stage{s}.server_prepare", server, server)
                outs = os.path.join(work, "dask", f"round-{r}", f"clients{s}")
                t0 = time.perf_counter()
                futures = client.map(
                    lambda i: client_task(drx, parts, f"stage{s}.client_work",
                                          os.path.join(outs, str(i)),
                                          os.path.join(job, "clients", str(i)), server),
                    clients, pure=False)
                seconds = client.gather(futures)
                t1 = time.perf_counter()
                subprocess.run([drx, "aggregate", os.path.join(parts, "plan.json"), "--stage",
                                str(s), "--clients", outs, "--out", server],
                               check=True, stdout=subprocess.DEVNULL)
                t2 = time.perf_counter()
                run_part(drx, parts, f"stage{s}.server_update", server, server)
                print(f"round {r} stage {s}: {len(clients)} clients on {a.workers} Dask workers "
                      f"in {t1 - t0:.3f} s (a client's drx run {max(seconds):.3f} s at most), "
                      f"aggregate {t2 - t1:.3f} s")
            expected = os.path.join(job, "expected")
            for name in npy_files(expected):
                if not filecmp.cmp(os.path.join(expected, name), os.path.join(server, name),
                                   shallow=False):
                    sys.exit(f"dask_fedavg: round {r}: {name} differs from drx fedavg's")
            previous = server
    print(f"dask_fedavg: {a.rounds} rounds on a Dask LocalCluster, bitwise equal to drx fedavg")


if __name__ == "__main__":
    main()
