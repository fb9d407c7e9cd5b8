# ---------------------------------------------------------------- communicators
cdef MPI_Comm _WORLD_H = (<MPI.Comm>_WORLD).ob_mpi
cdef int _WORLD_SIZE = -1         # on first use (MPI may be initialized after import)

cdef int _comm(comm, MPI_Comm *out, int *size) except -1:
    cdef int inter = 0, rc, n = 0
    cdef char err[MPI_MAX_ERROR_STRING + 1]
    global _WORLD_SIZE
    if (comm is None or comm is _WORLD) and _WORLD_SIZE > 0:
        out[0] = _WORLD_H               # the common case: an intracommunicator until MPI ends
        size[0] = _WORLD_SIZE
        return 0
    if comm is None:
        comm = _WORLD
    if not isinstance(comm, _Comm):
        raise TypeError(f"comm must be an mpi4py communicator (MPI.Comm) or None, got {type(comm).__name__}")
    cdef MPI_Comm h = (<MPI.Comm>comm).ob_mpi
    if h == MPI_COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    rc = MPI_Comm_test_inter(h, &inter)
    if rc != MPI_SUCCESS:
        err[0] = 0
        MPI_Error_string(rc, err, &n)
        raise ValueError(f"comm is not a valid communicator (freed?): {err.decode('utf-8', 'replace')}")
    if inter:
        raise ValueError("comm is an intercommunicator; lpmpi needs an intracommunicator")
    MPI_Comm_size(h, size)
    out[0] = h
    if comm is _WORLD:
        _WORLD_SIZE = size[0]
    return 0
