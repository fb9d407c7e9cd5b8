import sys, numpy as np, lpmpi
from mpi4py import MPI
n = int(sys.argv[1]); alg = sys.argv[2]
c = MPI.COMM_WORLD.Dup(); x = np.ones(2, np.float32); y = np.empty_like(x)
for i in range(n): lpmpi.allreduce(x, y, comm=c, algorithm=alg)
