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
        self.prepare()
        if self.acc:
            self.acc_setup(kind)
            nbytes *= 2
            if kind != LP_REQ_PERSISTENT:
                self.acc_widen()
        if _debug:
            _debug_log(self, kind)
        if kind == LP_REQ_BLOCKING or _check_enabled or nbytes > _START_WITH_GIL:
            with nogil:
                rc = lp_request(out, kind, self.coll, self.comm, self.sptr, self.rptr, self.count,
                                self.edtype, self.op, self.root, self.alg, self.chunk, self.s.mem,
                                self.acc_out if self.acc else NULL, self.s.dtype)
        else:
            rc = lp_request(out, kind, self.coll, self.comm, self.sptr, self.rptr, self.count,
                            self.edtype, self.op, self.root, self.alg, self.chunk, self.s.mem,
                            self.acc_out if self.acc else NULL, self.s.dtype)
        if rc != LP_OK:
            _raise_status(rc)
        return req

    cdef int decide(self, int kind, lp_decision_t *d) except -1:
        """What request(kind) would run on this rank (lp_request_decision: the engine's own checks,
        key and decision, with the arguments request() passes; no communication once the
        communicator is prepared)."""
        cdef int rc
        self.prepare()
        if self.acc:
            self.acc_setup(kind)
        rc = lp_request_decision(d, self.coll, self.comm, self.sptr, self.rptr, self.count,
                                 self.edtype, self.op, self.root, self.alg, self.chunk, self.s.mem,
                                 self.acc_out if self.acc else NULL, self.s.dtype)
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
    return ("override", "table", "model", "requested")[src]

cdef void _debug_log(Message m, int kind) except *:
    """LPMPI_DEBUG=1: on rank 0, the decision (the engine's own: lp_request_decision, with the
    call's own arguments and key) once per collective, key size bucket, communicator size,
    memory kind and accumulation."""
    cdef int rank = 0
    cdef lp_decision_t d
    MPI_Comm_rank(m.comm, &rank)
    if rank != 0:
        return
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
    print(f"lpmpi: {COLLECTIVES[m.coll]} {nbytes} B{where}{acc} (bucket < 2^{bucket}) P={m.size}: "
          f"{lp_algo_name(ch.alg).decode()}{chs}{tp} [{_source_name(ch.source)}]{tables}",
          file=sys.stderr, flush=True)
