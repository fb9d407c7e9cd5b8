"""Framework arrays as buffers: PyTorch CPU tensors and numpy arrays seen only through DLPack.

- the contract matrices (allreduce, reduce, bcast; every algorithm, dtype, op and buffer mode
  of tests/mpi_cases.py) with torch tensors at P = 1..4 (blocking; nonblocking and persistent
  at P = 2) and with DLPack-only objects: results checked against numpy references,
  recvbuf=None returning a tensor of the input's dtype and device, errors before any
  communication with nothing written (DLPack-only objects at P = 1..4, blocking);
- the errors a framework user meets, each naming the argument passed (in place: recvbuf);
- ``import lpmpi`` imports no framework.
torch is in the test extra (pip install '.[test]' pins the CPU build of this project's CI);
without it the torch tests skip, saying so, and the DLPack-only ones still run.
"""
import subprocess
import sys

import numpy as np
import pytest
from _mpi import NO_TORCH, child_env, run_suite

import lpmpi

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason=NO_TORCH)

STRIDE = {1: 2, 2: 2, 3: 3, 4: 6}


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", (1, 2, 3, 4), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_torch_matrix(suite, nprocs):
    run_suite(suite, nprocs, "--backend", "torch", "--stride", str(STRIDE[nprocs]))


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize("form", ["nonblocking", "persistent"])
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_torch_forms(suite, form):
    run_suite(suite, 2, "--backend", "torch", "--form", form, "--stride", "3")


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", (1, 2, 3, 4), ids=lambda p: f"P{p}")
@pytest.mark.parametrize("suite", ["allreduce", "reduce", "bcast"])
def test_dlpack_only_matrix(suite, nprocs):
    run_suite(suite, nprocs, "--backend", "dlpack", "--stride", str(STRIDE[nprocs]))


class DLPackOnly:
    """A numpy array seen only through DLPack."""

    def __init__(self, a):
        self.a = a
        self.shape = a.shape

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@needs_torch
def test_results_and_kinds():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = lpmpi.allreduce(t)
    assert isinstance(y, torch.Tensor) and y.dtype == t.dtype and y.shape == t.shape
    assert torch.equal(y, t)
    out = torch.empty(2, 3)
    assert lpmpi.allreduce(t, out) is out and torch.equal(out, t)
    assert lpmpi.allreduce(lpmpi.IN_PLACE, t) is t
    b = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)   # no ml_dtypes needed
    yb = lpmpi.allreduce(b)
    assert yb.dtype == torch.bfloat16 and torch.equal(yb, b)
    assert lpmpi.iallreduce(t, op="avg").wait().dtype == torch.float32
    assert torch.equal(lpmpi.bcast(torch.arange(4)), torch.arange(4))
    x = np.arange(5.0)
    r = lpmpi.allreduce(DLPackOnly(x))
    assert isinstance(r, np.ndarray) and np.array_equal(r, x)
    # a tensor and a numpy array mix freely: both are host memory
    out = np.empty(6, np.float32)
    lpmpi.allreduce(t.reshape(-1), out)
    assert np.array_equal(out, t.reshape(-1).numpy())
    # the views a capsule holds are released: the tensor can be resized afterwards
    z = torch.ones(4)
    lpmpi.allreduce(lpmpi.IN_PLACE, z)
    z.resize_(8)


def _raises(call, exc, *words):
    with pytest.raises(exc) as ei:
        call()
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg
    return msg


