"""The memory-traffic estimate of a collective on one node (what the bench prints each row
against: the ``of_bound`` column).

An estimate, not a floor: the model counts every byte of the result written past the caches
and takes the bandwidth of a plain copy (``np.copyto``, whose stores first read the lines they
write), so a transport whose results stay in the caches or are written with streaming stores
runs below it (ring over shared memory at 64 MiB on an AMD EPYC VM: 7.4 ms against an
estimate of 9.96 ms, issue 24).  A claim "at the bound" needs a floor measured the way the
transports move data (tools/floor_p2.c is one for P = 2); none is built into the bench yet.

Model.  P ranks of one node, n bytes per rank, host memory; transfers are single-copy (a rank
reads a peer's data straight from the peer's buffer, as Linux CMA or a shared-memory window
allow) into cache-resident chunk slots, so every byte is read from or written to memory only
when an algorithm cannot avoid it.  The n-byte result is split into P blocks of n/P, one owned
by each rank:

- reduce-scatter: the owner of a block reads its own and the P - 1 peers' contributions to it
  (P * n/P = n bytes read) and writes the reduced block (n/P written);
- allgather: every rank copies the P - 1 blocks it does not own from their owners into its
  result ((P - 1) n/P read, (P - 1) n/P written).

Per rank: reads n (2P - 1)/P, writes n, so the traffic is

    allreduce:  T(P) = (3P - 1)/P * n      (P = 1: 2n, a copy; P = 2: 2.5n)
    reduce:     the same at the root (reduce-scatter, then the root gathers the P - 1 other
                blocks: n + n/P + 2 (P - 1)/P n), the bottleneck rank
    bcast:      2n for every non-root (read the root's buffer, write its own); 0 at P = 1
    allgather:  2n, n the P blocks' bytes (as nccl-tests sizes it): every rank reads the P
                blocks (its own, and the P - 1 peers' from their buffers) and writes them
    reduce_scatter: (P + 1)/P * n, n the P blocks' bytes: the owner of a block reads the P
                contributions to it (n) and writes it (n/P); P = 1: a copy, 2n
    the other collectives whose buffers hold a block per rank and do not reduce (from their
    rows): 2n where the recvbuf holds the P blocks (alltoall, gather's root, allgatherv,
    alltoallv: each block read once from its sender and written once), 2n/P where it holds one
    (scatter: each rank copies its block from the root)

(An algorithm that is not single-copy, such as an MPI library's two-copy shared-memory
path, moves more.)  Every rank does this at once, so the time bound is T(P) / B, with B the
memory bandwidth per rank while all ranks stream at once: the bench's copy measurement
(``np.copyto``, read + write bytes counted, all ranks at once), made at the row's own size, so
that a message that fits in the caches is held to the caches' speed, a large one to memory's.
The bench gives it from BOUND_MIN_BYTES up.

>>> traffic_bytes("allreduce", 64 << 20, 2) / (64 << 20)
2.5
>>> traffic_bytes("allreduce", 1000, 4)
2750.0
>>> round(bound_seconds("allreduce", 64 << 20, 2, 32.0) * 1e3, 2)
5.24
"""
from __future__ import annotations

from lpmpi.engine import COLLECTIVES, collective_info

#: the bench gives the bound from this size up (smaller copies measure call overhead, not memory)
BOUND_MIN_BYTES = 256 << 10


def traffic_bytes(collective: str, nbytes: float, nprocs: int) -> float:
    """Bytes read + written per rank (the busiest rank) at least, for ``nbytes`` per rank on
    one node of ``nprocs`` ranks (see the module's model)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}")
    if nprocs < 1 or nbytes < 0:
        raise ValueError(f"need nprocs >= 1 and nbytes >= 0, got {nprocs}, {nbytes}")
    P = nprocs
    if collective == "bcast":
        return 0.0 if P == 1 else 2.0 * nbytes
    if collective == "allgather":
        return 2.0 * nbytes
    if collective == "reduce_scatter":
        return (P + 1) / P * nbytes
    info = collective_info(collective)
    if info.prefix:   # scan: the last rank reads its input and its predecessor's result, writes its own
        return (3.0 if P > 1 else 2.0) * nbytes
    if info.blocks and not info.has_op:
        return 2.0 * nbytes if info.recv_blocks == 0 else 2.0 * nbytes / P
    return (3 * P - 1) / P * nbytes


def bound_seconds(collective: str, nbytes: float, nprocs: int, copy_GBps_per_rank: float) -> float:
    """The time bound: the traffic at the per-rank memory bandwidth (GB/s, read + write)."""
    if not copy_GBps_per_rank > 0:
        raise ValueError(f"copy_GBps_per_rank must be > 0, got {copy_GBps_per_rank}")
    return traffic_bytes(collective, nbytes, nprocs) / (copy_GBps_per_rank * 1e9)
