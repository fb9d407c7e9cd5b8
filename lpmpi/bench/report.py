"""What the benchmark prints: the environment header (gathered collectively) and its lines, the
results table's header and rows, and the summary of a collective's rows.

>>> speedup_verdict([(0.97, 1024), (0.5, 8)])
'auto is never slower than native: worst speed-up 1.03x at 1 KiB (over 2 sizes)'
>>> speedup_verdict([(1.25, 65536), (0.9, 8)])
'auto is slower than native at 1 of 2 sizes: worst speed-up 0.80x at 64 KiB'
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import socket
from collections.abc import Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import engine
from lpmpi._units import format_bytes
from lpmpi.bench.cases import AUTO, GLOO, GLOO_CALLS, MPI4PY, NATIVE, Row
from lpmpi.bench.harness import MAX_REPS, MIN_REPS
from lpmpi.engine import COLLECTIVES

LARGE_BYTES = 1 << 20  # the summary's geometric means use sizes >= this
OVERHEAD_TARGET = 1.3  # lpmpi auto vs mpi4py at the smallest size

COLUMNS = (  # (title, width); columns are separated by two spaces
    ("size", 10),
    ("algorithm", 9),
    ("time_us", 11),
    ("algbw_GB/s", 10),
    ("busbw_GB/s", 10),
    ("speedup_vs_native", 17),
    ("of_bound", 8),
    ("check", 8),
)


def _join(cells: Sequence[str], note: str = "") -> str:
    widths = [w for _, w in COLUMNS]
    parts = [f"{cell:<{w}}" if i == 1 else f"{cell:>{w}}" for i, (cell, w) in enumerate(zip(cells, widths))]
    return "  ".join(parts) + (f"  {note}" if note else "")


def format_table_header() -> str:
    """The column titles of the results table."""
    return _join([name for name, _ in COLUMNS], "note")


def num(value: float | None) -> str:
    """A time or bandwidth cell: two decimals, ``-`` for none."""
    return "-" if value is None else f"{value:.2f}"


def pct(x: float | None) -> str:
    """A relative difference as a signed percentage, ``-`` for none."""
    return f"{100 * x:+.1f}%" if x is not None else "-"


def format_row(row: Row) -> str:
    """One line of the results table."""
    speed = "-" if row.speedup_vs_native is None else f"{row.speedup_vs_native:.2f}x"
    note = ""
    if row.algorithm == AUTO and row.selected_algorithm is not None:
        note = f"-> {row.selected_algorithm}" + (f" ({row.compression} on the wire)" if row.compression else "")
        if row.selected_chunk_bytes:
            note += f", chunk {format_bytes(row.selected_chunk_bytes)}"
    elif row.label == MPI4PY:
        note = f"mpi4py comm.{engine.collective_info(row.collective).mpi4py_name}"
    elif row.label == GLOO:
        note = f"torch.distributed gloo {GLOO_CALLS[row.collective][0]}"
    elif row.chunk_bytes:
        note = f"chunk {format_bytes(row.chunk_bytes)}"
    if row.error:
        note = (note + "; " if note else "") + row.error
    cells = [
        str(row.nbytes),
        row.label,
        num(row.time_us),
        num(row.algbw_GBps),
        num(row.busbw_GBps),
        speed,
        "-" if row.of_bound is None else f"{100 * row.of_bound:.0f}%",
        row.check,
    ]
    return _join(cells, note)


def speedup_verdict(ratios: Sequence[tuple[float, int]]) -> str:
    """Whether auto is ever slower than native, from ``(auto time / native time, nbytes)`` pairs:
    the worst size as a speed-up (native time / auto time, as the table's column)."""
    worst, at = max(ratios)
    slower = [n for r, n in ratios if r > 1]
    if not slower:
        return (f"auto is never slower than native: worst speed-up {1 / worst:.2f}x at "
                f"{format_bytes(at)} (over {len(ratios)} sizes)")
    return (f"auto is slower than native at {len(slower)} of {len(ratios)} sizes: worst speed-up "
            f"{1 / worst:.2f}x at {format_bytes(at)}")


def summarize(rows: Sequence[Row]) -> tuple[list[str], dict[str, Any]]:
    """Summary lines and data: geometric-mean speed-ups over native (sizes >= 1 MiB), whether
    auto is ever slower than native (worst size), and auto's per-call overhead vs mpi4py at the
    smallest size."""
    lines: list[str] = []
    data: dict[str, Any] = {"geomean_speedup_vs_native_ge_1MiB": {}}
    labels = list(dict.fromkeys(r.label for r in rows))
    large = sorted({r.nbytes for r in rows if r.nbytes >= LARGE_BYTES})
    lines.append(
        f"geometric-mean speed-up vs native over sizes >= {format_bytes(LARGE_BYTES)} ({len(large)} sizes):"
    )
    for label in labels:
        if label == NATIVE:
            continue
        ups = [
            r.speedup_vs_native
            for r in rows
            if r.label == label and r.nbytes >= LARGE_BYTES and r.speedup_vs_native
        ]
        if ups and len(ups) == len(large):
            g = math.exp(sum(math.log(u) for u in ups) / len(ups))
            data["geomean_speedup_vs_native_ge_1MiB"][label] = g
            lines.append(f"  {label:<10} {g:6.2f}x")
        else:
            lines.append(f"  {label:<10} {'-':>6}")
    by = {(r.label, r.nbytes): r for r in rows}
    ratios = [
        (by[(AUTO, n)].time_us / by[(NATIVE, n)].time_us, n)
        for (label, n) in by
        if label == AUTO and (NATIVE, n) in by and by[(AUTO, n)].time_us and by[(NATIVE, n)].time_us
    ]
    if ratios:
        worst, at = max(ratios)
        data["worst_auto_over_native"] = {"ratio": worst, "nbytes": at}
        lines.append(speedup_verdict(ratios))
    smallest = min((r.nbytes for r in rows), default=None)
    auto, ref = by.get((AUTO, smallest)), by.get((MPI4PY, smallest))
    if auto and ref and auto.time_us and ref.time_us:
        over = auto.time_us / ref.time_us
        data["auto_over_mpi4py_smallest"] = {"ratio": over, "nbytes": smallest}
        verdict = "met" if over <= OVERHEAD_TARGET else "NOT met"
        lines.append(
            f"per-call overhead at {format_bytes(smallest)}: auto {auto.time_us:.2f} us vs mpi4py "
            f"{ref.time_us:.2f} us = {over:.2f}x (target <= {OVERHEAD_TARGET}x: {verdict})"
        )
    bounded = [r for r in rows if r.bound_us and r.time_us]
    if bounded:
        top = max(r.nbytes for r in bounded)
        at_top = {r.label: r for r in bounded if r.nbytes == top}
        best = at_top.get(AUTO) or min(at_top.values(), key=lambda r: r.time_us)
        data["memory_bound"] = {"nbytes": top, "bound_us": best.bound_us,
                                "times_bound": {k: r.time_us / r.bound_us for k, r in at_top.items()}}
        lines.append(
            f"memory-traffic estimate at {format_bytes(top)}: {best.bound_us / 1e3:.3g} ms "
            f"(lpmpi.bench.bound: an estimate, not a floor); {best.label} {best.time_us / 1e3:.3g} ms = "
            f"{best.time_us / best.bound_us:.2f}x the estimate ({100 * best.of_bound:.0f}% of it)")
    peers = sorted(n for (label, n) in by if label == GLOO and (AUTO, n) in by
                   and by[(GLOO, n)].time_us and by[(AUTO, n)].time_us)
    if peers:
        ups = {n: by[(GLOO, n)].time_us / by[(AUTO, n)].time_us for n in peers}
        data["auto_speedup_vs_gloo"] = {str(n): u for n, u in ups.items()}
        lines.append("auto's speed-up over torch.distributed gloo: "
                     + ", ".join(f"{format_bytes(n)} {u:.2f}x" for n, u in ups.items()))
    for comp in dict.fromkeys(r.compression for r in rows if r.compression):   # --compression
        label = f"{AUTO}+{comp}"
        sizes = sorted(n for (lb, n) in by if lb == label and (AUTO, n) in by
                       and by[(label, n)].time_us and by[(AUTO, n)].time_us)
        if sizes:
            ups = {n: by[(AUTO, n)].time_us / by[(label, n)].time_us for n in sizes}
            data.setdefault("compressed_speedup_vs_auto", {})[comp] = {str(n): u for n, u in ups.items()}
            lines.append(f"{label}'s speed-up over uncompressed auto: "
                         + ", ".join(f"{format_bytes(n)} {u:.2f}x" for n, u in ups.items()))
    return lines, data


def environment_header(
    comm: MPI.Comm, args: argparse.Namespace, dtype: np.dtype, sizes: Sequence[int]
) -> dict[str, Any]:
    """Facts about the run, gathered collectively (call on every rank)."""
    import mpi4py  # only for its version

    hosts = comm.allgather(MPI.Get_processor_name())
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        affinity = None
    return {
        "lpmpi_version": getattr(lpmpi, "__version__", "unknown"),
        "mpi_library": lpmpi.tables.library_version_line(),
        "mpi4py_version": mpi4py.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "nprocs": comm.Get_size(),
        "nhosts": len(set(hosts)),
        "hostname": socket.gethostname(),
        "cpu_model": lpmpi.tables.cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "collectives": list(COLLECTIVES) if args.collective == "all" else [args.collective],
        "dtype": dtype.name,
        "op": args.op,
        "root": args.root,
        "memory": args.memory,
        "sizes": list(sizes),
        "warmup": args.warmup,
        "reps": args.reps or f"adaptive {MIN_REPS}..{MAX_REPS}",
        "min_time_s": args.min_time,
        "chunk_bytes": args.chunk_bytes,
        "lpmpi_env": {k: v for k, v in os.environ.items() if k.startswith("LPMPI_")},
    }


def format_header(h: dict[str, Any]) -> list[str]:
    """The header lines printed before the tables (the bandwidth line last, if measured)."""
    if isinstance(h["reps"], int):
        reps = f"{h['reps']} per size"
    else:
        reps = f"{h['reps']}, about {h['min_time_s']} s per size and algorithm"
    procs = f"{h['nprocs']} on {h['nhosts']} host(s); processors here: {h['cpu_count']}"
    if h["cpu_affinity"] is not None:
        procs += f" ({h['cpu_affinity']} usable)"
    if h.get("cpu_model"):                    # every number beside the CPU it was measured on
        procs += f", {h['cpu_model']}"
    what = (
        f"{', '.join(h['collectives'])}  dtype {h['dtype']}  op {h['op']}"
        f"  root {h['root']}  memory {h['memory']}"
    )
    versions = f"{h['mpi4py_version']} / {h['numpy_version']} / {h['python_version']}"
    lines = [
        "# lpmpi benchmark (lpmpi-bench)",
        f"# lpmpi version   : {h['lpmpi_version']}",
        f"# MPI library     : {h['mpi_library']}",
        f"# mpi4py/numpy/py : {versions}",
        f"# processes P     : {procs}",
        f"# hostname        : {h['hostname']}",
        f"# collective      : {what}",
        f"# date            : {h['date']}",
        f"# timing          : warmup {h['warmup']}, reps {reps};",
        "#                   median over reps of the slowest rank, algorithms interleaved",
    ]
    if h["chunk_bytes"]:
        lines.append(f"# chunk_bytes     : {h['chunk_bytes']} (explicit algorithms; not auto)")
    if h.get("transports") is not None:
        tps = ",".join(h["transports"]) or "(none this communicator has)"
        lines.append(f"# transports      : {tps} (one row each for the algorithms that have them)")
    if h["lpmpi_env"]:
        env = " ".join(f"{k}={v}" for k, v in h["lpmpi_env"].items())
        lines.append(f"# environment     : {env}")
    bw = h.get("memory_bandwidth")
    if bw:
        lines.append(
            f"# MEASURED MEMORY BANDWIDTH ({format_bytes(bw['bytes'])} per rank,"
            f" all {h['nprocs']} ranks at once):"
            f" copy {bw['copy_GBps_per_rank']:.1f} GB/s per rank"
            f" ({bw['copy_GBps_aggregate']:.1f} aggregate),"
            f" add {bw['add_GBps_per_rank']:.1f} GB/s per rank"
            f" ({bw['add_GBps_aggregate']:.1f} aggregate)"
        )
    return lines
