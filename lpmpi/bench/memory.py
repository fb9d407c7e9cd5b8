"""Where the measured buffers live: the memory backends of ``--memory`` (host: numpy; cuda:
CuPy arrays on this rank's GPU) and, for tests without a GPU, the one fake device backend
(``LPMPI_TUNER_FAKE_DEVICE=1`` with ``LPMPI_EMULATE_STAGING=1``: host arrays that lpmpi runs on
its device-memory path).  The benchmark and the tuner get their backend from
:func:`memory_backend`.

>>> be = HostMemory()
>>> import numpy as np
>>> x = be.from_host(np.arange(3, dtype=np.uint8)); be.fill_bytes(x, 7); be.to_host(x).tolist()
[7, 7, 7]
"""
from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from lpmpi import engine

FAKE_DEVICE_ENV = "LPMPI_TUNER_FAKE_DEVICE"
EMULATE_ENV = "LPMPI_EMULATE_STAGING"


class HostMemory:
    """Buffers in host memory (numpy arrays)."""

    name = "host"
    #: whether the MPI library reads these buffers itself (mpi4py's row needs that)
    mpi_readable = True

    def from_host(self, host: np.ndarray) -> Any:
        """A buffer of this memory kind holding a copy of ``host``."""
        return host.copy()

    def to_host(self, arr: Any) -> np.ndarray:
        """A numpy view or copy of ``arr``."""
        return np.asarray(arr)

    def fill_bytes(self, arr: Any, byte: int) -> None:
        """Set every byte of ``arr`` to ``byte``."""
        np.asarray(arr).reshape(-1).view(np.uint8).fill(byte)

    def copy_from_host(self, arr: Any, host: np.ndarray) -> None:
        """Overwrite ``arr`` with the values of ``host`` (same size and dtype)."""
        np.copyto(np.asarray(arr).reshape(-1), host.reshape(-1))


class CudaMemory(HostMemory):
    """Buffers in GPU memory (CuPy arrays; ``--memory cuda``).  Where the MPI library is not
    CUDA-aware, lpmpi stages them: LP through its pipelined staging, the other algorithms (so
    ``native``) as one copy to the host, the host collective and one copy back; the mpi4py row
    is then left out, as that MPI cannot read device pointers (``mpi_readable`` False)."""

    name = "cuda"

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError as e:
            raise SystemExit(f"--memory cuda needs CuPy: {e}") from None
        if not engine.CUDA_BUILD:
            raise SystemExit("--memory cuda: this lpmpi was built without CUDA (no nvcc)")
        self.cp = cupy
        self.mpi_readable = engine.device_info()["transport"] == "cuda-aware"

    def from_host(self, host: np.ndarray) -> Any:
        return self.cp.array(host)

    def to_host(self, arr: Any) -> np.ndarray:
        return self.cp.asnumpy(arr)

    def fill_bytes(self, arr: Any, byte: int) -> None:
        arr.reshape(-1).view(self.cp.uint8).fill(byte)

    def copy_from_host(self, arr: Any, host: np.ndarray) -> None:
        arr.reshape(-1).set(host.reshape(-1))


class FakeDeviceMemory(HostMemory):
    """``--memory cuda`` without a GPU (tests, ``LPMPI_TUNER_FAKE_DEVICE=1``): buffers are
    :class:`lpmpi._devarray.HostDeviceArray`, which lpmpi accepts, and runs on its device-memory
    path, only under ``LPMPI_EMULATE_STAGING=1``."""

    name = "cuda"
    mpi_readable = False

    def from_host(self, host: np.ndarray) -> Any:
        from lpmpi._devarray import HostDeviceArray

        return HostDeviceArray(host.copy())

    def to_host(self, arr: Any) -> np.ndarray:
        return arr.get()

    def fill_bytes(self, arr: Any, byte: int) -> None:
        arr.view_host().reshape(-1).view(np.uint8).fill(byte)

    def copy_from_host(self, arr: Any, host: np.ndarray) -> None:
        np.copyto(arr.view_host().reshape(-1), host.reshape(-1))


#: the classes behind ``--memory``
MEMORY_BACKENDS: dict[str, type[HostMemory]] = {"host": HostMemory, "cuda": CudaMemory}


def fake_device() -> bool:
    """True when ``LPMPI_TUNER_FAKE_DEVICE`` asks for the GPU-less stand-in (tests only)."""
    from lpmpi import _env   # (the knob table's parsing: a bad value warns, as every 0|1 switch)

    return _env.flag_now(FAKE_DEVICE_ENV)


def device_problem() -> str | None:
    """Why ``--memory cuda`` cannot run in this process, or None (local: no communication).
    Imports CuPy only here, and only for a real device."""
    emulated = bool(engine.device_info()["emulated"])
    if fake_device():
        return None if emulated else f"{FAKE_DEVICE_ENV}=1 needs {EMULATE_ENV}=1"
    if emulated:
        return (f"{EMULATE_ENV}=1 emulates device memory on the host, where CuPy's device "
                f"pointers cannot be read: unset it to tune a GPU")
    try:
        import cupy
    except ImportError as exc:
        return f"--memory cuda needs CuPy (e.g. pip install cupy-cuda12x): {exc}"
    if not engine.CUDA_BUILD:
        return "--memory cuda: this lpmpi was built without CUDA (no nvcc at build time)"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError without a driver, among others
        return f"--memory cuda: no usable CUDA device ({type(exc).__name__}: {exc})"
    if n < 1:
        return "--memory cuda: no CUDA device is visible"
    return None


def memory_backend(memory: str, comm: MPI.Comm) -> HostMemory:
    """The backend of ``--memory`` (collective for cuda: each rank uses the GPU of its rank on
    the node, modulo the visible devices; :class:`FakeDeviceMemory` under
    ``LPMPI_TUNER_FAKE_DEVICE=1``).  A missing CuPy or CUDA build ends the program with its reason."""
    if memory == "host":
        return HostMemory()
    if memory != "cuda":
        raise ValueError(f"unknown memory kind {memory!r}")
    if fake_device():
        return FakeDeviceMemory()
    backend = CudaMemory()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local = node.Get_rank()
    finally:
        node.Free()
    backend.cp.cuda.Device(local % backend.cp.cuda.runtime.getDeviceCount()).use()
    return backend


def selection_memory(backend: HostMemory) -> str:
    """The memory kind "auto" selects for on ``backend``'s buffers: the backend's own, except
    that under ``LPMPI_EMULATE_STAGING=1`` the engine treats every buffer as device memory."""
    if backend.name == "cuda" or engine.device_info()["emulated"]:
        return "cuda"
    return "host"
