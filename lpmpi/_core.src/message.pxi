# ---------------------------------------------------------------- the message of a call
cdef int _check_pair(Buf *s, Buf *r, str sname, str rname) except -1:
    """Two distinct buffers of one call: same dtype, count and memory kind, and either the
    same memory (in place) or no byte in common."""
    if s.dtype != r.dtype:
        raise TypeError(f"{sname} and {rname} have different dtypes "
                        f"({DTYPE_NAMES[s.dtype]} and {DTYPE_NAMES[r.dtype]})")
    if s.count != r.count:
        raise ValueError(f"{sname} and {rname} have different element counts ({s.count} and {r.count})")
    if s.mem != r.mem:
        raise TypeError(f"{sname} and {rname} must both be host or both be device arrays")
    cdef size_t n = s.count * lp_dtype_size(s.dtype)
    if n and s.ptr != r.ptr and s.ptr < r.ptr + n and r.ptr < s.ptr + n:
        raise ValueError(f"{sname} and {rname} overlap in memory (by "
                         f"{n - <size_t>abs(<Py_ssize_t>(s.ptr - r.ptr))} of {n} bytes); pass the "
                         f"same array for in place, or arrays that do not overlap")
    return 0

cdef int _check_blocks(Buf *one, Buf *many, str oname, str mname, int P) except -1:
    """A one-block buffer and a P-block buffer of one call: same dtype and memory kind, P times
    the elements, no byte in common."""
    if one.dtype != many.dtype:
        raise TypeError(f"{oname} and {mname} have different dtypes "
                        f"({DTYPE_NAMES[one.dtype]} and {DTYPE_NAMES[many.dtype]})")
    if many.count != <size_t>P * one.count:
        raise ValueError(f"{mname} must hold {P} blocks of {oname}'s {one.count} elements "
                         f"({<size_t>P * one.count}), not {many.count}")
    if one.mem != many.mem:
        raise TypeError(f"{oname} and {mname} must both be host or both be device arrays")
    cdef size_t es = lp_dtype_size(one.dtype), n1 = one.count * es, n2 = many.count * es
    if n1 and one.ptr < many.ptr + n2 and many.ptr < one.ptr + n1:
        raise ValueError(f"{oname} and {mname} overlap in memory; for in place pass "
                         f"sendbuf=lpmpi.IN_PLACE")
    return 0

cdef int _check_op(int op, int dtype) except -1:
    if not lp_op_valid(dtype, op):
        raise TypeError(f"op {OP_NAMES[op]!r} is not defined on dtype {DTYPE_NAMES[dtype]}")
    return 0

cdef int _check_root(root, int size) except -1:
    root = _as_int(root, "root", "an int")
    if not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for a communicator of size {size}")
    return root

cdef object _input(sendbuf, recvbuf):
    """The buffer holding the input: recvbuf when sendbuf is IN_PLACE."""
    if sendbuf is _IN_PLACE:
        if recvbuf is None:
            raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
        return recvbuf
    return sendbuf

cdef void _warn_tables() noexcept:
    import warnings
    try:
        warnings.warn("lpmpi: the ranks of a communicator loaded different tuning tables "
                      "(LPMPI_TUNING_FILE or the installed tables differ); on it, 'auto' follows "
                      "rank 0's table and model (lpmpi.explain shows it)", RuntimeWarning,
                      stacklevel=2)
    except Exception:   # warnings turned into errors must not stop the collective midway
        pass

cdef bint _acc(acc_dtype, Buf *s, int op) except -1:
    """acc_dtype: None, or float32 with float16/bfloat16 data and SUM or AVG on host memory."""
    if acc_dtype is None:
        return False
    if isinstance(acc_dtype, str):
        spelled = acc_dtype
    else:
        try:
            spelled = np.dtype(acc_dtype).name
        except TypeError:
            spelled = str(acc_dtype)                    # torch.float32
    if spelled.rpartition(".")[2] != "float32":     # "float32", numpy's, torch.float32
        raise TypeError(f"acc_dtype must be None or 'float32', got {acc_dtype!r}")
    if s.dtype != LP_FLOAT16 and s.dtype != BF16:
        raise TypeError(f"acc_dtype='float32' accumulates float16 or bfloat16 data, not "
                        f"{DTYPE_NAMES[s.dtype]}")
    if op != LP_SUM and op != LP_AVG:
        raise TypeError(f"acc_dtype='float32' applies to op sum and avg, not {OP_NAMES[op]!r}")
    if s.mem:
        raise TypeError("acc_dtype='float32' takes host memory (device arrays: not yet)")
    return True

