"""Facts and knobs of lpmpi's C engine, for the tools built on lpmpi (the benchmark harness
``lpmpi.bench``, the tuner, the figures of docs/): the names the engine knows, its limits, its
algorithm registry and its device-memory settings.  Everything here comes from the engine
itself, at import, so that no other module restates it.

>>> import lpmpi.engine as engine
>>> "allreduce" in engine.COLLECTIVES and "sum" in engine.OPS
True
>>> [a.name for a in engine.algorithm_info("bcast")][:1]
['lp']
>>> engine.collective_info("reduce").has_root
True
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lpmpi import _core

#: every collective of the engine, in its order (the rows of src/core/colls.c lp_colls, from lpmpi/_colls.py; a tuning
#: table's rows name them)
ENGINE_COLLECTIVES: tuple[str, ...] = tuple(_core.COLLECTIVES)
#: the collectives a user calls by name (lpmpi.C, iC, C_init), in the engine's order; the
#: others are called through one of these (reduce_scatter_v: reduce_scatter(..., counts=))
COLLECTIVES: tuple[str, ...] = tuple(t["name"] for t in _core._coll_traits() if not t["via"])
#: reduction op names, in the engine's order (the values of :class:`lpmpi.Op`)
OPS: tuple[str, ...] = tuple(_core.OP_NAMES)
#: element type names, in the engine's order
DTYPES: tuple[str, ...] = tuple(_core.DTYPE_NAMES)
#: where buffers live: "host" or "cuda"
MEMORY_KINDS: tuple[str, ...] = tuple(_core.MEMORY_KINDS)
#: the chunk sizes the model and the tuner consider: powers of two in [CHUNK_MIN, CHUNK_MAX]
CHUNK_MIN: int = int(_core.CHUNK_MIN)
CHUNK_MAX: int = int(_core.CHUNK_MAX)
#: LPMPI_WINDOW: chunks in flight per direction, 1..WINDOW_MAX
WINDOW_MAX: int = int(_core.WINDOW_MAX)
#: LPMPI_STAGING_BUFFERS / staging buffers of a table row: 1..STAGING_MAX
STAGING_MAX: int = int(_core.STAGING_MAX)
#: the engine's default staging buffers (chunks in flight per direction of the staged pipeline)
DEFAULT_STAGING: int = int(_core.DEFAULT_STAGING)
#: True when this build has the CUDA kernels and transports (nvcc was found at build time)
CUDA_BUILD: bool = bool(_core.CUDA_BUILD)


#: node-local transports a table row or an override can ask the algorithms that have them for
#: (:func:`transport_algorithms`); None in a row: the model's rule by message size
TRANSPORTS: tuple[str, ...] = tuple(_core.TRANSPORTS)


@dataclass(frozen=True)
class Collective:
    """One row of the engine's table of collectives (src/alg/registry.c ``lp_colls``): what the
    engine, the bench, the tuner and the tests ask of a collective instead of its name."""

    name: str
    has_op: bool        # reduces: takes an op (and acc_dtype), AVG divides
    has_root: bool
    input: str          # the ranks whose data goes in: "all" or "root"
    result: str         # the ranks whose buffer the call writes: "all", "root" or "nonroot"
    send_blocks: int    # blocks of the count in sendbuf: 1, or 0 for P
    recv_blocks: int    # blocks of the count in recvbuf: 1, or 0 for P
    mpi_name: str       # the MPI library's own collective: "MPI_Allreduce", ...
    ring_shm: bool      # its ring runs over the shared-memory transport (else single-copy reads only)
    send_counts: bool = False   # sendbuf's blocks have per-rank counts (alltoallv, reduce_scatter_v)
    recv_counts: bool = False   # recvbuf's blocks have per-rank counts (alltoallv, allgatherv)
    via: str | None = None      # None, or the collective whose function calls it (its counts= form)
    prefix: bool = False        # rank r's result reduces the inputs of ranks 0..r only (scan)

    def params(self) -> tuple[list[str], list[str]]:
        """(positional-or-keyword, keyword-only) parameter names of lpmpi's C, iC and C_init,
        from the row: the buffers (with their per-rank counts), op, root, comm; then the
        displacements, algorithm, chunk_bytes, acc_dtype (reductions), the counts of the
        collectives it calls (reduce_scatter's counts=), and compression (where it has a
        compressed row)."""
        both = self.send_counts and self.recv_counts
        if not self.has_recvbuf:
            pos = ["buf"]
        elif both:
            pos = ["sendbuf", "sendcounts", "recvbuf", "recvcounts"]
        else:
            pos = ["sendbuf", "recvbuf"] + (["counts"] if self.recv_counts else [])
        pos += (["op"] if self.has_op else []) + (["root"] if self.has_root else []) + ["comm"]
        kw = (["sdispls", "rdispls"] if both else ["displs"] if self.recv_counts else [])
        kw += ["algorithm", "chunk_bytes"] + (["acc_dtype"] if self.takes_acc_dtype else [])
        kw += [k for c in _COLLS.values() if c.via == self.name for k in c.counts_params()]
        kw += ["compression"] if self.takes_compression else []
        return pos, kw

    def counts_params(self) -> list[str]:
        """The parameters a collective called through another's function adds to it."""
        return ["counts"] if self.via and (self.send_counts or self.recv_counts) else []

    @property
    def has_recvbuf(self) -> bool:
        """False for a collective whose one buffer is both input and output (bcast)."""
        return not (self.input == "root" and self.result == "nonroot")

    @property
    def takes_compression(self) -> bool:
        """True for the collectives with a compressed row (compression=: allreduce,
        reduce_scatter, allgather; docs/compression.md)."""
        return self.name in _core._cz_collectives()

    @property
    def takes_acc_dtype(self) -> bool:
        """True for the collectives whose calls take acc_dtype (those with an op)."""
        return self.has_op

    @property
    def same_everywhere(self) -> bool:
        """True when every rank gets the same result (allreduce, allgather; not reduce_scatter,
        whose ranks each get their own block)."""
        return self.result == "all" and self.send_blocks != 0 and not self.prefix

    @property
    def mpi4py_name(self) -> str:
        """mpi4py's method of the MPI collective: "Allreduce", "Reduce_scatter_block", ..."""
        return self.mpi_name.removeprefix("MPI_")

    @property
    def blocks(self) -> bool:
        """True for a collective whose buffers hold a block per rank (not element-wise)."""
        return self.send_blocks != 1 or self.recv_blocks != 1

    def lpmpi_args(self, send: Any, recv: Any, op: Any, root: int, comm: Any,
                   counts: Any = None) -> tuple[Any, ...]:
        """The positional arguments of lpmpi's call of this collective (and of its i- and
        _init forms), in the order of :meth:`params`: send (with its per-rank counts), recv
        (not bcast; with its counts), op (reductions), root (rooted), comm.  counts: the per-rank
        counts of a v collective (both sides' for alltoallv)."""
        both = self.send_counts and self.recv_counts
        bufs = ((send, counts, recv, counts) if both else
                (send, recv, counts) if self.recv_counts else
                (send, recv) if self.has_recvbuf else (send,))
        return bufs + ((op,) if self.has_op else ()) + ((root,) if self.has_root else ()) + (comm,)

    def gets_result(self, rank: int, root: int = 0) -> bool:
        """True where the call writes ``rank``'s buffer."""
        return self.result == "all" or (self.result == "root") == (rank == root)

    def brings_input(self, rank: int, root: int = 0) -> bool:
        """True where ``rank``'s data goes into the call."""
        return self.input == "all" or rank == root


