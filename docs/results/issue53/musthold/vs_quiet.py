"""Each busy launch's median per (size, algorithm) over the quiet launches' median: how many
busy launches are above 2x (issue 53's second criterion).
    python vs_quiet.py busy60.json quiet20.json"""
import collections
import json
import statistics as st
import sys


def per(f):
    out = collections.defaultdict(list)
    for launch in json.load(open(f))["launches"]:
        for r in launch.get("rows") or []:
            out[(r["nbytes"], r["label"])].append(r["time_us"])
    return out


b, q = per(sys.argv[1]), per(sys.argv[2])
print(f"{'size':>9} {'alg':>6}  quiet median us | busy / quiet median: median, max (launches > 2x)")
for k in sorted(b):
    qm = st.median(q[k])
    r = [x / qm for x in b[k]]
    print(f"{k[0]:>9} {k[1]:>6}  {qm:10.2f} | {st.median(r):.2f} {max(r):.2f} ({sum(x > 2 for x in r)})")
