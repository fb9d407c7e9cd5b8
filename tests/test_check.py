"""LPMPI_CHECK=1: ranks disagreeing on count, dtype, op, root or algorithm all raise
MismatchError (no hang); a local argument error on one rank raises that error there and
MismatchError elsewhere; agreeing calls (ops spelled differently) work
(tests/mpi_cases.py check)."""
import pytest
from _mpi import run_suite

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", (1, 2, 3, 4), ids=lambda p: f"P{p}")
def test_check(nprocs):
    run_suite("check", nprocs, "--stride", "1" if nprocs <= 3 else "2", "--timeout", "20",
              env={"LPMPI_CHECK": "1"})