@needs_torch
def test_errors_name_the_argument_and_write_nothing():
    t = torch.ones(4, 4)
    out = torch.full((16,), 7.0)
    _raises(lambda: lpmpi.allreduce(t.t(), out.reshape(4, 4)), ValueError, "sendbuf", "contiguous")
    _raises(lambda: lpmpi.allreduce(torch.ones(16), out[::1].reshape(4, 4).t()), ValueError,
            "recvbuf", "contiguous")
    assert torch.equal(out, torch.full((16,), 7.0))
    _raises(lambda: lpmpi.allreduce(torch.ones(3, requires_grad=True)), TypeError, "sendbuf",
            "detach")
    _raises(lambda: lpmpi.allreduce(torch.ones(3, dtype=torch.float8_e4m3fn)), TypeError,
            "sendbuf", "unsupported dtype")
    _raises(lambda: lpmpi.allreduce(torch.ones(3), torch.ones(3, dtype=torch.float64)),
            TypeError, "dtypes")
    ro = np.arange(4.0)
    ro.flags.writeable = False        # numpy exports its read-only flag in a DLPack 1.x capsule
    keep = ro.copy()
    _raises(lambda: lpmpi.allreduce(np.ones(4), DLPackOnly(ro)), ValueError, "recvbuf",
            "read-only")
    _raises(lambda: lpmpi.bcast(DLPackOnly(ro)), ValueError, "buf", "read-only")
    assert np.array_equal(ro, keep)
    # in place, the data is recvbuf: errors name it, not sendbuf
    msg = _raises(lambda: lpmpi.allreduce(lpmpi.IN_PLACE, object()), TypeError, "recvbuf",
                  "__dlpack__")
    assert "sendbuf" not in msg
    _raises(lambda: lpmpi.allreduce(lpmpi.IN_PLACE, torch.ones(4, 4).t()), ValueError, "recvbuf")

    class HasNumpy:
        def numpy(self):
            return np.ones(2)

    _raises(lambda: lpmpi.allreduce(HasNumpy()), TypeError, "sendbuf", ".numpy()")

    class HasArray:
        def __array__(self, dtype=None, copy=None):
            return np.ones(2)

    _raises(lambda: lpmpi.allreduce(HasArray()), TypeError, "numpy.asarray(sendbuf)")


def test_other_devices_and_failing_producers():
    class OnDevice(DLPackOnly):
        def __init__(self, a, device):
            super().__init__(a)
            self.device = device

        def __dlpack_device__(self):
            return (self.device, 0)

    x = np.ones(4)
    _raises(lambda: lpmpi.allreduce(OnDevice(x, 10)), TypeError, "sendbuf", "ROCm")
    _raises(lambda: lpmpi.bcast(OnDevice(x, 99)), TypeError, "buf", "type 99")
    if not lpmpi.engine.CUDA_BUILD:
        _raises(lambda: lpmpi.allreduce(OnDevice(x, 2)), TypeError, "no CUDA support")

    class Broken(DLPackOnly):
        def __dlpack__(self, **kw):
            raise RuntimeError("cannot export")

    _raises(lambda: lpmpi.allreduce(Broken(x)), TypeError, "cannot be exported by DLPack")

    class NotACapsule(DLPackOnly):
        def __dlpack__(self, **kw):
            return 42

    _raises(lambda: lpmpi.allreduce(NotACapsule(x)), TypeError, "did not return a DLPack capsule")


@needs_torch
def test_mixed_memory_is_a_type_error(tmp_path):
    """A host tensor with a device array (emulated: __cuda_array_interface__ over host memory
    under LPMPI_EMULATE_STAGING=1, in a child so that the setting stays there)."""
    code = (
        "import torch, lpmpi\n"
        "from lpmpi._devarray import HostDeviceArray\n"
        "import numpy as np\n"
        "try:\n"
        "    lpmpi.allreduce(torch.ones(4), HostDeviceArray(np.zeros(4, np.float32)))\n"
        "except TypeError as e:\n"
        "    assert 'host' in str(e) and 'device' in str(e), e\n"
        "    print('OK')\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path,
                       env=child_env({"LPMPI_EMULATE_STAGING": "1"}), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_import_lpmpi_imports_no_framework(tmp_path):
    code = ("import sys, lpmpi, lpmpi.bench\n"
            "bad = [m for m in ('torch', 'jax', 'cupy') if m in sys.modules]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path, env=child_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
