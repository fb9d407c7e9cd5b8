import numpy as np, lpmpi, os
from mpi4py import MPI
comm = MPI.COMM_WORLD.Dup()
x = np.ones(2, np.float32); y = np.empty_like(x)
for i in range(int(os.environ.get("N", "4000"))): lpmpi.allreduce(x, y, comm=comm)
