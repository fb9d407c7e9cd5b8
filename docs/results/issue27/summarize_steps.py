"""Median step time (steps 3..12 of each launch) per launch, and lpmpi's speed-up over gloo
per pair of launches (read from steps.sh's output on stdin)."""
import json
import statistics
import sys

runs = {}
for line in sys.stdin:
    if not line.startswith("RUN "):
        print(line.rstrip())
        continue
    head, _, js = line.partition(" {")
    kv = dict(p.split("=", 1) for p in head.split()[1:])
    d = json.loads("{" + js)
    runs[(kv["mode"], int(kv["pair"]), kv["backend"])] = (statistics.median(d["step_s"][2:]), kv["pinned"])
for mode in ("ddp", "fsdp2"):
    pairs = sorted({p for m, p, _ in runs if m == mode})
    if not pairs:
        continue
    ratios = []
    print(f"\n{mode}: step time, median of steps 3..12 (ms)")
    for p in pairs:
        lp, pin = runs[(mode, p, "lpmpi")]
        gl, _ = runs[(mode, p, "gloo")]
        ratios.append(gl / lp)
        print(f"  pair {p} {'pinned  ' if pin else 'unpinned'}  lpmpi {lp * 1e3:7.2f}  gloo {gl * 1e3:7.2f}  gloo/lpmpi {gl / lp:.2f}x")
    print(f"  speed-up gloo/lpmpi: median {statistics.median(ratios):.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x")
