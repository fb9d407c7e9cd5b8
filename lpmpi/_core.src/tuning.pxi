# ---------------------------------------------------------------- the decision, model, tables
def choice(collective, nbytes, comm=None, memory="host", algorithm="auto", chunk_bytes=None,
           bint acc=False):
    """The engine's decision for a call (lp_choose: the function the collectives use, on the
    communicator's context when it has one; local, no communication).  acc: a call with
    acc_dtype="float32" on nbytes of 16-bit data (decided for its float32 copy).

    Returns ``(algorithm, chunk_bytes or None, staging buffers or None, source, tables)``:
    source 'override', 'table', 'model' or 'requested'; tables 'same' (every rank of comm
    holds this table), 'rank 0' (they differ: rank 0's table and model are used) or
    'unchecked' (no collective ran on comm yet)."""
    cdef int size = 0, rc
    cdef lp_choice_t ch
    cdef int c = _coll_index(collective)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
    if memory not in MEMORY_KINDS:
        raise ValueError(f"memory must be one of {MEMORY_KINDS}, got {memory!r}")
    cdef int alg = _alg_index(c, algorithm)
    cdef size_t chunk = _chunk(chunk_bytes)
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    rc = lp_choose(h, c, nbytes * (2 if acc else 1), MEMORY_KINDS.index(memory), acc, alg, chunk, &ch)
    if rc != LP_OK:
        _raise_status(rc)
    tables = "same" if ch.tables > 0 else "rank 0" if ch.tables < 0 else "unchecked"
    return (lp_algo_name(ch.alg).decode(), ch.chunk if lp_algo_chunked(ch.alg) else None,
            ch.staging or None, _source_name(ch.source), tables)

def call_decision(collective, sendbuf, recvbuf=None, op="sum", root=0, comm=None, *,
                  algorithm="auto", chunk_bytes=None, acc_dtype=None, form="blocking", **counts):
    """What ``lpmpi.<collective>(sendbuf, recvbuf, ...)`` (``form``: "blocking", "nonblocking"
    or "persistent") would run on this rank, without running it: the same argument checks
    (raised as the call raises them), buffers, key and decision as the call (the engine's
    lp_request_decision).  bcast: ``sendbuf`` is its buffer; op / root are ignored where the
    collective has none.  Collective only where ``comm`` was never used by lpmpi (its context is
    prepared then), else local.

    Returns a dict: algorithm, chunk_bytes (None: unchunked), staging_buffers, transport (asked
    for: "mpi", "shm", "cma" or None), ring_transport (what the ring's node-local transport
    resolves to; None: no node-local ring), source, and key: (collective, P, nbytes, memory,
    acc), the decision's key (only what every rank of the call shares)."""
    cdef Message m
    cdef lp_decision_t d
    cdef int kind = {"blocking": LP_REQ_BLOCKING, "nonblocking": LP_REQ_NONBLOCKING,
                     "persistent": LP_REQ_PERSISTENT}[form]
    m = _message(collective, sendbuf, recvbuf, op, root, comm, algorithm=algorithm,
                 chunk_bytes=chunk_bytes, acc_dtype=acc_dtype, **counts)
    m.decide(kind, &d)
    ch = d.choice
    return {"algorithm": lp_algo_name(ch.alg).decode(),
            "chunk_bytes": ch.chunk if lp_algo_chunked(ch.alg) else None,
            "staging_buffers": ch.staging, "transport": _tp_name(ch.transport),
            "ring_transport": _tp_name(d.ring_transport), "source": _source_name(ch.source),
            "key": (COLLECTIVES[d.key.coll], d.key.P, d.key.nbytes, MEMORY_KINDS[d.key.mem],
                    bool(d.key.acc), d.key.nodes)}

#: the node-local transports a decision may ask for (LP_TP_MPI.. in order; None: the model's rule)
TRANSPORTS = ("mpi", "shm", "cma")

