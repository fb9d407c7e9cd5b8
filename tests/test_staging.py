"""The device-memory path without a GPU: LPMPI_EMULATE_STAGING=1 (src/device/devops_emul.c).

Every buffer is then handled as device memory by the host emulation of the CUDA operations,
whose copies and reductions run only once the event recorded after them is found complete
(the first queries of an event say "not ready"), so the staged LP pipeline's slot and event
logic and the whole-buffer staging of the other algorithms are tested as on a GPU:
- the contract matrices (allreduce, reduce, bcast) at P = 1..5 on numpy arrays (staged path);
- the same with device arrays (HostDeviceArray, __cuda_array_interface__ over host memory):
  the bindings' device-array handling, recvbuf=None allocation, and the device suite (errors
  before communication, mixed host/device, stream 0, read-only, strides);
- comms, errors, LPMPI_CHECK, big-message splitting and determinism on the staged path;
- LPMPI_CUDA_AWARE=1: the CUDA-aware routing (device pointers to MPI, local work on the
  device) with the emulated device;
- LPMPI_STAGING_BUFFERS=1 and 2 (slot reuse at its tightest).
P >= 4 oversubscribe the 2-core machine: those use a sample of the cases (--stride)."""
import pytest
from _mpi import NPROCS, run_suite

pytestmark = pytest.mark.mpi

EMU = {"LPMPI_EMULATE_STAGING": "1"}
STRIDE = {1: 3, 2: 2, 3: 3, 4: 6, 5: 8}


@pytest.mark.parametrize("nprocs", NPROCS, ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_staged_matrix(suite, nprocs):
    run_suite(suite, nprocs, "--stride", str(STRIDE[nprocs]), env=EMU)


@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast", "device"])
def test_fake_device_arrays(suite, nprocs):
    stride = "1" if suite == "device" else str(2 * STRIDE[nprocs])
    run_suite(suite, nprocs, "--backend", "fakedev", "--stride", stride, env=EMU)


@pytest.mark.parametrize("suite,nprocs,stride,extra", [
    ("comms", 3, 3, {}), ("errors", 2, 2, {}), ("check", 3, 3, {"LPMPI_CHECK": "1"}),
    ("bigmsg", 3, 3, {"LPMPI_MAX_MSG_BYTES": "48"}), ("determinism", 3, 4, {}),
], ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(v) or "plain")
def test_staged_suites(suite, nprocs, stride, extra):
    run_suite(suite, nprocs, "--stride", str(stride), env={**EMU, **extra})


@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_emulated_cuda_aware(suite, nprocs):
    run_suite(suite, nprocs, "--stride", "4", env={**EMU, "LPMPI_CUDA_AWARE": "1"})


@pytest.mark.parametrize("buffers", (1, 2))
def test_few_staging_buffers(buffers):
    run_suite("allreduce", 3, "--stride", "4", "--filter", "alg=(lp|auto)",
              env={**EMU, "LPMPI_STAGING_BUFFERS": str(buffers)})
    run_suite("reduce", 3, "--stride", "4", "--filter", "alg=lp",
              env={**EMU, "LPMPI_STAGING_BUFFERS": str(buffers)})
