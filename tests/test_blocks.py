"""allgather and reduce_scatter (issue 26): the matrix of tests/blocks_cases.py at P = 1..5
(every algorithm, form, in place, dtype and op; errors on every rank, nothing written), and
once above 2**31 bytes; on (emulated) device memory at P = 2, 3."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _mpi import child_env, format_failure, mpiexec, run

pytestmark = pytest.mark.mpi
CASES = Path(__file__).with_name("blocks_cases.py")


def _run(nprocs: int, *args: str, timeout: float = 600, env: dict | None = None) -> str:
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-u", str(CASES), *args]
    rc, out, _ = run(cmd, child_env(env), timeout)
    if rc != 0:
        pytest.fail(format_failure(cmd, None, rc, out, timeout), pytrace=False)
    assert "SUMMARY suite=blocks" in out and "failures=0" in out, out[-4000:]
    return out


@pytest.mark.parametrize("nprocs", (1, 2, 3, 4, 5), ids=lambda p: f"P{p}")
def test_allgather_and_reduce_scatter_contract(nprocs):
    _run(nprocs)


def test_allgather_and_reduce_scatter_above_2_gib():
    """P = 2, ring (MPI messages in pieces, or single-copy reads): 2 GiB + 16 KiB of blocks."""
    _run(2, "--big", timeout=900)


@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("aware", ("staged", "aware"))
def test_allgather_and_reduce_scatter_on_device_memory(nprocs, aware):
    """Device arrays (emulated on the host): whole-buffer staging (MPI without device support)
    and the CUDA-aware route, every algorithm and form, the host calls' bits."""
    env = {"LPMPI_EMULATE_STAGING": "1"}
    if aware == "aware":
        env["LPMPI_CUDA_AWARE"] = "1"
    _run(nprocs, "--device", env=env)
