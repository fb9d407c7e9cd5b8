"""Device memory in the tuner and its tables, without a GPU: the staging-buffers dimension of the
search space, ``staging_buffers`` in cuda tables (schema, building, the engine applying it),
``--memory cuda`` errors, a short tuning run on fake device arrays (``LPMPI_TUNER_FAKE_DEVICE=1``
with ``LPMPI_EMULATE_STAGING=1``), ``python -m lpmpi info``'s device line and the bench's
``auto`` row on device memory."""
import json
import sys
import textwrap

import optuna  # in the test extra
import pytest
from _mpi import child_env, mpiexec, run

from lpmpi import _core, model, tables
from lpmpi.tables import Choice, merge_choices, parse_table
from lpmpi.tune.space import DEFAULT_STAGING, STAGING_CHOICES, Config, Space, staging_param
from lpmpi.tune.studies import study_name

LIB = tables.library_version_line()
EMU = {"LPMPI_EMULATE_STAGING": "1"}
FAKE = {**EMU, "LPMPI_TUNER_FAKE_DEVICE": "1"}


def cuda_doc(rows, nprocs=1, memory="cuda"):
    return {"lpmpi_table_version": 1,
            "fingerprint": {"mpi_library": LIB, "nprocs": nprocs, "ranks_per_node": nprocs,
                            "memory": memory, "cpu_model": tables.cpu_model()},
            "tuner": {"command": "test"}, "collectives": rows}


def python(code, env=None, args=(), timeout=60):
    """Run ``code`` (or ``-m module`` via args) in a fresh single-process interpreter."""
    cmd = [sys.executable, *args] if args else [sys.executable, "-c", textwrap.dedent(code)]
    rc, out, _ = run(cmd, child_env(env), timeout)
    assert rc == 0, f"exit status {rc} (env {env}):\n{out[-6000:]}"
    return out


# ----------------------------------------------------------------------------- the search space


@pytest.mark.parametrize("coll", ["allreduce", "bcast"])
def test_staging_space_grid_params_and_warm_start(coll):
    n = 1 << 20
    space = Space.of(coll, n, STAGING_CHOICES)
    grid = space.grid()
    base = model.grid(coll, n)
    chunked = sum(chunk is not None for _, chunk in base)
    assert len(grid) == len(set(grid)) == len(base) + chunked * (len(STAGING_CHOICES) - 1)
    for cfg in grid:
        assert (cfg.staging_buffers in STAGING_CHOICES) == space.chunked[cfg.algorithm], cfg
        assert space.config_of(space.params(cfg)) == cfg                 # parameters round trip
    start = space.warm_start(2, previous=Config("lp", 12345, 3))
    assert start[0] == Config("native") and len(start) == len(set(start))
    assert all(c in grid for c in start) and {c.algorithm for c in start} == set(space.algorithms)
    lp = space.lp_analytic(2)
    assert lp.staging_buffers == DEFAULT_STAGING
    assert {c.staging_buffers for c in start if c.algorithm == "lp"} >= set(STAGING_CHOICES)
    assert space.default_budget() == max(1, -(-len(grid) // 4))
    # host memory: no staging anywhere, names and grids as before
    assert all(c.staging_buffers is None for c in Space.of(coll, n).grid())


def test_staging_clamp_and_labels():
    space = Space.of("allreduce", 1 << 20, (2, 4, 8, 16))
    assert space.clamp(Config("lp", 4096)).staging_buffers == 4        # the default
    assert space.clamp(Config("lp", 4096, 5)).staging_buffers == 4     # nearest in log scale
    assert space.clamp(Config("lp", 4096, 100)).staging_buffers == 16
    assert space.clamp(Config("lp", 4096, 1)).staging_buffers == 2
    assert space.clamp(Config("mst", 4096, 8)) == Config("mst")        # unchunked: nothing
    assert Space.of("allreduce", 1 << 20).clamp(Config("lp", 4096, 8)) == Config("lp", 4096)
    assert Config("lp", 65536, 8).label == "lp/64K/s8" and Config("lp", 65536).label == "lp/64K"
    assert Space.of("allreduce", 1 << 20, (8,), default_staging=3).clamp(Config("ring", 4096)) == \
        Config("ring", 4096, 8)


def test_staging_space_suggest_is_conditional():
    space = Space.of("allreduce", 1 << 20, STAGING_CHOICES)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=3))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        cfg = space.suggest(trial)
        assert cfg in space.grid()
        assert set(trial.params) == set(space.params(cfg))
        assert (staging_param(cfg.algorithm) in trial.params) == space.chunked[cfg.algorithm]
        seen.add(cfg.staging_buffers)
        study.tell(trial, 1.0)
    assert seen - {None}


def test_study_names_keep_staging_choices_apart():
    assert study_name("allreduce", "host", 2, "float32", "sum", 8) == "lpmpi/allreduce/host/P2/float32/sum/8B"
    assert study_name("allreduce", "cuda", 2, "float32", "sum", 8, (2, 4)) == \
        "lpmpi/allreduce/cuda+staging2-4/P2/float32/sum/8B"


