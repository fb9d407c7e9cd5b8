# ---------------------------------------------------------------- the message of a call
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
