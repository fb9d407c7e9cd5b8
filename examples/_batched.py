"""The timing loop of the examples' per-call benches (torch_backend_bench.py, jax_bench.py).

Calls of a few microseconds are timed in batches: one call after another, as a program makes
them, not each after a barrier (on a 2-vCPU machine the ranks' exit skew from a barrier, 10-40 us
with torch's or JAX's threads about, would swamp them; lpmpi.bench.harness times each call
after a barrier, which suits lpmpi-bench's sizes).  Each row is warmed up and gets a batch sized
for ``min_time`` seconds from one timed call; then every round times one batch of every row in
turn, the slowest rank's time per collective.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from mpi4py import MPI


def time_batched(comm: MPI.Comm, rows: dict[str, tuple[Callable[[], object], int]], rounds: int,
                 min_time: float) -> dict[str, list[float]]:
    """rows: name -> (call, collectives per call).  Returns name -> seconds per collective, one
    value per round (the slowest rank's).  Collective: every rank passes the same rows."""
    reps = {}
    for name, (fn, _) in rows.items():          # warm up (compiles, first contexts), size batches
        for _ in range(3):
            fn()
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        t = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        reps[name] = max(3, min(20000, int(min_time / max(t, 1e-7))))
    times: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(rounds):
        for name, (fn, per) in rows.items():
            k = reps[name]
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            times[name].append(comm.allreduce((time.perf_counter() - t0) / (k * per), op=MPI.MAX))
    return times
