"""PyTorch glue: a DistributedDataParallel communication hook on lpmpi, and a gloo process
group set up from the MPI ranks (for DDP's own bookkeeping).

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
import queue
import socket
import threading
from typing import Any, Optional, Union

import torch
import torch.distributed as dist
from mpi4py import MPI

import lpmpi

__all__ = ["HookState", "allreduce_hook", "init_process_group"]


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


class _Completer:
    """One daemon thread that waits for the hook's requests in the order they were started
    (GIL released while it waits) and completes their futures."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def submit(self, req: "lpmpi.Request", fut: torch.futures.Future, value: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lpmpi-ddp-hook",
                                                daemon=True)
                self._thread.start()
        self._q.put((req, fut, value))

    def stop(self) -> None:
        """At exit: let the thread finish its queue and end (a thread left running into the
        interpreter's shutdown may end the process in torch's C++ with std::terminate)."""
        with self._lock:
            t, self._thread = self._thread, None
        if t is not None and t.is_alive():
            self._q.put(None)
            t.join()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            req, fut, value = item
            try:
                req.wait()
            except BaseException as e:  # noqa: BLE001  (the future carries it to DDP's wait)
                fut.set_exception(e)
                continue
            fut.set_result(value)


_completer = _Completer()
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
    _completer.submit(req, fut, grad)
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
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=size)
