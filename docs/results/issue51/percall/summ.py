"""mpi4py's direct call / lpmpi's auto per collective and size, where auto resolves to MPI's
own (native), per build: median (min-max) over the launches.
    python summ.py OUTDIR"""
import collections
import glob
import json
import os
import statistics as st
import sys

r = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_*.json"))):
    build = os.path.basename(f).split("_")[0]
    d = json.load(open(f))
    rows = d["rows"] if "rows" in d else [x for c in d.get("results", []) for x in c["rows"]]
    t = {}
    for x in rows:
        t[(x["collective"], x["nbytes"], x["label"])] = x
    for (c, n, lab), x in t.items():
        if lab != "auto" or (c, n, "mpi4py") not in t:
            continue
        resolved = x.get("selected_algorithm") or "?"
        r[(c, n, build)].append((t[(c, n, "mpi4py")]["time_us"] / x["time_us"], resolved))
print(f"{'collective':>16} {'size':>6}  {'auto resolves to':>18}  base: mpi4py/auto      new: mpi4py/auto")
for (c, n) in sorted({(c, n) for c, n, _ in r}):
    line = f"{c:>16} {n:>6}"
    res = {v for b in ('base', 'new') for _, v in r.get((c, n, b), [])}
    line += f"  {'/'.join(sorted(res))[:18]:>18}"
    for b in ("base", "new"):
        v = [x for x, _ in r.get((c, n, b), [])]
        line += f"  {st.median(v):.2f} ({min(v):.2f}-{max(v):.2f})   " if v else "  -                   "
    print(line)
