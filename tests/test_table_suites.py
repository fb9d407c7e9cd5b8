"""The collective suites once per machine of the shipped tables (issue 37).

Each shipped table applies only on the machine it was measured on (its MPI library and CPU
model), so a suite run only sees this machine's.  Here every machine's tables are loaded as they
would apply there (LPMPI_TABLES_AS), whatever CPU runs the tests, and at P = 2 (the tables'
process count) these run under them with the watchdog on (a call the ranks decided differently
raises instead of hanging): tests/table_cases.py ("auto" at counts around every row boundary of
every collective, acc_dtype, roots, in place, the three forms: exact results), the torch backend's
matrix (tests/torch_pg_cases.py, which defaults to acc_dtype float32 for 16-bit data; the other
machines', as test_torch_backend.py runs it under this one's), the
allgather / reduce_scatter matrix (tests/blocks_cases.py), and lpmpi.jax's quick matrix
(tests/jax_cases.py --quick) for the MPICH machines other than this one (this machine's runs in
test_jax.py; JAX's compilations make it the slow one).
"""
import importlib.util
import sys

import pytest
from _mpi import NO_JAX, NO_TORCH, TESTS, child_env, format_failure, mpiexec, run

from lpmpi import tables


def _machines():
    names = [p.rsplit("/", 1)[-1] for p in tables.shipped_tables()]
    seen = {}
    for n in sorted(names, key=lambda n: ("-host" not in n, "-acc" in n, n)):
        seen.setdefault(tables.machine_of(n), n)
    return seen


MACHINES = _machines()
PROFILES = sorted(MACHINES.values())


def _here(name):
    lib, cpu = tables.machine_of(name)
    return lib == tables.library_version_line() and cpu == tables.cpu_model()


def _run(script, profile, *args, timeout=300):
    env = {"LPMPI_TABLES_AS": profile, "LPMPI_TIMEOUT": "30"}
    cmd = [mpiexec(), "-n", "2", sys.executable, "-u", str(TESTS / script), *args]
    rc, out, _ = run(cmd, child_env(env), timeout)
    if rc != 0:
        pytest.fail(format_failure(cmd, env, rc, out, timeout), pytrace=False)
    assert "SUMMARY" in out, out[-3000:]
    return out


def test_every_machine_of_the_shipped_tables_is_a_profile():
    assert len(PROFILES) >= 6, MACHINES      # MPICH, Open MPI, Intel MPI x Xeon, EPYC


@pytest.mark.mpi
@pytest.mark.parametrize("profile", PROFILES)
def test_auto_around_every_row_boundary(profile):
    out = _run("table_cases.py", profile)
    line = next(ln for ln in out.splitlines() if ln.startswith("SUMMARY"))
    assert f"tables_as={profile}" in line and "failed=0" in line and profile in line, line


@pytest.mark.mpi
@pytest.mark.parametrize("profile", PROFILES)
def test_blocks_suite(profile):
    _run("blocks_cases.py", profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_block_movers_suite(profile):
    """alltoall, alltoallv, allgatherv, reduce_scatter with counts, gather, scatter (issue 39), scan
    under every shipped table as it applies on its machine: a table-dependent decision that
    differs between ranks would hang here (LPMPI_TIMEOUT turns it into a failure)."""
    out = _run("move_cases.py", profile)
    assert "failures=0" in out, out[-3000:]


@pytest.mark.mpi
@pytest.mark.parametrize("profile", PROFILES)
def test_torch_backend_suite(profile):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(NO_TORCH)
    if _here(profile):
        pytest.skip(f"{profile} is this machine's: test_torch_backend.py runs the matrix under it")
    _run("torch_pg_cases.py", profile)


@pytest.mark.mpi
@pytest.mark.parametrize("profile", [p for p in PROFILES if p.startswith("mpich")])
def test_jax_quick_suite(profile):
    if importlib.util.find_spec("jax") is None:
        pytest.skip(NO_JAX)
    if _here(profile):
        pytest.skip(f"{profile} is this machine's: test_jax.py runs its full matrix under it")
    _run("jax_cases.py", profile, "--quick")