def test_staging_is_set_for_a_measurement_and_restored():
    from lpmpi.tune.measure import staging

    old = _core.cuda_info()["staging_buffers"]
    new = 16 if old != 16 else 8
    with staging(Config("lp", 4096, new)):
        assert _core.cuda_info()["staging_buffers"] == new
    assert _core.cuda_info()["staging_buffers"] == old
    with pytest.raises(RuntimeError), staging(Config("lp", 4096, 2)):
        raise RuntimeError("a failed trial")
    assert _core.cuda_info()["staging_buffers"] == old
    with staging(Config("lp", 4096)):                                    # none: left alone
        assert _core.cuda_info()["staging_buffers"] == old


# ----------------------------------------------------------------------------- tables


ROWS = {
    "allreduce": [
        {"lo": 0, "hi": 4096, "algorithm": "native", "chunk_bytes": None, "staging_buffers": None},
        {"lo": 4096, "hi": 65536, "algorithm": "mst", "staging_buffers": 8},      # unchunked: ignored
        {"lo": 65536, "hi": "inf", "algorithm": "lp", "chunk_bytes": 131072, "staging_buffers": 8},
    ],
    "bcast": [{"lo": 0, "hi": "inf", "algorithm": "lp", "chunk_bytes": 4096}],  # absent: default
}


def test_cuda_rows_with_staging_buffers_parse():
    t = parse_table(cuda_doc(ROWS))
    assert (t.memory, t.skipped) == ("cuda", [])
    assert [(r.algorithm, r.chunk_bytes, r.staging_buffers) for r in t.rows] == [
        ("native", None, None), ("mst", None, None), ("lp", 131072, 8), ("lp", 4096, None)]
    host = parse_table(cuda_doc(ROWS, memory="host"))                    # host tables: ignored
    assert host.skipped == [] and all(r.staging_buffers is None for r in host.rows)


@pytest.mark.parametrize("value", [0, 65, -4, 1.5, 8.0, True, "8", [8]])
@pytest.mark.parametrize("memory", ["cuda", "host"])
def test_invalid_staging_buffers_skip_the_row(value, memory):
    bad = {"lo": 0, "hi": 10, "algorithm": "lp", "chunk_bytes": 4096, "staging_buffers": value}
    good = {"lo": 10, "hi": "inf", "algorithm": "lp", "chunk_bytes": 4096, "staging_buffers": 64}
    t = parse_table(cuda_doc({"bcast": [bad, good]}, memory=memory))
    assert len(t.skipped) == 1 and "staging_buffers must be an int in 1..64" in t.skipped[0], t.skipped
    assert [(r.lo, r.staging_buffers) for r in t.rows] == [(10, 64 if memory == "cuda" else None)]


def test_cuda_table_document_round_trip_and_merging():
    chunked = {"lp": True, "mst": False, "native": False}
    ch = [Choice(8, "native", None, 2e-6, 2e-6), Choice(64, "mst", None, 3e-6, 4e-6, 8),
          Choice(4096, "lp", 1024, 5e-6, 9e-6, 4), Choice(8192, "lp", 1024, 7e-6, 9e-6, 4),
          Choice(16384, "lp", 1024, 9e-6, 12e-6, 8)]                  # another staging: a new row
    rows = merge_choices("reduce", ch, chunked)
    assert [(r.algorithm, r.chunk_bytes, r.staging_buffers) for r in rows] == [
        ("native", None, None), ("mst", None, None), ("lp", 1024, 4), ("lp", 1024, 8)]
    fp = cuda_doc({})["fingerprint"]
    d = tables.table_document(fp, rows, {"command": "x"})
    assert all("staging_buffers" in r for r in d["collectives"]["reduce"])
    back = parse_table(json.loads(json.dumps(d)))
    assert back.skipped == [] and [(r.lo, r.hi, r.algorithm, r.chunk_bytes, r.staging_buffers)
                                   for r in back.rows] == \
        [(r.lo, r.hi, r.algorithm, r.chunk_bytes, r.staging_buffers) for r in rows]
    host = tables.table_document({**fp, "memory": "host"}, rows, {})
    assert not any("staging_buffers" in r for r in host["collectives"]["reduce"])
    # the hash sees staging buffers
    other = json.loads(json.dumps(d))
    other["collectives"]["reduce"][-1]["staging_buffers"] = 16
    assert tables.rows_hash([parse_table(other)]) != tables.rows_hash([back]) != 0


