"""The tuner: its search space and budget, the pruner, recovery of interrupted trials, a short
real tuning run at P = 2 whose table "auto" then uses, and resuming after an interruption
(a clean stop and a kill -9 of rank 0 with a trial running) without repeating finished trials."""
import json
import os
import signal
import sys

import numpy as np
import optuna  # in the test extra
import pytest
from _mpi import child_env, mpiexec, run
from optuna.trial import TrialState

from lpmpi import engine, model, tables
from lpmpi.bench import chunk_label, transports_of
from lpmpi.tune.cli import size_ladder, transport_dimension
from lpmpi.tune.driver import TIE, choice_record, decide
from lpmpi.tune.report import describe, summary
from lpmpi.tune.space import Config, Space, transport_param
from lpmpi.tune.studies import CHOICE_ATTR, DUPLICATE_ATTR, BucketStudy, FarFromBestPruner, study_name

FAST = ["--min-time", "0.002", "--min-reps", "3", "--max-reps", "6", "--warmup", "1",
        "--verify-rounds", "1", "--quiet"]


def tune(*args, timeout=120):
    """Run ``mpiexec -n 2 python -m lpmpi.tune args``; returns (exit status, output)."""
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.tune", *args]
    rc, out, _ = run(cmd, child_env(), timeout)
    assert rc is not None, f"tuner timed out:\n{out[-6000:]}"
    return rc, out


def each_rank(code, tuning_file):
    """Run ``code`` (which leaves its answer in ``r``) on 2 ranks with LPMPI_TUNING_FILE set; the
    JSON of every rank's ``r``."""
    code += "; import json, sys; sys.stdout.write(f'RESULT {json.dumps(r)}\\n'); sys.stdout.flush()"
    rc, text = run([mpiexec(), "-n", "2", sys.executable, "-c", code],
                   child_env({"LPMPI_TUNING_FILE": str(tuning_file)}), 60)[:2]
    assert rc == 0, text[-4000:]
    return [json.loads(ln.split(None, 1)[1]) for ln in text.splitlines() if ln.startswith("RESULT")]


def finished(db):
    """{(study, trial number): (state, params, value)} of every trial in the storage."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    out = {}
    for s in optuna.get_all_study_summaries(storage):
        for t in optuna.load_study(study_name=s.study_name, storage=storage).get_trials(deepcopy=False):
            out[(s.study_name, t.number)] = (t.state, tuple(sorted(t.params.items())), t.value,
                                             DUPLICATE_ATTR in t.user_attrs)
    return out


def choices(db):
    """{study: its stored choice record} of every study in the storage."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    return {s.study_name: s.user_attrs.get(CHOICE_ATTR) for s in optuna.get_all_study_summaries(storage)}


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


def test_warm_start_order_prefers_the_neighbouring_bucket():
    """native, then the previous bucket's choice, the model's best, the previous runner-up,
    LP with one chunk for the whole message, LP at the analytic chunk, the rest."""
    space = Space.of("reduce", 128 << 10)
    prev = [Config("lp", 4096), Config("mst")]
    start = space.warm_start(2, previous=prev)
    model_best = space.predictions(2)[0][0]
    head = list(dict.fromkeys([Config("native"), prev[0], model_best, prev[1],
                               Config("lp", 128 << 10), space.lp_analytic(2)]))
    assert start[:len(head)] == head
    assert space.whole_message() == Config("lp", 128 << 10)
    assert Space.of("reduce", 256 << 20).whole_message() == Config("lp", 16 << 20)   # grid's cap
    assert space.warm_start(2, previous=Config("lp", 4096))[1] == Config("lp", 4096)
    assert space.warm_start(2)[0] == Config("native")


def test_decide_keeps_native_within_the_tie():
    lp, native = Config("lp", 4096), Config("native")
    assert decide({lp: 1.0, native: 1.0 + TIE / 2}) == (native, 1.0 + TIE / 2, 1.0 + TIE / 2)
    assert decide({lp: 1.0, native: 1.0 + 2 * TIE}) == (lp, 1.0, 1.0 + 2 * TIE)
    assert decide({lp: 2.0, Config("mst"): 1.0}) == (Config("mst"), 1.0, None)   # no native: fastest