def _tp_name(int tp):
    return None if tp <= 0 or tp > len(TRANSPORTS) else TRANSPORTS[tp - 1]

def _tp_index(name):
    if name is None:
        return 0
    if name not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS} or None, got {name!r}")
    return TRANSPORTS.index(name) + 1

def transport_choice(collective, nbytes, comm=None, memory="host", algorithm="auto", bint acc=False):
    """``(transport or None, source)``: the node-local transport the decision asks the ring
    allreduce for ("mpi", "shm", "cma"; None: the model's rule by size, see
    :func:`ring_transport`) and where that came from ('table', 'override' or 'model')."""
    cdef int size = 0, rc
    cdef lp_choice_t ch
    cdef int c = _coll_index(collective)
    cdef int alg = _alg_index(c, algorithm)
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    rc = lp_choose(h, c, nbytes * (2 if acc else 1), MEMORY_KINDS.index(memory), acc, alg, 0, &ch)
    if rc != LP_OK:
        _raise_status(rc)
    return _tp_name(ch.transport), _source_name(ch.transport_source)

def set_transport_override(name):
    """The process's transport override for the ring allreduce between the ranks of a node
    ("mpi", "shm", "cma"; None: none): above tables and model.  Every rank must set the same
    (the tuner and lpmpi-bench do, around their timed calls).  Returns the previous one."""
    return _tp_name(lp_set_transport_override(_tp_index(name)))

def explain_choice(collective, nbytes, comm=None, memory="host"):
    """``(algorithm, chunk_bytes or None, source)`` of algorithm="auto": source 'override',
    'table' or 'model'."""
    alg, chunk, _, source, _ = choice(collective, nbytes, comm, memory)
    return alg, chunk, source

def select(collective, nbytes, comm=None, memory="host", compression=None):
    """``(algorithm, chunk_bytes)`` that algorithm="auto" uses for this call (chunk None if
    unchunked); the collectives' own decision (see :func:`lpmpi.explain`).  ``compression``:
    the compressed call's ("direct", its piece bytes for float32 data where an allreduce runs
    on several nodes of equal ranks in pieces, else None: docs/compression.md)."""
    if compression is not None:
        _check_compression(collective, memory, compression)
        return "direct", _cz_chunk(collective, nbytes, comm, compression, 4)
    alg, chunk, _, _, _ = choice(collective, nbytes, comm, memory)
    return alg, chunk

def _cz_chunk(collective, size_t nbytes, comm, compression, size_t itemsize):
    """The piece bytes of a compressed call (None: one piece), as the engine decides them."""
    if collective != "allreduce":
        return None
    nodes = comm_nodes(comm)
    cdef size_t c = lp_cz_chunk_of(COMPRESSIONS.index(compression) + 1, itemsize, len(nodes),
                                   len(set(nodes)), nbytes)
    return None if c >= nbytes else c


def _check_compressible(collective):
    """ValueError unless the collective takes compression= (its descriptor: lpmpi/_colls.py)."""
    if collective not in _COMPRESSIBLE:
        raise ValueError(f"compression applies to {', '.join(_COMPRESSIBLE)}, not {collective!r}")


def _check_compression(collective, memory, compression):
    """compression= of explain / select: a known format, a collective that takes it, host memory."""
    if not isinstance(compression, str) or compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or one of {COMPRESSIONS}, got {compression!r}")
    _check_compressible(collective)
    if memory != "host":
        raise TypeError("compression takes host memory (device arrays: not until the device path has codecs)")

def set_override(collective, algorithm, chunk_bytes):
    """Environment override for one collective (algorithm None = none, chunk None = none)."""
    c = _coll_index(collective)
    alg = -1 if algorithm is None else _alg_index(c, algorithm)
    lp_set_override(c, alg, 0 if chunk_bytes is None else _chunk(chunk_bytes))

def model_get():
    cdef double a, b, g
    lp_model_get(&a, &b, &g)
    return a, b, g

