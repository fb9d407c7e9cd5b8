"""JAX glue: lpmpi's collectives as JAX primitives that run inside ``jax.jit``.

Call-compatible with mpi4jax 0.9 for the collectives mpi4jax has: code written for it switches
with one import (``import lpmpi.jax as mpi4jax`` or ``from lpmpi.jax import allreduce``)::

    import jax, jax.numpy as jnp
    from mpi4py import MPI
    import lpmpi.jax as lj

    @jax.jit
    def step(g):
        return lj.allreduce(g, MPI.SUM) / MPI.COMM_WORLD.Get_size()   # or op="avg"

Each collective is a JAX primitive: abstract evaluation, eager execution, ``jax.vmap``, an
XLA FFI custom call (the handlers of src/ffi/xla_ffi.c, in the engine's own extension: one state
with the rest of lpmpi) that carries an ordered effect, so the collectives of a program run in
program order and are never dropped, duplicated or reordered; ``allreduce`` with ``SUM`` has
JVP and transpose rules (see :func:`allreduce`).  Every argument is checked when the call is
traced, on every rank, before anything runs, and the communicator is prepared then (its
first use is collective).  Importable only where JAX is installed (``pip install
'lpmpi[jax]'``); ``import lpmpi`` never imports it.

The default communicator (``comm=None``) is :func:`default_comm`, a clone of
``MPI.COMM_WORLD`` made once, as mpi4jax does: JAX runs jitted code asynchronously, and lpmpi's
calls on one communicator must start in the same order on every rank, so lpmpi.jax's
collectives get a communicator the program's eager lpmpi calls do not use.  A communicator you
pass must likewise not be used by eager lpmpi calls while jitted collectives on it may be in
flight (``jax.block_until_ready`` first).

JAX versions: 0.9 and 0.10 (the jaxlib wheels for this Python); JAX internals used are
gathered in ``_compat`` below.
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax.interpreters import ad, batching, mlir
from mpi4py import MPI

from lpmpi import _colls, _core, engine



# ---- what differs across JAX versions (0.9, 0.10): private names, one place ----
class _compat:
    from jax.extend.core import Primitive

    try:                                   # jax >= 0.11 re-exports it publicly
        from jax.ffi import abstract_token
    except ImportError:                    # 0.9, 0.10 (jax.core's is deprecated in 0.10)
        from jax._src.core import abstract_token
    try:
        from jax._src.core import ShapedArray
    except ImportError:                    # pragma: no cover - older layouts
        from jax.core import ShapedArray
    from jax._src import effects
    from jax._src.dispatch import apply_primitive


class _LpmpiEffect(_compat.effects.Effect):
    """The ordered effect every lpmpi.jax collective carries (its token threads program order
    through XLA)."""

    def __repr__(self) -> str:
        return "LpmpiCollective"


for _kind in ("lowerable_effects", "ordered_effects", "control_flow_allowed_effects",
              "custom_derivatives_allowed_effects", "remat_allowed_effects"):
    getattr(_compat.effects, _kind).add_type(_LpmpiEffect)
_EFFECT = _LpmpiEffect()


# ---- the handlers, registered with XLA once ----
_TARGET = "lpmpi_{}"
for _name, _capsule in _core._xla_targets().items():
    jax.ffi.register_ffi_target(_TARGET.format(_name), _capsule, platform="cpu")
_CUDA_TARGETS = _core._xla_targets(cuda=True)      # empty unless lpmpi was built with CUDA
_ON_CUDA = False
if _CUDA_TARGETS:
    try:
        for _name, _capsule in _CUDA_TARGETS.items():
            jax.ffi.register_ffi_target(_TARGET.format(_name), _capsule, platform="CUDA")
        _ON_CUDA = True
    except Exception:  # noqa: BLE001 - a jaxlib without CUDA (its error type varies): CPU only
        _ON_CUDA = False


_default: MPI.Intracomm | None = None


def default_comm() -> MPI.Intracomm:
    """lpmpi.jax's communicator where ``comm=None``: a clone of ``MPI.COMM_WORLD`` made on first
    use (collective then)."""
    global _default
    if _default is None:
        _default = MPI.COMM_WORLD.Clone()
    return _default


def _params(coll: str, x, op, root, comm, algorithm, chunk_bytes, acc_dtype,
            compression=None) -> dict:
    """Checks every argument (lpmpi's rules and messages) and prepares comm: the primitive's
    parameters, all ints (hashable)."""
    h, size, rank, opc, r, alg, chunk, acc, comp = _core._xla_call(
        coll, np.dtype(x.dtype).name, op, root, default_comm() if comm is None else comm,
        algorithm, chunk_bytes, acc_dtype, compression)
    return {"comm": h, "size": size, "rank": rank, "op": opc, "root": r, "alg": alg,
            "chunk": chunk, "acc": acc, "comp": comp}


def _array(x, name: str = "x"):
    """x as a JAX array (Python scalars and numpy arrays are converted; tracers are kept)."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        return x
    try:
        return jax.numpy.asarray(x)
    except TypeError as e:
        raise TypeError(f"{name} must be a JAX array, a numpy array or a Python scalar, got "
                        f"{type(x).__name__}") from e


def _flag(v) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"in_place must be a bool, got {type(v).__name__}")
    return v


