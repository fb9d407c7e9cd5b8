"""The collectives' descriptor: one entry per collective, in the engine's order.

Everything per collective that is not a schedule is read or generated from this table, as
MPICH generates its collectives from ``coll_algorithms.txt`` (``maint/gen_coll.py``):

``python tools/gen_colls.py`` writes the regions marked GENERATED in
  - ``src/include/lpmpi.h``         the enum ``lp_coll_t``
  - ``lpmpi/_clpmpi.pxd``           the enum's names for Cython
  - ``src/core/colls.c``            the collectives' table ``lp_colls`` (the engine's rows)
  - ``src/alg/alg_native.c``        the MPI library's calls of each collective (blocking,
                                    nonblocking, persistent) and their table
  - ``src/ffi/xla_ffi.c``           the XLA FFI handlers (collectives without per-rank counts)
  - ``lpmpi/_core.src/forms.pxi``   the Python functions of the collectives with ``forms``
  - ``lpmpi/jax.py``                lpmpi.jax's function of each collective with ``jax``
and ``tests/test_generated.py`` fails where a region differs from what this table makes.
Read at run time: the torch backend's profiler (``torch`` methods), which collectives take
``compression=``.

Adding a collective: its entry here, ``python tools/gen_colls.py``, its schedules (rows in
``src/alg/registry.c``: at least ``native``), its tests (docs/design.md).

This module imports nothing but the standard library (``import lpmpi`` stays light).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Forms:
    """The generated Python functions (blocking, ``i*`` nonblocking, ``*_init`` persistent):
    their parameters (Python syntax, the three forms share them), the checked message of a call
    (a Cython expression), the blocking function's documentation."""

    params: str
    message: str
    doc: str


@dataclass(frozen=True)
class Jax:
    """lpmpi.jax's function (mpi4jax's signature: ``x``, then ``op`` where it reduces, ``root``
    where it has one; the result as mpi4jax returns it, from the row: ``x`` itself on ranks the
    call does not write).  in_place / compression / transpose: the function takes that keyword
    (transpose: a differentiable primitive, bound with ``transpose=False``)."""

    doc: str
    in_place: bool = False
    compression: bool = False
    transpose: bool = False


@dataclass(frozen=True)
class TorchMethod:
    """A ``ProcessGroup`` method of the torch backend that runs this collective: the method's
    name, torch's name for the collective (its profiler records), where its output and input
    tensors are among the method's arguments."""

    method: str
    torch_name: str
    out_at: int = 0
    in_at: int = 1


@dataclass(frozen=True)
class Collective:
    """One collective.

    name      lpmpi's name (``lpmpi.<name>``), the engine's ``lp_coll_name``
    mpi       the MPI library's blocking call (``MPI_Allreduce``); the nonblocking one is
              ``MPI_I<name>``, the persistent one ``<mpi>_init`` (MPI 4)
    args      that call's arguments, of a piece ``p`` (internal.h ``lp_piece_t``): C
    op        it reduces (an op, acc_dtype)
    root      it has a root
    input     the ranks whose data goes in: "all", "root", "nonroot"
    result    the ranks whose buffer the call writes: "all", "root", "nonroot"
    sblocks, rblocks   blocks of ``count`` elements in sendbuf / recvbuf: 1, or 0 for P
    shm       its ring runs over the shared-memory segment where a decision asks for it
    vcounts   the buffers whose blocks have per-rank counts: "recv", "send"
    via       None: called by its own name; else the collective whose function calls it
    prefix    rank r's result reduces the inputs of ranks 0..r only (scan; AVG divides by r + 1)
    compression   takes ``compression=`` (lossy, opt-in)
    forms     its Python functions are generated (None: written in collectives.pxi)
    jax       its lpmpi.jax function is generated (None: none, or written in jax.py)
    torch     the torch backend's methods that run it
    """

    name: str
    mpi: str
    args: str
    op: bool = False
    root: bool = False
    input: str = "all"
    result: str = "all"
    sblocks: int = 1
    rblocks: int = 1
    shm: bool = False
    vcounts: tuple[str, ...] = ()
    via: str | None = None
    prefix: bool = False
    compression: bool = False
    forms: Forms | None = None
    jax: Jax | None = None
    torch: tuple[TorchMethod, ...] = ()

    @property
    def enum(self) -> str:
        """The C enumerator: ``LP_ALLREDUCE``."""
        return "LP_" + self.name.upper()

    @property
    def mpi_nonblocking(self) -> str:
        return "MPI_I" + self.mpi[len("MPI_"):].lower()

    @property
    def mpi_persistent(self) -> str:
        return self.mpi + "_init"

    @property
    def xla(self) -> bool:
        """Has XLA FFI handlers: its buffers' sizes follow from the call's shapes."""
        return not self.vcounts


