"""The cost of acc_dtype="float32": float16 allreduce with and without it, per algorithm.

    OPENBLAS_NUM_THREADS=1 mpiexec -n 2 python tools/acc_cost.py [--sizes 1MiB,16MiB,64MiB]
        [--algorithms auto,lp,ring,be] [--rounds 7] [--json out.json]

Each round times every (size, algorithm, plain|acc) once, interleaved, as the median of
--reps calls of the slowest rank (a barrier before each call); printed: the median over
rounds and the ratio acc / plain with its spread (min-max over rounds)."""
import argparse
import functools
import json
import time

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi.bench import sizes_arg

w = MPI.COMM_WORLD


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        w.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return w.allreduce(float(np.median(ts)), op=MPI.MAX)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=sizes_arg, default=sizes_arg("1MiB,16MiB,64MiB"))
    ap.add_argument("--algorithms", default="auto,lp,ring,be")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    algs = a.algorithms.split(",")
    dt = np.dtype(a.dtype) if a.dtype != "bfloat16" else np.dtype(__import__("ml_dtypes").bfloat16)
    res = {}
    for rnd in range(a.rounds):
        for n in a.sizes:
            x = np.random.default_rng(w.rank).standard_normal(n // dt.itemsize).astype(dt)
            y = np.empty_like(x)
            for alg in algs:
                for acc in (None, "float32"):
                    call = functools.partial(lpmpi.allreduce, x, y, algorithm=alg, acc_dtype=acc)
                    t = timed(call, a.reps)
                    res.setdefault((n, alg, acc), []).append(t)
        if w.rank == 0:
            print(f"# round {rnd + 1}/{a.rounds} done", flush=True)
    if w.rank:
        return
    out = []
    print(f"# P = {w.size}, {dt.name} SUM, median of {a.rounds} rounds (of the median of "
          f"{a.reps} calls, slowest rank)")
    print(f"{'size':>10} {'algorithm':>9} {'plain ms':>9} {'acc ms':>9} {'acc/plain':>9} {'spread':>13}")
    for n in a.sizes:
        for alg in algs:
            p, q = np.array(res[(n, alg, None)]), np.array(res[(n, alg, "float32")])
            r = q / p
            print(f"{n:>10} {alg:>9} {np.median(p) * 1e3:9.3f} {np.median(q) * 1e3:9.3f} "
                  f"{np.median(r):9.2f} [{r.min():.2f} {r.max():.2f}]")
            out.append({"nbytes": n, "algorithm": alg, "plain_s": p.tolist(), "acc_s": q.tolist()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"P": w.size, "dtype": dt.name, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
