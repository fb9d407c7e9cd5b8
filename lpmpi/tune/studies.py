"""Optuna on rank 0: one study per (collective, memory kind, P, dtype, op, message size) in a
persistent storage, driven with ask/tell.

Resuming: a study is loaded by its deterministic name; its finished trials (complete or pruned)
count towards the budget and are never measured again.  A trial still RUNNING when the study is
opened was cut short by an interruption (Ctrl-C, kill -9 of any rank), since one tuner at a
time drives a storage: it is marked FAIL and its configuration queued again, so it is re-run.
"""
from __future__ import annotations

import functools
import signal
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import optuna
from optuna.trial import FrozenTrial, TrialState

from lpmpi import autotune
from lpmpi.tune.space import NATIVE, Config, Space

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
DUPLICATE_ATTR = "duplicate_of"
CHOICE_ATTR = "choice"
LIBRARY_ATTR = "mpi_library"
EXHAUSTED_ATTR = "exhausted_at"   # configurations measured when the sampler found no new one

_F = TypeVar("_F", bound=Callable[..., Any])
_held = threading.local()


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back while the storage is read or written, and raise it on leaving.

    A KeyboardInterrupt raised inside SQLAlchemy/sqlite3 can leave a connection with its
    transaction open: SQLite keeps that connection's lock, and the abandon that follows (marking
    the running trial FAIL) fails with "database is locked" after the busy timeout.  Nested uses
    hold once; outside the main thread (where signal handlers cannot be set) it does nothing."""
    outer = not getattr(_held, "depth", 0) and threading.current_thread() is threading.main_thread()
    if not outer or signal.getsignal(signal.SIGINT) is None:     # None: a handler set outside Python
        _held.depth = getattr(_held, "depth", 0) + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    pending: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(frame))
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        signal.signal(signal.SIGINT, previous)
    if pending:
        if callable(previous):
            previous(signal.SIGINT, pending[0])       # Python's default handler raises KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def _storage_access(method: _F) -> _F:
    """A method that reads or writes the storage runs with Ctrl-C held (``interrupts_held``)."""
    @functools.wraps(method)
    def held(*args: Any, **kwargs: Any) -> Any:
        with interrupts_held():
            return method(*args, **kwargs)
    return held  # type: ignore[return-value]


class FarFromBestPruner(optuna.pruners.BasePruner):
    """Prune a trial whose intermediate time is more than ``factor`` times the best complete
    trial's time (its first repetitions already show it cannot win)."""

    def __init__(self, factor: float = 1.5) -> None:
        if not factor > 1:
            raise ValueError(f"the pruning factor must be > 1, got {factor}")
        self.factor = factor

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        try:
            best = study.best_value
        except ValueError:  # no complete trial yet
            return False
        return autotune.pruned(trial.intermediate_values[step], best, self.factor)   # the engine's rule


def storage_for(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage: ``memory`` (no resume) or an RDB URL such as ``sqlite:///tune.db``."""
    if url == "memory":
        return optuna.storages.InMemoryStorage()
    return optuna.storages.RDBStorage(url)


def study_name(collective: str, memory: str, nprocs: int, dtype: str, op: str, nbytes: int,
               staging: tuple[int, ...] = (), fresh_input: bool = False,
               transports: tuple[str, ...] = ()) -> str:
    """The deterministic name of a bucket's study (what a rerun loads); a staging space's
    choices are part of it (another set of choices is another study), so are a transport
    space's, and so is measuring with the input rewritten before each call (other times,
    another study)."""
    where = memory + (f"+staging{'-'.join(map(str, staging))}" if staging else "") \
        + (f"+transports-{'-'.join(transports)}" if transports else "") + ("+fresh" if fresh_input else "")
    return f"lpmpi/{collective}/{where}/P{nprocs}/{dtype}/{op}/{nbytes}B"


def sampler_seed(seed: int, name: str) -> int:
    """A per-study seed derived from the run's seed (so buckets do not mirror each other)."""
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**31 - 1)


