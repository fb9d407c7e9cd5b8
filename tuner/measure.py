"""Timing one configuration on every rank: warm-up, then repetitions each preceded by a
barrier; the objective is the slowest rank's median.  An early checkpoint lets the driver
prune a configuration that is already far slower than the best.

Buffers live where ``--memory`` says: host (numpy), or cuda (CuPy arrays on this rank's GPU,
as ``lpmpi.bench --memory cuda``; with ``LPMPI_TUNER_FAKE_DEVICE=1``, for tests without a GPU,
``HostDeviceArray``s that lpmpi runs on its device path under ``LPMPI_EMULATE_STAGING=1``).
A configuration's staging buffers are set (``_core.set_staging_buffers``) for its measurement
and restored after."""
from __future__ import annotations

import contextlib
import gc
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from lpmpi import _core
from lpmpi.bench import Case, CudaMemory, HostMemory, make_buffers, make_call, measure_interleaved
from tuner.space import Config

FAKE_DEVICE_ENV = "LPMPI_TUNER_FAKE_DEVICE"
EMULATE_ENV = "LPMPI_EMULATE_STAGING"

# called on every rank with the slowest rank's median so far; returns True to stop (prune)
Checkpoint = Callable[[float], bool]


@dataclass(frozen=True)
class Result:
    """A measured configuration: the slowest rank's median (seconds) over ``reps`` repetitions;
    ``pruned`` when it stopped at the checkpoint."""

    seconds: float
    reps: int
    pruned: bool = False


class FakeDeviceMemory(HostMemory):
    """``--memory cuda`` without a GPU (tests, ``LPMPI_TUNER_FAKE_DEVICE=1``): buffers are
    :class:`lpmpi._devarray.HostDeviceArray`, which lpmpi accepts, and runs on its device-memory
    path, only under ``LPMPI_EMULATE_STAGING=1``."""

    name = "cuda"

    def from_host(self, host: np.ndarray) -> Any:
        from lpmpi._devarray import HostDeviceArray

        return HostDeviceArray(host.copy())

    def to_host(self, arr: Any) -> np.ndarray:
        return arr.get()

    def fill_bytes(self, arr: Any, byte: int) -> None:
        arr.view_host().reshape(-1).view(np.uint8).fill(byte)


