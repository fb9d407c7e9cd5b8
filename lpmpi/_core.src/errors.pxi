# ---------------------------------------------------------------- errors
cdef int _raise_status(int rc) except -1:
    """The engine's last failure as an exception: ValueError for arguments, MismatchError for
    LPMPI_CHECK, LPError for MPI, CUDA and internal failures (LPMPI_DEBUG adds file:line)."""
    msg = lp_errmsg().decode("utf-8", "replace")
    if _debug:
        msg += f" [{lp_errwhere().decode()}]"
    if rc == LP_ERR_MISMATCH:
        raise MismatchError(msg)
    if rc == LP_ERR_ARG:
        raise ValueError(msg)
    raise LPError(msg)

cdef int _local_error(MPI_Comm h) except -1:
    """LPMPI_CHECK: tell the other ranks this rank's arguments were bad, so nobody hangs."""
    if _check_enabled:
        with nogil:
            lp_check_local_error(h)
    return 0
