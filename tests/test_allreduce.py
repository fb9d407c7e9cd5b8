"""allreduce: every algorithm x dtype x op x size x chunk x in-place mode x buffer kind,
against numpy, plus bitwise identity of the result on all ranks (tests/mpi_cases.py)."""
import pytest
from _mpi import NPROCS, run_suite, stride_for

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
def test_allreduce_matrix(nprocs):
    run_suite("allreduce", nprocs, "--stride", stride_for(nprocs))
