"""``--node-bytes``: what each algorithm sends between nodes, counted by the engine (no timing).

On several nodes (real, or MPICH's emulation: ``MPIR_CVAR_NUM_CLIQUES=2``, round robin, or
blocks with ``MPIR_CVAR_CLIQUES_BY_BLOCK=1``), lpmpi's chains and rings follow node order so
that they cross each node boundary once whatever the placement.  This mode shows it without
timing oversubscribed runs: per size and algorithm, one call, and the bytes each rank sent to
ranks of other nodes in lpmpi's own point-to-point transfers (``_core.node_bytes``; the MPI
library's collectives, which ``native`` calls, are not counted).  Rows give the largest and
the mean over ranks, as bytes and as a multiple of the message size n, every rank's count, and
per node what was sent against the cost model's count (:func:`lpmpi.model.net_traffic`, the
network term of "auto"; for ``native`` only the model's, which prices it as be).

Also the node-local transports of a communicator (:func:`node_transports`: those the ring
allreduce can be asked for between the ranks of a node, ``--transports`` of the benchmark and
the tuner) and the one the model's rule takes at a size (:func:`rule_transport`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpi4py import MPI

from lpmpi import _core, engine, model
from lpmpi._units import format_bytes
from lpmpi.bench.cases import NATIVE, Case, Settings, counts_kwargs, make_call
from lpmpi.bench.verify import make_buffers, whole_blocks


def placement(nodes: Sequence[int]) -> str:
    """Ranks grouped by node: ``node of rank 0: 0 2 | node of rank 1: 1 3``.

    >>> placement([0, 1, 0, 1])
    'node of rank 0: ranks 0 2 | node of rank 1: ranks 1 3'
    """
    groups: dict[int, list[int]] = {}
    for rank, lead in enumerate(nodes):
        groups.setdefault(lead, []).append(rank)
    return " | ".join(f"node of rank {lead}: ranks {' '.join(map(str, rs))}" for lead, rs in groups.items())


def transports_of(name: str) -> tuple[str, ...]:
    """The node-local transports named by :func:`lpmpi._core.comm_transport`'s ``name``, in
    :data:`lpmpi.engine.TRANSPORTS` order: "mpi" always, "shm" and "cma" where it has them.

    >>> transports_of("shm+cma"), transports_of("cma"), transports_of("mpi")
    (('mpi', 'shm', 'cma'), ('mpi', 'cma'), ('mpi',))
    """
    have = set(name.split("+")) | {"mpi"}
    return tuple(t for t in engine.TRANSPORTS if t in have)


def node_transports(comm: MPI.Comm) -> tuple[str, ...]:
    """The node-local transports ``comm`` has (:func:`transports_of`).  Collective on ``comm``'s
    first lpmpi call (it prepares the communicator), local after."""
    return transports_of(_core.comm_transport(comm)[0])


def rule_transport(comm: MPI.Comm, nbytes: int, collective: str = "allreduce") -> str | None:
    """The transport the model's rule by size takes for the ring of ``collective`` of ``nbytes``
    on host memory on ``comm`` (None before ``comm``'s first lpmpi call).  Local."""
    return _core.ring_transport(comm, nbytes, None, collective)


def nic_sent() -> tuple[int, int] | None:
    """(bytes, packets) this host's network interfaces (loopback and bridges aside) have sent,
    from /sys/class/net (in a network namespace: the namespace's own NICs); None where there
    are none to read."""
    import os

    base = "/sys/class/net"
    total, pkts, seen = 0, 0, False
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return None
    for name in names:
        if name == "lo" or os.path.isdir(os.path.join(base, name, "bridge")):
            continue
        try:
            with open(os.path.join(base, name, "statistics", "tx_bytes")) as f:
                total += int(f.read())
            with open(os.path.join(base, name, "statistics", "tx_packets")) as f:
                pkts += int(f.read())
            seen = True
        except (OSError, ValueError):
            continue
    return (total, pkts) if seen else None


def run_node_bytes(
    comm: MPI.Comm, s: Settings, counts: Sequence[int], cases: Sequence[Case], out: Callable[[str], None]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One call per (size, case); every rank's bytes to other nodes.  Collective."""
    nodes = _core.comm_nodes(comm)
    nprocs, rank = comm.Get_size(), comm.Get_rank()
    # the NICs' own counters where the nodes are hosts of their own (lpmpi.cluster's box, a real
    # cluster): the node's lowest rank reads them; not on one host (emulated nodes share its NICs)
    hosts = comm.allgather(MPI.Get_processor_name())
    own_nics = len({hosts[lead] for lead in set(nodes)}) == len(set(nodes)) > 1
    out("")
    out(f"# {s.collective}: bytes sent to other nodes per rank, P={nprocs}, {len(set(nodes))} node(s): "
        f"{placement(nodes)}")
    out(f"{'size':>10}  {'algorithm':<9}  {'max/rank':>10}  {'max/n':>6}  {'mean/n':>6}  per rank; "
        f"per node /n: sent (model)")
    rows: list[dict[str, Any]] = []
    for count in counts:
        count = whole_blocks(s.collective, count, nprocs)
        nbytes = count * s.dtype.itemsize
        for case in cases:
            if case.algorithm is None:          # mpi4py's, gloo: not lpmpi's transfers
                continue
            bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, rank, s.root, nprocs)
            call = make_call(case, s.collective, bufs, s.op, s.root, comm)
            comm.Barrier()
            _core.node_bytes(reset=True)
            nic0 = nic_sent()
            call()
            comm.Barrier()
            nic1 = nic_sent()
            sent = comm.allgather(_core.node_bytes(reset=True))
            nic = comm.allgather(None if nic0 is None or nic1 is None else
                                 (nic1[0] - nic0[0], nic1[1] - nic0[1]))
            alg = case.algorithm
            if alg == "auto":
                info = engine.collective_info(s.collective)
                alg = _core.call_decision(s.collective, bufs.send, bufs.recv if info.has_recvbuf else None,
                                          s.op, s.root, comm, **counts_kwargs(s.collective, bufs, nprocs))["algorithm"]
            counted = alg != NATIVE
            leads = list(dict.fromkeys(nodes))
            predicted = model.net_traffic(s.collective, alg, nodes, nbytes, root=s.root)[0]
            per_node = [sum(b for b, lead in zip(sent, nodes) if lead == k) for k in leads] if counted else None
            nic_node = [nic[k] for k in leads] if own_nics and all(nic[k] is not None for k in leads) else None
            row = {"collective": s.collective, "label": case.label, "algorithm": alg, "nbytes": nbytes,
                   "nodes": nodes, "bytes_per_rank": sent if counted else None, "bytes_per_node": per_node,
                   "model_bytes_per_node": predicted,
                   # (bytes, packets) each node's NICs sent during the call: frames, headers and
                   # the TCP acknowledgements of what it received included
                   "nic_per_node": nic_node}
            rows.append(row)
            pred = " ".join(f"({p / nbytes:.3f})" for p in predicted)
            if nic_node:
                pred += "; NICs sent /n: " + " ".join(f"{b / nbytes:.3f}" for b, _ in nic_node)
            if not counted:
                out(f"{nbytes:>10}  {case.label:<9}  {'n/a':>10}  {'':>6}  {'':>6}  (the MPI library's own; "
                    f"model as be: {pred})")
                continue
            top, mean = max(sent), sum(sent) / nprocs
            both = " ".join(f"{b / nbytes:.3f} ({p / nbytes:.3f})" for b, p in zip(per_node, predicted))
            if nic_node:
                both += "; NICs sent /n: " + " ".join(f"{b / nbytes:.3f}" for b, _ in nic_node)
            out(f"{nbytes:>10}  {case.label:<9}  {format_bytes(top):>10}  {top / nbytes:6.2f}  "
                f"{mean / nbytes:6.2f}  {' '.join(map(str, sent))};  {both}")
    return rows, {"nodes": nodes}