def test_engine_applies_cuda_rows_with_staging(tmp_path):
    path = tmp_path / "cuda.json"
    path.write_text(json.dumps(cuda_doc(ROWS)))
    out = python("""
        import json, warnings
        import numpy as np
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import lpmpi
        from lpmpi import _core
        st = lpmpi.tables.status()
        assert [str(x.message) for x in w] == [] and len(st.applied) == 1, [str(x.message) for x in w]
        assert st.applied[0].skipped == [], st.applied[0].skipped
        assert _core.explain_choice("allreduce", 1 << 20, memory="cuda") == ("lp", 131072, "table")
        assert _core.explain_choice("allreduce", 1 << 20)[2] == "model"       # a cuda table only
        assert "staging buffers 8" in str(lpmpi.explain("allreduce", 1 << 20, memory="cuda"))
        x = np.arange(1 << 18, dtype=np.float32)                          # 1 MiB: the lp row, staged
        assert np.array_equal(lpmpi.allreduce(x), x)
        print("OK")
        """, env={**EMU, "LPMPI_TUNING_FILE": str(path)})
    assert "OK" in out


# ----------------------------------------------------------------------------- the command


def test_memory_cuda_errors_are_clear(monkeypatch, capsys, tmp_path):
    from lpmpi.tune.cli import main

    if _core.cuda_info()["emulated"]:
        pytest.skip("this process emulates device memory")
    args = ["--memory", "cuda", "--storage", "memory", "--sizes", "8", "--quiet", "--no-fit-model",
            "--out", str(tmp_path / "t.json"), "--allow-single"]     # this process is P = 1
    monkeypatch.setenv("LPMPI_TUNER_FAKE_DEVICE", "1")
    assert main(args) == 2
    assert "LPMPI_TUNER_FAKE_DEVICE=1 needs LPMPI_EMULATE_STAGING=1" in capsys.readouterr().err
    assert main([*args, "--staging-buffers", "4,0"]) == 2
    assert "--staging-buffers" in capsys.readouterr().err
    monkeypatch.delenv("LPMPI_TUNER_FAKE_DEVICE")
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert main(args) == 2
        assert "--memory cuda needs CuPy" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.mpi
def test_cuda_tuning_run_on_fake_device_arrays(tmp_path):
    """The tuner's cuda path end to end at P = 2: HostDeviceArray buffers on the emulated
    staged transport, the staging dimension searched, a cuda table with staging_buffers."""
    db, out = tmp_path / "tune.db", tmp_path / "cuda.json"
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", "--memory", "cuda",
           "--collectives", "allreduce,bcast", "--sizes", "256K", "--trials", "6", "--no-fit-model",
           "--storage", f"sqlite:///{db}", "--out", str(out), "--min-time", "0.002", "--min-reps", "3",
           "--max-reps", "5", "--warmup", "1", "--verify-rounds", "1", "--quiet"]
    rc, text, _ = run(cmd, child_env(FAKE), 120)
    assert rc == 0, text[-6000:]
    assert "transport staged, staging buffers tried for chunked algorithms: [2, 4, 8, 16]" in text
    t = tables.read_table(out)
    assert t.skipped == [] and t.memory == "cuda" and t.nprocs == 2
    assert {r.collective for r in t.rows} == {"allreduce", "bcast"}
    for r in t.rows:
        chunked = {n: c for n, _, c in _core._algorithm_info(r.collective)}[r.algorithm]
        assert (r.staging_buffers in STAGING_CHOICES) if chunked else r.staging_buffers is None, r
    doc = json.loads(out.read_text())
    assert all("staging_buffers" in r for rows in doc["collectives"].values() for r in rows)
    assert doc["tuner"]["settings"]["staging_choices"] == list(STAGING_CHOICES)
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    assert sorted(names) == [f"lpmpi/{c}/cuda+staging2-4-8-16+fresh/P2/float32/sum/262144B"
                             for c in ("allreduce", "bcast")]
    tried = {t.params.get("lp_staging_buffers") for n in names
             for t in optuna.load_study(study_name=n, storage=storage).get_trials()}
    assert len(tried - {None}) >= 2 and tried - {None} <= set(STAGING_CHOICES), tried


# ----------------------------------------------------------------------------- info and bench


def test_info_prints_the_device_line():
    out = python("", env={**EMU, "LPMPI_STAGING_BUFFERS": "8", "LPMPI_TUNING_FILE": "none"},
                 args=("-m", "lpmpi", "info"))
    assert "device memory: transport staged, 0 CUDA device(s), 8 staging buffers; emulated on the host" in out


def test_bench_auto_row_selects_for_the_bench_memory(tmp_path):
    """Under emulation every buffer is device memory to the engine: the auto row reports the
    cuda table's choice (be), not the host one."""
    path, js = tmp_path / "cuda.json", tmp_path / "bench.json"
    path.write_text(json.dumps(cuda_doc({"allreduce": [{"lo": 0, "hi": "inf", "algorithm": "be"}]})))
    python("", env={**EMU, "LPMPI_TUNING_FILE": str(path)},
           args=("-m", "lpmpi.bench", "--sizes", "64K", "--algorithms", "auto", "--no-bandwidth",
                 "--reps", "2", "--warmup", "0", "--json", str(js), "--allow-single"))
    rows = json.loads(js.read_text())["rows"]
    assert [(r["label"], r["selected_algorithm"]) for r in rows] == [("auto", "be")], rows
    assert rows[0]["time_us"] and rows[0]["check"] == "ok", rows
