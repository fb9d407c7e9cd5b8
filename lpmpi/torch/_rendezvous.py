"""Creating the process groups of backend "lpmpi" and registering it with torch.distributed
(``lpmpi.torch`` calls ``register()`` at import).

``_create`` is the backend's creator: the default group (and a group of every rank, or one given
its communicator in ``Options``) runs on a duplicate of the MPI communicator, whose size and
ranks must be torch's; a subgroup (``new_group``) is made by its members from the default
group's communicator with ``MPI_Comm_create_group``.  The group's timeout becomes lpmpi's
watchdog.

Rendezvous without MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE: ``register()`` also wraps torch's
env:// rendezvous so that, under ``mpiexec``, the variables it needs are filled from MPI where
they are missing (``fill_env_from_mpi``).
"""

from __future__ import annotations

import datetime
import os
import socket
import zlib

import torch.distributed as dist
from mpi4py import MPI

import lpmpi
from lpmpi.torch import _group
from lpmpi.torch._group import BACKEND, Options, ProcessGroupLpmpi

# ---- creating groups ----


def _seconds(timeout) -> float:
    if timeout is None:
        return 0.0
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _watchdog(timeout: float) -> float:
    """The group's timeout as lpmpi's watchdog, unless LPMPI_TIMEOUT set one or the timeout is
    torch's default (30 min, which would only make waits poll); returns the seconds used."""
    from torch.distributed.constants import default_pg_timeout

    from lpmpi import _env
    env = _env.read().timeout
    if env > 0:
        return env
    if timeout <= 0 or abs(timeout - default_pg_timeout.total_seconds()) < 1e-6:
        return 0.0
    lpmpi._core._configure_timeout(timeout)
    return timeout


def _create(backend_opts, options) -> ProcessGroupLpmpi:
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"backend 'lpmpi': pg_options must be lpmpi.torch.Options, got "
                        f"{type(options).__name__}")
    opts = options if options is not None else Options()
    rank, size = backend_opts.group_rank, backend_opts.group_size
    ranks = list(backend_opts.global_ranks_in_group or [])
    timeout = _watchdog(_seconds(backend_opts.timeout))
    base = _group._base_comm               # the default group's communicator, once made
    world = opts.comm if opts.comm is not None else (base or MPI.COMM_WORLD)
    whole = not ranks or ranks == list(range(world.Get_size()))
    if base is None or opts.comm is not None or whole:
        # the default group, a group of every rank, or one given its communicator: it is torch's
        if world.Get_size() != size or world.Get_rank() != rank:
            raise RuntimeError(
                f"backend 'lpmpi': torch.distributed runs {size} processes (this one rank {rank}) "
                f"but the MPI communicator has {world.Get_size()} (this one rank {world.Get_rank()}). "
                f"The processes were not started by MPI's launcher (torchrun makes each an MPI "
                f"singleton), or RANK/WORLD_SIZE disagree with MPI's. Launch with "
                f"`mpiexec -n {size} python train.py` (no torchrun), and leave RANK and WORLD_SIZE "
                f"unset or equal to MPI's")
        comm = world.Dup()
        if base is None and opts.comm is None:
            _group._base_comm = comm
        return ProcessGroupLpmpi(comm, opts, timeout)
    # a subgroup: its members (the only ranks torch calls this on) make a communicator
    grp = base.Get_group().Incl(ranks)
    tag = zlib.crc32(str(backend_opts.group_id).encode()) & 0x7FFF
    comm = base.Create_group(grp, tag)
    grp.Free()
    if comm.Get_rank() != rank or comm.Get_size() != size:
        raise RuntimeError(f"backend 'lpmpi': subgroup {ranks}: MPI rank {comm.Get_rank()} of "
                           f"{comm.Get_size()}, torch's {rank} of {size}")
    return ProcessGroupLpmpi(comm, opts, timeout)


# ---- rendezvous without MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE ----

_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")


def fill_env_from_mpi(comm: MPI.Intracomm | None = None) -> list[str]:
    """Set the variables torch's env:// rendezvous reads from MPI where they are missing: RANK
    and WORLD_SIZE from ``comm`` (None: COMM_WORLD), MASTER_ADDR (127.0.0.1 when every rank
    runs on one host, else rank 0's host name) and a free MASTER_PORT that rank 0 picks and
    broadcasts.  Collective over comm when MASTER_ADDR or MASTER_PORT is missing.  Returns the
    names it set."""
    comm = MPI.COMM_WORLD if comm is None else comm
    env = os.environ
    before = {v for v in _ENV if env.get(v)}
    env.setdefault("RANK", str(comm.Get_rank()))
    env.setdefault("WORLD_SIZE", str(comm.Get_size()))
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return [v for v in _ENV if v not in before]
    hosts = comm.allgather(socket.gethostname())
    addr = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
    port = None
    if comm.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
    addr, port = comm.bcast((env.get("MASTER_ADDR") or addr, env.get("MASTER_PORT") or port), root=0)
    env.setdefault("MASTER_ADDR", str(addr))
    env.setdefault("MASTER_PORT", str(port))
    return [v for v in _ENV if v not in before]


def _env_handler_with_mpi(original):
    """torch's env:// rendezvous, with the missing variables filled from MPI first (only where
    some are missing: under torchrun or with them all set, torch's handler runs untouched)."""
    def handler(url: str, **kwargs):
        if not any(not os.environ.get(v) for v in _ENV) or "rank=" in url:
            yield from original(url, **kwargs)
            return
        filled = fill_env_from_mpi()
        try:                            # the store is made at the first step
            it = original(url, **kwargs)
            first = next(it)
        finally:                        # a later init_process_group picks a fresh port
            for v in filled:
                os.environ.pop(v, None)
        yield first
        yield from it
    handler.__lpmpi__ = True
    return handler


def register() -> None:
    """Register backend "lpmpi" (CPU) and the MPI fill-in of env:// (idempotent)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
    import importlib
    rdzv = importlib.import_module("torch.distributed.rendezvous")   # the module, not the function
    h = rdzv._rendezvous_handlers.get("env")
    if h is not None and not getattr(h, "__lpmpi__", False):
        rdzv._rendezvous_handlers["env"] = _env_handler_with_mpi(h)
