"""The tuner: its search space and budget, the pruner, recovery of interrupted trials, a short
real tuning run at P = 2 whose table "auto" then uses, and resuming after an interruption
(a clean stop and a kill -9 of rank 0 with a trial running) without repeating finished trials."""
import json
import sys

import optuna  # in the test extra
import pytest
from _mpi import child_env, mpiexec, run
from optuna.trial import TrialState

from lpmpi import model, tables
from tuner.cli import size_ladder
from tuner.space import Config, Space
from tuner.studies import DUPLICATE_ATTR, BucketStudy, FarFromBestPruner, study_name

FAST = ["--min-time", "0.002", "--min-reps", "3", "--max-reps", "6", "--warmup", "1",
        "--verify-rounds", "1", "--quiet"]


def tune(*args, timeout=120):
    """Run ``mpiexec -n 2 python -m tuner args``; returns (exit status, output)."""
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "tuner", *args]
    rc, out, _ = run(cmd, child_env(), timeout)
    assert rc is not None, f"tuner timed out:\n{out[-6000:]}"
    return rc, out


def finished(db):
    """{(study, trial number): (state, params, value)} of every trial in the storage."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    out = {}
    for s in optuna.get_all_study_summaries(storage):
        for t in optuna.load_study(study_name=s.study_name, storage=storage).get_trials(deepcopy=False):
            out[(s.study_name, t.number)] = (t.state, tuple(sorted(t.params.items())), t.value,
                                             DUPLICATE_ATTR in t.user_attrs)
    return out


def done(trials):
    """Only the finished trials (complete, pruned or failed)."""
    return {k: v for k, v in trials.items() if v[0].is_finished()}


def measured(trials):
    """Finished, non-duplicate trials: the configurations actually measured, per study."""
    per: dict = {}
    for (study, _), (state, params, _, dup) in trials.items():
        if state in (TrialState.COMPLETE, TrialState.PRUNED) and not dup:
            per.setdefault(study, []).append(params)
    return per


# ----------------------------------------------------------------------------- unit


def test_size_ladder():
    assert size_ladder(8, 64, 2) == [8, 16, 32, 64]
    assert size_ladder(8, 100, 4) == [8, 32, 100]
    with pytest.raises(ValueError):
        size_ladder(64, 8, 2)


@pytest.mark.parametrize("coll", ["allreduce", "reduce", "bcast"])
@pytest.mark.parametrize("nbytes", [8, 3000, 1 << 20, 64 << 20])
def test_space_grid_budget_and_warm_start(coll, nbytes):
    space = Space.of(coll, nbytes)
    grid = space.grid()
    assert len(grid) == len(set(grid)) == len(model.grid(coll, nbytes))
    assert space.default_budget() == max(1, -(-len(grid) // 4))         # a quarter, rounded up
    start = space.warm_start(2, previous=Config("lp", 12345))
    assert start[0] == Config("native") and len(start) == len(set(start))
    assert {c.algorithm for c in start} == set(space.algorithms)         # every algorithm once
    assert all(c in grid for c in start)                                  # chunks on the grid
    for cfg in grid:                                                      # parameters round trip
        assert space.config_of(space.params(cfg)) == cfg


def test_space_suggest_is_conditional():
    space = Space.of("allreduce", 1 << 20)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    for _ in range(30):
        trial = study.ask()
        cfg = space.suggest(trial)
        assert cfg in space.grid()
        assert set(trial.params) == set(space.params(cfg))              # a chunk only when chunked
        study.tell(trial, 1.0)


def test_seeded_sampler_asks_the_same_first_trials():
    def first(seed):
        space = Space.of("allreduce", 1 << 22)
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=3))
        out = []
        for i in range(8):
            trial = study.ask()
            out.append(space.suggest(trial))
            study.tell(trial, float(i % 3))
        return out

    assert first(7) == first(7)


def test_pruner_prunes_far_from_best():
    study = optuna.create_study(pruner=FarFromBestPruner(1.5))
    t = study.ask()
    t.report(1.0, 3)
    assert not t.should_prune()            # nothing complete yet
    study.tell(t, 1.0)
    slow, close = study.ask(), study.ask()
    slow.report(1.6, 3)
    close.report(1.4, 3)
    assert slow.should_prune() and not close.should_prune()
    with pytest.raises(ValueError):
        FarFromBestPruner(1.0)


def test_stale_running_trial_is_failed_and_requeued(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    space = Space.of("bcast", 1 << 16)
    name = study_name("bcast", "host", 2, "float32", "sum", 1 << 16)

    def open_():
        return BucketStudy.open(optuna.storages.RDBStorage(url), name, space, 3, 0, 1.5, 4, "MPICH X")

    bs = open_()
    bs.enqueue([Config("native"), Config("lp", 4096)])
    cfg = bs.ask()
    bs.tell(cfg, 1e-3, False, 5)                              # finished: native
    running = bs.ask()                                        # then "killed" while running lp/4K
    assert running == Config("lp", 4096)
    bs2 = open_()
    assert bs2.recovered == 1 and list(bs2.measured) == [Config("native")]
    states = [t.state for t in bs2.study.get_trials()]
    assert states.count(TrialState.FAIL) == 1 and states.count(TrialState.WAITING) == 1
    assert bs2.ask() == Config("lp", 4096)                    # the interrupted one comes again
    with pytest.raises(RuntimeError, match="another"):
        BucketStudy.open(optuna.storages.RDBStorage(url), name, space, 3, 0, 1.5, 4, "Open MPI")


# ----------------------------------------------------------------------------- real runs at P = 2


@pytest.mark.mpi
def test_tuning_run_writes_a_table_that_auto_uses(tmp_path):
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    rc, text = tune("--collectives", "allreduce,bcast", "--sizes", "8,256K", "--storage", f"sqlite:///{db}",
                    "--out", str(out), *FAST)
    assert rc == 0, text[-6000:]
    assert "speedup" in text and f"wrote {out}" in text                 # the summary table
    t = tables.read_table(out)
    assert t.skipped == [] and t.nprocs == 2 and t.model is not None
    assert {r.collective for r in t.rows} == {"allreduce", "bcast"}
    assert t.tuner["command"].startswith("mpiexec -n 2 lpmpi-tune")
    for b in t.tuner["buckets"]:                                         # a quarter of the grid
        assert b["measured"] <= max(1, -(-b["grid"] // 4)), b
    expect = {f"{c} {n}": [t.lookup(c, n).algorithm, t.lookup(c, n).chunk_bytes]
              for c in ("allreduce", "bcast") for n in (8, 100, 256 << 10, 1 << 24)}
    code = ("import json, lpmpi; from mpi4py import MPI; "
            "r = {f'{c} {n}': list(lpmpi.select(c, n)) for c in ('allreduce', 'bcast') "
            "for n in (8, 100, 256 << 10, 1 << 24)}; "
            "e = lpmpi.explain('bcast', 256 << 10); assert e.source == 'table', e; "
            "import sys; sys.stdout.write(f'RESULT {MPI.COMM_WORLD.rank} {json.dumps(r)}\\n'); sys.stdout.flush()")
    rc, text = run([mpiexec(), "-n", "2", sys.executable, "-c", code],
                   child_env({"LPMPI_TUNING_FILE": str(out)}), 60)[:2]
    assert rc == 0, text[-4000:]
    got = [json.loads(ln.split(None, 2)[2]) for ln in text.splitlines() if ln.startswith("RESULT")]
    assert len(got) == 2 and all(g == expect for g in got), (got, expect)
    # a rerun of the same command finds everything done: nothing measured again
    before = finished(db)
    rc, text = tune("--collectives", "allreduce,bcast", "--sizes", "8,256K", "--storage", f"sqlite:///{db}",
                    "--out", str(out), *FAST)
    assert rc == 0 and finished(db) == before, text[-4000:]


@pytest.mark.mpi
def test_resume_after_stop_and_kill_repeats_no_finished_trial(tmp_path):
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    cmd = ["--collectives", "allreduce", "--sizes", "8,64K", "--storage", f"sqlite:///{db}",
           "--out", str(out), "--no-fit-model", *FAST]
    rc, text = tune(*cmd, "--max-trials-this-run", "2")                  # a clean stop
    assert rc == 3 and "rerun the same command" in text, text[-4000:]
    first = finished(db)
    assert sum(len(v) for v in measured(first).values()) == 2 and not out.exists()

    rc, text = tune(*cmd, "--crash-after", "2")                          # kill -9 of rank 0
    assert rc not in (0, 3), text[-4000:]
    second = finished(db)
    assert all(second[k] == v for k, v in done(first).items())           # nothing lost or redone
    assert [v[0] for v in second.values()].count(TrialState.RUNNING) == 1
    assert sum(len(v) for v in measured(second).values()) == 4

    rc, text = tune(*cmd)                                                 # the same command again
    assert rc == 0, text[-6000:]
    third = finished(db)
    assert all(third[k] == v for k, v in done(second).items())
    assert [v[0] for v in third.values()].count(TrialState.RUNNING) == 0
    for study, configs in measured(third).items():
        assert len(configs) == len(set(configs)), f"{study}: a configuration was measured twice"
        nbytes = int(study.rsplit("/", 1)[1][:-1])
        assert len(configs) == 1 + Space.of("allreduce", nbytes).default_budget(), (study, configs)
    assert tables.read_table(out).rows
