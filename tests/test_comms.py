"""Collectives on COMM_SELF, COMM_WORLD, Dup, Split (halves, odd/even with reversed keys,
singletons), Create; user messages on the same communicator never match lpmpi's; many
communicators created and freed (tests/mpi_cases.py comms)."""
import pytest
from _mpi import NPROCS, run_suite, stride_for

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
def test_comms(nprocs):
    run_suite("comms", nprocs, "--stride", stride_for(nprocs, {3: 2, 4: 3, 5: 4}))
