"""lpmpi: fast large-message collectives for mpi4py programs by linear pipelining.

>>> import numpy as np, lpmpi
>>> y = lpmpi.allreduce(np.ones(1 << 20, np.float32))   # doctest: +SKIP

Run under ``mpiexec -n P python script.py``.  See API.md for the contract.
"""
from __future__ import annotations

import os
import warnings

from mpi4py import MPI  # initializes MPI and loads libmpi before the extension

from lpmpi._errors import LPError, MismatchError
from lpmpi._ops import Op
from lpmpi import _core
from lpmpi._core import allreduce, reduce, bcast, algorithms, select

__version__ = "0.1.0"
__all__ = [
    "allreduce", "reduce", "bcast", "algorithms", "select", "IN_PLACE", "Op",
    "SUM", "PROD", "MAX", "MIN", "AVG", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
    "LPError", "MismatchError",
]

IN_PLACE = MPI.IN_PLACE


SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG
LAND, LOR, LXOR, BAND, BOR, BXOR = Op.LAND, Op.LOR, Op.LXOR, Op.BAND, Op.BOR, Op.BXOR


def _env_int(name: str, default: int = 0) -> int:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        n = int(value, 0)
        if n <= 0:
            raise ValueError
        return n
    except ValueError:
        warnings.warn(f"lpmpi: ignoring {name}={value!r} (not a positive integer)", stacklevel=3)
        return default


def _apply_environment() -> None:
    """Read LPMPI_* knobs once, at import (like NCCL reads NCCL_* at init)."""
    def flag(name: str) -> bool:
        return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no", "off")

    _core._configure(_env_int("LPMPI_MAX_MSG_BYTES"), _env_int("LPMPI_WINDOW"), flag("LPMPI_CHECK"),
                     flag("LPMPI_DEBUG"))
    alg = os.environ.get("LPMPI_ALGORITHM", "").strip() or None
    chunk = _env_int("LPMPI_CHUNK_BYTES") or None
    if alg == "auto":
        alg = None
    if alg is not None and not any(alg in algorithms(c) for c in ("allreduce", "reduce", "bcast")):
        warnings.warn(f"lpmpi: ignoring LPMPI_ALGORITHM={alg!r} (unknown algorithm)", stacklevel=3)
        alg = None
    for coll in ("allreduce", "reduce", "bcast"):
        # an algorithm that a collective lacks (ring for bcast) leaves that collective on auto
        _core.set_override(coll, alg if alg in algorithms(coll) else None, chunk)


_apply_environment()

# ---------------------------------------------------------------- tuning tables and explain
# (lpmpi/tables.py): the shipped tables, or LPMPI_TUNING_FILE, go into the engine now; a bad
# table gives one TuningWarning and the cost model's defaults, never an exception.
from typing import TYPE_CHECKING

from lpmpi import tables
from lpmpi.tables import TuningWarning

if TYPE_CHECKING:
    from lpmpi._explain import Explanation

__all__ += ["TuningWarning", "explain"]


def explain(collective: str, nbytes: int, comm: MPI.Comm | None = None, memory: str = "host") -> Explanation:
    """What algorithm="auto" picks for this call and why (override, table row or model, with
    every algorithm's predicted time); print it.  See :func:`lpmpi._explain.explain`.

    >>> print(lpmpi.explain("allreduce", 1 << 20))   # doctest: +SKIP
    """
    from lpmpi._explain import explain as _explain  # imported on first use: keeps import fast

    return _explain(collective, nbytes, comm, memory)


tables.load()