# ---- one primitive per collective ----
def _out_aval(coll: str, x, size: int, rank: int, root: int):
    """The result's shape from the collective's row and this rank's role (mpi4jax's shapes): a
    buffer of P blocks is x's leading axis (reduce_scatter, alltoall, scatter's root) or gets
    one (allgather, gather's root); a side this rank neither reads nor writes is one block
    (scatter's input, gather's result off the root: x's shape)."""
    row = engine.collective_info(coll)
    reads, gets = row.brings_input(rank, root), row.gets_result(rank, root)
    if reads and row.send_blocks == 0 and (not x.shape or x.shape[0] != size):
        raise ValueError(f"{coll.capitalize()} input must have shape (nproc, ...), i.e. (P, ...) with "
                         f"P = {size}, one block per rank; got {tuple(x.shape)}")
    block = tuple(x.shape[1:]) if reads and row.send_blocks == 0 else tuple(x.shape)
    shape = ((size,) + block) if gets and row.recv_blocks == 0 else block
    return _compat.ShapedArray(shape, x.dtype)


def _make(coll: str):
    p = _compat.Primitive(f"lpmpi_{coll}")
    target = _TARGET.format(coll)

    def abstract(x, *, transpose=False, size, rank, root, **_):
        return _out_aval(coll, x, size, rank, root), (set() if transpose else {_EFFECT})

    def lower(ctx, x, *, transpose=False, in_place=False, comm, op, root, alg, chunk, acc, comp,
              size, rank):
        if transpose:                     # allreduce's transpose: the identity (see allreduce)
            return [x]
        # in_place: the result in the input's buffer (XLA copies the input first where it is
        # still needed afterwards)
        alias = {"operand_output_aliases": {0: 0}} if in_place else {}
        token = ctx.tokens_in.get(_EFFECT)
        tok = _compat.abstract_token
        rule = jax.ffi.ffi_lowering(target, has_side_effect=True, **alias)
        # comp only where compressed: an uncompressed call lowers as it did before compression
        extra = {"comp": np.int64(comp)} if comp else {}
        outs = list(rule(ctx.replace(avals_in=(*ctx.avals_in, tok),
                                     avals_out=(*ctx.avals_out, tok)),
                         x, token, comm=np.int64(comm), op=np.int64(op), root=np.int64(root),
                         alg=np.int64(alg), chunk=np.int64(chunk), acc=np.int64(acc), **extra))
        ctx.set_tokens_out(mlir.TokenSet({_EFFECT: outs.pop()}))
        return outs

    p.def_impl(functools.partial(_compat.apply_primitive, p))
    p.def_effectful_abstract_eval(abstract)
    mlir.register_lowering(p, lower, platform="cpu")
    if _ON_CUDA:                          # jaxlib took the CUDA targets: it has the platform
        mlir.register_lowering(p, lower, platform="cuda")

    def batch(args, dims, **params):
        (x,), (d,) = args, dims
        row = engine.collective_info(coll)
        gets = row.gets_result(params["rank"], params["root"])
        p_blocks = row.recv_blocks == 0 and gets        # the result gets a leading axis of P
        if row.send_blocks == 0 and row.brings_input(params["rank"], params["root"]):
            # blocks along axis 0: the batch goes inside each block
            return p.bind(jax.numpy.moveaxis(x, d, 1), **params), (1 if p_blocks else 0)
        out = p.bind(x, **params)
        return out, (d + 1 if p_blocks else d)

    batching.primitive_batchers[p] = batch
    return p


