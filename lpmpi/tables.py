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
"""
from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lpmpi import _env, engine

TABLE_VERSION = 1
VERSION_KEY = "lpmpi_table_version"
ENV_FILE = "LPMPI_TUNING_FILE"
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables")
COLLECTIVES = engine.COLLECTIVES
MEMORY_KINDS = engine.MEMORY_KINDS
INF = "inf"
STAGING_RANGE = (1, engine.STAGING_MAX)   # staging buffers of a row


class TuningWarning(UserWarning):
    """A tuning table was missing, corrupt, foreign or had invalid rows (it was ignored)."""


class TableError(ValueError):
    """A tuning table that cannot be used at all (the message says why)."""


@dataclass(frozen=True)
class Row:
    """One size range of one collective: messages of ``lo <= nbytes < hi`` use ``algorithm``."""

    collective: str
    lo: float
    hi: float
    algorithm: str
    chunk_bytes: int | None
    measured: tuple[Mapping[str, Any], ...] = ()
    staging_buffers: int | None = None    # cuda tables, chunked algorithms: None = the default
    transport: str | None = None          # host tables, node-local algorithms: None = the model's

    def covers(self, nbytes: float) -> bool:
        """True when this row applies to a message of ``nbytes`` bytes."""
        return self.lo <= nbytes < self.hi


@dataclass
class Table:
    """A validated table: its fingerprint, the tuner's notes and the usable rows."""

    fingerprint: dict[str, Any]
    rows: list[Row]
    tuner: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    skipped: list[str] = field(default_factory=list)   # reasons for rows that were dropped
    model: tuple[float, ...] | None = None   # fitted (alpha, beta, gamma[, alpha_net, beta_net]), if any

    @property
    def nprocs(self) -> int:
        return int(self.fingerprint["nprocs"])

    @property
    def nodes(self) -> int:
        """The nodes the table was measured on (1 where the fingerprint does not say): its rows
        decide only on communicators that span as many."""
        try:
            return max(1, int(self.fingerprint.get("nodes", 1)))
        except (TypeError, ValueError):
            return 1

    @property
    def memory(self) -> str:
        return str(self.fingerprint["memory"])

    @property
    def acc(self) -> bool:
        """A table for calls with acc_dtype (fingerprint ``"acc_dtype": "float32"``): its rows
        apply to those calls only, keyed by the 16-bit message's bytes."""
        return self.fingerprint.get("acc_dtype") is not None

    @property
    def kind(self) -> str:
        """``host``, ``cuda``, or ``host+acc_dtype=float32``: what its rows apply to."""
        return self.memory + (f"+acc_dtype={self.fingerprint['acc_dtype']}" if self.acc else "")

    def lookup(self, collective: str, nbytes: float) -> Row | None:
        """The row of ``collective`` covering ``nbytes``, or None."""
        return next((r for r in self.rows if r.collective == collective and r.covers(nbytes)), None)


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


# ----------------------------------------------------------------------------- validation


def _bound(value: Any, what: str, allow_inf: bool) -> float:
    if allow_inf and value == INF:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        kinds = 'a finite number or "inf"' if allow_inf else "a finite number"
        raise TableError(f"{what} must be {kinds}, got {value!r}")
    if value < 0:
        raise TableError(f"{what} must be >= 0, got {value!r}")
    return float(value)


def _staging(value: Any) -> int | None:
    """A row's ``staging_buffers``: None, or an int in STAGING_RANGE."""
    lo, hi = STAGING_RANGE
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise TableError(f"staging_buffers must be an int in {lo}..{hi} or null, got {value!r}")
    return value


def _transport(value: Any) -> str | None:
    """A row's ``transport``: None, or one of engine.TRANSPORTS."""
    if value is None or value in engine.TRANSPORTS:
        return value
    raise TableError(f"transport must be one of {', '.join(engine.TRANSPORTS)} or null, got {value!r}")


