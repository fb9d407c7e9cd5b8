"""Ratios B/A per pair of consecutive launches (A then B), per case: median [min, max]."""
import json
import sys

import numpy as np

with open(sys.argv[1]) as f:
    rows = [json.loads(ln) for ln in f if ln.strip()]
pairs = []
for i in range(0, len(rows) - 1, 2):                  # consecutive launches, either order
    a, b = rows[i], rows[i + 1]
    if a["tag"].startswith("B"):
        a, b = b, a
    if a["tag"].startswith("A") and b["tag"].startswith("B"):
        pairs.append((a, b))
print(f"{len(pairs)} pairs of launches (A = before, B = after)")
for k in rows[0]["us"]:
    r = np.array([b["us"][k] / a["us"][k] for a, b in pairs])
    a = np.median([a["us"][k] for a, _ in pairs])
    b = np.median([b["us"][k] for _, b in pairs])
    print(f"{k:16s} A {a:8.3f} us  B {b:8.3f} us  B/A median {np.median(r):.3f} [{r.min():.3f}, {r.max():.3f}]")
