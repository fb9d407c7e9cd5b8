"""pytest configuration for lpmpi's tests.

Two kinds of tests live here:
- in-process tests (test_api.py): importing lpmpi initializes MPI as a singleton (size 1);
- spawning tests: each runs ``mpiexec -n P python tests/mpi_cases.py SUITE`` once per process
  count, with a hard timeout, and shows the ``FAIL rank=R case=...`` lines on failure.
  To rerun a single failing case by hand::

      mpiexec -n 3 python tests/mpi_cases.py allreduce --filter 'alg=lp dtype=float32'
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `import _mpi` in any import mode


import pytest


@pytest.fixture(autouse=True)
def _reap_leaked_mpich_shm():
    """After every test, the MPICH shared-memory files its killed ranks left (_mpi.py says why)."""
    yield
    import _mpi

    _mpi.reap_leaked_mpich_shm()


FULL = "LPMPI_TESTS"


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: spawns mpiexec (multi-process cases)")
    config.addinivalue_line("markers", "full: another P of a training or JAX matrix whose P = 2 case "
                            "runs by default, or the rest of a fault matrix whose sample runs by default "
                            "(LPMPI_TESTS=full runs it too)")
    config.addinivalue_line("markers", "stress: a long loop that hunts a rare failure (LPMPI_TESTS=stress "
                            "runs it; several: LPMPI_TESTS=full,stress)")


def pytest_collection_modifyitems(config, items):
    """The ``full`` cases run with LPMPI_TESTS=full only, the ``stress`` loops with
    LPMPI_TESTS=stress (CI's default run stays short); they show as skipped with the reason
    (``pytest -rs``), never as passed."""
    import os

    on = {w.strip() for w in os.environ.get(FULL, "").lower().split(",")}
    why = {"full": f"{FULL}=full runs it too (another P of a training or JAX matrix whose P = 2 case runs "
                   "by default, or the rest of a fault matrix whose sample runs by default)",
           "stress": f"{FULL}=stress runs it (a loop of minutes that hunts a rare failure)"}
    for item in items:
        for mark, reason in why.items():
            if mark in item.keywords and mark not in on:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_report_header(config):
    import _mpi

    try:
        import ml_dtypes  # noqa: F401
        bf16 = "yes"
    except ImportError:
        bf16 = "no (bfloat16 cases skipped)"
    return [(f"lpmpi tests: mpiexec={_mpi.mpiexec()} lpmpi from={_mpi.lpmpi_path()} "
             f"ml_dtypes={bf16}")]
