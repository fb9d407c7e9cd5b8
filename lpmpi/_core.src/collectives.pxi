# ---------------------------------------------------------------- collectives
def allreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
              acc_dtype=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` and leave the result on every rank.

    Returns ``recvbuf`` (a new array like ``sendbuf`` when None).  In place: ``sendbuf`` is
    ``lpmpi.IN_PLACE`` (then ``recvbuf`` holds the input) or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allreduce(np.ones(4, np.float32))   # doctest: +SKIP
    """
    cdef Message m = Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                           acc_dtype)
    m.run()
    return m.result


def reduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
           chunk_bytes=None, acc_dtype=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` into ``recvbuf`` on ``root``.

    Returns ``recvbuf`` on the root (a new array like ``sendbuf`` when None) and None
    elsewhere; a ``recvbuf`` passed on another rank is checked but never written.  In place on
    the root: ``sendbuf`` is ``lpmpi.IN_PLACE`` or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce(np.ones(4), root=0)   # doctest: +SKIP
    """
    cdef Message m = Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                        acc_dtype)
    m.run()
    return m.result


def bcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place; returns ``buf``.

    >>> import numpy as np, lpmpi
    >>> x = lpmpi.bcast(np.arange(4.0), root=0)   # doctest: +SKIP
    """
    cdef Message m = Message.for_bcast(buf, root, comm, algorithm, chunk_bytes)
    m.run()
    return m.result


def allgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank: block r (C order) is
    rank r's (MPI_Allgather).

    Returns ``recvbuf`` (new, shape ``(P,) + sendbuf.shape``, when None).  In place:
    ``sendbuf`` is ``lpmpi.IN_PLACE`` and each rank's block is already at its place in
    ``recvbuf``.  Host memory.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allgather(np.full(4, 1.0))   # doctest: +SKIP
    """
    cdef Message m = Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes)
    m.run()
    return m.result


def reduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None):
    """Reduce block r of every rank's ``sendbuf`` (P blocks) into ``recvbuf`` on rank r
    (MPI_Reduce_scatter_block).

    Returns ``recvbuf`` (new when None: ``sendbuf.shape[1:]`` when its first axis is the P
    blocks, else 1-D).  In place: ``sendbuf`` is ``lpmpi.IN_PLACE``, ``recvbuf`` holds the P
    blocks and the result lands in its first block.  Host memory.  ``acc_dtype="float32"``
    (float16/bfloat16 data, sum or avg): accumulated in float32, the result rounded once.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce_scatter(np.ones((2, 4)))   # doctest: +SKIP
    """
    cdef Message m = Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                acc_dtype)
    m.run()
    return m.result


# their nonblocking and persistent forms: a Request (request.pxi)
def iallreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
               acc_dtype=None):
    """Nonblocking :func:`allreduce`: starts it and returns a :class:`Request` whose ``wait()``
    returns recvbuf.  Arguments and errors as the blocking call (raised here, before any
    communication).

    >>> req = lpmpi.iallreduce(grad, op="avg")   # doctest: +SKIP
    >>> ...                                      # compute meanwhile
    >>> grad_avg = req.wait()                    # doctest: +SKIP
    """
    return Request.make(Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                              acc_dtype), LP_REQ_NONBLOCKING)


def ireduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
            chunk_bytes=None, acc_dtype=None):
    """Nonblocking :func:`reduce`; ``wait()`` returns recvbuf on the root, None elsewhere."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_NONBLOCKING)


def ibcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Nonblocking :func:`bcast`; ``wait()`` returns buf."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_NONBLOCKING)


def allreduce_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`allreduce`: arguments checked, algorithm chosen and scratch reserved
    once; ``start()`` then ``wait()``, as often as needed, with the buffers' current contents.

    >>> p = lpmpi.allreduce_init(grad, lpmpi.IN_PLACE)   # doctest: +SKIP
    >>> for step in range(n): p.start(); ...; p.wait()  # doctest: +SKIP
    """
    return Request.make(Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                              acc_dtype), LP_REQ_PERSISTENT)


def reduce_init(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
                chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`reduce` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_PERSISTENT)


def bcast_init(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Persistent :func:`bcast` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_PERSISTENT)


def iallgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Nonblocking :func:`allgather`; ``wait()`` returns recvbuf."""
    return Request.make(Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes),
                        LP_REQ_NONBLOCKING)


def ireduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                    chunk_bytes=None, acc_dtype=None):
    """Nonblocking :func:`reduce_scatter`; ``wait()`` returns recvbuf."""
    return Request.make(Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                   acc_dtype), LP_REQ_NONBLOCKING)


def allgather_init(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Persistent :func:`allgather` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes),
                        LP_REQ_PERSISTENT)


def reduce_scatter_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                        chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`reduce_scatter` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                   acc_dtype), LP_REQ_PERSISTENT)