cdef tuple _comp_check(int coll, int dt, int op, int mem, bint acc, int alg, algorithm, compression):
    """compression= of a call (docs/compression.md): (LP_COMP_*, the row it runs); raises, naming
    the argument, for a format, collective, algorithm, data type, op or memory it does not take."""
    if compression is None:
        if alg >= 0 and lp_algo_wire(alg):
            raise ValueError(f"algorithm {algorithm!r} runs compressed calls only: pass "
                             f"compression= one of {COMPRESSIONS}")
        return LP_COMP_NONE, alg
    if not isinstance(compression, str) or compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or one of {COMPRESSIONS}, got {compression!r}")
    if lp_cz_algo(<lp_coll_t>coll) < 0:
        raise ValueError(f"compression applies to allreduce, reduce_scatter and allgather, not "
                         f"{COLLECTIVES[coll]}")
    if alg >= 0 and not lp_algo_wire(alg):
        raise ValueError(f"compression runs with algorithm 'auto' or 'direct', not {algorithm!r}")
    name = DTYPE_NAMES[dt]
    if dt not in (LP_FLOAT16, LP_BFLOAT16, LP_FLOAT32, LP_FLOAT64):
        raise TypeError(f"compression needs floating data (float16, bfloat16, float32, float64), "
                        f"not {name}")
    if compression == "bf16" and lp_dtype_size(<lp_dtype_t>dt) <= 2:
        raise TypeError(f"compression 'bf16' must be narrower than the data: {name} is 16-bit "
                        f"(use 'int8' or 'int4')")
    if _ROWS[coll]["has_op"] and op != LP_SUM and op != LP_AVG:
        raise TypeError(f"compression applies to op sum and avg, not {OP_NAMES[op]!r}")
    if mem:
        raise TypeError("compression takes host memory (device arrays: not until the device path "
                        "has codecs)")
    if acc:
        raise TypeError("compression and acc_dtype do not go together (compressed sums are "
                        "float32 already)")
    return COMPRESSIONS.index(compression) + 1, (lp_cz_algo(<lp_coll_t>coll) if alg >= 0 else LP_ALG_AUTO)

cdef object _acc_tls = None

cdef object _acc_scratch(size_t n):
    """The calling thread's float32 scratch for blocking acc_dtype calls (grow-only)."""
    global _acc_tls
    if _acc_tls is None:
        import threading
        _acc_tls = threading.local()
    buf = getattr(_acc_tls, "buf", None)
    if buf is None or buf.size < n:
        buf = _acc_tls.buf = np.empty(max(<size_t>n, 1), np.float32)
    return buf[:n]

cdef tuple _ROWS = _coll_traits()   # the engine's row of each collective (names.pxi)


# the same rows as C structs, for the per-call checks of Message.for_blocks (a dict look-up and a
# string compare per field cost ~0.3 us a call there: issue 51's per-call item)
cdef struct _Row:
    int has_op, has_root
    int input, result           # 0 all, 1 the root, 2 the others (_ON)
    int send_blocks, recv_blocks
    int send_counts, recv_counts


cdef _Row _CROWS[64]


cdef int _crows_init() except -1:
    cdef int op, root, inp, res, sb, rb, shm, vc, i
    if LP_NCOLLS > 64:
        raise RuntimeError("more collectives than _CROWS holds")
    for i in range(LP_NCOLLS):
        lp_coll_traits(<lp_coll_t>i, &op, &root, &inp, &res, &sb, &rb, &shm, &vc)
        _CROWS[i].has_op, _CROWS[i].has_root, _CROWS[i].input, _CROWS[i].result = op, root, inp, res
        _CROWS[i].send_blocks, _CROWS[i].recv_blocks = sb, rb
        _CROWS[i].send_counts, _CROWS[i].recv_counts = (vc & 2) != 0, (vc & 1) != 0
    return 0


_crows_init()

cdef int _counts_into(obj, str name, int P, size_t *dst) except -1:
    """Per-rank counts (or displacements): P non-negative ints (a list, tuple or 1-D integer
    array), into dst."""
    cdef Py_ssize_t i
    if obj is None:
        raise TypeError(f"{name} must be given: {P} counts, one per rank")
    if type(obj) is not list and type(obj) is not tuple:
        try:
            a = np.asarray(obj)
        except Exception:
            raise TypeError(f"{name} must be a sequence of {P} ints") from None
        if a.ndim != 1:
            raise ValueError(f"{name} must hold {P} counts (one per rank), got shape {a.shape}")
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be ints, got {a.dtype}")
        obj = a.tolist()
    if len(obj) != P:
        raise ValueError(f"{name} must hold {P} counts (one per rank), got {len(obj)}")
    for i in range(P):
        v = obj[i]
        if type(v) is not int:
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                raise TypeError(f"{name} must be ints, got {type(v).__name__}")
            v = _index(v)
        if v < 0:
            raise ValueError(f"{name} must be non-negative, got {list(obj)}")
        dst[i] = v
    return 0

