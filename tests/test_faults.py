"""Faults and bad input a fault-injection and fuzzing run found, and the first five minutes of
a new user: partial overlap of sendbuf and recvbuf, out-of-range chunk_bytes, freed
communicators, MPI.IN_PLACE / MPI.BOTTOM as buffers, LPMPI_CHECK on a communicator's first
call with a local error on one rank, MismatchError naming values and ranks, ranks holding
different tuning tables (every collective at every size completes, one warning, explain shows
it), and the environment's values (range checks, size units, any case)."""
import json
import sys
import textwrap

import numpy as np
import pytest
from _mpi import child_env, mpiexec, run
from mpi4py import MPI

import lpmpi
from lpmpi import tables

COLLS = ("allreduce", "reduce", "bcast")


def python(code, env=None, timeout=60):
    rc, out, _ = run([sys.executable, "-c", textwrap.dedent(code)], child_env(env), timeout)
    assert rc == 0, f"exit status {rc} (env {env}):\n{out[-6000:]}"
    return out


def spawn(script, nprocs, env=None, timeout=180, mpmd_env=None):
    """Run `script` (a file) on nprocs ranks; mpmd_env: one env dict per rank (MPMD launch)."""
    if mpmd_env:
        cmd = [mpiexec()]
        for i, e in enumerate(mpmd_env):
            if i:
                cmd.append(":")
            cmd += ["-n", "1"]
            for k, v in e.items():
                cmd += ["-env", k, str(v)]
            cmd += [sys.executable, str(script)]
    else:
        cmd = [mpiexec(), "-n", str(nprocs), sys.executable, str(script)]
    rc, out, _ = run(cmd, child_env(env), timeout)
    assert rc == 0, f"exit status {rc} ({'timed out' if rc is None else 'failed'}):\n{out[-8000:]}"
    return out


# ----------------------------------------------------------------------------- overlap

@pytest.mark.parametrize("alg", ["auto", "lp", "ring", "mst", "be", "native"])
@pytest.mark.parametrize("shift", [1, 3, -2])
def test_partial_overlap_raises_and_writes_nothing(alg, shift):
    n = 64
    base = np.arange(n + 8, dtype=np.float64)
    before = base.copy()
    lo = 4
    send, recv = base[lo:lo + n], base[lo + shift:lo + shift + n]
    for fn in (lambda: lpmpi.allreduce(send, recv, algorithm=alg),
               lambda: lpmpi.reduce(send, recv, algorithm=alg if alg != "ring" else "lp")):
        with pytest.raises(ValueError, match="overlap"):
            fn()
        assert np.array_equal(base, before)


def test_exact_same_memory_is_in_place():
    a = np.arange(10.0)
    view = a[:]
    assert lpmpi.allreduce(a, view) is view
    assert np.array_equal(a, np.arange(10.0))
    # adjacent (touching, not overlapping) buffers are fine
    b = np.zeros(20)
    lpmpi.allreduce(b[:10], b[10:])


# ----------------------------------------------------------------------------- bad arguments

@pytest.mark.parametrize("chunk", [1 << 64, 1 << 70, 10 ** 30])
def test_huge_chunk_bytes_is_a_value_error(chunk):
    x = np.ones(4)
    with pytest.raises(ValueError, match="chunk_bytes"):
        lpmpi.allreduce(x, chunk_bytes=chunk)
    with pytest.raises(ValueError, match="chunk_bytes"):
        lpmpi.bcast(x, chunk_bytes=chunk)


def test_freed_communicator_is_a_value_error():
    c = MPI.COMM_WORLD.Dup()
    stale = MPI.Comm.fromhandle(c.handle)
    c.Free()
    with pytest.raises(ValueError, match="comm"):
        lpmpi.allreduce(np.ones(4), comm=stale)
    with pytest.raises(ValueError, match="comm"):
        lpmpi.bcast(np.ones(4), comm=c)  # COMM_NULL after Free


@pytest.mark.parametrize("special", ["IN_PLACE", "BOTTOM"])
def test_mpi_special_buffers_are_refused(special):
    sp = getattr(MPI, special)
    x = np.ones(4)
    with pytest.raises(TypeError, match=f"recvbuf must be an array, not MPI.{special}"):
        lpmpi.allreduce(x, sp)
    with pytest.raises(TypeError, match=f"recvbuf must be an array, not MPI.{special}"):
        lpmpi.reduce(x, sp)
    with pytest.raises(TypeError, match="buf must be an array"):
        lpmpi.bcast(sp)
    if special == "BOTTOM":
        with pytest.raises(TypeError, match="sendbuf must be an array, not MPI.BOTTOM"):
            lpmpi.allreduce(sp, x)


