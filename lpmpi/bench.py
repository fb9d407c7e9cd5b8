"""Benchmark lpmpi's collectives against the MPI library's own, side by side.

Run it under ``mpiexec``; only rank 0 prints::

    mpiexec -n 2 python -m lpmpi.bench
    mpiexec -n 4 python -m lpmpi.bench --collective all --sizes 8,1K,1M,64MiB --json bench.json
    mpiexec -n 2 python -m lpmpi.bench --sizes 1M:64M:x2 --algorithms lp,native --dtype float64

For every message size and every algorithm of ``lpmpi.algorithms(collective)``, plus ``auto``
(with the algorithm and chunk that ``lpmpi.select`` says it picks) and ``mpi4py`` (mpi4py's own
``comm.Allreduce``/``Reduce``/``Bcast``, the per-call overhead reference), it prints one row::

    size  algorithm  time_us  algbw_GB/s  busbw_GB/s  speedup_vs_native  check

Methodology. All algorithms of one size are measured together: each repetition runs every
algorithm once, in an order that rotates from one repetition to the next, so that drift on a
shared machine hits them alike. Each call is preceded by ``comm.Barrier()`` and timed with
``time.perf_counter`` on every rank; a repetition's time is the maximum over ranks (the slowest
rank counts; the per-rank times are reduced with ``MPI.MAX`` after the timed loop, never inside
it); the reported time is the median over repetitions. The number of repetitions adapts to the
size (``--min-time`` seconds per size and algorithm, at least 5, at most 1000) unless ``--reps``
fixes it. algbw = bytes / time; busbw scales algbw as nccl-tests does (allreduce 2(P-1)/P,
reduce and bcast 1). Every row's result is checked against ``native``'s (which is itself checked
against a numpy reduction at sampled elements); the process exits with status 1 on any mismatch
or error of an lpmpi algorithm.

Extending: memory kinds are classes in ``MEMORY_BACKENDS`` (``--memory``); the rows of a size are a
list of :class:`Case` (``build_cases``), so an algorithm x chunk grid is more cases; and
:func:`run_collective` takes the communicator, so a scaling study can pass sub-communicators.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import math
import os
import platform
import re
import socket
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi

COLLECTIVES = ("allreduce", "reduce", "bcast")
AUTO = "auto"
NATIVE = "native"
MPI4PY = "mpi4py"
DEFAULT_SIZES = "8,16:64MiB:x4"
DEFAULT_MIN_TIME = 0.4
DEFAULT_WARMUP = 3
MIN_REPS = 5
MAX_REPS = 1000
LARGE_BYTES = 1 << 20  # the summary's geometric means use sizes >= this
OVERHEAD_TARGET = 1.3  # lpmpi auto vs mpi4py at the smallest size
MEMBW_BYTES = 64 << 20
MEMBW_REPS = 5
SENTINEL = 0xA5  # byte written into output buffers before a checked call
SAMPLE_POINTS = 4096

OPS = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
_NP_OPS: dict[str, Callable[..., Any]] = {
    "sum": np.add,
    "avg": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "land": np.logical_and,
    "lor": np.logical_or,
    "lxor": np.logical_xor,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


# ----------------------------------------------------------------------------- sizes


def parse_size(text: str) -> int:
    """Parse a byte count such as ``8``, ``1K``, ``64KiB``, ``1.5M`` or ``64MiB`` (binary units).

    >>> parse_size("64MiB") == 64 << 20
    True
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"bad size {text!r} (examples: 8, 1K, 64KiB, 1M, 64MiB)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def _size_range(lo: int, hi: int, step: str) -> list[int]:
    """Sizes ``lo, lo*F, ... <= hi`` for step ``xF`` or ``lo, lo+S, ...`` for ``+S``; hi included."""
    if lo > hi:
        raise ValueError(f"size range {lo}:{hi} is empty")
    out: list[int] = []
    if step[:1] in ("x", "*"):
        factor = float(step[1:])
        if factor <= 1 or lo < 1:
            raise ValueError(f"size range step {step!r} needs a factor > 1 and a start >= 1")
        size = float(lo)
        while size <= hi:
            out.append(int(size))
            size *= factor
    elif step[:1] == "+":
        inc = parse_size(step[1:])
        if inc < 1:
            raise ValueError(f"size range step {step!r} must be positive")
        out = list(range(lo, hi + 1, inc))
    else:
        raise ValueError(f"size range step {step!r}: use xF (geometric) or +S (linear)")
    if out[-1] != hi:
        out.append(hi)
    return out


def parse_sizes(spec: str) -> list[int]:
    """Parse a ``--sizes`` value: comma-separated sizes and ``lo:hi[:xF|:+S]`` ranges (default x4).

    >>> parse_sizes("8,1K,16:256:x4")
    [8, 16, 64, 256, 1024]
    """
    sizes: set[int] = set()
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) == 1:
            sizes.add(parse_size(item))
        elif len(parts) in (2, 3):
            step = parts[2].strip() if len(parts) == 3 else "x4"
            sizes.update(_size_range(parse_size(parts[0]), parse_size(parts[1]), step))
        else:
            raise ValueError(f"bad size range {item!r} (use lo:hi or lo:hi:xF or lo:hi:+S)")
    if not sizes:
        raise ValueError("no sizes given")
    return sorted(sizes)


