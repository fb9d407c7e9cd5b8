# ---------------------------------------------------------------- flight recorder and trace
def _configure_flight(long size, str directory, double abort_timeout):
    """LPMPI_FR_SIZE, LPMPI_FR_DIR ("": lpmpi-fr in the working directory), LPMPI_ABORT_TIMEOUT
    (seconds, 0: never) (lpmpi._env at import)."""
    cdef bytes d = os.fsencode(directory)
    if lp_fr_configure(size, d, abort_timeout) != LP_OK:
        _raise_status(LP_ERR_ARG)


def dump_flight_recorder(directory=None, str reason="lpmpi.dump_flight_recorder()"):
    """Write this rank's flight recorder (its last LPMPI_FR_SIZE collectives, with what the ones
    still running wait for) to ``directory/fr.<world rank>.json`` (default LPMPI_FR_DIR, else
    ``lpmpi-fr`` in the working directory); returns the file's path.  Local: no communication."""
    cdef bytes d = os.fsencode(os.fspath(directory)) if directory is not None else b""
    cdef bytes why = reason.encode()
    cdef const char *dp = d
    cdef const char *wp = why
    cdef char path[1100]
    cdef int rc
    with nogil:
        rc = lp_fr_dump(wp, dp, path, sizeof(path))
    if rc != LP_OK:
        _raise_status(rc)
    return os.fsdecode(path)


def _trace_configure(str directory, unsigned long long max_records=0):
    """LPMPI_TRACE (lpmpi._env at import): each call's record to directory/trace.<rank>.bin."""
    cdef bytes d = os.fsencode(directory)
    if lp_trace_configure(d, max_records) != LP_OK:
        _raise_status(LP_ERR_ARG)


def _trace_close():
    """The trace's last records written, its file closed; its path ("" where none)."""
    cdef char path[1100]
    with nogil:
        lp_trace_close(path, sizeof(path))
    return os.fsdecode(path)
