import numpy as np, lpmpi, time, sys
from mpi4py import MPI
from lpmpi import autotune
comm = MPI.COMM_WORLD.Dup()
x = np.ones(2, np.float32); y = np.empty_like(x)
for i in range(3000): lpmpi.allreduce(x, y, comm=comm)
res=[]
for rep in range(7):
    comm.Barrier(); t0=time.perf_counter()
    for i in range(20000): lpmpi.allreduce(x, y, comm=comm)
    res.append((time.perf_counter()-t0)/20000)
t=np.array(res); comm.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)
if comm.rank==0:
    st=[k["state"] for k in autotune.state()]
    print("%.4f" % (np.median(t)*1e6), st)