def _row(collective: str, raw: Any, algorithms: Mapping[str, bool], memory: str = "host") -> Row:
    """One row, validated; raises TableError with the reason.  ``staging_buffers`` is checked
    everywhere but kept only where it applies: chunked algorithms of a ``cuda`` table."""
    if not isinstance(raw, dict):
        raise TableError(f"a row must be an object, got {type(raw).__name__}")
    missing = [k for k in ("lo", "hi", "algorithm") if k not in raw]
    if missing:
        raise TableError(f"missing {', '.join(missing)}")
    lo = _bound(raw["lo"], "lo", allow_inf=False)
    hi = _bound(raw["hi"], "hi", allow_inf=True)
    if not lo < hi:
        raise TableError(f"empty range [{raw['lo']}, {raw['hi']})")
    alg = raw["algorithm"]
    if not isinstance(alg, str) or alg not in algorithms:
        raise TableError(f"unknown algorithm {alg!r} for {collective} (known: {', '.join(algorithms)})")
    chunk = raw.get("chunk_bytes")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0):
        raise TableError(f"chunk_bytes must be a positive int or null, got {chunk!r}")
    staging = _staging(raw.get("staging_buffers"))
    transport = _transport(raw.get("transport"))
    measured = raw.get("measured", [])
    if not isinstance(measured, list) or not all(isinstance(m, dict) for m in measured):
        raise TableError("measured must be a list of objects")
    keep = algorithms[alg]
    node_local = memory == "host" and engine.has_transports(collective, alg)
    return Row(collective, lo, hi, alg, chunk if keep else None, tuple(measured),
               staging if keep and memory == "cuda" else None, transport if node_local else None)


def _rows(collective: str, raws: Any, algorithms: Mapping[str, bool], skipped: list[str],
          memory: str = "host") -> list[Row]:
    """The valid rows of one collective, in order; invalid or overlapping ones go to ``skipped``."""
    if not isinstance(raws, list):
        skipped.append(f"{collective}: rows must be a list, got {type(raws).__name__}")
        return []
    rows: list[Row] = []
    for i, raw in enumerate(raws):
        try:
            row = _row(collective, raw, algorithms, memory)
            if rows and row.lo < rows[-1].hi:
                raise TableError(f"range [{row.lo:g}, {row.hi:g}) overlaps or precedes the row before "
                                 f"(ranges must be sorted and disjoint)")
        except TableError as exc:
            skipped.append(f"{collective} row {i}: {exc}")
            continue
        rows.append(row)
    return rows


def _fingerprint_fields(fp: Any) -> dict[str, Any]:
    if not isinstance(fp, dict):
        raise TableError("fingerprint must be an object")
    lib = fp.get("mpi_library")
    if not isinstance(lib, str) or not lib.strip():
        raise TableError("fingerprint.mpi_library must be a non-empty string")
    nprocs = fp.get("nprocs")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise TableError(f"fingerprint.nprocs must be a positive int, got {nprocs!r}")
    if fp.get("memory", "host") not in MEMORY_KINDS:
        raise TableError(f"fingerprint.memory must be one of {MEMORY_KINDS}, got {fp.get('memory')!r}")
    if fp.get("acc_dtype") not in (None, "float32") or (fp.get("acc_dtype") and fp.get("memory", "host") != "host"):
        raise TableError(f"fingerprint.acc_dtype must be absent, null or 'float32' (host memory), "
                         f"got {fp.get('acc_dtype')!r}")
    tuning = fp.get("mpi_tuning", {})
    if not isinstance(tuning, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tuning.items()):
        raise TableError(f"fingerprint.mpi_tuning must be an object of strings, got {tuning!r}")
    return {**fp, "memory": fp.get("memory", "host")}


def default_algorithms() -> dict[str, dict[str, bool]]:
    """``{collective: {algorithm: chunked}}`` from the engine's registry."""
    return {c: {a.name: a.chunked for a in engine.algorithm_info(c)} for c in COLLECTIVES}


