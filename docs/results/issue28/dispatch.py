"""What a jitted call costs in JAX itself, P = 2: a jitted ``x + 1`` against a jitted function of
one lpmpi.jax allreduce (an ordered effect) and of three, at 8 B, each call waited for; the
median over 5 rounds of 2000 calls, the slowest rank's time per call.
    mpiexec -n 2 python dispatch.py"""
import statistics
import time

import jax
import jax.numpy as jnp
from mpi4py import MPI

import lpmpi.jax as lj

c = MPI.COMM_WORLD
x = jnp.ones(2, jnp.float32)
one = jax.jit(lambda a: lj.allreduce(a, MPI.SUM))
three = jax.jit(lambda a: lj.allreduce(lj.allreduce(lj.allreduce(a, MPI.SUM), MPI.SUM), MPI.SUM))
rows = {"jit x + 1": jax.jit(lambda a: a + 1), "jit 1 allreduce": one, "jit 3 allreduces": three}
res = {k: [] for k in rows}
for f in rows.values():
    for _ in range(50):
        f(x).block_until_ready()
for _ in range(5):
    for name, f in rows.items():
        c.Barrier()
        t0 = time.perf_counter()
        for _ in range(2000):
            f(x).block_until_ready()
        res[name].append(c.allreduce((time.perf_counter() - t0) / 2000, op=MPI.MAX))
if c.rank == 0:
    print({k: round(statistics.median(v) * 1e6, 1) for k, v in res.items()})
