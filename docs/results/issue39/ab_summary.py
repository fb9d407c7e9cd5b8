"""A/B per-call time at 8 B (docs/results/issue39/ab_overhead.sh): per collective, A's and B's
median of auto over the launches, B/A paired by round and pinning (median, min, max)."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

d = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/issue39/ab")
t = defaultdict(dict)   # (coll, label) -> {(v, round, pin): us}
for f in d.glob("*.json"):
    v, r, pin, coll = f.stem.split("_", 3)
    for row in json.loads(f.read_text())["rows"]:
        if row.get("time_us"):
            t[(coll, row["label"])][(v, r, pin)] = row["time_us"]
print("collective      case    A med us (min-max)     B med us (min-max)     B/A paired med (min-max)")
for (coll, lab), m in sorted(t.items()):
    a = {k[1:]: x for k, x in m.items() if k[0] == "A"}
    b = {k[1:]: x for k, x in m.items() if k[0] == "B"}
    pr = [b[k] / a[k] for k in a if k in b]
    f = lambda v: f"{statistics.median(v):6.2f} ({min(v):.2f}-{max(v):.2f})"  # noqa: E731
    print(f"{coll:<15} {lab:<7} {f(list(a.values()))}   {f(list(b.values()))}   "
          f"{statistics.median(pr):.3f} ({min(pr):.3f}-{max(pr):.3f}, n={len(pr)})")