def fake_device() -> bool:
    """True when ``LPMPI_TUNER_FAKE_DEVICE`` asks for the GPU-less stand-in (tests only)."""
    return os.environ.get(FAKE_DEVICE_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def device_problem() -> str | None:
    """Why ``--memory cuda`` cannot run in this process, or None (local: no communication).
    Imports CuPy only here, and only for a real device."""
    emulated = bool(_core.cuda_info()["emulated"])
    if fake_device():
        return None if emulated else f"{FAKE_DEVICE_ENV}=1 needs {EMULATE_ENV}=1"
    if emulated:
        return (f"{EMULATE_ENV}=1 emulates device memory on the host, where CuPy's device "
                f"pointers cannot be read: unset it to tune a GPU")
    try:
        import cupy
    except ImportError as exc:
        return f"--memory cuda needs CuPy (e.g. pip install cupy-cuda12x): {exc}"
    if not _core.CUDA_BUILD:
        return "--memory cuda: this lpmpi was built without CUDA (no nvcc at build time)"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError without a driver, among others
        return f"--memory cuda: no usable CUDA device ({type(exc).__name__}: {exc})"
    if n < 1:
        return "--memory cuda: no CUDA device is visible"
    return None


def memory_backend(memory: str, comm: Any) -> HostMemory:
    """The buffers' backend of ``--memory`` (collective for cuda: each rank uses the GPU of its
    rank on the node, modulo the visible devices).  Check :func:`device_problem` first."""
    if memory == "host":
        return HostMemory()
    if memory != "cuda":
        raise ValueError(f"unknown memory kind {memory!r}")
    if fake_device():
        return FakeDeviceMemory()
    import cupy

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local = node.Get_rank()
    finally:
        node.Free()
    cupy.cuda.Device(local % cupy.cuda.runtime.getDeviceCount()).use()
    return CudaMemory()


@contextlib.contextmanager
def staging(cfg: Config) -> Iterator[None]:
    """``cfg``'s staging buffers in force for the duration (nothing to do when it has none)."""
    if cfg.staging_buffers is None:
        yield
        return
    old = int(_core.cuda_info()["staging_buffers"])
    _core.set_staging_buffers(cfg.staging_buffers)
    try:
        yield
    finally:
        _core.set_staging_buffers(old)


class Bench:
    """The buffers of one bucket and the calls that time configurations on them (collective:
    every method is called on every rank of ``comm`` in the same order)."""

    def __init__(self, comm: Any, collective: str, nbytes: int, dtype: np.dtype, op: str,
                 root: int = 0, backend: HostMemory | None = None) -> None:
        self.comm, self.collective, self.op, self.root = comm, collective, op, root
        self.backend = backend if backend is not None else HostMemory()
        count = max(1, nbytes // dtype.itemsize)
        self.bufs = make_buffers(self.backend, collective, count, dtype, op, comm.Get_rank(), root)

    def call(self, cfg: Config) -> Callable[[], Any]:
        """A no-argument callable running the collective with ``cfg``."""
        case = Case(cfg.label, cfg.algorithm, cfg.chunk_bytes)
        return make_call(case, self.collective, self.bufs, self.op, self.root, self.comm)

    def _slowest(self, seconds: float) -> float:
        return float(self.comm.allreduce(seconds, op=MPI.MAX))

    def estimate(self, cfg: Config, calls: int = 3) -> float:
        """A quick time of ``cfg`` (slowest rank's fastest of a few calls), to size repetitions."""
        fn, best, sync = self.call(cfg), math.inf, self.backend.synchronize
        with staging(cfg):
            fn()
            for _ in range(calls):
                self.comm.Barrier()
                t0 = time.perf_counter()
                fn()
                if sync is not None:
                    sync()
                best = min(best, time.perf_counter() - t0)
        return self._slowest(best)

    def run(self, cfg: Config, warmup: int, reps: int, checkpoint_at: int = 0,
            checkpoint: Checkpoint | None = None) -> Result:
        """``warmup`` untimed calls, then ``reps`` timed ones; after ``checkpoint_at`` of them the
        slowest median so far goes to ``checkpoint``, which may stop the measurement."""
        with staging(cfg):
            return self._run(cfg, warmup, reps, checkpoint_at, checkpoint)

    def _run(self, cfg: Config, warmup: int, reps: int, checkpoint_at: int,
             checkpoint: Checkpoint | None) -> Result:
        fn, barrier, clock = self.call(cfg), self.comm.Barrier, time.perf_counter
        sync = self.backend.synchronize
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
                if sync is not None:
                    sync()
                times.append(clock() - t0)
                if checkpoint is not None and r + 1 == checkpoint_at < reps:
                    so_far = self._slowest(float(np.median(times)))
                    if checkpoint(so_far):
                        return Result(so_far, len(times), pruned=True)
        finally:
            if gc_was_enabled:
                gc.enable()
        return Result(self._slowest(float(np.median(times))), len(times))


    def interleaved(self, cfgs: list[Config], warmup: int, reps: int) -> list[float]:
        """The slowest rank's median of each of ``cfgs``, measured side by side: repetition r
        calls every configuration once, in an order rotated by r, each call after a barrier
        (lpmpi.bench's measure_interleaved), so a slow spell of the machine hits all of them
        alike instead of whichever was being measured then."""
        fns = [self._staged(cfg, self.call(cfg)) for cfg in cfgs]
        for fn in fns:
            for _ in range(warmup):
                fn()
        times = measure_interleaved(self.comm, fns, reps, self.backend.synchronize)
        return [float(np.median(times[:, j])) for j in range(len(cfgs))]

    @staticmethod
    def _staged(cfg: Config, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` with ``cfg``'s staging buffers set around each call (only when it has any)."""
        if cfg.staging_buffers is None:
            return fn

        def call() -> Any:
            with staging(cfg):
                return fn()
        return call


def reps_for(estimate_s: float, min_time: float, min_reps: int, max_reps: int) -> int:
    """Repetitions so that a configuration as fast as ``estimate_s`` takes about ``min_time``."""
    want = math.ceil(min_time / max(estimate_s, 1e-9))
    return int(min(max_reps, max(min_reps, want)))
