"""Ctrl-C at random moments of rank 0's storage traffic (ask, report, tell), then the abandon the
tuner runs on Ctrl-C: count the abandons that fail.

    python docs/results/tuner_ctrl_c/race.py 150

Before tuner.studies held Ctrl-C during storage access, about one abandon in five failed with
optuna's StorageInternalError ("database is locked"), the failure CI met once in
tests/test_bench_cli.py::test_ctrl_c_ends_every_rank_and_the_rerun_resumes.
"""
import os
import random
import signal
import sys
import tempfile
import threading
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tuner.space import Space
from tuner.studies import BucketStudy, study_name


def main(runs: int) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = Space.of("allreduce", 1 << 16)
    name = study_name("allreduce", "host", 2, "float32", "sum", 1 << 16)
    ok = failed = missed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            url = f"sqlite:///{tmp}/db{i}.sqlite"
            # a short busy timeout: a lock left behind shows at once instead of after 5 s
            storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 0.5}})
            bs = BucketStudy.open(storage, name, space, 10_000, 0, 1.5, 4, "X")
            threading.Timer(random.uniform(0, 0.3), os.kill, (os.getpid(), signal.SIGINT)).start()
            try:
                while (cfg := bs.ask()) is not None:
                    bs.should_prune(1e-3, 0)
                    bs.tell(cfg, 1e-3 * random.random(), False, 5)
                missed += 1
            except KeyboardInterrupt:
                try:
                    bs.abandon()
                    ok += 1
                except Exception as exc:  # noqa: BLE001 - counted
                    failed += 1
                    print(f"abandon failed: {type(exc).__name__}: {str(exc)[:60]}", flush=True)
    print(f"abandon ok {ok}, failed {failed} (interrupt missed {missed})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
