"""What the online tuner learned (``LPMPI_AUTOTUNE=1``, src/tune/autotune.c), as tuning tables.

:func:`report` gives the keys the tuner settled on ``MPI_COMM_WORLD``'s size as one table (the
format ``lpmpi-tune`` writes, ``lpmpi/tables/*.json``), each row carrying, besides its choice
and measured times, what the tuner saw: calls, calls to settle, exploration time, drift events,
every candidate's median (:func:`reports`: every process count, memory kind and node count).
With the tuner on, rank 0 of ``MPI_COMM_WORLD`` writes that table at exit into the per-machine
cache (:func:`cache_path`: one file per MPI library, CPU, MPI tuning variables and process
count) or ``LPMPI_AUTOTUNE_FILE=path`` (``none``: no file), its rows merged over the file's
earlier ones; at the next import the file's rows are laid over the loaded tables and their keys
start settled (the next run does not explore them again; a file from another machine or
configuration, or a corrupt one, is ignored with one warning);
``LPMPI_TUNING_FILE`` loads it as any table; ``lpmpi-tune --merge path --into table.json``
folds it into a table.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lpmpi import _core, _env, tables


def state() -> list[dict[str, Any]]:
    """Every key the online tuner has seen in this process (its candidates, their medians,
    the choice and counters): the engine's own view (``lpmpi-info`` prints it)."""
    return _core.autotune_state()


def _row(k: Mapping[str, Any]) -> dict[str, Any] | None:
    if k["choice"] is None:
        return None
    c = k["candidates"][k["choice"]]
    native = k["candidates"][k["native"]]["seconds"] if k["native"] is not None else None
    us = (lambda s: None if s is None else round(s * 1e6, 3))
    row: dict[str, Any] = {"lo": tables._json_bound(k["lo"]), "hi": tables._json_bound(k["hi"]),
                           "algorithm": c["algorithm"], "chunk_bytes": c["chunk_bytes"]}
    if c["transport"] is not None:
        row["transport"] = c["transport"]
    row["measured"] = [{"nbytes": k["nbytes"], "time_us": us(c["seconds"]), "native_us": us(native)}]
    row["autotune"] = {"calls": k["calls"], "settle_calls": k["settle_calls"], "settles": k["settles"],
                       "explore_calls": k["explore_calls"], "explore_us": us(k["explore_seconds"]),
                       "drifts_slower": k["drifts_slower"], "drifts_faster": k["drifts_faster"],
                       "last_us": us(k["last_seconds"]),
                       "candidates": [[d["algorithm"], d["chunk_bytes"], d["transport"], us(d["seconds"]),
                                       d["samples"]] for d in k["candidates"]]}
    return row


