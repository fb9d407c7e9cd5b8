"""bcast: every algorithm x dtype x size x chunk x root x buffer kind; results bitwise equal to
the root's buffer on every rank (tests/mpi_cases.py)."""
import pytest
from _mpi import NPROCS, run_suite, stride_for

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
def test_bcast_matrix(nprocs):
    run_suite("bcast", nprocs, "--stride", stride_for(nprocs, {1: 1, 2: 1, 3: 2, 4: 3, 5: 4}))
