"""Bits of ring at sizes around the transport boundaries, every form, hashed (rank 0 prints). Usage: mpiexec -n P python bits.py"""
import hashlib

import numpy as np
from mpi4py import MPI

import lpmpi
from lpmpi import _core

w = MPI.COMM_WORLD
h = hashlib.sha256()
for mib, dt in ((1, np.float32), (2.5, np.float32), (26, np.float32), (26, np.float64), (30, np.float32)):
    n = int(mib * (1 << 20)) // np.dtype(dt).itemsize + 3
    x = np.random.default_rng(w.rank * 11 + n).standard_normal(n).astype(dt)
    y = lpmpi.allreduce(x, algorithm="ring")
    z = x.copy(); lpmpi.allreduce(lpmpi.IN_PLACE, z, algorithm="ring")
    assert z.tobytes() == y.tobytes(), mib
    r = lpmpi.iallreduce(x, algorithm="ring").wait()
    assert r.tobytes() == y.tobytes(), mib
    h.update(y.tobytes())
if w.rank == 0:
    print("H", MPI.Get_library_version().split()[0:3], _core.comm_transport()[0], h.hexdigest()[:16], flush=True)
