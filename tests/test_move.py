"""alltoall, alltoallv, allgatherv, reduce_scatter(counts=), gather and scatter (issue 39): the
matrix of tests/move_cases.py at P = 1..5 (every algorithm, transport, form, in place, root,
dtype and op; uneven, zero and large per-rank counts, packed and with gaps; counts exchanged;
errors on every rank, nothing written)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _mpi import child_env, format_failure, mpiexec, run

pytestmark = pytest.mark.mpi
CASES = Path(__file__).with_name("move_cases.py")


@pytest.mark.parametrize("nprocs", (1, 2, 3, 4, 5), ids=lambda p: f"P{p}")
def test_block_movers_against_numpy(nprocs):
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(CASES)]
    rc, out, _ = run(cmd, child_env(), 900)
    if rc != 0:
        pytest.fail(format_failure(cmd, None, rc, out, 900), pytrace=False)
    assert f"SUMMARY suite=move P={nprocs}" in out and "failures=0" in out, out[-4000:]
