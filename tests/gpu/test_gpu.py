"""The contract on CuPy arrays and PyTorch CUDA tensors on a GPU, at P = 1, 2, 3 (the ranks
may share one GPU).

Each test spawns ``mpiexec -n P python tests/mpi_cases.py SUITE --backend cupy``: the
allreduce / reduce / bcast matrices with every numpy buffer replaced by a CuPy array (results
against numpy, bitwise identity across ranks), and the device suite (argument errors before any
communication, the interface's stream, read-only and strided arrays, mixed host/device,
recvbuf=None returning a CuPy array, device results equal to the host path's).  The transport
is whatever the MPI library supports (the mpich wheel: staged); LPMPI_CUDA_AWARE=0 forces
staging.  Skipped where no GPU, CuPy or CUDA build is present (conftest.py says why)."""
import os

import pytest
from _mpi import run_suite

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]

STRIDE = {1: 3, 2: 1, 3: 2}
ENV = {k: os.environ[k] for k in ("LPMPI_CUDA_AWARE", "LPMPI_STAGING_BUFFERS") if k in os.environ}


@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_cupy_matrix(suite, nprocs):
    run_suite(suite, nprocs, "--backend", "cupy", "--stride", str(STRIDE[nprocs]), env=ENV,
              timeout=300)


@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
def test_cupy_device_suite(nprocs):
    run_suite("device", nprocs, "--backend", "cupy", env=ENV, timeout=300)


@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
def test_cupy_comms(nprocs):
    run_suite("comms", nprocs, "--backend", "cupy", "--stride", "2", env=ENV, timeout=300)


def torch_cuda_skip_reason():
    """None when PyTorch is importable and sees a GPU, else why not."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return f"PyTorch is not importable ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return "PyTorch sees no GPU"
    return None


# PyTorch CUDA tensors take DLPack's device path (the stream lpmpi names, bfloat16 included)
needs_torch_cuda = pytest.mark.skipif("torch_cuda_skip_reason() is not None",
                                      reason="PyTorch with CUDA is not usable here")


@needs_torch_cuda
@pytest.mark.parametrize("nprocs", (1, 2, 3), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_torch_cuda_matrix(suite, nprocs):
    run_suite(suite, nprocs, "--backend", "torch-cuda", "--stride", str(STRIDE[nprocs] * 2),
              env=ENV, timeout=300)


@needs_torch_cuda
@pytest.mark.parametrize("nprocs", (1, 2), ids=lambda p: f"P{p}")
def test_torch_cuda_device_suite(nprocs):
    run_suite("device", nprocs, "--backend", "torch-cuda", env=ENV, timeout=300)


@needs_torch_cuda
def test_torch_cuda_nonblocking():
    run_suite("allreduce", 2, "--backend", "torch-cuda", "--form", "nonblocking", "--stride", "6",
              env=ENV, timeout=300)
