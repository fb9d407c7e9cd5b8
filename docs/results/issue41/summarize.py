"""Medians and paired ratios of run.sh's results (each round's configs ran back to back)."""
import re
import statistics
import sys
from collections import defaultdict

rows = defaultdict(dict)            # (round, pin) -> cfg -> {bytes: us}
for line in open(sys.argv[1]).read().splitlines():  # noqa: SIM115
    m = re.match(r"round (\d+) pin=(\S*) (\S+) (.*)", line)
    if not m:
        continue
    vals = dict(re.findall(r"RESULT (\d+) ([\d.]+)", m.group(4)))
    rows[(int(m.group(1)), m.group(2))][m.group(3)] = {int(k): float(v) for k, v in vals.items()}
cfgs = [c for c in ["base", "fr_on", "fr_off", "trace"] if any(c in v for v in rows.values())]
for nbytes in (8, 65536):
    print(f"allreduce {nbytes} B, P = 2, us per call (median over launches [min, max]); ratio to base "
          f"(median of each round's paired ratio [min, max])")
    for pin in ("", "core"):
        sel = [v for (r, p), v in sorted(rows.items()) if p == pin and all(c in v for c in cfgs)]
        if not sel:
            continue
        print(f"  {'pinned (-bind-to core)' if pin else 'not pinned'}: {len(sel)} rounds")
        for c in cfgs:
            xs = [v[c][nbytes] for v in sel]
            rs = [v[c][nbytes] / v["base"][nbytes] for v in sel]
            print(f"    {c:7s} {statistics.median(xs):8.3f} [{min(xs):.3f}, {max(xs):.3f}]   "
                  f"x{statistics.median(rs):.3f} [{min(rs):.3f}, {max(rs):.3f}]")
