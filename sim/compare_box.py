"""The box measured against the box simulated, and the simulation's projection (docs/paper.md,
"Across nodes"): prints the markdown tables of that section.

    python sim/compare_box.py            # after python sim/run.py box ... (see docs/paper.md)

MEASURED: docs/results/issue38/boxbench3_epyc.txt (allreduce 1 and 16 MiB) and
boxbench64_epyc.txt (allreduce 64 MiB native; bcast and reduce 16 MiB), the median over 4 fresh
launches per layout (ms).  SIMULATED: sim/results/box.json (SimGrid SMPI running lpmpi's engine on
sim/platforms/box.xml).  Each cell: measured / simulated.  The box's ``native`` (MPICH 5.0.2's
own collective) is set against SMPI's emulation of MPICH's selection (``smpi-mpich``).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOX = ROOT / "docs" / "results" / "issue38"
MIB = 1 << 20
LAYOUTS = ["1,1", "1,1,1", "1,1,1,1", "2,2", "1,2,1"]


def box_medians(*names: str) -> dict[tuple[str, str, int, str], float]:
    """(layout, collective, bytes, label) -> median ms over the launches of the box's files."""
    runs: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    for name in names:
        layout, launch = "", 0
        for line in (BOX / name).read_text().splitlines():
            m = re.match(r"== layout=(\S+) launch=(\d+)", line)
            if m:
                layout, launch = m.group(1), int(m.group(2))
                continue
            if line.startswith("=="):
                launch = 0
                continue
            f = line.split()
            if launch and len(f) == 4 and f[1].isdigit():
                runs[(layout, f[0], int(f[1]), f[2])].append(float(f[3]) / 1e3)
    return {k: statistics.median(v) for k, v in runs.items()}


def sim_rows(platform: str = "box") -> dict[tuple[str, str, int, str], float]:
    """(layout, collective, bytes, label) -> simulated ms."""
    doc = json.loads((ROOT / "sim" / "results" / f"{platform}.json").read_text())
    return {(r.get("layout"), r["coll"], r["nbytes"], r["label"]): r["time_s"] * 1e3 for r in doc["rows"]}


def fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def comparison(box: dict, sim: dict) -> None:
    print("| layout | size | algorithm | MEASURED box | SIMULATED (engine: W = 4) | ratio | "
          "SIMULATED W = 1 | ratio | SIMULATED box's chunk, W = 1 | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    cells = [("allreduce", MIB, ["lp", "ring", "be", "native"]), ("allreduce", 16 * MIB, ["lp", "ring", "be", "native"]),
             ("allreduce", 64 * MIB, ["native"]), ("bcast", 16 * MIB, ["lp", "mst", "native"]),
             ("reduce", 16 * MIB, ["lp", "mst", "native"])]
    for coll, n, algs in cells:
        for lay in LAYOUTS:
            for alg in algs:
                m = box.get((lay, coll, n, alg))
                if m is None:
                    continue
                lab = "smpi-mpich" if alg == "native" else alg
                s = sim.get((lay, coll, n, lab))
                w1 = sim.get((lay, coll, n, "lp/w1")) if alg == "lp" else None
                ar = sim.get((lay, coll, n, "lp/w1/asrun")) if alg == "lp" else None
                def r(x: float | None, m: float = m) -> str:
                    return f"{m / x:.2f}" if x else "-"
                print(f"| {lay} | {n // MIB} MiB {coll} | {alg}{' (smpi-mpich)' if alg == 'native' else ''} | "
                      f"{fmt(m)} | {fmt(s)} | {r(s)} | {fmt(w1)} | {r(w1)} | {fmt(ar)} | {r(ar)} |")


