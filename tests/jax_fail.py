"""Failure paths of lpmpi.jax inside jax.jit (tests/test_jax.py): an error inside a handler is a
Python exception on every rank, and no rank hangs.

    LPMPI_CHECK=1 mpiexec -n 2 python tests/jax_fail.py mismatch  # shapes differ across ranks
    LPMPI_TIMEOUT=3 mpiexec -n 2 python tests/jax_fail.py exit    # rank 1 exits before a call
"""
import sys

import jax
import jax.numpy as jnp
from mpi4py import MPI

import lpmpi.jax as lj

mode = sys.argv[1]
rank = MPI.COMM_WORLD.Get_rank()
comm = lj.default_comm()          # made (collectively) before any rank leaves
f = jax.jit(lambda a: lj.allreduce(a, MPI.SUM))
f(jnp.ones(3)).block_until_ready()            # prepared and working
if mode == "mismatch":
    x = jnp.ones(4 + rank)                    # LPMPI_CHECK's agreement finds the counts differ
elif mode == "exit":
    if rank == 1:
        sys.exit(0)                           # leaves without the collective (on purpose)
    x = jnp.ones(3)
try:
    f(x).block_until_ready()
except Exception as e:  # noqa: BLE001 - JAX's runtime error type differs between versions
    print(f"rank {rank} raised {type(e).__name__}: {e}", flush=True)
    sys.exit(3)
print(f"rank {rank}: the collective returned", flush=True)