def reports(keys: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """What was learned, as tuning-table documents: one per process count, memory kind, node
    count and acc_dtype kind, rows sorted by size; keys that never settled are left out.
    Local: no communication (every rank of a communicator learned the same)."""
    keys = state() if keys is None else keys
    groups: dict[tuple[int, str, int, bool], list[dict[str, Any]]] = {}
    for k in keys:
        row = _row(k)
        if row is not None:
            groups.setdefault((k["nprocs"], k["memory"], k["nodes"], k["acc"]), []).append({**row,
                                                                                     "collective": k["collective"]})
    docs = []
    library = tables.library_version_line()
    for (P, memory, nodes, acc), rows in sorted(groups.items()):
        fp = {"mpi_library": library, "nprocs": P, "ranks_per_node": max(1, P // max(1, nodes)),
              "nodes": nodes, "memory": memory, "cpu_model": tables.cpu_model(), "cpu_count": os.cpu_count(),
              "mpi_tuning": tables.mpi_tuning()}
        if acc:
            fp["acc_dtype"] = "float32"
        colls: dict[str, list[dict[str, Any]]] = {}
        for r in sorted(rows, key=lambda r: (r["collective"], float(r["lo"]))):
            colls.setdefault(r.pop("collective"), []).append(r)
        # one row per size class: the dtype sizes of a class tuned apart share its bytes; the
        # one with the most calls speaks for it
        for name, rs in colls.items():
            best: dict[float, dict[str, Any]] = {}
            for r in rs:
                if r["lo"] not in best or r["autotune"]["calls"] > best[r["lo"]]["autotune"]["calls"]:
                    best[r["lo"]] = r
            colls[name] = [best[lo] for lo in sorted(best, key=float)]
        docs.append({tables.VERSION_KEY: tables.TABLE_VERSION, "fingerprint": fp,
                     "tuner": {"command": "LPMPI_AUTOTUNE=1 (online, src/tune/autotune.c)"}, "collectives": colls})
    return docs


def report(comm: Any = None, keys: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What was learned on communicators of ``comm``'s size (default ``MPI_COMM_WORLD``), host
    memory, as one tuning table (a dict in the format of ``lpmpi/tables/*.json``: what
    ``lpmpi.autotune_report()`` returns, ``LPMPI_AUTOTUNE_FILE`` holds, ``LPMPI_TUNING_FILE``
    loads and ``lpmpi-tune --merge`` folds in), its rows only those of keys that settled; of
    several node counts, the one with the most calls.  Other sizes: :func:`reports`."""
    from mpi4py import MPI

    P = (MPI.COMM_WORLD if comm is None else comm).Get_size()
    keys = state() if keys is None else keys
    docs = [d for d in reports(keys) if d["fingerprint"]["nprocs"] == P and d["fingerprint"]["memory"] == "host"
            and "acc_dtype" not in d["fingerprint"]]
    if not docs:
        fp = {"mpi_library": tables.library_version_line(), "nprocs": P, "ranks_per_node": P, "nodes": 1,
              "memory": "host", "cpu_model": tables.cpu_model(), "cpu_count": os.cpu_count(),
              "mpi_tuning": tables.mpi_tuning()}
        return {tables.VERSION_KEY: tables.TABLE_VERSION, "fingerprint": fp,
                "tuner": {"command": "LPMPI_AUTOTUNE=1 (online, src/tune/autotune.c)"}, "collectives": {}}
    calls = {d["fingerprint"]["nodes"]: sum(r["autotune"]["calls"] for rs in d["collectives"].values() for r in rs)
             for d in docs}
    return next(d for d in docs if d["fingerprint"]["nodes"] == max(calls, key=lambda n: calls[n]))


def write(path: str | os.PathLike[str], doc: Mapping[str, Any] | None = None) -> None:
    """Write ``doc`` (default: :func:`report`) to ``path`` (atomically): a tuning table."""
    tables.write_table(path, report() if doc is None else doc)


def read(path: str | os.PathLike[str]) -> tables.Table:
    """The table of an autotune file (raises :class:`lpmpi.tables.TableError` for a bad one)."""
    return tables.read_table(path)


def overlay(base: Iterable[tables.Row], top: Iterable[tables.Row]) -> list[tables.Row]:
    """``base``'s rows with ``top``'s laid over them: where a row of ``top`` covers a size, it
    decides (the base rows cut around it), per collective; sorted by collective and size."""
    out: list[tables.Row] = []
    base, top = list(base), list(top)
    for coll in dict.fromkeys([r.collective for r in base + top]):
        rows = sorted((r for r in base if r.collective == coll), key=lambda r: r.lo)
        for t in sorted((r for r in top if r.collective == coll), key=lambda r: r.lo):
            cut = []
            for r in rows:
                if r.hi <= t.lo or r.lo >= t.hi:
                    cut.append(r)
                    continue
                if r.lo < t.lo:
                    cut.append(_span(r, r.lo, t.lo))
                if r.hi > t.hi:
                    cut.append(_span(r, t.hi, r.hi))
            rows = sorted([*cut, t], key=lambda r: r.lo)
        out += rows
    return out


def _span(r: tables.Row, lo: float, hi: float) -> tables.Row:
    return tables.Row(r.collective, lo, hi, r.algorithm, r.chunk_bytes, r.measured, r.staging_buffers, r.transport)


def merge(autotune_path: str, table_path: str, out_path: str) -> tuple[int, int]:
    """``lpmpi-tune --merge``: fold the rows of an autotune file (a table) into the table, when
    both are for the same process count, memory kind, node count and acc kind, written to
    ``out_path``.  Returns (rows folded in, rows in the result).  The table's fingerprint and
    model are kept; its ``tuner`` record says what was merged."""
    base = tables.read_table(table_path)
    with open(table_path, encoding="utf-8") as f:
        doc = json.load(f)
    t = read(autotune_path)
    if (t.nprocs, t.memory, t.nodes, t.acc) != (base.nprocs, base.memory, base.nodes, base.acc):
        raise tables.TableError(f"{autotune_path} is for P={t.nprocs} {t.memory} on {t.nodes} node(s), "
                                f"{table_path} for P={base.nprocs} {base.memory} on {base.nodes}")
    rows = overlay(base.rows, t.rows)
    new = tables.table_document(doc["fingerprint"], rows, {**doc.get("tuner", {}),
                                                         "merged_autotune": os.path.abspath(autotune_path)})
    if "model" in doc:
        new["model"] = doc["model"]
    tables.write_table(out_path, new)
    return len(t.rows), len(rows)


# ----------------------------------------------------------------------------- at import / exit
_saved = False
#: the fingerprint fields a learned file must share with this process to apply
_SAME = ("mpi_library", "cpu_model", "mpi_tuning")


def _here() -> dict[str, Any]:
    return {"mpi_library": tables.library_version_line(), "cpu_model": tables.cpu_model(),
            "mpi_tuning": tables.mpi_tuning()}


def cache_path(nprocs: int | None = None) -> str:
    """The per-machine cache of learned rows: ``$XDG_CACHE_HOME/lpmpi`` (default ``~/.cache/lpmpi``),
    ``autotune-P<nprocs>-<hash>.json``, the hash of the MPI library's version line, the CPU model,
    the CPU count and the MPI library's tuning variables (``tables.mpi_tuning``): another library,
    machine kind or ``I_MPI_ADJUST_*`` setting learns into another file.  ``nprocs``: default
    ``MPI_COMM_WORLD``'s size."""
    from mpi4py import MPI

    P = MPI.COMM_WORLD.Get_size() if nprocs is None else nprocs
    key = json.dumps({**_here(), "cpu_count": os.cpu_count()}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "lpmpi", f"autotune-P{P}-{digest}.json")


def path() -> str | None:
    """The file the online tuner starts from and writes at exit: ``LPMPI_AUTOTUNE_FILE``, else
    :func:`cache_path`; None where ``LPMPI_AUTOTUNE_FILE=none`` (no file)."""
    f = _env.settings.autotune_file
    if f is None:
        return cache_path()
    return None if f.lower() == "none" else f


def _foreign(fp: Mapping[str, Any]) -> str | None:
    """Why a learned file's fingerprint does not apply here (None: it does)."""
    here = _here()
    for k in _SAME:
        theirs = fp.get(k, {} if k == "mpi_tuning" else None)
        if theirs != here[k]:
            return f"foreign: learned with {k} {theirs!r}, here {here[k]!r}"
    return None


def _merged(p: str, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``'s rows over those the file ``p`` already holds for the same process count, node
    count, memory kind and machine (rows of size classes this run did not see are kept)."""
    try:
        with open(p, encoding="utf-8") as f:
            old = json.load(f)
        tables.read_table(p)
    except (OSError, ValueError, tables.TableError):
        return doc
    fp, ofp = doc["fingerprint"], old.get("fingerprint", {})
    if _foreign(ofp) or any(ofp.get(k) != fp.get(k) for k in ("nprocs", "nodes", "memory", "acc_dtype")):
        return doc
    colls = {name: list(rows) for name, rows in old.get("collectives", {}).items()}
    for name, rows in doc["collectives"].items():
        new_lo = {float(r["lo"]) for r in rows}
        kept = [r for r in colls.get(name, []) if float(r["lo"]) not in new_lo]
        colls[name] = sorted(kept + list(rows), key=lambda r: float(r["lo"]))
    return {**doc, "collectives": colls}


def _save_at_exit() -> None:
    from mpi4py import MPI

    global _saved
    if _saved:
        return
    _saved = True
    p = None
    try:
        p = path()
        if not p or MPI.COMM_WORLD.Get_rank() != 0:
            return
        doc = report()
        if doc["collectives"]:
            os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
            write(p, _merged(p, doc))
    except Exception as exc:  # noqa: BLE001 - the program's exit must not fail for this
        import sys

        print(f"lpmpi: learned rows not written to {p!r}: {exc}", file=sys.stderr)


def warm_rows(st: tables.LoadStatus) -> list[tuple[tables.Table, tables.Row]]:
    """The rows of the learned file (:func:`path`; tuner on, the file there and readable, learned
    on this MPI library, CPU model and MPI tuning variables), which the loader applies over the
    tables, their keys starting settled (``LoadStatus.ignored`` says why a file was not)."""
    if not _env.settings.autotune:
        return []
    try:
        p = path()
    except Exception as exc:  # noqa: BLE001 - no cache path (no home): start from the tables
        st.ignored.append(("the per-machine cache", str(exc)))
        return []
    if not p or not os.path.exists(p):
        return []
    try:
        t = read(p)
    except tables.TableError as exc:
        st.ignored.append((p, str(exc)))
        return []
    why = _foreign(t.fingerprint)
    if why:
        st.ignored.append((p, why))
        return []
    return [(t, r) for r in t.rows]


def install() -> None:
    """At import, before the tables load: the learned file's rows laid over them, and this
    run's report written there at exit (the tuner on)."""
    tables._warm_rows = warm_rows
    if _env.settings.autotune:
        atexit.register(_save_at_exit)


# ----------------------------------------------------------------------------- the shared core
def median(times: Any) -> float:
    """The statistic of every measurement, online and offline: the median (src/tune/autotune.c)."""
    return _core.tune_median(times)


def pruned(t: float, best: float, factor: float) -> bool:
    """A configuration whose time is ``t`` is dropped against ``best``: more than ``factor``x."""
    return _core.tune_pruned(t, best, factor)


def decide(times: Sequence[float], prefer: int = -1, tie: float = 0.0) -> int:
    """The index of the fastest of ``times`` (NaN: none), ``prefer`` where within ``tie`` of it."""
    return _core.tune_decide(list(times), prefer, tie)


def describe(keys: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """One line per key (``lpmpi-info``, ``explain``)."""
    keys = state() if keys is None else keys
    lines = []
    for k in keys:
        hi = "inf" if math.isinf(k["hi"]) else f"{k['hi']:g}"
        head = f"{k['collective']} [{k['lo']:g}, {hi}) B P={k['nprocs']}"
        lines.append(head + ": " + describe_key(k))
    return lines


def describe_key(k: Mapping[str, Any]) -> str:
    """A key's online state in one line."""
    us = (lambda s: "-" if s is None else f"{s * 1e6:.1f} us")
    cands = ", ".join(f"{_label(c)} {us(c['seconds'])}" + ("" if c["alive"] or k["state"] == "settled" else " (dropped)")
                      for c in k["candidates"])
    if k["choice"] is not None:
        c = k["candidates"][k["choice"]]
        now = f"settled on {_label(c)} ({us(k['seconds'])}; last window {us(k['last_seconds'])})"
        if k["state"] == "exploring":
            now = "re-exploring (was " + now[len("settled on "):] + ")"
    else:
        now = "exploring"
    return (f"{now} after {k['settle_calls']} calls; {k['calls']} calls, {k['explore_calls']} exploring "
            f"({us(k['explore_seconds'])} in all), drifts {k['drifts_slower']} slower / {k['drifts_faster']} faster; "
            f"candidates: {cands}")


def _label(c: Mapping[str, Any]) -> str:
    return (c["algorithm"] + (f"/{c['chunk_bytes']}" if c["chunk_bytes"] else "")
            + (f"/{c['transport']}" if c["transport"] else ""))
