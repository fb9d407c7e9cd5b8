# ---------------------------------------------------------------- collectives
#: compression= values (docs/compression.md)
COMPRESSIONS = ("bf16", "int8", "int4")


cdef Message _reduce_scatter_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype, counts,
                                     compression=None):
    """reduce_scatter's message: equal blocks (MPI_Reduce_scatter_block), or per-rank counts."""
    cdef Message m
    if counts is None:
        m = Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype)
    else:
        m = Message.for_blocks(_COLL["reduce_scatter_v"], sendbuf, recvbuf, op, 0, comm, algorithm, chunk_bytes,
                               counts, None, None, None, acc_dtype)
    m.set_comp(compression, algorithm)
    return m


cdef Message _allreduce_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype, compression):
    cdef Message m = Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype)
    m.set_comp(compression, algorithm)
    return m


cdef Message _allgather_message(sendbuf, recvbuf, comm, algorithm, chunk_bytes, compression):
    cdef Message m = Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes)
    m.set_comp(compression, algorithm)
    return m


def allreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
              acc_dtype=None, compression=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` and leave the result on every rank.

    Returns ``recvbuf`` (a new array like ``sendbuf`` when None).  In place: ``sendbuf`` is
    ``lpmpi.IN_PLACE`` (then ``recvbuf`` holds the input) or ``recvbuf is sendbuf``.

    ``compression`` ("bf16", "int8", "int4"; float data, sum or avg): the data crosses the
    wire encoded, every value rounded at most twice, sums in float32 (docs/compression.md).

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allreduce(np.ones(4, np.float32))   # doctest: +SKIP
    """
    cdef Message m = _allreduce_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                        acc_dtype, compression)
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


def allgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None, compression=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank: block r (C order) is
    rank r's (MPI_Allgather).

    Returns ``recvbuf`` (new, shape ``(P,) + sendbuf.shape``, when None).  In place:
    ``sendbuf`` is ``lpmpi.IN_PLACE`` and each rank's block is already at its place in
    ``recvbuf``.  Host memory.

    ``compression`` ("bf16", "int8", "int4"; float data): each block crosses the wire encoded,
    rounded once, and every rank (its owner too) holds the decoded values (docs/compression.md).

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allgather(np.full(4, 1.0))   # doctest: +SKIP
    """
    cdef Message m = _allgather_message(sendbuf, recvbuf, comm, algorithm, chunk_bytes, compression)
    m.run()
    return m.result


def reduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None, counts=None, compression=None):
    """Reduce block r of every rank's ``sendbuf`` (P blocks) into ``recvbuf`` on rank r
    (MPI_Reduce_scatter_block).

    Returns ``recvbuf`` (new when None: ``sendbuf.shape[1:]`` when its first axis is the P
    blocks, else 1-D).  In place: ``sendbuf`` is ``lpmpi.IN_PLACE``, ``recvbuf`` holds the P
    blocks and the result lands in its first block.  Host memory.  ``counts`` (P ints): rank r
    gets the reduction of the ``counts[r]`` elements at ``sum(counts[:r])`` (MPI_Reduce_scatter;
    recvbuf new and 1-D when None).  ``acc_dtype="float32"``
    (float16/bfloat16 data, sum or avg): accumulated in float32, the result rounded once.

    ``compression`` ("bf16", "int8", "int4"; float data, sum or avg): the blocks cross the wire
    encoded, rounded once, summed in float32 (docs/compression.md).

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce_scatter(np.ones((2, 4)))   # doctest: +SKIP
    """
    cdef Message m = _reduce_scatter_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype, counts,
                                             compression)
    m.run()
    return m.result


# their nonblocking and persistent forms: a Request (request.pxi)
def iallreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
               acc_dtype=None, compression=None):
    """Nonblocking :func:`allreduce`: starts it and returns a :class:`Request` whose ``wait()``
    returns recvbuf.  Arguments and errors as the blocking call (raised here, before any
    communication).

    >>> req = lpmpi.iallreduce(grad, op="avg")   # doctest: +SKIP
    >>> ...                                      # compute meanwhile
    >>> grad_avg = req.wait()                    # doctest: +SKIP
    """
    return Request.make(_allreduce_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                           acc_dtype, compression), LP_REQ_NONBLOCKING)


def ireduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
            chunk_bytes=None, acc_dtype=None):
    """Nonblocking :func:`reduce`; ``wait()`` returns recvbuf on the root, None elsewhere."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_NONBLOCKING)


def ibcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Nonblocking :func:`bcast`; ``wait()`` returns buf."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_NONBLOCKING)


def allreduce_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None, compression=None):
    """Persistent :func:`allreduce`: arguments checked, algorithm chosen and scratch reserved
    once; ``start()`` then ``wait()``, as often as needed, with the buffers' current contents.

    >>> p = lpmpi.allreduce_init(grad, lpmpi.IN_PLACE)   # doctest: +SKIP
    >>> for step in range(n): p.start(); ...; p.wait()  # doctest: +SKIP
    """
    return Request.make(_allreduce_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                           acc_dtype, compression), LP_REQ_PERSISTENT)


def reduce_init(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
                chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`reduce` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_PERSISTENT)


def bcast_init(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Persistent :func:`bcast` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_PERSISTENT)


def iallgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None, compression=None):
    """Nonblocking :func:`allgather`; ``wait()`` returns recvbuf."""
    return Request.make(_allgather_message(sendbuf, recvbuf, comm, algorithm, chunk_bytes, compression),
                        LP_REQ_NONBLOCKING)


def ireduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                    chunk_bytes=None, acc_dtype=None, counts=None, compression=None):
    """Nonblocking :func:`reduce_scatter`; ``wait()`` returns recvbuf."""
    return Request.make(_reduce_scatter_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype, counts,
                                                compression), LP_REQ_NONBLOCKING)


def allgather_init(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None, compression=None):
    """Persistent :func:`allgather` (see :func:`allreduce_init`)."""
    return Request.make(_allgather_message(sendbuf, recvbuf, comm, algorithm, chunk_bytes, compression),
                        LP_REQ_PERSISTENT)


def reduce_scatter_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                        chunk_bytes=None, acc_dtype=None, counts=None, compression=None):
    """Persistent :func:`reduce_scatter` (see :func:`allreduce_init`)."""
    return Request.make(_reduce_scatter_message(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype, counts,
                                                compression), LP_REQ_PERSISTENT)


# ---------------------------------------------------------------- the collectives that move blocks
# alltoall, alltoallv, allgatherv, gather, scatter: their three forms each are generated from
# the collectives' descriptor (lpmpi/_colls.py: `forms`) into forms.pxi (tools/gen_colls.py),
# included after this file.


# ---------------------------------------------------------------- every collective's message, by name
cdef Message _blocks_message(int coll, s, r, op, root, comm, alg, cb, acc, v):
    return Message.for_blocks(coll, s, r, op, root, comm, alg, cb, v.get("counts"), v.get("recvcounts"),
                              v.get("sdispls"), v.get("rdispls") if "rdispls" in v else v.get("displs"), acc)

# name -> the message of a call by the buffers' and arguments' roles (the bench, call_decision,
# the torch backend and the XLA handlers build every collective's message through it)
cdef dict _BUILDERS = {
    "allreduce": lambda s, r, op, root, comm, alg, cb, acc, v: _allreduce_message(s, r, op, comm, alg, cb, acc,
                                                                                 v.pop("compression", None)),
    "reduce": lambda s, r, op, root, comm, alg, cb, acc, v: Message.for_reduce(s, r, op, root, comm, alg, cb, acc),
    "bcast": lambda s, r, op, root, comm, alg, cb, acc, v: Message.for_bcast(s, root, comm, alg, cb),
    "allgather": lambda s, r, op, root, comm, alg, cb, acc, v: _allgather_message(s, r, comm, alg, cb,
                                                                                 v.pop("compression", None)),
    "reduce_scatter": lambda s, r, op, root, comm, alg, cb, acc, v: _reduce_scatter_message(
        s, r, op, comm, alg, cb, acc, v.get("counts"), v.pop("compression", None)),
}
for _i, _n in enumerate(COLLECTIVES):
    if _n not in _BUILDERS and _ROWS[_i]["via"] is None:
        _BUILDERS[_n] = (lambda c: lambda s, r, op, root, comm, alg, cb, acc, v:
                         _blocks_message(c, s, r, op, root, comm, alg, cb, acc, v))(_i)


def _message(collective, sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
             chunk_bytes=None, acc_dtype=None, compression=None, **counts):
    """The checked message of ``lpmpi.<collective>(...)`` by the arguments' roles (bcast:
    sendbuf is its buffer; op, root ignored where the collective has none; counts: the per-rank
    counts and displacements by their parameter names: counts, recvcounts, sdispls, rdispls,
    displs)."""
    try:
        build = _BUILDERS[collective]
    except (KeyError, TypeError):
        raise ValueError(f"collective must be one of {tuple(_BUILDERS)}, got {collective!r}") from None
    if compression is not None:
        _check_compressible(collective)
        counts["compression"] = compression
    return build(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes, acc_dtype, counts)
