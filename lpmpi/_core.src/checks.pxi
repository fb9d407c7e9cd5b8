# ---------------------------------------------------------------- a call's arguments, checked
# (message.pxi's Message calls these before any communication: a bad argument raises on every
# rank, naming it, with nothing written)
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
