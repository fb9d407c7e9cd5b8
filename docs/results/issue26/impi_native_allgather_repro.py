import sys, numpy as np, lpmpi
from mpi4py import MPI
import faulthandler; faulthandler.dump_traceback_later(15, exit=True)
w = MPI.COMM_WORLD; P, r = w.size, w.rank
dt = sys.argv[1]; forms = sys.argv[2].split(",")
x = np.ones(1, dt)
for it in range(3):
    for form in forms:
        out = np.zeros((P, 1), dt)
        if form == "blocking": lpmpi.allgather(x, out, algorithm="native")
        elif form == "nonblocking": lpmpi.iallgather(x, out, algorithm="native").wait()
        else:
            p = lpmpi.allgather_init(x, out, algorithm="native")
            for _ in range(2): p.start(); p.wait()
            p.free()
        d = w.allgather(out.tobytes())
        print(r, it, form, "ok", flush=True)
