"""Timing one configuration on every rank: warm-up, then repetitions each preceded by a
barrier; the objective is the slowest rank's median.  An early checkpoint lets the driver
prune a configuration that is already far slower than the best."""
from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from lpmpi.bench import Case, HostMemory, make_buffers, make_call
from tuner.space import Config

# called on every rank with the slowest rank's median so far; returns True to stop (prune)
Checkpoint = Callable[[float], bool]


@dataclass(frozen=True)
class Result:
    """A measured configuration: the slowest rank's median (seconds) over ``reps`` repetitions;
    ``pruned`` when it stopped at the checkpoint."""

    seconds: float
    reps: int
    pruned: bool = False


class Bench:
    """The buffers of one bucket and the calls that time configurations on them (collective:
    every method is called on every rank of ``comm`` in the same order)."""

    def __init__(self, comm: Any, collective: str, nbytes: int, dtype: np.dtype, op: str,
                 root: int = 0) -> None:
        self.comm, self.collective, self.op, self.root = comm, collective, op, root
        count = max(1, nbytes // dtype.itemsize)
        self.bufs = make_buffers(HostMemory(), collective, count, dtype, op, comm.Get_rank(), root)

    def call(self, cfg: Config) -> Callable[[], Any]:
        """A no-argument callable running the collective with ``cfg``."""
        case = Case(cfg.label, cfg.algorithm, cfg.chunk_bytes)
        return make_call(case, self.collective, self.bufs, self.op, self.root, self.comm)

    def _slowest(self, seconds: float) -> float:
        return float(self.comm.allreduce(seconds, op=MPI.MAX))

    def estimate(self, cfg: Config, calls: int = 3) -> float:
        """A quick time of ``cfg`` (slowest rank's fastest of a few calls), to size repetitions."""
        fn, best = self.call(cfg), math.inf
        fn()
        for _ in range(calls):
            self.comm.Barrier()
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return self._slowest(best)

    def run(self, cfg: Config, warmup: int, reps: int, checkpoint_at: int = 0,
            checkpoint: Checkpoint | None = None) -> Result:
        """``warmup`` untimed calls, then ``reps`` timed ones; after ``checkpoint_at`` of them the
        slowest median so far goes to ``checkpoint``, which may stop the measurement."""
        fn, barrier, clock = self.call(cfg), self.comm.Barrier, time.perf_counter
        for _ in range(warmup):
            fn()
        times: list[float] = []
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for r in range(reps):
                barrier()
                t0 = clock()
                fn()
                times.append(clock() - t0)
                if checkpoint is not None and r + 1 == checkpoint_at < reps:
                    so_far = self._slowest(float(np.median(times)))
                    if checkpoint(so_far):
                        return Result(so_far, len(times), pruned=True)
        finally:
            if gc_was_enabled:
                gc.enable()
        return Result(self._slowest(float(np.median(times))), len(times))


def reps_for(estimate_s: float, min_time: float, min_reps: int, max_reps: int) -> int:
    """Repetitions so that a configuration as fast as ``estimate_s`` takes about ``min_time``."""
    want = math.ceil(min_time / max(estimate_s, 1e-9))
    return int(min(max_reps, max(min_reps, want)))
