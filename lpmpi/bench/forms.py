"""``python -m lpmpi.bench --forms blocking,nonblocking,persistent,inplace``: the same collective
in several forms, side by side.

    mpiexec -n 2 python -m lpmpi.bench --forms blocking,nonblocking,persistent,inplace \\
        --algorithms lp,ring,auto --sizes 8,1M,64MiB

For every size and every case (algorithm or ``auto``), each form is one row.  A form is timed
in blocks of consecutive calls, as a loop makes them (:func:`lpmpi.bench.harness.measure` on
that call alone: median of the slowest rank), the blocks of all rows of a size in rotating
order, three rounds; a row's time is the median of its three block medians (min/max: the
spread of the blocks).  Interleaving single calls of different forms would measure something
else: each call would find the caches as another form left them (an in-place buffer, for one,
holds lines the previous call's transfers left in the peer core's cache).

- ``blocking``     ``lpmpi.allreduce(x, y)`` (the plain benchmark's row);
- ``nonblocking``  ``lpmpi.iallreduce(x, y).wait()`` (label ``ALG/nb``): what a start and a wait
  cost against the blocking call;
- ``persistent``   ``p.start(); p.wait()`` of ``lpmpi.allreduce_init(x, y)`` made once (``ALG/pers``);
- ``inplace``      ``lpmpi.allreduce(lpmpi.IN_PLACE, z)`` (``ALG/inpl``; allreduce, reduce,
  allgather: ``z`` holds the P blocks, this rank's at its place; reduce_scatter: ``z`` holds the
  P blocks and gets the result in its first): the pattern of training loops, against out of place.

``--fresh-input`` rewrites a call's input (the in-place buffer: its original values) before
each timed call, outside its time, as a training step writes its gradient before reducing it.
Without it, the out-of-place input is written once and then only read: MPICH's single-copy
(CMA) transfers read it clean from a cache both cores share, which no in-place buffer can be
(the previous call wrote it), so at 256 KiB - 1 MiB in place looks slower than it is in a loop
that computes its input.  docs/performance-archive.md has both measurements.

``--read-result`` (host memory) reads every byte of each call's result right after it, inside
its time, as an optimizer step reads what its allreduce wrote: a result written past the caches
(the shared-memory transport streams large out-of-place results) costs its reader, which timing
the call alone does not show.

With ``--transports``, an algorithm that has node-local transports is one case per transport
(``ring@shm``): each form's calls are made over it (the persistent request made over it).

Every row's result is checked as in the plain benchmark (the in-place one on a fresh copy of the
input).  The summary gives each form's time over the blocking out-of-place call's, per case and
size.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import engine
from lpmpi._units import format_bytes
from lpmpi.bench import harness
from lpmpi.bench.cases import (
    AUTO,
    NATIVE,
    Case,
    Row,
    Settings,
    bus_factor,
    equal_counts,
    lpmpi_function,
    make_call,
    with_transport,
)
from lpmpi.bench.memory import selection_memory
from lpmpi.bench.report import format_row, format_table_header
from lpmpi.bench.verify import check_case, make_buffers, native_reference, same_result, whole_blocks

FORMS = ("blocking", "nonblocking", "persistent", "inplace")
ROUNDS = 3   # blocks per form and size
SUFFIX = {"blocking": "", "nonblocking": "/nb", "persistent": "/pers", "inplace": "/inpl"}


def _kw(case: Case) -> dict[str, Any]:
    return {"algorithm": case.algorithm, "chunk_bytes": case.chunk_bytes}


def _args(s: Settings, bufs: Any, comm: MPI.Comm) -> tuple[Any, ...]:
    counts = (equal_counts(s.collective, bufs, comm.Get_size())
              if engine.collective_info(s.collective).send_counts or engine.collective_info(s.collective).recv_counts
              else None)
    return engine.collective_info(s.collective).lpmpi_args(bufs.send, bufs.recv, s.op, s.root, comm, counts)


def _nonblocking(case: Case, s: Settings, bufs: Any, comm: MPI.Comm) -> Callable[[], Any]:
    start = functools.partial(lpmpi_function(s.collective, "nonblocking"), *_args(s, bufs, comm), **_kw(case))
    return with_transport(lambda: start().wait(), case.transport)


def _persistent(case: Case, s: Settings, bufs: Any, comm: MPI.Comm) -> tuple[Callable[[], Any], Any]:
    with engine.transport(case.transport):         # the request's transport is decided here
        req = lpmpi_function(s.collective, "persistent")(*_args(s, bufs, comm), **_kw(case))

    def call() -> Any:
        req.start()
        return req.wait()
    return call, req


def has_inplace(collective: str) -> bool:
    """The collectives whose in-place form the bench times, from the row: those whose input goes
    into the buffer of the result (``sendbuf=IN_PLACE``) and whose blocks have no per-rank counts
    (not bcast, whose one buffer is always in place, nor scatter, whose root keeps its block)."""
    info = engine.collective_info(collective)
    return info.has_recvbuf and info.input == "all" and not (info.send_counts or info.recv_counts)


def _grows(s: Settings) -> bool:
    """In place, the input is one block of a buffer of P (allgather, gather's root)."""
    info = engine.collective_info(s.collective)
    return info.send_blocks == 1 and info.recv_blocks == 0


def _inplace_buffer(s: Settings, orig: np.ndarray, rank: int, nprocs: int) -> Any:
    """The buffer of an in-place call: the input itself (allreduce, reduce, reduce_scatter's and
    alltoall's P blocks), or P blocks with this rank's input at its place (allgather, gather)."""
    if not _grows(s):
        return s.backend.from_host(orig)
    host = np.zeros(nprocs * orig.size, orig.dtype)
    host[rank * orig.size:(rank + 1) * orig.size] = orig
    return s.backend.from_host(host)


def _inplace_input(s: Settings, buf: Any, orig: np.ndarray, rank: int) -> Any:
    """The part of an in-place buffer that is this rank's input (--fresh-input rewrites it)."""
    return buf[rank * orig.size:(rank + 1) * orig.size] if _grows(s) else buf


def _inplace(case: Case, s: Settings, buf: Any, comm: MPI.Comm) -> Callable[[], Any]:
    """The in-place call: IN_PLACE and the buffer where this rank gets the result; a rank that
    gets none (reduce off the root) passes its input and no recvbuf."""
    info = engine.collective_info(s.collective)
    mine = info.gets_result(comm.Get_rank(), s.root)
    send = buf
    if not mine and _grows(s):              # gather off the root: its own block only
        n, r = buf.size // comm.Get_size(), comm.Get_rank()
        send = buf[r * n:(r + 1) * n]
    args = info.lpmpi_args(lpmpi.IN_PLACE if mine else send, buf if mine else None, s.op, s.root, comm)
    return with_transport(functools.partial(lpmpi_function(s.collective), *args, **_kw(case)),
                          case.transport)


def _check_inplace(comm: MPI.Comm, s: Settings, case: Case, orig: np.ndarray, reference: Any) -> str | None:
    """The in-place call's result, on a fresh copy of the input, against native's (reduce_scatter:
    the buffer's first block)."""
    buf = _inplace_buffer(s, orig, comm.Get_rank(), comm.Get_size())
    _inplace(case, s, buf, comm)()
    why = None
    full = reference[2]
    if engine.collective_info(s.collective).gets_result(comm.Get_rank(), s.root) and full is not None:
        got = s.backend.to_host(buf).reshape(-1)[:full.size]
        if not same_result(got, full.reshape(-1), s.dtype, comm.Get_size()):
            why = "in-place result differs from native's"
    whys = comm.allgather(why)
    return next((f"rank {r}: {w}" for r, w in enumerate(whys) if w is not None), None)


def _fresh(s: Settings, call: Callable[[], Any], buf: Any, orig: np.ndarray, rank: int) -> Any:
    """``call`` with its input ``buf`` rewritten from ``orig`` before each timed repetition
    (bcast: the root's only; the other ranks' buffer is the output)."""
    return harness.refilled(call, s.backend, buf, orig, s.collective, rank, s.root)


def _result_of(s: Settings, form: str, bufs: Any, inplace_buf: Any, rank: int) -> Any:
    """The buffer a call of ``form`` leaves its result in on this rank (None: no result here,
    reduce off the root)."""
    info = engine.collective_info(s.collective)
    if not info.has_recvbuf:
        return bufs.send
    if not info.gets_result(rank, s.root):
        return None
    return inplace_buf if form == "inplace" else bufs.recv


def _then_read(call: Callable[[], Any], result: Any) -> Callable[[], Any]:
    """``call``, then a read of every byte of ``result`` (host memory), in the same timed call."""
    if result is None:
        return call
    view = np.asarray(result).reshape(-1).view(np.uint8)

    def read() -> Any:
        out = call()
        view.max()
        return out
    return read


def run_forms_size(comm: MPI.Comm, s: Settings, count: int, cases: Sequence[Case],
                   forms: Sequence[str]) -> list[Row]:
    """Every (case, form) of one size, measured together; rows in (case, form) order."""
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    info = engine.collective_info(s.collective)
    root = s.root if info.has_root else None
    count = whole_blocks(s.collective, count, nprocs)
    nbytes = count * s.dtype.itemsize
    bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, rank, s.root, nprocs)
    # in place: every collective with a recvbuf (bcast has no such form)
    inplace_buf = _inplace_buffer(s, bufs.orig, rank, nprocs) if has_inplace(s.collective) else None
    native = None
    if NATIVE in lpmpi.algorithms(s.collective):
        native = make_call(Case(NATIVE, NATIVE), s.collective, bufs, s.op, s.root, comm)
    reference = native_reference(comm, s, bufs, count, native) if s.check else (None, None, None)
    rows: dict[str, Row] = {}
    calls: dict[str, Callable[[], Any]] = {}
    checks: dict[str, Callable[[], str | None]] = {}
    persistent: list[Any] = []
    memory = selection_memory(s.backend)
    for case in cases:
        for form in forms:
            if form == "inplace" and inplace_buf is None:
                continue
            label = case.label + SUFFIX[form]
            row = Row(s.collective, label, case.algorithm, case.chunk_bytes, nbytes, count, s.dtype.name,
                      s.op, root, nprocs, transport=case.transport)
            if case.algorithm == AUTO and form == "blocking":
                row.selected_algorithm, row.selected_chunk_bytes = lpmpi.select(
                    s.collective, nbytes, comm, memory=memory)
            rows[label] = row
            try:
                if form == "blocking":
                    call = make_call(case, s.collective, bufs, s.op, s.root, comm)
                elif form == "nonblocking":
                    call = _nonblocking(case, s, bufs, comm)
                elif form == "persistent":
                    call, req = _persistent(case, s, bufs, comm)
                    persistent.append(req)
                else:
                    call = _inplace(case, s, inplace_buf, comm)
            except Exception as exc:  # noqa: BLE001 - shown in the row
                row.error = f"{type(exc).__name__}: {exc}"
            row.error = row.error or harness.probe(comm, call)
            if row.error is None and s.read_result:
                call = _then_read(call, _result_of(s, form, bufs, inplace_buf, rank))
            if row.error is None and s.fresh_input:
                call = _fresh(s, call, _inplace_input(s, inplace_buf, bufs.orig, rank)
                              if form == "inplace" else bufs.send, bufs.orig, rank)
            if row.error is not None:
                row.check = "ERROR"
                continue
            calls[label] = call
            if form == "inplace":
                checks[label] = functools.partial(_check_inplace, comm, s, case, bufs.orig, reference)
            else:
                checks[label] = functools.partial(check_case, comm, s, call, bufs, reference)
    labels = list(calls)
    reps = harness.Repetitions(min_time=s.min_time / ROUNDS, fixed=s.reps)
    medians: dict[str, list[float]] = {label: [] for label in labels}
    nreps: dict[str, int] = dict.fromkeys(labels, 0)
    for rnd in range(ROUNDS):       # blocks of one form at a time, in rotating order
        for j in range(len(labels)):
            label = labels[(j + rnd) % len(labels)]
            [t] = harness.measure(comm, [calls[label]], reps, warmup=s.warmup)
            medians[label].append(t.median)
            nreps[label] += t.reps
    for label in labels:
        row = rows[label]
        row.reps = nreps[label]
        row.time_us = float(np.median(medians[label])) * 1e6
        row.min_us, row.max_us = min(medians[label]) * 1e6, max(medians[label]) * 1e6
        row.algbw_GBps = nbytes / row.time_us / 1e3
        row.busbw_GBps = row.algbw_GBps * bus_factor(s.collective, nprocs)
    native_row = rows.get(NATIVE)
    for label in labels:
        row = rows[label]
        if native_row is not None and native_row.time_us and row.time_us:
            row.speedup_vs_native = native_row.time_us / row.time_us
        if s.check:
            row.error = checks[label]()
            row.check = "ok" if row.error is None else "MISMATCH"
    for req in persistent:
        req.free()
    return list(rows.values())


