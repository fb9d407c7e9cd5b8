"""Issue 50: a training-like loop under LPMPI_AUTOTUNE=1, run twice on one machine: the first
run learns (exploring), the second starts from the per-machine cache the first wrote.
Per size: CALLS calls of lpmpi.allreduce (auto), each after a barrier, the slowest rank's time
a call; then MPI's own (comm.Allreduce) the same way.  Prints, per size: calls the tuner spent
exploring, calls 2-65's time over 64 x the settled median (the last 32 calls) minus 1 ("first-64
cost": the first call apart, it pays the communicator's and the plan's set-up whatever the
choice), the first call's time, settled and MPI's own medians, MPI's own / settled.

    LPMPI_AUTOTUNE=1 mpiexec -n 2 python loop.py [--sizes 8,4K,64K,1M,16M] [--calls 128] [--json F]
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core, _units

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="8,4K,64K,1M,16M")
ap.add_argument("--calls", type=int, default=128)
ap.add_argument("--json")
a = ap.parse_args()
comm = MPI.COMM_WORLD.Dup()
R = comm.rank


def timed(fn, n):
    t = np.empty(n)
    for i in range(n):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        t[i] = time.perf_counter() - t0
    comm.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)
    return t


rows = []
for nb in [_units.parse_size(s) for s in a.sizes.split(",")]:
    x = np.ones(max(1, nb // 4), np.float32)
    y = np.empty_like(x)
    ta = timed(lambda: lpmpi.allreduce(x, y, comm=comm), a.calls)
    tn = timed(lambda: comm.Allreduce(x, y), 40)
    k = _core.autotune_key("allreduce", x.nbytes, comm)
    settled = float(np.median(ta[-32:]))
    rows.append({"nbytes": x.nbytes, "explore_calls": k["explore_calls"] if k else None,
                 "settle_calls": k["settle_calls"] if k else None,
                 "first64_cost": float(ta[1:65].sum() / (64 * settled) - 1), "first_us": float(ta[0]) * 1e6,
                 "settled_us": settled * 1e6,
                 "native_us": float(np.median(tn[5:])) * 1e6,
                 "choice": None if not k or k["choice"] is None else
                 "/".join(str(v) for v in (k["candidates"][k["choice"]][f] for f in ("algorithm", "chunk_bytes", "transport")) if v)})
if R == 0:
    warm = len(lpmpi.tables.status().warm)
    print(f"# learned rows at start: {warm}")
    print(f"{'size':>8} {'explore':>7} {'first-64 cost':>13} {'first us':>9} {'settled us':>10} {'native us':>9} "
          f"{'native/settled':>14}  choice")
    for r in rows:
        print(f"{r['nbytes']:>8} {r['explore_calls']!s:>7} {r['first64_cost']:>+12.1%} {r['first_us']:>9.1f} "
              f"{r['settled_us']:>10.1f} "
              f"{r['native_us']:>9.1f} {r['native_us'] / r['settled_us']:>14.2f}  {r['choice']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"warm": warm, "rows": rows}, f, indent=1)
