"""The online tuner (LPMPI_AUTOTUNE=1, issue 40): every rank takes the same choice at every
call (LPMPI_CHECK=1 compares each call's whole decision; the tuner's states are compared after
the run) with noise on one rank only; keys settle within 64 calls; nonblocking and persistent
calls take the settled choice; a program of nonblocking calls only explores and settles; a drift is followed both ways; what was learned reads back as a
tuning table, is written at exit, starts the next run and folds into a table (lpmpi-tune
--merge).  The shared measurement core (median, prune, decide) is the engine's."""
import json
import math
import subprocess
import sys

import pytest
from _mpi import TESTS, child_env, format_failure, mpiexec, run

CASES = TESTS / "autotune_cases.py"
ENV = {"LPMPI_AUTOTUNE": "1", "LPMPI_CHECK": "1"}


def _spawn(nprocs, *args, env=None, timeout=240):
    env = {**ENV, **(env or {})}
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(CASES), *args]
    rc, out, _ = run(cmd, child_env(env), timeout)
    if rc != 0:
        pytest.fail(format_failure(cmd, env, rc, out, timeout), pytrace=False)
    assert "SUMMARY" in out and "failed=0" in out, out[-3000:]
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3])
def test_every_rank_chooses_alike_under_noise_on_one_rank(nprocs):
    out = _spawn(nprocs, "noise")
    assert "settled on" in out, out[-3000:]


@pytest.mark.mpi
def test_nonblocking_and_persistent_calls_take_the_settled_choice():
    _spawn(2, "forms")


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3])
def test_a_program_of_nonblocking_calls_only_explores_and_settles(nprocs):
    _spawn(nprocs, "nonblocking")


@pytest.mark.mpi
@pytest.mark.parametrize("tuner", ["1", "0"])
def test_ranks_waiting_in_different_orders_do_not_hang_the_agreements(tuner):
    _spawn(2, "asym", env={"LPMPI_AUTOTUNE": tuner}, timeout=120)


@pytest.mark.mpi
def test_a_drift_is_followed_both_ways():
    _spawn(2, "drift")


@pytest.mark.mpi
def test_a_steady_key_times_one_call_in_several_and_still_follows_a_drift():
    _spawn(2, "stride")


