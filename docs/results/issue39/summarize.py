"""Summarize docs/results/issue39/perf.sh's launches: per collective and size, auto's and
native's (MPICH's own call through lpmpi) median time over the launches, auto/native speed-up
per launch (median, min, max), and mpi4py's own call where the bench measured it.

    python docs/results/issue39/summarize.py docs/results/issue39/perf
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main(d: str) -> None:
    rows = defaultdict(lambda: defaultdict(list))   # (coll, size) -> label -> [us per launch]
    picks = defaultdict(set)
    for f in sorted(Path(d).glob("*.json")):
        data = json.loads(f.read_text())
        for r in data["rows"]:
            if r.get("time_us") is None:
                continue
            key = (r["collective"], r["nbytes"])
            rows[key][r["label"]].append(r["time_us"])
            if r["label"] == "auto" and r.get("selected_algorithm"):
                picks[key].add(r["selected_algorithm"])
    print("collective      size   auto med us   native med us   mpi4py med us   auto/native speed-up per launch: med (min-max)   auto picks")
    for (c, n), lab in sorted(rows.items()):
        a, nat, m = lab.get("auto", []), lab.get("native", []), lab.get("mpi4py", [])
        sp = [x / y for x, y in zip(nat, a)]
        med = lambda v: f"{statistics.median(v):12.2f}" if v else f"{'-':>12}"  # noqa: E731
        s = f"{statistics.median(sp):.2f}x ({min(sp):.2f}-{max(sp):.2f}, n={len(sp)})" if sp else "-"
        print(f"{c:<12} {n:>8} {med(a)}   {med(nat)}    {med(m)}    {s:<40} {','.join(sorted(picks[(c, n)]))}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/issue39/perf")
