"""``lpmpi-bench --online``: the online tuner (``LPMPI_AUTOTUNE``) in a training loop.

Per size, on a fresh communicator with the tuner on, ``--calls`` blocking calls of the
collective in a row (as data-parallel training repeats its gradient buckets), each after a
barrier and timed (the slowest rank's time); then the exhaustive grid (every algorithm x chunk x
node-local transport, ``--compare-grid``'s), the static choice (the table's or the model's:
``auto`` without the tuner) and MPI's own, measured side by side in the same run.  It reports
the calls the key took to settle, the exploration's cost (the first 64 calls against 64 calls of
the grid's best), and the settled time (the median of the last 32 calls) against the grid's best.

With ``--busy``, a busy process (one spinning Python process per node, started by the node's
lowest rank) joins after those calls; ``--calls`` more calls follow under the load, the grid is
measured again under it, then the process leaves and ``--calls`` more calls follow: the choice
under load against the grid under load (within 1.25x after 64 calls is the target), and back
against the quiet grid after it left (1.10x).

    mpiexec -n 2 lpmpi-bench --online --sizes 4K,64K,1M,64M [--busy] [--json out.json]
"""
from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core
from lpmpi._units import chunk_label, format_bytes
from lpmpi.bench import harness
from lpmpi.bench.cases import AUTO, NATIVE, Case, Settings
from lpmpi.bench.grid import TUNED, grid_cases
from lpmpi.bench.rows import run_size
from lpmpi.bench.verify import make_buffers, whole_blocks

SETTLE_TARGET = 64      # calls
SETTLED_TAIL = 32       # calls whose median is the settled time


def _series(comm: MPI.Comm, call: Callable[[], Any], n: int) -> np.ndarray:
    """n calls, each after a barrier, timed; the slowest rank's time of each (one reduction)."""
    local = np.zeros(n)
    clock = time.perf_counter
    for i in range(n):
        comm.Barrier()
        t0 = clock()
        call()
        local[i] = clock() - t0
    return harness.max_over_ranks(comm, local)


def _blocks(comm: MPI.Comm, calls: Sequence[Callable[[], Any]], per: int, rounds: int = 4) -> list[float]:
    """Each call's median time (the slowest rank's, seconds) over ``rounds`` rounds of ``per``
    consecutive calls of each, in an order rotated by round: blocks of the same call as a
    training loop makes them (call-by-call interleaving would make every call of an "auto"
    under the tuner follow another configuration's, which it is not in a program, and which its
    drift watch would see as a change of the machine)."""
    times: list[list[float]] = [[] for _ in calls]
    for r in range(rounds):
        for j in range(len(calls)):
            i = (j + r) % len(calls)
            calls[i]()                                  # the block's first call: its plan again
            times[i] += list(_series(comm, calls[i], per))
    return [float(np.median(t)) for t in times]


def _warm(comm: MPI.Comm) -> None:
    """One lpmpi call on comm of a key no size of the run shares (a 1-byte bcast)."""
    lpmpi.bcast(np.zeros(1, np.uint8), root=0, comm=comm)


