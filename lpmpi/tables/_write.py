"""Building and writing tables: the tuner's per-size :class:`Choice` merged into rows
(:func:`bucket_edges`, :func:`merge_choices`), the JSON document of a table
(:func:`table_document`) and its atomic write (:func:`write_table`).

Part of the package :mod:`lpmpi.tables`, which re-exports every name defined here.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lpmpi import engine
from lpmpi.tables._schema import INF, TABLE_VERSION, VERSION_KEY, Row


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
