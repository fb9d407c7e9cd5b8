"""PyTorch glue: torch.distributed backend "lpmpi" (registered at import; docs/api.md
"torch.distributed backend"), a DistributedDataParallel communication hook on lpmpi, and a
process group set up from the MPI ranks.

The backend's parts, one concern a module: ``_group`` (``Options``, ``ProcessGroupLpmpi`` and
the checks of its arguments), ``_work`` (its Work objects and the thread that completes their
futures, which the hooks here use too), ``_profiler`` (its collectives' torch.profiler records)
and ``_rendezvous`` (creating its groups, ``fill_env_from_mpi``, ``register``).

Backend: under ``mpiexec -n P python train.py``::

    import torch.distributed as dist, lpmpi.torch
    dist.init_process_group("lpmpi")                 # DDP, FSDP2, DTensor, DCP run on it

Hook (with gloo or any other group for DDP's bookkeeping):

Importable only where torch is installed (``pip install 'lpmpi[torch]'``); ``import lpmpi``
never imports it.  Usage, under ``mpiexec -n P python train.py``::

    import lpmpi, lpmpi.torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    lpmpi.torch.init_process_group()                 # gloo, ranks and size from COMM_WORLD
    model = DDP(net)
    model.register_comm_hook(lpmpi.torch.HookState(algorithm="auto"), lpmpi.torch.allreduce_hook)

The hook averages each gradient bucket with ``lpmpi.iallreduce(IN_PLACE, bucket, op="avg")``
and returns a ``torch.futures.Future`` that a background thread completes when the request
does, so backward goes on computing the next buckets meanwhile.  Every rank of the
communicator must train the same model (DDP's rule already): buckets are started in the same
order everywhere.
"""
# No `from __future__ import annotations` here: DDP's register_comm_hook inspects the hook's
# annotations at run time and refuses "dist.GradBucket" as a string.
# ruff: noqa: FA100
import atexit
import os
import socket
from typing import Optional, Union

import torch
import torch.distributed as dist
from mpi4py import MPI

import lpmpi
from lpmpi.torch._group import BACKEND, Options, ProcessGroupLpmpi
from lpmpi.torch._rendezvous import fill_env_from_mpi, register
from lpmpi.torch._work import _completer

__all__ = ["BACKEND", "CompressState", "HookState", "Options", "ProcessGroupLpmpi", "allreduce_hook",
           "compress_hook", "fill_env_from_mpi", "init_process_group"]

register()   # backend "lpmpi" for torch.distributed


class HookState:
    """What ``allreduce_hook`` needs: the communicator (an mpi4py ``Comm``; None: COMM_WORLD),
    the allreduce's ``algorithm`` and ``chunk_bytes`` (as ``lpmpi.allreduce``), and
    ``acc_dtype`` ("float32": float16 and bfloat16 buckets are summed in float32 and rounded
    once; buckets of other dtypes are averaged as they are)."""

    def __init__(self, comm: Optional[MPI.Comm] = None, *, algorithm: str = "auto",
                 chunk_bytes: Union[int, str, None] = None,
                 acc_dtype: Optional[str] = None) -> None:
        self.comm = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(self.comm, MPI.Comm):
            raise TypeError(f"comm must be an mpi4py communicator or None, got "
                            f"{type(comm).__name__}")
        if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
            raise RuntimeError("lpmpi.torch.allreduce_hook completes its futures from a thread: "
                               "MPI must be initialised with MPI_THREAD_MULTIPLE (mpi4py's "
                               "default; see mpi4py.rc.thread_level)")
        _check_world(self.comm)
        if acc_dtype not in (None, "float32", torch.float32):
            raise TypeError(f"acc_dtype must be None or 'float32', got {acc_dtype!r}")
        self.algorithm = algorithm
        self.chunk_bytes = chunk_bytes
        self.acc_dtype = acc_dtype

    def __repr__(self) -> str:
        return (f"HookState(size={self.comm.Get_size()}, algorithm={self.algorithm!r}, "
                f"chunk_bytes={self.chunk_bytes!r}, acc_dtype={self.acc_dtype!r})")


