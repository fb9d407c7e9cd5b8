"""Summarise tab_ab.sh's output: per (mode, form, size) the median [min max] of each table's
runs and old/new.  Usage: python tab_sum.py ab_LIB_COLL.txt"""
import collections
import statistics as st
import sys
from pathlib import Path


def size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


runs = collections.defaultdict(list)
for line in Path(sys.argv[1]).read_text().splitlines():
    p = line.split()
    if len(p) == 5:
        mode, table, n, label, us = p
        runs[(mode, label, int(n))].append((table, float(us)))
for (mode, label, n), v in sorted(runs.items()):
    a = [u for t, u in v if t == "old"]
    r = [u for t, u in v if t == "new"]
    if a and r:
        print(f"{mode:<6} {label:<10} {size_text(n):>8}  old {st.median(a):8.1f} [{min(a):8.1f} {max(a):8.1f}]"
              f"  new {st.median(r):8.1f} [{min(r):8.1f} {max(r):8.1f}]  old/new {st.median(a) / st.median(r):.2f}")