def run_forms(comm: MPI.Comm, s: Settings, counts: Sequence[int], cases: Sequence[Case],
              forms: Sequence[str], out: Callable[[str], None]) -> tuple[list[Row], dict[str, Any]]:
    """The forms table of one collective over all sizes, and its summary."""
    nprocs = comm.Get_size()
    out("")
    out(f"# {s.collective} --forms {','.join(forms)}  dtype={s.dtype.name}  op={s.op}  P={nprocs}")
    out(format_table_header())
    rows: list[Row] = []
    for count in counts:
        size_rows = run_forms_size(comm, s, count, cases, forms)
        rows.extend(size_rows)
        for row in size_rows:
            out(format_row(row))
        out("")
    by = {(r.nbytes, r.label): r for r in rows}
    summary: dict[str, Any] = {}
    others = [f for f in forms if f != "blocking"]
    if "blocking" in forms and others:
        out(f"# summary ({s.collective}, P={nprocs}): time of each form / time of the blocking call, "
            "out of place")
        out(f"{'size':>10}  {'case':<9}  " + "  ".join(f"{f:>11}" for f in others))
        for nbytes in dict.fromkeys(r.nbytes for r in rows):
            for case in cases:
                base = by.get((nbytes, case.label))
                if base is None or not base.time_us:
                    continue
                cells = []
                for f in others:
                    r = by.get((nbytes, case.label + SUFFIX[f]))
                    ratio = r.time_us / base.time_us if r is not None and r.time_us else None
                    cells.append(f"{ratio:11.3f}" if ratio else f"{'-':>11}")
                    if ratio:
                        summary.setdefault(f, {}).setdefault(case.label, {})[str(nbytes)] = ratio
                out(f"{format_bytes(nbytes):>10}  {case.label:<9}  " + "  ".join(cells))
    return rows, summary
