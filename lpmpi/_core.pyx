# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython bindings of the lpmpi C engine.

A collective call builds a :class:`Message` (``Message.for_allreduce`` / ``for_reduce`` /
``for_bcast``): it checks and normalises every argument with the GIL held, before any
communication, and owns the call's buffers until it dies.  :meth:`Message.run` then prepares
the communicator (the engine's table agreement, once per communicator), and runs the engine
with the GIL released; a failed status becomes an exception.

Names (dtypes, ops, collectives, memory kinds) and limits come from the engine; nothing here
restates them.  The environment is read by :mod:`lpmpi._env`, which calls ``_configure``.
"""
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyObject_CheckBuffer,
                             PyBUF_FORMAT, PyBUF_C_CONTIGUOUS)
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from libc.string cimport memset
cimport cython
cimport numpy as cnp
from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_COMM_NULL, MPI_SUCCESS, MPI_MAX_ERROR_STRING,
                            MPI_Comm_test_inter, MPI_Comm_size, MPI_Comm_rank, MPI_Error_string,
                            MPI_Op, MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,
                            MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR)
from lpmpi._clpmpi cimport *
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t, int64_t, uint64_t, uintptr_t, intptr_t
from cpython.pycapsule cimport PyCapsule_IsValid, PyCapsule_GetPointer, PyCapsule_SetName

import enum as _enum
import os
import sys
import numpy as np
from operator import index as _index
from mpi4py import MPI as PyMPI
from lpmpi._errors import LPError, MismatchError
from lpmpi._colls import COMPRESSIBLE as _COMPRESSIBLE

cnp.import_array()

# looked up once: these sit on every call's path
cdef object _IN_PLACE = PyMPI.IN_PLACE
cdef object _BOTTOM = PyMPI.BOTTOM
cdef object _WORLD = PyMPI.COMM_WORLD
cdef type _Comm = PyMPI.Comm
cdef type _MPIOp = PyMPI.Op

# the module, one concern a file (textual includes: module-level statements run in this order)
include "_core.src/names.pxi"
include "_core.src/config.pxi"
include "_core.src/errors.pxi"
include "_core.src/registry.pxi"
include "_core.src/comm.pxi"
include "_core.src/ops.pxi"
include "_core.src/buffers.pxi"
include "_core.src/dlpack.pxi"
include "_core.src/cai.pxi"
include "_core.src/alloc.pxi"
include "_core.src/checks.pxi"
include "_core.src/message.pxi"
include "_core.src/request.pxi"
include "_core.src/collectives.pxi"
include "_core.src/forms.pxi"
include "_core.src/tuning.pxi"
include "_core.src/autotune.pxi"
include "_core.src/flight.pxi"
include "_core.src/xla.pxi"
include "_core.src/compress.pxi"