def _busy(comm: MPI.Comm, on: bool, procs: list[subprocess.Popen]) -> None:
    """Start (on) or stop the busy process of this rank's node (its lowest rank's)."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    lead = node.Get_rank() == 0
    node.Free()
    if on and lead:
        procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    elif not on:
        for p in procs:
            p.kill()
            p.wait()
        procs.clear()
    comm.Barrier()
    time.sleep(0.05 if on else 0.0)


def _grid(comm: MPI.Comm, s: Settings, count: int, tuned_call: Callable[[], Any]) -> dict[str, Any]:
    """On the tuner's communicator ``comm`` (its own node-local segment: on some machines a
    segment runs in a fast or a slow spell for its whole life, docs/autotune.md): the grid
    (screening, every explicit configuration, untouched by the tuner), then its best, the static
    choice (the table's or the model's, as an explicit configuration), MPI's own and the tuned
    call (auto, settled: its windows' agreements included) measured again side by side in
    blocks of consecutive calls (:func:`_blocks`): the times reported."""
    nbytes = whole_blocks(s.collective, count, comm.Get_size()) * s.dtype.itemsize
    from lpmpi.bench.cases import make_call
    from lpmpi.bench.nodes import node_transports

    cases = [c for c in grid_cases(s.collective, nbytes, comm.Get_size(), "host", node_transports(comm))
             if c.label not in (TUNED, AUTO)]
    rows = run_size(comm, s, count, cases)
    timed = [r for r in rows if r.time_us and not r.error]
    best = min(timed, key=lambda r: r.time_us or math.inf)
    by = {r.label: r for r in rows}
    from lpmpi import engine
    bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, comm.Get_rank(), s.root, comm.Get_size())
    kb = _core.call_decision(s.collective, bufs.send, bufs.recv, s.op, s.root, comm)["key"][2]
    alg, chunk, _, _, _ = _core.choice(s.collective, kb, comm)       # the static decision (table, model)
    tp = _core.transport_choice(s.collective, kb, comm)[0] if engine.has_transports(s.collective, alg) else None
    finals = {"best": next(c for c in cases if c.label == best.label), "static": Case("static", alg, chunk, tp)}
    if NATIVE in by:
        finals["native"] = Case(NATIVE, NATIVE)
    calls = [make_call(c, s.collective, bufs, s.op, s.root, comm) for c in finals.values()] + [tuned_call]
    t = _blocks(comm, calls, per=max(8, min(32, int(s.min_time / max(best.time_us or 1, 1) * 1e6 / 4))))
    us = {k: t[i] * 1e6 for i, k in enumerate(finals)}
    return {"best": best.label, "best_us": us["best"], "screen_best_us": best.time_us, "grid_size": len(timed),
            "static_us": us["static"], "static": chunk_label(alg, chunk, None, tp),
            "native_us": us.get("native"), "tuned_us": t[-1] * 1e6}


def _phase(times: np.ndarray) -> dict[str, Any]:
    tail = times[-SETTLED_TAIL:]
    return {"calls": int(times.size), "median_us": float(np.median(times) * 1e6),
            "tail_median_us": float(np.median(tail) * 1e6), "series_us": [round(t * 1e6, 3) for t in times]}


def run_online(comm: MPI.Comm, s: Settings, counts: Sequence[int], ncalls: int, busy: bool,
               out: Callable[[str], None]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The training-loop benchmark of the online tuner (module doc); rows per size."""
    rows: list[dict[str, Any]] = []
    procs: list[subprocess.Popen] = []
    from lpmpi import tables

    st = tables.status()
    applies = bool(st.tables_for(comm.Get_size()))
    out(f"# online tuner: {s.collective}, {ncalls} calls per phase; tables: {st.source}"
        f"{'' if applies else ' (none applies at this P: the cost model is the start)'}")
    out(f"{'size':>9} {'settle':>6} {'explore':>8} {'excess':>8} {'tuned_us':>10} {'grid_best':<16} "
        f"{'best_us':>10} {'ratio':>6} {'static_us':>10} {'native_us':>10}  choice")
    out("#   settle: calls to settle; explore: the first 64 calls over 64 x the grid's best; excess: over 64 x"
        " the loop's own settled level; tuned/best/static/native: after the loop, in rotated blocks of"
        " consecutive calls on the tuner's communicator")
    prev = _core.set_autotune(True)
    try:
        for count in counts:
            count = whole_blocks(s.collective, count, comm.Get_size())
            nbytes = count * s.dtype.itemsize
            tuned = comm.Dup()           # a fresh context: the tuner's keys start empty
            bufs = make_buffers(s.backend, s.collective, count, s.dtype, s.op, comm.Get_rank(), s.root,
                                comm.Get_size())
            from lpmpi.bench.cases import make_call

            call = make_call(Case(AUTO, AUTO), s.collective, bufs, s.op, s.root, tuned)
            # the context's setup (its duplicates, node map, table agreement, transports) by a
            # call of another key, not counted as exploration: a program pays it once per
            # communicator, tuner or not
            _warm(tuned)
            quiet = _series(comm, call, ncalls)
            grid = _grid(tuned, s, count, call)
            kb = _core.call_decision(s.collective, bufs.send, bufs.recv, s.op, s.root, tuned)["key"][2]
            key = _core.autotune_key(s.collective, kb, tuned, itemsize=s.dtype.itemsize)
            row: dict[str, Any] = {"collective": s.collective, "nbytes": nbytes, "quiet": _phase(quiet),
                                   "grid": grid, "key": key}
            best = grid["best_us"] * 1e-6
            first = quiet[:SETTLE_TARGET]
            row["explore_cost"] = float(first.sum() / (first.size * best) - 1) if best else None
            # the same against the loop's own settled level (what the loop's timing adds to every
            # call, a barrier's skew, is left out)
            row["explore_excess"] = float(first.sum() / (first.size * np.median(quiet[-SETTLED_TAIL:])) - 1)
            row["settled_ratio"] = grid["tuned_us"] / grid["best_us"] if grid["best_us"] else None
            row["vs_native"] = grid["native_us"] / grid["tuned_us"] if grid["native_us"] else None
            choice = _choice(key)
            out(f"{format_bytes(nbytes):>9} {key['settle_calls'] if key else '-':>6} "
                f"{_pct(row['explore_cost']):>8} {_pct(row['explore_excess']):>8} {grid['tuned_us']:10.1f} "
                f"{grid['best']:<16} {grid['best_us']:10.1f} {row['settled_ratio']:6.2f} "
                f"{grid['static_us'] or math.nan:10.1f} {grid['native_us'] or math.nan:10.1f}  {choice}")
            if busy:
                _busy(comm, True, procs)
                loaded = _series(comm, call, ncalls)
                grid_l = _grid(tuned, s, count, call)
                _busy(comm, False, procs)
                after = _series(comm, call, ncalls)
                key2 = _core.autotune_key(s.collective, kb, tuned, itemsize=s.dtype.itemsize)
                row.update(loaded=_phase(loaded), grid_loaded=grid_l, after=_phase(after), key_after=key2,
                           loaded_ratio=grid_l["tuned_us"] / grid_l["best_us"],
                           loaded_tail_ratio=row_ratio(loaded, grid_l["best_us"]),
                           after_ratio=row_ratio(after, grid["best_us"]))
                out(f"{'':>9} busy: after {ncalls} calls under load the tuned call {grid_l['tuned_us']:.1f} us vs "
                    f"the grid's best under load {grid_l['best']} {grid_l['best_us']:.1f} us "
                    f"({row['loaded_ratio']:.2f}x; calls {ncalls - SETTLED_TAIL + 1}-{ncalls} in the loop "
                    f"{row['loaded']['tail_median_us']:.1f} us); after it left "
                    f"{row['after']['tail_median_us']:.1f} us ({row['after_ratio']:.2f}x the quiet best); "
                    f"drifts {key2['drifts_slower'] if key2 else '-'} slower / "
                    f"{key2['drifts_faster'] if key2 else '-'} faster; now {_choice(key2)}")
            tuned.Free()
            rows.append(row)
    finally:
        _busy(comm, False, procs)
        _core.set_autotune(prev)
    ratios = [r["settled_ratio"] for r in rows if r["settled_ratio"]]
    costs = [r["explore_cost"] for r in rows if r["explore_cost"] is not None]
    summary = {"worst_settled_ratio": max(ratios, default=None), "worst_explore_cost": max(costs, default=None),
               "worst_vs_native": min([r["vs_native"] for r in rows if r["vs_native"]], default=None),
               "settle_calls": [r["key"]["settle_calls"] if r["key"] else None for r in rows]}
    out(f"# worst settled/grid-best {summary['worst_settled_ratio'] or math.nan:.2f}x (target <= 1.10), "
        f"worst exploration cost {_pct(summary['worst_explore_cost'])} of the first {SETTLE_TARGET} calls "
        f"at the grid's best (target <= 20%), worst MPI's own / tuned "
        f"{summary['worst_vs_native'] or math.nan:.2f}x (target >= 0.95)")
    return rows, summary


def row_ratio(times: np.ndarray, best_us: float | None) -> float | None:
    return float(np.median(times[-SETTLED_TAIL:]) * 1e6 / best_us) if best_us else None


def _choice(key: dict[str, Any] | None) -> str:
    if not key or key["choice"] is None:
        return "-"
    c = key["candidates"][key["choice"]]
    return (c["algorithm"] + (f"/{format_bytes(c['chunk_bytes'])}" if c["chunk_bytes"] else "")
            + (f"@{c['transport']}" if c["transport"] else "") + f" [{key['state']}]")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.0f}%"


