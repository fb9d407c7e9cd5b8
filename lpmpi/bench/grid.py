"""``python -m lpmpi.bench --compare-grid``: per size, the exhaustive grid (every algorithm x
chunk sizes in powers of two) against the tuning table's choice and ``auto``, that is the
tuner's regret, in two passes (screening, then confirmation of the finalists).

    mpiexec -n 2 python -m lpmpi.bench --compare-grid --collective all --sizes 8:64MiB:x4 --json grid.json
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from mpi4py import MPI

from lpmpi._units import chunk_label, format_bytes
from lpmpi.bench.cases import AUTO, NATIVE, Case, Row, Settings
from lpmpi.bench.memory import selection_memory
from lpmpi.bench.report import num, pct, speedup_verdict
from lpmpi.bench.rows import run_size

TUNED = "tuned"
REGRET_TARGET = 0.05  # "auto" within 5% of the exhaustive grid's best
CONFIRM_TOP = 3       # grid configurations that go on from the screening pass to the confirmation
CONFIRM_TIME = 3.0    # the confirmation's timed calls per configuration, in --min-time units


def tuned_choice(collective: str, nbytes: int, nprocs: int,
                 memory: str = "host") -> tuple[str, int | None, str | None] | None:
    """The loaded tuning table's (algorithm, chunk, transport) for this size, P and memory kind,
    or None."""
    from lpmpi import tables

    for table in tables.status().tables_for(nprocs, memory):
        row = table.lookup(collective, nbytes)
        if row is not None:
            return row.algorithm, row.chunk_bytes, row.transport
    return None


def grid_cases(collective: str, nbytes: int, nprocs: int, memory: str = "host",
               transports: Sequence[str] = ()) -> list[Case]:
    """The exhaustive grid (native first; the algorithms with node-local transports once per
    transport of ``transports``, host memory), then the table's choice (``tuned``) and ``auto``."""
    from lpmpi import engine, model

    grid = sorted(model.grid(collective, nbytes), key=lambda g: g[0] != NATIVE)
    cases = []
    for alg, chunk in grid:
        over = ([t for t in transports if t in engine.ring_transports(collective)]
                if memory == "host" and transports and engine.has_transports(collective, alg) else [None])
        cases += [Case(chunk_label(alg, chunk, None, t), alg, chunk, t) for t in over]
    tuned = tuned_choice(collective, nbytes, nprocs, memory)
    if tuned is not None:
        cases.append(Case(TUNED, *tuned))
    cases.append(Case(AUTO, AUTO))
    return cases


@dataclass
class GridRow:
    """One size of ``--compare-grid``: the grid's best against the tuned choice and ``auto``.

    Times are from the confirmation pass (:func:`run_compare_grid`); ``screen_best`` and
    ``screen_best_us`` are the grid's fastest in the screening pass over the whole grid."""

    collective: str
    nbytes: int
    grid_size: int
    best: str
    best_us: float
    native_us: float | None
    tuned: str | None
    tuned_us: float | None
    auto: str
    auto_us: float | None
    screen_best: str = ""
    screen_best_us: float | None = None

    def regret(self, t_us: float | None) -> float | None:
        """Relative excess time over the grid's best."""
        return t_us / self.best_us - 1 if t_us and self.best_us else None


def is_grid_label(label: str) -> bool:
    """A row of the exhaustive grid (not the ``tuned`` or ``auto`` one)."""
    return label not in (TUNED, AUTO)


def finalists(screen: Sequence[Row], top: int) -> list[str]:
    """Labels of the confirmation pass: the ``top`` fastest grid rows of the screening pass,
    native, and the tuned and auto rows."""
    grid = sorted((r for r in screen if is_grid_label(r.label) and r.time_us), key=lambda r: r.time_us or 0)
    keep = [r.label for r in grid[:top]] + [NATIVE, TUNED, AUTO]
    present = {r.label for r in screen if r.time_us}
    return [label for label in dict.fromkeys(keep) if label in present]


def grid_row(collective: str, nbytes: int, screen: Sequence[Row], confirm: Sequence[Row] | None = None) -> GridRow:
    """Summarise one size: ``screen`` measured with :func:`grid_cases`; ``confirm`` (default:
    the screen itself) the finalists measured again, whose times the row reports."""
    confirm = screen if confirm is None else confirm
    by = {r.label: r for r in confirm}
    grid = [r for r in confirm if is_grid_label(r.label) and r.time_us]
    best = min(grid, key=lambda r: r.time_us or math.inf)
    screened = [r for r in screen if is_grid_label(r.label) and r.time_us]
    screen_best = min(screened, key=lambda r: r.time_us or math.inf)
    tuned, auto = by.get(TUNED), by[AUTO]
    native = by.get(NATIVE)
    return GridRow(
        collective,
        nbytes,
        sum(is_grid_label(r.label) for r in screen),
        best.label,
        best.time_us or math.nan,
        native.time_us if native else None,
        chunk_label(tuned.algorithm or "?", tuned.chunk_bytes) if tuned else None,
        tuned.time_us if tuned else None,
        chunk_label(auto.selected_algorithm or "?", auto.selected_chunk_bytes),
        auto.time_us,
        screen_best.label,
        screen_best.time_us,
    )


