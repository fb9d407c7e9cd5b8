"""The alpha-beta-gamma cost model behind "auto" where no tuning table applies.

alpha: seconds per message (latency), beta: seconds per byte moved, gamma: seconds per byte
reduced, within a node; alpha_net, beta_net: per message and per byte through a node's NIC, the
network term of communicators spanning several nodes (what each algorithm sends between nodes
is counted from its pattern, ``src/alg/traffic.c``: :func:`net_traffic`).  Each algorithm's cost
formula lives once, in the engine's registry (``src/alg/registry.c``); this module only fits the
parameters on the running machine and asks the engine for predictions.

    mpiexec -n 2 python -c "import lpmpi.model as m; print(m.fit())"

:func:`fit` is collective (every rank of ``comm`` calls it) and installs the same parameters on
every rank, so that "auto" keeps deciding from inputs all ranks share.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lpmpi import _core, engine

PINGPONG_SIZES = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20)
#: the network's ping-pongs go further: a shaper's burst (tc tbf's, a switch's buffers) lets
#: the first few hundred KiB after a pause leave at line rate, and a fit up to 1 MiB read 3 GB/s
#: off a 1 Gbit/s NIC in the box
NET_SIZES = PINGPONG_SIZES + (4 << 20, 16 << 20)
GAMMA_BYTES = 8 << 20
MIN_CHUNK = engine.CHUNK_MIN
MAX_CHUNK = engine.CHUNK_MAX


@dataclass(frozen=True)
class Model:
    """Model parameters: alpha s/message, beta s/byte moved, gamma s/byte reduced (within a
    node); alpha_net s/message and beta_net s/byte through a node's NIC (None: keep the
    engine's current network term when installed)."""

    alpha: float
    beta: float
    gamma: float
    alpha_net: float | None = None
    beta_net: float | None = None

    def __str__(self) -> str:
        net = ("" if self.alpha_net is None or self.beta_net is None else
               f"; network: alpha_net {self.alpha_net * 1e6:.2f} us, beta_net {_gbps(self.beta_net)} per NIC")
        return (f"alpha {self.alpha * 1e6:.2f} us, beta {_gbps(self.beta)} (transfer), "
                f"gamma {_gbps(self.gamma)} (reduction){net}")


def _gbps(per_byte: float) -> str:
    return f"{1e-9 / per_byte:.2f} GB/s" if per_byte > 0 else "inf GB/s"


def current() -> Model:
    """The parameters "auto" uses now."""
    return Model(*_core.model_get(), *_core.model_get_net())


def install(model: Model) -> None:
    """Make ``model`` the parameters of "auto" (and of :func:`predict`) in this process."""
    net = (model.alpha_net, model.beta_net)
    if (net[0] is None) != (net[1] is None):
        raise ValueError(f"alpha_net and beta_net go together, got {model!r}")
    vals = (model.alpha, model.beta, model.gamma) + (net if net[0] is not None else ())
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in vals):
        raise ValueError(f"model parameters must be finite and >= 0, got {model!r}")
    _core.model_set(model.alpha, model.beta, model.gamma)
    if net[0] is not None:
        _core.model_set_net(*net)


# ----------------------------------------------------------------------------- predictions


def predict(collective: str, algorithm: str, nprocs: int, nbytes: float,
            chunk_bytes: int | None = None, nodes: int = 1) -> float:
    """Model time (seconds) of one algorithm; ``chunk_bytes`` None = the model's best chunk;
    ``nodes`` > 1: ranks in blocks on that many nodes, plus the network term (the busiest NIC's
    bytes and messages, :func:`net_traffic`, at what they cost beyond the node-local rates).

    >>> predict("allreduce", "lp", 4, 1 << 20) > 0
    True
    >>> predict("allreduce", "be", 4, 16 << 20, nodes=2) > predict("allreduce", "be", 4, 16 << 20)
    True
    """
    return float(_core.predict(collective, algorithm, nprocs, nbytes, chunk_bytes, nodes))


def best_chunk(collective: str, algorithm: str, nprocs: int, nbytes: int, nodes: int = 1) -> int | None:
    """The engine's model-optimal chunk (a power of two, MIN_CHUNK .. MAX_CHUNK), None if unchunked."""
    return _core.best_chunk(collective, algorithm, nprocs, nbytes, nodes)


def predict_all(collective: str, nprocs: int, nbytes: int, nodes: int = 1) -> list[tuple[str, int | None, float]]:
    """``[(algorithm, chunk_bytes, seconds)]`` for every algorithm, fastest first."""
    out = []
    for name in _core.algorithms(collective):
        chunk = best_chunk(collective, name, nprocs, nbytes, nodes)
        out.append((name, chunk, predict(collective, name, nprocs, nbytes, chunk, nodes)))
    return sorted(out, key=lambda r: r[2])