def _torch_world() -> Optional[int]:
    """The number of processes torch.distributed runs (its process group, else torchrun's
    WORLD_SIZE), or None where it says nothing."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    ws = os.environ.get("WORLD_SIZE", "")
    return int(ws) if ws.isdigit() else None


def _check_world(comm: MPI.Comm) -> None:
    """Refuse to average over a communicator that is not torch's world: under torchrun (or any
    launcher other than mpiexec) each process is its own MPI singleton, and an "average" over
    one rank would silently leave every gradient as it was."""
    tw, mw = _torch_world(), MPI.COMM_WORLD.Get_size()
    if tw is None or tw == mw:
        return
    raise RuntimeError(
        f"lpmpi.torch: torch.distributed runs {tw} processes but MPI's world has {mw} "
        f"(this communicator: {comm.Get_size()}); the processes were not started by MPI's launcher "
        f"(torchrun makes each one an MPI singleton), so lpmpi cannot reach the others. Launch "
        f"with `mpiexec -n {tw} python train.py` and call lpmpi.torch.init_process_group() "
        f"instead of torchrun")


atexit.register(_completer.stop)    # before lpmpi's own exit handler (registered earlier)


def allreduce_hook(state: Union[HookState, MPI.Comm, None],
                   bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients averaged over the communicator by lpmpi
    (in place, nonblocking).  ``state``: a :class:`HookState`, or a communicator (None:
    COMM_WORLD) with the default options."""
    st = state if isinstance(state, HookState) else HookState(state)
    grad = bucket.buffer()
    acc = st.acc_dtype if grad.dtype in (torch.float16, torch.bfloat16) else None
    req = lpmpi.iallreduce(lpmpi.IN_PLACE, grad, op="avg", comm=st.comm,
                           algorithm=st.algorithm, chunk_bytes=st.chunk_bytes, acc_dtype=acc)
    fut: torch.futures.Future = torch.futures.Future()
    _completer.submit(req.wait, fut, grad)
    return fut


class CompressState(HookState):
    """What ``compress_hook`` needs: ``compression`` ("bf16", "int8", "int4": the format of
    ``lpmpi.allreduce(..., compression=)``, docs/compression.md), ``error_feedback`` (each
    bucket's loss to its own encoding is kept and added to that bucket the next step, as EF-SGD
    and 1-bit Adam do, so that nothing is lost for good), the communicator (None: COMM_WORLD),
    and ``min_elements``: buckets smaller than this (or not floating) go uncompressed (their
    bytes are few, their parameters often biases and norms).  Works with DDP on any process
    group (gloo, "lpmpi"): the gradients go through lpmpi on ``comm``."""

    def __init__(self, compression: str = "int8", error_feedback: bool = False,
                 comm: Optional[MPI.Comm] = None, *, min_elements: int = 16384) -> None:
        super().__init__(comm)
        if compression not in lpmpi._core.COMPRESSIONS:
            raise ValueError(f"compression must be one of {lpmpi._core.COMPRESSIONS}, got {compression!r}")
        if not isinstance(min_elements, int) or isinstance(min_elements, bool) or min_elements < 0:
            raise ValueError(f"min_elements must be an int >= 0, got {min_elements!r}")
        self.compression = compression
        self.error_feedback = bool(error_feedback)
        self.min_elements = min_elements
        self.residuals: dict = {}        # bucket index -> its residual (error feedback)

    def __repr__(self) -> str:
        return (f"CompressState(compression={self.compression!r}, error_feedback={self.error_feedback}, "
                f"size={self.comm.Get_size()}, min_elements={self.min_elements})")


def compress_hook(state: CompressState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket averaged over the communicator with
    ``lpmpi.iallreduce(..., compression=state.compression)`` (in place, nonblocking), every
    rank the same bits.  With ``error_feedback``, the bucket first gets its residual of the step
    before, and what its encoding loses now (the format's blocks of 256 from the bucket's start)
    is kept for the next step.  Small or non-floating buckets, and float16 / bfloat16 buckets
    with "bf16", go uncompressed.  CPU tensors."""
    if not isinstance(state, CompressState):
        raise TypeError(f"compress_hook needs a CompressState, got {type(state).__name__}")
    grad = bucket.buffer()
    comp: Optional[str] = state.compression
    if (not grad.is_floating_point() or grad.numel() < state.min_elements
            or (comp == "bf16" and grad.element_size() <= 2)):
        comp = None
    if comp is not None and state.error_feedback:
        key = bucket.index()
        res = state.residuals.get(key)
        if res is not None and res.shape == grad.shape and res.dtype == grad.dtype:
            grad.add_(res)
        g = grad.detach().contiguous().numpy()
        dec = lpmpi._core._cz_decode(comp, lpmpi._core._cz_encode(comp, g), g.copy())
        state.residuals[key] = torch.from_numpy(g - dec)
    req = lpmpi.iallreduce(lpmpi.IN_PLACE, grad, op="avg", comm=state.comm, compression=comp)
    fut: torch.futures.Future = torch.futures.Future()
    _completer.submit(req.wait, fut, grad)
    return fut


def init_process_group(comm: Optional[MPI.Comm] = None, backend: str = "gloo",
                       port: Optional[int] = None) -> None:
    """``torch.distributed.init_process_group`` with the ranks and size of ``comm`` (None:
    COMM_WORLD): rank 0 picks a free TCP port (or ``port``) and tells the others; the address
    is ``MASTER_ADDR`` if set, 127.0.0.1 when every rank runs on one host, else rank 0's host
    name.  DDP needs a process group for its own bookkeeping (the parameters' broadcast at
    construction); the gradients then go through the lpmpi hook."""
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    hosts = comm.allgather(socket.gethostname())
    addr = os.environ.get("MASTER_ADDR") or ("127.0.0.1" if len(set(hosts)) == 1 else hosts[0])
    if rank == 0 and port is None:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port, root=0)
    kw = {"pg_options": Options(comm)} if backend == BACKEND else {}
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=size, **kw)
