"""The benchmark's oracle: the deterministic input pattern every rank's buffers are filled with,
the expected reduction (numpy), and the checks of every measured row's result against
``native``'s and numpy's.

>>> import numpy as np
>>> idx = np.arange(4, dtype=np.uint64)
>>> dt = np.dtype("float32")
>>> e = expected_values(idx, 2, dt, "sum")
>>> bool(np.array_equal(e, pattern(idx, 0, dt, "sum") + pattern(idx, 1, dt, "sum")))
True
"""
from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from lpmpi import engine
from lpmpi.bench.cases import NATIVE, Buffers, Settings
from lpmpi.bench.harness import probe
from lpmpi.bench.memory import HostMemory

SENTINEL = 0xA5  # byte written into output buffers before a checked call
SAMPLE_POINTS = 4096

NP_OPS: dict[str, Callable[..., Any]] = {
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

#: (sample indices, numpy's expected values there, native's full result); see native_reference
Reference = tuple[Any, Any, Any]
NO_REFERENCE: Reference = (None, None, None)


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
    ufunc = NP_OPS[op]
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


def block_count(collective: str, count: int, nprocs: int) -> int:
    """Elements of one block for a message of ``count`` elements: ``count`` where the buffers
    are one block each; for allgather / reduce_scatter, whose ``count`` is the P blocks' (as
    nccl-tests sizes them), ``count // nprocs``."""
    info = engine.collective_info(collective)
    return count // max(nprocs, 1) if not (info.send_blocks and info.recv_blocks) else count


def whole_blocks(collective: str, count: int, nprocs: int) -> int:
    """``count`` rounded down to whole blocks where the collective's ``count`` is the P blocks'
    (allgather, reduce_scatter): the message a bench row measures."""
    info = engine.collective_info(collective)
    return count if info.send_blocks and info.recv_blocks else block_count(collective, count, nprocs) * nprocs


def blocked_value(collective: str, idx: np.ndarray, block: int, rank: int, nprocs: int,
                  dtype: np.dtype, op: str, root: int = 0) -> np.ndarray:
    """The result at flat indices ``idx`` of ``rank``'s recvbuf of a collective whose buffers
    hold a block per rank, from its row: a recvbuf of P blocks (allgather, alltoall, gather):
    element i is rank i // block's input at i % block (alltoall: of its block ``rank``); one
    block: the reduction of every rank's input at rank * block + j (reduce_scatter), or the
    root's input there (scatter)."""
    info = engine.collective_info(collective)
    b = np.uint64(max(block, 1))
    if info.recv_blocks == 0:
        out = np.empty(idx.size, dtype)
        src = (idx // b).astype(np.int64)
        off = np.uint64(rank * block) if info.send_blocks == 0 else np.uint64(0)
        for q in range(nprocs):
            m = src == q
            out[m] = pattern(idx[m] % b + off, q, dtype, op)
        return out
    if info.has_op:
        return expected_values(idx + np.uint64(rank * block), nprocs, dtype, op)
    return pattern(idx + np.uint64(rank * block), root, dtype, op)


def make_buffers(
    backend: HostMemory,
    collective: str,
    count: int,
    dtype: np.dtype,
    op: str,
    rank: int,
    root: int,
    nprocs: int = 1,
) -> Buffers:
    """Allocate this rank's buffers for one message size, filled with its :func:`pattern`
    (outputs with the sentinel).  allgather / reduce_scatter: ``count`` is the P blocks' count
    (:func:`block_count`); sendbuf holds one block (allgather) or P (reduce_scatter)."""
    info = engine.collective_info(collective)
    if not (info.send_blocks and info.recv_blocks):
        block = block_count(collective, count, nprocs)
        nsend = block * (nprocs if not info.send_blocks else 1)
        nrecv = block * (nprocs if not info.recv_blocks else 1)
        orig = pattern(np.arange(nsend, dtype=np.uint64), rank, dtype, op)
        recv = backend.from_host(np.zeros(nrecv, dtype))
        backend.fill_bytes(recv, SENTINEL)
        return Buffers(send=backend.from_host(orig), recv=recv, orig=orig)
    idx = np.arange(count, dtype=np.uint64)
    if not info.has_recvbuf:   # bcast: the root's data
        orig = pattern(idx, root, dtype, op)
        buf = backend.from_host(orig)
        if rank != root:
            backend.fill_bytes(buf, SENTINEL)
        return Buffers(send=buf, recv=None, orig=orig)
    orig = pattern(idx, rank, dtype, op)
    recv = backend.from_host(orig)
    backend.fill_bytes(recv, SENTINEL)
    return Buffers(send=backend.from_host(orig), recv=recv, orig=orig)


def native_reference(
    comm: MPI.Comm, s: Settings, bufs: Buffers, count: int, native_call: Callable[[], Any] | None
) -> Reference:
    """Sample indices, numpy's expected values there, and native's full result (if it is right).

    Call on every rank; ``native_call`` runs native on ``bufs`` (None: the collective has no
    native).  The arrays are None where this rank holds no result (reduce: non-root) and for
    bcast, whose reference (the root's data) is known everywhere.  Native's result is None when
    native failed or differs from numpy; its own row then reports that.
    """
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    info = engine.collective_info(s.collective)
    if not info.has_recvbuf:
        return NO_REFERENCE
    holds_result = info.gets_result(rank, s.root)
    if not (info.send_blocks and info.recv_blocks):
        block = block_count(s.collective, count, nprocs)
        idx = sample_indices(block * (nprocs if not info.recv_blocks else 1))
        expected = blocked_value(s.collective, idx, block, rank, nprocs, s.dtype, s.op, s.root)
    else:
        idx = sample_indices(count) if holds_result else None
        # a prefix reduction (scan): rank r's result reduces ranks 0..r
        upto = rank + 1 if info.prefix else nprocs
        expected = expected_values(idx, upto, s.dtype, s.op) if idx is not None else None
    if native_call is None:
        return idx, expected, None
    s.backend.fill_bytes(bufs.recv, SENTINEL)
    if probe(comm, native_call) is not None:
        return idx, expected, None
    if idx is None or expected is None:
        return NO_REFERENCE
    result = s.backend.to_host(bufs.recv).copy()
    if not same_result(result.reshape(-1)[idx.astype(np.intp)], expected, s.dtype, nprocs):
        return idx, expected, None
    return idx, expected, result


#: per compression: the bound's factor of block maxima (docs/compression.md: bf16 2^-8 of the
#: magnitudes, int8 1 / 254, int4 1 / 14 of each block's maximum)
CZ_FACTOR = {"bf16": 2.0 ** -8, "int8": 1 / 254, "int4": 1 / 14}


def _within_bound(comm: MPI.Comm, collective: str, compression: str, orig: np.ndarray,
                  result: np.ndarray, reference: Reference) -> str | None:
    """A compressed result against the reference (native's, else numpy's sample), within the
    two-roundings bound taken coarsely with every block's maximum replaced by the whole
    array's: factor * (sum over ranks of max |x_r| + max |result|) (allgather, one rounding:
    factor * max over ranks of max |x_r|), plus float32 accumulation.  Call on every rank."""
    idx, expected, full = reference
    mags = comm.allgather(float(np.max(np.abs(orig.astype(np.float64)), initial=0.0)))
    if full is not None:
        got, want = result.astype(np.float64), full.reshape(-1).astype(np.float64)
    elif idx is not None and expected is not None:
        got = result[idx.astype(np.intp)].astype(np.float64)
        want = np.asarray(expected, np.float64)
    else:
        return None
    f = CZ_FACTOR[compression]
    top = float(np.max(np.abs(want), initial=0.0))
    bound = f * max(mags) if collective == "allgather" else f * (sum(mags) + top)
    bound += 1e-6 * (sum(mags) + top)                     # float32 accumulation
    err = np.abs(got - want)
    bad = np.flatnonzero(~(err <= bound))
    if bad.size:
        i = int(bad[0])
        return (f"{bad.size} of {got.size} elements beyond {compression}'s bound {bound:.3g}; "
                f"first [{i}]: {got[i]!r}, not {want[i]!r}")
    return None


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
    reference: Reference,
    compression: str | None = None,
) -> str | None:
    """Run ``call`` once on sentinel-filled outputs and check the result on every rank.

    allreduce/reduce: result equals native's (and numpy's at sampled elements), input unchanged;
    reduce: non-root outputs untouched; allreduce: bitwise-identical on all ranks; bcast: every
    rank holds the root's data exactly.  Returns None if all is well, else the first failing
    rank's reason.
    """
    rank, nprocs, be = comm.Get_rank(), comm.Get_size(), s.backend
    info = engine.collective_info(s.collective)
    why: str | None = None
    if not info.has_recvbuf:
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
        elif not info.gets_result(rank, s.root):
            if not np.all(_flat_bytes(result) == SENTINEL):
                why = "recvbuf written on a non-root rank"
        elif compression is not None:
            why = _within_bound(comm, s.collective, compression, bufs.orig, result, reference)
        elif full is not None and not same_result(result, full, s.dtype, nprocs):
            why = _diff(result, full.reshape(-1), NATIVE)
        elif idx is not None and expected is not None:
            sample = result[idx.astype(np.intp)]
            if not same_result(sample, expected, s.dtype, nprocs):
                why = _diff(sample, expected, "numpy (sampled)", idx)
        if info.same_everywhere:
            digests = comm.allgather(zlib.crc32(_flat_bytes(result)))
            if why is None and len(set(digests)) > 1:
                why = "results differ between ranks"
    whys = comm.allgather(why)
    return next((f"rank {r}: {w}" for r, w in enumerate(whys) if w is not None), None)
