"""Summarizes ddp_box.sh's OUTDIR: the step time per layout and configuration (median over the
launches of each launch's median step time, with the launches' range, and its ratio to gloo +
fp16_compress_hook), then the 4-rank loss curves (compressed against the three seeds' spread).

    python docs/results/issue49/ddp_summary.py OUTDIR
"""
from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

STEP = re.compile(r"median step time ([0-9.]+) ms")


def main(out: Path) -> None:
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f in sorted(out.glob("step_*.txt")):
        layout, conf, _ = f.stem[len("step_"):].rsplit("_", 2)
        m = STEP.search(f.read_text())
        if m:
            times[(layout, conf)].append(float(m.group(1)))
        else:
            print(f"no step time in {f.name}")
    print("| layout | configuration | step time, ms: median (range) | launches | vs gloo + fp16 hook |")
    print("|---|---|---|---|---|")
    for layout in sorted({k[0] for k in times}):
        ref = times.get((layout, "gloo-fp16"))
        refm = statistics.median(ref) if ref else None
        for conf in ("gloo", "gloo-fp16", "lpmpi", "lpmpi-int8-ef", "lpmpi-int4-ef"):
            t = times.get((layout, conf))
            if not t:
                continue
            med = statistics.median(t)
            ratio = f"{med / refm:.2f}x" if refm else "-"
            print(f"| {layout.replace('x', ' x ')} | {conf} | {med:.2f} ({min(t):.2f}-{max(t):.2f}) | {len(t)} | {ratio} |")
    seeds = [out / f"loss_none_{s}.npz" for s in range(3)]
    if all(p.exists() for p in seeds):
        ref = np.array([np.load(p)["losses"] for p in seeds])
        lo, hi = ref.min(0), ref.max(0)
        print("\nloss at 4 ranks across the box (every 10 steps): seeds 0-2 uncompressed [min, max] vs compressed seed 0")
        at = np.arange(9, ref.shape[1], 10)
        print("step   " + " ".join(f"{i + 1:>13d}" for i in at))
        print("seeds  " + " ".join(f"[{lo[i]:.3f},{hi[i]:.3f}]" for i in at))
        for c in ("int8", "int4"):
            p = out / f"loss_{c}_0.npz"
            if p.exists():
                got = np.load(p)["losses"]
                inside = sum(lo[i] - 0.15 <= got[i] <= hi[i] + 0.15 for i in at)
                print(f"{c:6s} " + " ".join(f"{got[i]:>13.3f}" for i in at) +
                      f"   ({inside}/{at.size} within the seeds' spread +- 0.15)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
