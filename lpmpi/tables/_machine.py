"""This machine and a table's: the fingerprint of a communicator on this machine (MPI
library, P, ranks per node, nodes, memory, CPU model, the MPI library's own tuning variables)
and the tests that decide whether a table measured elsewhere applies here (same library name,
same CPU model for host tables, same MPI tuning variables).

The matching policy is in the package's docstring (:mod:`lpmpi.tables`); the selection of the
tables at import that applies it, in ``lpmpi/tables/__init__.py``.  Part of the package
:mod:`lpmpi.tables`, which re-exports every name defined here.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from lpmpi.tables._schema import Table


# ----------------------------------------------------------------------------- fingerprint


def library_version_line() -> str:
    """First line of ``MPI.Get_library_version()``, whitespace collapsed (callable before MPI_Init;
    Open MPI's string ends in a NUL, dropped)."""
    from mpi4py import MPI

    lines = MPI.Get_library_version().replace("\x00", "").strip().splitlines()
    return " ".join(lines[0].split()) if lines else "unknown"


def library_name(line: str) -> str:
    """The MPI library's name without its version: "MPICH Version: 5.0.2" -> "MPICH".

    >>> library_name("Open MPI v5.0.3, package: Open MPI x Distribution")
    'Open MPI'
    """
    words: list[str] = []
    for word in line.split():
        bare = word.rstrip(",:;")
        version = bare[:1].isdigit() or (bare[:1] in "vV" and bare[1:2].isdigit())
        if not bare or version or bare.lower() in ("version", "release"):
            break
        words.append(bare)
        if bare != word:  # "Name," or "Name:" ends the name
            break
    return " ".join(words) or line.strip()


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's processor string)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


#: the MPI libraries' own collective tuning variables (Intel MPI's I_MPI_ADJUST_* / I_MPI_COLL_*,
#: Open MPI's coll MCA parameters, MPICH's algorithm CVARs): a table measured under one setting
#: of them is not a table for another (issue 50: under I_MPI_ADJUST_ALLREDUCE=8 the shipped
#: table's rows lost to Intel's own call by up to 0.54x)
_MPI_TUNING = re.compile(r"^(I_MPI_ADJUST_|I_MPI_COLL_|OMPI_MCA_coll_|MPIR_CVAR_(\w*_ALGORITHM$|DEVICE_COLLECTIVES$|COLL_))")


def mpi_tuning(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The MPI library's collective tuning variables set in ``environ`` (default: this
    process's environment), sorted: the fingerprint's ``mpi_tuning``."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in sorted(env) if _MPI_TUNING.match(k)}


def tuned_alike(table: Table, tuning: Mapping[str, str]) -> bool:
    """True when ``table`` was measured under the MPI tuning variables ``tuning`` (a table
    without ``mpi_tuning`` was measured with none set)."""
    return dict(table.fingerprint.get("mpi_tuning") or {}) == dict(tuning)


def fingerprint(comm: Any = None, memory: str = "host") -> dict[str, Any]:
    """The fingerprint of a communicator on this machine (collective: call on every rank)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        per_node = comm.allreduce(node.Get_size(), op=MPI.MAX)
        nodes = comm.allreduce(1 if node.Get_rank() == 0 else 0)
    finally:
        node.Free()
    return {
        "mpi_library": library_version_line(),
        "nprocs": comm.Get_size(),
        "ranks_per_node": per_node,
        "nodes": nodes,
        "memory": memory,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "mpi_tuning": mpi_tuning(),
    }


def compare_fingerprint(fp: Mapping[str, Any], here: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """``(applies, differences)``: a table applies when its MPI library's name is the running
    one's; the other fields present in both (version, CPU, P, ranks per node) are listed when
    they differ."""
    applies = library_name(str(fp.get("mpi_library", ""))) == library_name(str(here.get("mpi_library", "")))
    diffs = [f"{k}: table {fp[k]!r}, here {here[k]!r}"
             for k in ("mpi_library", "nprocs", "ranks_per_node", "memory", "cpu_model")
             if k in fp and k in here and fp[k] != here[k]]
    return applies, diffs


def measured_here(table: Table, cpu: str) -> bool:
    """True unless ``table`` is a host-memory table whose fingerprint names another CPU model
    than ``cpu`` (a table without ``cpu_model`` makes no claim and applies)."""
    fp_cpu = table.fingerprint.get("cpu_model")
    return table.memory != "host" or not isinstance(fp_cpu, str) or fp_cpu == cpu
