# the MPICH-built lpmpi at P = 2 under whatever MPI mpi4py loaded: which one, and an allreduce
import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _abi

comm = MPI.COMM_WORLD
x = np.full(1 << 20, comm.rank + 1.0)                       # 8 MiB of float64 a rank
auto = lpmpi.allreduce(x)
lp = lpmpi.allreduce(x, algorithm="lp", chunk_bytes=1 << 16)
ring = lpmpi.allreduce(x, algorithm="ring")
avg = lpmpi.allreduce(np.full(1000, comm.rank + 1.0, np.float32), op="avg")
ok = comm.allreduce(bool((auto == 3).all() and (lp == 3).all() and (ring == 3).all() and (avg == 1.5).all()),
                    op=MPI.LAND)
libs = comm.gather(_abi.loaded_libmpi())
if comm.rank == 0:
    print("MPI library (mpi4py):", _abi.first_line(MPI.Get_library_version()))
    print("runtime:", _abi.runtime(MPI))
    print(_abi.describe())
    print("libmpi mapped per rank:", libs)
    print(f"P = {comm.size}: allreduce auto/lp/ring sum = {auto[0]}/{lp[0]}/{ring[0]}, avg = {avg[0]}, "
          f"every element right on every rank: {ok}; auto picks {lpmpi.select('allreduce', x.nbytes)}")