cdef bint _displs_into(obj, str name, const size_t *counts, int P, size_t *dst) except -1:
    """Displacements: given (True), or the counts packed (their prefix sums; False)."""
    cdef size_t acc = 0
    cdef int i
    if obj is not None:
        _counts_into(obj, name, P, dst)
        return True
    for i in range(P):
        dst[i] = acc
        acc += counts[i]
    return False

cdef int _fits(const size_t *counts, const size_t *displs, int P, size_t n, str buf, str what) except -1:
    """Every block of a buffer of n elements lies inside it."""
    cdef int i
    for i in range(P):
        if counts[i] and counts[i] + displs[i] > n:
            raise ValueError(f"{buf} has {n} elements but block {i} ({what}[{i}] = {counts[i]} at "
                             f"{displs[i]}) ends at {counts[i] + displs[i]}")
    return 0

cdef int _no_overlap(const size_t *counts, const size_t *displs, int P, str name) except -1:
    """The blocks a call writes do not overlap (MPI's rule for receive buffers)."""
    order = sorted(range(P), key=[displs[i] for i in range(P)].__getitem__)
    cdef size_t last_end = 0
    last = -1
    for i in order:
        if counts[i] == 0:
            continue
        if last >= 0 and displs[i] < last_end:
            raise ValueError(f"{name}: the blocks of ranks {last} and {i} overlap")
        last_end, last = displs[i] + counts[i], i
    return 0

cdef object _exchange(int coll, x, comm):
    """The counts' exchange of alltoallv / allgatherv (counts=None): an alltoall or allgather
    of int64 counts, MPI's own, as a collective of the engine (LPMPI_CHECK, the watchdog)."""
    cdef Message m = (Message.for_blocks(coll, x, None, None, 0, comm, "native", None) if coll == _COLL_ALLTOALL
                      else Message.for_allgather(x, None, comm, "native", None))
    m.run()
    return np.ascontiguousarray(np.asarray(m.result).reshape(-1), np.uintp)

# the largest message whose nonblocking or persistent start keeps the GIL (releasing and taking
# it back costs about as much as the start itself; above this a start may reduce or copy)
cdef size_t _START_WITH_GIL = 256 << 10

