"""A host-memory stand-in for a device array, for running device-array code without a GPU.

``HostDeviceArray`` wraps a C-contiguous numpy array and exposes it through
``__cuda_array_interface__`` (version 3), the way CuPy, PyTorch and Numba expose device
memory.  lpmpi accepts it only under ``LPMPI_EMULATE_STAGING=1``, where the engine's device
operations are emulated on the host: then a collective on it runs the same device-memory path
(argument checks, stream handling, the staged pipeline) as a CuPy array on a GPU, and
``recvbuf=None`` returns a new ``HostDeviceArray``.

>>> import numpy as np
>>> from lpmpi._devarray import HostDeviceArray
>>> x = HostDeviceArray(np.arange(4.0))
>>> x.__cuda_array_interface__["shape"]
(4,)
>>> x.get()
array([0., 1., 2., 3.])
"""
from __future__ import annotations

from typing import Any

import numpy as np


class HostDeviceArray:
    """``__cuda_array_interface__`` over host memory (tests and emulation only).

    ``stream``: the interface's stream entry (None: no synchronisation asked for; an int is
    passed through as given, 0 included, so that tests can check its validation).
    ``readonly``: the read-only flag of the interface's ``data`` entry.
    ``strides``: override the exported strides (tests of the contiguity check).
    """

    def __init__(self, data: Any, *, stream: int | None = None, readonly: bool = False,
                 strides: tuple[int, ...] | None = None) -> None:
        a = np.asarray(data)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        self._a = a
        self.stream = stream
        self.readonly = readonly
        self.strides_override = strides

    @classmethod
    def empty(cls, shape: Any, dtype: Any) -> HostDeviceArray:
        return cls(np.empty(shape, dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def size(self) -> int:
        return int(self._a.size)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "version": 3,
            "shape": self._a.shape,
            "typestr": self._a.dtype.str,
            "descr": self._a.dtype.descr,
            "data": (int(self._a.ctypes.data), self.readonly),
            "strides": self.strides_override,
            "stream": self.stream,
        }

    def get(self) -> np.ndarray:
        """A host copy (as CuPy's ``ndarray.get``)."""
        return self._a.copy()

    def view_host(self) -> np.ndarray:
        """The backing host array itself (no copy)."""
        return self._a

    def __repr__(self) -> str:
        return f"HostDeviceArray({self._a!r})"