def test_decide_with_one_core_times_takes_the_finalist_that_holds_on_a_shared_core():
    ring, mst, native = Config("ring", 1024, transport="shm"), Config("mst"), Config("native")
    quiet = {ring: 2.9, mst: 3.0, native: 4.4}
    assert decide(quiet)[0] == ring
    assert decide(quiet, {ring: 16.0, mst: 6.5}, 0.05) == (mst, 3.0, 4.4)         # 3% slower quiet
    assert decide(quiet, {ring: 16.0, mst: 6.5}, 0.02)[0] == ring                  # beyond the tolerance
    assert decide(quiet, {ring: 6.6, mst: 6.5}, 0.05)[0] == ring                   # within TIE on one core
    assert decide(quiet, {ring: 16.0, mst: 6.5}, 0.0)[0] == ring                   # off
    assert decide(quiet, {mst: 6.5}, 0.05)[0] == ring                              # the choice not measured
    tie = {ring: 2.9, native: 2.95}                                                # native within TIE
    assert decide(tie, {ring: 5.0, native: 12.0}, 0.05)[0] == ring


def test_one_core_puts_every_rank_on_one_cpu_and_gives_each_its_own_back(tmp_path):
    table = tmp_path / "none.json"
    table.write_text("{}")
    got = each_rank("import os; from mpi4py import MPI; from lpmpi.tune.driver import one_core; "
                    "w = MPI.COMM_WORLD; before = sorted(os.sched_getaffinity(0)); "
                    "cm = one_core(w); ok = cm.__enter__(); inside = sorted(os.sched_getaffinity(0)); "
                    "cm.__exit__(None, None, None); "
                    "r = [ok, inside, w.allgather(inside), sorted(os.sched_getaffinity(0)) == before]", table)
    for ok, inside, every, back in got:             # (unpinned ranks: each may go to rank 0's CPU)
        assert ok and back and len(inside) == 1 and all(e == inside for e in every), got


def test_space_suggest_is_conditional():
    space = Space.of("allreduce", 1 << 20)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    for _ in range(30):
        trial = study.ask()
        cfg = space.suggest(trial)
        assert cfg in space.grid()
        assert set(trial.params) == set(space.params(cfg))              # a chunk only when chunked
        study.tell(trial, 1.0)


ALL = ("mpi", "shm", "cma")


