"""Environment knobs and import behaviour, each in a fresh interpreter (lpmpi reads its
environment at import): LPMPI_ALGORITHM / LPMPI_CHUNK_BYTES override "auto", a broken
LPMPI_TUNING_FILE is ignored with a warning, importing lpmpi never initializes MPI itself."""
import json
import sys
import textwrap

import pytest
from _mpi import child_env, run, run_suite


def python(code, env=None, timeout=60):
    """Run `code` in a new single-process interpreter (MPI singleton); returns output."""
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    rc, out, _ = run(cmd, child_env(env), timeout)
    assert rc == 0, f"exit status {rc} (env {env}):\n{out[-6000:]}"
    return out


@pytest.mark.parametrize("alg", ["lp", "mst", "be", "native"])
def test_env_algorithm_overrides_auto(alg):
    out = python("""
        import json, lpmpi
        from mpi4py import MPI
        res = {}
        for coll in ("allreduce", "reduce", "bcast"):
            for nbytes in (0, 1, 4096, 1 << 20, 1 << 31, 1 << 33):
                res[f"{coll} {nbytes}"] = list(lpmpi.select(coll, nbytes))
                res[f"{coll} {nbytes} self"] = list(lpmpi.select(coll, nbytes, MPI.COMM_SELF))
        print("RESULT", json.dumps(res))
        """, env={"LPMPI_ALGORITHM": alg})
    res = json.loads(out.split("RESULT", 1)[1])
    bad = {k: v for k, v in res.items() if v[0] != alg}
    assert not bad, f"LPMPI_ALGORITHM={alg} not used by select: {bad}"


def test_env_algorithm_ring_allreduce():
    out = python("""
        import lpmpi
        print("RESULT", lpmpi.select("allreduce", 1 << 20)[0])
        """, env={"LPMPI_ALGORITHM": "ring"})
    assert out.split("RESULT", 1)[1].split()[0] == "ring"


@pytest.mark.parametrize("chunk", [1024, 4096, 12345, 1 << 22])
def test_env_chunk_bytes_overrides_auto(chunk):
    out = python("""
        import lpmpi
        for coll in ("allreduce", "reduce", "bcast"):
            for nbytes in (1 << 16, 1 << 24, 1 << 32):
                print("RESULT", coll, nbytes, *lpmpi.select(coll, nbytes))
        """, env={"LPMPI_ALGORITHM": "lp", "LPMPI_CHUNK_BYTES": chunk})
    rows = [ln.split()[1:] for ln in out.splitlines() if ln.startswith("RESULT")]
    assert len(rows) == 9
    for coll, nbytes, alg, cb in rows:
        assert alg == "lp", rows
        if int(nbytes) >= chunk:  # (a chunk larger than the message may be clipped)
            assert int(cb) == chunk, f"{coll} {nbytes}: chunk {cb} != LPMPI_CHUNK_BYTES={chunk}"


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
def test_env_override_results(nprocs):
    """algorithm="auto" cases of the matrices, run with auto forced to lp and tiny chunks."""
    env = {"LPMPI_ALGORITHM": "lp", "LPMPI_CHUNK_BYTES": 8}
    for suite in ("allreduce", "reduce", "bcast"):
        run_suite(suite, nprocs, "--filter", r"alg=auto\b", "--stride", str(nprocs - 1),
                  env=env)


def test_import_does_not_initialize_mpi():
    python("""
        import mpi4py
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        import lpmpi
        from mpi4py import MPI
        assert not MPI.Is_initialized(), "import lpmpi initialized MPI"
        MPI.Init()
        import numpy as np
        y = lpmpi.allreduce(np.arange(5.0))
        assert np.array_equal(y, np.arange(5.0)), y
        MPI.Finalize()
        print("ok")
        """)


@pytest.mark.parametrize("content", ["this is { not json", "", json.dumps({"version": 999999}),
                                     json.dumps([1, 2, 3]), None],
                         ids=["garbage", "empty", "future_version", "list", "missing"])