def block_layout(nprocs: int, nodes: int) -> list[int]:
    """The layout the model assumes for ``nodes`` > 1 ("auto" decides on the number of nodes
    alone): ranks in blocks by node, the first ``nprocs % nodes`` nodes one rank more;
    ``layout[r]`` = the lowest rank on rank r's node.

    >>> block_layout(5, 2)
    [0, 0, 0, 3, 3]
    """
    return _core.block_layout(nprocs, nodes)


def net_traffic(collective: str, algorithm: str, node: Sequence[int], nbytes: float,
                chunk_bytes: int | None = None, root: int = 0) -> tuple[list[float], list[float]]:
    """The model's count of what one call sends between nodes: ``(bytes, messages)`` per node
    (nodes in order of their lowest rank), for ranks on nodes ``node`` (``node[r]`` = the lowest
    rank on rank r's node, as :func:`lpmpi.comm_nodes`); ``chunk_bytes`` None = the model's.
    native is counted as be (the registry prices it so; the MPI library's own may differ).

    >>> net_traffic("allreduce", "ring", [0, 1, 2, 3], 1 << 20)[0]
    [1572864.0, 1572864.0, 1572864.0, 1572864.0]
    """
    return _core.net_traffic(collective, algorithm, list(node), nbytes, chunk_bytes, root)


def optimal_chunk(collective: str, algorithm: str, nprocs: int, nbytes: float, nodes: int = 1) -> float | None:
    """The chunk (bytes, any real in [1, nbytes]) minimising the registry's cost formula of a
    chunked algorithm under the current parameters (a numeric search in the engine: the one
    place the formula lives); None for an unchunked algorithm.

    >>> c = optimal_chunk("reduce", "lp", 4, 1 << 20)
    >>> 1 <= c <= 1 << 20
    True
    """
    if not engine.chunked(collective).get(algorithm, False):
        if algorithm not in _core.algorithms(collective):
            raise ValueError(f"unknown {collective} algorithm {algorithm!r}")
        return None
    return float(_core.optimal_chunk(collective, algorithm, nprocs, nbytes, nodes))


def pow2_chunk(chunk: float, nbytes: int) -> int:
    """``chunk`` rounded to the nearest power of two (in log scale) among :func:`grid_chunks`."""
    chunks = grid_chunks(nbytes)
    k = round(math.log2(max(chunk, 1.0)))
    return int(min(chunks[-1], max(chunks[0], 1 << max(0, k))))


def grid_chunks(nbytes: int) -> list[int]:
    """The chunk sizes of the exhaustive grid: powers of two from MIN_CHUNK up to the message
    size, at most MAX_CHUNK (at least one: MIN_CHUNK); the engine's lp_best_chunk searches the
    same grid."""
    top = max(MIN_CHUNK, min(MAX_CHUNK, 1 << max(0, int(nbytes).bit_length() - 1)))
    return [1 << k for k in range(MIN_CHUNK.bit_length() - 1, top.bit_length())]


def grid(collective: str, nbytes: int) -> list[tuple[str, int | None]]:
    """The exhaustive grid of a bucket, the yardstick of the tuner's regret: every unchunked
    algorithm once, every chunked one with every chunk of :func:`grid_chunks`."""
    out: list[tuple[str, int | None]] = []
    for a in engine.algorithm_info(collective):
        out += [(a.name, c) for c in grid_chunks(nbytes)] if a.chunked else [(a.name, None)]
    return out


# ----------------------------------------------------------------------------- fitting