@cython.no_gc          # holds buffers and their objects, never itself: no cycle through it
@cython.freelist(8)
cdef class Message:
    """The buffers and arguments of one collective call, normalised and validated (after
    mpi4py's ``_p_msg_cco``).

    ``Message.for_allreduce`` / ``for_reduce`` / ``for_bcast`` raise on any bad argument, on
    the calling rank, before any communication (with LPMPI_CHECK=1 they first tell the other
    ranks, which then raise MismatchError).  A message owns its buffer views and keeps the
    objects behind them alive until it dies, so a request may hold it while the engine works.
    """
    cdef Buf s, r
    cdef MPI_Comm comm
    cdef int coll, op, root, alg, size
    cdef size_t chunk
    cdef size_t count             # the engine's count: elements of one block (lpmpi.h)
    cdef char *rptr               # the result's buffer (NULL on the non-roots of reduce)
    cdef char *sptr               # what the engine reads (s.ptr; acc: the float32 copy)
    cdef int edtype               # the engine's element type (s.dtype; acc: float32)
    cdef object keep_s, keep_r    # the Python objects behind s and r
    cdef readonly object result   # what the call returns
    # acc_dtype="float32" with float16/bfloat16: the engine runs, in place, on a float32 copy
    # of the input (widened at each start) and rounds the result once into r (lp_request's acc:
    # lp, ring and be before their broadcast/allgather part, which then moves 16-bit data)
    cdef bint acc
    cdef object acc_buf           # the float32 copy (numpy)
    cdef char *acc_in             # the 16-bit input
    cdef char *acc_out            # the 16-bit result (NULL: this rank gets none)
    cdef bint to_jax              # recvbuf=None for a JAX input: the result becomes a JAX array
    # per-rank counts (alltoallv, allgatherv, reduce_scatter with counts): 4 P size_t, sendbuf's
    # counts and displacements then recvbuf's (lp_call_t), or None
    cdef object vc
    cdef int comp                 # compression= (LP_COMP_*; set_comp)

    def __dealloc__(self):
        _release(&self.s)
        _release(&self.r)

    @staticmethod
    cdef Message for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_ALLREDUCE
            m.op = _op(op)
            m.alg = _alg_index(LP_ALLREDUCE, algorithm)
            m.chunk = _chunk(chunk_bytes)
            send = _input(sendbuf, recvbuf)
            inplace = send is recvbuf
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if recvbuf is None:
                recvbuf = _alloc_like(send, m.s.dtype, m.s.mem)
                m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
            if inplace:
                _alias(&m.r, &m.s)
            else:
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_pair(&m.s, &m.r, "sendbuf", "recvbuf")
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        if m.acc:
            m.acc_in, m.acc_out = m.s.ptr, m.r.ptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    @staticmethod
    cdef Message for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                            acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        cdef int rank = 0
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_REDUCE
            m.op = _op(op)
            m.root = _check_root(root, m.size)
            m.alg = _alg_index(LP_REDUCE, algorithm)
            m.chunk = _chunk(chunk_bytes)
            MPI_Comm_rank(m.comm, &rank)
            is_root = rank == m.root
            send = _input(sendbuf, recvbuf)
            inplace = send is recvbuf
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if inplace:
                _alias(&m.r, &m.s)
            elif recvbuf is not None:      # checked on every rank, written on the root only
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_pair(&m.s, &m.r, "sendbuf", "recvbuf")
            elif is_root:
                recvbuf = _alloc_like(send, m.s.dtype, m.s.mem)
                m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
            if (inplace or recvbuf is not None) and m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r if is_root else NULL)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr if is_root else NULL
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        if m.acc:
            m.acc_in, m.acc_out = m.s.ptr, m.rptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf if is_root else None
        return m

    @staticmethod
    cdef Message for_bcast(buf, root, comm, algorithm, chunk_bytes):
        cdef Message m = Message.__new__(Message)
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_BCAST
            m.op = LP_SUM
            m.root = _check_root(root, m.size)
            m.alg = _alg_index(LP_BCAST, algorithm)
            m.chunk = _chunk(chunk_bytes)
            _get_buf(buf, "buf", &m.s)
            if m.s.readonly:
                raise ValueError("buf is read-only (it is written on every rank but the root)")
            if m.s.mem:
                _sync_streams(&m.s, NULL)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.s.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        m.keep_s = buf
        m.result = buf
        return m

    @staticmethod
    cdef Message for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_ALLGATHER
            m.op = LP_SUM
            m.alg = _alg_index(LP_ALLGATHER, algorithm)
            m.chunk = _chunk(chunk_bytes)
            inplace = sendbuf is _IN_PLACE or (recvbuf is not None and sendbuf is recvbuf)
            if inplace:
                if recvbuf is None:
                    raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
                _get_buf(recvbuf, "recvbuf", &m.r)
                if m.r.count % <size_t>m.size:
                    raise ValueError(f"recvbuf: in place, it holds the {m.size} blocks of the "
                                     f"communicator's ranks, so its {m.r.count} elements must "
                                     f"divide by {m.size}")
                m.count = m.r.count // <size_t>m.size
                _alias(&m.s, &m.r)
            else:
                send = sendbuf
                _get_buf(send, "sendbuf", &m.s)
                m.count = m.s.count
                if recvbuf is None:
                    recvbuf = _alloc_blocks(send, m.s.dtype, m.size, m.s.mem)
                    m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_blocks(&m.s, &m.r, "sendbuf", "recvbuf", m.size)
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            if m.r.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.r.ptr if inplace else m.s.ptr
        m.edtype = m.r.dtype
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    @staticmethod
    cdef Message for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_REDUCE_SCATTER
            m.op = _op(op)
            m.alg = _alg_index(LP_REDUCE_SCATTER, algorithm)
            m.chunk = _chunk(chunk_bytes)
            inplace = sendbuf is _IN_PLACE or (recvbuf is not None and sendbuf is recvbuf)
            send = _input(sendbuf, recvbuf)
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if m.s.count % <size_t>m.size:
                raise ValueError(f"{'recvbuf' if sendbuf is _IN_PLACE else 'sendbuf'} holds one block "
                                 f"per rank, so its {m.s.count} elements must divide by {m.size}")
            m.count = m.s.count // <size_t>m.size
            if inplace:
                _alias(&m.r, &m.s)
            else:
                if recvbuf is None:
                    recvbuf = _alloc_block(send, m.s.dtype, m.s.count // <size_t>m.size, m.size, m.s.mem)
                    m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_blocks(&m.r, &m.s, "recvbuf", "sendbuf", m.size)
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        if m.acc:                   # the float32 copy of the P blocks; the 16-bit result: my block
            m.acc_in, m.acc_out = m.s.ptr, m.r.ptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    # ------------------------------------------------------------ the collectives that move blocks
    @staticmethod
    cdef Message for_blocks(int coll, sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                            counts=None, rcounts=None, sdispls=None, rdispls=None, acc_dtype=None):
        """A collective that moves blocks between ranks (alltoall, alltoallv, allgatherv,
        reduce_scatter with counts, gather, scatter), built from its row (lpmpi.engine.Collective:
        who brings data, who gets a result, which buffer holds P blocks, which has per-rank
        counts) by the per-buffer helpers below.  counts: the per-rank counts of the buffer that
        has them (alltoallv: sendbuf's; allgatherv: recvbuf's; reduce_scatter: sendbuf's), None
        to exchange them first (alltoallv's recvcounts, allgatherv's counts); rcounts:
        alltoallv's recvcounts.  In place: ``sendbuf is IN_PLACE`` (or ``recvbuf is sendbuf``),
        scatter's root: ``recvbuf is IN_PLACE``."""
        cdef Message m = Message.__new__(Message)
        cdef int rank = 0, P
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        P = m.size
        cdef _Row *row = &_CROWS[coll]
        cdef bint takes_in, gets_out, rin, inplace
        try:
            m.coll = coll
            m.op = _op(op) if row.has_op else LP_SUM
            m.root = _check_root(root, P) if row.has_root else 0
            m.alg = _alg_index(coll, algorithm)
            m.chunk = _chunk(chunk_bytes)
            MPI_Comm_rank(m.comm, &rank)
            takes_in = row.input == 0 or rank == m.root
            gets_out = row.result == 0 or (row.result == 1) == (rank == m.root)
            # in place: the input is already in recvbuf (scatter's root: its block stays in sendbuf)
            rin = row.input == 1 and gets_out
            inplace = (recvbuf is _IN_PLACE) if rin else (
                sendbuf is _IN_PLACE or (recvbuf is not None and sendbuf is recvbuf))
            if rin and sendbuf is _IN_PLACE:
                raise TypeError(f"{COLLECTIVES[coll]}: in place, the root passes recvbuf=lpmpi.IN_PLACE "
                                f"(its block stays in sendbuf)")
            if not rin and recvbuf is _IN_PLACE:
                raise TypeError("recvbuf must be an array, not IN_PLACE (in place: sendbuf=lpmpi.IN_PLACE)")
            if inplace and not (takes_in and gets_out):
                raise ValueError(f"sendbuf: IN_PLACE is only for the root of {COLLECTIVES[coll]}")
            if inplace and not rin and recvbuf is None:
                raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
            # the input
            if inplace and not rin:
                send = recvbuf
                _get_buf(send, "recvbuf", &m.s)
            elif takes_in or (rin and recvbuf is None and sendbuf is not None):
                if sendbuf is None:
                    raise TypeError(f"sendbuf must be given on rank {rank} of {COLLECTIVES[coll]}")
                send = sendbuf
                _get_buf(send, "sendbuf", &m.s)
            if row.has_op:
                _check_op(m.op, m.s.dtype)
            m._block_counts(row, rank, inplace, send, recvbuf, counts, rcounts, sdispls, rdispls,
                            _WORLD if comm is None else comm)
            # the result
            if not gets_out:
                recvbuf = None
            elif inplace:
                if rin:
                    recvbuf = sendbuf
                    _alias(&m.r, &m.s)
                else:
                    _alias(&m.r, &m.s)
            else:
                if recvbuf is None:
                    if send is None:
                        raise TypeError(f"recvbuf must be given on rank {rank} of {COLLECTIVES[coll]} "
                                        f"(or sendbuf, shaped as the root's, to allocate it from)")
                    recvbuf = m._alloc_result(row, send)
                    m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
                m._check_result(row, rank, takes_in)
                if m.r.readonly:
                    raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op) if row.has_op else False
            if m.s.mem or m.r.mem:
                raise TypeError(f"{COLLECTIVES[coll]}: device arrays are not supported yet (host memory)")
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr if gets_out else NULL
        m.sptr = m.rptr if (inplace and not rin) else (m.s.ptr if takes_in else NULL)
        if inplace and rin:
            m.rptr = m.sptr = m.s.ptr       # the root's block stays: the engine's in place
        m.edtype = m.s.dtype if send is not None else m.r.dtype
        if m.acc:
            m.acc_in, m.acc_out = m.s.ptr, m.rptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    cdef int _block_counts(self, _Row *row, int rank, bint inplace, send, recvbuf, counts, rcounts,
                           sdispls, rdispls, pycomm) except -1:
        """The engine's count (and the per-rank counts) of a block collective, from its row and
        the buffers, checked against them."""
        cdef int P = self.size
        cdef size_t n
        cdef object vc
        name = COLLECTIVES[self.coll]
        cdef int sblocks = row.send_blocks, rblocks = row.recv_blocks
        cdef size_t *sc
        cdef size_t *sd
        cdef size_t *rc
        cdef size_t *rd
        cdef size_t tot = 0
        cdef int i
        cdef cnp.npy_intp dims[1]
        if row.send_counts or row.recv_counts:
            dims[0] = 4 * P
            vc = cnp.PyArray_ZEROS(1, dims, cnp.NPY_UINTP, 0)     # (np.zeros: ~0.3 us more a call)
            sc = <size_t *>cnp.PyArray_DATA(<cnp.ndarray>vc)
            sd, rc, rd = sc + P, sc + 2 * P, sc + 3 * P
            if row.send_counts and row.recv_counts:          # alltoallv
                if inplace:                  # recvbuf's blocks both ways
                    nm = "recvcounts" if rcounts is not None else "sendcounts"
                    _counts_into(rcounts if rcounts is not None else counts, nm, P, rc)
                    if _displs_into(rdispls, "rdispls", rc, P, rd):
                        _no_overlap(rc, rd, P, "rdispls")
                    _fits(rc, rd, P, self.s.count, "recvbuf", nm)
                    for i in range(P):
                        sc[i], sd[i] = rc[i], rd[i]
                else:
                    _counts_into(counts, "sendcounts", P, sc)
                    _displs_into(sdispls, "sdispls", sc, P, sd)
                    _fits(sc, sd, P, self.s.count, "sendbuf", "sendcounts")
                    if rcounts is None:                            # exchange them first
                        ex = _exchange(_COLL_ALLTOALL, np.array(vc[:P], np.int64), pycomm)
                        for i in range(P):
                            rc[i] = ex[i]
                    else:
                        _counts_into(rcounts, "recvcounts", P, rc)
                    if _displs_into(rdispls, "rdispls", rc, P, rd):
                        _no_overlap(rc, rd, P, "rdispls")
                self.count = 0
            elif row.recv_counts:                               # allgatherv
                if counts is None:
                    if inplace:
                        raise TypeError("counts must be given in place (recvbuf holds every rank's block)")
                    ex = _exchange(LP_ALLGATHER, np.array([self.s.count], np.int64), pycomm)
                    for i in range(P):
                        rc[i] = ex[i]
                else:
                    _counts_into(counts, "counts", P, rc)
                if _displs_into(rdispls, "displs", rc, P, rd):
                    _no_overlap(rc, rd, P, "displs")
                if inplace:
                    _fits(rc, rd, P, self.s.count, "recvbuf", "counts")
                elif self.s.count != rc[rank]:
                    raise ValueError(f"sendbuf has {self.s.count} elements but counts[{rank}] is {rc[rank]}")
                for i in range(P):
                    tot += rc[i]
                self.count = tot
            else:                                                  # reduce_scatter with counts
                _counts_into(counts, "counts", P, sc)
                _displs_into(None, "", sc, P, sd)
                for i in range(P):
                    tot += sc[i]
                if self.s.count != tot:
                    raise ValueError(f"{'recvbuf' if inplace else 'sendbuf'} has {self.s.count} elements "
                                     f"but the counts add up to {tot}")
                self.count = tot
            self.vc = vc
            return 0
        if send is not None:                                       # uniform blocks
            if sblocks == 0:
                if self.s.count % <size_t>P:
                    raise ValueError(f"{'recvbuf' if send is recvbuf else 'sendbuf'} holds one block per "
                                     f"rank, so its {self.s.count} elements must divide by {P}")
                self.count = self.s.count // <size_t>P
            elif inplace and rblocks == 0:                         # gather's root in place
                if self.s.count % <size_t>P:
                    raise ValueError(f"recvbuf: in place, it holds the {P} blocks of the "
                                     f"communicator's ranks, so its {self.s.count} elements must "
                                     f"divide by {P}")
                self.count = self.s.count // <size_t>P
            else:
                self.count = self.s.count
        else:                                                      # scatter's non-roots
            if recvbuf is None:
                raise TypeError(f"recvbuf must be given on rank {rank} of {name} (or sendbuf, shaped "
                                f"as the root's, to allocate it from)")
            _get_buf(recvbuf, "recvbuf", &self.r)
            self.count = self.r.count
        return 0

    cdef object _alloc_result(self, _Row *row, send):
        """recvbuf=None: P blocks of sendbuf's block shape, one block, or 1-D (per-rank counts)."""
        cdef size_t n
        if row.recv_counts or row.send_counts:
            n = self._extent(1)
            return _alloc_shaped(send, self.s.dtype, (n,), 0)
        if row.recv_blocks == 0 and row.send_blocks == 0:    # alltoall
            return _alloc_like(send, self.s.dtype, 0)
        if row.recv_blocks == 0:                                # gather
            return _alloc_blocks(send, self.s.dtype, self.size, 0)
        return _alloc_block(send, self.s.dtype, self.count, self.size, 0)

    cdef size_t _extent(self, bint recv):
        """Elements the recvbuf (or sendbuf) of a call with per-rank counts spans."""
        cdef int P = self.size, rank = 0, i
        cdef size_t end = 0
        cdef size_t *v = <size_t *>cnp.PyArray_DATA(<cnp.ndarray>self.vc)
        if recv and not _CROWS[self.coll].recv_counts:          # one block: my count
            MPI_Comm_rank(self.comm, &rank)
            return v[rank]
        cdef size_t *c = v + (2 * P if recv else 0)
        cdef size_t *d = c + P
        for i in range(P):
            if c[i] and c[i] + d[i] > end:
                end = c[i] + d[i]
        return end

    cdef int _check_result(self, _Row *row, int rank, bint takes_in) except -1:
        """recvbuf against the input: dtype, memory kind, size, no byte in common."""
        cdef int P = self.size
        cdef size_t want, es = lp_dtype_size(self.r.dtype)
        if not takes_in:                                           # scatter's non-roots
            return 0
        if self.s.dtype != self.r.dtype:
            raise TypeError(f"sendbuf and recvbuf have different dtypes "
                            f"({DTYPE_NAMES[self.s.dtype]} and {DTYPE_NAMES[self.r.dtype]})")
        if self.vc is not None:
            want = self._extent(1)
            if (self.r.count < want if row.recv_counts else self.r.count != want):
                raise ValueError(f"recvbuf must hold {want} elements (the counts), not {self.r.count}")
        else:
            want = self.count * (<size_t>P if row.recv_blocks == 0 else 1)
            if self.r.count != want:
                raise ValueError(f"recvbuf must hold {want} elements ({'P blocks of ' if row.recv_blocks == 0 else ''}"
                                 f"{self.count}), not {self.r.count}")
        cdef size_t n1 = self.s.count * es, n2 = self.r.count * es
        if n1 and n2 and self.s.ptr < self.r.ptr + n2 and self.r.ptr < self.s.ptr + n1:
            raise ValueError("sendbuf and recvbuf overlap in memory; for in place pass sendbuf=lpmpi.IN_PLACE")
        return 0

    cdef int prepare(self) except -1:
        """The communicator's context, once (collective: its private duplicate and the table
        agreement); warns when the ranks' tables differ."""
        cdef int rc = LP_OK, first = 0
        cdef MPI_Comm h = self.comm
        if lp_comm_ready(h):
            return 0
        with nogil:
            rc = lp_comm_prepare(h, &first)
        if rc != LP_OK:
            _raise_status(rc)
        if first:
            _warn_tables()
        return 0

    cdef lp_req_t *request(self, int kind) except? NULL:
        """The engine's request for this call: LP_REQ_BLOCKING runs it to completion (returns
        NULL, GIL released), LP_REQ_NONBLOCKING starts it, LP_REQ_PERSISTENT makes it inactive.
        A start keeps the GIL unless it may block or work long: a communicator's first call
        (collective), LPMPI_CHECK (an agreement), large messages (local work on the spot).
        A failure raises."""
        cdef int rc = LP_OK
        cdef lp_req_t *req = NULL
        cdef lp_req_t **out = NULL if kind == LP_REQ_BLOCKING else &req
        cdef size_t nbytes = self.s.count * lp_dtype_size(self.s.dtype)
        cdef lp_call_t k
        self.prepare()
        if self.acc:
            self.acc_setup(kind)
            nbytes *= 2
            if kind != LP_REQ_PERSISTENT:
                self.acc_widen()
        if _debug:
            _debug_log(self, kind)
        self.record(&k)
        if kind == LP_REQ_BLOCKING or _check_enabled or nbytes > _START_WITH_GIL:
            with nogil:
                rc = lp_call_request(out, kind, &k)
        else:
            rc = lp_call_request(out, kind, &k)
        if rc != LP_OK:
            _raise_status(rc)
        return req

    cdef int set_comp(self, compression, algorithm) except -1:
        """compression= (docs/compression.md): checked on every rank before any communication
        (LPMPI_CHECK's ranks learn of a local error), the call's row resolved."""
        if compression is None and (self.alg < 0 or not lp_algo_wire(self.alg)):
            return 0                      # uncompressed: comp stays LP_COMP_NONE (per-call cost)
        try:
            self.comp, self.alg = _comp_check(self.coll, self.s.dtype, self.op, self.s.mem,
                                              self.acc, self.alg, algorithm, compression)
        except BaseException:
            _local_error(self.comm)
            raise
        return 0

    cdef void record(self, lp_call_t *k) noexcept:
        """The engine's call record of this call (lpmpi.h: lp_call_t)."""
        cdef size_t *v = NULL
        cdef int P = self.size
        k.coll = self.coll
        k.comm = self.comm
        k.sbuf = self.sptr
        k.rbuf = self.rptr
        k.count = self.count
        k.dt = self.edtype
        k.op = self.op
        k.root = self.root
        k.alg = self.alg
        k.chunk_bytes = self.chunk
        k.mem = self.s.mem
        k.acc = self.acc_out if self.acc else NULL
        k.acc_dt = self.s.dtype if self.acc else self.edtype
        k.scounts = k.sdispls = k.rcounts = k.rdispls = NULL
        k.comp = self.comp
        if self.vc is not None:
            v = <size_t *>cnp.PyArray_DATA(<cnp.ndarray>self.vc)
            if _CROWS[self.coll].send_counts:
                k.scounts, k.sdispls = v, v + P
            if _CROWS[self.coll].recv_counts:
                k.rcounts, k.rdispls = v + 2 * P, v + 3 * P

    cdef int decide(self, int kind, lp_decision_t *d) except -1:
        """What request(kind) would run on this rank (lp_request_decision: the engine's own checks,
        key and decision, with the arguments request() passes; no communication once the
        communicator is prepared)."""
        cdef int rc
        self.prepare()
        if self.acc:
            self.acc_setup(kind)
        cdef lp_call_t k
        self.record(&k)
        rc = lp_call_decision(d, &k)
        if rc != LP_OK:
            _raise_status(rc)
        return 0

    cdef int run(self) except -1:
        """The blocking collective (GIL released)."""
        if _norphans:
            _reap_orphans()
        self.request(LP_REQ_BLOCKING)
        self.finish()
        return 0

    cdef int finish(self) except -1:
        """At completion: a JAX result for a JAX input."""
        if self.to_jax:
            import jax.numpy as jnp
            self.result = jnp.asarray(self.keep_r)    # a copy: JAX arrays are immutable
        return 0

    cdef int acc_setup(self, int kind) except -1:
        """acc: the float32 copy the engine runs on, in place (a blocking call borrows the
        thread's; a request owns one for its life)."""
        cdef char *p
        if self.acc_buf is not None:
            return 0
        self.acc_buf = (_acc_scratch(self.s.count) if kind == LP_REQ_BLOCKING
                        else np.empty(self.s.count, np.float32))
        p = <char *>cnp.PyArray_DATA(<cnp.ndarray>self.acc_buf)
        self.sptr = p
        if self.rptr != NULL:
            self.rptr = p
        self.edtype = LP_FLOAT32
        return 0

    cdef int acc_widen(self) except -1:
        """acc: the input into the float32 copy (each start)."""
        cdef int dt = self.s.dtype
        cdef size_t n = self.s.count
        with nogil:
            lp_widen(<float *>self.sptr, self.acc_in, n, dt)
        return 0