def format_grid_row(g: GridRow) -> str:
    """One line of the regret table."""
    return (
        f"{format_bytes(g.nbytes):>10}  {g.grid_size:>4}  {g.best:<10} {num(g.best_us):>11}  "
        f"{g.tuned or '-':<10} {num(g.tuned_us):>11} {pct(g.regret(g.tuned_us)):>8}  "
        f"{g.auto:<10} {num(g.auto_us):>11} {pct(g.regret(g.auto_us)):>8}  {num(g.native_us):>11}"
    )


GRID_HEADER = (
    f"{'size':>10}  {'grid':>4}  {'grid_best':<10} {'best_us':>11}  {'tuned':<10} {'tuned_us':>11} "
    f"{'regret':>8}  {'auto':<10} {'auto_us':>11} {'regret':>8}  {'native_us':>11}"
)


def summarize_grid(grows: Sequence[GridRow]) -> tuple[list[str], dict[str, Any]]:
    """The worst regrets, whether auto met the target, and whether it is ever slower than native."""
    regrets = [(g.regret(g.auto_us), g.nbytes) for g in grows if g.regret(g.auto_us) is not None]
    tuned = [(g.regret(g.tuned_us), g.nbytes) for g in grows if g.regret(g.tuned_us) is not None]
    vs_native = [(g.auto_us / g.native_us, g.nbytes) for g in grows if g.auto_us and g.native_us]
    data: dict[str, Any] = {"sizes": len(grows), "target": REGRET_TARGET}
    lines = []
    for name, values in (("auto", regrets), ("tuned", tuned)):
        if values:
            worst, at = max(values)
            over = [n for r, n in values if r > REGRET_TARGET]
            data[f"worst_{name}_regret"] = {"regret": worst, "nbytes": at, "sizes_over_target": over}
            lines.append(
                f"worst {name} regret: {pct(worst)} at {format_bytes(at)}; "
                f"{len(over)} of {len(values)} sizes over {pct(REGRET_TARGET)}"
            )
    if vs_native:
        worst, at = max(vs_native)
        data["worst_auto_over_native"] = {"ratio": worst, "nbytes": at}
        lines.append(speedup_verdict(vs_native))
    # tuned and auto run the same configuration wherever auto follows the table: how far apart
    # their two times are is the noise of this very measurement, the yardstick for the regrets
    twins = sorted(abs(g.auto_us - g.tuned_us) / min(g.auto_us, g.tuned_us) for g in grows
                   if g.auto == g.tuned and g.auto_us and g.tuned_us)
    if twins:
        data["noise"] = {"median": twins[len(twins) // 2], "max": twins[-1], "sizes": len(twins)}
        lines.append(f"noise: tuned and auto (the same configuration) differ by {pct(twins[len(twins) // 2])[1:]} "
                     f"(median), {pct(twins[-1])[1:]} (max) over {len(twins)} sizes")
    return lines, data


def run_compare_grid(
    comm: MPI.Comm, s: Settings, counts: Sequence[int], out: Callable[[str], None],
    transports: Sequence[str] = (),
) -> tuple[list[Row], dict[str, Any]]:
    """``--compare-grid`` for one collective, per size in two passes:

    1. screening: every algorithm x chunk (powers of two), the tuned choice and ``auto``, side by
       side (interleaved), results checked;
    2. confirmation: the ``CONFIRM_TOP`` fastest grid configurations, native, tuned and ``auto``
       measured again side by side with ``CONFIRM_TIME`` times the calls.

    ``transports``: the node-local transports the grid tries for the algorithms that have them
    (the tuner's transport dimension); empty: the engine's own choice.

    The regret is taken from the confirmation.  The screening's minimum over some forty
    configurations, many of them within noise of each other, is biased low (the luckiest of
    many draws), so taken alone it shows a regret for "auto" even where auto picks the truly
    fastest configuration; measuring the finalists again, independently, removes most of that
    bias.  Prints the regret table."""
    nprocs = comm.Get_size()
    out("")
    out(f"# {s.collective} --compare-grid  dtype={s.dtype.name}  op={s.op}  P={nprocs}  "
        f"(times: confirmation pass of the {CONFIRM_TOP} fastest grid configurations, native, tuned, auto)")
    out(GRID_HEADER)
    rows: list[Row] = []
    grows: list[GridRow] = []
    confirm_settings = replace(s, check=False, min_time=s.min_time * CONFIRM_TIME,
                               reps=None if s.reps is None else int(s.reps * CONFIRM_TIME))
    for count in counts:
        nbytes = count * s.dtype.itemsize
        cases = grid_cases(s.collective, nbytes, nprocs, selection_memory(s.backend), transports)
        screen = run_size(comm, s, count, cases)
        keep = finalists(screen, CONFIRM_TOP)
        confirm = run_size(comm, confirm_settings, count, [c for c in cases if c.label in keep])
        rows.extend(screen)
        grows.append(grid_row(s.collective, nbytes, screen, confirm))
        out(format_grid_row(grows[-1]))
    lines, data = summarize_grid(grows)
    data["rows"] = [asdict(g) for g in grows]
    out(f"# summary ({s.collective} --compare-grid, P={nprocs})")
    for line in lines:
        out("  " + line)
    return rows, data