# a block each way (allgather, alltoall, gather); scatter's arguments are alg_native.c's
# SCATTER_ARGS (in place, its sendbuf is read from rb and its recvbuf is MPI_IN_PLACE)
_BLOCKS_ARGS = "p->s, p->n, p->t, p->rb, p->n, p->t"

COLLECTIVES: tuple[Collective, ...] = (
    Collective(
        "allreduce", "MPI_Allreduce", "p->s, p->rb, p->n, p->t, p->op, p->comm",
        op=True, shm=True, compression=True,
        jax=Jax(in_place=True, compression=True, transpose=True, doc='''\
Reduce ``x`` over the ranks of ``comm``; every rank gets the result (a new array).

op: ``MPI.SUM`` ... ``MPI.BXOR``, an lpmpi op (``lpmpi.SUM``) or a name (``"sum"``,
``"avg"``).  acc_dtype="float32": float16/bfloat16 summed in float32 (SUM, AVG).
in_place=True: the result takes ``x``'s buffer inside XLA (no new buffer; in a loop that
carries the array, no copy of the result into the carry each iteration), where XLA first
copies ``x`` if it is still needed afterwards or is an argument of the jitted function that
was not donated (``donate_argnums``): faster where ``x`` is dead after the call, slower
where XLA must copy it.  compression: None, "bf16", "int8" or "int4" (float data, SUM or
AVG, host memory): lossy, each element rounded at most twice, the same bits on every rank
(docs/compression.md).

Differentiation (op SUM, as mpi4jax): the JVP of the result is the allreduce of the
tangents; the transpose is the identity on each rank, i.e. the computation after the
allreduce is taken to be replicated (every rank holds the same cotangent of the result and
the loss counts it once), which is what data-parallel code that reduces gradients or
replicated losses means.'''),
        torch=(TorchMethod("allreduce", "allreduce", 0, 0),
               TorchMethod("allreduce_coalesced", "allreduce_coalesced", 0, 0))),
    Collective(
        "reduce", "MPI_Reduce", "p->s, p->rb, p->n, p->t, p->op, p->root, p->comm",
        op=True, root=True, result="root",
        jax=Jax(in_place=True, doc='''\
Reduce ``x`` onto ``root``: the result there, ``x`` unchanged elsewhere (as mpi4jax).
in_place: as :func:`allreduce`'s.'''),
        torch=(TorchMethod("reduce", "reduce", 0, 0),)),
    Collective(
        "bcast", "MPI_Bcast", "p->rb, p->n, p->t, p->root, p->comm",
        root=True, input="root", result="nonroot",
        jax=Jax(in_place=True, doc='''\
``root``'s ``x`` on every rank (a new array elsewhere, ``x`` itself on the root); the
other ranks' ``x`` gives only the shape and dtype.  in_place: as :func:`allreduce`'s.'''),
        torch=(TorchMethod("broadcast", "broadcast", 0, 0),)),
    Collective(
        "allgather", "MPI_Allgather", _BLOCKS_ARGS + ", p->comm",
        rblocks=0, shm=True, compression=True,
        jax=Jax(compression=True, doc='''\
Every rank's ``x`` on every rank: shape ``(P,) + x.shape``, row r is rank r's.
compression: as :func:`allreduce`'s (each element rounded once).'''),
        torch=(TorchMethod("_allgather_base", "_allgather_base"),
               TorchMethod("allgather", "all_gather"),
               TorchMethod("allgather_coalesced", "allgather_coalesced"),
               TorchMethod("allgather_into_tensor_coalesced", "allgather_into_tensor_coalesced"),
               # the Python names torch's dist.* call (aliases of the C++ names above)
               TorchMethod("all_gather_single", "_allgather_base"),
               TorchMethod("all_gather_single_coalesced", "allgather_into_tensor_coalesced"))),
    Collective(
        "reduce_scatter", "MPI_Reduce_scatter_block", "p->s, p->rb, p->n, p->t, p->op, p->comm",
        op=True, sblocks=0, shm=True, compression=True,
        jax=Jax(compression=True, doc='''\
``x`` of shape ``(P, ...)`` reduced over the ranks; rank r gets block r, shape
``x.shape[1:]`` (not in mpi4jax).  compression: as :func:`allreduce`'s.'''),
        torch=(TorchMethod("_reduce_scatter_base", "_reduce_scatter_base"),
               TorchMethod("reduce_scatter", "reduce_scatter"),
               TorchMethod("reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced"),
               TorchMethod("reduce_scatter_single", "_reduce_scatter_base"),
               TorchMethod("reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced"))),
    Collective(
        "alltoall", "MPI_Alltoall", _BLOCKS_ARGS + ", p->comm",
        sblocks=0, rblocks=0,
        forms=Forms(
            params='sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None',
            message='Message.for_blocks(_COLL["alltoall"], sendbuf, recvbuf, None, 0, comm, algorithm, chunk_bytes)',
            doc='''\
Send block j of ``sendbuf`` to rank j; block i of ``recvbuf`` comes from rank i
(MPI_Alltoall).  ``sendbuf`` holds P equal blocks (leading axis P, or 1-D divisible by P).

Returns ``recvbuf`` (new, ``sendbuf``'s shape, when None).  In place: ``sendbuf`` is
``lpmpi.IN_PLACE`` (or ``recvbuf is sendbuf``): ``recvbuf`` holds the blocks to send and
gets the blocks received.

>>> import numpy as np, lpmpi
>>> y = lpmpi.alltoall(np.arange(8.0))   # doctest: +SKIP
'''),
        jax=Jax(doc='''\
``x`` of shape ``(P, ...)``: block j goes to rank j; row i of the result (the same
shape) came from rank i (mpi4jax's ``alltoall``).'''),
        torch=(TorchMethod("alltoall_base", "all_to_all"),
               TorchMethod("all_to_all_single", "all_to_all"))),
    Collective(
        "alltoallv", "MPI_Alltoallv", "p->s, p->sc, p->sd, p->t, p->rb, p->rc, p->rd, p->t, p->comm",
        sblocks=0, rblocks=0, vcounts=("recv", "send"),
        forms=Forms(
            params='sendbuf, sendcounts, recvbuf=None, recvcounts=None, comm=None, *, sdispls=None, rdispls=None, algorithm="auto", chunk_bytes=None',
            message='Message.for_blocks(_COLL["alltoallv"], sendbuf, recvbuf, None, 0, comm, algorithm, chunk_bytes, sendcounts, recvcounts, sdispls, rdispls)',
            doc='''\
Send ``sendcounts[j]`` elements at ``sdispls[j]`` of ``sendbuf`` to rank j; receive
``recvcounts[i]`` elements from rank i at ``rdispls[i]`` of ``recvbuf`` (MPI_Alltoallv).
Counts and displacements in elements; displacements packed when None.

``recvcounts=None`` exchanges the counts first (an alltoall of P ints).  Returns
``recvbuf`` (new, 1-D, when None).  In place: ``sendbuf`` is ``lpmpi.IN_PLACE``; the
blocks to send and to receive are ``recvcounts``/``rdispls`` of ``recvbuf`` (``sendcounts``
when ``recvcounts`` is None).

>>> y = lpmpi.alltoallv(x, [1, 3])   # doctest: +SKIP
'''),
        torch=(TorchMethod("alltoall", "all_to_all"),)),
    Collective(
        "allgatherv", "MPI_Allgatherv", "p->s, p->n, p->t, p->rb, p->rc, p->rd, p->t, p->comm",
        rblocks=0, vcounts=("recv",),
        forms=Forms(
            params='sendbuf, recvbuf=None, counts=None, comm=None, *, displs=None, algorithm="auto", chunk_bytes=None',
            message='Message.for_blocks(_COLL["allgatherv"], sendbuf, recvbuf, None, 0, comm, algorithm, chunk_bytes, counts, None, None, displs)',
            doc='''\
Gather every rank's ``sendbuf`` (rank r's ``counts[r]`` elements) into ``recvbuf`` at
``displs[r]`` on every rank (MPI_Allgatherv); ``displs`` packed when None.

``counts=None`` exchanges the counts first (an allgather of one int).  Returns ``recvbuf``
(new, 1-D, when None).  In place: ``sendbuf`` is ``lpmpi.IN_PLACE`` and each rank's block is
already at its place in ``recvbuf`` (``counts`` must be given).

>>> y = lpmpi.allgatherv(np.ones(rank + 1))   # doctest: +SKIP
''')),
    Collective(
        "reduce_scatter_v", "MPI_Reduce_scatter", "p->s, p->rb, p->sc, p->t, p->op, p->comm",
        op=True, sblocks=0, vcounts=("send",), via="reduce_scatter"),
    Collective(
        "gather", "MPI_Gather", _BLOCKS_ARGS + ", p->root, p->comm",
        root=True, result="root", rblocks=0,
        forms=Forms(
            params='sendbuf, recvbuf=None, root=0, comm=None, *, algorithm="auto", chunk_bytes=None',
            message='Message.for_blocks(_COLL["gather"], sendbuf, recvbuf, None, root, comm, algorithm, chunk_bytes)',
            doc='''\
Gather every rank's ``sendbuf`` into ``recvbuf`` on ``root``: block r is rank r's
(MPI_Gather).

Returns ``recvbuf`` on the root (new, shape ``(P,) + sendbuf.shape``, when None) and None
elsewhere (a ``recvbuf`` passed there is ignored).  In place on the root: ``sendbuf`` is
``lpmpi.IN_PLACE`` and its block is already at its place in ``recvbuf``.

>>> y = lpmpi.gather(np.full(4, rank), root=0)   # doctest: +SKIP
'''),
        jax=Jax(doc='''\
Every rank's ``x`` onto ``root``: there shape ``(P,) + x.shape``, row r is rank r's;
``x`` itself elsewhere (mpi4jax's ``gather``).'''),
        torch=(TorchMethod("gather", "gather"),)),
    Collective(
        "scatter", "MPI_Scatter", "SCATTER_ARGS(p)",
        root=True, input="root", sblocks=0,
        forms=Forms(
            params='sendbuf, recvbuf=None, root=0, comm=None, *, algorithm="auto", chunk_bytes=None',
            message='Message.for_blocks(_COLL["scatter"], sendbuf, recvbuf, None, root, comm, algorithm, chunk_bytes)',
            doc='''\
Send block r of the root's ``sendbuf`` (P blocks) to rank r's ``recvbuf`` (MPI_Scatter).

``sendbuf`` is read on the root only (elsewhere it may be None, or an array shaped as the
root's, from which recvbuf=None is allocated).  Returns ``recvbuf`` (new when None:
``sendbuf.shape[1:]`` when its first axis is the P blocks, else 1-D).  In place on the root:
``recvbuf`` is ``lpmpi.IN_PLACE`` (its block stays in ``sendbuf``, which is returned).

>>> y = lpmpi.scatter(np.arange(8.0).reshape(2, 4), root=0)   # doctest: +SKIP
'''),
        jax=Jax(doc='''\
Block r of the root's ``x`` (shape ``(P, ...)``) to rank r: a new array of shape
``x.shape[1:]`` there; elsewhere ``x`` gives only the shape and dtype of the result (it is
not read), as in mpi4jax's ``scatter``.'''),
        torch=(TorchMethod("scatter", "scatter"),)),
    Collective(
        "scan", "MPI_Scan", "p->s, p->rb, p->n, p->t, p->op, p->comm",
        op=True, prefix=True,
        forms=Forms(
            params='sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None, acc_dtype=None',
            message='Message.for_blocks(_COLL["scan"], sendbuf, recvbuf, op, 0, comm, algorithm, chunk_bytes, None, None, None, None, acc_dtype)',
            doc='''\
Inclusive prefix reduction (MPI_Scan): rank r's ``recvbuf`` gets the reduction of the
``sendbuf`` of ranks 0..r, element by element (``op="avg"``: divided by r + 1).

Returns ``recvbuf`` (new, ``sendbuf``'s shape and dtype, when None).  In place: ``sendbuf``
is ``lpmpi.IN_PLACE`` and ``recvbuf`` holds the input.  acc_dtype: as :func:`allreduce`'s.

>>> y = lpmpi.scan(np.full(4, rank + 1.0))   # doctest: +SKIP
'''),
        jax=Jax(doc='''\
Inclusive prefix reduction: rank r gets the reduction of ``x`` over ranks 0..r (a new
array of ``x``'s shape; mpi4jax's ``scan``).''')),
)

#: the collectives that take ``compression=``
COMPRESSIBLE: tuple[str, ...] = tuple(c.name for c in COLLECTIVES if c.compression)