# every collective with an XLA handler (src/ffi/xla_ffi.c: those without per-rank counts)
_P = {c: _make(c) for c in _core._xla_targets()}
_SUM = _core.Op.SUM.value


def _allreduce_jvp(primals, tangents, **params):
    if params["op"] != _SUM:
        raise NotImplementedError("lpmpi.jax.allreduce is differentiable for op SUM only")
    (x,), (t,) = primals, tangents
    p = _P["allreduce"]
    return p.bind(x, **params), p.bind(ad.instantiate_zeros(t), **params)


def _allreduce_transpose(ct, x, **params):
    if params["op"] != _SUM:
        raise NotImplementedError("lpmpi.jax.allreduce is transposable for op SUM only")
    params = dict(params, transpose=not params.get("transpose", False))
    return (_P["allreduce"].bind(ad.instantiate_zeros(ct), **params),)


ad.primitive_jvps[_P["allreduce"]] = _allreduce_jvp
ad.primitive_transposes[_P["allreduce"]] = _allreduce_transpose


# ---- the calls (mpi4jax 0.9's signatures, plus lpmpi's keywords) ----
# BEGIN GENERATED by tools/gen_colls.py from lpmpi/_colls.py: do not edit
def allreduce(x: Any, op: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
              chunk_bytes: int | None = None, acc_dtype: Any = None, in_place: bool = False,
              compression: str | None = None):
    """Reduce ``x`` over the ranks of ``comm``; every rank gets the result (a new array).

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
    replicated losses means.
    """
    x = _array(x)
    params = _params("allreduce", x, op, 0, comm, algorithm, chunk_bytes, acc_dtype, compression)
    return _P["allreduce"].bind(x, transpose=False, in_place=_flag(in_place), **params)


def reduce(x: Any, op: Any, root: int, *, comm: MPI.Intracomm | None = None,
           algorithm: str = "auto", chunk_bytes: int | None = None, acc_dtype: Any = None,
           in_place: bool = False):
    """Reduce ``x`` onto ``root``: the result there, ``x`` unchanged elsewhere (as mpi4jax).
    in_place: as :func:`allreduce`'s.
    """
    x = _array(x)
    params = _params("reduce", x, op, root, comm, algorithm, chunk_bytes, acc_dtype)
    res = _P["reduce"].bind(x, in_place=_flag(in_place), **params)
    return res if params["rank"] == params["root"] else x


def bcast(x: Any, root: int, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
          chunk_bytes: int | None = None, in_place: bool = False):
    """``root``'s ``x`` on every rank (a new array elsewhere, ``x`` itself on the root); the
    other ranks' ``x`` gives only the shape and dtype.  in_place: as :func:`allreduce`'s.
    """
    x = _array(x)
    params = _params("bcast", x, None, root, comm, algorithm, chunk_bytes, None)
    res = _P["bcast"].bind(x, in_place=_flag(in_place), **params)
    return x if params["rank"] == params["root"] else res


def allgather(x: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
              chunk_bytes: int | None = None, compression: str | None = None):
    """Every rank's ``x`` on every rank: shape ``(P,) + x.shape``, row r is rank r's.
    compression: as :func:`allreduce`'s (each element rounded once).
    """
    x = _array(x)
    params = _params("allgather", x, None, 0, comm, algorithm, chunk_bytes, None, compression)
    return _P["allgather"].bind(x, **params)


def reduce_scatter(x: Any, op: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
                   chunk_bytes: int | None = None, acc_dtype: Any = None,
                   compression: str | None = None):
    """``x`` of shape ``(P, ...)`` reduced over the ranks; rank r gets block r, shape
    ``x.shape[1:]`` (not in mpi4jax).  compression: as :func:`allreduce`'s.
    """
    x = _array(x)
    params = _params("reduce_scatter", x, op, 0, comm, algorithm, chunk_bytes, acc_dtype, compression)
    return _P["reduce_scatter"].bind(x, **params)


