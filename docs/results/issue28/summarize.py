"""bench.sh's output -> per size and form: the ratio mpi4jax / lpmpi.jax in every launch (min,
median, max) and the medians of the times; the training step pairs."""
import re
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)          # (coll, bytes, row) -> [median us per launch]
launch, coll, nb, pinned = 0, None, None, {}
train = []
for line in sys.stdin:
    if m := re.match(r"LAUNCH (\d+) pinned=(1?)", line):
        launch = int(m.group(1))
        pinned[launch] = m.group(2) == "1"
    elif m := re.match(r"# (\w+) (\d+) bytes", line):
        coll, nb = m.group(1), int(m.group(2))
    elif m := re.match(r"(\w+ (?:lpmpi\.jax(?: in_place)?|mpi4jax) (?:call|donated|loop))\s+([\d.]+)", line):
        rows[(coll, nb, m.group(1).split(" ", 1)[1])].append((launch, float(m.group(2))))
    elif line.startswith("TRAIN"):
        m = re.search(r"pair=(\d+) pinned=(1?) backend=(\w+) .*step ([\d.]+) ms", line)
        train.append((int(m.group(1)), m.group(2) == "1", m.group(3), float(m.group(4))))
    elif line.startswith("Model name"):
        print(line.strip())

print(f"{len(pinned)} launches ({sum(pinned.values())} pinned); ratio = mpi4jax / lpmpi.jax "
      f"per launch: min median max; medians of the launches' times in us")
for coll in dict.fromkeys(k[0] for k in rows):
    for nb in sorted({k[1] for k in rows if k[0] == coll}):
        print(f"\n{coll} {nb} B")
        for form in ("call", "donated", "loop"):
            m4 = dict(rows.get((coll, nb, f"mpi4jax {form}"), []))
            for lib in ("lpmpi.jax", "lpmpi.jax in_place"):
                lp = dict(rows.get((coll, nb, f"{lib} {form}"), []))
                r = sorted(m4[k] / lp[k] for k in lp if k in m4)
                if not r:
                    continue
                print(f"  {form:8s} {lib:19s} {min(r):5.2f} {statistics.median(r):5.2f} "
                      f"{max(r):5.2f}x   ({statistics.median(lp.values()):9.1f} vs "
                      f"{statistics.median(m4.values()):9.1f} us)")
if train:
    print("\ntraining step (ms), pair pinned lpmpi mpi4jax ratio")
    by = defaultdict(dict)
    for p, pin, be, ms in train:
        by[(p, pin)][be] = ms
    for (p, pin), d in sorted(by.items()):
        if len(d) == 2:
            print(f"  {p} {int(pin)} {d['lpmpi']:8.3f} {d['mpi4jax']:8.3f} {d['mpi4jax'] / d['lpmpi']:5.2f}x")
