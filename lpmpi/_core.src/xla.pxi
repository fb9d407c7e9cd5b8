# ---------------------------------------------------------------- XLA FFI targets (lpmpi.jax)
from cpython.pycapsule cimport PyCapsule_New

def _xla_targets(bint cuda=False):
    """{collective: a PyCapsule of its XLA FFI handler (src/ffi/xla_ffi.c)} on host memory, or with
    cuda=True on device memory (empty unless this is a CUDA build), for
    ``jax.ffi.register_ffi_target``."""
    cdef void *p
    out = {}
    for i in range(LP_NCOLLS):
        p = lp_xla_handler(<lp_coll_t>i, LP_MEM_CUDA if cuda else LP_MEM_HOST)
        if p != NULL:
            out[COLLECTIVES[i]] = PyCapsule_New(p, NULL, NULL)
    return out


def _xla_call(collective, dtype, op, root, comm, algorithm, chunk_bytes, acc_dtype, compression=None):
    """A lpmpi.jax call's checks and attributes: every argument checked with the same rules and
    messages as the Python collectives (local, so every rank raises before anything runs), then
    comm prepared (collective on its first use, as the handler never prepares one).  dtype: the
    element type's name.  Returns (comm handle, size, rank, op, root, alg, chunk, acc, comp) as
    ints (comp: LP_COMP_*, 0 uncompressed: docs/compression.md)."""
    cdef int coll = _coll_index(collective)
    cdef int has_op, has_root, inp, res, sb, rb, shm, vc, size = 0, rank = 0, first = 0, rc
    cdef MPI_Comm h
    cdef Buf b
    lp_coll_traits(<lp_coll_t>coll, &has_op, &has_root, &inp, &res, &sb, &rb, &shm, &vc)
    if dtype not in DTYPE_NAMES:
        raise TypeError(f"x has dtype {dtype}, which lpmpi does not take {_TAKES}")
    memset(&b, 0, sizeof(b))
    b.dtype = DTYPE_NAMES.index(dtype)
    cdef int opc = LP_SUM
    if has_op:
        opc = _op(op)
        _check_op(opc, b.dtype)
    _comm(comm, &h, &size)
    cdef int r = _check_root(root, size) if has_root else 0
    alg = _alg_index(coll, algorithm)
    cdef size_t chunk = _chunk(chunk_bytes)
    cdef bint acc = _acc(acc_dtype, &b, opc) if has_op else False
    comp, alg = _comp_check(coll, b.dtype, opc, 0, acc, alg, algorithm, compression)
    if not lp_comm_ready(h):
        with nogil:
            rc = lp_comm_prepare(h, &first)
        if rc != LP_OK:
            _raise_status(rc)
        if first:
            _warn_tables()
    MPI_Comm_rank(h, &rank)
    return (<intptr_t>h, size, rank, opc, r, alg, chunk, int(acc), comp)
