"""``python -m lpmpi.bench --scaling``: time against the number of processes, in one run.

    mpiexec -n 4 python -m lpmpi.bench --scaling --sizes 16MiB --json scaling.json

In one ``mpiexec`` run of P processes, every algorithm is measured on the sub-communicators
made of ranks 0..k-1 for k = 2 .. P (``COMM_WORLD.Split``), with the same methodology as the
plain benchmark (:func:`lpmpi.bench.rows.run_size`: algorithms interleaved, median over repetitions
of the slowest rank, every result checked against ``native``).  The ranks outside the current
sub-communicator wait in an ``Ibarrier`` polled every millisecond, so they leave the cores to
the measured ranks (busy-waiting in ``MPI_Barrier`` would slow an oversubscribed run).

It prints one table per message size, rows P and columns algorithms (time in microseconds), and
a summary: each algorithm's time at the largest P over its time at P = 2, at the largest size.
The JSON rows (``--json``) are the plain benchmark's, one per (P, size, algorithm), ``nprocs``
giving the sub-communicator size; ``tools/plots.py`` draws time against P from them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from mpi4py import MPI

from lpmpi import engine
from lpmpi._units import format_bytes
from lpmpi.bench.cases import Case, Row, Settings
from lpmpi.bench.report import format_row
from lpmpi.bench.rows import run_size


def _idle_wait(comm: MPI.Comm, poll_s: float = 1e-3) -> None:
    """A barrier on ``comm`` that sleeps instead of spinning."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll_s)


def run_scaling(
    comm: MPI.Comm,
    s: Settings,
    counts: Sequence[int],
    cases: Sequence[Case],
    out: Callable[[str], None],
) -> tuple[list[Row], dict[str, Any]]:
    """Measure ``cases`` at every size on sub-communicators of 2 .. size(comm) ranks."""
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    rows: list[Row] = []
    out("")
    out(f"# {s.collective} --scaling  dtype={s.dtype.name}  op={s.op}  P=2..{nprocs} (ranks 0..P-1)")
    if nprocs < 2:
        out("# --scaling needs at least 2 processes")
        return rows, {}
    if engine.collective_info(s.collective).has_root and s.root != 0:
        out("# --scaling: root 0 is used on every sub-communicator")
    s_sub = replace(s, root=0)
    for k in range(2, nprocs + 1):
        sub = comm.Split(0 if rank < k else MPI.UNDEFINED, rank)
        if sub != MPI.COMM_NULL:
            for count in counts:
                size_rows = run_size(sub, s_sub, count, cases)
                rows.extend(size_rows)
                for row in size_rows:
                    out(f"P={k:<4d} " + format_row(row))
            sub.Free()
        _idle_wait(comm)
    labels = list(dict.fromkeys(r.label for r in rows))
    by = {(r.nprocs, r.nbytes, r.label): r for r in rows}
    for count in counts:
        nbytes = count * s.dtype.itemsize
        out("")
        out(f"# time_us at {format_bytes(nbytes)} (rows P, columns algorithms; measured)")
        out("P     " + "".join(f"{label:>12}" for label in labels))
        for k in range(2, nprocs + 1):
            cells = []
            for label in labels:
                r = by.get((k, nbytes, label))
                cells.append(f"{r.time_us:12.1f}" if r is not None and r.time_us else f"{'-':>12}")
            out(f"{k:<6d}" + "".join(cells))
    summary: dict[str, Any] = {"growth_Pmax_over_P2": {}}
    big = max(counts) * s.dtype.itemsize
    out("")
    out(f"# summary: time at P={nprocs} / time at P=2, {format_bytes(big)}")
    for label in labels:
        a, b = by.get((2, big, label)), by.get((nprocs, big, label))
        if a and b and a.time_us and b.time_us:
            g = b.time_us / a.time_us
            summary["growth_Pmax_over_P2"][label] = g
            out(f"  {label:<10} {g:6.2f}x")
    return rows, summary
