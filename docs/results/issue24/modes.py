"""Classify the monitor samples (monitor*.log: one line per ~20 s, each a fresh launch per figure,
ranks pinned) by the shared-memory transport's 64 MiB time, and print each mode's core-to-core
probe (c2c.c) and the other transports' times side by side.

    python docs/results/issue24/modes.py docs/results/issue24/monitor*.log
"""
import re
import statistics
import sys

rows = []
for path in sys.argv[1:]:
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        rtt = re.search(r"rtt (\d+) ns", line)
        hand = re.search(r"handoff ([\d.]+) GB/s", line)
        shm = re.search(r"(?:67108864 shm|64M shm ) +([\d.]+)\b|shm (?:ring 64MiB )?med=([\d.]+)(ms|us)", line)
        if not (rtt and hand and shm):
            continue
        def us(m):
            if m is None:
                return None
            v = float(m.group(1) or m.group(2))
            return v * 1000 if (m.lastindex or 0) >= 3 and m.group(3) == "ms" else v
        cma = re.search(r"(?:67108864 cma|64M cma ) +([\d.]+)\b|cma (?:ring 64MiB )?med=([\d.]+)(ms|us)", line)
        mpi = re.search(r"67108864 mpi ([\d.]+)\b|mpi med=([\d.]+)(ms|us)", line)
        rows.append((int(rtt.group(1)), float(hand.group(1)), us(shm), us(cma), us(mpi), line[:8]))

def med(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):9.1f}" if xs else "        -"

for name, sel in (("slow (shm 64 MiB > 30 ms)", lambda r: r[2] > 30000),
                  ("good (shm 64 MiB < 12 ms)", lambda r: r[2] < 12000),
                  ("between", lambda r: 12000 <= r[2] <= 30000)):
    rs = [r for r in rows if sel(r)]
    if not rs:
        continue
    print(f"{name}: {len(rs)} samples ({', '.join(r[5] for r in rs[:12])}{' ...' if len(rs) > 12 else ''})")
    print(f"  c2c round trip ns: median {med([r[0] for r in rs])}  range {min(r[0] for r in rs)}-{max(r[0] for r in rs)}")
    print(f"  hand-off GB/s    : median {med([r[1] for r in rs])}  range {min(r[1] for r in rs):.1f}-{max(r[1] for r in rs):.1f}")
    print(f"  64 MiB ring, us  : shm {med([r[2] for r in rs])}  cma {med([r[3] for r in rs])}  mpi {med([r[4] for r in rs])}")
