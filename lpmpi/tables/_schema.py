"""The tuning tables' format: its constants (version, collectives, memory kinds), the
:class:`TuningWarning` and :class:`TableError` classes, :class:`Row` and :class:`Table`, and the
validation of a decoded JSON document (:func:`parse_table`) and of a file (:func:`read_table`).

The schema and what each field means are in the package's docstring (:mod:`lpmpi.tables`).
Part of the package :mod:`lpmpi.tables`, which re-exports every name defined here.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lpmpi import engine


TABLE_VERSION = 1
VERSION_KEY = "lpmpi_table_version"
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