def model_set(double alpha, double beta, double gamma):
    lp_model_set(alpha, beta, gamma)

def model_get_net():
    """The network term: (alpha_net s/message, beta_net s/byte) through a node's NIC."""
    cdef double a, b
    lp_model_get_net(&a, &b)
    return a, b

def model_set_net(double alpha_net, double beta_net):
    lp_model_set_net(alpha_net, beta_net)

cdef int _nodes(int P, int nodes) except -1:
    if nodes < 1 or nodes > max(P, 1):
        raise ValueError(f"nodes must be 1 .. nprocs ({P}), got {nodes}")
    return nodes

def predict(collective, algorithm, int P, double nbytes, chunk_bytes=None, int nodes=1):
    """Model time in seconds of one algorithm (chunk None = the model's best chunk) on P ranks
    in blocks on ``nodes`` nodes."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("predict needs a concrete algorithm")
    _nodes(P, nodes)
    cdef double ch = lp_best_chunk(alg, P, nodes, <size_t>nbytes) if chunk_bytes is None else chunk_bytes
    return lp_algo_predict(alg, P, nodes, nbytes, ch)

def best_chunk(collective, algorithm, int P, size_t nbytes, int nodes=1):
    """The model's best chunk among the powers of two CHUNK_MIN..CHUNK_MAX (None: unchunked)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("best_chunk needs a concrete algorithm")
    _nodes(P, nodes)
    r = lp_best_chunk(alg, P, nodes, nbytes)
    return r or None

