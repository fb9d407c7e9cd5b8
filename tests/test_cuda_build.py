"""The optional CUDA part of the build: compiled wherever nvcc is found (CI machines have nvcc
and no GPU), and the package imports and works for host memory with or without it; device
arrays are refused before any communication where they cannot be handled."""
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import lpmpi
from lpmpi import _core
from lpmpi._devarray import HostDeviceArray


def _nvcc():
    return shutil.which("nvcc") or (Path("/usr/local/cuda/bin/nvcc").exists() or None)


def test_cuda_compiled_where_nvcc_is():
    if os.environ.get("LPMPI_CUDA", "").strip().lower() in ("0", "no", "off", "false"):
        pytest.skip("LPMPI_CUDA=0: built without CUDA on purpose")
    if not _nvcc():
        pytest.skip("no nvcc on this machine: the build leaves the CUDA part out (expected)")
    assert _core.CUDA_BUILD, "nvcc is here but lpmpi was built without CUDA (see setup.py's output)"


def test_cuda_info():
    info = _core.cuda_info()
    assert set(info) == {"built", "emulated", "devices", "transport", "staging_buffers"}
    assert info["built"] == _core.CUDA_BUILD
    assert info["devices"] >= 0
    assert info["transport"] in ("staged", "cuda-aware")
    assert 1 <= info["staging_buffers"] <= 64


def test_host_memory_works():
    x = np.arange(10, dtype=np.float32)
    assert np.array_equal(lpmpi.allreduce(x, algorithm="lp"), x)


def test_fake_device_array_refused_without_emulation():
    """Without LPMPI_EMULATE_STAGING a host-backed __cuda_array_interface__ is no device memory:
    TypeError (no CUDA build, or a GPU that says so) or LPError (CUDA build, no usable driver)."""
    if _core.cuda_info()["emulated"]:
        pytest.skip("LPMPI_EMULATE_STAGING is set in this process")
    x = HostDeviceArray(np.arange(10.0))
    y = HostDeviceArray(np.zeros(10))
    with pytest.raises((TypeError, lpmpi.LPError)) as e:
        lpmpi.allreduce(x, y)
    assert "sendbuf" in str(e.value) or "CUDA" in str(e.value)
    assert np.array_equal(y.view_host(), np.zeros(10))


def test_staging_buffers_knob():
    old = _core.cuda_info()["staging_buffers"]
    try:
        _core.set_staging_buffers(7)
        assert _core.cuda_info()["staging_buffers"] == 7
        with pytest.raises(ValueError):
            _core.set_staging_buffers(0)
    finally:
        _core.set_staging_buffers(old)