def test_space_with_transports_multiplies_the_ring_by_each_transport():
    """The transport dimension: only the algorithms that have transports (the ring allreduce),
    each of their grid configurations once per transport; kept in engine.TRANSPORTS order."""
    assert engine.TRANSPORTS == ALL
    plain = Space.of("allreduce", 1 << 20)
    space = Space.of("allreduce", 1 << 20, transports=("cma", "mpi", "shm"))
    assert space.transports == ALL and space.transported == {"ring"}
    rings = [c for c in plain.grid() if c.algorithm == "ring"]
    grid = space.grid()
    assert rings and len(grid) == len(set(grid)) == len(plain.grid()) + (len(ALL) - 1) * len(rings)
    assert {c for c in grid if c.algorithm == "ring"} == {Config("ring", c.chunk_bytes, None, t)
                                                          for c in rings for t in ALL}
    assert all(c.transport is None for c in grid if c.algorithm != "ring")
    assert space.default_budget() == -(-len(grid) // 4)
    for cfg in grid:                                                      # parameters round trip
        p = space.params(cfg)
        assert (transport_param("ring") in p) == (cfg.algorithm == "ring")
        assert space.config_of(p) == cfg
    # one transport asked: a dimension of one value (the configurations carry it)
    one = Space.of("allreduce", 1 << 20, transports=("shm",))
    assert len(one.grid()) == len(plain.grid())
    assert {c.transport for c in one.grid() if c.algorithm == "ring"} == {"shm"}
    # no algorithm with transports (bcast, reduce): no dimension
    for coll in ("bcast", "reduce"):
        assert Space.of(coll, 1 << 20, transports=ALL).grid() == Space.of(coll, 1 << 20).grid()
        assert Space.of(coll, 1 << 20, transports=ALL).transports == ()
    with pytest.raises(ValueError, match="unknown transports"):
        Space.of("allreduce", 1 << 20, transports=("mpi", "rdma"))


def test_space_with_transports_clamp_config_of_and_labels():
    space = Space.of("allreduce", 1 << 20, transports=ALL)
    ruled = Space.of("allreduce", 1 << 20, transports=ALL, default_transport="shm")
    assert ruled.default_transport == "shm"
    lacking = Space.of("allreduce", 1 << 20, transports=("mpi", "cma"), default_transport="shm")
    assert lacking.default_transport is None                             # not searched: not the default
    ring = Config("ring", 4096)
    assert space.clamp(ring) == Config("ring", 4096, None, "mpi")        # no transport: the first
    assert ruled.clamp(ring) == Config("ring", 4096, None, "shm")        # ... or the rule's
    assert space.clamp(Config("ring", 1 << 16, None, "cma")) == Config("ring", 1 << 16, None, "cma")
    assert space.clamp(Config("ring", 1 << 16, None, "rdma")).transport == "mpi"   # not a choice
    assert space.clamp(Config("lp", 1 << 16, None, "shm")) == Config("lp", 1 << 16)   # lp: none
    assert space.clamp(Config("native", None, None, "shm")) == Config("native")
    assert Space.of("allreduce", 1 << 20).clamp(Config("ring", 1 << 16, None, "cma")) == Config("ring", 65536)
    good = space.params(Config("ring", 1 << 16, None, "shm"))
    assert good[transport_param("ring")] == "shm"
    assert space.config_of({**good, transport_param("ring"): "rdma"}) is None       # unknown transport
    assert space.config_of({k: v for k, v in good.items() if k != transport_param("ring")}) is None
    assert Space.of("allreduce", 1 << 20, transports=("mpi", "cma")).config_of(good) is None   # not searched
    assert Space.of("allreduce", 1 << 20).config_of(good) == Config("ring", 1 << 16)   # no dimension
    # labels and words: the transport ends them; without one, as before
    assert Config("ring", 1 << 18, None, "shm").label == "ring/256K@shm"
    assert Config("lp", 1 << 16, 8).label == "lp/64K/s8" and Config("native").label == "native"
    assert chunk_label("ring", 1 << 18, None, "cma") == "ring/256K@cma" and chunk_label("lp", 4096) == "lp/4K"
    assert describe(Config("ring", 1 << 18, None, "shm")) == "ring chunk 256 KiB over shm"


def test_space_with_transports_warm_start_and_suggest():
    """The warm start measures the ring at its model chunk over each transport (the model knows
    none); the sampler asks a transport for the ring only."""
    space = Space.of("allreduce", 1 << 20, transports=ALL, default_transport="shm")
    start = space.warm_start(2, previous=[Config("ring", 1 << 16, None, "cma")])
    assert start[0] == Config("native") and start[1] == Config("ring", 1 << 16, None, "cma")
    assert len(start) == len(set(start)) and all(c in space.grid() for c in start)
    model_ring = next(c for c, _ in space.predictions(2) if c.algorithm == "ring")
    assert model_ring.transport == "shm"
    assert {Config("ring", model_ring.chunk_bytes, None, t) for t in ALL} <= set(start)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    seen = set()
    for _ in range(40):
        trial = study.ask()
        cfg = space.suggest(trial)
        assert cfg in space.grid() and set(trial.params) == set(space.params(cfg))
        seen.add(cfg.transport)
        study.tell(trial, 1.0)
    assert seen - {None}


def test_transport_dimension_names_studies_records_and_the_summary():
    # the transports the communicator has (lpmpi._core.comm_transport's name), and those searched
    assert transports_of("shm+cma") == ALL and transports_of("cma") == ("mpi", "cma")
    assert transports_of("mpi") == ("mpi",)
    assert transport_dimension(ALL, None)[0] == ALL
    assert transport_dimension(ALL, ["cma", "mpi"])[0] == ("mpi", "cma")
    assert transport_dimension(("mpi",), None) == ((), "mpi here; no transport dimension")
    # a transport space is its own study
    base = study_name("allreduce", "host", 2, "float32", "sum", 1 << 20, (), True)
    named = study_name("allreduce", "host", 2, "float32", "sum", 1 << 20, (), True, ALL)
    assert named != base
    assert named == "lpmpi/allreduce/host+transports-mpi-shm-cma+fresh/P2/float32/sum/1048576B"
    # the stored record carries the transport; records without one (older) still read
    ring, native = Config("ring", 1 << 16, None, "shm"), Config("native")
    rec = choice_record(ring, 1e-4, 2e-4, {ring: 1e-4, native: 2e-4}, 5, 1)
    assert rec["transport"] == "shm" and [Config(*c) for c in rec["candidates"]] == [ring, native]
    assert Config(*["ring", 65536, None]) == Config("ring", 1 << 16)
    # the summary's transport column, only when a choice has one
    from lpmpi.tune.report import BucketResult

    with_tp = summary([BucketResult("allreduce", 1 << 20, ring, 1e-4, 2e-4, 3, 12, 47)])
    assert "transport" in with_tp[0] and " shm " in with_tp[2]
    assert "transport" not in summary([BucketResult("allreduce", 8, native, 1e-6, 1e-6, 1, 2, 5)])[0]


def test_a_configuration_runs_over_its_transport_call_by_call():
    """The tuner's calls (lpmpi.bench.with_transport, via the benchmark's make_call) set the
    configuration's transport around each call, so that interleaved ones each take their own;
    the override is off again between calls."""
    from mpi4py import MPI

    from lpmpi import _core
    from lpmpi.bench import with_transport
    from lpmpi.tune.measure import Bench, settings

    def asked() -> tuple:
        return _core.transport_choice("allreduce", 1 << 20)

    assert asked() == (None, "model")
    assert with_transport(asked, "cma")() == ("cma", "override") and asked() == (None, "model")
    with settings(Config("ring", 4096, None, "shm")):
        assert asked() == ("shm", "override")
    assert asked() == (None, "model")
    b = Bench(MPI.COMM_SELF, "allreduce", 4096, np.dtype(np.float32), "sum")
    for tp in ALL:
        b.call(Config("ring", 1024, None, tp))()
    assert asked() == (None, "model")
    assert len(b.interleaved([Config("ring", 1024, None, t) for t in ALL], 1, 3)) == 3


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


def test_a_bucket_whose_grid_ran_out_before_its_budget_is_done_on_resume(tmp_path):
    """A grid smaller than the budget ends when the sampler finds nothing new; a resumed run
    must count that bucket done and reuse its stored choice (it used to ask again and re-run
    the final check, re-deciding finished sizes)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    space = Space.of("bcast", 8)
    name = study_name("bcast", "host", 2, "float32", "sum", 8)

    def open_():
        return BucketStudy.open(optuna.storages.RDBStorage(url), name, space, 100, 0, 1.5, 4, "MPICH X")

    bs = open_()
    n = 0
    while (cfg := bs.ask()) is not None:
        n += 1
        bs.tell(cfg, 1e-3 * n, False, 5)
    assert bs.done and bs.counted < 100 and len(bs.measured) == len(space.grid())
    bs.store_choice({"algorithm": "native", "chunk_bytes": None, "seconds": 1e-3, "native_s": 1e-3})
    again = open_()
    assert again.done and again.stored_choice() is not None
    assert again.ask() is None                    # nothing asked, nothing re-measured


def test_ctrl_c_inside_a_storage_write_waits_for_it_then_interrupts(tmp_path, monkeypatch):
    """Ctrl-C landing inside SQLAlchemy/sqlite3 could leave a transaction open and the database
    locked, so that marking the running trial failed then failed ("database is locked", seen in
    CI).  The write finishes first, the KeyboardInterrupt comes after, and the storage takes the
    abandon at once."""
    # Python's own Ctrl-C handler, as in a terminal: a process started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Ctrl-C then rightly interrupts nothing
    # (a fresh clone's run of the README's test command from such a shell failed here)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    space = Space.of("bcast", 1 << 16)
    name = study_name("bcast", "host", 2, "float32", "sum", 1 << 16)
    storage = optuna.storages.RDBStorage(url)
    bs = BucketStudy.open(storage, name, space, 3, 0, 1.5, 4, "MPICH X")
    bs.enqueue([Config("native"), Config("lp", 4096)])
    cfg = bs.ask()
    real = storage.set_trial_state_values
    handler = signal.getsignal(signal.SIGINT)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)              # Ctrl-C in the middle of the write
        return real(*args, **kwargs)

    monkeypatch.setattr(storage, "set_trial_state_values", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bs.tell(cfg, 1e-3, False, 5)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is handler   # restored
    assert list(bs.measured) == [cfg]                    # the write was not cut short
    assert bs.ask() == Config("lp", 4096)
    bs.abandon()                                         # the storage is not left locked
    states = [t.state for t in optuna.load_study(study_name=name, storage=url).get_trials()]
    assert states.count(TrialState.COMPLETE) == 1 and states.count(TrialState.FAIL) == 1
    assert states.count(TrialState.RUNNING) == 0
    signal.signal(signal.SIGINT, old_int)


@pytest.mark.parametrize("collective", ["allreduce", "reduce", "bcast"])
def test_fresh_input_rewrites_the_input_before_each_timed_call(collective):
    """With fresh_input (the tuner's default) every configuration's call carries an untimed
    ``before`` that rewrites this rank's input from its original (bcast: the root's only, the
    other ranks' buffer being the output); without it, none."""
    from mpi4py import MPI

    from lpmpi.tune.measure import Bench

    dt = np.dtype(np.float32)
    b = Bench(MPI.COMM_SELF, collective, 4096, dt, "sum", root=0, fresh_input=True)
    call = b.call(Config("native"))
    send = np.asarray(b.bufs.send)
    send[:] = -7
    call.before()
    assert np.array_equal(send, b.bufs.orig)
    call()
    if collective == "bcast":                             # a rank that is not the root
        b.root = 1
        assert not hasattr(b.call(Config("native")), "before")
    plain = Bench(MPI.COMM_SELF, collective, 4096, dt, "sum", fresh_input=False)
    assert not hasattr(plain.call(Config("native")), "before")
    assert study_name(collective, "host", 2, "float32", "sum", 4096, (), True) != \
        study_name(collective, "host", 2, "float32", "sum", 4096)


def _row(label, us, alg=None, chunk=None, selected=None):
    from lpmpi.bench import Row

    r = Row("allreduce", label, alg or label.split("/")[0], chunk, 1024, 256, "float32", "sum", None, 2)
    r.time_us = us
    if selected:
        r.selected_algorithm, r.selected_chunk_bytes = selected
    return r


def test_compare_grid_finalists_and_regret_from_the_confirmation():
    """The screening pass picks the finalists (3 fastest grid rows, native, tuned, auto); the
    regret comes from their second, independent measurement, not the screening's minimum."""
    from lpmpi.bench import finalists, grid_row, summarize_grid

    screen = [_row("native", 30.0), _row("mst", 25.0), _row("lp/4K", 10.0, "lp", 4096),
              _row("lp/8K", 11.0, "lp", 8192), _row("lp/16K", 12.0, "lp", 16384),
              _row("ring/8K", 13.0, "ring", 8192), _row("be", None),      # be failed: no time
              _row("tuned", 12.5, "lp", 16384), _row("auto", 12.6, "auto", selected=("lp", 16384))]
    assert finalists(screen, 3) == ["lp/4K", "lp/8K", "lp/16K", "native", "tuned", "auto"]
    assert finalists(screen, 1) == ["lp/4K", "native", "tuned", "auto"]
    # confirmation: lp/4K's screening time was a lucky draw; lp/16K is as fast as the best
    confirm = [_row("lp/4K", 12.0, "lp", 4096), _row("lp/8K", 11.9, "lp", 8192),
               _row("lp/16K", 11.8, "lp", 16384), _row("native", 29.0),
               _row("tuned", 12.2, "lp", 16384), _row("auto", 12.98, "auto", selected=("lp", 16384))]
    g = grid_row("allreduce", 1024, screen, confirm)
    assert (g.grid_size, g.best, g.best_us, g.native_us) == (7, "lp/16K", 11.8, 29.0)
    assert (g.screen_best, g.screen_best_us) == ("lp/4K", 10.0)
    assert (g.tuned, g.auto) == ("lp/16K", "lp/16K")
    assert g.regret(g.tuned_us) == pytest.approx(12.2 / 11.8 - 1)
    assert g.regret(g.auto_us) == pytest.approx(0.1)                    # over the 5% target
    lines, data = summarize_grid([g])
    assert data["worst_auto_regret"]["sizes_over_target"] == [1024]
    assert data["worst_tuned_regret"]["sizes_over_target"] == []
    assert data["worst_auto_over_native"]["ratio"] == pytest.approx(12.98 / 29.0)
    assert data["noise"] == {"median": pytest.approx(12.98 / 12.2 - 1), "max": pytest.approx(12.98 / 12.2 - 1),
                             "sizes": 1}                               # tuned vs auto, same config
    assert any(line.startswith("noise: tuned and auto") for line in lines)
    assert grid_row("allreduce", 1024, screen).best == "lp/4K"           # screening only


# ----------------------------------------------------------------------------- real runs at P = 2


@pytest.mark.mpi
def test_tuning_run_writes_a_table_that_auto_uses(tmp_path):
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    rc, text = tune("--collectives", "allreduce,bcast", "--sizes", "8,256K", "--storage", f"sqlite:///{db}",
                    "--out", str(out), *FAST)
    assert rc == 0, text[-6000:]
    assert "speedup" in text and f"wrote {out}" in text                 # the summary table
    # the table's lines come last, after the final check and the summary: the file is final
    lines = text.splitlines()
    wrote = next(i for i, ln in enumerate(lines) if ln.startswith(f"# wrote {out}: P = 2, host memory; "))
    assert wrote > max(i for i, ln in enumerate(lines) if "final check" in ln or "speedup" in ln), text[-4000:]
    assert lines[wrote + 1].startswith(f"# use it: LPMPI_TUNING_FILE={out} mpiexec -n 2 ..."), lines[wrote:]
    lacks = ", ".join(c for c in engine.COLLECTIVES if c not in ("allreduce", "bcast"))
    assert lines[wrote + 2] == (f"# LPMPI_TUNING_FILE replaces every shipped table: what this one lacks "
                                f"({lacks}; other sizes; other P) goes to the cost model"), lines[wrote:]
    t = tables.read_table(out)
    assert t.skipped == [] and t.nprocs == 2 and t.model is not None
    assert {r.collective for r in t.rows} == {"allreduce", "bcast"}
    assert t.tuner["command"].startswith("mpiexec -n 2 lpmpi-tune")
    assert t.tuner["settings"]["fresh_input"] is True                    # the default measurement
    assert all("+fresh/" in name for name in choices(db)), list(choices(db))
    for b in t.tuner["buckets"]:                                         # a quarter of the grid
        assert b["measured"] <= max(1, -(-b["grid"] // 4)), b
    # two tuned sizes, 8 B and 256 KiB: rows from 4 B to 512 KiB; beyond, the cost model
    for c in ("allreduce", "bcast"):
        assert (min(r.lo for r in t.rows if r.collective == c), max(r.hi for r in t.rows if r.collective == c)) \
            == (4, 512 << 10), t.rows
    sizes = (8, 100, 256 << 10, 1 << 24)
    expect = {f"{c} {n}": ([t.lookup(c, n).algorithm, t.lookup(c, n).chunk_bytes, "table"] if t.lookup(c, n)
                           else "model") for c in ("allreduce", "bcast") for n in sizes}
    assert expect["allreduce 16777216"] == expect["bcast 16777216"] == "model"
    got = each_rank("import lpmpi; "
                    "e = {f'{c} {n}': lpmpi.explain(c, n) for c in ('allreduce', 'bcast') "
                    f"for n in {sizes}}}; "
                    "r = {k: [x.algorithm, x.chunk_bytes, x.source] if x.source == 'table' else x.source "
                    "for k, x in e.items()}", out)
    assert len(got) == 2 and all(g == expect for g in got), (got, expect)
    # every size's finalists were measured at two moments (--verify-passes 2, the default), the
    # choice is the fastest by the worse of the two (of those within 5% of it, the fastest with
    # both ranks on one core: --shared-core 0.05, the default), and it is what the table holds
    stored = choices(db)
    assert len(stored) == 4 and all(c["passes"] == 2 for c in stored.values()), stored
    for c in stored.values():
        times = {Config(*cfg): t for cfg, t in zip(c["candidates"], c["times"])}
        one = {Config(*cfg): t for cfg, t in zip(c["candidates"], c["one_core"]) if t is not None}
        assert Config("native") in times and decide(times, one, 0.05)[0] == Config(
            c["algorithm"], c["chunk_bytes"], c["staging_buffers"], c["transport"])
    # a rerun of the same command finds everything done: nothing measured again, not even the
    # final check
    before = finished(db)
    rc, text = tune("--collectives", "allreduce,bcast", "--sizes", "8,256K", "--storage", f"sqlite:///{db}",
                    "--out", str(out), *FAST)
    assert rc == 0 and finished(db) == before and choices(db) == stored, text[-4000:]


@pytest.mark.mpi
def test_compare_grid_reports_the_regret_of_auto(tmp_path):
    """A real --compare-grid at P = 2 with a table that pins the choice: the whole grid is
    screened, the finalists confirmed, and the tuned row is the table's configuration."""
    table, js = tmp_path / "table.json", tmp_path / "grid.json"
    doc = {"lpmpi_table_version": 1,
           "fingerprint": {"mpi_library": tables.library_version_line(), "nprocs": 2,
                           "ranks_per_node": 2, "memory": "host", "cpu_model": tables.cpu_model()},
           "tuner": {"command": "test"},
           "collectives": {"bcast": [{"lo": 0, "hi": "inf", "algorithm": "lp", "chunk_bytes": 4096}]}}
    table.write_text(json.dumps(doc))
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi.bench", "--compare-grid", "--collective",
           "bcast", "--sizes", "8,16K", "--min-time", "0.002", "--warmup", "1", "--no-bandwidth",
           "--json", str(js)]
    rc, out, _ = run(cmd, child_env({"LPMPI_TUNING_FILE": str(table)}), 120)
    assert rc == 0, out[-6000:]
    assert "confirmation pass" in out and "worst auto regret" in out, out[-3000:]
    data = json.loads(js.read_text())
    rows = data["summary"]["bcast"]["rows"]
    assert [r["nbytes"] for r in rows] == [8, 16 << 10]
    for r in rows:
        assert r["grid_size"] == len(model.grid("bcast", r["nbytes"]))
        assert r["tuned"] == "lp/4K" and r["auto"] == "lp/4K", r
        assert r["best_us"] > 0 and r["screen_best_us"] > 0 and r["tuned_us"] > 0 and r["auto_us"] > 0
    screened = {(r["nbytes"], r["label"]) for r in data["rows"]}
    assert len(screened) == sum(r["grid_size"] + 2 for r in rows)          # grid + tuned + auto
    assert all(r["check"] == "ok" for r in data["rows"]), [r for r in data["rows"] if r["check"] != "ok"]


@pytest.mark.mpi
def test_resume_after_stop_and_kill_repeats_no_finished_trial(tmp_path):
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    # one transport: the ring's grid (and so the budget below) as without a transport dimension
    cmd = ["--collectives", "allreduce", "--sizes", "8,64K", "--storage", f"sqlite:///{db}",
           "--out", str(out), "--no-fit-model", "--transports", "mpi", *FAST]
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


def test_acc_dtype_arguments_are_checked(capsys, tmp_path):
    from lpmpi.tune.cli import main

    base = ["--storage", "memory", "--sizes", "8", "--quiet", "--no-fit-model", "--out", str(tmp_path / "t.json")]
    assert main([*base, "--acc-dtype", "float32", "--collectives", "allreduce"]) == 2   # float32 data
    assert "--acc-dtype float32 needs --dtype float16 or bfloat16" in capsys.readouterr().err
    assert main([*base, "--acc-dtype", "float32", "--dtype", "float16", "--op", "max"]) == 2
    assert "--op sum or avg" in capsys.readouterr().err
    assert main([*base, "--acc-dtype", "float32", "--dtype", "float16"]) == 2       # bcast included
    assert "bcast has no reduction" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
    assert study_name("allreduce", "host", 2, "bfloat16+float32", "sum", 8) != \
        study_name("allreduce", "host", 2, "bfloat16", "sum", 8)


def test_transports_arguments_are_checked(capsys, tmp_path):
    from lpmpi.tune.cli import main

    base = ["--storage", "memory", "--sizes", "8", "--quiet", "--no-fit-model",
            "--out", str(tmp_path / "t.json")]
    assert main([*base, "--transports", "mpi,rdma"]) == 2
    assert "--transports: unknown rdma (known: mpi, shm, cma)" in capsys.readouterr().err
    assert main([*base, "--transports", ","]) == 2
    assert "--transports: unknown (none given)" in capsys.readouterr().err
    assert main([*base, "--transports", "shm", "--memory", "cuda"]) == 2
    assert "--transports applies to host memory" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.mpi
def test_acc_dtype_tuning_run_writes_a_table_for_acc_calls_only(tmp_path):
    """--dtype float16 --acc-dtype float32: its own studies, measured with acc_dtype, and a table
    whose rows apply to acc_dtype calls (keyed by the 16-bit bytes) and not to plain ones."""
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    rc, text = tune("--collectives", "allreduce", "--sizes", "4K,256K", "--dtype", "float16",
                    "--acc-dtype", "float32", "--storage", f"sqlite:///{db}", "--out", str(out), *FAST)
    assert rc == 0, text[-6000:]
    t = tables.read_table(out)
    assert t.acc and t.kind == "host+acc_dtype=float32" and t.fingerprint["acc_dtype"] == "float32"
    assert all("/float16+float32/" in name for name in choices(db)), list(choices(db))
    # auto follows the acc table for acc calls only (a plain table says mst everywhere)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({
        "lpmpi_table_version": 1,
        "fingerprint": {"mpi_library": t.fingerprint["mpi_library"], "nprocs": 2, "memory": "host"},
        "collectives": {"allreduce": [{"lo": 0, "hi": "inf", "algorithm": "mst"}]}}))
    expect = {str(n): [t.lookup("allreduce", n).algorithm, t.lookup("allreduce", n).chunk_bytes]
              for n in (4096, 256 << 10)}
    got = each_rank("from lpmpi import _core; "
                    "r = {str(n): list(_core.choice('allreduce', n, acc=True)[:2]) for n in (4096, 256 << 10)}; "
                    "r = [r, _core.choice('allreduce', 4096)[0]]", f"{out}:{plain}")
    assert len(got) == 2 and all(g == [expect, "mst"] for g in got), (got, expect)


