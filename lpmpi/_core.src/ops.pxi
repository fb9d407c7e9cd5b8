# ---------------------------------------------------------------- ops
cdef dict _OPS = {}
for _i, _n in enumerate(OP_NAMES):
    _OPS[_n] = _i
    _OPS[_n.upper()] = _i

cdef object _OpType = Op

cdef object _SUM_NAME = "sum"          # the default argument's (interned) string

cdef int _op(op) except -1:
    cdef MPI_Op h
    if op is _SUM_NAME:
        return LP_SUM
    if type(op) is str:                 # a name: the fast path
        i = _OPS.get(op)
        if i is not None:
            return i
    if type(op) is _OpType or isinstance(op, _OpType):
        return op
    if isinstance(op, str):
        i = _OPS.get(op)
        if i is not None:
            return i
    elif isinstance(op, _MPIOp):
        h = (<MPI.Op>op).ob_mpi
        if h == MPI_SUM: return LP_SUM
        if h == MPI_PROD: return LP_PROD
        if h == MPI_MAX: return LP_MAX
        if h == MPI_MIN: return LP_MIN
        if h == MPI_LAND: return LP_LAND
        if h == MPI_LOR: return LP_LOR
        if h == MPI_LXOR: return LP_LXOR
        if h == MPI_BAND: return LP_BAND
        if h == MPI_BOR: return LP_BOR
        if h == MPI_BXOR: return LP_BXOR
    raise ValueError(f"op must be an lpmpi op, one of MPI.SUM .. MPI.BXOR, or one of {OP_NAMES}, got {op!r}")