def plot(rows: Sequence[dict[str, Any]], path: str) -> str | None:
    """Per-call time over the run, one panel per size (matplotlib, when installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'lpmpi[examples]'): no plot"
    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 2.6 * len(rows)), squeeze=False)
    for ax, r in zip(axes[:, 0], rows):
        series = r["quiet"]["series_us"] + r.get("loaded", {}).get("series_us", []) + r.get("after", {}).get("series_us", [])
        ax.plot(range(1, len(series) + 1), series, lw=0.8, label="auto + LPMPI_AUTOTUNE (per call)")
        ax.axhline(r["grid"]["best_us"], color="g", ls="--", lw=0.8, label=f"grid best {r['grid']['best']}")
        if r["grid"]["static_us"]:
            ax.axhline(r["grid"]["static_us"], color="r", ls=":", lw=0.8, label="static auto (table/model)")
        if "grid_loaded" in r:
            n = r["quiet"]["calls"]
            ax.hlines(r["grid_loaded"]["best_us"], n, n + r["loaded"]["calls"], color="m", ls="--", lw=0.8,
                      label="grid best under load")
        ax.set_yscale("log")
        ax.set_title(f"{r['collective']} {format_bytes(r['nbytes'])}: MEASURED", fontsize=9)
        ax.set_ylabel("us")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("call")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None

