# ---------------------------------------------------------------- requests
cdef int _norphans = 0          # requests dropped while in flight (see Request.__dealloc__)
cdef list _orphans = []         # their (request, message): kept alive until they complete

@cython.no_gc
@cython.freelist(8)
cdef class _Orphan:
    cdef lp_req_t *req
    cdef Message msg

cdef void _reap_orphans() noexcept:
    """Free the dropped requests that have completed (their buffers go with them)."""
    global _norphans
    cdef _Orphan o
    cdef int done = 0
    keep = []
    for o in _orphans:
        done = 0
        lp_test(o.req, &done)
        if done:
            lp_req_free(o.req)
            o.req = NULL
        else:
            keep.append(o)
    _orphans[:] = keep
    _norphans = len(keep)

cdef dict _KIND_NAMES = {LP_REQ_NONBLOCKING: "nonblocking", LP_REQ_PERSISTENT: "persistent"}

@cython.no_gc
@cython.freelist(8)
cdef class Request:
    """A nonblocking or persistent lpmpi collective (``lpmpi.iallreduce`` ...,
    ``lpmpi.allreduce_init`` ...).

    ``test()`` advances lpmpi's outstanding work and says whether this request has completed;
    ``wait()`` blocks (GIL released) until it has and returns what the blocking call returns
    (again on every later call); ``done`` says whether it is complete without making progress.
    A persistent request is inactive until ``start()``, and may be started again once waited;
    ``free()`` (or a ``with`` block, or garbage collection) releases it.  The buffers belong to
    lpmpi until the request completes.  A request dropped while in flight is completed by
    later lpmpi calls or at exit (``MPI_Finalize``), with a ``ResourceWarning``.

    >>> req = lpmpi.iallreduce(np.ones(4))   # doctest: +SKIP
    >>> y = req.wait()                       # doctest: +SKIP
    """
    cdef lp_req_t *req
    cdef Message msg
    cdef int kind
    cdef bint due                 # the result awaits Message.finish (once per completion)

    def __cinit__(self):
        self.req = NULL

    cdef int _complete(self) except -1:
        if self.due:
            self.due = False
            self.msg.finish()
        return 0

    @staticmethod
    cdef Request make(Message m, int kind):
        cdef Request r = Request.__new__(Request)
        if _norphans:
            _reap_orphans()
        r.req = m.request(kind)
        r.msg = m
        r.kind = kind
        r.due = m.to_jax and kind == LP_REQ_NONBLOCKING
        return r

    cdef int _check(self) except -1:
        if self.req == NULL:
            raise ValueError("this request was freed")
        return 0

    def test(self):
        """Advance every outstanding lpmpi request; True once this one has completed (raises
        LPError if it failed).  An inactive persistent request counts as complete."""
        cdef int done = 0, rc
        self._check()
        rc = lp_test(self.req, &done)
        if _norphans:
            _reap_orphans()
        if rc != LP_OK:
            _raise_status(rc)
        if done:
            self._complete()
        return bool(done)

    def wait(self):
        """Block until this request completes (advancing every outstanding one; the GIL is
        released) and return the blocking call's result: recvbuf, None on the non-roots of
        reduce, buf for bcast.  Raises LPError if it failed."""
        cdef int rc
        self._check()
        if lp_req_active(self.req):
            with nogil:
                rc = lp_wait(self.req)
        else:
            rc = lp_wait(self.req)       # complete: its outcome, at once
        if _norphans:
            _reap_orphans()
        if rc != LP_OK:
            _raise_status(rc)
        self._complete()
        return self.msg.result

    @property
    def done(self):
        """True when the request is not in flight (complete, or a persistent one not started);
        makes no progress."""
        return self.req == NULL or not lp_req_active(self.req)

    @property
    def persistent(self):
        return self.kind == LP_REQ_PERSISTENT

    def _choice(self):
        """``(algorithm, chunk_bytes or None, transport or None)`` this request runs now (a
        persistent "auto" request under LPMPI_AUTOTUNE follows its key's settled choice)."""
        cdef int alg = 0, tp = 0
        cdef size_t chunk = 0
        self._check()
        rc = lp_req_choice(self.req, &alg, &chunk, &tp)
        if rc != LP_OK:
            _raise_status(rc)
        return lp_algo_name(alg).decode(), (chunk or None), _tp_name(tp)

    def start(self):
        """Start a persistent request (again); it must not be in flight."""
        cdef int rc
        self._check()
        if self.kind != LP_REQ_PERSISTENT:
            raise ValueError("start() is for persistent requests (lpmpi.allreduce_init, ...); a "
                             "nonblocking request started when it was made")
        if lp_req_active(self.req):
            raise ValueError("this persistent request is still in flight: wait() for it before "
                             "starting it again")
        if _norphans:
            _reap_orphans()
        if self.msg.acc:
            self.msg.acc_widen()
        self.due = self.msg.to_jax
        if _check_enabled or self.msg.s.count * lp_dtype_size(self.msg.s.dtype) > _START_WITH_GIL:
            with nogil:   # LPMPI_CHECK: an agreement (collective) first
                rc = lp_start(self.req)
        else:
            rc = lp_start(self.req)
        if rc != LP_OK:
            _raise_status(rc)
        return self

    def free(self):
        """Release the request (waiting for it first if it is in flight)."""
        cdef int rc = LP_OK
        if self.req == NULL:
            return
        if lp_req_active(self.req):
            with nogil:
                rc = lp_wait(self.req)
        lp_req_free(self.req)
        self.req = NULL
        self.msg = None
        if rc != LP_OK:
            _raise_status(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __repr__(self):
        if self.req == NULL:
            return "<lpmpi.Request (freed)>"
        m = self.msg
        state = "active" if lp_req_active(self.req) else ("inactive" if self.kind == LP_REQ_PERSISTENT
                                                           and not lp_req_active(self.req) else "done")
        return (f"<lpmpi.Request {_KIND_NAMES[self.kind]} {COLLECTIVES[m.coll]} "
                f"{m.s.count * lp_dtype_size(m.s.dtype)} B {DTYPE_NAMES[m.s.dtype]} {state}>")

    def __dealloc__(self):
        global _norphans
        cdef _Orphan o
        if self.req == NULL:
            return
        if not lp_req_active(self.req):
            lp_req_free(self.req)
            self.req = NULL
            return
        # in flight: its buffers must live until it completes, which later calls (or the exit
        # of the interpreter, before MPI_Finalize) take care of
        o = _Orphan.__new__(_Orphan)
        o.req = self.req
        o.msg = self.msg
        self.req = NULL
        _orphans.append(o)
        _norphans += 1
        try:
            import warnings
            warnings.warn("lpmpi.Request dropped while in flight (never waited); it completes at "
                          "a later lpmpi call or at MPI_Finalize", ResourceWarning, stacklevel=2)
        except Exception:   # warnings turned into errors cannot propagate from here
            pass


def _at_exit():
    """Before MPI_Finalize (mpi4py finalizes after Python's atexit handlers): stop the
    progress thread and complete the requests dropped while in flight."""
    global _norphans
    cdef _Orphan o
    cdef int rc
    lp_progress_thread(0)
    if not _orphans:
        return
    try:
        import warnings
        warnings.warn(f"lpmpi: completing {len(_orphans)} request(s) dropped while in flight "
                      "before MPI_Finalize", ResourceWarning, stacklevel=1)
    except Exception:
        pass
    # ResourceWarning is hidden by default: a line on stderr says it always (a request never
    # waited for is a bug of the program, not a detail)
    sys.stderr.write(f"lpmpi: {len(_orphans)} request(s) were dropped while in flight (never "
                     "waited for); completing them before MPI_Finalize\n")
    for o in _orphans:
        with nogil:
            lp_wait(o.req)
        lp_req_free(o.req)
        o.req = NULL
    _orphans.clear()
    _norphans = 0

import atexit as _atexit
_atexit.register(_at_exit)


def waitall(requests):
    """Wait for every request (advancing all of them at once) and return their results, in
    order; raises the first failure (in list order) once all have completed."""
    reqs = list(requests)
    cdef Request r
    for x in reqs:
        if not isinstance(x, Request):
            raise TypeError(f"requests must be lpmpi.Request objects, got {type(x).__name__}")
        (<Request>x)._check()
    cdef int n = len(reqs), rc = LP_OK, i
    if n == 0:
        return []
    cdef lp_req_t **arr = <lp_req_t **>PyMem_Malloc(n * sizeof(lp_req_t *))
    if arr == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            arr[i] = (<Request>reqs[i]).req
        with nogil:
            rc = lp_waitall(n, arr)
    finally:
        PyMem_Free(arr)
    if _norphans:
        _reap_orphans()
    if rc != LP_OK:
        _raise_status(rc)
    for x in reqs:
        (<Request>x)._complete()
    return [(<Request>x).msg.result for x in reqs]


def progress_thread(bint on):
    """Start (True) or stop (False) lpmpi's background progress thread, which advances every
    outstanding request while the program computes (also ``LPMPI_PROGRESS_THREAD=1``).  Needs
    MPI_THREAD_MULTIPLE (mpi4py's default): raises LPError saying why otherwise.  Returns
    whether it runs."""
    cdef int rc
    with nogil:
        rc = lp_progress_thread(on)
    if rc != LP_OK:
        _raise_status(rc)
    return bool(lp_progress_thread_running())


def progress():
    """Advance every outstanding request once, without waiting; returns how many are still
    in flight."""
    lp_progress()
    if _norphans:
        _reap_orphans()
    return lp_outstanding()


def _outstanding():
    """Requests started and not complete (tests)."""
    return lp_outstanding()


def _native_forms():
    """(nonblocking, persistent) forms of native in this MPI library (MPI_Iallreduce ...,
    MPI 4's MPI_Allreduce_init ...)."""
    cdef int f = lp_native_forms()
    return bool(f & 1), bool(f & 2)


def request_forms(algorithm, collective=None):
    """How the nonblocking and persistent forms of ``algorithm`` run (one sentence; explain()
    and lpmpi-info print it); ``collective``: that collective's MPI calls only (None: every
    collective's)."""
    nb, pers = _native_forms()
    thread = ("the progress thread runs" if lp_progress_thread_running() else
              "no progress thread (lpmpi.progress_thread(True) or LPMPI_PROGRESS_THREAD=1 adds one)")
    if algorithm == "native":
        which = range(LP_NCOLLS) if collective is None else (_coll_index(collective),)
        names = [lp_coll_mpi_name(<lp_coll_t>i).decode() for i in which]
        p = (f"MPI 4's {' / '.join(m + '_init' for m in names)}, started each time"
             if pers else "the nonblocking ones at each start (this MPI library has no MPI 4 "
             "persistent collectives)")
        n = (" / ".join("MPI_I" + m[4:].lower() for m in names) if nb
             else "the blocking call, at wait time")
        return (f"native: nonblocking form {n}; persistent form {p}; progressed by the MPI library and "
                f"by every lpmpi test/wait; {thread}")
    return (f"{algorithm or 'lp, ring, mst, be'}: nonblocking and persistent forms run lpmpi's own "
            f"schedule on the same engine as the blocking calls, "
            f"advanced by any lpmpi call (test, wait, a collective) and by the progress thread; {thread}")


def _test_fault(long after):
    """Tests: the ``after``-th next point-to-point call of the engine fails (0: never)."""
    lp_test_fault(after)


def _test_shm_named(bint on):
    """Tests: shared-memory segments made as named POSIX segments in /dev/shm (the path taken
    where /proc/<pid>/fd is refused) instead of memory files."""
    lp_test_shm_named(on)