@dataclass
class BucketStudy:
    """The study of one bucket and what it has measured (rank 0 only)."""

    study: optuna.Study
    space: Space
    budget: int
    recovered: int = 0                                    # stale trials re-queued on open
    measured: dict[Config, FrozenTrial] = field(default_factory=dict)
    current: optuna.Trial | None = None
    storage: optuna.storages.BaseStorage | None = None
    exhausted_at: int | None = None                       # EXHAUSTED_ATTR (read on open)

    @classmethod
    @_storage_access
    def open(cls, storage: optuna.storages.BaseStorage, name: str, space: Space, budget: int,
             seed: int, prune_factor: float, startup: int, library: str) -> BucketStudy:
        """Create or load a study; fail and re-queue stale RUNNING trials."""
        sampler = optuna.samplers.TPESampler(seed=sampler_seed(seed, name), n_startup_trials=startup)
        study = optuna.create_study(storage=storage, study_name=name, direction="minimize",
                                    sampler=sampler, pruner=FarFromBestPruner(prune_factor),
                                    load_if_exists=True)
        known = study.user_attrs.get(LIBRARY_ATTR)
        if known is None:
            study.set_user_attr(LIBRARY_ATTR, library)
        elif known != library:
            raise RuntimeError(f"study {name!r} in this storage was tuned with {known!r}, not "
                               f"{library!r}: use another --storage")
        self = cls(study, space, budget, storage=storage, exhausted_at=study.user_attrs.get(EXHAUSTED_ATTR))
        self.recovered = self._recover_stale(storage)
        self._index()
        return self

    def _recover_stale(self, storage: optuna.storages.BaseStorage) -> int:
        stale = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        for t in stale:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)  # as optuna's fail_stale_trials
            if t.params:
                self.study.enqueue_trial(dict(t.params), skip_if_exists=False)
        return len(stale)

    def _index(self) -> None:
        for t in self.study.get_trials(deepcopy=False, states=FINISHED):
            cfg = self.space.config_of(t.params)
            if cfg is not None and DUPLICATE_ATTR not in t.user_attrs and cfg not in self.measured:
                self.measured[cfg] = t

    # ---- the loop
    @property
    def counted(self) -> int:
        """Configurations measured that count against the budget (all but the native baseline)."""
        return sum(c.algorithm != NATIVE for c in self.measured)

    @property
    def done(self) -> bool:
        """The baseline is measured and the budget spent, or the sampler found nothing new (a
        grid smaller than the budget): then a resumed run reuses the stored choice instead of
        asking again and re-running the final check."""
        baseline = NATIVE not in self.space.algorithms or Config(NATIVE) in self.measured
        exhausted = self.exhausted_at is not None and self.exhausted_at == len(self.measured)
        return baseline and (self.counted >= self.budget or exhausted)

    @_storage_access
    def enqueue(self, configs: list[Config]) -> None:
        """Queue configurations to be asked first (once: skipped if already in the study)."""
        for cfg in configs:
            if cfg not in self.measured:
                self.study.enqueue_trial(self.space.params(cfg), skip_if_exists=True)

    @_storage_access
    def ask(self, max_duplicates: int = 50) -> Config | None:
        """The next configuration to measure, or None when the budget is spent.  A suggestion
        already measured is told its earlier value at once (no measurement, not counted)."""
        for _ in range(max_duplicates):
            if self.done:
                return None
            trial = self.current = self.study.ask()      # current at once: an interruption fails it
            cfg = self.space.suggest(trial)
            earlier = self.measured.get(cfg)
            if earlier is None:
                return cfg
            trial.set_user_attr(DUPLICATE_ATTR, earlier.number)
            self.study.tell(trial, earlier.value if earlier.value is not None else _last(earlier))
            self.current = None
        # the sampler keeps proposing measured points: the space is exhausted (remembered, so
        # that a resumed run counts this bucket done)
        self.exhausted_at = len(self.measured)
        self.study.set_user_attr(EXHAUSTED_ATTR, self.exhausted_at)
        return None

    @_storage_access
    def should_prune(self, seconds: float, step: int) -> bool:
        """Report an intermediate time of the current trial; True to stop it."""
        assert self.current is not None
        self.current.report(seconds, step)
        return self.current.should_prune()

    @_storage_access
    def tell(self, cfg: Config, seconds: float, pruned: bool, reps: int) -> FrozenTrial:
        """Record the current trial's result."""
        trial, self.current = self.current, None
        assert trial is not None
        trial.set_user_attr("reps", reps)
        if pruned:
            frozen = self.study.tell(trial, state=TrialState.PRUNED)
        else:
            frozen = self.study.tell(trial, seconds)
        self.measured[cfg] = frozen
        return frozen

    @_storage_access
    def abandon(self) -> None:
        """Mark the current trial FAIL (interrupted) and queue it again, so that a rerun
        measures it; any other trial left RUNNING (cut short while being asked) is failed too."""
        if self.current is not None:
            trial, self.current = self.current, None
            self.study.tell(trial, state=TrialState.FAIL)
            if self.space.config_of(trial.params) is not None:   # it was being measured
                self.study.enqueue_trial(dict(trial.params), skip_if_exists=False)
        if self.storage is not None:
            self._recover_stale(self.storage)

    # ---- results
    def ranked(self) -> list[tuple[Config, float]]:
        """Completed configurations, fastest first."""
        done = [(c, t.value) for c, t in self.measured.items()
                if t.state == TrialState.COMPLETE and t.value is not None]
        return sorted(done, key=lambda r: r[1])

    def best(self) -> tuple[Config, float] | None:
        r = self.ranked()
        return r[0] if r else None

    @_storage_access
    def stored_choice(self) -> Mapping[str, Any] | None:
        """The verified choice of an earlier run, if nothing was measured since."""
        c = self.study.user_attrs.get(CHOICE_ATTR)
        return c if isinstance(c, dict) and c.get("measured") == len(self.measured) else None


    @_storage_access
    def store_choice(self, choice: Mapping[str, Any]) -> None:
        self.study.set_user_attr(CHOICE_ATTR, {**choice, "measured": len(self.measured)})


def _last(t: FrozenTrial) -> float:
    step = t.last_step
    return t.intermediate_values[step] if step is not None else float("inf")
