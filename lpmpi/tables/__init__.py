"""Tuning tables: versioned JSON files that tell "auto" which algorithm and chunk size to use.

A table is written by the tuner (``lpmpi-tune``) for one MPI library, process count P and
memory kind, and read at ``import lpmpi``: the shipped ones in ``lpmpi/tables/*.json``, or the
file(s) named by ``LPMPI_TUNING_FILE`` instead (several separated by ``os.pathsep``, ``:`` on
Linux; ``LPMPI_TUNING_FILE=none``: no table at all).
Never pickle: plain JSON, validated on load.

Schema (version 1)::

    {
      "lpmpi_table_version": 1,
      "fingerprint": {"mpi_library": "MPICH Version: 5.0.2", "nprocs": 2, "ranks_per_node": 2,
                      "memory": "host", "cpu_model": "Intel(R) Xeon(R) Processor", ...},
      "tuner": {"command": "...", "settings": {...}, ...},          # free-form, informative
      "collectives": {
        "allreduce": [
          {"lo": 0, "hi": 1448, "algorithm": "native", "chunk_bytes": null,
           "measured": [{"nbytes": 8, "time_us": 5.1, "native_us": 5.1}, ...]},
          {"lo": 1448, "hi": "inf", "algorithm": "lp", "chunk_bytes": 262144, "measured": [...]}
        ],
        "bcast": [...], "reduce": [...]
      }
    }

A row covers messages of ``lo <= nbytes < hi`` bytes (``"inf"`` allowed as ``hi``); rows of a
collective are sorted and do not overlap.  ``chunk_bytes`` is a positive int or null (null: the
model's chunk); algorithms without chunks ignore it.  Rows of a ``"memory": "cuda"`` table may
carry ``staging_buffers``: an int in 1..64 (chunks in flight per direction of the staged device
pipeline, see ``_core.set_staging_buffers``) or null / absent (the process default); it is kept
for chunked algorithms of cuda tables and ignored elsewhere.  Rows of a host table may carry
``transport``: "mpi", "shm" or "cma" (the node-local transport between the ranks of a node, for
algorithms that have one, :func:`lpmpi.engine.has_transports`: the ring allreduce) or null /
absent (the model's rule by message size); it is kept where it applies and ignored elsewhere.
Both are part of the row: the table's hash (compared across ranks) covers them.

A table whose fingerprint has ``"acc_dtype": "float32"`` (host memory only) was tuned on calls
with acc_dtype (``lpmpi-tune --dtype bfloat16 --acc-dtype float32``): acc_dtype is part of the
dtype there, its rows apply to such calls only, and ``lo``/``hi`` are bytes of the 16-bit
message (``chunk_bytes`` are bytes of the float32 copy the engine runs on).  An acc_dtype call
without such a row follows the plain rows at the float32 copy's size.

Matching policy.  Rows are keyed by P in the engine, so a table for P = 2 applies only to
communicators of 2 ranks; other sizes use the cost model.  A table from another MPI library
(its name, e.g. "MPICH" or "Open MPI", differs from the running one's) is foreign: ignored,
with one warning when ``LPMPI_TUNING_FILE`` names it; shipped tables of other libraries are
passed over silently (``info`` lists them), and a warning comes only when no shipped table is
for the running library.  A host-memory table measured on another CPU model (its fingerprint's
``cpu_model`` differs from this machine's) is not applied either: a table's choices of chunk and
node-local transport are measurements of that machine's caches and memory, and on another
model they can lose to the MPI library (a Xeon table's 64 MiB row ran 1.6x slower than the
cost model's choice on an AMD EPYC, docs/performance-archive.md).  Shipped tables of other CPU models
pass silently (``info`` lists them, and "auto" uses the cost model where no shipped table was
measured on this CPU); one named by ``LPMPI_TUNING_FILE`` applies anyway (the user asked for
it) and ``info`` reports the difference.  Device-memory tables are not keyed by the CPU.  A
different library version or ranks-per-node still applies and is reported by :func:`status`
(``python -m lpmpi info``).  Problems (corrupt file, future
version, foreign library, invalid rows) give exactly one warning at import, never an exception;
invalid rows are skipped and the model covers their sizes.

The package (``lpmpi/tables/``) is also the folder of the shipped tables (``*.json``, package
data).  Its code, one concern a file: ``_schema.py`` (the format: constants, :class:`Row`,
:class:`Table`, validation, :func:`read_table`), ``_machine.py`` (this machine's fingerprint
and whether a table was measured on it), ``_write.py`` (rows from the tuner's choices, the
document, :func:`write_table`), and this file (loading at import: selecting the tables that
apply, pushing their rows into the engine, :func:`status`, :func:`describe`).  Every name is
imported from ``lpmpi.tables``; the private modules are not an interface.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lpmpi import _env
# the names of the private modules, all of them importable from here as before the split
from lpmpi.tables._machine import (_MPI_TUNING, compare_fingerprint, cpu_model,  # noqa: F401
                                   fingerprint, library_name, library_version_line,
                                   measured_here, mpi_tuning, tuned_alike)
from lpmpi.tables._schema import (COLLECTIVES, INF, MEMORY_KINDS, STAGING_RANGE,  # noqa: F401
                                  TABLE_VERSION, VERSION_KEY, Row, Table, TableError,
                                  TuningWarning, _bound, _fingerprint_fields, _model, _row,
                                  _rows, _staging, _transport, default_algorithms, parse_table,
                                  read_table)
from lpmpi.tables._write import (EDGE_RATIO, Choice, _json_bound, bucket_edges,  # noqa: F401
                                 covered, merge_choices, table_document, write_table)


ENV_FILE = "LPMPI_TUNING_FILE"
SHIPPED_DIR = os.path.dirname(os.path.abspath(__file__))   # this package's folder: the *.json


# ----------------------------------------------------------------------------- loading at import


@dataclass
class LoadStatus:
    """What import did with tuning tables (shown by ``python -m lpmpi info`` and explain)."""

    source: str                                  # "shipped", "LPMPI_TUNING_FILE" or "disabled"
    applied: list[Table] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)   # (path, reason)
    #: shipped tables of other MPI libraries (path, library): not an error, no warning
    foreign: list[tuple[str, str]] = field(default_factory=list)
    #: shipped host tables of this library measured on another CPU model (path, cpu_model)
    other_cpu: list[tuple[str, str]] = field(default_factory=list)
    #: shipped tables measured under other MPI tuning variables than this process's (path,
    #: theirs as text): not applied, no warning (``lpmpi info`` lists them)
    other_tuning: list[tuple[str, str]] = field(default_factory=list)
    cpu: str = ""
    library: str = ""
    #: LPMPI_TABLES_AS / load(tables_as=...): the shipped table whose machine the tables were
    #: selected for (its library and CPU model instead of this machine's); None: this machine
    tables_as: str | None = None
    table_hash: int = 0
    #: LPMPI_AUTOTUNE_FILE's rows (its table, the row), applied over the tables (lpmpi.autotune)
    warm: list[tuple[Table, Row]] = field(default_factory=list)
    warning: str | None = None
    model_from: str | None = None               # the table whose fitted model "auto" uses

    def tables_for(self, nprocs: int, memory: str = "host", acc: bool = False) -> list[Table]:
        """The applied tables whose rows apply to communicators of ``nprocs`` ranks (acc: the
        tables for acc_dtype calls instead of the plain ones)."""
        return [t for t in self.applied if t.nprocs == nprocs and t.memory == memory and t.acc == acc]


_status = LoadStatus("not loaded")
#: rows laid over the loaded tables (lpmpi.autotune.install sets it: LPMPI_AUTOTUNE_FILE's)
_warm_rows: Callable[[LoadStatus], list[tuple[Table, Row]]] | None = None
_builtin_model: tuple[float, ...] | None = None


def status() -> LoadStatus:
    """What the last :func:`load` did."""
    return _status


def model_table(tables: Iterable[Table]) -> Table | None:
    """The first host-memory table with a fitted model: its model replaces the built-in
    defaults.  The engine has one cost model, for host memory; a device table's model (fitted
    to staged transfers) is kept in its file but never replaces it."""
    return next((t for t in tables if t.model is not None and not t.acc
                 and t.fingerprint.get("memory", "host") == "host"), None)


def describe(here: Mapping[str, Any]) -> list[str]:
    """Lines for ``python -m lpmpi info``: where tables came from, which apply to a communicator
    with fingerprint ``here`` (see :func:`fingerprint`) and why others do not."""
    st = status()
    lines = [f"tuning tables: {st.source}"
             + (f" ({_env.settings.tuning_file})" if st.source == ENV_FILE else f" ({SHIPPED_DIR})"
                if st.source == "shipped" else "")
             + (f", selected as on the machine of {st.tables_as} ({library_name(st.library)}, "
                f"{st.cpu or 'no CPU model'}; LPMPI_TABLES_AS)" if st.tables_as else "")]
    nprocs, memory = int(here.get("nprocs", 0)), str(here.get("memory", "host"))
    for t in st.applied:
        _, diffs = compare_fingerprint(t.fingerprint, here)
        use = ("applies" if (t.nprocs, t.memory) == (nprocs, memory) else f"not for P={nprocs}"
               if t.nprocs != nprocs else f"for {t.memory} memory (applies to such calls)")
        lines.append(f"  {t.path}: P={t.nprocs} {t.kind}, {len(t.rows)} rows: {use}")
        lines += [f"    differs: {d}" for d in diffs if not d.startswith(("nprocs", "memory"))]
        lines += [f"    skipped: {why}" for why in t.skipped]
    lines += [f"  {p}: ignored: {why}" for p, why in st.ignored]
    lines += [f"  {p}: for another MPI library ({lib})" for p, lib in st.foreign]
    lines += [f"  {p}: measured on another CPU ({c}; this one: {st.cpu}): not applied "
              f"(LPMPI_TUNING_FILE={p} applies it anyway)" for p, c in st.other_cpu]
    here_tuning = " ".join(f"{k}={v}" for k, v in mpi_tuning().items()) or "none set"
    lines += [f"  {p}: measured under other MPI tuning variables ({t}; here: {here_tuning}): not applied "
              f"(LPMPI_TUNING_FILE={p} applies it anyway)" for p, t in st.other_tuning]
    if not st.tables_for(nprocs, memory):
        lines.append(f"  no table for P={nprocs} ({memory}): 'auto' uses the cost model")
    if st.model_from:
        lines.append(f"  cost model fitted by the tuner, from {st.model_from}")
    return lines


def rows_hash(tables: Sequence[Table]) -> int:
    """A stable 64-bit hash of the applied rows and model (the same on every rank that loaded
    the same tables); 0 when there are none."""
    canon: list[Any] = [[r.collective, t.memory, t.nprocs, _json_bound(r.lo), _json_bound(r.hi),
                         r.algorithm, r.chunk_bytes]
                        + ([r.staging_buffers] if r.staging_buffers is not None else [])
                        + ([f"transport={r.transport}"] if r.transport is not None else [])
                        + (["acc"] if t.acc else [])
                        for t in tables for r in t.rows]
    mt = model_table(tables)
    if mt is not None:
        canon.append(list(mt.model or ()))
    if not canon:
        return 0
    try:
        from _blake2 import blake2b  # the same function as hashlib's, without loading OpenSSL
    except ImportError:  # pragma: no cover - other Python implementations
        from hashlib import blake2b
    digest = blake2b(json.dumps(canon, separators=(",", ":")).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


def _candidates() -> tuple[str, list[str]]:
    env = _env.settings.tuning_file or ""
    if env.lower() in ("none", "off", "0"):
        return "disabled", []
    if env:
        return ENV_FILE, [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
    return "shipped", shipped_tables()


def _select(source: str, paths: Sequence[str], library: str, cpu: str | None = None,
            tuning: Mapping[str, str] | None = None) -> LoadStatus:
    """Read the candidate tables; keep those for this MPI library (and, shipped tables, this
    CPU model (host tables) and these MPI tuning variables), one per (P, memory)."""
    cpu = cpu_model() if cpu is None else cpu
    tuning = mpi_tuning() if tuning is None else tuning
    st = LoadStatus(source, library=library, cpu=cpu)
    seen: dict[tuple[int, str], str] = {}   # (P, kind): a plain and an acc_dtype table may both apply
    for path in paths:
        try:
            table = read_table(path)
        except TableError as exc:
            st.ignored.append((str(path), str(exc)))
            continue
        applies, _ = compare_fingerprint(table.fingerprint, {"mpi_library": library})
        key = (table.nprocs, table.kind)
        if not applies and source == "shipped":
            st.foreign.append((str(path), str(table.fingerprint["mpi_library"])))
        elif not applies:
            st.ignored.append((str(path), f"foreign: tuned with {table.fingerprint['mpi_library']!r}"))
        elif source == "shipped" and not measured_here(table, cpu):
            st.other_cpu.append((str(path), str(table.fingerprint["cpu_model"])))
        elif source == "shipped" and not tuned_alike(table, tuning):
            theirs = table.fingerprint.get("mpi_tuning") or {}
            st.other_tuning.append((str(path), " ".join(f"{k}={v}" for k, v in theirs.items()) or "none set"))
        elif key in seen:
            st.ignored.append((str(path), f"another table for P={key[0]} ({key[1]}) came first: {seen[key]}"))
        else:
            seen[key] = str(path)
            st.applied.append(table)
    return st


def _warning_text(st: LoadStatus) -> str | None:
    """The one warning of a load, or None when all went well."""
    parts = [f"{p}: {why}" for p, why in st.ignored]
    parts += [f"{t.path}: skipped {len(t.skipped)} invalid row(s): " + "; ".join(t.skipped[:3])
              + (" ..." if len(t.skipped) > 3 else "") for t in st.applied if t.skipped]
    if st.source == "shipped" and not st.applied and not st.other_cpu and not st.other_tuning:
        if not st.ignored and not st.foreign:
            return None  # a build without shipped tables: nothing to warn about
        libs = sorted({library_name(lib) for _, lib in st.foreign})
        parts.append(f"no shipped table for {library_name(st.library)!r}"
                     + (f" (shipped for: {', '.join(libs)})" if libs else ""))
    if not parts:
        return None
    fallback = "'auto' uses the cost model" + (" where no table applies" if st.applied else "")
    return "lpmpi: tuning table ignored or partly invalid (" + " | ".join(parts) + f"); {fallback}"


def shipped_tables() -> list[str]:
    """The paths of the shipped tables (lpmpi/tables/*.json), sorted."""
    try:
        return sorted(os.path.join(SHIPPED_DIR, n) for n in os.listdir(SHIPPED_DIR) if n.endswith(".json"))
    except OSError:
        return []


def machine_of(table: str) -> tuple[str, str | None]:
    """``(mpi_library, cpu_model)`` of the machine a table was measured on; ``table``: a path, or
    the file name of a shipped table.  Raises :class:`TableError` for one that cannot be read."""
    path = table if os.sep in table or os.path.exists(table) else os.path.join(SHIPPED_DIR, table)
    t = read_table(path)
    cpu = t.fingerprint.get("cpu_model")
    return str(t.fingerprint["mpi_library"]), cpu if isinstance(cpu, str) else None


def load(apply: bool = True, tables_as: str | None = None) -> LoadStatus:
    """Load the tables for this process (shipped, or ``LPMPI_TUNING_FILE``) into the engine.

    ``tables_as`` (default: ``LPMPI_TABLES_AS``): a shipped table (file name or path); the
    shipped tables are then selected as on the machine it was measured on (its MPI library and
    CPU model), whatever this machine is, so that any machine can run every shipped table's
    decisions (the tests do).  Communicators prepared before a reload keep their agreement on
    the old rows' hash: use new ones.

    Called at ``import lpmpi``; gives at most one :class:`TuningWarning` and never raises for a
    bad table.  Returns (and remembers, see :func:`status`) what it did.
    """
    global _status
    source, paths = _candidates()
    try:
        library = library_version_line()
    except Exception as exc:  # noqa: BLE001 - an odd MPI must not break import
        library = f"unknown ({exc})"
    cpu = None
    tables_as = _env.settings.tables_as if tables_as is None else tables_as
    if tables_as:
        try:
            library, cpu = machine_of(tables_as)
            cpu = cpu or ""
        except TableError as exc:
            warnings.warn(f"lpmpi: LPMPI_TABLES_AS={tables_as!r} ignored: {exc}", TuningWarning, stacklevel=3)
            tables_as = None
    # (as on another machine: its shipped tables were measured with no MPI tuning variables set)
    st = _select(source, paths, library, cpu, {} if tables_as else None)
    st.tables_as = tables_as or None
    st.warm = _warm_rows(st) if _warm_rows is not None else []
    warm_tables = list({id(t): t for t, _ in st.warm}.values())
    st.table_hash = rows_hash([*st.applied, *warm_tables])
    if apply:
        _apply(st)
    st.warning = _warning_text(st)
    _status = st
    if st.warning:
        warnings.warn(st.warning, TuningWarning, stacklevel=3)
    return st


def _learned_s(r: Row) -> float:
    """A learned row's time in seconds (the online tuner's settled median: its first
    ``measured`` entry's ``time_us``), the reference its key starts settled on; 0 where the
    row gives none (its key explores)."""
    for m in r.measured:
        t = m.get("time_us")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
            return float(t) * 1e-6
    return 0.0


def _apply(st: LoadStatus) -> None:
    """Push the applied tables' rows into the engine (rows the engine refuses are dropped)."""
    from lpmpi import _core

    global _builtin_model
    if _builtin_model is None:          # the engine's defaults, before any table replaces them
        _builtin_model = (*_core.model_get(), *_core.model_get_net())
    _core.table_clear()
    _core.model_set(*_builtin_model[:3])
    _core.model_set_net(*_builtin_model[3:])
    # the learned rows (lpmpi.autotune.path) last: they win, and their keys start settled
    pairs = [(t, r, 0.0) for t in st.applied for r in t.rows] + [(t, r, _learned_s(r)) for t, r in st.warm]
    for t, r, learned in pairs:
        try:
            _core.table_add(r.collective, t.memory, t.nprocs, r.lo, r.hi, r.algorithm, r.chunk_bytes,
                            staging_buffers=r.staging_buffers, acc=t.acc, transport=r.transport,
                            nodes=t.nodes, learned=learned)
        except (ValueError, TypeError) as exc:
            t.skipped.append(f"{r.collective} [{r.lo:g}, {r.hi:g}): engine refused it ({exc})")
    mt = model_table(st.applied)
    if mt is not None and mt.model is not None:
        _core.model_set(*mt.model[:3])
        if len(mt.model) == 5:
            _core.model_set_net(*mt.model[3:])
        st.model_from = mt.path
    _core.table_set_hash(st.table_hash)
