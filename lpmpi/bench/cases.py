"""What one benchmark row measures: its case (an lpmpi algorithm, ``auto`` or the mpi4py
reference), the settings a collective's sizes share, the buffers, the call that is timed and the
row it fills (``asdict`` of a :class:`Row` is the JSON row).

>>> [c.label for c in build_cases("bcast", ["native", "auto"], None, "sum")]
['native', 'auto']
>>> [c.label for c in build_cases("allreduce", ["ring", "auto"], None, "sum", ["mpi", "cma"])]
['ring@mpi', 'ring@cma', 'auto']
>>> bus_factor("allreduce", 4), bus_factor("bcast", 4)
(1.5, 1.0)
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core, engine
from lpmpi._units import chunk_label
from lpmpi.bench.memory import HostMemory
from lpmpi.engine import bus_factor  # noqa: F401 (lpmpi.bench re-exports it)

AUTO = "auto"
NATIVE = "native"
MPI4PY = "mpi4py"
GLOO = "gloo"   # --peers: torch.distributed's gloo collective (GLOO_CALLS)


@dataclass(frozen=True)
class Case:
    """One row label of a size: an lpmpi algorithm (``auto`` included) or the mpi4py reference.

    ``algorithm`` is None for the mpi4py row.  ``--compare-grid`` has one case per
    (algorithm, chunk_bytes) pair, labelled e.g. ``lp/64K``.  ``transport``: the node-local
    transport its calls are made over (:func:`lpmpi.engine.transport`, for the algorithms that
    have transports; ``--transports`` has one case per transport, labelled e.g. ``ring@shm``);
    None: the engine's own choice.
    """

    label: str
    algorithm: str | None
    chunk_bytes: int | None = None
    transport: str | None = None
    #: --compression: the call's compression= (lossy; rows labelled e.g. ``auto+int8``)
    compression: str | None = None


@dataclass
class Buffers:
    """The buffers of one size: ``send``/``recv`` (bcast: ``send`` is the buffer, ``recv`` None).

    ``orig`` is a host copy of this rank's input (bcast: of the root's data) used by the check.
    """

    send: Any
    recv: Any
    orig: np.ndarray


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
    #: --fresh-input (--forms): rewrite each call's input before it, untimed
    fresh_input: bool = False
    #: the memory-traffic bound (lpmpi.bench.bound) of each size >= BOUND_MIN_BYTES, at the copy
    #: bandwidth measured at that size (off: not asked for, device memory, several nodes)
    bound: bool = False
    #: --read-result (--forms): read each call's result after it, timed with the call
    read_result: bool = False


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
    bound_us: float | None = None        # the memory-traffic lower bound (lpmpi.bench.bound)
    bound_copy_GBps: float | None = None  # the copy bandwidth per rank it assumes (this size's)
    of_bound: float | None = None        # bound_us / time_us: 1 is at the bound
    check: str = "-"
    selected_algorithm: str | None = None
    selected_chunk_bytes: int | None = None
    error: str | None = None
    transport: str | None = None          # the case's node-local transport (--transports)
    compression: str | None = None        # the case's compression= (--compression)


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


def mpi_op(op: str) -> Any:
    """The mpi4py op for an lpmpi op name, or None (``avg`` has no MPI equivalent)."""
    return None if op == "avg" else getattr(MPI, op.upper())


def build_cases(collective: str, names: Sequence[str] | None, chunk_bytes: int | None, op: str,
                transports: Sequence[str] | None = None,
                compressions: Sequence[str] = ()) -> list[Case]:
    """The cases of one collective: its algorithms (``native`` first), ``auto``, ``mpi4py``.

    ``names`` restricts them (names not valid for this collective are skipped).  ``chunk_bytes``
    goes to the explicit algorithms; ``auto`` keeps its own choice.  ``transports`` (host memory,
    of :data:`lpmpi.engine.TRANSPORTS`): an algorithm that has transports
    (:func:`lpmpi.engine.has_transports`) is one case per transport instead, ``ring@shm``.
    ``compressions``: one more ``auto`` case per compression, ``auto+int8`` (the collectives
    that take compression=; lossy, checked against the bounds of docs/compression.md).

    >>> [c.label for c in build_cases("allreduce", ["auto"], None, "sum", None, ["bf16", "int8"])]
    ['auto', 'auto+bf16', 'auto+int8']
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
        elif transports and engine.has_transports(collective, label):
            cases += [Case(chunk_label(label, None, transport=tp), label, chunk_bytes, tp)
                      for tp in transports if tp in engine.ring_transports(collective)]
        else:
            cases.append(Case(label, label, chunk_bytes))
    if collective in _core._cz_collectives():
        cases += [Case(f"{AUTO}+{c}", AUTO, compression=c) for c in compressions]
    return cases


def with_transport(call: Callable[[], Any], transport: str | None) -> Callable[[], Any]:
    """``call`` with ``transport`` as the node-local transport override around each of its calls
    (:func:`lpmpi.engine.transport`; every rank sets the same), so that calls measured side by
    side each run over their own; ``call`` itself for None."""
    if transport is None:
        return call

    def over_transport() -> Any:
        with engine.transport(transport):
            return call()
    return over_transport


