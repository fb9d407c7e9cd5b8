"""Every bad-argument case of the contract, raised on every rank before any communication:
exception type, message naming the argument, buffers unchanged byte for byte; collectives
still work afterwards (tests/mpi_cases.py errors)."""
import pytest
from _mpi import run_suite

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
def test_errors(nprocs):
    run_suite("errors", nprocs)


@pytest.mark.parametrize("nprocs", (2, 5), ids=lambda p: f"P{p}")
def test_errors_with_check(nprocs):
    """With LPMPI_CHECK=1, an error every rank makes is still the local TypeError/ValueError
    (not MismatchError)."""
    run_suite("errors", nprocs, "--stride", "1" if nprocs <= 2 else "3",
              env={"LPMPI_CHECK": "1"})
