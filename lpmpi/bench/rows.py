"""The plain benchmark: every case of one message size measured side by side with
:func:`lpmpi.bench.harness.measure` and checked with :mod:`lpmpi.bench.verify` (one
:class:`~lpmpi.bench.cases.Row` each), a collective's table over all sizes, and the memory
bandwidth line of the header (measured the same way).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import engine
from lpmpi.bench import harness
from lpmpi.bench.bound import BOUND_MIN_BYTES, bound_seconds
from lpmpi.bench.cases import AUTO, NATIVE, Case, Row, Settings, bus_factor, make_call
from lpmpi.bench.memory import selection_memory
from lpmpi.bench.report import format_row, format_table_header, summarize
from lpmpi.bench.verify import NO_REFERENCE, check_case, make_buffers, native_reference, whole_blocks

MEMBW_BYTES = 64 << 20
MEMBW_REPS = 5


def run_size(comm: MPI.Comm, s: Settings, count: int, cases: Sequence[Case]) -> list[Row]:
    """Measure and check every case at one message size; rows in ``cases`` order."""
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    count = whole_blocks(s.collective, count, nprocs)
    nbytes = count * s.dtype.itemsize
    root = s.root if engine.collective_info(s.collective).has_root else None
    bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, rank, s.root, nprocs)
    reference = NO_REFERENCE
    if s.check:
        native = None
        if NATIVE in lpmpi.algorithms(s.collective):
            native = make_call(Case(NATIVE, NATIVE), s.collective, bufs, s.op, s.root, comm)
        reference = native_reference(comm, s, bufs, count, native)
    rows = {
        c.label: Row(s.collective, c.label, c.algorithm, c.chunk_bytes, nbytes, count, s.dtype.name,
                     s.op, root, nprocs, transport=c.transport, compression=c.compression)
        for c in cases
    }
    calls: dict[str, Callable[[], Any]] = {}
    memory = selection_memory(s.backend)
    for case in cases:
        row = rows[case.label]
        if case.algorithm == AUTO:
            try:
                row.selected_algorithm, row.selected_chunk_bytes = lpmpi.select(
                    s.collective, nbytes, comm, memory=memory, compression=case.compression)
            except Exception as exc:  # noqa: BLE001 - shown in the row
                row.selected_algorithm = f"? ({type(exc).__name__})"
        call = make_call(case, s.collective, bufs, s.op, s.root, comm)
        row.error = harness.probe(comm, call)
        if row.error is None:
            calls[case.label] = call
        else:
            row.check = "n/a" if case.algorithm is None else "ERROR"
    labels = list(calls)
    reps = harness.Repetitions(min_time=s.min_time, fixed=s.reps)
    timings = harness.measure(comm, [calls[label] for label in labels], reps, warmup=s.warmup)
    for label, t in zip(labels, timings):
        row = rows[label]
        row.reps = t.reps
        row.time_us = t.median * 1e6
        row.min_us, row.max_us = t.min * 1e6, t.max * 1e6
        row.algbw_GBps = nbytes / row.time_us / 1e3
        row.busbw_GBps = row.algbw_GBps * bus_factor(s.collective, nprocs)
    native_row = rows.get(NATIVE)
    bound_us = copy = None
    if s.bound and nbytes >= BOUND_MIN_BYTES:   # at this size's copy bandwidth (caches included)
        copy = copy_bandwidth(comm, nbytes, MEMBW_REPS)
        bound_us = bound_seconds(s.collective, nbytes, nprocs, copy) * 1e6
    for label in labels:
        row = rows[label]
        if native_row is not None and native_row.time_us and row.time_us:
            row.speedup_vs_native = native_row.time_us / row.time_us
        if bound_us and row.time_us:
            row.bound_us, row.bound_copy_GBps, row.of_bound = bound_us, copy, bound_us / row.time_us
        if s.check:
            row.error = check_case(comm, s, calls[label], bufs, reference, rows[label].compression)
            row.check = "ok" if row.error is None else "MISMATCH"
    return list(rows.values())


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
        + (f"  root={s.root}" if engine.collective_info(s.collective).has_root else "")
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


def copy_bandwidth(comm: MPI.Comm, nbytes: int, reps: int, src: np.ndarray | None = None,
                   dst: np.ndarray | None = None) -> float:
    """GB/s per rank of ``np.copyto`` of ``nbytes`` (read + write counted), every rank at once
    (median over reps of the slowest rank, one warm-up)."""
    n = nbytes // 4
    src = np.ones(n, np.float32) if src is None else src
    dst = np.zeros(n, np.float32) if dst is None else dst
    [t] = harness.measure(comm, [functools.partial(np.copyto, dst, src)], reps, warmup=1)
    return 2 * n * 4 / t.median / 1e9


def measure_memory_bandwidth(
    comm: MPI.Comm, nbytes: int = MEMBW_BYTES, reps: int = MEMBW_REPS
) -> dict[str, float]:
    """Copy and add bandwidth (GB/s) of this node's memory, every rank at once.

    copy: ``np.copyto`` of ``nbytes`` (read + write counted); add: ``np.add`` of float32 arrays of
    ``nbytes`` (2 reads + 1 write).  Per rank = bytes / median over reps of the slowest rank's
    time (one warm-up, copy and add measured one after the other); aggregate = per rank * P.
    """
    n = nbytes // 4
    a = np.ones(n, np.float32)
    b = np.full(n, 2.0, np.float32)
    c = np.zeros(n, np.float32)
    copy = copy_bandwidth(comm, nbytes, reps, a, c)
    [t_add] = harness.measure(comm, [functools.partial(np.add, a, b, out=c)], reps, warmup=1)
    nprocs = comm.Get_size()
    add = 3 * n * 4 / t_add.median / 1e9
    return {
        "bytes": n * 4,
        "copy_GBps_per_rank": copy,
        "copy_GBps_aggregate": copy * nprocs,
        "add_GBps_per_rank": add,
        "add_GBps_aggregate": add * nprocs,
    }