def test_stub_signatures_match_the_runtime():
    """Every public function of lpmpi/__init__.pyi has the runtime's parameters (names, kinds,
    defaults)."""
    import ast
    import inspect
    from pathlib import Path

    stub = ast.parse(Path(lpmpi.__file__).with_suffix(".pyi").read_text())
    checked = 0
    for node in stub.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        fn = getattr(lpmpi, node.name)
        sig = inspect.signature(fn)
        a = node.args
        stub_params = ([(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.posonlyargs + a.args]
                       + [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs])
        run_params = [(p.name, p.kind.name) for p in sig.parameters.values()]
        assert stub_params == run_params, f"{node.name}: stub {stub_params} != runtime {run_params}"
        defaults = [d for d in a.defaults] + [d for d in a.kw_defaults if d is not None]
        run_defaults = [p.default for p in sig.parameters.values() if p.default is not p.empty]
        assert len(defaults) == len(run_defaults), node.name
        for d, r in zip(defaults, run_defaults):
            if isinstance(d, ast.Constant) and d.value is not Ellipsis:
                assert d.value == r, f"{node.name}: stub default {d.value!r} != runtime {r!r}"
        checked += 1
    public_functions = [n for n in lpmpi.__all__ if inspect.isroutine(getattr(lpmpi, n))]
    assert checked >= len(public_functions), (checked, public_functions)


# ----------------------------------------------------------------------------- environment

def test_environment_values():
    out = python("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import lpmpi
        from lpmpi import _core
        print("RESULT", _core.window(), lpmpi.select("allreduce", 1 << 24),
              [str(x.message) for x in w])
        """, env={"LPMPI_WINDOW": "100000", "LPMPI_CHUNK_BYTES": "256KiB", "LPMPI_ALGORITHM": "LP"})
    res = out.split("RESULT", 1)[1]
    assert res.split()[0] == "4", res                      # the default, not 100000
    assert "('lp', 262144)" in res, res
    assert "LPMPI_WINDOW='100000'" in res and "1..64" in res, res
    out = python("""
        import lpmpi
        from lpmpi import _core
        print("RESULT", _core.window(), lpmpi.select("bcast", 1 << 24))
        """, env={"LPMPI_WINDOW": "64", "LPMPI_CHUNK_BYTES": "1M", "LPMPI_ALGORITHM": "Mst"})
    assert out.split("RESULT", 1)[1].split(None, 1) == ["64", "('mst', None)\n"], out


def test_every_variable_is_documented():
    from pathlib import Path

    from lpmpi import _env
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    api = (root / "docs" / "api.md").read_text()
    for name, _, _ in _env.VARIABLES:
        assert f"`{name}`" in readme, f"README.md does not list {name}"
        assert f"`{name}`" in api, f"docs/api.md does not list {name}"
    src = "\n".join(p.read_text() for p in (root / "lpmpi").glob("*.py") if p.name != "_env.py")
    assert "os.environ.get(\"LPMPI_" not in src and "os.environ[\"LPMPI_" not in src


# ----------------------------------------------------------------------------- several ranks

CHECK_FIRST_CALL = r"""
import sys
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
out = []
for coll in ("allreduce", "reduce", "bcast"):
    comm = w.Dup()          # a new communicator: the failing call is its first
    x = np.ones(8)
    try:
        if coll == "bcast":
            lpmpi.bcast(x, root=(5 if w.rank == 1 else 0), comm=comm)
        elif coll == "reduce":
            lpmpi.reduce(x, op=("avg" if w.rank == 1 else "sum"), comm=comm,
                         **({"algorithm": "nope"} if w.rank == 1 else {}))
        else:
            lpmpi.allreduce(x, comm=comm, chunk_bytes=(0 if w.rank == 1 else None))
        out.append(f"{coll}: no error")
    except lpmpi.MismatchError as e:
        out.append(f"{coll}: MismatchError {e}")
    except (TypeError, ValueError) as e:
        out.append(f"{coll}: {type(e).__name__}")
    y = lpmpi.allreduce(np.ones(3), comm=comm)     # the communicator still works
    assert (y == w.size).all()
    comm.Free()
# a dtype mismatch names the values and the ranks
x = np.ones(8, np.float32 if w.rank == 0 else np.float64)
try:
    lpmpi.allreduce(x)
except lpmpi.MismatchError as e:
    out.append(f"dtype: {e}")
sys.stdout.write(f"RANK{w.rank} " + " | ".join(out) + "\n")   # one write: lines never interleave
sys.stdout.flush()
"""


@pytest.mark.mpi
def test_check_on_first_call_with_a_local_error(tmp_path):
    script = tmp_path / "first.py"
    script.write_text(CHECK_FIRST_CALL)
    out = spawn(script, 3, env={"LPMPI_CHECK": "1"}, timeout=120)
    lines = {ln.split(" ", 1)[0]: ln for ln in out.splitlines() if ln.startswith("RANK")}
    assert set(lines) == {"RANK0", "RANK1", "RANK2"}, out
    for coll in COLLS:
        assert f"{coll}: MismatchError LPMPI_CHECK: rank 1 raised an argument error" in lines["RANK0"], out
        assert f"{coll}: MismatchError" in lines["RANK2"], out
        assert f"{coll}: ValueError" in lines["RANK1"] or f"{coll}: TypeError" in lines["RANK1"], out
    for r in lines.values():
        assert "ranks disagree on dtype: float32 on rank 0, float64 on ranks 1-2" in r, out
    assert "truncated" not in out.lower()


DIFFERENT_TABLES = r"""
import json, sys, warnings
warnings.simplefilter("always")
import numpy as np, lpmpi
from mpi4py import MPI
w = MPI.COMM_WORLD
P = w.size
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for coll in ("allreduce", "reduce", "bcast"):
        for n in (0, 1, 8, 1000, 4096, 65536, 131072, 1 << 20, 3 << 20):
            x = np.arange(n, dtype=np.float64) + w.rank
            if coll == "allreduce":
                y = lpmpi.allreduce(x)
                assert np.array_equal(y, P * np.arange(n) + P * (P - 1) / 2), (coll, n)
            elif coll == "reduce":
                y = lpmpi.reduce(x, root=P - 1)
                if w.rank == P - 1:
                    assert np.array_equal(y, P * np.arange(n) + P * (P - 1) / 2), (coll, n)
            else:
                y = lpmpi.bcast(x, root=0)
                assert np.array_equal(y, np.arange(n, dtype=np.float64)), (coll, n)
ours = [str(c.message) for c in caught if "different tuning tables" in str(c.message)]
e = lpmpi.explain("reduce", 131072)
res = {"warnings": len(ours), "tables": e.tables, "alg": e.algorithm,
       "select": lpmpi.select("reduce", 131072), "text": str(e)}
sys.stdout.write(f"RANK{w.rank} " + json.dumps(res) + "\n")   # one write: lines never interleave
sys.stdout.flush()
"""


def _table(path, rows, model):
    d = {"lpmpi_table_version": 1,
         "fingerprint": {"mpi_library": tables.library_version_line(), "nprocs": 2, "ranks_per_node": 2,
                         "memory": "host", "cpu_model": tables.cpu_model()},
         "tuner": {"command": "test"}, "collectives": rows, "model": model}
    path.write_text(json.dumps(d))
    return path


@pytest.mark.mpi
def test_ranks_with_different_tables_complete_every_collective(tmp_path):
    """Rank 0 holds one table, rank 1 another (a file missing on one node): every collective
    at every size completes with the right result, one warning says so, and explain() and
    select() on every rank report rank 0's decision."""
    a = _table(tmp_path / "a.json", {
        "allreduce": [{"lo": 0, "hi": "inf", "algorithm": "ring", "chunk_bytes": 4096}],
        "reduce": [{"lo": 0, "hi": "inf", "algorithm": "mst"}],
        "bcast": [{"lo": 0, "hi": "inf", "algorithm": "lp", "chunk_bytes": 8192}]},
        {"alpha": 1e-5, "beta": 1e-9, "gamma": 1e-9})
    b = _table(tmp_path / "b.json", {
        "allreduce": [{"lo": 0, "hi": "inf", "algorithm": "be"}],
        "reduce": [{"lo": 0, "hi": "inf", "algorithm": "lp", "chunk_bytes": 2048}],
        "bcast": [{"lo": 0, "hi": "inf", "algorithm": "mst"}]},
        {"alpha": 1e-7, "beta": 1e-10, "gamma": 1e-10})
    script = tmp_path / "tables.py"
    script.write_text(DIFFERENT_TABLES)
    for files in ((a, b), (a, "none"), ("none", b)):
        out = spawn(script, 2, mpmd_env=[{"LPMPI_TUNING_FILE": f} for f in files], timeout=240)
        res = {ln.split(" ", 1)[0]: json.loads(ln.split(" ", 1)[1]) for ln in out.splitlines()
               if ln.startswith("RANK")}
        assert set(res) == {"RANK0", "RANK1"}, out
        for r in res.values():
            assert r["warnings"] == 1, (files, r)
            assert r["tables"] == "rank 0", (files, r)
            assert "follows rank 0's" in r["text"], r["text"]
        assert res["RANK0"]["alg"] == res["RANK1"]["alg"], res
        assert res["RANK0"]["select"] == res["RANK1"]["select"], res
        if files[0] == a:
            assert res["RANK1"]["alg"] == "mst", res      # rank 0's row, on rank 1 too