def projection(sim: dict, coll: str, n: int, labels: list[str], Ns: list[int], title: str = "", nd: int = 1) -> None:
    print(f"\n{title}{coll} {n // MIB} MiB, 1 rank per node (ms):\n")
    print("| N | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for N in Ns:
        lay = ",".join(["1"] * N)
        vals = [sim.get((lay, coll, n, lab)) for lab in labels]
        if any(v is not None for v in vals):
            print(f"| {N} | " + " | ".join(fmt(v, nd) for v in vals) + " |")


# MODELLED (alpha-beta, one rank per node, one NIC each: alpha = 6 us a message, beta = 1 / 125 MB/s;
# lp with one chunk in flight per direction, i.e. an ordered link): the formulas the simulation
# follows at N <= 256 (printed against it below), used for N = 1024, which was not simulated
ALPHA, BETA = 6e-6, 1 / 125e6


def model(coll: str, alg: str, N: int, n: float, c: float | None = None) -> float:
    """Seconds; lp with chunk c (None: the c minimising it, any real)."""
    a, b, lg = ALPHA, BETA, (N - 1).bit_length()
    if alg == "lp":
        if coll == "allreduce":      # 2n through a middle NIC; 2N - 3 hops of fill; n / (2c) chunks a chain
            h, bw, k = 2 * N - 3, 2 * n * b, n / 2
        else:                        # bcast, reduce: n per NIC, N - 2 hops of fill, n / c chunks
            h, bw, k = N - 2, n * b, n
        c = c or (k * a / (h * b)) ** 0.5
        return bw + h * c * b + (k / c + h) * a
    if alg == "be":                  # N a power of two: recursive halving and doubling
        return 2 * (N - 1) / N * n * b + 2 * lg * a
    if alg == "ring":
        return 2 * (N - 1) / N * n * b + 2 * (N - 1) * a
    if alg == "mst":                 # binomial trees, whole messages: log2 N rounds (x2 for allreduce)
        return (2 if coll == "allreduce" else 1) * lg * (n * b + a)
    raise ValueError(alg)


def modelled(sim: dict) -> None:
    print("\nMODELLED against SIMULATED (lp: 16 KiB chunks, W = 1), ms:\n")
    print("| collective | N | algorithm | SIMULATED | MODELLED |")
    print("|---|---|---|---|---|")
    for coll, n, alg, lab in [("allreduce", 16 * MIB, "lp", "lp/16K/w1"), ("allreduce", 64 * MIB, "lp", "lp/16K/w1"),
                              ("bcast", 16 * MIB, "lp", "lp/16K/w1"), ("allreduce", 16 * MIB, "be", "be"),
                              ("allreduce", 16 * MIB, "ring", "ring"), ("allreduce", 16 * MIB, "mst", "mst"),
                              ("bcast", 16 * MIB, "mst", "mst")]:
        for N in (16, 64, 256):
            s = sim.get((",".join(["1"] * N), coll, n, lab))
            if s is not None:
                m = model(coll, alg, N, n, 16384 if alg == "lp" else None) * 1e3
                print(f"| {coll} {n // MIB} MiB | {N} | {lab} | {s:.1f} | {m:.1f} |")
    print("\nMODELLED, N = 1024 (lp: its best chunk, W = 1; in brackets with 16 KiB chunks), ms:\n")
    print("| collective | lp | ring | be | mst |")
    print("|---|---|---|---|---|")
    for coll, n in (("allreduce", 16 * MIB), ("allreduce", 64 * MIB), ("bcast", 16 * MIB)):
        N = 1024
        lp = f"{model(coll, 'lp', N, n) * 1e3:.0f} ({model(coll, 'lp', N, n, 16384) * 1e3:.0f})"
        rest = [f"{model(coll, a, N, n) * 1e3:.0f}" if coll == "allreduce" or a == "mst" else "-"
                for a in ("ring", "be", "mst")]
        print(f"| {coll} {n // MIB} MiB | {lp} | " + " | ".join(rest) + " |")


def main() -> int:
    box = box_medians("boxbench3_epyc.txt", "boxbench64_epyc.txt")
    sim = sim_rows("box")
    comparison(box, sim)
    Ns = [2, 3, 4, 8, 16, 64, 256]
    for n in (16 * MIB, 64 * MIB):
        projection(sim, "allreduce", n, ["lp", "lp/w1", "lp/16K/w1", "ring", "be", "mst", "smpi-mpich"], Ns)
    for coll in ("bcast", "reduce"):
        projection(sim, coll, 16 * MIB, ["lp", "lp/w1", "lp/16K/w1", "mst"], Ns)
    modelled(sim)
    if (ROOT / "sim" / "results" / "box100g.json").exists():
        s100 = sim_rows("box100g")
        for n in (16 * MIB, 64 * MIB):
            projection(s100, "allreduce", n, ["lp", "lp/w1", "ring", "be", "mst"], [2, 4, 8, 16, 64], "100 Gbit/s: ", 2)
        projection(s100, "bcast", 16 * MIB, ["lp", "lp/w1", "mst"], [2, 4, 8, 16, 64], "100 Gbit/s: ", 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