_COLLS: dict[str, Collective] = {t["name"]: Collective(**t) for t in _core._coll_traits()}


def collective_info(name: str) -> Collective:
    """The engine's row of collective ``name`` (ValueError for an unknown one)."""
    try:
        return _COLLS[name]
    except KeyError:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {name!r}") from None


def bus_factor(collective: str, nprocs: int) -> float:
    """busbw / algbw, as nccl-tests, from the collective's row: allreduce 2(P-1)/P, reduce and
    bcast 1, the collectives whose buffers hold a block per rank (allgather, reduce_scatter,
    alltoall, gather, scatter, their v forms) (P-1)/P (their size: the P blocks' bytes)."""
    info = collective_info(collective)
    P = nprocs
    if info.blocks:
        return (P - 1) / P
    return 2.0 * (P - 1) / P if info.has_op and info.result == "all" else 1.0


@dataclass(frozen=True)
class Algorithm:
    """One entry of the engine's algorithm registry."""

    name: str
    collective: str
    chunked: bool   # honours chunk_bytes


def algorithm_info(collective: str) -> tuple[Algorithm, ...]:
    """The registry's algorithms of ``collective``, in registry order ("auto" excluded)."""
    return tuple(Algorithm(name, collective, chunked) for name, _, chunked in _core._algorithm_info(collective))


def chunked(collective: str) -> dict[str, bool]:
    """``{algorithm: chunked}`` for ``collective``, in registry order."""
    return {a.name: a.chunked for a in algorithm_info(collective)}


def has_transports(collective: str, algorithm: str) -> bool:
    """True when ``algorithm`` of ``collective`` runs over a node-local transport chosen per call
    (on host memory, between the ranks of one node): a table row may name it (TRANSPORTS)."""
    return algorithm in chunked(collective) and bool(_core._node_local(collective, algorithm))


def ring_transports(collective: str) -> tuple[str, ...]:
    """The node-local transports the ring of ``collective`` can run over (of TRANSPORTS): the
    shared-memory one serves only the collectives whose row says so (allreduce, allgather, reduce_scatter)."""
    return tuple(t for t in TRANSPORTS if t != "shm" or collective_info(collective).ring_shm)


def set_transport(name: str | None) -> str | None:
    """The process's node-local transport override ("mpi", "shm", "cma"; None: none), above
    tables and model; every rank must set the same.  One the communicator lacks (e.g. "shm"
    under LPMPI_NODE_TRANSPORT=cma) falls back to the model's rule.  Returns the previous one."""
    return _core.set_transport_override(name)


@contextlib.contextmanager
def transport(name: str | None) -> Iterator[None]:
    """``name`` as the transport override for the duration, the previous one restored after
    (None: leave the setting alone)."""
    if name is None:
        yield
        return
    old = set_transport(name)
    try:
        yield
    finally:
        set_transport(old)


def device_info() -> dict[str, Any]:
    """What this build and process do with device memory: ``built`` (CUDA kernels compiled in),
    ``emulated`` (LPMPI_EMULATE_STAGING), ``devices`` (visible CUDA devices), ``transport``
    ("cuda-aware" or "staged") and ``staging_buffers``."""
    return dict(_core.cuda_info())


def staging_buffers() -> int:
    """Staging buffers of the staged device pipeline now (LPMPI_STAGING_BUFFERS at import)."""
    return int(_core.cuda_info()["staging_buffers"])


def set_staging_buffers(n: int) -> None:
    """Set the staging buffers of the staged device pipeline (1..STAGING_MAX); ValueError else."""
    _core.set_staging_buffers(n)


@contextlib.contextmanager
def staging(n: int | None) -> Iterator[None]:
    """``n`` staging buffers in force for the duration (None: leave the setting alone)."""
    if n is None:
        yield
        return
    old = staging_buffers()
    set_staging_buffers(n)
    try:
        yield
    finally:
        set_staging_buffers(old)
