"""Pair the A/B launches (ab.sh): per size and algorithm, new/base time per round, median [min max]."""
import re
import statistics
import sys

d = sys.argv[1]
def load(p):
    runs, cur = [], None
    for line in open(p):
        if line.startswith("==="):
            cur = {}; runs.append((line.strip(), cur)); continue
        m = re.match(r"\s+(\d+)\s+(auto|native)\s+([\d.]+)", line)
        if m and cur is not None:
            cur[(int(m.group(1)), m.group(2))] = float(m.group(3))
    return runs
b, n = load(f"{d}/base.log"), load(f"{d}/new.log")
keys = sorted({k for _, r in b for k in r})
print(f"{'size':>9} {'alg':>7} {'base med us':>12} {'new med us':>11} {'new/base per pair: median [min max]':>38}")
for k in keys:
    rb = [r[k] for _, r in b if k in r]; rn = [r[k] for _, r in n if k in r]
    ratios = [y / x for (_, x0), (_, y0) in zip(b, n) if k in x0 and k in y0 for x, y in [(x0[k], y0[k])]]
    print(f"{k[0]:>9} {k[1]:>7} {statistics.median(rb):>12.2f} {statistics.median(rn):>11.2f} "
          f"{statistics.median(ratios):>10.3f} [{min(ratios):.3f} {max(ratios):.3f}]  ({len(ratios)} pairs)")