def optimal_chunk(collective, algorithm, int P, double nbytes, int nodes=1):
    """The chunk (bytes, any real in [1, nbytes]) minimising the model's cost."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("optimal_chunk needs a concrete algorithm")
    _nodes(P, nodes)
    return lp_optimal_chunk(alg, P, nodes, nbytes)

def block_layout(int P, int nodes):
    """The model's layout: node[r] = the lowest rank of rank r's node (ranks in blocks)."""
    _nodes(P, nodes)
    cdef int[::1] out = np.zeros(P, dtype=np.intc)
    lp_block_layout(P, nodes, &out[0])
    return [int(x) for x in out]

def net_traffic(collective, algorithm, node, double nbytes, chunk_bytes=None, int root=0):
    """``(bytes, messages)`` each node sends to other nodes in one call of ``algorithm`` (the
    model's count, traffic.c), as two lists over the nodes in node order; ``node[r]`` = the
    lowest rank on rank r's node (as :func:`comm_nodes`)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("net_traffic needs a concrete algorithm")
    cdef int P = len(node)
    if P < 1 or not 0 <= root < P:
        raise ValueError(f"net_traffic: root {root} outside 0 .. {P - 1}")
    cdef int[::1] nd = np.ascontiguousarray(np.asarray(node, dtype=np.intc))
    cdef double[::1] b = np.zeros(P)
    cdef double[::1] m = np.zeros(P)
    cdef double ch = 0 if chunk_bytes is None else chunk_bytes
    if chunk_bytes is None and lp_algo_chunked(alg):
        ch = lp_best_chunk(alg, P, len(set(node)), <size_t>nbytes)
    if lp_net_traffic(alg, P, &nd[0], root, nbytes, ch, &b[0], &m[0]) != 0:
        raise ValueError(f"net_traffic: {list(node)} is not a node map (node[r]: the lowest rank on r's node)")
    leads = [r for r in range(P) if node[r] == r]
    return [b[r] for r in leads], [m[r] for r in leads]

def table_clear():
    lp_table_clear()

def table_set_hash(h):
    """Fingerprint of the loaded table (compared across ranks on each communicator's first call)."""
    lp_table_set_hash(<uint64_t>(h & 0xFFFFFFFFFFFFFFFF))

def table_mismatches():
    """Communicators on which ranks held different tables (and so follow rank 0's)."""
    return lp_table_mismatches()

cdef int _prepared(comm, MPI_Comm *h, int *size) except -1:
    """comm's handle and size, its context prepared (collective on its first lpmpi call)."""
    cdef int first = 0, rc
    _comm(comm, h, size)
    with nogil:
        rc = lp_comm_prepare(h[0], &first)
    if rc != LP_OK:
        _raise_status(rc)
    return 0

def comm_nodes(comm=None, prepare=True):
    """The nodes of comm as lpmpi sees them (MPI_Comm_split_type SHARED): a list giving, for
    each rank, the lowest rank of its node.  Collective on comm's first lpmpi call (it prepares
    the communicator); chains and rings follow node order when there are several nodes.
    ``prepare=False``: local, None where no lpmpi collective ran on comm yet."""
    cdef MPI_Comm h
    cdef int size = 0, nnodes = 0, rc
    if prepare:
        _prepared(comm, &h, &size)
    else:
        _comm(comm, &h, &size)
    cdef cnp.ndarray[int, ndim=1] node = np.zeros(size, np.intc)
    rc = lp_comm_nodes(h, &nnodes, <int *>node.data)
    if rc != LP_OK and not prepare:
        return None
    if rc != LP_OK:
        _raise_status(rc)
    return [int(x) for x in node]

from lpmpi._units import format_bytes as _format_bytes
cdef size_t _nts[3]
lp_node_transport_sizes(_nts)
_SHM_MIN, _CMA_MIN, _SHM_MAX = (_format_bytes(int(x)) for x in _nts)
_NT_WHY = ("in use: single-copy reads between the ranks of this node (process_vm_readv) for the "
           f"ring allreduce on host memory, from {_CMA_MIN}",
           "off: LPMPI_NODE_TRANSPORT=mpi", "off: the communicator spans several nodes",
           "off: process_vm_readv between the ranks was refused (ptrace permissions)",
           "off: one rank", "off: not Linux",
           "in use: a shared-memory segment of the ranks of this node, synchronised by counters in "
           f"it, for the ring allreduce on host memory, from {_SHM_MIN} to {_SHM_MAX} (above: ring over "
           "MPI, unless a table row asks for it)",
           "off: the shared-memory segment could not be made{shm} (LPMPI_NODE_TRANSPORT=shm)",
           "in use: for the ring allreduce on host memory, a shared-memory segment of the ranks of "
           f"this node (from {_SHM_MIN}) and single-copy reads (process_vm_readv) from {_CMA_MIN}, "
           "unless a table row asks for one",
           "in use: single-copy reads between the ranks of this node (process_vm_readv) for the "
           f"ring allreduce on host memory, from {_CMA_MIN}; the shared-memory segment could not "
           "be made{shm}",
           "off: the shared-memory segment could not be made{shm}, and "
           "process_vm_readv between the ranks was refused (ptrace permissions)")
_NT_NAME = {0: "cma", 6: "shm", 8: "shm+cma", 9: "cma"}

def ring_transport(comm=None, size_t nbytes=0, requested="decided", collective="allreduce"):
    """The transport the ring of ``collective`` (allreduce by default) of nbytes on host memory
    uses on comm: "shm", "cma" or "mpi" (local; None for a communicator no lpmpi collective ran
    on yet).  requested: what the decision asks for ("mpi", "shm", "cma", or None for the
    model's rule by size); by default the decision's own (table row, override or model,
    :func:`transport_choice`).  Only allreduce's ring runs over shared memory."""
    cdef MPI_Comm h
    cdef int size = 0, which = 0, rc
    _comm(comm, &h, &size)
    if not lp_comm_ready(h):
        return None
    if requested == "decided":
        requested = transport_choice(collective, nbytes, comm)[0]
    rc = lp_comm_ring_transport(h, <lp_coll_t>_coll_index(collective), nbytes, _tp_index(requested), &which)
    if rc != LP_OK:
        _raise_status(rc)
    return TRANSPORTS[which]     # LP_RING_MPI, _SHM, _CMA: TRANSPORTS' order

def comm_transport(comm=None, bint prepare=True):
    """``(name, why)``: the transport lpmpi's own transfers use between ranks of one node on
    comm, "shm" (shared memory), "cma" (single-copy reads), "shm+cma" (each at the sizes where
    it is faster) or "mpi", and why.  prepare: collective on comm's
    first lpmpi call (it prepares the communicator); prepare=False is local and returns None
    for a communicator no lpmpi collective ran on yet."""
    cdef MPI_Comm h
    cdef int size = 0, why = 0, rc
    if not prepare:
        _comm(comm, &h, &size)
        if not lp_comm_ready(h):
            return None
    _prepared(comm, &h, &size)
    rc = lp_comm_transport(h, &why)
    if rc != LP_OK:
        _raise_status(rc)
    text = _NT_WHY[why]
    if "{shm}" in text:             # which step failed, and the system's reason
        fail = lp_shm_failure().decode()
        text = text.replace("{shm}", f" (this rank: {fail})" if fail else " (on another rank)")
    return (_NT_NAME.get(why, "mpi"), text)

def node_bytes(bint reset=False):
    """Bytes this process sent to ranks on other nodes in lpmpi's own point-to-point transfers
    (not MPI's collectives, as algorithm native uses) since the last reset (reset=True returns
    the count and zeroes it)."""
    return lp_node_bytes(reset)

def table_add(collective, memory, int P, double lo, double hi, algorithm, chunk_bytes,
              staging_buffers=None, bint acc=False, transport=None, int nodes=1, double learned=0):
    """One tuning row; staging_buffers (1..STAGING_MAX, device memory's staged pipeline) optional;
    acc: a row for acc_dtype calls (bytes of the 16-bit message); transport: the node-local
    transport of the ring allreduce ("mpi", "shm", "cma"; None: the model's rule); nodes: the
    number of nodes it was measured on (it decides only on communicators spanning as many);
    learned: > 0 for a row of the online tuner (LPMPI_AUTOTUNE_FILE), the time it measured in
    seconds: its key starts settled on it, that time the reference of its windows."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if lp_table_add(c, MEMORY_KINDS.index(memory), P, lo, hi, alg,
                    0 if chunk_bytes is None else chunk_bytes,
                    0 if staging_buffers is None else staging_buffers, acc, _tp_index(transport),
                    nodes, learned) != LP_OK:
        raise ValueError(lp_errmsg().decode())

# ---------------------------------------------------------------- local kernels (model fitting)
cdef extern from "lpmpi.h" nogil:
    ctypedef void (*lp_reduce_fn)(void *out, const void *a, const void *b, size_t n)
    lp_reduce_fn lp_reduce_kernel(int dt, int op)

def reduce_local(out, a, b, op="sum"):
    """out = a op b elementwise with the engine's own kernel (no communication); for timing
    the reduction cost gamma.  All three: same dtype and count, out writable."""
    cdef Buf bo, ba, bb
    cdef int o = _op(op)
    cdef lp_reduce_fn fn
    memset(&bo, 0, sizeof(Buf))
    memset(&ba, 0, sizeof(Buf))
    memset(&bb, 0, sizeof(Buf))
    try:
        _get_buf(out, "out", &bo)
        _get_buf(a, "a", &ba)
        _get_buf(b, "b", &bb)
        _check_pair(&ba, &bo, "a", "out")
        _check_pair(&bb, &bo, "b", "out")
        _check_op(o, bo.dtype)
        if bo.readonly:
            raise ValueError("out is read-only")
        if bo.mem:
            raise TypeError("reduce_local takes host arrays")
        fn = lp_reduce_kernel(bo.dtype, o)
        with nogil:
            fn(bo.ptr, ba.ptr, bb.ptr, bo.count)
    finally:
        _release(&bo)
        _release(&ba)
        _release(&bb)
    return out
