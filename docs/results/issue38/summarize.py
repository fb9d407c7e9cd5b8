"""Summarise a box benchmark (boxbench2.sh's output): per layout, collective, size and label the
median over the launches with its range, native / label ratios (median and range over the
launches, each launch's ratio from the same launch), and the ratio to the link bound.

    python docs/results/issue38/summarize.py docs/results/issue38/boxbench2_epyc.txt [--rate 1e9]

Link bound (bits/s rate R, N nodes, n bytes): allreduce 2 n (N-1) / (N R / 8) (every node must
send that much: Patarasuk and Yuan's lower bound), reduce_scatter and allgather n (N-1) / (N R / 8),
bcast and reduce n / (R / 8).
"""
from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict


def bound(coll: str, n: int, nodes: int, rate: float) -> float:
    byte_rate = rate / 8
    if coll == "allreduce":
        return 2 * n * (nodes - 1) / nodes / byte_rate
    if coll in ("reduce_scatter", "allgather"):
        return n * (nodes - 1) / nodes / byte_rate
    return n / byte_rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--rate", type=float, default=1e9, help="NIC rate, bits/s (default 1e9)")
    a = ap.parse_args()
    runs: dict[tuple[str, str, int], dict[int, dict[str, float]]] = defaultdict(dict)
    layout, launch = "", 0
    with open(a.path) as f:
        lines = f.readlines()
    for line in lines:
        m = re.match(r"== layout=(\S+) launch=(\d+)", line)
        if m:
            layout, launch = m.group(1), int(m.group(2))
            continue
        if line.startswith("=="):            # another kind of block (e.g. a forced algorithm)
            launch = 0
            continue
        f = line.split()
        if launch and len(f) == 4 and f[1].isdigit():
            runs[(layout, f[0], int(f[1]))].setdefault(launch, {})[f[2]] = float(f[3]) / 1e3   # ms
    print(f"{'layout':8} {'collective':14} {'size':>6}  {'label':7} {'median ms':>10} {'range ms':>17}  "
          f"{'native/label':>22}  {'/bound':>6}")
    for (layout, coll, n), per in runs.items():
        nodes = len(layout.split(","))
        b = bound(coll, n, nodes, a.rate) * 1e3
        labels = list(dict.fromkeys(k for d in per.values() for k in d))
        for lab in labels:
            ts = [d[lab] for d in per.values() if lab in d]
            rs = [d["native"] / d[lab] for d in per.values() if lab in d and "native" in d]
            med = statistics.median(ts)
            ratio = (f"{statistics.median(rs):5.2f} ({min(rs):.2f}-{max(rs):.2f})"
                     if rs and lab != "native" else "")
            size = f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"
            print(f"{layout:8} {coll:14} {size:>6}  {lab:7} {med:10.1f} {min(ts):8.1f}-{max(ts):<8.1f}  "
                  f"{ratio:>22}  {med / b:6.2f}")


if __name__ == "__main__":
    main()