def pingpong(comm: Any, sizes: Sequence[int] = PINGPONG_SIZES, reps: int = 20,
             warmup: int = 3, pairs: Sequence[tuple[int, int]] | None = None) -> dict[int, float]:
    """One-way time (seconds) per message size: the ``pairs`` of ranks (default 2k and 2k+1)
    ping-pong at the same time; per size the slowest pair's median half round trip.
    Collective; P >= 2."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    if pairs is None:
        pairs = [(k, k + 1) for k in range(0, size - 1, 2)]
    peer, first = None, False
    for a, b in pairs:
        if rank in (a, b):
            peer, first = (b if rank == a else a), rank == a
    out: dict[int, float] = {}
    for n in sizes:
        buf = np.zeros(max(n, 1), np.uint8)
        times = np.zeros(reps)
        for i in range(warmup + reps):
            comm.Barrier()
            t0 = time.perf_counter()
            if peer is not None and first:
                comm.Send(buf, peer, 77)
                comm.Recv(buf, peer, 77)
            elif peer is not None:
                comm.Recv(buf, peer, 77)
                comm.Send(buf, peer, 77)
            if i >= warmup:
                times[i - warmup] = (time.perf_counter() - t0) / 2
        mine = float(np.median(times)) if peer is not None else 0.0
        out[n] = comm.allreduce(mine, op=MPI.MAX)
    return out


def node_map(comm: Any) -> list[int]:
    """``node[r]`` = the lowest rank on rank r's node, from MPI's shared-memory split (as the
    engine's node map).  Collective."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, comm.Get_rank())
    try:
        lead = local.allreduce(comm.Get_rank(), op=MPI.MIN)
    finally:
        local.Free()
    return comm.allgather(lead)


def fit_pairs(node: Sequence[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The ping-pong pairs of :func:`fit`: within nodes (each node's ranks two by two) and
    across them (the lowest ranks of nodes 2k and 2k+1, one flow per NIC).

    >>> fit_pairs([0, 0, 2, 2])
    ([(0, 1), (2, 3)], [(0, 2)])
    >>> fit_pairs([0, 1, 2])
    ([], [(0, 1)])
    """
    groups: dict[int, list[int]] = {}
    for r, lead in enumerate(node):
        groups.setdefault(lead, []).append(r)
    intra = [(rs[k], rs[k + 1]) for rs in groups.values() for k in range(0, len(rs) - 1, 2)]
    leads = sorted(groups)
    return intra, [(leads[k], leads[k + 1]) for k in range(0, len(leads) - 1, 2)]


def fit_alpha_beta(times: dict[int, float]) -> tuple[float, float]:
    """Least squares ``t = alpha + beta n`` in relative error (each size counts alike);
    both clipped to >= 0."""
    n = np.array(sorted(times), dtype=float)
    t = np.array([times[int(k)] for k in n])
    if len(n) < 2:
        raise ValueError("fit_alpha_beta needs at least two sizes")
    w = 1.0 / np.maximum(t, 1e-12)
    a = np.stack([w, n * w], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if beta <= 0:  # degenerate (noise): the largest size's bandwidth
        beta = t[-1] / n[-1]
    return max(float(alpha), 0.0), float(beta)


def fit_network(times: dict[int, float]) -> tuple[float, float]:
    """The network's ``(alpha, beta)``: beta the slope between the two largest sizes (a
    shaper's or a switch's burst lets the smaller ones leave faster than the link's rate, which
    a fit over every size would take for bandwidth), alpha the smallest size's time less its
    bytes at that rate; both >= 0.

    >>> a, b = fit_network({1024: 60e-6, 1 << 20: 2e-3, 4 << 20: 33.6e-3, 16 << 20: 134.2e-3})
    >>> round(b * 1e9, 1), round(a * 1e6, 1)
    (8.0, 51.8)
    """
    n = sorted(times)
    if len(n) < 2:
        raise ValueError("fit_network needs at least two sizes")
    hi, lo = n[-1], n[-2]
    beta = max((times[hi] - times[lo]) / (hi - lo), 0.0)
    if beta <= 0:
        beta = times[hi] / hi
    return max(times[n[0]] - n[0] * beta, 0.0), beta


def measure_gamma(comm: Any, nbytes: int = GAMMA_BYTES, reps: int = 7) -> float:
    """Seconds per byte of the engine's float32 SUM kernel (``_core.reduce_local``), all ranks at
    once (they share the memory bus, as in a collective); the slowest rank's median.  Collective."""
    from mpi4py import MPI

    n = max(nbytes // 4, 1)
    a, b, out = np.ones(n, np.float32), np.full(n, 2.0, np.float32), np.empty(n, np.float32)
    times = []
    for i in range(reps + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        _core.reduce_local(out, a, b, "sum")
        if i:
            times.append(time.perf_counter() - t0)
    return comm.allreduce(float(np.median(times)), op=MPI.MAX) / (n * 4)


def fit(comm: Any = None, *, sizes: Sequence[int] = PINGPONG_SIZES, reps: int = 20,
        apply: bool = True) -> Model:
    """Fit alpha and beta (ping-pongs within a node) and gamma (kernel timings) on this
    machine, and on a communicator spanning several nodes alpha_net and beta_net (ping-pongs
    between nodes, one flow per NIC); collective.

    Every rank gets the same parameters; with ``apply`` they become "auto"'s model.  What cannot
    be measured keeps its current value: alpha and beta with one process, or on several nodes
    with one rank each; the network term on one node.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    cur = current()
    gamma = measure_gamma(comm)
    alpha, beta, alpha_net, beta_net = cur.alpha, cur.beta, cur.alpha_net, cur.beta_net
    if comm.Get_size() >= 2:
        node = node_map(comm)
        intra, inter = fit_pairs(node)
        if len(set(node)) == 1:
            alpha, beta = fit_alpha_beta(pingpong(comm, sizes, reps))
        else:
            if intra:
                alpha, beta = fit_alpha_beta(pingpong(comm, sizes, reps, pairs=intra))
            net = tuple(sizes) + tuple(s for s in NET_SIZES if s > max(sizes))
            alpha_net, beta_net = fit_network(pingpong(comm, net, reps, pairs=inter))
    model = Model(*comm.bcast((alpha, beta, gamma, alpha_net, beta_net), root=0))
    if apply:
        install(model)
    return model