def parse_table(doc: Any, path: str | None = None,
                algorithms: Mapping[str, Mapping[str, bool]] | None = None) -> Table:
    """Validate a decoded JSON document.  Raises :class:`TableError` when the table as a whole
    is unusable; invalid rows are dropped and listed in ``Table.skipped``."""
    if not isinstance(doc, dict):
        raise TableError(f"the top level must be an object, got {type(doc).__name__}")
    version = doc.get(VERSION_KEY)
    if version != TABLE_VERSION or isinstance(version, bool):
        raise TableError(f"{VERSION_KEY} is {version!r}; this lpmpi reads version {TABLE_VERSION}")
    fp = _fingerprint_fields(doc.get("fingerprint"))
    colls = doc.get("collectives")
    if not isinstance(colls, dict):
        raise TableError("collectives must be an object")
    algorithms = default_algorithms() if algorithms is None else algorithms
    skipped: list[str] = []
    rows: list[Row] = []
    for coll, raws in colls.items():
        if coll not in COLLECTIVES:
            skipped.append(f"unknown collective {coll!r}")
            continue
        rows.extend(_rows(coll, raws, algorithms[coll], skipped, fp["memory"]))
    tuner = doc.get("tuner") if isinstance(doc.get("tuner"), dict) else {}
    return Table(fp, rows, tuner, path, skipped, _model(doc.get("model"), skipped))


def _model(raw: Any, skipped: list[str]) -> tuple[float, ...] | None:
    """The optional fitted model section: alpha, beta, gamma as finite numbers >= 0, and the
    network term alpha_net, beta_net (both or neither: a table measured across nodes)."""
    if raw is None:
        return None
    try:
        if not isinstance(raw, dict):
            raise TableError("must be an object")
        alpha, beta, gamma = (_bound(raw.get(k), k, allow_inf=False) for k in ("alpha", "beta", "gamma"))
        net = [k for k in ("alpha_net", "beta_net") if raw.get(k) is not None]
        if len(net) == 1:
            raise TableError(f"{net[0]} without {({'alpha_net', 'beta_net'} - set(net)).pop()}")
        if net:
            return (alpha, beta, gamma, *(_bound(raw[k], k, allow_inf=False) for k in ("alpha_net", "beta_net")))
        return alpha, beta, gamma
    except TableError as exc:
        skipped.append(f"model: {exc}")
        return None