@pytest.mark.mpi
def test_report_file_warm_start_and_merge(tmp_path):
    rep = tmp_path / "report.json"
    at_exit = tmp_path / "at_exit.json"
    _spawn(2, "save", "--out", str(rep), env={"LPMPI_AUTOTUNE_FILE": str(at_exit)})
    from lpmpi import autotune, tables
    got = autotune.read(rep)                                           # a plain tuning table
    assert got.rows and got.nprocs == 2 and not got.skipped
    assert tables.read_table(at_exit).rows                             # written at exit too
    row = json.loads(rep.read_text())["collectives"]["allreduce"][0]
    assert row["autotune"]["settle_calls"] <= 64 and row["autotune"]["calls"] >= 64, row
    # the next run starts from it: its rows applied over the tables (explain shows them)
    probe = ("import lpmpi, json; from mpi4py import MPI; st = lpmpi.tables.status(); "
             "MPI.COMM_WORLD.rank or print(json.dumps([len(st.warm), lpmpi._core.choice('allreduce', 4096)[3]]))")
    cmd = [mpiexec(), "-n", "2", sys.executable, "-c", probe]
    rc, out, _ = run(cmd, child_env({**ENV, "LPMPI_AUTOTUNE_FILE": str(at_exit)}), 60)
    assert rc == 0, out
    warm, source = json.loads(out.strip().splitlines()[-1])
    assert warm > 0 and source == "table", out
    # LPMPI_TUNING_FILE loads it as any table
    probe2 = "import lpmpi; print(len(lpmpi.tables.status().applied[0].rows))"
    r = subprocess.run([sys.executable, "-c", probe2], env=child_env({"LPMPI_TUNING_FILE": str(rep)}),
                       capture_output=True, text=True, timeout=60, cwd=str(TESTS), check=False)
    assert r.returncode == 0 and int(r.stdout.split()[-1]) == len(got.rows), r.stdout + r.stderr
    # lpmpi-tune --merge: the rows folded into a shipped table of the same P
    shipped = next(p for p in tables.shipped_tables() if p.endswith("mpich-P2-host-epyc.json"))
    merged = tmp_path / "merged.json"
    r = subprocess.run([sys.executable, "-m", "lpmpi.tune", "--merge", str(rep), "--into", shipped,
                        "--out", str(merged), "--allow-single"], env=child_env(), capture_output=True,
                       text=True, timeout=60, cwd=str(TESTS), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    t = tables.read_table(merged)
    assert not t.skipped and t.rows
    learned = got.rows[0]
    at = t.lookup(learned.collective, int(learned.lo))
    assert (at.algorithm, at.chunk_bytes) == (learned.algorithm, learned.chunk_bytes)


def _learned(sizes, env, calls=70):
    out = _spawn(2, "learned", "--sizes", ",".join(map(str, sizes)), "--calls", str(calls), env=env)
    line = next(ln for ln in out.splitlines() if ln.startswith("LEARNED "))
    return json.loads(line[len("LEARNED "):]), out


@pytest.mark.mpi
def test_the_per_machine_cache_starts_the_next_run_settled(tmp_path):
    """Without LPMPI_AUTOTUNE_FILE the learned rows go to the per-machine cache (one file per
    MPI library, CPU and MPI tuning variables); the next run's keys they cover start settled on
    them (no exploring call), its other keys explore and join the file; a row whose time the
    machine no longer makes re-explores; another MPI tuning
    setting learns into another file; a corrupt cache or a foreign file: one warning a process,
    the keys explore, the corrupt file replaced at exit."""
    env = {"XDG_CACHE_HOME": str(tmp_path), "LPMPI_AUTOTUNE_FILE": ""}
    first, _ = _learned([4096], env)
    files = sorted((tmp_path / "lpmpi").glob("autotune-P2-*.json"))
    assert len(files) == 1 and first["path"] == str(files[0]), (first, files)
    assert first["warm"] == 0 and first["keys"]["4096"]["settle_calls"] > 0, first
    learned = first["keys"]["4096"]["choice"]

    second, out = _learned([4096, 65536], env)
    k, new = second["keys"]["4096"], second["keys"]["65536"]
    assert second["warm"] == 1 and "TuningWarning" not in out, out[-3000:]
    assert (k["state"], k["settle_calls"], k["explore_calls"], k["choice"]) == ("settled", 0, 0, learned), second
    assert new["explore_calls"] > 0, second
    rows = json.loads(files[0].read_text())["collectives"]["allreduce"]
    assert [r["lo"] for r in rows] == [4096, 65536], rows          # merged: the first run's row kept

    doc = json.loads(files[0].read_text())         # a row learned on a machine 1000x faster
    for r in doc["collectives"]["allreduce"]:
        r["measured"][0]["time_us"] /= 1000
    files[0].write_text(json.dumps(doc))
    fast, _ = _learned([4096], env, calls=400)   # (a first window of up to 256 calls)
    k = fast["keys"]["4096"]
    assert fast["warm"] == 2 and k["drifts_slower"] >= 1 and k["explore_calls"] > 0, fast   # re-explored

    other, _ = _learned([4096], {**env, "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "auto"})
    assert other["warm"] == 0 and other["path"] != first["path"], other
    assert len(list((tmp_path / "lpmpi").glob("autotune-P2-*.json"))) == 2

    files[0].write_text("{ not json")
    bad, out = _learned([4096], env)
    assert out.count("TuningWarning") == 2 and files[0].name in out, out[-3000:]   # one per rank
    assert bad["warm"] == 0 and bad["keys"]["4096"]["explore_calls"] > 0, bad
    from lpmpi import tables
    assert tables.read_table(files[0]).rows                        # replaced at exit

    doc = json.loads(files[0].read_text())
    doc["fingerprint"]["cpu_model"] = "Another CPU 9000"
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps(doc))
    got, out = _learned([4096], {**env, "LPMPI_AUTOTUNE_FILE": str(foreign)})
    assert out.count("TuningWarning") == 2 and "foreign" in out, out[-3000:]
    assert got["warm"] == 0 and got["keys"]["4096"]["explore_calls"] > 0, got


def test_overlay_cuts_the_base_rows_around_the_learned_ones():
    from lpmpi import autotune, tables
    base = [tables.Row("allreduce", 0, 1000, "lp", 256, ()), tables.Row("allreduce", 1000, math.inf, "ring", 4096, ())]
    top = [tables.Row("allreduce", 500, 2000, "native", None, ())]
    rows = autotune.overlay(base, top)
    assert [(r.lo, r.hi, r.algorithm) for r in rows] == [(0, 500, "lp"), (500, 2000, "native"),
                                                         (2000, math.inf, "ring")]


def test_the_shared_core():
    import numpy as np

    from lpmpi import _core
    from lpmpi.bench.harness import Timing
    from lpmpi.tune.driver import decide
    from lpmpi.tune.space import NATIVE, Config
    assert _core.tune_median([3.0, 1.0, 2.0]) == 2.0 and _core.tune_median([1.0, 2.0, 3.0, 10.0]) == 2.5
    assert Timing(np.array([5.0, 1.0, 3.0])).median == 3.0
    assert _core.tune_pruned(1.6, 1.0, 1.5) and not _core.tune_pruned(1.5, 1.0, 1.5)
    assert _core.tune_decide([2.0, 1.0, float("nan")]) == 1
    assert _core.tune_decide([1.02, 1.0], prefer=0, tie=0.03) == 0
    assert _core.tune_decide([1.2, 1.0], prefer=0, tie=0.03) == 1
    a, n = Config("lp", 4096), Config(NATIVE)
    assert decide({a: 1.0, n: 1.02})[0] == n and decide({a: 1.0, n: 1.2})[0] == a
    with pytest.raises(ValueError):
        _core.tune_median([])
