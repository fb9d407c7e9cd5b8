# ---------------------------------------------------------------- the engine's names and limits
#: element types, ops, collectives and memory kinds, in the engine's order (lpmpi.h)
DTYPE_NAMES = tuple(lp_dtype_name(i).decode() for i in range(LP_NDTYPES))
_TAKES = f"(lpmpi takes {', '.join(DTYPE_NAMES)})"   # for unsupported-dtype errors
OP_NAMES = tuple(lp_op_name(i).decode() for i in range(LP_NOPS))
COLLECTIVES = tuple(lp_coll_name(i).decode() for i in range(LP_NCOLLS))
MEMORY_KINDS = tuple(lp_mem_name(i).decode() for i in range(LP_NMEMS))
#: each collective's index in the engine, by name (a new collective needs no declaration here)
cdef dict _COLL = {n: i for i, n in enumerate(COLLECTIVES)}
cdef int _COLL_ALLTOALL = _COLL["alltoall"]   # the counts' exchange of alltoallv (message.pxi)

cdef tuple _ON = ("all", "root", "nonroot")

def _coll_traits():
    """The engine's row of each collective (core/colls.c lp_colls, from lpmpi/_colls.py), in COLLECTIVES' order: a dict
    of has_op, has_root, input and result ("all", "root" or "nonroot": the ranks whose data goes
    in, whose buffer the call writes), send_blocks and recv_blocks (blocks of the count each
    buffer holds: 1, or 0 for the communicator's size), mpi_name (the MPI library's own
    collective, "MPI_Allreduce"), ring_shm (its ring runs over the shared-memory transport),
    send_counts / recv_counts (that buffer's blocks have per-rank counts: the v collectives),
    via (None, or the collective whose function calls it: reduce_scatter_v's is reduce_scatter),
    prefix (rank r's result reduces ranks 0..r: scan)."""
    cdef int op, root, inp, res, sb, rb, shm, vc
    out = []
    for i in range(LP_NCOLLS):
        lp_coll_traits(<lp_coll_t>i, &op, &root, &inp, &res, &sb, &rb, &shm, &vc)
        out.append(dict(name=COLLECTIVES[i], has_op=bool(op), has_root=bool(root), input=_ON[inp],
                        result=_ON[res], send_blocks=sb, recv_blocks=rb,
                        mpi_name=lp_coll_mpi_name(<lp_coll_t>i).decode(), ring_shm=bool(shm),
                        send_counts=bool(vc & 2), recv_counts=bool(vc & 1),
                        via=lp_coll_via(<lp_coll_t>i).decode() or None,
                        prefix=bool(lp_coll_prefix(<lp_coll_t>i))))
    return tuple(out)
CUDA_BUILD = bool(lp_cuda_built())  # compiled with nvcc: device kernels and the CUDA transports
CHUNK_MIN, CHUNK_MAX = LP_CHUNK_MIN, LP_CHUNK_MAX
WINDOW_MAX, STAGING_MAX = LP_WINDOW_MAX, LP_STAGING_MAX
DEFAULT_STAGING = LP_STAGING_DEFAULT
cdef int BF16 = LP_BFLOAT16

Op = _enum.IntEnum("Op", [(n.upper(), i) for i, n in enumerate(OP_NAMES)], module="lpmpi")
Op.__doc__ = ("Reduction operations: ``lpmpi.SUM`` ... ``lpmpi.BXOR`` (values are the engine's "
              "op codes; ``str`` names such as ``'sum'`` and ``MPI.SUM`` are accepted too).")

# (kind, itemsize) -> dtype code, for numpy dtypes (bfloat16 has no numpy kind: by name); a C
# table for the per-call path (numpy's kind characters are ASCII, item sizes at most 16)
cdef dict _KIND = {}
cdef signed char _KIND_CODE[128][17]
memset(_KIND_CODE, -1, sizeof(_KIND_CODE))
for _i, _n in enumerate(DTYPE_NAMES):
    if _n != "bfloat16":
        _d = np.dtype(_n)
        _KIND[(_d.kind.encode(), _d.itemsize)] = _i
        _KIND_CODE[ord(_d.kind)][_d.itemsize] = _i
# buffer-protocol format character -> numpy kind
cdef dict _FORMAT = {
    "?": b"b", "b": b"i", "h": b"i", "i": b"i", "l": b"i", "q": b"i", "n": b"i",
    "B": b"u", "H": b"u", "I": b"u", "L": b"u", "Q": b"u", "N": b"u",
    "e": b"f", "f": b"f", "d": b"f", "Zf": b"c", "Zd": b"c",
}