def format_bytes(n: float) -> str:
    """Human-readable binary size: ``8 B``, ``1 KiB``, ``64 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:g} TiB"  # pragma: no cover


# ----------------------------------------------------------------------------- dtypes and data


def resolve_dtype(name: str) -> np.dtype:
    """Return the numpy dtype called ``name``; ``bfloat16`` and friends come from ml_dtypes."""
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes  # optional: only for its dtypes
    except ImportError:
        raise ValueError(f"unknown dtype {name!r} (bfloat16 and float8 types need ml_dtypes)") from None
    try:
        return np.dtype(getattr(ml_dtypes, name))
    except (AttributeError, TypeError):
        raise ValueError(f"unknown dtype {name!r}") from None


def is_inexact(dtype: np.dtype) -> bool:
    """True for floating and complex dtypes (ml_dtypes' bfloat16 included)."""
    return dtype.kind in "fc" or (dtype.kind == "V" and "float" in dtype.name)


def _eps(dtype: np.dtype) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except (TypeError, ValueError):
        return 2.0**-7  # bfloat16; float8 types are coarser but rarely benchmarked


def pattern(indices: np.ndarray, rank: int, dtype: np.dtype, op: str) -> np.ndarray:
    """Deterministic, aperiodic input of ``rank`` at ``indices`` (uint64), as ``dtype``.

    Values are small integers 1..8 (bool: 0/1), or for ``prod`` on inexact types 0.5, 1 and 2
    (times 1j for some complex elements), so that sums and products are exact in any order and
    results of different algorithms compare bit for bit in the common case.
    """
    h = indices.astype(np.uint64, copy=True)
    h *= np.uint64(0x9E3779B97F4A7C15)
    h += np.uint64(((rank + 1) * 0xBF58476D1CE4E5B9) % (1 << 64))
    h *= np.uint64(0x94D049BB133111EB)
    h >>= np.uint64(61)
    h += np.uint64(1)  # 1..8
    if dtype.kind == "b":
        return (h & np.uint64(1)).astype(dtype)
    if not is_inexact(dtype):
        return h.astype(dtype)
    if op == "prod":
        values = np.exp2((h % np.uint64(3)).astype(np.float64) - 1.0)
        if dtype.kind == "c":
            values = np.where(h & np.uint64(4), values * 1j, values)
        return values.astype(dtype)
    if dtype.kind == "c":
        return (h.astype(np.float64) + 1j * (9.0 - h.astype(np.float64))).astype(dtype)
    return h.astype(np.float64).astype(dtype)


def expected_values(indices: np.ndarray, nprocs: int, dtype: np.dtype, op: str) -> np.ndarray:
    """The reduction over all ranks' :func:`pattern` at ``indices``, computed with numpy."""
    ufunc = _NP_OPS[op]
    acc = pattern(indices, 0, dtype, op)
    if op in ("land", "lor", "lxor"):
        acc = acc.astype(bool).astype(dtype)
    for rank in range(1, nprocs):
        acc = ufunc(acc, pattern(indices, rank, dtype, op)).astype(dtype)
    if op == "avg":
        acc = (acc.astype(np.complex128 if dtype.kind == "c" else np.float64) / nprocs).astype(dtype)
    return acc


def sample_indices(count: int) -> np.ndarray:
    """Indices where ``native`` is checked against numpy: both ends, a regular grid, random ones."""
    if count <= 3 * SAMPLE_POINTS:
        return np.arange(count, dtype=np.uint64)
    rng = np.random.default_rng(12345)
    parts = [
        np.arange(64),
        np.arange(count - 64, count),
        np.linspace(0, count - 1, SAMPLE_POINTS).astype(np.int64),
        rng.integers(0, count, SAMPLE_POINTS),
    ]
    return np.unique(np.concatenate(parts)).astype(np.uint64)


def _flat_bytes(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(-1).view(np.uint8)


def same_result(result: np.ndarray, ref: np.ndarray, dtype: np.dtype, nprocs: int) -> bool:
    """Exact (bytewise) equality; for inexact dtypes, within a tolerance that grows with P."""
    if result.shape != ref.shape:
        return False
    if np.array_equal(_flat_bytes(result), _flat_bytes(ref)):
        return True
    if not is_inexact(dtype):
        return False
    wide = np.complex128 if dtype.kind == "c" else np.float64
    tol = 8.0 * max(nprocs, 1) * _eps(dtype)
    return bool(np.allclose(result.astype(wide), ref.astype(wide), rtol=tol, atol=tol, equal_nan=True))


# ----------------------------------------------------------------------------- memory backends


class HostMemory:
    """Buffers in host memory (numpy). A ``cuda`` backend (CuPy) would offer the same methods."""

    name = "host"

    def from_host(self, host: np.ndarray) -> np.ndarray:
        """A buffer of this memory kind holding a copy of ``host``."""
        return host.copy()

    def to_host(self, arr: np.ndarray) -> np.ndarray:
        """A numpy view or copy of ``arr``."""
        return np.asarray(arr)

    def fill_bytes(self, arr: np.ndarray, byte: int) -> None:
        """Set every byte of ``arr`` to ``byte``."""
        _flat_bytes(arr).fill(byte)

    synchronize: Callable[[], None] | None = None  # called after each timed call when set


class CudaMemory(HostMemory):
    """Buffers in GPU memory (CuPy arrays; ``--memory cuda``). Where the MPI library is not
    CUDA-aware, lpmpi stages them: LP through its pipelined staging, the other algorithms (so
    ``native``) as one copy to the host, the host collective and one copy back. The mpi4py row
    is then left out (mpi4py would hand device pointers to an MPI that cannot read them)."""

    name = "cuda"

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError as e:
            raise SystemExit(f"--memory cuda needs CuPy: {e}") from None
        if not lpmpi._core.CUDA_BUILD:
            raise SystemExit("--memory cuda: this lpmpi was built without CUDA (no nvcc)")
        self.cp = cupy
        self.mpi_reads_device = lpmpi._core.cuda_info()["transport"] == "cuda-aware"

    def from_host(self, host: np.ndarray) -> Any:
        return self.cp.array(host)

    def to_host(self, arr: Any) -> np.ndarray:
        return self.cp.asnumpy(arr)

    def fill_bytes(self, arr: Any, byte: int) -> None:
        arr.reshape(-1).view(self.cp.uint8).fill(byte)


MEMORY_BACKENDS: dict[str, type[HostMemory]] = {"host": HostMemory, "cuda": CudaMemory}


def selection_memory(backend: HostMemory) -> str:
    """The memory kind "auto" selects for on ``backend``'s buffers: the backend's own, except
    that under ``LPMPI_EMULATE_STAGING=1`` the engine treats every buffer as device memory."""
    if backend.name == "cuda" or lpmpi._core.cuda_info()["emulated"]:
        return "cuda"
    return "host"


@dataclass
class Buffers:
    """The buffers of one size: ``send``/``recv`` (bcast: ``send`` is the buffer, ``recv`` None).

    ``orig`` is a host copy of this rank's input (bcast: of the root's data) used by the check.
    """

    send: Any
    recv: Any
    orig: np.ndarray


def make_buffers(
    backend: HostMemory,
    collective: str,
    count: int,
    dtype: np.dtype,
    op: str,
    rank: int,
    root: int,
) -> Buffers:
    """Allocate and fill the buffers for one message size on this rank."""
    idx = np.arange(count, dtype=np.uint64)
    if collective == "bcast":
        orig = pattern(idx, root, dtype, op)
        buf = backend.from_host(orig)
        if rank != root:
            backend.fill_bytes(buf, SENTINEL)
        return Buffers(send=buf, recv=None, orig=orig)
    orig = pattern(idx, rank, dtype, op)
    recv = backend.from_host(orig)
    backend.fill_bytes(recv, SENTINEL)
    return Buffers(send=backend.from_host(orig), recv=recv, orig=orig)


# ----------------------------------------------------------------------------- cases and calls


@dataclass(frozen=True)
class Case:
    """One row label of a size: an lpmpi algorithm (``auto`` included) or the mpi4py reference.

    ``algorithm`` is None for the mpi4py row. A ``--compare-grid`` would add one case per
    (algorithm, chunk_bytes) pair, labelled e.g. ``lp/64K``.
    """

    label: str
    algorithm: str | None
    chunk_bytes: int | None = None


def mpi_op(op: str) -> Any:
    """The mpi4py op for an lpmpi op name, or None (``avg`` has no MPI equivalent)."""
    return None if op == "avg" else getattr(MPI, op.upper())


def build_cases(collective: str, names: Sequence[str] | None, chunk_bytes: int | None, op: str) -> list[Case]:
    """The cases of one collective: its algorithms (``native`` first), ``auto``, ``mpi4py``.

    ``names`` restricts them (names not valid for this collective are skipped). ``chunk_bytes``
    goes to the explicit algorithms; ``auto`` keeps its own choice.
    """
    algs = list(lpmpi.algorithms(collective))
    algs.sort(key=lambda a: a != NATIVE)  # native first: the baseline row
    labels = [*algs, AUTO]
    if mpi_op(op) is not None:
        labels.append(MPI4PY)
    if names is not None:
        labels = [label for label in labels if label in names]
    cases = []
    for label in labels:
        if label == MPI4PY:
            cases.append(Case(label, None))
        elif label == AUTO:
            cases.append(Case(label, AUTO))
        else:
            cases.append(Case(label, label, chunk_bytes))
    return cases


def make_call(
    case: Case, collective: str, bufs: Buffers, op: str, root: int, comm: MPI.Comm
) -> Callable[[], Any]:
    """A no-argument callable running one collective of ``case`` on ``bufs``."""
    if case.algorithm is None:  # mpi4py's own collective
        if collective == "allreduce":
            return functools.partial(comm.Allreduce, bufs.send, bufs.recv, op=mpi_op(op))
        if collective == "reduce":
            recv = bufs.recv if comm.Get_rank() == root else None
            return functools.partial(comm.Reduce, bufs.send, recv, op=mpi_op(op), root=root)
        return functools.partial(comm.Bcast, bufs.send, root=root)
    kw = {"algorithm": case.algorithm, "chunk_bytes": case.chunk_bytes}
    if collective == "allreduce":
        return functools.partial(lpmpi.allreduce, bufs.send, bufs.recv, op, comm, **kw)
    if collective == "reduce":
        return functools.partial(lpmpi.reduce, bufs.send, bufs.recv, op, root, comm, **kw)
    return functools.partial(lpmpi.bcast, bufs.send, root, comm, **kw)


# ----------------------------------------------------------------------------- timing


def max_over_ranks(comm: MPI.Comm, local: np.ndarray) -> np.ndarray:
    """Elementwise maximum of a float64 array over the ranks of ``comm``."""
    local = np.ascontiguousarray(local, dtype=np.float64)
    out = np.empty_like(local)
    comm.Allreduce(local, out, op=MPI.MAX)
    return out


def measure_interleaved(
    comm: MPI.Comm,
    fns: Sequence[Callable[[], Any]],
    reps: int,
    sync: Callable[[], None] | None = None,
) -> np.ndarray:
    """Time ``fns`` side by side: per-rep, per-fn seconds, max over ranks, shape ``(reps, len(fns))``.

    Repetition r runs every fn once, starting at fn ``r % len(fns)``; each call is preceded by a
    barrier. The max over ranks is taken once at the end (the same numbers as one reduction per
    repetition, without the extra traffic between calls). The garbage collector is paused.
    """
    k = len(fns)
    local = np.zeros((reps, k))
    barrier, clock = comm.Barrier, time.perf_counter
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(reps):
            for j in range(k):
                i = (j + r) % k
                fn = fns[i]
                barrier()
                t0 = clock()
                fn()
                if sync is not None:
                    sync()
                local[r, i] = clock() - t0
    finally:
        if gc_was_enabled:
            gc.enable()
    return max_over_ranks(comm, local)


def measure(
    comm: MPI.Comm,
    fn: Callable[[], Any],
    reps: int,
    warmup: int = 0,
    sync: Callable[[], None] | None = None,
) -> np.ndarray:
    """Time ``fn``: ``warmup`` untimed calls, then ``reps`` timed ones; per-rep max over ranks (s)."""
    for _ in range(warmup):
        fn()
    return measure_interleaved(comm, [fn], reps, sync)[:, 0]


def choose_reps(estimates: Sequence[float], min_time: float, fixed: int | None) -> int:
    """Repetitions for one size: ``fixed``, or enough for the slowest case to take ``min_time``."""
    if fixed is not None:
        return fixed
    worst = max([*estimates, 1e-9])
    return int(min(MAX_REPS, max(MIN_REPS, math.ceil(min_time / worst))))


def probe(comm: MPI.Comm, fn: Callable[[], Any]) -> str | None:
    """Call ``fn`` once on every rank; the first rank's error message, or None if all succeeded."""
    try:
        fn()
        msg = None
    except Exception as exc:  # noqa: BLE001 - any failure is reported in the table, not fatal
        msg = f"{type(exc).__name__}: {exc}"
    errors = [m for m in comm.allgather(msg) if m is not None]
    return errors[0] if errors else None


def measure_memory_bandwidth(
    comm: MPI.Comm, nbytes: int = MEMBW_BYTES, reps: int = MEMBW_REPS
) -> dict[str, float]:
    """Copy and add bandwidth (GB/s) of this node's memory, every rank at once.

    copy: ``np.copyto`` of ``nbytes`` (read + write counted); add: ``np.add`` of float32 arrays of
    ``nbytes`` (2 reads + 1 write). Per rank = bytes / median over reps of the slowest rank's time;
    aggregate = per rank * P.
    """
    n = nbytes // 4
    a = np.ones(n, np.float32)
    b = np.full(n, 2.0, np.float32)
    c = np.zeros(n, np.float32)
    t_copy = float(np.median(measure(comm, functools.partial(np.copyto, c, a), reps, warmup=1)))
    t_add = float(np.median(measure(comm, functools.partial(np.add, a, b, out=c), reps, warmup=1)))
    nprocs = comm.Get_size()
    copy = 2 * n * 4 / t_copy / 1e9
    add = 3 * n * 4 / t_add / 1e9
    return {
        "bytes": n * 4,
        "copy_GBps_per_rank": copy,
        "copy_GBps_aggregate": copy * nprocs,
        "add_GBps_per_rank": add,
        "add_GBps_aggregate": add * nprocs,
    }


# ----------------------------------------------------------------------------- one size


@dataclass
class Row:
    """One measured (size, case) cell; ``asdict`` gives the JSON row."""

    collective: str
    label: str
    algorithm: str | None
    chunk_bytes: int | None
    nbytes: int
    count: int
    dtype: str
    op: str
    root: int | None
    nprocs: int
    reps: int = 0
    time_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    algbw_GBps: float | None = None
    busbw_GBps: float | None = None
    speedup_vs_native: float | None = None
    check: str = "-"
    selected_algorithm: str | None = None
    selected_chunk_bytes: int | None = None
    error: str | None = None


@dataclass
class Settings:
    """What every size of one collective shares."""

    collective: str
    dtype: np.dtype
    op: str
    root: int
    warmup: int
    reps: int | None
    min_time: float
    check: bool
    backend: HostMemory


def bus_factor(collective: str, nprocs: int) -> float:
    """busbw / algbw, as nccl-tests: allreduce 2(P-1)/P, reduce and bcast 1."""
    return 2.0 * (nprocs - 1) / nprocs if collective == "allreduce" else 1.0


def _native_reference(
    comm: MPI.Comm, s: Settings, bufs: Buffers, count: int
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Sample indices, numpy's expected values there, and native's full result (if it is right).

    Call on every rank. The arrays are None where this rank holds no result (reduce: non-root)
    and for bcast, whose reference (the root's data) is known everywhere. Native's result is None
    when native failed or differs from numpy; its own row then reports that.
    """
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    if s.collective == "bcast":
        return None, None, None
    holds_result = s.collective == "allreduce" or rank == s.root
    idx = sample_indices(count) if holds_result else None
    expected = expected_values(idx, nprocs, s.dtype, s.op) if idx is not None else None
    if NATIVE not in lpmpi.algorithms(s.collective):
        return idx, expected, None
    s.backend.fill_bytes(bufs.recv, SENTINEL)
    native_call = make_call(Case(NATIVE, NATIVE), s.collective, bufs, s.op, s.root, comm)
    if probe(comm, native_call) is not None:
        return idx, expected, None
    if idx is None or expected is None:
        return None, None, None
    result = s.backend.to_host(bufs.recv).copy()
    if not same_result(result.reshape(-1)[idx.astype(np.intp)], expected, s.dtype, nprocs):
        return idx, expected, None
    return idx, expected, result


def _diff(result: np.ndarray, ref: np.ndarray, what: str, where: np.ndarray | None = None) -> str:
    """Describe how flat ``result`` differs from ``ref``: how many elements, and the first one.

    ``where`` maps positions to element indices when the arrays are a sample.
    """
    rows_a = _flat_bytes(result).reshape(result.size, -1)
    rows_b = _flat_bytes(ref).reshape(ref.size, -1)
    bad = np.flatnonzero((rows_a != rows_b).any(axis=1))
    if bad.size == 0:
        return f"differs from {what} beyond tolerance"
    i = int(bad[0])
    at = int(where[i]) if where is not None else i
    got, want = result[i].item(), ref[i].item()
    return f"{bad.size} of {result.size} elements differ from {what}; first [{at}]: {got!r}, not {want!r}"


def check_case(
    comm: MPI.Comm,
    s: Settings,
    call: Callable[[], Any],
    bufs: Buffers,
    reference: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None],
) -> str | None:
    """Run ``call`` once on sentinel-filled outputs and check the result on every rank.

    allreduce/reduce: result equals native's (and numpy's at sampled elements), input unchanged;
    reduce: non-root outputs untouched; allreduce: bitwise-identical on all ranks; bcast: every
    rank holds the root's data exactly. Returns None if all is well, else the first failing
    rank's reason.
    """
    rank, nprocs, be = comm.Get_rank(), comm.Get_size(), s.backend
    why: str | None = None
    if s.collective == "bcast":
        if rank != s.root:
            be.fill_bytes(bufs.send, SENTINEL)
        call()
        buf = be.to_host(bufs.send).reshape(-1)
        if not np.array_equal(_flat_bytes(buf), _flat_bytes(bufs.orig)):
            why = _diff(buf, bufs.orig, "the root's data")
    else:
        be.fill_bytes(bufs.recv, SENTINEL)
        call()
        send = be.to_host(bufs.send).reshape(-1)
        result = be.to_host(bufs.recv).reshape(-1)
        idx, expected, full = reference
        if not np.array_equal(_flat_bytes(send), _flat_bytes(bufs.orig)):
            why = "input modified: " + _diff(send, bufs.orig, "the input")
        elif s.collective == "reduce" and rank != s.root:
            if not np.all(_flat_bytes(result) == SENTINEL):
                why = "recvbuf written on a non-root rank"
        elif full is not None and not same_result(result, full, s.dtype, nprocs):
            why = _diff(result, full.reshape(-1), "native")
        elif idx is not None and expected is not None:
            sample = result[idx.astype(np.intp)]
            if not same_result(sample, expected, s.dtype, nprocs):
                why = _diff(sample, expected, "numpy (sampled)", idx)
        if s.collective == "allreduce":
            digests = comm.allgather(zlib.crc32(_flat_bytes(result)))
            if why is None and len(set(digests)) > 1:
                why = "results differ between ranks"
    whys = comm.allgather(why)
    return next((f"rank {r}: {w}" for r, w in enumerate(whys) if w is not None), None)


def run_size(comm: MPI.Comm, s: Settings, count: int, cases: Sequence[Case]) -> list[Row]:
    """Measure and check every case at one message size; rows in ``cases`` order."""
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    nbytes = count * s.dtype.itemsize
    root = s.root if s.collective != "allreduce" else None
    bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, rank, s.root)
    reference = _native_reference(comm, s, bufs, count) if s.check else (None, None, None)
    rows = {
        c.label: Row(
            s.collective,
            c.label,
            c.algorithm,
            c.chunk_bytes,
            nbytes,
            count,
            s.dtype.name,
            s.op,
            root,
            nprocs,
        )
        for c in cases
    }
    calls: dict[str, Callable[[], Any]] = {}
    memory = selection_memory(s.backend)
    for case in cases:
        row = rows[case.label]
        if case.algorithm == AUTO:
            try:
                row.selected_algorithm, row.selected_chunk_bytes = lpmpi.select(
                    s.collective, nbytes, comm, memory=memory)
            except Exception as exc:  # noqa: BLE001 - shown in the row
                row.selected_algorithm = f"? ({type(exc).__name__})"
        call = make_call(case, s.collective, bufs, s.op, s.root, comm)
        row.error = probe(comm, call)
        if row.error is None:
            calls[case.label] = call
        else:
            row.check = "n/a" if case.algorithm is None else "ERROR"
    labels = list(calls)
    fns = [calls[label] for label in labels]
    if fns:
        pre = measure_interleaved(comm, fns, max(1, s.warmup), s.backend.synchronize)
        reps = choose_reps(pre.min(axis=0).tolist(), s.min_time, s.reps)
        times = measure_interleaved(comm, fns, reps, s.backend.synchronize)
        for j, label in enumerate(labels):
            row, t = rows[label], times[:, j]
            row.reps = reps
            row.time_us = float(np.median(t)) * 1e6
            row.min_us, row.max_us = float(t.min()) * 1e6, float(t.max()) * 1e6
            row.algbw_GBps = nbytes / row.time_us / 1e3
            row.busbw_GBps = row.algbw_GBps * bus_factor(s.collective, nprocs)
    native = rows.get(NATIVE)
    for label in labels:
        row = rows[label]
        if native is not None and native.time_us and row.time_us:
            row.speedup_vs_native = native.time_us / row.time_us
        if s.check:
            row.error = check_case(comm, s, calls[label], bufs, reference)
            row.check = "ok" if row.error is None else "MISMATCH"
    return list(rows.values())


# ----------------------------------------------------------------------------- output


_COLUMNS = (  # (title, width); columns are separated by two spaces
    ("size", 10),
    ("algorithm", 9),
    ("time_us", 11),
    ("algbw_GB/s", 10),
    ("busbw_GB/s", 10),
    ("speedup_vs_native", 17),
    ("check", 8),
)
_CALL_NAMES = {"allreduce": "Allreduce", "reduce": "Reduce", "bcast": "Bcast"}


def _join(cells: Sequence[str], note: str = "") -> str:
    widths = [w for _, w in _COLUMNS]
    parts = [f"{cell:<{w}}" if i == 1 else f"{cell:>{w}}" for i, (cell, w) in enumerate(zip(cells, widths))]
    return "  ".join(parts) + (f"  {note}" if note else "")


def format_table_header() -> str:
    """The column titles of the results table."""
    return _join([name for name, _ in _COLUMNS], "note")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_row(row: Row) -> str:
    """One line of the results table."""
    speed = "-" if row.speedup_vs_native is None else f"{row.speedup_vs_native:.2f}x"
    note = ""
    if row.label == AUTO and row.selected_algorithm is not None:
        note = f"-> {row.selected_algorithm}"
        if row.selected_chunk_bytes:
            note += f", chunk {format_bytes(row.selected_chunk_bytes)}"
    elif row.label == MPI4PY:
        note = f"mpi4py comm.{_CALL_NAMES[row.collective]}"
    elif row.chunk_bytes:
        note = f"chunk {format_bytes(row.chunk_bytes)}"
    if row.error:
        note = (note + "; " if note else "") + row.error
    cells = [
        str(row.nbytes),
        row.label,
        _num(row.time_us),
        _num(row.algbw_GBps),
        _num(row.busbw_GBps),
        speed,
        row.check,
    ]
    return _join(cells, note)


def summarize(rows: Sequence[Row]) -> tuple[list[str], dict[str, Any]]:
    """Summary lines and data: geometric-mean speed-ups over native (sizes >= 1 MiB), worst
    auto/native ratio over all sizes, and auto's per-call overhead vs mpi4py at the smallest size."""
    lines: list[str] = []
    data: dict[str, Any] = {"geomean_speedup_vs_native_ge_1MiB": {}}
    labels = list(dict.fromkeys(r.label for r in rows))
    large = sorted({r.nbytes for r in rows if r.nbytes >= LARGE_BYTES})
    lines.append(
        f"geometric-mean speed-up vs native over sizes >= {format_bytes(LARGE_BYTES)} ({len(large)} sizes):"
    )
    for label in labels:
        if label == NATIVE:
            continue
        ups = [
            r.speedup_vs_native
            for r in rows
            if r.label == label and r.nbytes >= LARGE_BYTES and r.speedup_vs_native
        ]
        if ups and len(ups) == len(large):
            g = math.exp(sum(math.log(u) for u in ups) / len(ups))
            data["geomean_speedup_vs_native_ge_1MiB"][label] = g
            lines.append(f"  {label:<10} {g:6.2f}x")
        else:
            lines.append(f"  {label:<10} {'-':>6}")
    by = {(r.label, r.nbytes): r for r in rows}
    ratios = [
        (by[(AUTO, n)].time_us / by[(NATIVE, n)].time_us, n)
        for (label, n) in by
        if label == AUTO and (NATIVE, n) in by and by[(AUTO, n)].time_us and by[(NATIVE, n)].time_us
    ]
    if ratios:
        worst, at = max(ratios)
        data["worst_auto_over_native"] = {"ratio": worst, "nbytes": at}
        lines.append(
            f"worst auto/native time ratio: {worst:.2f} at {format_bytes(at)} (over {len(ratios)} sizes)"
        )
    smallest = min((r.nbytes for r in rows), default=None)
    auto, ref = by.get((AUTO, smallest)), by.get((MPI4PY, smallest))
    if auto and ref and auto.time_us and ref.time_us:
        over = auto.time_us / ref.time_us
        data["auto_over_mpi4py_smallest"] = {"ratio": over, "nbytes": smallest}
        verdict = "met" if over <= OVERHEAD_TARGET else "NOT met"
        lines.append(
            f"per-call overhead at {format_bytes(smallest)}: auto {auto.time_us:.2f} us vs mpi4py "
            f"{ref.time_us:.2f} us = {over:.2f}x (target <= {OVERHEAD_TARGET}x: {verdict})"
        )
    return lines, data


def environment_header(
    comm: MPI.Comm, args: argparse.Namespace, dtype: np.dtype, sizes: Sequence[int]
) -> dict[str, Any]:
    """Facts about the run, gathered collectively (call on every rank)."""
    import mpi4py  # only for its version

    hosts = comm.allgather(MPI.Get_processor_name())
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        affinity = None
    return {
        "lpmpi_version": getattr(lpmpi, "__version__", "unknown"),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0].strip(),
        "mpi4py_version": mpi4py.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "nprocs": comm.Get_size(),
        "nhosts": len(set(hosts)),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "collectives": list(COLLECTIVES) if args.collective == "all" else [args.collective],
        "dtype": dtype.name,
        "op": args.op,
        "root": args.root,
        "memory": args.memory,
        "sizes": list(sizes),
        "warmup": args.warmup,
        "reps": args.reps or f"adaptive {MIN_REPS}..{MAX_REPS}",
        "min_time_s": args.min_time,
        "chunk_bytes": args.chunk_bytes,
        "lpmpi_env": {k: v for k, v in os.environ.items() if k.startswith("LPMPI_")},
    }


def format_header(h: dict[str, Any]) -> list[str]:
    """The header lines printed before the tables (the bandwidth line last, if measured)."""
    if isinstance(h["reps"], int):
        reps = f"{h['reps']} per size"
    else:
        reps = f"{h['reps']}, about {h['min_time_s']} s per size and algorithm"
    procs = f"{h['nprocs']} on {h['nhosts']} host(s); processors here: {h['cpu_count']}"
    if h["cpu_affinity"] is not None:
        procs += f" ({h['cpu_affinity']} usable)"
    what = (
        f"{', '.join(h['collectives'])}  dtype {h['dtype']}  op {h['op']}"
        f"  root {h['root']}  memory {h['memory']}"
    )
    versions = f"{h['mpi4py_version']} / {h['numpy_version']} / {h['python_version']}"
    lines = [
        "# lpmpi benchmark (python -m lpmpi.bench)",
        f"# lpmpi version   : {h['lpmpi_version']}",
        f"# MPI library     : {h['mpi_library']}",
        f"# mpi4py/numpy/py : {versions}",
        f"# processes P     : {procs}",
        f"# hostname        : {h['hostname']}",
        f"# collective      : {what}",
        f"# date            : {h['date']}",
        f"# timing          : warmup {h['warmup']}, reps {reps};",
        "#                   median over reps of the slowest rank, algorithms interleaved",
    ]
    if h["chunk_bytes"]:
        lines.append(f"# chunk_bytes     : {h['chunk_bytes']} (explicit algorithms; not auto)")
    if h["lpmpi_env"]:
        env = " ".join(f"{k}={v}" for k, v in h["lpmpi_env"].items())
        lines.append(f"# environment     : {env}")
    bw = h.get("memory_bandwidth")
    if bw:
        lines.append(
            f"# MEASURED MEMORY BANDWIDTH ({format_bytes(bw['bytes'])} per rank,"
            f" all {h['nprocs']} ranks at once):"
            f" copy {bw['copy_GBps_per_rank']:.1f} GB/s per rank"
            f" ({bw['copy_GBps_aggregate']:.1f} aggregate),"
            f" add {bw['add_GBps_per_rank']:.1f} GB/s per rank"
            f" ({bw['add_GBps_aggregate']:.1f} aggregate)"
        )
    return lines


# ----------------------------------------------------------------------------- --compare-grid

TUNED = "tuned"
REGRET_TARGET = 0.05  # "auto" within 5% of the exhaustive grid's best
CONFIRM_TOP = 3       # grid configurations that go on from the screening pass to the confirmation
CONFIRM_TIME = 3.0    # the confirmation's timed calls per configuration, in --min-time units


def chunk_label(algorithm: str, chunk_bytes: int | None) -> str:
    """``lp/64K`` for a chunked configuration, the bare name otherwise."""
    if chunk_bytes is None:
        return algorithm
    k = chunk_bytes
    return f"{algorithm}/" + (f"{k >> 20}M" if k >= 1 << 20 else f"{k >> 10}K" if k >= 1 << 10 else f"{k}B")


def tuned_choice(collective: str, nbytes: int, nprocs: int,
                 memory: str = "host") -> tuple[str, int | None] | None:
    """The loaded tuning table's (algorithm, chunk) for this size, P and memory kind, or None."""
    from lpmpi import tables

    for table in tables.status().tables_for(nprocs, memory):
        row = table.lookup(collective, nbytes)
        if row is not None:
            return row.algorithm, row.chunk_bytes
    return None


def grid_cases(collective: str, nbytes: int, nprocs: int, memory: str = "host") -> list[Case]:
    """The exhaustive grid (native first), then the table's choice (``tuned``) and ``auto``."""
    from lpmpi import model

    grid = sorted(model.grid(collective, nbytes), key=lambda g: g[0] != NATIVE)
    cases = [Case(chunk_label(alg, chunk), alg, chunk) for alg, chunk in grid]
    tuned = tuned_choice(collective, nbytes, nprocs, memory)
    if tuned is not None:
        cases.append(Case(TUNED, *tuned))
    cases.append(Case(AUTO, AUTO))
    return cases


@dataclass
class GridRow:
    """One size of ``--compare-grid``: the grid's best against the tuned choice and ``auto``.

    Times are from the confirmation pass (:func:`run_compare_grid`); ``screen_best`` and
    ``screen_best_us`` are the grid's fastest in the screening pass over the whole grid."""

    collective: str
    nbytes: int
    grid_size: int
    best: str
    best_us: float
    native_us: float | None
    tuned: str | None
    tuned_us: float | None
    auto: str
    auto_us: float | None
    screen_best: str = ""
    screen_best_us: float | None = None

    def regret(self, t_us: float | None) -> float | None:
        """Relative excess time over the grid's best."""
        return t_us / self.best_us - 1 if t_us and self.best_us else None


def is_grid_label(label: str) -> bool:
    """A row of the exhaustive grid (not the ``tuned`` or ``auto`` one)."""
    return label not in (TUNED, AUTO)


def finalists(screen: Sequence[Row], top: int) -> list[str]:
    """Labels of the confirmation pass: the ``top`` fastest grid rows of the screening pass,
    native, and the tuned and auto rows."""
    grid = sorted((r for r in screen if is_grid_label(r.label) and r.time_us), key=lambda r: r.time_us or 0)
    keep = [r.label for r in grid[:top]] + [NATIVE, TUNED, AUTO]
    present = {r.label for r in screen if r.time_us}
    return [label for label in dict.fromkeys(keep) if label in present]


def grid_row(collective: str, nbytes: int, screen: Sequence[Row], confirm: Sequence[Row] | None = None) -> GridRow:
    """Summarise one size: ``screen`` measured with :func:`grid_cases`; ``confirm`` (default:
    the screen itself) the finalists measured again, whose times the row reports."""
    confirm = screen if confirm is None else confirm
    by = {r.label: r for r in confirm}
    grid = [r for r in confirm if is_grid_label(r.label) and r.time_us]
    best = min(grid, key=lambda r: r.time_us or math.inf)
    screened = [r for r in screen if is_grid_label(r.label) and r.time_us]
    screen_best = min(screened, key=lambda r: r.time_us or math.inf)
    tuned, auto = by.get(TUNED), by[AUTO]
    native = by.get(NATIVE)
    return GridRow(
        collective,
        nbytes,
        sum(is_grid_label(r.label) for r in screen),
        best.label,
        best.time_us or math.nan,
        native.time_us if native else None,
        chunk_label(tuned.algorithm or "?", tuned.chunk_bytes) if tuned else None,
        tuned.time_us if tuned else None,
        chunk_label(auto.selected_algorithm or "?", auto.selected_chunk_bytes),
        auto.time_us,
        screen_best.label,
        screen_best.time_us,
    )


def _pct(x: float | None) -> str:
    return f"{100 * x:+.1f}%" if x is not None else "-"


def format_grid_row(g: GridRow) -> str:
    """One line of the regret table."""
    return (
        f"{format_bytes(g.nbytes):>10}  {g.grid_size:>4}  {g.best:<10} {_num(g.best_us):>11}  "
        f"{g.tuned or '-':<10} {_num(g.tuned_us):>11} {_pct(g.regret(g.tuned_us)):>8}  "
        f"{g.auto:<10} {_num(g.auto_us):>11} {_pct(g.regret(g.auto_us)):>8}  {_num(g.native_us):>11}"
    )


GRID_HEADER = (
    f"{'size':>10}  {'grid':>4}  {'grid_best':<10} {'best_us':>11}  {'tuned':<10} {'tuned_us':>11} "
    f"{'regret':>8}  {'auto':<10} {'auto_us':>11} {'regret':>8}  {'native_us':>11}"
)


def summarize_grid(grows: Sequence[GridRow]) -> tuple[list[str], dict[str, Any]]:
    """The worst regrets, and whether auto met the target and never lost to native."""
    regrets = [(g.regret(g.auto_us), g.nbytes) for g in grows if g.regret(g.auto_us) is not None]
    tuned = [(g.regret(g.tuned_us), g.nbytes) for g in grows if g.regret(g.tuned_us) is not None]
    vs_native = [(g.auto_us / g.native_us, g.nbytes) for g in grows if g.auto_us and g.native_us]
    data: dict[str, Any] = {"sizes": len(grows), "target": REGRET_TARGET}
    lines = []
    for name, values in (("auto", regrets), ("tuned", tuned)):
        if values:
            worst, at = max(values)
            over = [n for r, n in values if r > REGRET_TARGET]
            data[f"worst_{name}_regret"] = {"regret": worst, "nbytes": at, "sizes_over_target": over}
            lines.append(
                f"worst {name} regret: {_pct(worst)} at {format_bytes(at)}; "
                f"{len(over)} of {len(values)} sizes over {_pct(REGRET_TARGET)}"
            )
    if vs_native:
        worst, at = max(vs_native)
        data["worst_auto_over_native"] = {"ratio": worst, "nbytes": at}
        lines.append(f"worst auto/native time ratio: {worst:.3f} at {format_bytes(at)}")
    # tuned and auto run the same configuration wherever auto follows the table: how far apart
    # their two times are is the noise of this very measurement, the yardstick for the regrets
    twins = sorted(abs(g.auto_us - g.tuned_us) / min(g.auto_us, g.tuned_us) for g in grows
                   if g.auto == g.tuned and g.auto_us and g.tuned_us)
    if twins:
        data["noise"] = {"median": twins[len(twins) // 2], "max": twins[-1], "sizes": len(twins)}
        lines.append(f"noise: tuned and auto (the same configuration) differ by {_pct(twins[len(twins) // 2])[1:]} "
                     f"(median), {_pct(twins[-1])[1:]} (max) over {len(twins)} sizes")
    return lines, data


def run_compare_grid(
    comm: MPI.Comm, s: Settings, counts: Sequence[int], out: Callable[[str], None]
) -> tuple[list[Row], dict[str, Any]]:
    """``--compare-grid`` for one collective, per size in two passes:

    1. screening: every algorithm x chunk (powers of two), the tuned choice and ``auto``, side by
       side (interleaved), results checked;
    2. confirmation: the ``CONFIRM_TOP`` fastest grid configurations, native, tuned and ``auto``
       measured again side by side with ``CONFIRM_TIME`` times the calls.

    The regret is taken from the confirmation.  The screening's minimum over some forty
    configurations, many of them within noise of each other, is biased low (the luckiest of
    many draws), so "auto" would show a regret even when it picks the truly fastest
    configuration; measuring the finalists again, independently, removes most of that bias.
    Prints the regret table."""
    nprocs = comm.Get_size()
    out("")
    out(f"# {s.collective} --compare-grid  dtype={s.dtype.name}  op={s.op}  P={nprocs}  "
        f"(times: confirmation pass of the {CONFIRM_TOP} fastest grid configurations, native, tuned, auto)")
    out(GRID_HEADER)
    rows: list[Row] = []
    grows: list[GridRow] = []
    confirm_settings = replace(s, check=False, min_time=s.min_time * CONFIRM_TIME,
                               reps=None if s.reps is None else int(s.reps * CONFIRM_TIME))
    for count in counts:
        nbytes = count * s.dtype.itemsize
        cases = grid_cases(s.collective, nbytes, nprocs, selection_memory(s.backend))
        screen = run_size(comm, s, count, cases)
        keep = finalists(screen, CONFIRM_TOP)
        confirm = run_size(comm, confirm_settings, count, [c for c in cases if c.label in keep])
        rows.extend(screen)
        grows.append(grid_row(s.collective, nbytes, screen, confirm))
        out(format_grid_row(grows[-1]))
    lines, data = summarize_grid(grows)
    data["rows"] = [asdict(g) for g in grows]
    out(f"# summary ({s.collective} --compare-grid, P={nprocs})")
    for line in lines:
        out("  " + line)
    return rows, data


# ----------------------------------------------------------------------------- driver


def run_collective(
    comm: MPI.Comm,
    s: Settings,
    counts: Sequence[int],
    cases: Sequence[Case],
    out: Callable[[str], None],
) -> tuple[list[Row], dict[str, Any]]:
    """Measure one collective over all sizes on ``comm``, printing rows as they come."""
    nprocs = comm.Get_size()
    out("")
    out(
        f"# {s.collective}  dtype={s.dtype.name}  op={s.op}"
        + (f"  root={s.root}" if s.collective != "allreduce" else "")
        + f"  P={nprocs}"
    )
    out(format_table_header())
    rows: list[Row] = []
    for count in counts:
        size_rows = run_size(comm, s, count, cases)
        rows.extend(size_rows)
        for row in size_rows:
            out(format_row(row))
        out("")
    lines, data = summarize(rows)
    out(f"# summary ({s.collective}, {s.dtype.name}, {s.op}, P={nprocs})")
    for line in lines:
        out("  " + line)
    return rows, data


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that prints (help, usage, errors) on one rank only."""

    def __init__(self, *args: Any, quiet: bool = False, **kwargs: Any) -> None:
        self._quiet = quiet
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: Any = None) -> None:
        if not self._quiet:
            super()._print_message(message, file)


def _positive_size(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _sizes_arg(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser(quiet: bool = False) -> argparse.ArgumentParser:
    """The command-line parser (``quiet`` silences it on ranks other than 0)."""
    p = _Parser(
        prog="python -m lpmpi.bench",
        description="Time lpmpi's algorithms, auto, the MPI library's native collective and mpi4py "
        "side by side over a range of message sizes (run under mpiexec).",
        epilog="example: mpiexec -n 2 python -m lpmpi.bench --collective all --sizes 8,1K,1M,64MiB",
        quiet=quiet,
    )
    p.add_argument("--collective", choices=[*COLLECTIVES, "all"], default="allreduce")
    p.add_argument(
        "--sizes",
        type=_sizes_arg,
        default=parse_sizes(DEFAULT_SIZES),
        help="message sizes in bytes: a list and/or lo:hi[:xF|:+S] ranges, binary units, "
        f"e.g. 8,1K,64K,1M,64MiB or 8:64MiB:x4 (hi always included; default {DEFAULT_SIZES})",
    )
    p.add_argument(
        "--dtype",
        default="float32",
        help="numpy dtype name (default float32; bfloat16 needs ml_dtypes)",
    )
    p.add_argument(
        "--op",
        default="sum",
        type=str.lower,
        choices=OPS,
        help="reduction op (default sum)",
    )
    p.add_argument("--root", type=int, default=0, help="root rank of reduce and bcast (default 0)")
    p.add_argument(
        "--algorithms",
        type=lambda t: [a.strip() for a in t.split(",") if a.strip()],
        help="comma-separated subset of the algorithms, auto and mpi4py (default: all)",
    )
    p.add_argument(
        "--chunk-bytes",
        type=_positive_size,
        help="chunk_bytes for the explicit algorithms (e.g. 256K)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=DEFAULT_WARMUP,
        help=f"warm-up calls per size and algorithm (default {DEFAULT_WARMUP})",
    )
    p.add_argument(
        "--reps",
        type=int,
        help=f"timed repetitions per size (default adaptive, {MIN_REPS}..{MAX_REPS})",
    )
    p.add_argument(
        "--min-time",
        type=float,
        default=DEFAULT_MIN_TIME,
        help=f"adaptive reps: seconds of timed calls per size and algorithm (default {DEFAULT_MIN_TIME})",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        help="also write the header and all rows as JSON to PATH",
    )
    p.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check every result against native's (default on); exit 1 on mismatch",
    )
    p.add_argument(
        "--bandwidth",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the memory bandwidth first (default on)",
    )
    p.add_argument(
        "--memory",
        choices=sorted(MEMORY_BACKENDS),
        default="host",
        help="where buffers live",
    )
    p.add_argument(
        "--compare-grid",
        action="store_true",
        help="measure the exhaustive grid (every algorithm x chunk sizes in powers of two) per size "
        "and report its best, the tuning table's choice and auto: the tuner's regret",
    )
    # --scaling lives in lpmpi/_scaling.py
    p.add_argument(
        "--scaling",
        action="store_true",
        help="time against P: every algorithm on sub-communicators of 2..P ranks, in this one run",
    )
    return p


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace, nprocs: int) -> np.dtype:
    """Check option values the parser cannot; return the dtype."""
    try:
        dtype = resolve_dtype(args.dtype)
    except ValueError as exc:
        p.error(f"--dtype: {exc}")
    if not 0 <= args.root < nprocs:
        p.error(f"--root {args.root} is out of range for {nprocs} processes")
    if args.reps is not None and args.reps < 1:
        p.error("--reps must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if not args.min_time > 0:
        p.error("--min-time must be > 0")
    if args.algorithms is not None:
        collectives = COLLECTIVES if args.collective == "all" else (args.collective,)
        known = {a for c in collectives for a in lpmpi.algorithms(c)} | {AUTO, MPI4PY}
        unknown = [a for a in args.algorithms if a not in known]
        if unknown:
            p.error(f"--algorithms: unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return dtype


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 if any lpmpi result mismatched or any algorithm failed."""
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    parser = build_parser(quiet=rank != 0)
    args = parser.parse_args(argv)
    dtype = _validate(parser, args, nprocs)

    def out(line: str) -> None:
        if rank == 0:
            print(line, flush=True)

    counts = list(dict.fromkeys(max(1, n // dtype.itemsize) for n in args.sizes))
    header = environment_header(comm, args, dtype, [c * dtype.itemsize for c in counts])
    for line in format_header(header):
        out(line)
    if args.bandwidth:
        header["memory_bandwidth"] = measure_memory_bandwidth(comm)
        out(format_header(header)[-1])
    if args.op == "avg" and (args.algorithms is None or MPI4PY in args.algorithms):
        out("# note: no mpi4py row, as avg has no MPI op")

    backend = MEMORY_BACKENDS[args.memory]()
    collectives = COLLECTIVES if args.collective == "all" else (args.collective,)
    all_rows: list[Row] = []
    summaries: dict[str, Any] = {}
    for collective in collectives:
        cases = build_cases(collective, args.algorithms, args.chunk_bytes, args.op)
        if not getattr(backend, "mpi_reads_device", True):  # --memory cuda, MPI not CUDA-aware
            cases = [c for c in cases if c.label != MPI4PY]
        if args.compare_grid:
            cases = [Case(AUTO, AUTO)]  # (the grid's cases are built per size)
        if not cases:
            out(f"# {collective}: none of the requested algorithms applies")
            continue
        s = Settings(
            collective,
            dtype,
            args.op,
            args.root,
            args.warmup,
            args.reps,
            args.min_time,
            args.check,
            backend,
        )
        if args.compare_grid:
            rows, summaries[collective] = run_compare_grid(comm, s, counts, out)
        elif args.scaling:  # lpmpi/_scaling.py
            from lpmpi._scaling import run_scaling

            rows, summaries[collective] = run_scaling(comm, s, counts, cases, out)
        else:
            rows, summaries[collective] = run_collective(comm, s, counts, cases, out)
        all_rows.extend(rows)

    failed = [r for r in all_rows if r.check in ("MISMATCH", "ERROR")]
    if failed:
        out(
            f"\n# FAILED: {len(failed)} row(s): "
            + ", ".join(f"{r.collective}/{r.label}/{r.nbytes}B {r.check}" for r in failed[:20])
            + (" ..." if len(failed) > 20 else "")
        )
    if args.json and rank == 0:
        doc = {
            "header": header,
            "rows": [asdict(r) for r in all_rows],
            "summary": summaries,
            "status": "failed" if failed else "ok",
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=str)
            f.write("\n")
        out(f"# wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