def read_table(path: str | os.PathLike[str]) -> Table:
    """Read and validate a table file; raises :class:`TableError` (missing, corrupt, invalid)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise TableError("file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TableError(f"cannot read it ({exc})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TableError(f"not valid JSON ({exc})") from None
    return parse_table(doc, str(path))


# ----------------------------------------------------------------------------- building


#: how far beyond the smallest and largest tuned size a table's first and last row reach, at
#: most: a factor of sqrt(this) (the neighbouring tuned size's ratio where that is smaller), so
#: a tuning run of 8 B .. 64 MiB a factor 2 apart covers 6 B .. 91 MiB and the sizes beyond
#: fall to the cost model instead of a choice measured far from them
EDGE_RATIO = 4.0


def bucket_edges(sizes: Sequence[int]) -> list[tuple[float, float]]:
    """``[lo, hi)`` of each tuned size: boundaries at the geometric midpoints between tuned
    sizes; the first and last bucket reach beyond the smallest and largest size by the square
    root of their neighbour's ratio, at most of :data:`EDGE_RATIO` (a lone size: of 2), so that
    sizes far outside the tuned range are left to the cost model.  Every bucket holds its size.

    >>> bucket_edges([8, 32, 128])
    [(4.0, 16.0), (16.0, 64.0), (64.0, 256.0)]
    >>> bucket_edges([8, 262144])
    [(4.0, 1448.0), (1448.0, 524288.0)]
    >>> bucket_edges([16, 32])
    [(11.0, 23.0), (23.0, 45.0)]
    """
    if not sizes:
        return []
    if list(sizes) != sorted(set(sizes)) or sizes[0] <= 0:
        raise ValueError(f"tuned sizes must be positive, increasing and distinct: {sizes}")
    mids = [float(max(a + 1, round(math.sqrt(a * b)))) for a, b in zip(sizes, sizes[1:])]
    below = min(sizes[1] / sizes[0], EDGE_RATIO) if len(sizes) > 1 else 2.0
    above = min(sizes[-1] / sizes[-2], EDGE_RATIO) if len(sizes) > 1 else 2.0
    lo = float(min(sizes[0], round(sizes[0] / math.sqrt(below))))
    hi = float(max(sizes[-1] + 1, round(sizes[-1] * math.sqrt(above))))
    return list(zip([lo, *mids], [*mids, hi]))


def covered(rows: Iterable[Row]) -> dict[str, tuple[float, float]]:
    """``{collective: (lowest lo, highest hi)}`` of rows: the sizes a table decides (the rows of
    a tuned table are contiguous; other sizes and collectives go to the cost model)."""
    out: dict[str, tuple[float, float]] = {}
    for r in rows:
        lo, hi = out.get(r.collective, (r.lo, r.hi))
        out[r.collective] = (min(lo, r.lo), max(hi, r.hi))
    return out


@dataclass(frozen=True)
class Choice:
    """What the tuner chose at one size, with the times it measured (seconds)."""

    nbytes: int
    algorithm: str
    chunk_bytes: int | None
    time_s: float
    native_s: float | None
    staging_buffers: int | None = None
    transport: str | None = None
    one_core_s: float | None = None     # lpmpi-tune --shared-core: with every rank on one core


def merge_choices(collective: str, choices: Sequence[Choice], chunked: Mapping[str, bool]) -> list[Row]:
    """Rows of a collective from per-size choices: the edges of :func:`bucket_edges` (sizes
    beyond the tuned range get no row), and adjacent sizes with the same (algorithm, chunk,
    staging buffers, transport) merged into one row."""
    choices = sorted(choices, key=lambda c: c.nbytes)
    rows: list[Row] = []
    for (lo, hi), ch in zip(bucket_edges([c.nbytes for c in choices]), choices):
        keep = chunked.get(ch.algorithm)
        chunk = ch.chunk_bytes if keep else None
        staging = ch.staging_buffers if keep else None
        tp = ch.transport if engine.has_transports(collective, ch.algorithm) else None
        meas = {"nbytes": ch.nbytes, "time_us": round(ch.time_s * 1e6, 3),
                "native_us": None if ch.native_s is None else round(ch.native_s * 1e6, 3)}
        if ch.one_core_s is not None:
            meas["one_core_us"] = round(ch.one_core_s * 1e6, 3)
        prev = rows[-1] if rows else None
        if prev is not None and (prev.algorithm, prev.chunk_bytes, prev.staging_buffers, prev.transport) == \
                (ch.algorithm, chunk, staging, tp):
            rows[-1] = Row(collective, prev.lo, hi, prev.algorithm, chunk, (*prev.measured, meas), staging, tp)
        else:
            rows.append(Row(collective, lo, hi, ch.algorithm, chunk, (meas,), staging, tp))
    return rows


def _json_bound(x: float) -> float | int | str:
    return INF if math.isinf(x) else (int(x) if float(x).is_integer() else x)


def table_document(fp: Mapping[str, Any], rows: Iterable[Row], tuner: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document (a dict) of a table.  Rows of a ``cuda`` table (``fp["memory"]``) carry
    ``staging_buffers`` (null where the default applies); host rows do not.  Rows that name a
    node-local transport carry ``transport``."""
    colls: dict[str, list[dict[str, Any]]] = {}
    cuda = fp.get("memory") == "cuda"
    for r in rows:
        row: dict[str, Any] = {"lo": _json_bound(r.lo), "hi": _json_bound(r.hi), "algorithm": r.algorithm,
                               "chunk_bytes": r.chunk_bytes}
        if cuda:
            row["staging_buffers"] = r.staging_buffers
        if r.transport is not None:
            row["transport"] = r.transport
        row["measured"] = [dict(m) for m in r.measured]
        colls.setdefault(r.collective, []).append(row)
    return {VERSION_KEY: TABLE_VERSION, "fingerprint": dict(fp), "tuner": dict(tuner), "collectives": colls}


def write_table(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> None:
    """Write a table document atomically (a temporary file, then rename)."""
    head, name = os.path.split(os.fspath(path))
    tmp = os.path.join(head, f".{name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


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


def measured_here(table: Table, cpu: str) -> bool:
    """True unless ``table`` is a host-memory table whose fingerprint names another CPU model
    than ``cpu`` (a table without ``cpu_model`` makes no claim and applies)."""
    fp_cpu = table.fingerprint.get("cpu_model")
    return table.memory != "host" or not isinstance(fp_cpu, str) or fp_cpu == cpu


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
