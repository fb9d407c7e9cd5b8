# ---------------------------------------------------------------- registry
cdef dict _ALG = {}          # (collective index, name) -> registry index
cdef tuple _ALGS_BY_COLL

def _build_registry():
    global _ALGS_BY_COLL
    per = [[] for _ in COLLECTIVES]
    for i in range(lp_algo_count()):
        name = lp_algo_name(i).decode()
        c = lp_algo_coll(i)
        _ALG[(c, name)] = i
        if not lp_algo_wire(i):          # compressed calls' rows: compression= only
            per[c].append(name)
    _ALGS_BY_COLL = tuple(tuple(p) for p in per)

_build_registry()

cdef int _coll_index(collective) except -1:
    try:
        return COLLECTIVES.index(collective)
    except ValueError:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}") from None

def algorithms(collective):
    """Names of the algorithms valid for ``collective`` ("auto" excluded).

    >>> import lpmpi
    >>> "lp" in lpmpi.algorithms("allreduce")
    True
    """
    return _ALGS_BY_COLL[_coll_index(collective)]

def _node_local(collective, algorithm):
    """True when ``algorithm`` of ``collective`` runs over node-local transports (TRANSPORTS)."""
    return bool(lp_algo_node_local(_ALG[(_coll_index(collective), algorithm)]))

def _algorithm_info(collective):
    """[(name, registry index, chunked)] for a collective (lpmpi.engine.algorithm_info)."""
    c = _coll_index(collective)
    return [(n, _ALG[(c, n)], bool(lp_algo_chunked(_ALG[(c, n)]))) for n in _ALGS_BY_COLL[c]]

cdef int _alg_index(int coll, algorithm) except -2:
    if algorithm == "auto":
        return LP_ALG_AUTO
    idx = _ALG.get((coll, algorithm)) if isinstance(algorithm, str) else None
    if idx is None:
        raise ValueError(f"algorithm must be 'auto' or one of {_ALGS_BY_COLL[coll]} "
                         f"for {COLLECTIVES[coll]}, got {algorithm!r}")
    return idx

cdef object _as_int(x, str name, str what):
    """int(x) for ints and integer-likes (numpy integers: operator.index), never bool."""
    if type(x) is int:
        return x
    if not isinstance(x, bool):
        try:
            return _index(x)
        except TypeError:
            pass
    raise TypeError(f"{name} must be {what}, got {type(x).__name__}")

cdef size_t _chunk(chunk_bytes) except? 0:
    if chunk_bytes is None:
        return 0
    chunk_bytes = _as_int(chunk_bytes, "chunk_bytes", "a positive int or None")
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes}")
    if chunk_bytes >= 1 << 64:
        raise ValueError(f"chunk_bytes must be below 2**64, got {chunk_bytes}")
    return chunk_bytes
