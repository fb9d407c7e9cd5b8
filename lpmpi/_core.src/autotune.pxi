# The online tuner (src/tune/autotune.c) and the measurement core it shares with lpmpi.tune.

def set_autotune(bint on):
    """LPMPI_AUTOTUNE: tune "auto" online (every rank must set the same, before the first
    collective on a communicator).  Returns the previous setting."""
    return bool(lp_autotune_set(on))

def tune_median(times):
    """The median of ``times`` (seconds): the statistic of every measurement, online and
    offline (lp_tune_median)."""
    cdef double[::1] v = np.ascontiguousarray(times, dtype=np.float64).ravel()
    if v.shape[0] == 0:
        raise ValueError("tune_median: no times")
    return lp_tune_median(&v[0], v.shape[0])

def tune_pruned(double t, double best, double factor):
    """True when a configuration whose time is ``t`` is dropped against ``best`` (more than
    ``factor`` times slower: lp_tune_pruned)."""
    return bool(lp_tune_pruned(t, best, factor))

def tune_decide(times, int prefer=-1, double tie=0.0):
    """The index of the fastest of ``times`` (NaN: not a candidate), ``prefer`` where it is
    within ``tie`` of it (lp_tune_decide); -1 where none."""
    cdef double[::1] v = np.ascontiguousarray(times, dtype=np.float64).ravel()
    if v.shape[0] == 0:
        return -1
    return lp_tune_decide(&v[0], v.shape[0], prefer, tie)

cdef dict _at_info(const lp_at_info_t *I):
    cands = []
    for i in range(I.ncand):
        c = I.cand[i]
        cands.append({"algorithm": lp_algo_name(c.alg).decode(),
                      "chunk_bytes": c.chunk if lp_algo_chunked(c.alg) else None,
                      "transport": _tp_name(c.transport),
                      "seconds": None if I.median[i] != I.median[i] else I.median[i],
                      "samples": I.samples[i], "alive": bool(I.alive[i])})
    return {"collective": COLLECTIVES[I.coll], "lo": I.lo, "hi": I.hi, "nbytes": int(I.nbytes), "itemsize": I.esize,
            "memory": MEMORY_KINDS[I.mem], "acc": bool(I.acc), "nprocs": I.P, "nodes": I.nodes,
            "state": ("exploring", "settled")[I.state], "choice": I.choice if I.settles else None,
            "native": I.native if I.native >= 0 else None, "candidates": cands,
            "seconds": None if I.seconds != I.seconds else I.seconds,
            "last_seconds": None if I.last_seconds != I.last_seconds else I.last_seconds,
            "calls": I.calls, "timed_calls": I.timed_calls, "explore_calls": I.explore_calls, "settle_calls": I.settle_calls,
            "settles": I.settles, "drifts_slower": I.drifts_slower, "drifts_faster": I.drifts_faster,
            "explore_seconds": I.explore_seconds, "communicator_live": bool(I.comm_live)}

def autotune_state():
    """Every key the online tuner has seen in this process: a list of dicts (its key, state,
    candidates with their measured medians, the choice, counters)."""
    cdef int n = lp_autotune_report(NULL, 0)
    cdef lp_at_info_t *buf
    if n <= 0:
        return []
    buf = <lp_at_info_t *>PyMem_Malloc(n * sizeof(lp_at_info_t))
    if buf == NULL:
        raise MemoryError()
    try:
        n = min(n, lp_autotune_report(buf, n))
        return [_at_info(&buf[i]) for i in range(n)]
    finally:
        PyMem_Free(buf)

def autotune_key(collective, nbytes, comm=None, memory="host", bint acc=False, int itemsize=4):
    """The online state of comm's key for a call of ``nbytes`` (the key's bytes) of a dtype of
    ``itemsize`` bytes, None where the tuner has none."""
    cdef int size = 0, found = 0, c = _coll_index(collective)
    cdef lp_at_info_t I
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    rc = lp_comm_autotune(h, c, nbytes * (2 if acc else 1), itemsize, MEMORY_KINDS.index(memory), acc, &I, &found)
    if rc != LP_OK:
        _raise_status(rc)
    return _at_info(&I) if found else None