def alltoall(x: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
             chunk_bytes: int | None = None):
    """``x`` of shape ``(P, ...)``: block j goes to rank j; row i of the result (the same
    shape) came from rank i (mpi4jax's ``alltoall``).
    """
    x = _array(x)
    params = _params("alltoall", x, None, 0, comm, algorithm, chunk_bytes, None)
    return _P["alltoall"].bind(x, **params)


def gather(x: Any, root: int, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
           chunk_bytes: int | None = None):
    """Every rank's ``x`` onto ``root``: there shape ``(P,) + x.shape``, row r is rank r's;
    ``x`` itself elsewhere (mpi4jax's ``gather``).
    """
    x = _array(x)
    params = _params("gather", x, None, root, comm, algorithm, chunk_bytes, None)
    res = _P["gather"].bind(x, **params)
    return res if params["rank"] == params["root"] else x


def scatter(x: Any, root: int, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
            chunk_bytes: int | None = None):
    """Block r of the root's ``x`` (shape ``(P, ...)``) to rank r: a new array of shape
    ``x.shape[1:]`` there; elsewhere ``x`` gives only the shape and dtype of the result (it is
    not read), as in mpi4jax's ``scatter``.
    """
    x = _array(x)
    params = _params("scatter", x, None, root, comm, algorithm, chunk_bytes, None)
    return _P["scatter"].bind(x, **params)


def scan(x: Any, op: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
         chunk_bytes: int | None = None, acc_dtype: Any = None):
    """Inclusive prefix reduction: rank r gets the reduction of ``x`` over ranks 0..r (a new
    array of ``x``'s shape; mpi4jax's ``scan``).
    """
    x = _array(x)
    params = _params("scan", x, op, 0, comm, algorithm, chunk_bytes, acc_dtype)
    return _P["scan"].bind(x, **params)
# END GENERATED


# ---- made of the calls above ----
def allgatherv(x: Any, counts: Any, *, comm: MPI.Intracomm | None = None, algorithm: str = "auto",
               chunk_bytes: int | None = None):
    """Every rank's ``x`` (rank r's: ``counts[r]`` rows along axis 0, the same trailing shape and
    dtype on every rank) concatenated along axis 0 on every rank: shape
    ``(sum(counts),) + x.shape[1:]``, rank 0's rows first.  ``counts``: the P row counts, every
    rank the same, static (they give the result's shape; a rank whose ``x`` does not have
    ``counts[rank]`` rows raises when the call is traced).  Runs as :func:`allgather` of the
    blocks padded to the largest count, then the rows kept (a static slice): the padding crosses
    the wire where the counts differ."""
    x = _array(x)
    c = default_comm() if comm is None else comm
    if not isinstance(c, MPI.Comm):
        raise TypeError(f"comm must be an mpi4py communicator, got {type(c).__name__}")
    size, rank = c.Get_size(), c.Get_rank()
    try:
        counts = [int(v) for v in counts]
    except TypeError:
        raise TypeError(f"counts must be a sequence of {size} ints, got {type(counts).__name__}") from None
    if len(counts) != size or min(counts, default=0) < 0:
        raise ValueError(f"counts must hold {size} non-negative ints (one per rank), got {counts}")
    if not x.shape or x.shape[0] != counts[rank]:
        raise ValueError(f"allgatherv: x must have counts[{rank}] = {counts[rank]} rows along axis 0, "
                         f"got shape {tuple(x.shape)}")
    most = max(counts)
    pad = jax.numpy.pad(x, [(0, most - x.shape[0])] + [(0, 0)] * (x.ndim - 1))
    blocks = allgather(pad, comm=comm, algorithm=algorithm, chunk_bytes=chunk_bytes)   # (P, most, ...)
    return jax.numpy.concatenate([blocks[r, :counts[r]] for r in range(size)], axis=0)


#: the collectives' functions (the descriptor's, then those made of them) and default_comm
__all__ = sorted([c.name for c in _colls.COLLECTIVES if c.jax] + ["allgatherv", "default_comm"])
