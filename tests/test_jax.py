"""JAX arrays as buffers (DLPack; read-only as outputs) and recvbuf=None returning a JAX array
in every form, at P = 1..3, with acc_dtype for bfloat16.  Skipped where JAX is not installed
(it is an optional extra, `pip install 'lpmpi[jax]'`, not in the test extra: a large download)."""
import sys

import pytest
from _mpi import child_env, mpiexec, run

pytest.importorskip("jax", reason="JAX is not installed (pip install 'lpmpi[jax]')")

SCRIPT = r'''
import numpy as np, lpmpi, jax, jax.numpy as jnp
from mpi4py import MPI
w = MPI.COMM_WORLD; P = w.size
x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3) + w.rank
exp = sum(np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(P))
for alg in lpmpi.algorithms("allreduce"):
    y = lpmpi.allreduce(x, algorithm=alg)
    assert isinstance(y, jax.Array) and y.shape == (2, 3) and y.dtype == jnp.float32, type(y)
    assert np.array_equal(np.asarray(y), exp)
    r = lpmpi.iallreduce(x, algorithm=alg); y2 = r.wait(); assert isinstance(y2, jax.Array) and r.wait() is y2
    p = lpmpi.allreduce_init(x, algorithm=alg); outs = [p.start().wait() for _ in range(2)]; p.free()
    assert all(isinstance(o, jax.Array) and np.array_equal(np.asarray(o), exp) for o in outs) and outs[0] is not outs[1]
    z = lpmpi.reduce(x, root=0, algorithm="lp" if alg == "ring" else alg)
    assert (z is None) == (w.rank != 0) and (z is None or isinstance(z, jax.Array))
b = jnp.ones(5, dtype=jnp.bfloat16)
yb = lpmpi.allreduce(b, acc_dtype="float32"); assert isinstance(yb, jax.Array) and yb.dtype == jnp.bfloat16 and float(yb[0]) == P
for bad in (lambda: lpmpi.allreduce(np.ones(6, np.float32), x), lambda: lpmpi.bcast(x), lambda: lpmpi.allreduce(lpmpi.IN_PLACE, x)):
    try: bad(); raise SystemExit("no error")
    except ValueError as e: assert "read-only" in str(e), e
import os
os.write(1, b"OK %d\n" % w.rank)
'''


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
def test_jax_arrays(tmp_path, nprocs):
    f = tmp_path / "jax_case.py"
    f.write_text(SCRIPT)
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, str(f)], child_env(), 300)
    assert rc == 0, out[-6000:]
    assert out.count("OK ") == nprocs, out[-3000:]
