"""lpmpi: fast large-message collectives for mpi4py programs by linear pipelining.

>>> import numpy as np, lpmpi
>>> y = lpmpi.allreduce(np.ones(1 << 20, np.float32))   # doctest: +SKIP

Run under ``mpiexec -n P python script.py``.  The reference of every public name, with the
environment variables, is docs/api.md.
"""
from __future__ import annotations

from mpi4py import MPI  # initializes MPI and loads libmpi before the extension

from lpmpi import _abi
from lpmpi._errors import LPError, MismatchError

# the MPI lpmpi was built against and the one mpi4py loaded must be of one ABI family (MPICH's,
# Open MPI's): else an ImportError naming both, before the engine could crash or load a second
# libmpi (lpmpi/_abi.py)
_libmpi = _abi.check(MPI)
try:
    from lpmpi import _core
except ImportError as _e:  # the source tree, not an installed build
    if "_core" not in str(_e):
        raise
    import os as _os

    raise ImportError(
        f"lpmpi's compiled engine (lpmpi._core) is missing: this is the unbuilt source tree at "
        f"{_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))}; install lpmpi "
        f"(pip install .) and run from another directory, or use the console scripts "
        f"(lpmpi-bench, lpmpi-info, lpmpi-tune)") from None
_abi.check_after_core(_libmpi)
del _libmpi
from lpmpi import _env
from lpmpi._core import (
    Op,
    Request,
    algorithms,
    allgather,
    allgather_init,
    allreduce,
    allreduce_init,
    bcast,
    bcast_init,
    dump_flight_recorder,
    iallgather,
    iallreduce,
    ibcast,
    ireduce,
    ireduce_scatter,
    progress_thread,
    reduce,
    reduce_init,
    reduce_scatter,
    reduce_scatter_init,
    select,
    waitall,
)

__version__ = "0.1.0"
__all__ = [
    "AVG",
    "BAND",
    "BOR",
    "BXOR",
    "IN_PLACE",
    "LAND",
    "LOR",
    "LXOR",
    "MAX",
    "MIN",
    "PROD",
    "SUM",
    "LPError",
    "MismatchError",
    "Op",
    "Request",
    "algorithms",
    "allgather",
    "allgather_init",
    "allreduce",
    "allreduce_init",
    "bcast",
    "bcast_init",
    "dump_flight_recorder",
    "iallgather",
    "iallreduce",
    "ibcast",
    "ireduce",
    "ireduce_scatter",
    "progress_thread",
    "reduce",
    "reduce_init",
    "reduce_scatter",
    "reduce_scatter_init",
    "select",
    "waitall",
]

# the collectives whose three functions are generated from the descriptor (lpmpi/_colls.py,
# tools/gen_colls.py):
# alltoall, alltoallv, allgatherv, gather, scatter, scan and their i- and _init forms
globals().update(_core.BLOCK_FUNCTIONS)
__all__ += [name for name in sorted(_core.BLOCK_FUNCTIONS)]

IN_PLACE = MPI.IN_PLACE


SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG
LAND, LOR, LXOR, BAND, BOR, BXOR = Op.LAND, Op.LOR, Op.LXOR, Op.BAND, Op.BOR, Op.BXOR


_env.apply()   # LPMPI_* variables, read once (lpmpi/_env.py)

def _warn_launcher() -> None:
    """A singleton whose environment says another launcher started N > 1 processes (Open MPI's
    mpiexec or srun for an mpi4py built against MPICH): every process would compute alone,
    silently; say so once, at import."""
    if not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() != 1:
        return
    from lpmpi import _launch

    why = _launch.mismatch(1)
    if why:
        import warnings

        warnings.warn(f"lpmpi: {why}", RuntimeWarning, stacklevel=3)


_warn_launcher()

# ---------------------------------------------------------------- tuning tables and explain
# (lpmpi/tables/): the shipped tables, or LPMPI_TUNING_FILE, go into the engine now; a bad
# table gives one TuningWarning and the cost model's defaults, never an exception.
from typing import TYPE_CHECKING

from lpmpi import tables
from lpmpi.tables import TuningWarning

if TYPE_CHECKING:
    from lpmpi._explain import Explanation

__all__ += ["TuningWarning", "autotune_report", "explain"]


def autotune_report(comm: MPI.Comm | None = None) -> dict:
    """What the online tuner (``LPMPI_AUTOTUNE=1``) learned in this process on communicators of
    ``comm``'s size (default ``MPI_COMM_WORLD``), host memory, as a tuning table (a dict in the
    format of ``lpmpi/tables/*.json``: ``LPMPI_TUNING_FILE`` loads it, ``lpmpi-tune --merge``
    folds it into a table), each row with its calls, calls to settle, exploration time, drift
    events and every candidate's median (:func:`lpmpi.autotune.report`).  Local: every rank of
    a communicator learned the same."""
    from lpmpi import autotune

    return autotune.report(comm)


def explain(collective: str, nbytes: int, comm: MPI.Comm | None = None, memory: str = "host",
            acc_dtype: str | None = None, compression: str | None = None, itemsize: int = 4) -> Explanation:
    """What algorithm="auto" picks for this call and why (override, table row or model, with
    every algorithm's predicted time); with ``compression``, the compressed call's schedule and
    its bytes on the wire and across nodes; print it.  See :func:`lpmpi._explain.explain`.

    >>> print(lpmpi.explain("allreduce", 1 << 20))   # doctest: +SKIP
    """
    from lpmpi._explain import explain as _explain  # imported on first use: keeps import fast

    return _explain(collective, nbytes, comm, memory, acc_dtype, compression, itemsize)


from lpmpi import autotune as _autotune

_autotune.install()   # LPMPI_AUTOTUNE_FILE: its rows over the tables, the report written at exit
tables.load()
