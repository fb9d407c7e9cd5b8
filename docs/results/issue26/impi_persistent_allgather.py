"""Intel MPI 2021.18 (impi-rt wheel): MPI_Allgather_init at P = 2 gives a wrong result from the
second start on (mpi4py alone, no lpmpi).  Out of place, rank 1's own block is left unwritten;
in place, rank 1's own block is overwritten with stale bytes.  Sizes 1..4096 int32 fail, 100000
passes; P = 3 passes; MPICH 5.0.2 and Open MPI 5.0.11 pass.  MPI_Reduce_scatter_block_init passes.

    I_MPI_FABRICS=shm LD_LIBRARY_PATH=/opt/venv_impi/impi/lib \
    MPI4PY_LIBMPI=/opt/venv_impi/impi/lib/libmpi.so.12 /opt/venv_impi/impi/bin/mpiexec -n 2 \
    /opt/venv_impi/bin/python docs/results/issue26/impi_persistent_allgather.py

Seen there (2026-12-05, AMD EPYC): rank 1 "WRONG [1 0]" for every start after the first.
lpmpi's workaround (src/alg_native.c init): under Intel MPI, the persistent form of native
allgather issues MPI_Iallgather at each start.
"""
import numpy as np
from mpi4py import MPI

W = MPI.COMM_WORLD
r, P = W.rank, W.size
bad = 0
for in_place in (False, True):
    for n in (1, 7, 1000, 4096, 100000):
        x = np.full(n, r + 1, np.int32)
        y = np.zeros((P, n), np.int32)
        req = W.Allgather_init(MPI.IN_PLACE if in_place else x, y)
        for start in range(3):
            y.fill(0)
            if in_place:
                y[r] = x
            req.Start()
            req.Wait()
            if not all((y[q] == q + 1).all() for q in range(P)):
                bad += 1
                print(f"rank {r} in_place={in_place} n={n} start {start}: WRONG {y[:, 0]}", flush=True)
        req.Free()
print(f"rank {r}: {bad} wrong results", flush=True)
