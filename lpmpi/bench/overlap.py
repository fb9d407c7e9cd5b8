"""``python -m lpmpi.bench --overlap``: how much of a nonblocking allreduce hides behind compute.

    mpiexec -n 2 python -m lpmpi.bench --overlap --sizes 1M,16M,64M

For each size and case (``auto`` unless ``--algorithms`` says otherwise), three calls are timed
side by side by :func:`lpmpi.bench.harness.measure` (interleaved, median of the slowest rank):

- comm      ``lpmpi.iallreduce(x, y)`` then ``wait()`` at once;
- compute   a compute phase sized to take about as long as ``comm`` (calibrated first);
- both      start the allreduce, run the compute phase, then wait;

and ``overlap = (t_comm + t_compute - t_both) / min(t_comm, t_compute)``: 1 when the shorter of
the two is entirely hidden, 0 when they run one after the other.  Each is measured without and
then with lpmpi's progress thread (``lpmpi.progress_thread``).  Two kinds of compute:

- ``sleep``  ``time.sleep``: a wait that releases the GIL and the core, what the host thread of
  a training step does while the GPU computes (backward) or another thread works;
- ``numpy``  a numpy kernel (``np.multiply`` on an L2-sized array, repeated): CPU work on the
  rank's own core.

Without a progress thread nothing advances lpmpi's pipeline while the caller computes (only the
chunks already posted move), so overlap comes from the progress thread.  With one rank per core,
a CPU compute phase and the progress thread compete for that core: what ``numpy`` shows there is
the price of sharing it, not what a machine with a spare core (or a GPU doing the compute) gets.
"""
from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi._units import format_bytes
from lpmpi.bench import harness
from lpmpi.bench.cases import Case, Settings
from lpmpi.bench.verify import make_buffers

COMPUTES = ("sleep", "numpy")
KERNEL_ELEMS = 1 << 17          # 512 KiB of float32: cache-resident


@dataclass
class OverlapRow:
    """One (size, case, compute, thread) cell; ``asdict`` is the JSON row."""

    collective: str
    label: str
    nbytes: int
    nprocs: int
    compute: str
    thread: bool
    comm_us: float | None = None
    compute_us: float | None = None
    both_us: float | None = None
    overlap: float | None = None
    selected_algorithm: str | None = None
    error: str | None = None


def efficiency(t_comm: float, t_compute: float, t_both: float) -> float:
    """``(t_comm + t_compute - t_both) / min(t_comm, t_compute)``.

    >>> efficiency(1.0, 1.0, 1.0), efficiency(1.0, 1.0, 2.0), efficiency(2.0, 1.0, 2.5)
    (1.0, 0.0, 0.5)
    """
    return (t_comm + t_compute - t_both) / min(t_comm, t_compute)


def _compute(kind: str, seconds: float) -> Callable[[], None]:
    """A compute phase of about ``seconds``."""
    if kind == "sleep":
        return functools.partial(time.sleep, seconds)
    a = np.ones(KERNEL_ELEMS, np.float32)
    kernel = functools.partial(np.multiply, a, np.float32(1.0000001), out=a)
    for _ in range(3):
        kernel()
    t0 = time.perf_counter()
    for _ in range(20):
        kernel()
    per = (time.perf_counter() - t0) / 20
    reps = max(1, round(seconds / per))

    def run() -> None:
        for _ in range(reps):
            kernel()
    return run


def _start(case: Case, s: Settings, bufs: Any, comm: MPI.Comm) -> Callable[[], Any]:
    return functools.partial(lpmpi.iallreduce, bufs.send, bufs.recv, s.op, comm,
                             algorithm=case.algorithm, chunk_bytes=case.chunk_bytes)


def run_overlap(comm: MPI.Comm, s: Settings, counts: Sequence[int], cases: Sequence[Case],
                computes: Sequence[str], out: Callable[[str], None]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The overlap table (allreduce) and its summary."""
    nprocs = comm.Get_size()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    per_node, cores = node.Get_size(), os.cpu_count() or 1
    node.Free()
    out("")
    out(f"# allreduce --overlap  dtype={s.dtype.name}  op={s.op}  P={nprocs}  compute: {', '.join(computes)}")
    out("# overlap = (t_comm + t_compute - t_both) / min(t_comm, t_compute): 1 hidden, 0 serial")
    if per_node >= cores:
        out(f"# note: {per_node} ranks on {cores} cores of this node: each rank has a core of its own "
            "at most, so a CPU compute phase (numpy) and lpmpi's progress thread share it; the "
            "sleep rows show what a free core (or a GPU computing) gives")
    out(f"{'size':>10}  {'algorithm':<9}  {'compute':<7}  {'thread':<6}  {'comm_us':>10}  "
        f"{'compute_us':>10}  {'both_us':>10}  {'overlap':>7}")
    was_running = lpmpi.progress_thread(False)
    rows: list[OverlapRow] = []
    try:
        for count in counts:
            nbytes = count * s.dtype.itemsize
            bufs = make_buffers(s.backend, "allreduce", count, s.dtype, s.op, comm.Get_rank(), 0)
            for case in cases:
                start = _start(case, s, bufs, comm)
                sel = None
                if case.algorithm == "auto":
                    sel = lpmpi.select("allreduce", nbytes, comm)[0]
                comm_only = lambda start=start: start().wait()
                [est] = harness.measure(comm, [comm_only], 5, warmup=2)
                t_target = comm.allreduce(est.median, op=MPI.MAX)
                for kind in computes:
                    work = _compute(kind, t_target)

                    def both(start=start, work=work) -> None:
                        req = start()
                        work()
                        req.wait()
                    for thread in (False, True):
                        row = OverlapRow("allreduce", case.label, nbytes, nprocs, kind, thread,
                                         selected_algorithm=sel)
                        try:
                            lpmpi.progress_thread(thread)
                            reps = harness.Repetitions(min_time=s.min_time, fixed=s.reps)
                            tc, tw, tb = harness.measure(comm, [comm_only, work, both], reps,
                                                         warmup=s.warmup)
                            row.comm_us, row.compute_us, row.both_us = (tc.median * 1e6, tw.median * 1e6,
                                                                        tb.median * 1e6)
                            row.overlap = efficiency(row.comm_us, row.compute_us, row.both_us)
                        except Exception as exc:  # noqa: BLE001 - shown in the row
                            row.error = f"{type(exc).__name__}: {exc}"
                        finally:
                            lpmpi.progress_thread(False)
                        rows.append(row)
                        cells = (f"{format_bytes(nbytes):>10}  {case.label:<9}  {kind:<7}  "
                                 f"{'on' if thread else 'off':<6}  ")
                        if row.error:
                            out(cells + row.error)
                        else:
                            out(cells + f"{row.comm_us:10.1f}  {row.compute_us:10.1f}  {row.both_us:10.1f}  "
                                f"{row.overlap:7.2f}" + (f"  -> {sel}" if sel else ""))
    finally:
        lpmpi.progress_thread(was_running)
    summary: dict[str, Any] = {}
    out("")
    out(f"# summary (P={nprocs}): overlap with the progress thread")
    for kind in computes:
        cells = {f"{format_bytes(r.nbytes)} {r.label}": r.overlap for r in rows
                 if r.compute == kind and r.thread and r.overlap is not None}
        summary[kind] = cells
        out(f"  {kind:<6} " + ", ".join(f"{k}: {v:.2f}" for k, v in cells.items()))
    return [asdict(r) for r in rows], summary
