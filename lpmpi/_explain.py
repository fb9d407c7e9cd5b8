"""``lpmpi.explain``: what "auto" picks for a call and why."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lpmpi import _core, _env, engine, model, tables

_SOURCES = {
    "override": "environment override (LPMPI_ALGORITHM / LPMPI_CHUNK_BYTES)",
    "table": "tuning table",
    "model": "cost model (no table row applies)",
    "autotune": "the online tuner (LPMPI_AUTOTUNE=1)",
}
_TRANSPORT_SOURCES = {"table": "the table row asks for it", "override": "the transport override asks for it",
                      "model": "the model's rule by size"}


@dataclass
class Explanation:
    """The choice of "auto" for one call, with its reasons; ``str()`` gives a readable report."""

    collective: str
    nbytes: int
    nprocs: int
    memory: str
    algorithm: str
    chunk_bytes: int | None
    source: str                                   # "override", "table" or "model"
    override: dict[str, str] = field(default_factory=dict)
    table_path: str | None = None
    table_row: tables.Row | None = None
    table_note: str = ""
    model: model.Model | None = None
    predictions: list[tuple[str, int | None, float]] = field(default_factory=list)
    #: the communicator's tables: "same" (every rank holds this process's table), "rank 0"
    #: (they differ: every rank follows rank 0's table and model) or "unchecked" (no collective
    #: ran on it yet: this process's table is shown)
    tables: str = "unchecked"
    #: how the nonblocking and persistent forms of the chosen algorithm run
    requests: str = ""
    #: the nodes the decision assumed: the communicator's (after its first lpmpi collective),
    #: else 1; and the layout and links the model priced for them
    nodes: int = 1
    network: str = ""
    #: the transport between the ranks of a node on this communicator: "shm ..." or "cma ..."
    #: (lpmpi's node-local transports, for the ring allreduce) or "mpi ...", with why; before the
    #: communicator's first collective, "not known yet ..."
    transport: str = ""
    #: LPMPI_AUTOTUNE: the online tuner's state for this call's key on this communicator
    online: str = ""
    #: acc_dtype="float32": the call accumulates 16-bit data in float32 (decided for its
    #: float32 copy: twice nbytes), else None
    acc_dtype: str | None = None
    #: compression=: the wire format, what it moves and where (docs/compression.md), else ""
    compression: str = ""

    def __str__(self) -> str:
        chunk = f", chunk {self.chunk_bytes} B" if self.chunk_bytes else ""
        where = f" on {self.nodes} nodes" if self.nodes > 1 else ""
        acc = f", acc_dtype {self.acc_dtype}" if self.acc_dtype else ""
        lines = [f"{self.collective} of {self.nbytes} B on {self.nprocs} rank(s){where}, {self.memory} memory{acc}:",
                 f"  auto -> {self.algorithm}{chunk}",
                 f"  because: {_SOURCES.get(self.source, self.source)}"]
        if self.compression:
            lines.append(f"  compression: {self.compression}")
        if self.acc_dtype:
            lines.append(f"  acc_dtype: the 16-bit data are summed in {self.acc_dtype}: decided (and run) on its "
                         f"{self.acc_dtype} copy, {2 * self.nbytes} B, by the acc_dtype tables' rows where they apply")
        if self.override:
            lines.append("  environment: " + " ".join(f"{k}={v}" for k, v in self.override.items()))
        if self.table_row is not None:
            r = self.table_row
            hi = "inf" if r.hi == float("inf") else f"{r.hi:g}"
            lines.append(f"  table row: [{r.lo:g}, {hi}) B -> {r.algorithm}"
                         + (f" chunk {r.chunk_bytes}" if r.chunk_bytes else "")
                         + (f" staging buffers {r.staging_buffers}" if r.staging_buffers else "")
                         + (f" transport {r.transport}" if r.transport else "")
                         + f"  ({self.table_path})")
        elif self.table_note:
            lines.append(f"  table: {self.table_note}")
        if self.tables == "rank 0":
            lines.append("  ranks' tables: they differ on this communicator; every rank follows rank 0's "
                         "table and model (the decision above); the table row shown is this process's")
        elif self.tables == "unchecked":
            lines.append("  ranks' tables: not compared yet (the first collective on this communicator does)")
        if self.requests:
            lines.append(f"  requests: {self.requests}")
        if self.transport:
            lines.append(f"  node-local transport: {self.transport}")
        if self.online:
            lines.append(f"  online (LPMPI_AUTOTUNE): {self.online}")
        if self.model is not None:
            lines.append(f"  model: {self.model}")
        if self.network:
            lines.append(f"  network: {self.network}")
        lines.append("  model prediction per algorithm:")
        for alg, ch, t in self.predictions:
            mark = " <- model's pick" if (alg, ch) == self.predictions[0][:2] else ""
            lines.append(f"    {alg:<7} {'chunk ' + str(ch) if ch else '':<15} {t * 1e6:12.2f} us{mark}")
        return "\n".join(lines)


def _table_context(collective: str, nbytes: int, nprocs: int, memory: str, acc: bool = False
                   ) -> tuple[str | None, tables.Row | None, str]:
    """(path, row, note): the table row covering this call, or why none applies."""
    st = tables.status()
    if st.source == "disabled":
        return None, None, f"disabled ({tables.ENV_FILE}=none)"
    for t in st.tables_for(nprocs, memory, acc):
        row = t.lookup(collective, nbytes)
        if row is not None:
            return t.path, row, ""
        return t.path, None, f"{t.path} has no {collective} row for {nbytes} B"
    if not st.applied:
        why = "; ".join(f"{p}: {w}" for p, w in st.ignored) or "none loaded"
        return None, None, f"no table applies ({why})"
    have = ", ".join(f"P={t.nprocs} ({t.kind})" for t in st.applied)
    kind = memory + ("+acc_dtype=float32" if acc else "")
    return None, None, f"loaded tables are for {have}, not P={nprocs} ({kind})"


def _compressed(collective: str, nbytes: int, comm: Any, memory: str, compression: str, nprocs: int,
                itemsize: int) -> Explanation:
    """explain() of a compressed call: its one schedule and what crosses the wire."""
    _core._check_compression(collective, memory, compression)
    n = max(nbytes // itemsize, 0)
    wire = _core._cz_bytes(compression, n)
    node = _core.comm_nodes(comm, prepare=False)
    nodes = len(set(node)) if node else 1
    P = nprocs
    # per rank: allreduce sends each other rank one encoded segment twice (about wire / P each);
    # reduce_scatter once; allgather its whole encoded block to each other rank
    phases = {"allreduce": 2, "reduce_scatter": 1, "allgather": 1}[collective]
    per_peer = wire if collective == "allgather" else wire / max(P, 1)
    text = (f"{compression} on the wire: {n} elements of {itemsize} B ({nbytes} B) encode to {wire} B "
            f"({wire / max(nbytes, 1):.3f} of the data); a direct reduce-scatter of the encoded segments, sums in "
            "float32 (float64 for float64 data) in rank order, "
            + ("the owners' results encoded once and gathered unchanged; " if collective == "allreduce" else "")
            + f"each rank sends {phases * (P - 1) * per_peer:.0f} B")
    chunk = None
    if node and nodes > 1:
        per = node.count(node[0])
        if collective == "allreduce" and all(node.count(v) == per for v in set(node)):
            chunk = _core._cz_chunk(collective, nbytes, comm, compression, itemsize)
            pieces = f" in {-(-nbytes // chunk)} pieces of about {chunk} B (the model's)" if chunk else ""
            how = ("an exact reduce-scatter within each node (float32 sums), the compressed direct allreduce "
                   "across the nodes on each rank's shard (two roundings), an exact allgather within the node"
                   if per > 1 else "the compressed direct allreduce across the nodes (two roundings), the "
                   "pieces' codecs overlapping the network")
            text = (f"{compression} on the wire: {n} elements of {itemsize} B ({nbytes} B) encode to {wire} B "
                    f"({wire / max(nbytes, 1):.3f} of the data); {nodes} nodes of {per} rank{'s' if per > 1 else ''}"
                    f"{pieces}: {how}; each NIC sends about {2 * (nodes - 1) / nodes * wire:.0f} B")
        else:
            text += f"; across {nodes} nodes each NIC sends about {per * phases * (P - per) * per_peer:.0f} B"
    elif node:
        text += "; one node: nothing crosses a network"
    return Explanation(collective, nbytes, nprocs, memory, "direct", chunk, "requested", {}, None, None,
                       "compressed calls run their own schedule (no table row)", model.current(), [],
                       "unchecked", "the same schedule for blocking, nonblocking and persistent calls",
                       nodes=nodes, compression=text)


def explain(collective: str, nbytes: int, comm: Any = None, memory: str = "host",
            acc_dtype: str | None = None, compression: str | None = None,
            itemsize: int = 4) -> Explanation:
    """What algorithm="auto" picks for ``collective`` of ``nbytes`` bytes on ``comm`` and why:
    the environment override, the tuning-table row, or the cost model, with the model's
    predicted time of every algorithm.  ``acc_dtype="float32"``: a call that sums nbytes of
    16-bit data in float32 (allreduce, reduce, reduce_scatter; host memory), decided for its
    float32 copy.  ``compression`` ("bf16", "int8", "int4"; allreduce, reduce_scatter,
    allgather): the compressed call's schedule, its bytes on the wire (of ``itemsize``-byte
    elements, float32 by default) and across nodes.  Local: no communication.

    >>> import lpmpi
    >>> print(lpmpi.explain("allreduce", 1 << 20))   # doctest: +SKIP
    """
    from mpi4py import MPI

    if compression is not None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
        if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
            raise ValueError(f"itemsize must be a positive int, got {itemsize!r}")
        if acc_dtype is not None:
            raise TypeError("compression and acc_dtype do not go together")
        nprocs = (MPI.COMM_WORLD if comm is None else comm).Get_size()
        return _compressed(collective, nbytes, comm, memory, compression, nprocs, itemsize)
    if acc_dtype not in (None, "float32"):
        raise ValueError(f"acc_dtype must be None or 'float32', got {acc_dtype!r}")
    acc = acc_dtype is not None
    if acc and (memory != "host" or not engine.collective_info(collective).has_op):
        raise ValueError("acc_dtype: a reduction (allreduce, reduce, reduce_scatter) on host memory")
    alg, chunk, _, source, agreed = _core.choice(collective, nbytes, comm, memory, acc=acc)
    nprocs = (MPI.COMM_WORLD if comm is None else comm).Get_size()
    key_bytes = 2 * nbytes if acc else nbytes
    path, row, note = _table_context(collective, key_bytes, nprocs, memory, acc)
    s = _env.settings
    env = {k: str(v) for k, v in (("LPMPI_ALGORITHM", s.algorithm), ("LPMPI_CHUNK_BYTES", s.chunk_bytes))
           if v is not None}
    nt = _core.comm_transport(comm, prepare=False)
    transport = ("not known yet: the first lpmpi collective on this communicator checks it"
                 if nt is None else "")
    if nt is not None:
        transport = f"{nt[0]} ({nt[1]})"
        if memory == "host" and engine.has_transports(collective, alg):
            asked, why = _core.transport_choice(collective, nbytes, comm, memory, acc=acc)
            took = _core.ring_transport(comm, key_bytes, asked)
            how = _TRANSPORT_SOURCES[why]
            if asked not in (None, took):
                how = f"{why} asked for {asked}, which this communicator lacks: the model's rule by size"
            transport += f"; this call takes {took} ({how})"
        else:
            transport += "; not used by this call"
    node = _core.comm_nodes(comm, prepare=False)
    nodes = len(set(node)) if node else 1
    network = ("not known yet: the first lpmpi collective on this communicator learns its nodes; "
               "until then the model prices one node" if node is None else "")
    if nodes > 1:
        m = model.current()
        layout = model.block_layout(nprocs, nodes)
        per = [layout.count(lead) for lead in dict.fromkeys(layout)]
        network = (f"{nodes} nodes, priced as ranks in blocks of {'/'.join(map(str, per))} (the communicator's: "
                   f"{'/'.join(str(node.count(lead)) for lead in dict.fromkeys(node))}); one NIC per node, "
                   f"alpha_net {m.alpha_net * 1e6:.1f} us, beta_net {model._gbps(m.beta_net)} each way; "
                   f"each algorithm pays its busiest NIC's bytes and messages (lpmpi.model.net_traffic)")
    online = ""
    if s.autotune:
        from lpmpi import autotune

        k = _core.autotune_key(collective, nbytes, comm, memory) if not acc else None
        if k is not None and k["choice"] is not None and k["state"] == "settled":
            c = k["candidates"][k["choice"]]
            alg, chunk, source = c["algorithm"], c["chunk_bytes"], "autotune"
        online = (autotune.describe_key(k) if k is not None else
                  "no blocking call of this size class on this communicator yet: the next ones explore")
        online += ("; the algorithm may change while the program runs, and floating-point sums with it "
                   "(pin algorithm= or turn LPMPI_AUTOTUNE off where every step must give the same bits)")
    return Explanation(collective, nbytes, nprocs, memory, alg, chunk, source, env, path, row, note,
                       model.current(), model.predict_all(collective, nprocs, key_bytes, nodes), agreed,
                       _core.request_forms(alg, collective), nodes=nodes, network=network, transport=transport,
                       online=online, acc_dtype=acc_dtype)
