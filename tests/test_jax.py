"""lpmpi.jax (issue 28): the collectives as JAX primitives inside jax.jit, against numpy
references and the eager lpmpi calls at P = 1..4 (tests/jax_cases.py: every op x dtype, counts
0, 1, a prime and a large one, vmap, grad / jvp / transpose, program order, argument errors,
mpi4jax's call forms), 64-bit types at P = 2, handler errors raised on every rank without a hang
(tests/jax_fail.py), the data-parallel training example against one process on the whole batch,
lpmpi's declarations of XLA's FFI ABI against the installed jaxlib's header; and JAX arrays as
buffers of the eager calls (DLPack; read-only as outputs; recvbuf=None returns a JAX array in
every form, at P = 1..3, acc_dtype for bfloat16).  Skipped without JAX (the test extra has it)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _mpi import NO_JAX, child_env, format_failure, mpiexec, run

jax = pytest.importorskip("jax", reason=NO_JAX)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = HERE / "jax_cases.py"
FAIL = HERE / "jax_fail.py"
TRAIN = ROOT / "examples" / "jax_train.py"
# one XLA CPU thread pool thread per rank (P ranks share 2 cores)
XLA = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def _spawn(nprocs, script, *args, env=None, timeout=600):
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(script), *args]
    rc, out, elapsed = run(cmd, child_env({**XLA, **(env or {})}), timeout)
    return cmd, rc, out, elapsed


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs,args", [pytest.param(1, ["--quick"], marks=pytest.mark.full), (2, []),
                                         (2, ["--x64"]),
                                         pytest.param(3, ["--quick"], marks=pytest.mark.full),
                                         pytest.param(4, ["--quick"], marks=pytest.mark.full)],
                         ids=["P1", "P2", "P2-x64", "P3", "P4"])
def test_collectives_against_references(nprocs, args):
    cmd, rc, out, _ = _spawn(nprocs, CASES, *args)
    if rc != 0:
        pytest.fail(format_failure(cmd, None, rc, out, 600), pytrace=False)
    assert f"SUMMARY suite=jax P={nprocs}" in out and "failures=0" in out, out[-4000:]


@pytest.mark.mpi
def test_handler_error_raises_on_every_rank():
    """LPMPI_CHECK finds the ranks' counts differ inside a jitted allreduce: every rank raises
    (JAX's runtime error carrying lpmpi's MismatchError), none hangs."""
    _, rc, out, _ = _spawn(2, FAIL, "mismatch", env={"LPMPI_CHECK": "1"}, timeout=120)
    assert rc not in (0, None), out[-3000:]
    for r in (0, 1):
        assert f"rank {r} raised" in out and "MismatchError" in out, out[-3000:]


@pytest.mark.mpi
def test_rank_that_leaves_does_not_hang_the_others():
    """Rank 1 exits before a jitted allreduce: rank 0 raises LPMPI_TIMEOUT's error after 3 s."""
    _, rc, out, elapsed = _spawn(2, FAIL, "exit", env={"LPMPI_TIMEOUT": "3"}, timeout=120)
    assert rc not in (0, None), out[-3000:]
    assert "rank 0 raised" in out and "LPMPI_TIMEOUT" in out and "3.0 s" in out, out[-3000:]
    assert elapsed < 90, elapsed


@pytest.mark.mpi
def test_training_example_matches_one_process(tmp_path):
    """examples/jax_train.py: P = 2 ranks on halves of the batch, gradients averaged by
    lpmpi.jax.allreduce inside jit, train as one process on the whole batch (1e-5 relative)."""
    res = {}
    for nprocs in (1, 2):
        js = tmp_path / f"p{nprocs}.json"
        cmd, rc, out, _ = _spawn(nprocs, TRAIN, "--steps", "8", "--json", str(js), timeout=300)
        if rc != 0:
            pytest.fail(format_failure(cmd, None, rc, out, 300), pytrace=False)
        res[nprocs] = json.loads(js.read_text())
    assert res[2]["same_on_every_rank"]
    for a, b in zip(res[1]["losses"], res[2]["losses"], strict=True):
        assert abs(a - b) <= 1e-5 * max(abs(a), 1e-3), (res[1]["losses"], res[2]["losses"])
    assert res[2]["losses"][-1] < res[2]["losses"][0]


def test_abi_declarations_match_jaxlib():
    """src/ffi/xla_ffi_abi.h (lpmpi's declarations, so the engine builds without JAX) has the
    offsets, sizes and codes of the installed jaxlib's xla/ffi/api/c_api.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    r = subprocess.run([cc, "-std=c11", "-fsyntax-only", f"-I{ROOT / 'src' / 'ffi'}",
                        f"-I{jax.ffi.include_dir()}", str(HERE / "xla_abi_check.c")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr


def test_imports(tmp_path):
    """import lpmpi imports no JAX; import jax does not initialise MPI; lpmpi.jax registers its
    targets with XLA."""
    for code in (("import sys, lpmpi; assert not any(m == 'jax' or m.startswith('jax.') "
                  "for m in sys.modules), 'jax imported'"),
                 "import sys, jax; assert 'mpi4py.MPI' not in sys.modules",
                 ("import lpmpi.jax as lj; assert lj._core._xla_targets().keys() >= "
                  "{'allreduce', 'reduce', 'bcast', 'allgather', 'reduce_scatter'}")):
        r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                           text=True, timeout=120, check=False, cwd=tmp_path)
        assert r.returncode == 0, code + "\n" + r.stdout + r.stderr


# ---- JAX arrays as buffers of the eager calls (DLPack) ----
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


@pytest.mark.mpi
def test_bench_example_runs():
    """examples/jax_bench.py: every form of each collective, one short round."""
    cmd, rc, out, _ = _spawn(2, ROOT / "examples" / "jax_bench.py", "--sizes", "8,4K",
                             "--rounds", "1", "--min-time", "0.002", timeout=300)
    if rc != 0:
        pytest.fail(format_failure(cmd, None, rc, out, 300), pytrace=False)
    for coll in ("allreduce", "allgather", "bcast"):
        for form in ("call", "donated", "loop"):
            assert f"{coll} lpmpi.jax {form}" in out, out[-3000:]
    assert "allreduce lpmpi.jax in_place loop" in out, out[-3000:]
