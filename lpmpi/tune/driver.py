"""The tuning loop on every rank.  Rank 0 drives each bucket's study with ask/tell; the
configuration of each trial reaches every rank by broadcast; every rank measures; rank 0
reports the slowest rank's times back to the study and decides pruning for all."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import lpmpi
from lpmpi import autotune, engine
from lpmpi.bench import format_bytes, memory_backend, rule_transport
from lpmpi.tune.measure import Bench, reps_for
from lpmpi.tune.report import BucketResult, Progress
from lpmpi.tune.space import NATIVE, Config, Space

STOP = "stop"
TIE = 0.03   # verified within 3% of native: keep native (the safe choice; < the 5% regret target;
#              src/tune/autotune.c takes the same TIE online)


class StopRun(Exception):
    """--max-trials-this-run reached: every rank stops; rerunning the command resumes."""


@dataclass
class Settings:
    """What the command line asks for (identical on every rank)."""

    collectives: list[str]
    sizes: list[int]
    dtype: np.dtype
    op: str = "sum"
    root: int = 0
    memory: str = "host"
    storage: str = "sqlite:///lpmpi-tune.db"
    seed: int = 0
    trials: int | None = None          # per bucket, besides native; None: a quarter of the grid
    warmup: int = 2
    min_reps: int = 5
    max_reps: int = 50
    min_time: float = 0.05
    checkpoint_reps: int = 3
    prune_factor: float = 1.5
    verify_rounds: int = 3
    max_trials_this_run: int | None = None
    crash_after: int | None = None     # tests: kill -9 rank 0 with a trial running
    staging_choices: tuple[int, ...] = ()   # staging-buffers dimension of chunked algorithms (cuda)
    verify_top: int = 3                # study configurations re-measured against native at the end
    verify_passes: int = 2             # moments the finalists are measured at (2: again after the run)
    acc_dtype: str | None = None       # calls with acc_dtype: part of the dtype (its own studies)
    fresh_input: bool = True           # the input rewritten before each timed call (its own studies)
    transports: tuple[str, ...] = ()   # transport dimension of the algorithms that have one (host)
    shm_below: int | None = None       # shared memory searched only below this message size
    shared_core: float = 0.0           # finalists within this of the choice timed on one core (0: off)


class Tuner:
    """Tunes every (collective, size) bucket on ``comm``; collective."""

    def __init__(self, comm: Any, settings: Settings, progress: Progress, library: str,
                 say: Callable[[str], None] | None = None) -> None:
        self.comm, self.s, self.progress, self.library = comm, settings, progress, library
        # rank 0: where the final check says what it changed (the command's own output, so that
        # it comes before the summary and the table's "# wrote" line on the same stream)
        self.say = say or progress.note
        self.rank, self.nprocs = comm.Get_rank(), comm.Get_size()
        self.trials_this_run = 0
        self.backend = memory_backend(settings.memory, comm)
        # the process's staging buffers now (each trial that sets its own restores it)
        self.default_staging = engine.staging_buffers()
        self.trial_wall = 0.0             # rank 0: seconds spent in this run's trials (the ETA's rate)
        self.trials_timed = 0
        self.planned_left = 0             # rank 0: trials planned in the buckets not started yet
        self.storage: Any = None
        self.current: Any = None          # rank 0: the BucketStudy being tuned
        self.last_study: Any = None       # rank 0: the BucketStudy tuned last
        if self.rank == 0:
            from lpmpi.tune.studies import storage_for

            self.storage = storage_for(settings.storage)

    def run(self) -> list[BucketResult]:
        """Every collective, every size (smallest first, so each bucket can start from the
        previous one's choice and runner-up)."""
        results = []
        self.planned_left = sum(self._planned(c, n) for c in self.s.collectives for n in self.s.sizes)
        for coll in self.s.collectives:
            previous: list[Config] = []
            for i, n in enumerate(self.s.sizes):
                self.planned_left -= self._planned(coll, n)
                head = f"[{coll} {format_bytes(n)} {i + 1}/{len(self.s.sizes)}]"
                r = self.bucket(coll, n, previous, head)
                if self.rank == 0:
                    self.progress.bucket(head, r)
                results.append(r)
                previous = [r.choice] + self._runners_up(r.choice, 1)
        for _ in range(self.s.verify_passes - 1):
            results = self.final_check(results)
        return results

    def _space(self, collective: str, nbytes: int) -> Space:
        """The bucket's space; in a transport space the configurations the model names (no
        transport) get the one the model's rule takes at this size."""
        rule = rule_transport(self.comm, nbytes, collective) if self.s.transports else None
        transports = tuple(t for t in self.s.transports if t in engine.ring_transports(collective))
        if self.s.shm_below is not None and nbytes >= self.s.shm_below:
            transports = tuple(t for t in transports if t != "shm")
            if rule == "shm":
                rule = next(iter(transports), None)
        return Space.of(collective, nbytes, self.s.staging_choices, self.default_staging,
                        transports, rule)

    def _budget(self, space: Space) -> int:
        return max(1, min(self.s.trials or space.default_budget(), len(space.grid()) - 1))

    def _planned(self, collective: str, nbytes: int) -> int:
        """Trials a bucket measures when nothing of it is stored yet: the budget and native."""
        return self._budget(self._space(collective, nbytes)) + 1

    def eta(self, left: int) -> float | None:
        """Seconds until the trials are done, at this run's rate so far (None before the first)."""
        if not self.trials_timed:
            return None
        return self.trial_wall / self.trials_timed * (left + self.planned_left)

    def abandon(self) -> None:
        """On an interruption (rank 0): mark the running trial FAIL so a rerun repeats it."""
        if self.current is not None:
            self.current.abandon()

    # ---- one bucket
    def _open(self, space: Space, budget: int) -> Any:
        from lpmpi.tune.studies import BucketStudy, study_name

        dtype = self.s.dtype.name + (f"+{self.s.acc_dtype}" if self.s.acc_dtype else "")
        name = study_name(space.collective, self.s.memory, self.nprocs, dtype, self.s.op,
                          space.nbytes, space.staging, self.s.fresh_input, space.transports)
        startup = len(space.algorithms) + 1
        return BucketStudy.open(self.storage, name, space, budget, self.s.seed, self.s.prune_factor,
                                startup, self.library)

    def _runners_up(self, choice: Config, k: int) -> list[Config]:
        """Rank 0: the ``k`` fastest configurations of the bucket just tuned, besides its choice
        (the next bucket's warm start); empty on other ranks."""
        if self.last_study is None:
            return []
        return [c for c, _ in self.last_study.ranked() if c != choice][:k]

    def bucket(self, collective: str, nbytes: int, previous: list[Config], head: str) -> BucketResult:
        """Tune one bucket (collective)."""
        space = self._space(collective, nbytes)
        budget = self._budget(space)
        study, stored = None, None
        if self.rank == 0:
            study = self.current = self.last_study = self._open(space, budget)
            stored = study.stored_choice() if study.done else None
        stored = self.comm.bcast(stored, root=0)
        if stored is not None:
            choice = Config(stored["algorithm"], stored["chunk_bytes"], stored.get("staging_buffers"),
                            stored.get("transport"))
            return self._result(space, budget, study, choice, stored["seconds"], stored["native_s"],
                                stored.get("one_core_s"), reused=True)
        bench = Bench(self.comm, collective, nbytes, self.s.dtype, self.s.op, self.s.root, self.backend,
                      acc_dtype=self.s.acc_dtype, fresh_input=self.s.fresh_input)
        baseline = Config(NATIVE) if NATIVE in space.algorithms else Config(space.algorithms[0])
        reps = reps_for(bench.estimate(baseline), self.s.min_time, self.s.min_reps, self.s.max_reps)
        if study is not None:
            study.enqueue(space.warm_start(self.nprocs, previous))
        while True:
            cfg = self.comm.bcast(self._next(study) if self.rank == 0 else None, root=0)
            if cfg == STOP:
                raise StopRun
            if cfg is None:
                break
            t0 = time.monotonic()
            res = bench.run(cfg, self.s.warmup, reps, self.s.checkpoint_reps, self._checkpoint(study))
            if study is not None:
                study.tell(cfg, res.seconds, res.pruned, res.reps)
                self.trial_wall += time.monotonic() - t0
                self.trials_timed += 1
                native_left = NATIVE in space.algorithms and Config(NATIVE) not in study.measured
                eta = self.eta(max(0, budget - study.counted) + native_left)
                self.progress.trial(collective, nbytes, study.counted, budget, cfg, res.seconds,
                                    res.pruned, study.best(), eta)
        times = self._verify(bench, study, reps)
        quiet = decide(times)[0]
        one_core = self._one_core(bench, times, quiet, reps)
        choice, seconds, native_s = decide(times, one_core, self.s.shared_core)
        if study is not None:
            study.store_choice(choice_record(choice, seconds, native_s, times, reps, passes=1, one_core=one_core))
        if self.rank == 0 and choice != quiet:
            self.say(f"[shared core {collective} {format_bytes(nbytes)}] {quiet.label} -> {choice.label}: "
                     f"{times[choice] * 1e6:.2f} us against {times[quiet] * 1e6:.2f} quiet, "
                     f"{one_core[choice] * 1e6:.2f} against {one_core[quiet] * 1e6:.2f} on one core")
        self.current = None
        return self._result(space, budget, study, choice, seconds, native_s, one_core.get(choice))

    def _result(self, space: Space, budget: int, study: Any, choice: Config, seconds: float,
                native_s: float | None, one_core_s: float | None = None, reused: bool = False) -> BucketResult:
        measured = study.counted if study is not None else 0
        pruned = sum(t.state.name == "PRUNED" for t in study.measured.values()) if study is not None else 0
        measured, pruned = self.comm.bcast((measured, pruned), root=0)
        return BucketResult(space.collective, space.nbytes, choice, seconds, native_s, measured, budget,
                            len(space.grid()), pruned, reused, one_core_s)

    def _next(self, study: Any) -> Config | str | None:
        """Rank 0: the next configuration, None when the bucket is done, STOP to end the run."""
        if study.done:
            return None
        if self.s.max_trials_this_run is not None and self.trials_this_run >= self.s.max_trials_this_run:
            return STOP
        cfg = study.ask()
        if cfg is not None:
            self.trials_this_run += 1
            if self.s.crash_after is not None and self.trials_this_run > self.s.crash_after:
                os.kill(os.getpid(), signal.SIGKILL)   # tests: die with a trial RUNNING
        return cfg

    def _checkpoint(self, study: Any):
        """The pruning decision after the first repetitions: rank 0 asks the study, all follow."""
        def checkpoint(seconds: float) -> bool:
            decision = study.should_prune(seconds, self.s.checkpoint_reps) if study is not None else None
            return bool(self.comm.bcast(decision, root=0))
        return checkpoint

    # ---- the choice
    def _verify(self, bench: Bench, study: Any, reps: int) -> dict[Config, float]:
        """The bucket's finalists, the ``verify_top`` fastest configurations of the study and
        native, measured again side by side and call by call interleaved (``verify_rounds`` times
        the trial's repetitions each), so neither one lucky trial nor a slow spell of the machine
        decides.  Without verification rounds: the study's own times."""
        ranked = study.ranked() if study is not None else None
        ranked = self.comm.bcast(ranked, root=0)
        candidates = list(dict.fromkeys([c for c, _ in ranked[:self.s.verify_top]] + [Config(NATIVE)]))
        candidates = [c for c in candidates if c.algorithm in bench_algorithms(bench)]
        if self.s.verify_rounds > 0 and (len(candidates) > 1 or not ranked):
            return dict(zip(candidates, bench.interleaved(candidates, 1, reps * self.s.verify_rounds)))
        return dict(ranked)

    def _one_core(self, bench: Bench, times: dict[Config, float], quiet: Config,
                  reps: int) -> dict[Config, float]:
        """``--shared-core``: the quiet choice and the finalists within ``shared_core`` of its
        time, measured again side by side with every rank on one core (the placement a busy
        process beside the job or more ranks than cores give: each wait's hand-over to the peer
        then costs a context switch, so configurations that synchronise more often lose most;
        issue 53: ring over shared memory at 4 KiB, 1.3x MPI's own quiet, 0.7x on one core,
        where mst is 1.3x and 1.9x).  Empty where off, where fewer than two finalists are that
        close, or where the ranks cannot share a core (several nodes, affinity refused)."""
        tol = self.s.shared_core
        if tol <= 0 or not times or self.nprocs < 2:
            return {}
        near = [c for c in times if times[c] <= times[quiet] * (1 + tol)]
        if len(near) < 2:
            return {}
        with one_core(self.comm) as ok:
            if not ok:
                return {}
            return dict(zip(near, bench.interleaved(near, 1, reps)))

    def final_check(self, results: list[BucketResult]) -> list[BucketResult]:
        """After every bucket is tuned (once per pass beyond the first): measure each bucket's
        finalists once more, at this other moment (the machine in another state: after the large
        sizes, minutes later), and choose by each finalist's worse time of the passes.  On this kind of machine a configuration can
        flip between two speeds from one minute to the next (LP with 4 KiB chunks, see
        docs/tuning.md); the worse-of-passes rule keeps the one that is fast in both.  Buckets
        already checked (a resumed run) are not measured again; collective."""
        out, changed, checked = [], 0, 0
        for r in results:
            stored = study = None
            if self.rank == 0:
                space = self._space(r.collective, r.nbytes)
                study = self._open(space, r.budget)
                stored = study.stored_choice()
            stored = self.comm.bcast(stored, root=0)
            if not stored or stored.get("passes", 1) >= self.s.verify_passes or not stored.get("candidates"):
                out.append(r)
                continue
            cands = [Config(*c) for c in stored["candidates"]]   # [alg, chunk, staging(, transport)]
            bench = Bench(self.comm, r.collective, r.nbytes, self.s.dtype, self.s.op, self.s.root,
                          self.backend, acc_dtype=self.s.acc_dtype, fresh_input=self.s.fresh_input)
            again = bench.interleaved(cands, 1, int(stored["reps"]) * max(1, self.s.verify_rounds))
            times = {c: max(t, float(t0)) for c, t, t0 in zip(cands, again, stored["times"])}
            one_core = {c: float(t) for c, t in zip(cands, stored.get("one_core") or ()) if t is not None}
            choice, seconds, native_s = decide(times, one_core, self.s.shared_core)
            if study is not None:
                study.store_choice(choice_record(choice, seconds, native_s, times, int(stored["reps"]),
                                                 passes=int(stored.get("passes", 1)) + 1, one_core=one_core))
                if choice != r.choice:
                    self.say(f"[final check {r.collective} {format_bytes(r.nbytes)}] "
                             f"{r.choice.label} -> {choice.label} (worse of the passes: "
                             f"{seconds * 1e6:.1f} us)")
            changed += choice != r.choice
            checked += 1
            out.append(replace(r, choice=choice, seconds=seconds, native_s=native_s,
                               one_core_s=one_core.get(choice)))
        if self.rank == 0 and checked:
            self.say(f"# final check: the finalists of {checked} sizes measured again; "
                     f"{changed} choice(s) changed")
        return out


def decide(times: dict[Config, float], one_core: dict[Config, float] | None = None,
           tol: float = 0.0) -> tuple[Config, float, float | None]:
    """The fastest configuration of ``times``, native where native is within TIE of it; with
    ``one_core`` (``--shared-core``: times with every rank on one core), of the configurations
    within ``tol`` of that one's time the fastest on one core, where it is faster there by
    more than TIE.

    >>> a, b = Config("ring", 1024, transport="shm"), Config("mst")
    >>> decide({a: 2.9, b: 3.0})[0] == a, decide({a: 2.9, b: 3.0}, {a: 16.0, b: 6.5}, 0.05)[0] == b
    (True, True)
    >>> decide({a: 2.9, b: 3.2}, {a: 16.0, b: 6.5}, 0.05)[0] == a     # b: 10% slower quiet
    True
    """
    cfgs = list(times)
    native = times.get(Config(NATIVE))
    prefer = cfgs.index(Config(NATIVE)) if native is not None else -1
    best = cfgs[autotune.decide([times[c] for c in cfgs], prefer, TIE)]   # the online tuner's rule
    if one_core and best in one_core and tol > 0:
        near = [c for c in cfgs if c in one_core and times[c] <= times[best] * (1 + tol)]
        robust = min(near, key=lambda c: one_core[c])
        if one_core[robust] < one_core[best] * (1 - TIE):
            best = robust
    return best, times[best], native


def choice_record(choice: Config, seconds: float, native_s: float | None, times: dict[Config, float],
                  reps: int, passes: int, one_core: dict[Config, float] | None = None) -> dict[str, Any]:
    """What a study stores of its bucket's choice: the choice, and the finalists with their
    times so far (the worse over ``passes`` verification passes) for the final check (records
    of earlier versions, without a transport, read as None)."""
    return {"algorithm": choice.algorithm, "chunk_bytes": choice.chunk_bytes,
            "staging_buffers": choice.staging_buffers, "transport": choice.transport,
            "seconds": seconds, "native_s": native_s,
            "candidates": [[c.algorithm, c.chunk_bytes, c.staging_buffers, c.transport] for c in times],
            "times": list(times.values()), "reps": reps, "passes": passes,
            "one_core": [None if one_core is None or c not in one_core else one_core[c] for c in times],
            "one_core_s": None if one_core is None else one_core.get(choice)}


@contextmanager
def one_core(comm: Any) -> Iterator[bool]:
    """Every rank of ``comm`` on one CPU for the duration (the lowest rank 0 may run on), each
    rank's affinity restored after; yields False, having changed nothing, where the ranks span
    several nodes or a rank may not run there.  Collective."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = comm.allreduce(local.Get_size(), op=MPI.MIN) == comm.Get_size()
    local.Free()
    try:
        mine = os.sched_getaffinity(0)
    except (AttributeError, OSError):          # (no affinity on this platform)
        mine = set()
    cpu = comm.bcast(min(mine) if mine and one_node else None, root=0)
    moved = False
    if cpu is not None and mine:
        try:
            os.sched_setaffinity(0, {cpu})
            moved = True
        except OSError:
            pass
    ok = comm.allreduce(moved, op=MPI.LAND)
    try:
        yield ok
    finally:
        if moved:
            os.sched_setaffinity(0, mine)


def bench_algorithms(bench: Bench) -> tuple[str, ...]:
    """The algorithms of a bench's collective."""
    return lpmpi.algorithms(bench.collective)