cdef str _source_name(int src):
    return ("override", "table", "model", "requested", "autotune")[src]

cdef void _debug_log(Message m, int kind) except *:
    """LPMPI_DEBUG=1: on every rank, the decision (the engine's own: lp_request_decision, with
    the call's own arguments and key) once per collective, key size bucket, communicator size,
    memory kind and accumulation, each line naming the rank (ranks that decide differently show
    it side by side; they never should)."""
    cdef int rank = 0
    cdef lp_decision_t d
    MPI_Comm_rank(m.comm, &rank)
    try:
        m.decide(kind, &d)
    except Exception:
        return                      # the call itself raises it
    cdef lp_choice_t ch = d.choice
    cdef size_t nbytes = d.key.nbytes
    bucket = nbytes.bit_length()
    key = (m.coll, bucket, m.size, d.key.mem, d.key.acc)
    if key in _debug_seen:
        return
    _debug_seen.add(key)
    chs = f" chunk {ch.chunk}" if lp_algo_chunked(ch.alg) else ""
    where = " (device memory)" if d.key.mem else ""
    acc = " (acc_dtype float32)" if d.key.acc else ""
    tables = " (ranks' tables differ: rank 0's)" if ch.tables < 0 else ""
    tp = f" transport {TRANSPORTS[d.ring_transport - 1]}" if d.ring_transport > 0 else ""
    import sys
    # one write of the whole line (print writes the newline apart: the ranks' lines interleaved)
    sys.stderr.write(f"lpmpi: rank {rank}: {COLLECTIVES[m.coll]} {nbytes} B{where}{acc} (bucket < 2^{bucket}) "
                     f"P={m.size}: {lp_algo_name(ch.alg).decode()}{chs}{tp} [{_source_name(ch.source)}]{tables}\n")
    sys.stderr.flush()
