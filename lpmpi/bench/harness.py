"""The one timing method of lpmpi's tools: the benchmark's rows, ``--compare-grid``, ``--scaling``,
the memory-bandwidth line and every measurement of the tuner (``tuner/measure.py``) time calls
with :func:`measure`.

Several calls measured together are interleaved: repetition r runs every call once, starting at
call ``r % k``, so that drift on a shared machine hits them alike.  Each call is preceded by
``comm.Barrier()`` and timed with ``time.perf_counter`` on every rank, the garbage collector
paused.  A repetition's time is the slowest rank's: the per-rank times are reduced with one
``MPI.MAX`` after the timed loop (never inside it), and a call's time is the median over its
repetitions.  Warm-up repetitions (at least one) come first; their fastest repetition is the
estimate that sizes an adaptive number of repetitions (:class:`Repetitions`).  An optional
:class:`Checkpoint` looks at the medians after its first repetitions and may stop the
measurement there (the tuner prunes a configuration that way).

>>> from mpi4py import MPI
>>> [t] = measure(MPI.COMM_SELF, [lambda: None], Repetitions(fixed=7), warmup=1)
>>> t.reps, t.pruned, t.median >= 0
(7, False, True)
"""
from __future__ import annotations

import functools
import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from lpmpi import autotune, engine

#: a no-argument callable running one collective (the thing timed)
Call = Callable[[], Any]


class Prepared:
    """A call whose ``before`` runs ahead of each timed repetition, outside its time (the loop
    of :func:`time_interleaved`); calling it runs ``call`` alone."""

    def __init__(self, call: Call, before: Call) -> None:
        self.call, self.before = call, before

    def __call__(self) -> Any:
        return self.call()


def refilled(call: Call, backend: Any, buf: Any, orig: Any, collective: str, rank: int,
             root: int) -> Call:
    """``call`` with its input ``buf`` rewritten from the host array ``orig`` (by ``backend``'s
    ``copy_from_host``) before each timed repetition, untimed: an application writes its input
    before each call, so the call does not find it where the previous call left it.  A bcast
    off the root has no input (its buffer is the output): ``call`` as it is."""
    if not engine.collective_info(collective).brings_input(rank, root):
        return call
    return Prepared(call, functools.partial(backend.copy_from_host, buf, orig))


DEFAULT_MIN_TIME = 0.4
DEFAULT_WARMUP = 3
MIN_REPS = 5
MAX_REPS = 1000


@dataclass(frozen=True)
class Repetitions:
    """How many timed repetitions: ``fixed``, or enough for the slowest call to take about
    ``min_time`` seconds, within ``[min_reps, max_reps]``.

    >>> Repetitions(min_time=0.01).count([1e-3, 2e-4])
    10
    >>> Repetitions(fixed=3).count([1.0]), Repetitions(min_time=1.0, max_reps=50).count([1e-6])
    (3, 50)
    """

    min_time: float = DEFAULT_MIN_TIME
    fixed: int | None = None
    min_reps: int = MIN_REPS
    max_reps: int = MAX_REPS

    def count(self, estimates: Sequence[float]) -> int:
        """Repetitions for calls whose single-call times are about ``estimates`` (seconds)."""
        if self.fixed is not None:
            return self.fixed
        worst = max([*estimates, 1e-9])
        return int(min(self.max_reps, max(self.min_reps, math.ceil(self.min_time / worst))))


@dataclass(frozen=True)
class Checkpoint:
    """After ``after`` repetitions (when more are to come), ``stop`` gets each call's median so
    far (the same numbers on every rank) and returns True to end the measurement there.  It is
    called on every rank and must return the same decision on all of them."""

    after: int
    stop: Callable[[list[float]], bool]


@dataclass(frozen=True)
class Timing:
    """One call's measured repetitions: ``seconds[r]`` is the slowest rank's time in repetition
    r; ``pruned`` when a :class:`Checkpoint` stopped the measurement early."""

    seconds: np.ndarray
    pruned: bool = False

    @property
    def reps(self) -> int:
        return int(self.seconds.size)

    @property
    def median(self) -> float:
        """The reported time (seconds): the median over repetitions of the slowest rank (the
        engine's statistic, which the online tuner uses too: lpmpi._core.tune_median)."""
        return float(autotune.median(self.seconds))

    @property
    def min(self) -> float:
        return float(self.seconds.min())

    @property
    def max(self) -> float:
        return float(self.seconds.max())


def max_over_ranks(comm: MPI.Comm, local: np.ndarray) -> np.ndarray:
    """Elementwise maximum of a float64 array over the ranks of ``comm`` (one reduction)."""
    local = np.ascontiguousarray(local, dtype=np.float64)
    out = np.empty_like(local)
    comm.Allreduce(local, out, op=MPI.MAX)
    return out


def time_interleaved(comm: MPI.Comm, calls: Sequence[Call], reps: int,
                     checkpoint: Checkpoint | None = None) -> tuple[np.ndarray, bool]:
    """The timed loop: ``(seconds, pruned)``, seconds of shape ``(repetitions, len(calls))``,
    each the slowest rank's (collective: every rank passes the same calls in the same order).
    A call with a ``before`` attribute has it run before each of its repetitions, untimed."""
    k = len(calls)
    local = np.zeros((reps, k))
    befores = [getattr(call, "before", None) for call in calls]
    barrier, clock = comm.Barrier, time.perf_counter
    stop_at = checkpoint.after if checkpoint is not None and 0 < checkpoint.after < reps else -1
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(reps):
            for j in range(k):
                i = (j + r) % k
                call, before = calls[i], befores[i]
                if before is not None:
                    before()
                barrier()
                t0 = clock()
                call()
                local[r, i] = clock() - t0
            if r + 1 == stop_at and checkpoint is not None:
                so_far = max_over_ranks(comm, local[:stop_at])
                if checkpoint.stop([float(autotune.median(so_far[:, j])) for j in range(k)]):
                    return so_far, True
    finally:
        if gc_was_enabled:
            gc.enable()
    return max_over_ranks(comm, local), False


def estimate(comm: MPI.Comm, calls: Sequence[Call], rounds: int = 1) -> list[float]:
    """Warm up: ``rounds`` (at least one) interleaved repetitions; each call's fastest
    repetition (slowest rank), the estimate that sizes :class:`Repetitions`."""
    seconds, _ = time_interleaved(comm, calls, max(1, rounds))
    return [float(t) for t in seconds.min(axis=0)]


def measure(comm: MPI.Comm, calls: Sequence[Call], reps: Repetitions | int = Repetitions(),
            warmup: int = DEFAULT_WARMUP, checkpoint: Checkpoint | None = None) -> list[Timing]:
    """Time ``calls`` side by side: ``max(1, warmup)`` warm-up repetitions, then the timed ones
    (``reps``: a count, or a :class:`Repetitions` sized from the warm-up); one
    :class:`Timing` per call, in order.  Collective."""
    if not calls:
        return []
    estimates = estimate(comm, calls, warmup)
    n = reps if isinstance(reps, int) else reps.count(estimates)
    seconds, pruned = time_interleaved(comm, calls, n, checkpoint)
    return [Timing(seconds[:, j].copy(), pruned) for j in range(len(calls))]


def probe(comm: MPI.Comm, call: Call) -> str | None:
    """Run ``call`` once on every rank; the first failing rank's error, or None if all succeeded."""
    try:
        call()
        msg = None
    except Exception as exc:  # noqa: BLE001 - a failure is reported in the row, not fatal
        msg = f"{type(exc).__name__}: {exc}"
    errors = [m for m in comm.allgather(msg) if m is not None]
    return errors[0] if errors else None
