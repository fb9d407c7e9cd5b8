"""The tuner's measurements of one bucket: its buffers, and configurations timed with the
benchmark's one timing method (:func:`lpmpi.bench.measure`: warm-up, a barrier before each
call, the slowest rank's median; an early checkpoint lets the driver prune a configuration that
is already far slower than the best; finalists interleaved call by call).

Buffers live where ``--memory`` says (:func:`lpmpi.bench.memory_backend`): host (numpy), or
cuda (CuPy arrays on this rank's GPU; with ``LPMPI_TUNER_FAKE_DEVICE=1``, for tests without a
GPU, host arrays that lpmpi runs on its device path under ``LPMPI_EMULATE_STAGING=1``).  A
configuration's staging buffers are set (:func:`lpmpi.engine.staging`) around its calls and
restored after, and so is its node-local transport (:func:`lpmpi.engine.transport`): around
each call where configurations are measured side by side, each its own."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from lpmpi import bench, engine
from lpmpi.tune.space import Config

# called on every rank with the slowest rank's median so far; returns True to stop (prune)
Prune = Callable[[float], bool]


@dataclass(frozen=True)
class Result:
    """A measured configuration: the slowest rank's median (seconds) over ``reps`` repetitions;
    ``pruned`` when it stopped at the checkpoint."""

    seconds: float
    reps: int
    pruned: bool = False


@contextlib.contextmanager
def staging(cfg: Config) -> Iterator[None]:
    """``cfg``'s staging buffers in force for the duration (nothing to do when it has none)."""
    with engine.staging(cfg.staging_buffers):
        yield


@contextlib.contextmanager
def settings(cfg: Config) -> Iterator[None]:
    """``cfg``'s process-wide settings in force for the duration: its staging buffers and its
    node-local transport (each left alone when it has none)."""
    with staging(cfg), engine.transport(cfg.transport):
        yield


def reps_for(estimate_s: float, min_time: float, min_reps: int, max_reps: int) -> int:
    """Repetitions so that a configuration as fast as ``estimate_s`` takes about ``min_time``."""
    return bench.Repetitions(min_time=min_time, min_reps=min_reps, max_reps=max_reps).count([estimate_s])


class Bench:
    """The buffers of one bucket and the calls that time configurations on them (collective:
    every method is called on every rank of ``comm`` in the same order)."""

    def __init__(self, comm: Any, collective: str, nbytes: int, dtype: np.dtype, op: str,
                 root: int = 0, backend: bench.HostMemory | None = None,
                 acc_dtype: str | None = None, fresh_input: bool = False) -> None:
        self.comm, self.collective, self.op, self.root = comm, collective, op, root
        self.acc_dtype, self.fresh_input = acc_dtype, fresh_input
        self.backend = backend if backend is not None else bench.HostMemory()
        count = max(1, nbytes // dtype.itemsize)
        self.bufs = bench.make_buffers(self.backend, collective, count, dtype, op, comm.Get_rank(), root,
                                       comm.Get_size())

    def call(self, cfg: Config) -> bench.Call:
        """A no-argument callable running the collective with ``cfg`` (its staging buffers and
        its transport, :func:`lpmpi.bench.with_transport`, set around each call when it has
        them); with ``fresh_input``, the input is rewritten before each timed repetition,
        untimed, as an application writes it before each call (bcast: the root's)."""
        case = bench.Case(cfg.label, cfg.algorithm, cfg.chunk_bytes, cfg.transport)
        fn = bench.make_call(case, self.collective, self.bufs, self.op, self.root, self.comm,
                             acc_dtype=self.acc_dtype)
        if cfg.staging_buffers is not None:
            plain = fn

            def fn() -> Any:
                with staging(cfg):
                    return plain()
        if self.fresh_input:
            return bench.refilled(fn, self.backend, self.bufs.send, self.bufs.orig, self.collective,
                                  self.comm.Get_rank(), self.root)
        return fn

    def estimate(self, cfg: Config, rounds: int = 3) -> float:
        """A quick time of ``cfg`` (the fastest of a few repetitions, slowest rank), to size
        repetitions."""
        with settings(cfg):
            return bench.estimate(self.comm, [self.call(Config(cfg.algorithm, cfg.chunk_bytes))], rounds)[0]

    def run(self, cfg: Config, warmup: int, reps: int, checkpoint_at: int = 0,
            prune: Prune | None = None) -> Result:
        """``warmup`` warm-up repetitions, then ``reps`` timed ones; after ``checkpoint_at`` of
        them the slowest rank's median so far goes to ``prune``, which may stop the measurement."""
        checkpoint = None
        if prune is not None and checkpoint_at > 0:
            checkpoint = bench.Checkpoint(checkpoint_at, lambda medians: prune(medians[0]))
        with settings(cfg):
            fn = self.call(Config(cfg.algorithm, cfg.chunk_bytes))   # settings set once, around all
            [t] = bench.measure(self.comm, [fn], reps, warmup=warmup, checkpoint=checkpoint)
        return Result(t.median, t.reps, t.pruned)

    def interleaved(self, cfgs: list[Config], warmup: int, reps: int) -> list[float]:
        """The slowest rank's median of each of ``cfgs``, measured side by side: repetition r
        calls every configuration once, in an order rotated by r, each call after a barrier, so
        a slow spell of the machine hits all of them alike instead of whichever was being
        measured then."""
        timings = bench.measure(self.comm, [self.call(c) for c in cfgs], reps, warmup=warmup)
        return [t.median for t in timings]
