"""LPMPI_MAX_MSG_BYTES lowers the largest single MPI message so that the > 2 GiB splitting path
runs on small arrays: every algorithm must still give the right result
(tests/mpi_cases.py bigmsg)."""
import pytest
from _mpi import run_suite

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs,max_msg,stride", [(1, 64, 1), (2, 64, 1), (3, 64, 2),
                                                   (2, 48, 1), (5, 48, 4)],
                         ids=lambda v: str(v))
def test_bigmsg(nprocs, max_msg, stride):
    run_suite("bigmsg", nprocs, "--stride", str(stride),
              env={"LPMPI_MAX_MSG_BYTES": max_msg})