@pytest.mark.mpi
def test_shared_core_check_measures_the_finalists_on_one_core_and_the_table_keeps_it(tmp_path):
    """A real run at P = 2 at 4 KiB with --shared-core 1 (every finalist within 100%): the
    finalists are measured again with both ranks on one core, the choice is decide()'s with
    those times, and the table's row keeps the choice's time on one core."""
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    rc, text = tune("--collectives", "allreduce", "--sizes", "4K", "--storage", f"sqlite:///{db}",
                    "--out", str(out), "--no-fit-model", "--trials", "4", "--verify-passes", "1",
                    "--shared-core", "1", *FAST)
    assert rc == 0, text[-6000:]
    (c,) = choices(db).values()
    times = {Config(*cfg): t for cfg, t in zip(c["candidates"], c["times"])}
    one = {Config(*cfg): t for cfg, t in zip(c["candidates"], c["one_core"]) if t is not None}
    assert len(one) == len(times) >= 2, c                       # within 100%: all of them
    chosen = Config(c["algorithm"], c["chunk_bytes"], c["staging_buffers"], c["transport"])
    assert decide(times, one, 1.0)[0] == chosen and c["one_core_s"] == one[chosen], c
    row = json.loads(out.read_text())["collectives"]["allreduce"][0]
    assert row["measured"][0]["one_core_us"] == round(one[chosen] * 1e6, 3), row
    rc, text = tune("--collectives", "allreduce", "--sizes", "4K", "--out", str(out), "--shared-core", "2")
    assert rc != 0 and "--shared-core must be in 0..1" in text, text[-2000:]


