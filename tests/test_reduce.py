"""reduce: every algorithm x dtype x op x size x chunk x root x in-place mode x buffer kind,
against numpy; non-root buffers never written (tests/mpi_cases.py)."""
import pytest
from _mpi import NPROCS, run_suite, stride_for

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
def test_reduce_matrix(nprocs):
    run_suite("reduce", nprocs, "--stride", stride_for(nprocs))