def test_bad_tuning_file_is_ignored_with_a_warning(tmp_path, content):
    path = tmp_path / "table.json"
    if content is not None:
        path.write_text(content)
    out = python("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import lpmpi
        for x in w:
            print("WARNING", x.category.__name__, x.message)
        import numpy as np
        for coll in ("allreduce", "reduce", "bcast"):
            alg, cb = lpmpi.select(coll, 1 << 20)
            assert alg in lpmpi.algorithms(coll), (coll, alg)
        y = lpmpi.allreduce(np.ones(10), algorithm="auto")
        assert (y == 1).all()
        print("ok")
        """, env={"LPMPI_TUNING_FILE": str(path)})
    assert "ok" in out
    # "ignored with one warning": as a Python warning or on stderr, mentioning the table
    low = out.lower()
    assert ("warning" in low or "warn" in low) and ("tun" in low or "table" in low
                                                    or str(path).lower() in low), out
    py_warnings = [ln for ln in out.splitlines() if ln.startswith("WARNING")]
    assert len(py_warnings) <= 1, f"more than one warning: {py_warnings}"


def test_node_transport_values():
    from lpmpi import _env

    assert _env.read({}).node_transport == "auto"
    assert _env.read({"LPMPI_NODE_TRANSPORT": "auto"}).node_transport == "auto"
    assert _env.read({"LPMPI_NODE_TRANSPORT": " MPI "}).node_transport == "mpi"
    assert _env.read({"LPMPI_NODE_TRANSPORT": "Shm"}).node_transport == "shm"
    assert _env.read({"LPMPI_NODE_TRANSPORT": "cma"}).node_transport == "cma"
    with pytest.warns(UserWarning, match="LPMPI_NODE_TRANSPORT"):
        assert _env.read({"LPMPI_NODE_TRANSPORT": "xpmem"}).node_transport == "auto"


@pytest.mark.parametrize("value,on", [("1", True), ("0", False), ("", False), ("true", True), ("OFF", False),
                                      ("yes", True), ("2", None), ("banana", None), ("-1", None)])
def test_switches_take_0_or_1_and_warn_on_anything_else(value, on):
    """LPMPI_CHECK=2 or =banana used to turn checking on silently; the docs say 0|1 and that
    other values warn: they warn (naming the variable) and leave the switch off."""
    from lpmpi import _env

    for name, field in (("LPMPI_CHECK", "check"), ("LPMPI_DEBUG", "debug"), ("LPMPI_AUTOTUNE", "autotune")):
        if on is None:
            with pytest.warns(UserWarning, match=f"ignoring {name}={value!r}"):
                s = _env.read({name: value})
            assert getattr(s, field) is False
        else:
            assert getattr(_env.read({name: value}), field) is on


def test_chunk_below_the_smallest_is_ignored_with_a_warning():
    from lpmpi import _env, engine

    with pytest.warns(UserWarning, match="LPMPI_CHUNK_BYTES='1'.*below the smallest chunk"):
        assert _env.read({"LPMPI_CHUNK_BYTES": "1"}).chunk_bytes is None
    assert _env.read({"LPMPI_CHUNK_BYTES": str(engine.CHUNK_MIN)}).chunk_bytes == engine.CHUNK_MIN


def test_flight_recorder_and_watchdog_values():
    from lpmpi import _env

    s = _env.read({})
    assert (s.fr_size, s.fr_dir, s.abort_timeout, s.trace) == (256, None, 1800.0, None)
    s = _env.read({"LPMPI_FR_SIZE": "0", "LPMPI_ABORT_TIMEOUT": "0", "LPMPI_TRACE": "/tmp/x"})
    assert (s.fr_size, s.abort_timeout, s.trace) == (0, 0.0, "/tmp/x")
    with pytest.warns(UserWarning, match="LPMPI_ABORT_TIMEOUT"):
        assert _env.read({"LPMPI_ABORT_TIMEOUT": "-3"}).abort_timeout == 1800.0
    with pytest.warns(UserWarning, match="LPMPI_FR_SIZE"):
        assert _env.read({"LPMPI_FR_SIZE": "many"}).fr_size == 256
    with pytest.warns(UserWarning, match="LPMPI_TIMEOUT"):
        assert _env.read({"LPMPI_TIMEOUT": "0"}).timeout == 0.0


def test_a_bad_value_warns_at_the_users_import_line(tmp_path):
    """The warning points at the program's `import lpmpi`, not at lpmpi/_env.py."""
    script = tmp_path / "user_program.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\nimport lpmpi  # line 3\n")
    rc, out, _ = run([sys.executable, str(script)], child_env({"LPMPI_CHECK": "banana"}), 60)
    assert rc == 0, out
    assert "user_program.py:3" in out and "LPMPI_CHECK" in out, out
    assert "_env.py" not in out, out


def test_the_algorithm_knobs_doc_names_every_algorithm_of_the_registry():
    """LPMPI_ALGORITHM's doc listed five of the seven algorithms (issue 51: pairwise and linear
    were missing): every registry algorithm is named in it."""
    from lpmpi import _core, _env

    doc = next(d for name, _, d in _env.VARIABLES if name == "LPMPI_ALGORITHM")
    names = {n for c in _core.COLLECTIVES for n, _, _ in _core._algorithm_info(c)}
    assert {n for n in names if n not in doc} == set(), doc


def test_the_values_in_force_and_where_they_came_from():
    """lpmpi-info's settings: every knob of the table, its value in force, and its source: the
    environment, the default, or the default because the given value was ignored."""
    import warnings as w

    from lpmpi import _env
    env = {"LPMPI_WINDOW": "8", "LPMPI_FR_SIZE": "lots", "LPMPI_CUDA_AWARE": ""}
    with w.catch_warnings(record=True):
        w.simplefilter("always")
        s = _env.read(env)
    rows = {n: (v, src) for n, v, src in _env.in_force(s, env)}
    assert list(rows) == [k.name for k in _env.KNOBS]
    assert rows["LPMPI_WINDOW"] == ("8", "environment")
    assert rows["LPMPI_STAGING_BUFFERS"] == ("4", "default")
    assert rows["LPMPI_FR_SIZE"] == ("256", "default: 'lots' ignored")
    assert rows["LPMPI_CUDA_AWARE"] == ("unset", "default")
    assert rows["LPMPI_ABORT_TIMEOUT"] == ("1800.0", "default")