def test_tuning_run_searches_the_transport_and_the_table_names_it(tmp_path):
    """A real run at P = 2 around 1 MiB with the transport dimension: the ring measured over each
    transport, the table's ring rows name the one chosen, and with that table loaded the decision
    asks the ring for it (source 'table')."""
    db, out = tmp_path / "tune.db", tmp_path / "table.json"
    sizes = (512 << 10, 1 << 20)
    rc, text = tune("--collectives", "allreduce", "--sizes", "512K,1M", "--storage", f"sqlite:///{db}",
                    "--out", str(out), "--no-fit-model", "--trials", "8", "--verify-passes", "1", *FAST)
    assert rc == 0, text[-6000:]
    if "no transport dimension" in text:
        pytest.skip("this communicator has one node-local transport only")
    searched = tuple(next(ln for ln in text.splitlines() if "node-local transports:" in ln)
                     .split("searched: ")[1].split()[0].split(","))
    assert len(searched) > 1 and set(searched) <= set(ALL), text[-2000:]
    assert all(f"+transports-{'-'.join(searched)}+" in name for name in choices(db)), list(choices(db))
    per = measured(finished(db))
    params = [dict(p) for ps in per.values() for p in ps]
    rings = {p[transport_param("ring")] for p in params if p["algorithm"] == "ring"}
    assert rings == set(searched), per                      # the warm start: each transport once
    t = tables.read_table(out)
    assert t.skipped == [] and list(t.tuner["settings"]["transports"]) == list(searched)
    doc = json.loads(out.read_text())
    for row in doc["collectives"]["allreduce"]:
        assert ("transport" in row) == (row["algorithm"] == "ring"), row
        assert row.get("transport") in (None, *searched)
    expect = {str(n): [t.lookup("allreduce", n).transport, "table" if t.lookup("allreduce", n).transport
                       else "model"] for n in sizes}
    got = each_rank("import lpmpi; from lpmpi import _core; "
                    f"r = {{str(n): list(_core.transport_choice('allreduce', n)) for n in {sizes!r}}}", out)
    assert len(got) == 2 and all(g == expect for g in got), (got, expect)
