#!/usr/bin/env python
"""Run inside the box (lpmpi.cluster run): the collectives across namespaced nodes.

Every rank prints ``NODE rank=R host=H nodes=[...] boot=B``; every collective x algorithm of a
small matrix runs on exact small-integer data and is compared with numpy's; ``FAIL`` lines name
the rank and case; rank 0 prints ``SUMMARY``; exit 1 on any failure."""
# ruff: noqa: BLE001
import socket
import sys
import traceback

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core

W = MPI.COMM_WORLD
R, P = W.Get_rank(), W.Get_size()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 18      # elements of the big cases


def data(n, r):
    return ((np.arange(n) % 7) * (r + 1)).astype(np.float32)


def main():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    print(f"NODE rank={R} host={socket.gethostname()} nodes={_core.comm_nodes(W)} boot={boot} "
          f"check={int(lpmpi._env.settings.check)} mpi={MPI.Get_library_version().split(',')[0].strip()!r}",
          flush=True)
    fails = 0
    tot = P * (P + 1) // 2
    for coll in ("allreduce", "reduce", "bcast", "allgather", "reduce_scatter"):
        for alg in ("auto", *lpmpi.algorithms(coll)):
            for n in (0, 7, 4099, N):
                for form in ("blocking", "nonblocking", "persistent"):
                    desc = f"{coll} alg={alg} n={n} form={form}"
                    try:
                        f = getattr(lpmpi, {"blocking": coll, "nonblocking": "i" + coll,
                                            "persistent": coll + "_init"}[form])
                        wait = {"blocking": lambda q: q, "nonblocking": lambda q: q.wait(),
                                "persistent": lambda q: (q.start(), q.wait())[1]}[form]
                        if coll == "allreduce":
                            got, want = wait(f(data(n, R), algorithm=alg)), data(n, 0) * tot
                        elif coll == "reduce":
                            got = wait(f(data(n, R), root=P - 1, algorithm=alg))
                            want = data(n, 0) * tot if R == P - 1 else None
                        elif coll == "bcast":
                            x = data(n, 1) if R == 0 else np.zeros(n, np.float32)
                            got, want = wait(f(x, root=0, algorithm=alg)), data(n, 1)
                        elif coll == "allgather":
                            got = wait(f(data(n, R), algorithm=alg)).reshape(-1)
                            want = np.concatenate([data(n, q) for q in range(P)])
                        else:
                            got = wait(f(data(n * P, R), algorithm=alg))
                            want = (data(n * P, 0) * tot)[R * n:(R + 1) * n]
                        ok = got is None if want is None else np.array_equal(np.asarray(got).reshape(-1), want)
                        if not ok:
                            raise AssertionError("wrong result")
                    except Exception:
                        fails += 1
                        print(f"FAIL rank={R} case={desc}: {traceback.format_exc(limit=2)}", flush=True)
    nf = W.allreduce(fails)
    if R == 0:
        print(f"SUMMARY suite=cluster P={P} failures={nf}", flush=True)
    sys.exit(1 if nf else 0)


if __name__ == "__main__":
    main()
