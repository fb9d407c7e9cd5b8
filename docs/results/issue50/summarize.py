"""Summarizes run.sh's OUTDIR(s): per configuration and build tag, per size, MPI's own / tuned
(>= 0.95 is the target) and settled / grid's best, over the launches: median (min-max).

    python docs/results/issue50/summarize.py DIR [DIR ...]
"""
from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def main(dirs: list[str]) -> None:
    vs: dict[tuple[str, int], list[float]] = defaultdict(list)
    sr: dict[tuple[str, int], list[float]] = defaultdict(list)
    choice: dict[tuple[str, int], list[str]] = defaultdict(list)
    for d in dirs:
        for f in glob.glob(os.path.join(d, "*.json")):
            name = re.sub(r"_\d+(?=(_[a-z]+)?$)", "", os.path.basename(f)[:-5])
            try:
                with open(f) as fh:
                    rows = json.load(fh)["online"]
            except (KeyError, ValueError):
                continue
            for r in rows:
                n = r["nbytes"] if "nbytes" in r else r["key"]["nbytes"]
                if r.get("vs_native"):
                    vs[(name, int(n))].append(r["vs_native"])
                if r.get("settled_ratio"):
                    sr[(name, int(n))].append(r["settled_ratio"])
                choice[(name, int(n))].append(str(r.get("choice", "")))
    names = sorted({k[0] for k in vs} | {k[0] for k in sr})
    sizes = sorted({k[1] for k in vs} | {k[1] for k in sr})
    fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
    print("MPI's own / tuned (target >= 0.95), then settled / grid's best (target <= 1.10): median (min-max)")
    print("| configuration | " + " | ".join(f"{s} B" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for nm in names:
        print(f"| {nm} | " + " | ".join(f"{fmt(vs[(nm, s)])} / {fmt(sr[(nm, s)])}" for s in sizes) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
