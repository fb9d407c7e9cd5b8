# Ring over shm, forced, on two fresh communicators in one launch: each call timed (the first 12
# over shm, 3 over CMA, 6 over shm again).  NB=bytes CH=chunk bytes:
#   NB=67108864 CH=16777216 mpiexec -n 2 python shm_spell.py
import numpy as np, lpmpi, time, os
from mpi4py import MPI
CH = int(os.environ.get("CH", "131072"))
n = int(os.environ.get("NB", "262144")) // 4
for trial in range(2):
    comm = MPI.COMM_WORLD.Dup()
    x = np.ones(n, np.float32); y = np.empty_like(x)
    lpmpi.set_transport_override("shm") if hasattr(lpmpi, "set_transport_override") else lpmpi._core.set_transport_override("shm")
    ts = []
    for i in range(12):
        comm.Barrier(); t = time.perf_counter(); lpmpi.allreduce(x, y, comm=comm, algorithm="ring", chunk_bytes=CH); ts.append(time.perf_counter() - t)
    lpmpi._core.set_transport_override("cma")
    for i in range(3):
        comm.Barrier(); t = time.perf_counter(); lpmpi.allreduce(x, y, comm=comm, algorithm="ring", chunk_bytes=CH); ts.append(time.perf_counter() - t)
    lpmpi._core.set_transport_override("shm")
    for i in range(6):
        comm.Barrier(); t = time.perf_counter(); lpmpi.allreduce(x, y, comm=comm, algorithm="ring", chunk_bytes=CH); ts.append(time.perf_counter() - t)
    lpmpi._core.set_transport_override(None)
    if comm.rank == 0: print("trial", trial, [round(t*1e6,1) for t in ts])
    comm.Free()