def make_call(
    case: Case, collective: str, bufs: Buffers, op: str, root: int, comm: MPI.Comm,
    acc_dtype: str | None = None,
) -> Callable[[], Any]:
    """A no-argument callable running one collective of ``case`` on ``bufs`` (acc_dtype: passed
    to lpmpi's allreduce and reduce; mpi4py's own collectives and gloo have none), over the
    case's transport when it has one (:func:`with_transport`)."""
    info = engine.collective_info(collective)
    if acc_dtype is not None and (case.label == GLOO or case.algorithm is None or not info.has_op):
        raise ValueError(f"acc_dtype: lpmpi's allreduce and reduce only, not {case.label} {collective}")
    if case.label == GLOO:
        return gloo_call(collective, bufs, op)
    if case.algorithm is None:  # mpi4py's own collective (recvbuf on the ranks that get one)
        args: tuple[Any, ...] = (bufs.send,)
        if info.has_recvbuf:
            args += (bufs.recv if info.gets_result(comm.Get_rank(), root) else None,)
        kw_mpi: dict[str, Any] = {}
        if info.has_op:
            kw_mpi["op"] = mpi_op(op)
        if info.has_root:
            kw_mpi["root"] = root
        if info.send_counts or info.recv_counts:      # equal per-rank counts, as lpmpi's row below
            n = equal_counts(collective, bufs, comm.Get_size())
            args = tuple([b, n] if b is not None and ((i == 0 and info.send_counts) or (i == 1 and info.recv_counts))
                         else b for i, b in enumerate(args))
        return functools.partial(getattr(comm, info.mpi4py_name), *args, **kw_mpi)
    kw: dict[str, Any] = {"algorithm": case.algorithm, "chunk_bytes": case.chunk_bytes}
    if acc_dtype is not None:
        kw["acc_dtype"] = acc_dtype
    if case.compression is not None:
        kw["compression"] = case.compression
    counts = equal_counts(collective, bufs, comm.Get_size()) if info.send_counts or info.recv_counts else None
    call = functools.partial(lpmpi_function(collective), *info.lpmpi_args(bufs.send, bufs.recv, op, root, comm,
                                                                           counts), **kw)
    return with_transport(call, case.transport)


def equal_counts(collective: str, bufs: Buffers, nprocs: int) -> list[int]:
    """The per-rank counts of a v collective's bench row: P equal blocks (the P-block buffer's)."""
    info = engine.collective_info(collective)
    whole = bufs.recv if info.recv_counts else bufs.send
    return [int(np.asarray(whole).size) // max(nprocs, 1)] * nprocs


def counts_kwargs(collective: str, bufs: Buffers, nprocs: int) -> dict[str, Any]:
    """The per-rank counts of a v collective's bench call by parameter name (equal_counts; the
    names of :meth:`lpmpi.engine.Collective.params`), {} for the others."""
    info = engine.collective_info(collective)
    if not (info.send_counts or info.recv_counts):
        return {}
    n = equal_counts(collective, bufs, nprocs)
    return {"counts": n, "recvcounts": n} if info.send_counts and info.recv_counts else {"counts": n}


def lpmpi_function(collective: str, form: str = "blocking") -> Callable[..., Any]:
    """lpmpi's call of ``collective`` in ``form`` ("blocking": ``allreduce``, "nonblocking":
    ``iallreduce``, "persistent": ``allreduce_init``)."""
    name = {"blocking": "{}", "nonblocking": "i{}", "persistent": "{}_init"}[form].format(collective)
    return getattr(lpmpi, name)


GLOO_OPS = {"sum": "SUM", "prod": "PRODUCT", "max": "MAX", "min": "MIN", "band": "BAND",
            "bor": "BOR", "bxor": "BXOR"}


#: --peers: the collectives gloo has, as torch.distributed names them (the newest name first)
GLOO_CALLS = {"allreduce": ("all_reduce",), "allgather": ("all_gather_single", "all_gather_into_tensor"),
              "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor")}


def gloo_call(collective: str, bufs: Buffers, op: str) -> Callable[[], Any]:
    """--peers: torch.distributed's call (the gloo process group the bench set up) on tensors
    over the same host buffers, out of place as the other rows.  allreduce: copy send into
    recv, then all_reduce recv in place (what a PyTorch CPU user runs for an out-of-place
    result); allgather / reduce_scatter: all_gather_single / reduce_scatter_single (torch <
    2.13: all_gather_into_tensor / reduce_scatter_tensor), flat tensors."""
    import torch
    import torch.distributed as dist

    if collective not in GLOO_CALLS or (collective != "allgather" and op not in GLOO_OPS):
        raise ValueError(f"gloo rows: {', '.join(GLOO_CALLS)} with {', '.join(GLOO_OPS)}")
    send, recv = torch.from_numpy(bufs.send).reshape(-1), torch.from_numpy(bufs.recv).reshape(-1)
    fn = next(getattr(dist, n) for n in GLOO_CALLS[collective] if hasattr(dist, n))
    if collective == "allgather":
        return lambda: fn(recv, send)
    rop = getattr(dist.ReduceOp, GLOO_OPS[op])
    if collective == "reduce_scatter":
        return lambda: fn(recv, send, op=rop)

    def call() -> None:
        recv.copy_(send)
        fn(recv, op=rop)

    return call
