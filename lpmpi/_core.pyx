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
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t, int64_t, uint64_t, uintptr_t
from cpython.pycapsule cimport PyCapsule_IsValid, PyCapsule_GetPointer, PyCapsule_SetName

import enum as _enum
import sys
import numpy as np
from operator import index as _index
from mpi4py import MPI as PyMPI
from lpmpi._errors import LPError, MismatchError

cnp.import_array()

# looked up once: these sit on every call's path
cdef object _IN_PLACE = PyMPI.IN_PLACE
cdef object _BOTTOM = PyMPI.BOTTOM
cdef object _WORLD = PyMPI.COMM_WORLD
cdef type _Comm = PyMPI.Comm
cdef type _MPIOp = PyMPI.Op

# ---------------------------------------------------------------- the engine's names and limits
#: element types, ops, collectives and memory kinds, in the engine's order (lpmpi.h)
DTYPE_NAMES = tuple(lp_dtype_name(i).decode() for i in range(LP_NDTYPES))
_TAKES = f"(lpmpi takes {', '.join(DTYPE_NAMES)})"   # for unsupported-dtype errors
OP_NAMES = tuple(lp_op_name(i).decode() for i in range(LP_NOPS))
COLLECTIVES = tuple(lp_coll_name(i).decode() for i in range(LP_NCOLLS))
MEMORY_KINDS = tuple(lp_mem_name(i).decode() for i in range(LP_NMEMS))

cdef tuple _ON = ("all", "root", "nonroot")

def _coll_traits():
    """The engine's row of each collective (registry.c lp_colls), in COLLECTIVES' order: a dict
    of has_op, has_root, input and result ("all", "root" or "nonroot": the ranks whose data goes
    in, whose buffer the call writes), send_blocks and recv_blocks (blocks of the count each
    buffer holds: 1, or 0 for the communicator's size), mpi_name (the MPI library's own
    collective, "MPI_Allreduce")."""
    cdef int op, root, inp, res, sb, rb
    out = []
    for i in range(LP_NCOLLS):
        lp_coll_traits(<lp_coll_t>i, &op, &root, &inp, &res, &sb, &rb)
        out.append(dict(name=COLLECTIVES[i], has_op=bool(op), has_root=bool(root), input=_ON[inp],
                        result=_ON[res], send_blocks=sb, recv_blocks=rb,
                        mpi_name=lp_coll_mpi_name(<lp_coll_t>i).decode()))
    return tuple(out)
CUDA_BUILD = bool(lp_cuda_built())  # compiled with nvcc: device kernels and the CUDA transports
CHUNK_MIN, CHUNK_MAX = LP_CHUNK_MIN, LP_CHUNK_MAX
WINDOW_MAX, STAGING_MAX = LP_WINDOW_MAX, LP_STAGING_MAX
DEFAULT_STAGING = LP_STAGING_DEFAULT
cdef int BF16 = LP_BFLOAT16

Op = _enum.IntEnum("Op", [(n.upper(), i) for i, n in enumerate(OP_NAMES)], module="lpmpi")
Op.__doc__ = ("Reduction operations: ``lpmpi.SUM`` ... ``lpmpi.BXOR`` (values are the engine's "
              "op codes; ``str`` names such as ``'sum'`` and ``MPI.SUM`` are accepted too).")

# (kind, itemsize) -> dtype code, for numpy dtypes (bfloat16 has no numpy kind: by name); a C
# table for the per-call path (numpy's kind characters are ASCII, item sizes at most 16)
cdef dict _KIND = {}
cdef signed char _KIND_CODE[128][17]
memset(_KIND_CODE, -1, sizeof(_KIND_CODE))
for _i, _n in enumerate(DTYPE_NAMES):
    if _n != "bfloat16":
        _d = np.dtype(_n)
        _KIND[(_d.kind.encode(), _d.itemsize)] = _i
        _KIND_CODE[ord(_d.kind)][_d.itemsize] = _i
# buffer-protocol format character -> numpy kind
cdef dict _FORMAT = {
    "?": b"b", "b": b"i", "h": b"i", "i": b"i", "l": b"i", "q": b"i", "n": b"i",
    "B": b"u", "H": b"u", "I": b"u", "L": b"u", "Q": b"u", "N": b"u",
    "e": b"f", "f": b"f", "d": b"f", "Zf": b"c", "Zd": b"c",
}

# ---------------------------------------------------------------- configuration
cdef bint _check_enabled = False
cdef bint _debug = False
cdef set _debug_seen = set()
cdef bint _emulate = False
cdef int _aware_setting = -1

def _configure(size_t max_msg_bytes, int window, bint check, bint debug=False):
    """Engine knobs (lpmpi._env at import): largest single MPI message (0 = keep), chunks in
    flight per direction (0 = keep, 1..WINDOW_MAX), LPMPI_CHECK, LPMPI_DEBUG."""
    global _check_enabled, _debug
    if window < 0 or window > LP_WINDOW_MAX:
        raise ValueError(f"window must be in 1..{LP_WINDOW_MAX} (0 = keep), got {window}")
    _check_enabled = check
    _debug = debug
    lp_configure(max_msg_bytes, window, check)

def _configure_timeout(double seconds):
    """LPMPI_TIMEOUT: the watchdog's limit in seconds (0: off); returns the previous one."""
    return lp_set_timeout_ns(<long long>(seconds * 1e9) if seconds > 0 else 0) / 1e9


def _configure_shm_spin(long us):
    """LPMPI_SHM_SPIN_US (lpmpi._env at import): microseconds a rank waiting on the shared-memory
    transport polls before it sleeps; -1: it never sleeps.  Returns the previous value (us)."""
    if us < -1:
        raise ValueError(f"us must be >= -1, got {us}")
    cdef long prev = lp_set_shm_spin(-1 if us < 0 else us * 1000)
    return -1 if prev < 0 else prev // 1000

def _configure_node_transport(int mode=1):
    """LPMPI_NODE_TRANSPORT (lpmpi._env at import) for communicators prepared from now on: 0 mpi
    (MPI point-to-point between the ranks of a node), 1 auto (shared memory, else single-copy
    reads, where they work), 2 shared memory only, 3 single-copy reads only."""
    if mode < 0 or mode > 3:
        raise ValueError(f"mode must be in 0..3, got {mode}")
    lp_set_node_transport(mode)

def _configure_device(bint emulate=False, int cuda_aware=-1, int staging_buffers=0):
    """Device-memory knobs (lpmpi._env at import): emulation of the staged CUDA path on the host
    (LPMPI_EMULATE_STAGING), the transport (LPMPI_CUDA_AWARE: -1 ask the MPI library, 0 staged,
    1 aware), staging buffers per direction (LPMPI_STAGING_BUFFERS, 0 = the default)."""
    global _emulate, _aware_setting
    _emulate = emulate
    _aware_setting = cuda_aware
    lp_configure_device(_emulate, cuda_aware, staging_buffers)

def window():
    """Chunks in flight per direction of the pipelines (LPMPI_WINDOW)."""
    return lp_window_get()

def set_staging_buffers(int n):
    """Staging buffers (chunks in flight per direction) of the staged device pipeline,
    1..STAGING_MAX (the tuner's knob; LPMPI_STAGING_BUFFERS at import)."""
    if not 1 <= n <= LP_STAGING_MAX:
        raise ValueError(f"staging buffers must be in 1..{LP_STAGING_MAX}, got {n}")
    lp_configure_device(_emulate, _aware_setting, n)

def cuda_info():
    """What this build and process do with device memory (``lpmpi-info``).

    Keys: built (nvcc was found at build time), emulated (LPMPI_EMULATE_STAGING), devices
    (visible CUDA devices), transport ("cuda-aware" or "staged"), staging_buffers."""
    cdef int n = 0
    if CUDA_BUILD and not _emulate:
        if lp_device_count(&n) != LP_OK:
            n = 0
    return {"built": CUDA_BUILD, "emulated": bool(lp_device_emulated()), "devices": n,
            "transport": "cuda-aware" if lp_cuda_aware() else "staged",
            "staging_buffers": lp_staging_buffers()}

def _device_stats():
    """Emulation counters (tests): (events found not ready, emulated device operations run)."""
    cdef long a = 0, b = 0
    lp_device_stats(&a, &b)
    return a, b

def comm_contexts():
    """Communicators lpmpi holds a private context (an MPI_Comm_dup) for, right now."""
    return lp_comm_contexts()

# ---------------------------------------------------------------- errors
cdef int _raise_status(int rc) except -1:
    """The engine's last failure as an exception: ValueError for arguments, MismatchError for
    LPMPI_CHECK, LPError for MPI, CUDA and internal failures (LPMPI_DEBUG adds file:line)."""
    msg = lp_errmsg().decode("utf-8", "replace")
    if _debug:
        msg += f" [{lp_errwhere().decode()}]"
    if rc == LP_ERR_MISMATCH:
        raise MismatchError(msg)
    if rc == LP_ERR_ARG:
        raise ValueError(msg)
    raise LPError(msg)

cdef int _local_error(MPI_Comm h) except -1:
    """LPMPI_CHECK: tell the other ranks this rank's arguments were bad, so nobody hangs."""
    if _check_enabled:
        with nogil:
            lp_check_local_error(h)
    return 0

# ---------------------------------------------------------------- registry
cdef dict _ALG = {}          # (collective index, name) -> registry index
cdef tuple _ALGS_BY_COLL

def _build_registry():
    global _ALGS_BY_COLL
    per = [[] for _ in COLLECTIVES]
    for i in range(lp_algo_count()):
        name = lp_algo_name(i).decode()
        c = lp_algo_coll(i)
        _ALG[(c, name)] = i
        per[c].append(name)
    _ALGS_BY_COLL = tuple(tuple(p) for p in per)

_build_registry()

cdef int _coll_index(collective) except -1:
    try:
        return COLLECTIVES.index(collective)
    except ValueError:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}") from None

def algorithms(collective):
    """Names of the algorithms valid for ``collective`` ("auto" excluded).

    >>> import lpmpi
    >>> "lp" in lpmpi.algorithms("allreduce")
    True
    """
    return _ALGS_BY_COLL[_coll_index(collective)]

def _node_local(collective, algorithm):
    """True when ``algorithm`` of ``collective`` runs over node-local transports (TRANSPORTS)."""
    return bool(lp_algo_node_local(_ALG[(_coll_index(collective), algorithm)]))

def _algorithm_info(collective):
    """[(name, registry index, chunked)] for a collective (lpmpi.engine.algorithm_info)."""
    c = _coll_index(collective)
    return [(n, _ALG[(c, n)], bool(lp_algo_chunked(_ALG[(c, n)]))) for n in _ALGS_BY_COLL[c]]

cdef int _alg_index(int coll, algorithm) except -2:
    if algorithm == "auto":
        return LP_ALG_AUTO
    idx = _ALG.get((coll, algorithm)) if isinstance(algorithm, str) else None
    if idx is None:
        raise ValueError(f"algorithm must be 'auto' or one of {_ALGS_BY_COLL[coll]} "
                         f"for {COLLECTIVES[coll]}, got {algorithm!r}")
    return idx

cdef object _as_int(x, str name, str what):
    """int(x) for ints and integer-likes (numpy integers: operator.index), never bool."""
    if type(x) is int:
        return x
    if not isinstance(x, bool):
        try:
            return _index(x)
        except TypeError:
            pass
    raise TypeError(f"{name} must be {what}, got {type(x).__name__}")

cdef size_t _chunk(chunk_bytes) except? 0:
    if chunk_bytes is None:
        return 0
    chunk_bytes = _as_int(chunk_bytes, "chunk_bytes", "a positive int or None")
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes}")
    if chunk_bytes >= 1 << 64:
        raise ValueError(f"chunk_bytes must be below 2**64, got {chunk_bytes}")
    return chunk_bytes

# ---------------------------------------------------------------- communicators
cdef MPI_Comm _WORLD_H = (<MPI.Comm>_WORLD).ob_mpi
cdef int _WORLD_SIZE = -1         # on first use (MPI may be initialized after import)

cdef int _comm(comm, MPI_Comm *out, int *size) except -1:
    cdef int inter = 0, rc, n = 0
    cdef char err[MPI_MAX_ERROR_STRING + 1]
    global _WORLD_SIZE
    if (comm is None or comm is _WORLD) and _WORLD_SIZE > 0:
        out[0] = _WORLD_H               # the common case: an intracommunicator until MPI ends
        size[0] = _WORLD_SIZE
        return 0
    if comm is None:
        comm = _WORLD
    if not isinstance(comm, _Comm):
        raise TypeError(f"comm must be an mpi4py communicator (MPI.Comm) or None, got {type(comm).__name__}")
    cdef MPI_Comm h = (<MPI.Comm>comm).ob_mpi
    if h == MPI_COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    rc = MPI_Comm_test_inter(h, &inter)
    if rc != MPI_SUCCESS:
        err[0] = 0
        MPI_Error_string(rc, err, &n)
        raise ValueError(f"comm is not a valid communicator (freed?): {err.decode('utf-8', 'replace')}")
    if inter:
        raise ValueError("comm is an intercommunicator; lpmpi needs an intracommunicator")
    MPI_Comm_size(h, size)
    out[0] = h
    if comm is _WORLD:
        _WORLD_SIZE = size[0]
    return 0

# ---------------------------------------------------------------- ops
cdef dict _OPS = {}
for _i, _n in enumerate(OP_NAMES):
    _OPS[_n] = _i
    _OPS[_n.upper()] = _i

cdef object _OpType = Op

cdef object _SUM_NAME = "sum"          # the default argument's (interned) string

cdef int _op(op) except -1:
    cdef MPI_Op h
    if op is _SUM_NAME:
        return LP_SUM
    if type(op) is str:                 # a name: the fast path
        i = _OPS.get(op)
        if i is not None:
            return i
    if type(op) is _OpType or isinstance(op, _OpType):
        return op
    if isinstance(op, str):
        i = _OPS.get(op)
        if i is not None:
            return i
    elif isinstance(op, _MPIOp):
        h = (<MPI.Op>op).ob_mpi
        if h == MPI_SUM: return LP_SUM
        if h == MPI_PROD: return LP_PROD
        if h == MPI_MAX: return LP_MAX
        if h == MPI_MIN: return LP_MIN
        if h == MPI_LAND: return LP_LAND
        if h == MPI_LOR: return LP_LOR
        if h == MPI_LXOR: return LP_LXOR
        if h == MPI_BAND: return LP_BAND
        if h == MPI_BOR: return LP_BOR
        if h == MPI_BXOR: return LP_BXOR
    raise ValueError(f"op must be an lpmpi op, one of MPI.SUM .. MPI.BXOR, or one of {OP_NAMES}, got {op!r}")

# ---------------------------------------------------------------- buffers
cdef struct Buf:
    char *ptr
    size_t count
    int dtype
    int mem              # 0 host, 1 device (__cuda_array_interface__)
    bint readonly
    bint has_view
    bint has_stream      # device: wait for `stream` before the engine reads or writes
    uintptr_t stream
    Py_buffer view
    void *dl             # a DLPack managed tensor this Buf consumed (deleted by _release)
    bint dl_versioned    # ... a DLManagedTensorVersioned (else the legacy DLManagedTensor)

cdef int _numpy_dtype(cnp.ndarray a) except -2:
    cdef cnp.dtype d = <cnp.dtype>cnp.PyArray_DESCR(a)
    if not cnp.PyArray_ISNOTSWAPPED(a):
        raise TypeError("byte-swapped (non-native byte order) arrays are not supported")
    cdef int t = -1
    if 0 <= d.kind < 128 and 0 <= d.itemsize <= 16:
        t = _KIND_CODE[d.kind][d.itemsize]
    if t < 0 and d.itemsize == 2 and d.name == "bfloat16":
        return BF16
    return t

cdef int _format_dtype(Py_buffer *v) except -2:
    fmt = (v.format or b"B").decode("ascii", "replace")
    if fmt[:1] in ("@", "=", "<"):
        fmt = fmt[1:]
    elif fmt[:1] in (">", "!"):
        return -1
    kind = _FORMAT.get(fmt)
    if kind is None:
        return -1
    return _KIND.get((kind, v.itemsize), -1)

# ---------------------------------------------------------------- DLPack
# The ABI of dlpack.h (DLPack 1.x, and the legacy unversioned capsule), declared here: the
# layout is the standard's, not a header's.
ctypedef struct DLDevice:
    int32_t device_type
    int32_t device_id
ctypedef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes
ctypedef struct DLTensor:
    void *data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t *shape
    int64_t *strides
    uint64_t byte_offset
ctypedef struct DLManagedTensor:
    DLTensor dl_tensor
    void *manager_ctx
    void (*deleter)(DLManagedTensor *) noexcept nogil
ctypedef struct DLPackVersion:
    uint32_t major
    uint32_t minor
ctypedef struct DLManagedTensorVersioned:
    DLPackVersion version
    void *manager_ctx
    void (*deleter)(DLManagedTensorVersioned *) noexcept nogil
    uint64_t flags
    DLTensor dl_tensor

cdef enum:
    DL_CPU = 1
    DL_CUDA = 2
    DL_CUDA_HOST = 3
    DL_FLAG_READ_ONLY = 1
cdef tuple _DL_KINDS = (b"i", b"u", b"f", None, None, b"c", b"b")   # by DLDataTypeCode
cdef dict _DL_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan",
                         8: "Metal", 9: "VPI", 10: "ROCm", 11: "ROCm host", 13: "CUDA managed",
                         14: "oneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA"}

cdef void _dl_delete(void *mt, bint versioned) noexcept:
    if mt == NULL:
        return
    if versioned:
        if (<DLManagedTensorVersioned *>mt).deleter != NULL:
            (<DLManagedTensorVersioned *>mt).deleter(<DLManagedTensorVersioned *>mt)
    elif (<DLManagedTensor *>mt).deleter != NULL:
        (<DLManagedTensor *>mt).deleter(<DLManagedTensor *>mt)

cdef int _dl_dtype(DLDataType t, str name) except -2:
    """lp_dtype_t of a DLPack data type, or -1."""
    if t.lanes != 1 or t.bits % 8:
        return -1
    if t.code == 4:                            # kDLBfloat
        return BF16 if t.bits == 16 else -1
    kind = _DL_KINDS[t.code] if t.code < len(_DL_KINDS) else None
    if kind is None:
        return -1
    return _KIND.get((kind, t.bits // 8), -1)

cdef str _dl_type_name(DLDataType t):
    names = ("int", "uint", "float", "opaque", "bfloat", "complex", "bool")
    base = names[t.code] if t.code < len(names) else f"code{t.code}"
    return f"{base}{t.bits}" + (f"x{t.lanes}" if t.lanes != 1 else "")

cdef int _get_dlpack(obj, str name, Buf *b) except -1:
    """Fill b from an object's ``__dlpack__`` (a 1.x versioned capsule where the producer
    makes one, with its read-only flag; else the legacy capsule).  b then owns the managed
    tensor (consumed: the capsule is renamed "used_...") until _release."""
    try:
        dtype_ = int(obj.__dlpack_device__()[0])
    except Exception as e:
        raise TypeError(f"{name}.__dlpack_device__() failed: {e}") from None
    if dtype_ not in (DL_CPU, DL_CUDA, DL_CUDA_HOST):
        raise TypeError(f"{name} lives on a {_DL_DEVICES.get(dtype_, f'type {dtype_}')} device; "
                        "lpmpi takes host (CPU) and CUDA memory")
    if dtype_ == DL_CUDA and not CUDA_BUILD:
        raise TypeError(f"{name} is a CUDA array, but this lpmpi build has no CUDA support "
                        "(built without nvcc)")
    # a CUDA producer orders its work before the legacy default stream (1), which the engine
    # waits for; host memory takes no stream
    kw = {"stream": 1} if dtype_ == DL_CUDA else {}
    try:
        try:
            cap = obj.__dlpack__(max_version=(1, 0), **kw)
        except TypeError:                      # a producer older than DLPack 1.0
            cap = obj.__dlpack__(**kw)
    except Exception as e:                     # e.g. a torch tensor that requires grad
        hint = f" (pass {name}.detach())" if "grad" in str(e) else ""
        raise TypeError(f"{name} cannot be exported by DLPack: {e}{hint}") from None
    cdef DLTensor *t
    cdef void *mt
    cdef bint versioned
    if PyCapsule_IsValid(cap, b"dltensor_versioned"):
        mt = PyCapsule_GetPointer(cap, b"dltensor_versioned")
        PyCapsule_SetName(cap, b"used_dltensor_versioned")
        versioned = True
        major = (<DLManagedTensorVersioned *>mt).version.major
        if major != 1:
            _dl_delete(mt, True)
            raise TypeError(f"{name}: DLPack version {major} is not supported (1.x is)")
        t = &(<DLManagedTensorVersioned *>mt).dl_tensor
        b.readonly = ((<DLManagedTensorVersioned *>mt).flags & DL_FLAG_READ_ONLY) != 0
    elif PyCapsule_IsValid(cap, b"dltensor"):
        mt = PyCapsule_GetPointer(cap, b"dltensor")
        PyCapsule_SetName(cap, b"used_dltensor")
        versioned = False
        t = &(<DLManagedTensor *>mt).dl_tensor
        b.readonly = False
    else:
        raise TypeError(f"{name}.__dlpack__() did not return a DLPack capsule")
    b.dl = mt                                  # owned from here: _release deletes it
    b.dl_versioned = versioned
    cdef size_t count = 1, expect, i
    cdef int64_t n
    b.dtype = _dl_dtype(t.dtype, name)
    if b.dtype < 0:
        spelled = getattr(obj, "dtype", None)
        spelled = f"{spelled} (DLPack {_dl_type_name(t.dtype)})" if spelled is not None else _dl_type_name(t.dtype)
        raise TypeError(f"{name} has unsupported dtype {spelled} {_TAKES}")
    for i in range(<size_t>t.ndim):
        if t.shape[i] < 0:
            raise ValueError(f"{name} has a negative dimension")
        count *= <size_t>t.shape[i]
    if t.strides != NULL and count > 1:
        expect = 1
        for i in reversed(range(<size_t>t.ndim)):
            n = t.shape[i]
            if n > 1 and t.strides[i] != <int64_t>expect:
                raise ValueError(f"{name} must be contiguous (its strides are not row-major; "
                                 "lpmpi makes no silent copy: pass .contiguous() or a copy)")
            expect *= <size_t>n
    b.ptr = <char *>t.data + t.byte_offset
    b.count = count
    if _is_jax(obj):
        b.readonly = True                      # JAX arrays are immutable
    if dtype_ == DL_CUDA:
        _check_device_ptr(<size_t>b.ptr, count, name)
        b.mem = 1
        b.stream = 1
        b.has_stream = True
    return 0

cdef str _accepted(obj, str name):
    """The TypeError text for an object lpmpi cannot take as a buffer."""
    hint = ""
    if callable(getattr(obj, "numpy", None)):
        hint = f"; it has .numpy(): pass {name}.numpy() (a copy for read-only data)"
    elif hasattr(obj, "__array__"):
        hint = f"; it has __array__: pass numpy.asarray({name}) (a copy for some types)"
    elif isinstance(obj, (list, tuple, int, float, complex, bool)):
        hint = f"; pass numpy.asarray({name}) (a result needs an array to land in)"
    return (f"{name} must be an array: an object with __dlpack__ (PyTorch, JAX, CuPy, numpy), "
            f"a numpy array, a buffer-protocol object or a CUDA array (__cuda_array_interface__); "
            f"got {type(obj).__module__}.{type(obj).__qualname__}{hint}")

cdef int _get_buf(obj, str name, Buf *b) except -1:
    """Fill b from, in this order: a numpy array, an object with ``__dlpack__``, a
    buffer-protocol object, a device array (``__cuda_array_interface__``, or a PyTorch CUDA
    tensor of a dtype it lacks)."""
    cdef cnp.ndarray a
    memset(b, 0, sizeof(Buf))
    if cnp.PyArray_Check(obj):
        a = <cnp.ndarray>obj
        if not cnp.PyArray_IS_C_CONTIGUOUS(a):
            raise ValueError(f"{name} must be C-contiguous: " + (
                "the result is written into it: receive into numpy.empty_like(recvbuf, order='C') "
                "and copy back" if name == "recvbuf" else f"pass numpy.ascontiguousarray({name}) (a copy)"))
        b.dtype = _numpy_dtype(a)
        if b.dtype < 0:
            raise TypeError(f"{name} has unsupported dtype {a.dtype} {_TAKES}")
        b.ptr = <char *>cnp.PyArray_DATA(a)
        b.count = <size_t>cnp.PyArray_SIZE(a)
        b.readonly = not cnp.PyArray_ISWRITEABLE(a)
        return 0
    if obj is _IN_PLACE or obj is _BOTTOM or obj is None:
        what = "MPI.IN_PLACE" if obj is _IN_PLACE else "MPI.BOTTOM" if obj is _BOTTOM else "None"
        hint = " (for in place, pass lpmpi.IN_PLACE as sendbuf and the data as recvbuf)" \
            if obj is _IN_PLACE and name == "recvbuf" else ""
        raise TypeError(f"{name} must be an array, not {what}{hint}")
    if hasattr(type(obj), "__dlpack__") and hasattr(type(obj), "__dlpack_device__"):
        if _is_torch(obj):                   # bits DLPack does not carry: refused, not ignored
            if getattr(obj, "is_neg", None) is not None and obj.is_neg():
                raise TypeError(f"{name} is a torch tensor with its negative bit set (a lazy "
                                f"negation, e.g. z.conj().imag), which DLPack does not carry: "
                                f"pass {name}.resolve_neg()")
            if getattr(obj, "is_conj", None) is not None and obj.is_conj():
                raise TypeError(f"{name} is a torch tensor with its conjugate bit set (a lazy "
                                f"conjugate), which DLPack does not carry: pass {name}.resolve_conj()")
        return _get_dlpack(obj, name, b)
    if not PyObject_CheckBuffer(obj):        # then device arrays without DLPack
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            raise TypeError(_accepted(obj, name)) from None
        except TypeError as e:   # PyTorch raises it for dtypes the interface lacks (bfloat16)
            if _is_torch_cuda(obj):
                return _get_torch(obj, name, b)
            raise TypeError(f"{name}: {e}") from None
        if cai is None:
            raise TypeError(_accepted(obj, name))
        return _get_cai(obj, cai, name, b)
    try:
        PyObject_GetBuffer(obj, &b.view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)
    except BufferError:
        raise ValueError(f"{name} must be C-contiguous") from None
    b.has_view = True
    b.dtype = _format_dtype(&b.view)
    if b.dtype < 0:
        fmt = b.view.format
        PyBuffer_Release(&b.view)
        b.has_view = False
        raise TypeError(f"{name} has unsupported element format {fmt!r}")
    b.ptr = <char *>b.view.buf
    b.count = <size_t>(b.view.len // b.view.itemsize) if b.view.itemsize else 0
    b.readonly = b.view.readonly
    return 0

# ---------------------------------------------------------------- device arrays

cdef int _typestr_dtype(str typestr, obj, str name) except -2:
    """lp_dtype_t of an __cuda_array_interface__ typestr ('<f4', '|b1', ...), or -1."""
    if len(typestr) < 3 or not typestr[2:].isdigit():
        return -1
    order, kind, size = typestr[0], typestr[1], int(typestr[2:])
    if order == ">" and size > 1:
        raise TypeError(f"{name} is byte-swapped (non-native byte order); not supported")
    if kind == "V" and size == 2:    # bfloat16 (ml_dtypes) travels as two raw bytes
        return BF16 if getattr(getattr(obj, "dtype", None), "name", None) == "bfloat16" else -1
    if kind not in "biufc":
        return -1
    return _KIND.get((kind.encode(), size), -1)

cdef int _check_device_ptr(size_t ptr, size_t count, str name) except -1:
    """A real device array must point at device memory (an emulated one at host memory)."""
    cdef int dev = -1, rc
    if count == 0:
        return 0
    if ptr == 0:
        raise ValueError(f"{name} has a NULL data pointer")
    if _emulate:
        return 0
    rc = lp_device_pointer(<const void *>ptr, &dev)
    if rc != LP_OK:
        _raise_status(rc)
    if dev < 0:
        raise TypeError(f"{name} exposes __cuda_array_interface__ but does not point at CUDA device "
                        "memory")
    return 0

cdef int _get_cai(obj, cai, str name, Buf *b) except -1:
    """Fill b from a device array's __cuda_array_interface__ (versions 0-3)."""
    if not CUDA_BUILD and not _emulate:
        raise TypeError(f"{name} is a device array, but this lpmpi build has no CUDA support (built "
                        "without nvcc; LPMPI_EMULATE_STAGING=1 emulates device memory on the host)")
    if not isinstance(cai, dict):
        raise TypeError(f"{name}.__cuda_array_interface__ must be a dict")
    try:
        shape = tuple(_index(n) for n in cai["shape"])
        typestr = str(cai["typestr"])
        ptr, ro = cai["data"]
        ptr = _index(ptr) if ptr is not None else 0
    except (KeyError, TypeError, ValueError):
        raise TypeError(f"{name} has a malformed __cuda_array_interface__ (needs shape, typestr and "
                        "data)") from None
    if cai.get("mask") is not None:
        raise TypeError(f"{name} is a masked device array; masks are not supported")
    dt = _typestr_dtype(typestr, obj, name)
    if dt < 0:
        raise TypeError(f"{name} has unsupported dtype {typestr!r}")
    cdef size_t itemsize = lp_dtype_size(dt), count = 1
    for n in shape:
        if n < 0:
            raise ValueError(f"{name} has a negative dimension in its shape {shape}")
        count *= n
    strides = cai.get("strides")
    if strides is not None:
        strides = tuple(strides)
        if len(strides) != len(shape):
            raise TypeError(f"{name} has a malformed __cuda_array_interface__ (strides and shape "
                            "differ in length)")
        expect = itemsize
        for n, st in zip(reversed(shape), reversed(strides)):
            if n > 1 and st != expect:
                raise ValueError(f"{name} must be C-contiguous")
            expect *= n
    stream = cai.get("stream")
    if stream is not None:
        stream = _index(stream)
        if stream == 0:
            raise ValueError(f"{name}.__cuda_array_interface__ has stream 0, which the interface "
                             "forbids (1 is the legacy default stream)")
        b.stream = <uintptr_t>stream
        b.has_stream = True
    _check_device_ptr(ptr, count, name)
    b.ptr = <char *><uintptr_t>ptr
    b.count = count
    b.dtype = dt
    b.mem = 1
    b.readonly = bool(ro)
    return 0

cdef bint _is_torch_cuda(obj):
    return _is_torch(obj) and bool(getattr(obj, "is_cuda", False))

cdef int _get_torch(obj, str name, Buf *b) except -1:
    """PyTorch CUDA tensors of dtypes __cuda_array_interface__ lacks (bfloat16)."""
    import torch
    if obj.dtype != torch.bfloat16:
        raise TypeError(f"{name} has unsupported dtype {obj.dtype}")
    if not CUDA_BUILD:
        raise TypeError(f"{name} is a device array, but this lpmpi build has no CUDA support")
    if not obj.is_contiguous():
        raise ValueError(f"{name} must be C-contiguous")
    _check_device_ptr(obj.data_ptr(), obj.numel(), name)
    stream = torch.cuda.current_stream(obj.device).cuda_stream
    b.ptr = <char *><uintptr_t>obj.data_ptr()
    b.count = obj.numel()
    b.dtype = BF16
    b.mem = 1
    b.readonly = False
    b.stream = <uintptr_t>(stream or 1)   # the default stream's handle 0 is the legacy stream
    b.has_stream = True
    return 0

cdef int _sync_streams(Buf *s, Buf *r) except -1:
    """Wait for the streams the device arrays name, before the engine touches them."""
    cdef int rc = LP_OK
    cdef uintptr_t st
    if s.has_stream:
        st = s.stream
        with nogil:
            rc = lp_device_stream_sync(st)
        if rc != LP_OK:
            _raise_status(rc)
    if r != NULL and r.has_stream and not (s.has_stream and r.stream == s.stream):
        st = r.stream
        with nogil:
            rc = lp_device_stream_sync(st)
        if rc != LP_OK:
            _raise_status(rc)
    return 0

cdef object _alloc_device(obj, int dtype, tuple shape=None):
    """recvbuf=None for a device input: PyTorch for a tensor, else CuPy (emulation without
    CuPy: lpmpi's host-backed stand-in); the input's shape unless shape is given."""
    if _is_torch_cuda(obj):
        import torch
        if shape is not None:
            return torch.empty(shape, dtype=obj.dtype, device=obj.device)
        return torch.empty_like(obj, memory_format=torch.contiguous_format)
    if shape is None:
        shape = tuple(obj.__cuda_array_interface__["shape"])
    try:
        import cupy
    except ImportError:
        cupy = None
    if _emulate and (cupy is None or not isinstance(obj, cupy.ndarray)):
        from lpmpi._devarray import HostDeviceArray
        return HostDeviceArray.empty(shape, getattr(obj, "dtype", None) or DTYPE_NAMES[dtype])
    if cupy is None:
        raise TypeError("recvbuf=None with a device sendbuf needs CuPy to allocate the result "
                        "(install cupy, or pass recvbuf)")
    if dtype == BF16:
        raise TypeError("recvbuf=None: CuPy has no bfloat16; pass recvbuf")
    if isinstance(obj, cupy.ndarray):
        with obj.device:
            return cupy.empty(shape, obj.dtype)
    return cupy.empty(shape, DTYPE_NAMES[dtype])

cdef inline void _release(Buf *b):
    if b.has_view:
        PyBuffer_Release(&b.view)
        b.has_view = False
    if b.dl != NULL:
        _dl_delete(b.dl, b.dl_versioned)
        b.dl = NULL

cdef inline void _alias(Buf *dst, Buf *src):
    """dst = src without its ownership (in place: one buffer, released once, by src)."""
    dst[0] = src[0]
    dst.has_view = False
    dst.dl = NULL

cdef object _alloc_like(obj, int dtype, int mem=0):
    """recvbuf=None: a numpy array with the input's shape and dtype (device input: a device
    array, see _alloc_device)."""
    if mem:
        return _alloc_device(obj, dtype)
    if cnp.PyArray_Check(obj):
        return np.empty(obj.shape, obj.dtype)
    if _is_torch(obj):                         # the input's own kind: a tensor like it
        import torch
        return torch.empty_like(obj, memory_format=torch.contiguous_format)
    if hasattr(type(obj), "__dlpack__"):
        shape = getattr(obj, "shape", None)
        if shape is None:
            raise TypeError(f"recvbuf=None: the result takes sendbuf's shape, and "
                            f"{type(obj).__qualname__} has no .shape: pass recvbuf")
        return np.empty(tuple(shape), _np_dtype(dtype))
    return np.empty(memoryview(obj).shape, DTYPE_NAMES[dtype])

cdef bint _is_torch(obj):
    return type(obj).__module__.startswith("torch")

cdef bint _is_jax(obj):
    return type(obj).__module__.split(".", 1)[0] in ("jax", "jaxlib")

cdef object _np_dtype(int dtype):
    if dtype == BF16:
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError("recvbuf=None with a bfloat16 input that is not a torch tensor needs "
                            "ml_dtypes for numpy's bfloat16 (pip install ml_dtypes), or pass "
                            "recvbuf") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(DTYPE_NAMES[dtype])

cdef int _check_pair(Buf *s, Buf *r, str sname, str rname) except -1:
    """Two distinct buffers of one call: same dtype, count and memory kind, and either the
    same memory (in place) or no byte in common."""
    if s.dtype != r.dtype:
        raise TypeError(f"{sname} and {rname} have different dtypes "
                        f"({DTYPE_NAMES[s.dtype]} and {DTYPE_NAMES[r.dtype]})")
    if s.count != r.count:
        raise ValueError(f"{sname} and {rname} have different element counts ({s.count} and {r.count})")
    if s.mem != r.mem:
        raise TypeError(f"{sname} and {rname} must both be host or both be device arrays")
    cdef size_t n = s.count * lp_dtype_size(s.dtype)
    if n and s.ptr != r.ptr and s.ptr < r.ptr + n and r.ptr < s.ptr + n:
        raise ValueError(f"{sname} and {rname} overlap in memory (by "
                         f"{n - <size_t>abs(<Py_ssize_t>(s.ptr - r.ptr))} of {n} bytes); pass the "
                         f"same array for in place, or arrays that do not overlap")
    return 0

cdef tuple _shape_of(obj):
    """The input's shape (numpy, torch, JAX/DLPack objects with .shape, the buffer protocol)."""
    shape = getattr(obj, "shape", None)
    if shape is None:
        if hasattr(type(obj), "__dlpack__"):
            raise TypeError(f"recvbuf=None: the result's shape comes from sendbuf's, and "
                            f"{type(obj).__qualname__} has no .shape: pass recvbuf")
        shape = memoryview(obj).shape
    return tuple(int(d) for d in shape)

cdef object _alloc_shaped(obj, int dtype, tuple shape, int mem):
    """recvbuf=None of a collective whose result's shape differs from the input's: an array of
    the input's kind (numpy for numpy, buffer-protocol and DLPack input; torch for torch; device
    memory for a device input, see _alloc_device)."""
    if mem:
        return _alloc_device(obj, dtype, shape)
    if cnp.PyArray_Check(obj):
        return np.empty(shape, obj.dtype)
    if _is_torch(obj):
        import torch
        return torch.empty(shape, dtype=obj.dtype, device=obj.device)
    return np.empty(shape, _np_dtype(dtype))

cdef object _alloc_blocks(obj, int dtype, int P, int mem):
    """allgather's recvbuf=None: P blocks of the input's shape, shape (P,) + sendbuf.shape."""
    return _alloc_shaped(obj, dtype, (P,) + _shape_of(obj), mem)

cdef object _alloc_block(obj, int dtype, size_t count, int P, int mem):
    """reduce_scatter's recvbuf=None: one block: sendbuf.shape[1:] when sendbuf's first axis
    is the P blocks (and it has more than one), else 1-D of count elements."""
    shape = _shape_of(obj)
    if len(shape) > 1 and shape[0] == P:
        return _alloc_shaped(obj, dtype, shape[1:], mem)
    return _alloc_shaped(obj, dtype, (count,), mem)

cdef int _check_blocks(Buf *one, Buf *many, str oname, str mname, int P) except -1:
    """A one-block buffer and a P-block buffer of one call: same dtype and memory kind, P times
    the elements, no byte in common."""
    if one.dtype != many.dtype:
        raise TypeError(f"{oname} and {mname} have different dtypes "
                        f"({DTYPE_NAMES[one.dtype]} and {DTYPE_NAMES[many.dtype]})")
    if many.count != <size_t>P * one.count:
        raise ValueError(f"{mname} must hold {P} blocks of {oname}'s {one.count} elements "
                         f"({<size_t>P * one.count}), not {many.count}")
    if one.mem != many.mem:
        raise TypeError(f"{oname} and {mname} must both be host or both be device arrays")
    cdef size_t es = lp_dtype_size(one.dtype), n1 = one.count * es, n2 = many.count * es
    if n1 and one.ptr < many.ptr + n2 and many.ptr < one.ptr + n1:
        raise ValueError(f"{oname} and {mname} overlap in memory; for in place pass "
                         f"sendbuf=lpmpi.IN_PLACE")
    return 0

cdef int _check_op(int op, int dtype) except -1:
    if not lp_op_valid(dtype, op):
        raise TypeError(f"op {OP_NAMES[op]!r} is not defined on dtype {DTYPE_NAMES[dtype]}")
    return 0

cdef int _check_root(root, int size) except -1:
    root = _as_int(root, "root", "an int")
    if not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for a communicator of size {size}")
    return root

cdef object _input(sendbuf, recvbuf):
    """The buffer holding the input: recvbuf when sendbuf is IN_PLACE."""
    if sendbuf is _IN_PLACE:
        if recvbuf is None:
            raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
        return recvbuf
    return sendbuf

cdef void _warn_tables() noexcept:
    import warnings
    try:
        warnings.warn("lpmpi: the ranks of a communicator loaded different tuning tables "
                      "(LPMPI_TUNING_FILE or the installed tables differ); on it, 'auto' follows "
                      "rank 0's table and model (lpmpi.explain shows it)", RuntimeWarning,
                      stacklevel=2)
    except Exception:   # warnings turned into errors must not stop the collective midway
        pass

cdef bint _acc(acc_dtype, Buf *s, int op) except -1:
    """acc_dtype: None, or float32 with float16/bfloat16 data and SUM or AVG on host memory."""
    if acc_dtype is None:
        return False
    if isinstance(acc_dtype, str):
        spelled = acc_dtype
    else:
        try:
            spelled = np.dtype(acc_dtype).name
        except TypeError:
            spelled = str(acc_dtype)                    # torch.float32
    if spelled.rpartition(".")[2] != "float32":     # "float32", numpy's, torch.float32
        raise TypeError(f"acc_dtype must be None or 'float32', got {acc_dtype!r}")
    if s.dtype != LP_FLOAT16 and s.dtype != BF16:
        raise TypeError(f"acc_dtype='float32' accumulates float16 or bfloat16 data, not "
                        f"{DTYPE_NAMES[s.dtype]}")
    if op != LP_SUM and op != LP_AVG:
        raise TypeError(f"acc_dtype='float32' applies to op sum and avg, not {OP_NAMES[op]!r}")
    if s.mem:
        raise TypeError("acc_dtype='float32' takes host memory (device arrays: not yet)")
    return True

cdef object _acc_tls = None

cdef object _acc_scratch(size_t n):
    """The calling thread's float32 scratch for blocking acc_dtype calls (grow-only)."""
    global _acc_tls
    if _acc_tls is None:
        import threading
        _acc_tls = threading.local()
    buf = getattr(_acc_tls, "buf", None)
    if buf is None or buf.size < n:
        buf = _acc_tls.buf = np.empty(max(<size_t>n, 1), np.float32)
    return buf[:n]

# the largest message whose nonblocking or persistent start keeps the GIL (releasing and taking
# it back costs about as much as the start itself; above this a start may reduce or copy)
cdef size_t _START_WITH_GIL = 256 << 10

# ---------------------------------------------------------------- the message of a call
@cython.no_gc          # holds buffers and their objects, never itself: no cycle through it
@cython.freelist(8)
cdef class Message:
    """The buffers and arguments of one collective call, normalised and validated (after
    mpi4py's ``_p_msg_cco``).

    ``Message.for_allreduce`` / ``for_reduce`` / ``for_bcast`` raise on any bad argument, on
    the calling rank, before any communication (with LPMPI_CHECK=1 they first tell the other
    ranks, which then raise MismatchError).  A message owns its buffer views and keeps the
    objects behind them alive until it dies, so a request may hold it while the engine works.
    """
    cdef Buf s, r
    cdef MPI_Comm comm
    cdef int coll, op, root, alg, size
    cdef size_t chunk
    cdef size_t count             # the engine's count: elements of one block (lpmpi.h)
    cdef char *rptr               # the result's buffer (NULL on the non-roots of reduce)
    cdef char *sptr               # what the engine reads (s.ptr; acc: the float32 copy)
    cdef int edtype               # the engine's element type (s.dtype; acc: float32)
    cdef object keep_s, keep_r    # the Python objects behind s and r
    cdef readonly object result   # what the call returns
    # acc_dtype="float32" with float16/bfloat16: the engine runs, in place, on a float32 copy
    # of the input (widened at each start) and rounds the result once into r (lp_request's acc:
    # lp, ring and be before their broadcast/allgather part, which then moves 16-bit data)
    cdef bint acc
    cdef object acc_buf           # the float32 copy (numpy)
    cdef char *acc_in             # the 16-bit input
    cdef char *acc_out            # the 16-bit result (NULL: this rank gets none)
    cdef bint to_jax              # recvbuf=None for a JAX input: the result becomes a JAX array

    def __dealloc__(self):
        _release(&self.s)
        _release(&self.r)

    @staticmethod
    cdef Message for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_ALLREDUCE
            m.op = _op(op)
            m.alg = _alg_index(LP_ALLREDUCE, algorithm)
            m.chunk = _chunk(chunk_bytes)
            send = _input(sendbuf, recvbuf)
            inplace = send is recvbuf
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if recvbuf is None:
                recvbuf = _alloc_like(send, m.s.dtype, m.s.mem)
                m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
            if inplace:
                _alias(&m.r, &m.s)
            else:
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_pair(&m.s, &m.r, "sendbuf", "recvbuf")
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        if m.acc:
            m.acc_in, m.acc_out = m.s.ptr, m.r.ptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    @staticmethod
    cdef Message for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                            acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        cdef int rank = 0
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_REDUCE
            m.op = _op(op)
            m.root = _check_root(root, m.size)
            m.alg = _alg_index(LP_REDUCE, algorithm)
            m.chunk = _chunk(chunk_bytes)
            MPI_Comm_rank(m.comm, &rank)
            is_root = rank == m.root
            send = _input(sendbuf, recvbuf)
            inplace = send is recvbuf
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if inplace:
                _alias(&m.r, &m.s)
            elif recvbuf is not None:      # checked on every rank, written on the root only
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_pair(&m.s, &m.r, "sendbuf", "recvbuf")
            elif is_root:
                recvbuf = _alloc_like(send, m.s.dtype, m.s.mem)
                m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
            if (inplace or recvbuf is not None) and m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r if is_root else NULL)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr if is_root else NULL
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        if m.acc:
            m.acc_in, m.acc_out = m.s.ptr, m.rptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf if is_root else None
        return m

    @staticmethod
    cdef Message for_bcast(buf, root, comm, algorithm, chunk_bytes):
        cdef Message m = Message.__new__(Message)
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_BCAST
            m.op = LP_SUM
            m.root = _check_root(root, m.size)
            m.alg = _alg_index(LP_BCAST, algorithm)
            m.chunk = _chunk(chunk_bytes)
            _get_buf(buf, "buf", &m.s)
            if m.s.readonly:
                raise ValueError("buf is read-only (it is written on every rank but the root)")
            if m.s.mem:
                _sync_streams(&m.s, NULL)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.s.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        m.count = m.s.count
        m.keep_s = buf
        m.result = buf
        return m

    @staticmethod
    cdef Message for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_ALLGATHER
            m.op = LP_SUM
            m.alg = _alg_index(LP_ALLGATHER, algorithm)
            m.chunk = _chunk(chunk_bytes)
            inplace = sendbuf is _IN_PLACE or (recvbuf is not None and sendbuf is recvbuf)
            if inplace:
                if recvbuf is None:
                    raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
                _get_buf(recvbuf, "recvbuf", &m.r)
                if m.r.count % <size_t>m.size:
                    raise ValueError(f"recvbuf: in place, it holds the {m.size} blocks of the "
                                     f"communicator's ranks, so its {m.r.count} elements must "
                                     f"divide by {m.size}")
                m.count = m.r.count // <size_t>m.size
                _alias(&m.s, &m.r)
            else:
                send = sendbuf
                _get_buf(send, "sendbuf", &m.s)
                m.count = m.s.count
                if recvbuf is None:
                    recvbuf = _alloc_blocks(send, m.s.dtype, m.size, m.s.mem)
                    m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_blocks(&m.s, &m.r, "sendbuf", "recvbuf", m.size)
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            if m.r.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.r.ptr if inplace else m.s.ptr
        m.edtype = m.r.dtype
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    @staticmethod
    cdef Message for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes, acc_dtype=None):
        cdef Message m = Message.__new__(Message)
        cdef object send = None
        _comm(comm, &m.comm, &m.size)
        try:
            m.coll = LP_REDUCE_SCATTER
            m.op = _op(op)
            m.alg = _alg_index(LP_REDUCE_SCATTER, algorithm)
            m.chunk = _chunk(chunk_bytes)
            inplace = sendbuf is _IN_PLACE or (recvbuf is not None and sendbuf is recvbuf)
            send = _input(sendbuf, recvbuf)
            _get_buf(send, "recvbuf" if sendbuf is _IN_PLACE else "sendbuf", &m.s)
            _check_op(m.op, m.s.dtype)
            if m.s.count % <size_t>m.size:
                raise ValueError(f"{'recvbuf' if sendbuf is _IN_PLACE else 'sendbuf'} holds one block "
                                 f"per rank, so its {m.s.count} elements must divide by {m.size}")
            m.count = m.s.count // <size_t>m.size
            if inplace:
                _alias(&m.r, &m.s)
            else:
                if recvbuf is None:
                    recvbuf = _alloc_block(send, m.s.dtype, m.s.count // <size_t>m.size, m.size, m.s.mem)
                    m.to_jax = not cnp.PyArray_Check(send) and _is_jax(send)
                _get_buf(recvbuf, "recvbuf", &m.r)
                _check_blocks(&m.r, &m.s, "recvbuf", "sendbuf", m.size)
            if m.r.readonly:
                raise ValueError("recvbuf is read-only")
            m.acc = _acc(acc_dtype, &m.s, m.op)
            if m.s.mem:
                _sync_streams(&m.s, &m.r)
        except BaseException:
            _local_error(m.comm)
            raise
        m.rptr = m.r.ptr
        m.sptr = m.s.ptr
        m.edtype = m.s.dtype
        if m.acc:                   # the float32 copy of the P blocks; the 16-bit result: my block
            m.acc_in, m.acc_out = m.s.ptr, m.r.ptr
        m.keep_s = send
        m.keep_r = recvbuf
        m.result = recvbuf
        return m

    cdef int prepare(self) except -1:
        """The communicator's context, once (collective: its private duplicate and the table
        agreement); warns when the ranks' tables differ."""
        cdef int rc = LP_OK, first = 0
        cdef MPI_Comm h = self.comm
        if lp_comm_ready(h):
            return 0
        with nogil:
            rc = lp_comm_prepare(h, &first)
        if rc != LP_OK:
            _raise_status(rc)
        if first:
            _warn_tables()
        return 0

    cdef lp_req_t *request(self, int kind) except? NULL:
        """The engine's request for this call: LP_REQ_BLOCKING runs it to completion (returns
        NULL, GIL released), LP_REQ_NONBLOCKING starts it, LP_REQ_PERSISTENT makes it inactive.
        A start keeps the GIL unless it may block or work long: a communicator's first call
        (collective), LPMPI_CHECK (an agreement), large messages (local work on the spot).
        A failure raises."""
        cdef int rc = LP_OK
        cdef lp_req_t *req = NULL
        cdef lp_req_t **out = NULL if kind == LP_REQ_BLOCKING else &req
        cdef size_t nbytes = self.s.count * lp_dtype_size(self.s.dtype)
        self.prepare()
        if self.acc:
            self.acc_setup(kind)
            nbytes *= 2
            if kind != LP_REQ_PERSISTENT:
                self.acc_widen()
        if _debug:
            _debug_log(self)
        if kind == LP_REQ_BLOCKING or _check_enabled or nbytes > _START_WITH_GIL:
            with nogil:
                rc = lp_request(out, kind, self.coll, self.comm, self.sptr, self.rptr, self.count,
                                self.edtype, self.op, self.root, self.alg, self.chunk, self.s.mem,
                                self.acc_out if self.acc else NULL, self.s.dtype)
        else:
            rc = lp_request(out, kind, self.coll, self.comm, self.sptr, self.rptr, self.count,
                            self.edtype, self.op, self.root, self.alg, self.chunk, self.s.mem,
                            self.acc_out if self.acc else NULL, self.s.dtype)
        if rc != LP_OK:
            _raise_status(rc)
        return req

    cdef int run(self) except -1:
        """The blocking collective (GIL released)."""
        if _norphans:
            _reap_orphans()
        self.request(LP_REQ_BLOCKING)
        self.finish()
        return 0

    cdef int finish(self) except -1:
        """At completion: a JAX result for a JAX input."""
        if self.to_jax:
            import jax.numpy as jnp
            self.result = jnp.asarray(self.keep_r)    # a copy: JAX arrays are immutable
        return 0

    cdef int acc_setup(self, int kind) except -1:
        """acc: the float32 copy the engine runs on, in place (a blocking call borrows the
        thread's; a request owns one for its life)."""
        cdef char *p
        if self.acc_buf is not None:
            return 0
        self.acc_buf = (_acc_scratch(self.s.count) if kind == LP_REQ_BLOCKING
                        else np.empty(self.s.count, np.float32))
        p = <char *>cnp.PyArray_DATA(<cnp.ndarray>self.acc_buf)
        self.sptr = p
        if self.rptr != NULL:
            self.rptr = p
        self.edtype = LP_FLOAT32
        return 0

    cdef int acc_widen(self) except -1:
        """acc: the input into the float32 copy (each start)."""
        cdef int dt = self.s.dtype
        cdef size_t n = self.s.count
        with nogil:
            lp_widen(<float *>self.sptr, self.acc_in, n, dt)
        return 0

cdef str _source_name(int src):
    return ("override", "table", "model", "requested")[src]

cdef void _debug_log(Message m) except *:
    """LPMPI_DEBUG=1: on rank 0, the decision (the engine's own, lp_choose) once per
    collective, size bucket, communicator size and memory kind."""
    cdef int rank = 0
    cdef lp_choice_t ch
    cdef int mem = 1 if (m.s.mem or _emulate) else 0
    cdef size_t nbytes = m.s.count * lp_dtype_size(m.s.dtype)
    MPI_Comm_rank(m.comm, &rank)
    bucket = nbytes.bit_length()
    key = (m.coll, bucket, m.size, mem)
    if rank != 0 or key in _debug_seen:
        return
    _debug_seen.add(key)
    if lp_choose(m.comm, m.coll, nbytes * (2 if m.acc else 1), mem, m.acc, m.alg, m.chunk, &ch) != LP_OK:
        return
    chs = f" chunk {ch.chunk}" if lp_algo_chunked(ch.alg) else ""
    where = " (device memory)" if mem else ""
    tables = " (ranks' tables differ: rank 0's)" if ch.tables < 0 else ""
    import sys
    print(f"lpmpi: {COLLECTIVES[m.coll]} {nbytes} B{where} (bucket < 2^{bucket}) P={m.size}: "
          f"{lp_algo_name(ch.alg).decode()}{chs} [{_source_name(ch.source)}]{tables}",
          file=sys.stderr, flush=True)

# ---------------------------------------------------------------- collectives
def allreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
              acc_dtype=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` and leave the result on every rank.

    Returns ``recvbuf`` (a new array like ``sendbuf`` when None).  In place: ``sendbuf`` is
    ``lpmpi.IN_PLACE`` (then ``recvbuf`` holds the input) or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allreduce(np.ones(4, np.float32))   # doctest: +SKIP
    """
    cdef Message m = Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                           acc_dtype)
    m.run()
    return m.result


def reduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
           chunk_bytes=None, acc_dtype=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` into ``recvbuf`` on ``root``.

    Returns ``recvbuf`` on the root (a new array like ``sendbuf`` when None) and None
    elsewhere; a ``recvbuf`` passed on another rank is checked but never written.  In place on
    the root: ``sendbuf`` is ``lpmpi.IN_PLACE`` or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce(np.ones(4), root=0)   # doctest: +SKIP
    """
    cdef Message m = Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                        acc_dtype)
    m.run()
    return m.result


def bcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place; returns ``buf``.

    >>> import numpy as np, lpmpi
    >>> x = lpmpi.bcast(np.arange(4.0), root=0)   # doctest: +SKIP
    """
    cdef Message m = Message.for_bcast(buf, root, comm, algorithm, chunk_bytes)
    m.run()
    return m.result


def allgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Gather every rank's ``sendbuf`` into ``recvbuf`` on every rank: block r (C order) is
    rank r's (MPI_Allgather).

    Returns ``recvbuf`` (new, shape ``(P,) + sendbuf.shape``, when None).  In place:
    ``sendbuf`` is ``lpmpi.IN_PLACE`` and each rank's block is already at its place in
    ``recvbuf``.  Host memory.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allgather(np.full(4, 1.0))   # doctest: +SKIP
    """
    cdef Message m = Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes)
    m.run()
    return m.result


def reduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None):
    """Reduce block r of every rank's ``sendbuf`` (P blocks) into ``recvbuf`` on rank r
    (MPI_Reduce_scatter_block).

    Returns ``recvbuf`` (new when None: ``sendbuf.shape[1:]`` when its first axis is the P
    blocks, else 1-D).  In place: ``sendbuf`` is ``lpmpi.IN_PLACE``, ``recvbuf`` holds the P
    blocks and the result lands in its first block.  Host memory.  ``acc_dtype="float32"``
    (float16/bfloat16 data, sum or avg): accumulated in float32, the result rounded once.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce_scatter(np.ones((2, 4)))   # doctest: +SKIP
    """
    cdef Message m = Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                acc_dtype)
    m.run()
    return m.result

# ---------------------------------------------------------------- requests
cdef int _norphans = 0          # requests dropped while in flight (see Request.__dealloc__)
cdef list _orphans = []         # their (request, message): kept alive until they complete

@cython.no_gc
@cython.freelist(8)
cdef class _Orphan:
    cdef lp_req_t *req
    cdef Message msg

cdef void _reap_orphans() noexcept:
    """Free the dropped requests that have completed (their buffers go with them)."""
    global _norphans
    cdef _Orphan o
    cdef int done = 0
    keep = []
    for o in _orphans:
        done = 0
        lp_test(o.req, &done)
        if done:
            lp_req_free(o.req)
            o.req = NULL
        else:
            keep.append(o)
    _orphans[:] = keep
    _norphans = len(keep)

cdef dict _KIND_NAMES = {LP_REQ_NONBLOCKING: "nonblocking", LP_REQ_PERSISTENT: "persistent"}

@cython.no_gc
@cython.freelist(8)
cdef class Request:
    """A nonblocking or persistent lpmpi collective (``lpmpi.iallreduce`` ...,
    ``lpmpi.allreduce_init`` ...).

    ``test()`` advances lpmpi's outstanding work and says whether this request has completed;
    ``wait()`` blocks (GIL released) until it has and returns what the blocking call returns
    (again on every later call); ``done`` says whether it is complete without making progress.
    A persistent request is inactive until ``start()``, and may be started again once waited;
    ``free()`` (or a ``with`` block, or garbage collection) releases it.  The buffers belong to
    lpmpi until the request completes.  A request dropped while in flight is completed by
    later lpmpi calls or at exit (``MPI_Finalize``), with a ``ResourceWarning``.

    >>> req = lpmpi.iallreduce(np.ones(4))   # doctest: +SKIP
    >>> y = req.wait()                       # doctest: +SKIP
    """
    cdef lp_req_t *req
    cdef Message msg
    cdef int kind
    cdef bint due                 # the result awaits Message.finish (once per completion)

    def __cinit__(self):
        self.req = NULL

    cdef int _complete(self) except -1:
        if self.due:
            self.due = False
            self.msg.finish()
        return 0

    @staticmethod
    cdef Request make(Message m, int kind):
        cdef Request r = Request.__new__(Request)
        if _norphans:
            _reap_orphans()
        r.req = m.request(kind)
        r.msg = m
        r.kind = kind
        r.due = m.to_jax and kind == LP_REQ_NONBLOCKING
        return r

    cdef int _check(self) except -1:
        if self.req == NULL:
            raise ValueError("this request was freed")
        return 0

    def test(self):
        """Advance every outstanding lpmpi request; True once this one has completed (raises
        LPError if it failed).  An inactive persistent request counts as complete."""
        cdef int done = 0, rc
        self._check()
        rc = lp_test(self.req, &done)
        if _norphans:
            _reap_orphans()
        if rc != LP_OK:
            _raise_status(rc)
        if done:
            self._complete()
        return bool(done)

    def wait(self):
        """Block until this request completes (advancing every outstanding one; the GIL is
        released) and return the blocking call's result: recvbuf, None on the non-roots of
        reduce, buf for bcast.  Raises LPError if it failed."""
        cdef int rc
        self._check()
        if lp_req_active(self.req):
            with nogil:
                rc = lp_wait(self.req)
        else:
            rc = lp_wait(self.req)       # complete: its outcome, at once
        if _norphans:
            _reap_orphans()
        if rc != LP_OK:
            _raise_status(rc)
        self._complete()
        return self.msg.result

    @property
    def done(self):
        """True when the request is not in flight (complete, or a persistent one not started);
        makes no progress."""
        return self.req == NULL or not lp_req_active(self.req)

    @property
    def persistent(self):
        return self.kind == LP_REQ_PERSISTENT

    def start(self):
        """Start a persistent request (again); it must not be in flight."""
        cdef int rc
        self._check()
        if self.kind != LP_REQ_PERSISTENT:
            raise ValueError("start() is for persistent requests (lpmpi.allreduce_init, ...); a "
                             "nonblocking request started when it was made")
        if lp_req_active(self.req):
            raise ValueError("this persistent request is still in flight: wait() for it before "
                             "starting it again")
        if _norphans:
            _reap_orphans()
        if self.msg.acc:
            self.msg.acc_widen()
        self.due = self.msg.to_jax
        if _check_enabled or self.msg.s.count * lp_dtype_size(self.msg.s.dtype) > _START_WITH_GIL:
            with nogil:   # LPMPI_CHECK: an agreement (collective) first
                rc = lp_start(self.req)
        else:
            rc = lp_start(self.req)
        if rc != LP_OK:
            _raise_status(rc)
        return self

    def free(self):
        """Release the request (waiting for it first if it is in flight)."""
        cdef int rc = LP_OK
        if self.req == NULL:
            return
        if lp_req_active(self.req):
            with nogil:
                rc = lp_wait(self.req)
        lp_req_free(self.req)
        self.req = NULL
        self.msg = None
        if rc != LP_OK:
            _raise_status(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __repr__(self):
        if self.req == NULL:
            return "<lpmpi.Request (freed)>"
        m = self.msg
        state = "active" if lp_req_active(self.req) else ("inactive" if self.kind == LP_REQ_PERSISTENT
                                                           and not lp_req_active(self.req) else "done")
        return (f"<lpmpi.Request {_KIND_NAMES[self.kind]} {COLLECTIVES[m.coll]} "
                f"{m.s.count * lp_dtype_size(m.s.dtype)} B {DTYPE_NAMES[m.s.dtype]} {state}>")

    def __dealloc__(self):
        global _norphans
        cdef _Orphan o
        if self.req == NULL:
            return
        if not lp_req_active(self.req):
            lp_req_free(self.req)
            self.req = NULL
            return
        # in flight: its buffers must live until it completes, which later calls (or the exit
        # of the interpreter, before MPI_Finalize) take care of
        o = _Orphan.__new__(_Orphan)
        o.req = self.req
        o.msg = self.msg
        self.req = NULL
        _orphans.append(o)
        _norphans += 1
        try:
            import warnings
            warnings.warn("lpmpi.Request dropped while in flight (never waited); it completes at "
                          "a later lpmpi call or at MPI_Finalize", ResourceWarning, stacklevel=2)
        except Exception:   # warnings turned into errors cannot propagate from here
            pass


def _at_exit():
    """Before MPI_Finalize (mpi4py finalizes after Python's atexit handlers): stop the
    progress thread and complete the requests dropped while in flight."""
    global _norphans
    cdef _Orphan o
    cdef int rc
    lp_progress_thread(0)
    if not _orphans:
        return
    try:
        import warnings
        warnings.warn(f"lpmpi: completing {len(_orphans)} request(s) dropped while in flight "
                      "before MPI_Finalize", ResourceWarning, stacklevel=1)
    except Exception:
        pass
    # ResourceWarning is hidden by default: a line on stderr says it always (a request never
    # waited for is a bug of the program, not a detail)
    sys.stderr.write(f"lpmpi: {len(_orphans)} request(s) were dropped while in flight (never "
                     "waited for); completing them before MPI_Finalize\n")
    for o in _orphans:
        with nogil:
            lp_wait(o.req)
        lp_req_free(o.req)
        o.req = NULL
    _orphans.clear()
    _norphans = 0

import atexit as _atexit
_atexit.register(_at_exit)


def iallreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None,
               acc_dtype=None):
    """Nonblocking :func:`allreduce`: starts it and returns a :class:`Request` whose ``wait()``
    returns recvbuf.  Arguments and errors as the blocking call (raised here, before any
    communication).

    >>> req = lpmpi.iallreduce(grad, op="avg")   # doctest: +SKIP
    >>> ...                                      # compute meanwhile
    >>> grad_avg = req.wait()                    # doctest: +SKIP
    """
    return Request.make(Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                              acc_dtype), LP_REQ_NONBLOCKING)


def ireduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
            chunk_bytes=None, acc_dtype=None):
    """Nonblocking :func:`reduce`; ``wait()`` returns recvbuf on the root, None elsewhere."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_NONBLOCKING)


def ibcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Nonblocking :func:`bcast`; ``wait()`` returns buf."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_NONBLOCKING)


def allreduce_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                   chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`allreduce`: arguments checked, algorithm chosen and scratch reserved
    once; ``start()`` then ``wait()``, as often as needed, with the buffers' current contents.

    >>> p = lpmpi.allreduce_init(grad, lpmpi.IN_PLACE)   # doctest: +SKIP
    >>> for step in range(n): p.start(); ...; p.wait()  # doctest: +SKIP
    """
    return Request.make(Message.for_allreduce(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                              acc_dtype), LP_REQ_PERSISTENT)


def reduce_init(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
                chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`reduce` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_reduce(sendbuf, recvbuf, op, root, comm, algorithm, chunk_bytes,
                                           acc_dtype), LP_REQ_PERSISTENT)


def bcast_init(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Persistent :func:`bcast` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_bcast(buf, root, comm, algorithm, chunk_bytes), LP_REQ_PERSISTENT)


def iallgather(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Nonblocking :func:`allgather`; ``wait()`` returns recvbuf."""
    return Request.make(Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes),
                        LP_REQ_NONBLOCKING)


def ireduce_scatter(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                    chunk_bytes=None, acc_dtype=None):
    """Nonblocking :func:`reduce_scatter`; ``wait()`` returns recvbuf."""
    return Request.make(Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                   acc_dtype), LP_REQ_NONBLOCKING)


def allgather_init(sendbuf, recvbuf=None, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Persistent :func:`allgather` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_allgather(sendbuf, recvbuf, comm, algorithm, chunk_bytes),
                        LP_REQ_PERSISTENT)


def reduce_scatter_init(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto",
                        chunk_bytes=None, acc_dtype=None):
    """Persistent :func:`reduce_scatter` (see :func:`allreduce_init`)."""
    return Request.make(Message.for_reduce_scatter(sendbuf, recvbuf, op, comm, algorithm, chunk_bytes,
                                                   acc_dtype), LP_REQ_PERSISTENT)


def waitall(requests):
    """Wait for every request (advancing all of them at once) and return their results, in
    order; raises the first failure (in list order) once all have completed."""
    reqs = list(requests)
    cdef Request r
    for x in reqs:
        if not isinstance(x, Request):
            raise TypeError(f"requests must be lpmpi.Request objects, got {type(x).__name__}")
        (<Request>x)._check()
    cdef int n = len(reqs), rc = LP_OK, i
    if n == 0:
        return []
    cdef lp_req_t **arr = <lp_req_t **>PyMem_Malloc(n * sizeof(lp_req_t *))
    if arr == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            arr[i] = (<Request>reqs[i]).req
        with nogil:
            rc = lp_waitall(n, arr)
    finally:
        PyMem_Free(arr)
    if _norphans:
        _reap_orphans()
    if rc != LP_OK:
        _raise_status(rc)
    for x in reqs:
        (<Request>x)._complete()
    return [(<Request>x).msg.result for x in reqs]


def progress_thread(bint on):
    """Start (True) or stop (False) lpmpi's background progress thread, which advances every
    outstanding request while the program computes (also ``LPMPI_PROGRESS_THREAD=1``).  Needs
    MPI_THREAD_MULTIPLE (mpi4py's default): raises LPError saying why otherwise.  Returns
    whether it runs."""
    cdef int rc
    with nogil:
        rc = lp_progress_thread(on)
    if rc != LP_OK:
        _raise_status(rc)
    return bool(lp_progress_thread_running())


def progress():
    """Advance every outstanding request once, without waiting; returns how many are still
    in flight."""
    lp_progress()
    if _norphans:
        _reap_orphans()
    return lp_outstanding()


def _outstanding():
    """Requests started and not complete (tests)."""
    return lp_outstanding()


def _native_forms():
    """(nonblocking, persistent) forms of native in this MPI library (MPI_Iallreduce ...,
    MPI 4's MPI_Allreduce_init ...)."""
    cdef int f = lp_native_forms()
    return bool(f & 1), bool(f & 2)


def request_forms(algorithm):
    """How the nonblocking and persistent forms of ``algorithm`` run (one sentence; explain()
    and lpmpi-info print it)."""
    nb, pers = _native_forms()
    thread = ("the progress thread runs" if lp_progress_thread_running() else
              "no progress thread (lpmpi.progress_thread(True) or LPMPI_PROGRESS_THREAD=1 adds one)")
    if algorithm == "native":
        names = [lp_coll_mpi_name(<lp_coll_t>i).decode() for i in range(LP_NCOLLS)]
        p = (f"MPI 4's {' / '.join(m + '_init' for m in names)}, started each time"
             if pers else "the nonblocking ones at each start (this MPI library has no MPI 4 "
             "persistent collectives)")
        n = (" / ".join("MPI_I" + m[4:].lower() for m in names) if nb
             else "the blocking call, at wait time")
        return (f"native: nonblocking form {n}; persistent form {p}; progressed by the MPI library and "
                f"by every lpmpi test/wait; {thread}")
    return (f"{algorithm or 'lp, ring, mst, be'}: nonblocking and persistent forms run lpmpi's own "
            f"schedule on the same engine as the blocking calls, "
            f"advanced by any lpmpi call (test, wait, a collective) and by the progress thread; {thread}")


def _test_fault(long after):
    """Tests: the ``after``-th next point-to-point call of the engine fails (0: never)."""
    lp_test_fault(after)


def _test_shm_named(bint on):
    """Tests: shared-memory segments made as named POSIX segments in /dev/shm (the path taken
    where /proc/<pid>/fd is refused) instead of memory files."""
    lp_test_shm_named(on)


# ---------------------------------------------------------------- the decision, model, tables
def choice(collective, nbytes, comm=None, memory="host", algorithm="auto", chunk_bytes=None,
           bint acc=False):
    """The engine's decision for a call (lp_choose: the function the collectives use, on the
    communicator's context when it has one; local, no communication).  acc: a call with
    acc_dtype="float32" on nbytes of 16-bit data (decided for its float32 copy).

    Returns ``(algorithm, chunk_bytes or None, staging buffers or None, source, tables)``:
    source 'override', 'table', 'model' or 'requested'; tables 'same' (every rank of comm
    holds this table), 'rank 0' (they differ: rank 0's table and model are used) or
    'unchecked' (no collective ran on comm yet)."""
    cdef int size = 0, rc
    cdef lp_choice_t ch
    cdef int c = _coll_index(collective)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
    if memory not in MEMORY_KINDS:
        raise ValueError(f"memory must be one of {MEMORY_KINDS}, got {memory!r}")
    cdef int alg = _alg_index(c, algorithm)
    cdef size_t chunk = _chunk(chunk_bytes)
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    rc = lp_choose(h, c, nbytes * (2 if acc else 1), MEMORY_KINDS.index(memory), acc, alg, chunk, &ch)
    if rc != LP_OK:
        _raise_status(rc)
    tables = "same" if ch.tables > 0 else "rank 0" if ch.tables < 0 else "unchecked"
    return (lp_algo_name(ch.alg).decode(), ch.chunk if lp_algo_chunked(ch.alg) else None,
            ch.staging or None, _source_name(ch.source), tables)

#: the node-local transports a decision may ask for (LP_TP_MPI.. in order; None: the model's rule)
TRANSPORTS = ("mpi", "shm", "cma")

def _tp_name(int tp):
    return None if tp <= 0 or tp > len(TRANSPORTS) else TRANSPORTS[tp - 1]

def _tp_index(name):
    if name is None:
        return 0
    if name not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS} or None, got {name!r}")
    return TRANSPORTS.index(name) + 1

def transport_choice(collective, nbytes, comm=None, memory="host", algorithm="auto", bint acc=False):
    """``(transport or None, source)``: the node-local transport the decision asks the ring
    allreduce for ("mpi", "shm", "cma"; None: the model's rule by size, see
    :func:`ring_transport`) and where that came from ('table', 'override' or 'model')."""
    cdef int size = 0, rc
    cdef lp_choice_t ch
    cdef int c = _coll_index(collective)
    cdef int alg = _alg_index(c, algorithm)
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    rc = lp_choose(h, c, nbytes * (2 if acc else 1), MEMORY_KINDS.index(memory), acc, alg, 0, &ch)
    if rc != LP_OK:
        _raise_status(rc)
    return _tp_name(ch.transport), _source_name(ch.transport_source)

def set_transport_override(name):
    """The process's transport override for the ring allreduce between the ranks of a node
    ("mpi", "shm", "cma"; None: none): above tables and model.  Every rank must set the same
    (the tuner and lpmpi-bench do, around their timed calls).  Returns the previous one."""
    return _tp_name(lp_set_transport_override(_tp_index(name)))

def explain_choice(collective, nbytes, comm=None, memory="host"):
    """``(algorithm, chunk_bytes or None, source)`` of algorithm="auto": source 'override',
    'table' or 'model'."""
    alg, chunk, _, source, _ = choice(collective, nbytes, comm, memory)
    return alg, chunk, source

def select(collective, nbytes, comm=None, memory="host"):
    """``(algorithm, chunk_bytes)`` that algorithm="auto" uses for this call (chunk None if
    unchunked); the collectives' own decision (see :func:`lpmpi.explain`)."""
    alg, chunk, _, _, _ = choice(collective, nbytes, comm, memory)
    return alg, chunk

def set_override(collective, algorithm, chunk_bytes):
    """Environment override for one collective (algorithm None = none, chunk None = none)."""
    c = _coll_index(collective)
    alg = -1 if algorithm is None else _alg_index(c, algorithm)
    lp_set_override(c, alg, 0 if chunk_bytes is None else _chunk(chunk_bytes))

def model_get():
    cdef double a, b, g
    lp_model_get(&a, &b, &g)
    return a, b, g

def model_set(double alpha, double beta, double gamma):
    lp_model_set(alpha, beta, gamma)

def predict(collective, algorithm, int P, double nbytes, chunk_bytes=None):
    """Model time in seconds of one algorithm (chunk None = the model's best chunk)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("predict needs a concrete algorithm")
    cdef double ch = lp_best_chunk(alg, P, <size_t>nbytes) if chunk_bytes is None else chunk_bytes
    return lp_algo_predict(alg, P, nbytes, ch)

def best_chunk(collective, algorithm, int P, size_t nbytes):
    """The model's best chunk among the powers of two CHUNK_MIN..CHUNK_MAX (None: unchunked)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("best_chunk needs a concrete algorithm")
    r = lp_best_chunk(alg, P, nbytes)
    return r or None

def optimal_chunk(collective, algorithm, int P, double nbytes):
    """The chunk (bytes, any real in [1, nbytes]) minimising the registry's cost formula."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("optimal_chunk needs a concrete algorithm")
    return lp_optimal_chunk(alg, P, nbytes)

def table_clear():
    lp_table_clear()

def table_set_hash(h):
    """Fingerprint of the loaded table (compared across ranks on each communicator's first call)."""
    lp_table_set_hash(<uint64_t>(h & 0xFFFFFFFFFFFFFFFF))

def table_mismatches():
    """Communicators on which ranks held different tables (and so follow rank 0's)."""
    return lp_table_mismatches()

cdef int _prepared(comm, MPI_Comm *h, int *size) except -1:
    """comm's handle and size, its context prepared (collective on its first lpmpi call)."""
    cdef int first = 0, rc
    _comm(comm, h, size)
    with nogil:
        rc = lp_comm_prepare(h[0], &first)
    if rc != LP_OK:
        _raise_status(rc)
    return 0

def comm_nodes(comm=None):
    """The nodes of comm as lpmpi sees them (MPI_Comm_split_type SHARED): a list giving, for
    each rank, the lowest rank of its node.  Collective on comm's first lpmpi call (it prepares
    the communicator); chains and rings follow node order when there are several nodes."""
    cdef MPI_Comm h
    cdef int size = 0, nnodes = 0, rc
    _prepared(comm, &h, &size)
    cdef cnp.ndarray[int, ndim=1] node = np.zeros(size, np.intc)
    rc = lp_comm_nodes(h, &nnodes, <int *>node.data)
    if rc != LP_OK:
        _raise_status(rc)
    return [int(x) for x in node]

from lpmpi._units import format_bytes as _format_bytes
cdef size_t _nts[3]
lp_node_transport_sizes(_nts)
_SHM_MIN, _CMA_MIN, _SHM_MAX = (_format_bytes(int(x)) for x in _nts)
_NT_WHY = ("in use: single-copy reads between the ranks of this node (process_vm_readv) for the "
           f"ring allreduce on host memory, from {_CMA_MIN}",
           "off: LPMPI_NODE_TRANSPORT=mpi", "off: the communicator spans several nodes",
           "off: process_vm_readv between the ranks was refused (ptrace permissions)",
           "off: one rank", "off: not Linux",
           "in use: a shared-memory segment of the ranks of this node, synchronised by counters in "
           f"it, for the ring allreduce on host memory, from {_SHM_MIN} to {_SHM_MAX} (above: ring over "
           "MPI, unless a table row asks for it)",
           "off: the shared-memory segment could not be made{shm} (LPMPI_NODE_TRANSPORT=shm)",
           "in use: for the ring allreduce on host memory, a shared-memory segment of the ranks of "
           f"this node (from {_SHM_MIN}) and single-copy reads (process_vm_readv) from {_CMA_MIN}, "
           "unless a table row asks for one",
           "in use: single-copy reads between the ranks of this node (process_vm_readv) for the "
           f"ring allreduce on host memory, from {_CMA_MIN}; the shared-memory segment could not "
           "be made{shm}",
           "off: the shared-memory segment could not be made{shm}, and "
           "process_vm_readv between the ranks was refused (ptrace permissions)")
_NT_NAME = {0: "cma", 6: "shm", 8: "shm+cma", 9: "cma"}

def ring_transport(comm=None, size_t nbytes=0, requested="decided"):
    """The transport a ring allreduce of nbytes on host memory uses on comm: "shm", "cma" or
    "mpi" (local; None for a communicator no lpmpi collective ran on yet).  requested: what the
    decision asks for ("mpi", "shm", "cma", or None for the model's rule by size); by default
    the decision's own (table row, override or model, :func:`transport_choice`)."""
    cdef MPI_Comm h
    cdef int size = 0, which = 0, rc
    _comm(comm, &h, &size)
    if not lp_comm_ready(h):
        return None
    if requested == "decided":
        requested = transport_choice("allreduce", nbytes, comm)[0]
    rc = lp_comm_ring_transport(h, nbytes, _tp_index(requested), &which)
    if rc != LP_OK:
        _raise_status(rc)
    return TRANSPORTS[which]     # LP_RING_MPI, _SHM, _CMA: TRANSPORTS' order

def comm_transport(comm=None, bint prepare=True):
    """``(name, why)``: the transport lpmpi's own transfers use between ranks of one node on
    comm, "shm" (shared memory), "cma" (single-copy reads), "shm+cma" (each at the sizes where
    it is faster) or "mpi", and why.  prepare: collective on comm's
    first lpmpi call (it prepares the communicator); prepare=False is local and returns None
    for a communicator no lpmpi collective ran on yet."""
    cdef MPI_Comm h
    cdef int size = 0, why = 0, rc
    if not prepare:
        _comm(comm, &h, &size)
        if not lp_comm_ready(h):
            return None
    _prepared(comm, &h, &size)
    rc = lp_comm_transport(h, &why)
    if rc != LP_OK:
        _raise_status(rc)
    text = _NT_WHY[why]
    if "{shm}" in text:             # which step failed, and the system's reason
        fail = lp_shm_failure().decode()
        text = text.replace("{shm}", f" (this rank: {fail})" if fail else " (on another rank)")
    return (_NT_NAME.get(why, "mpi"), text)

def node_bytes(bint reset=False):
    """Bytes this process sent to ranks on other nodes in lpmpi's own point-to-point transfers
    (not MPI's collectives, as algorithm native uses) since the last reset (reset=True returns
    the count and zeroes it)."""
    return lp_node_bytes(reset)

def table_add(collective, memory, int P, double lo, double hi, algorithm, chunk_bytes,
              staging_buffers=None, bint acc=False, transport=None):
    """One tuning row; staging_buffers (1..STAGING_MAX, device memory's staged pipeline) optional;
    acc: a row for acc_dtype calls (bytes of the 16-bit message); transport: the node-local
    transport of the ring allreduce ("mpi", "shm", "cma"; None: the model's rule)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if lp_table_add(c, MEMORY_KINDS.index(memory), P, lo, hi, alg,
                    0 if chunk_bytes is None else chunk_bytes,
                    0 if staging_buffers is None else staging_buffers, acc, _tp_index(transport)) != LP_OK:
        raise ValueError(lp_errmsg().decode())

# ---------------------------------------------------------------- local kernels (model fitting)
cdef extern from "lpmpi.h" nogil:
    ctypedef void (*lp_reduce_fn)(void *out, const void *a, const void *b, size_t n)
    lp_reduce_fn lp_reduce_kernel(int dt, int op)

def reduce_local(out, a, b, op="sum"):
    """out = a op b elementwise with the engine's own kernel (no communication); for timing
    the reduction cost gamma.  All three: same dtype and count, out writable."""
    cdef Buf bo, ba, bb
    cdef int o = _op(op)
    cdef lp_reduce_fn fn
    memset(&bo, 0, sizeof(Buf))
    memset(&ba, 0, sizeof(Buf))
    memset(&bb, 0, sizeof(Buf))
    try:
        _get_buf(out, "out", &bo)
        _get_buf(a, "a", &ba)
        _get_buf(b, "b", &bb)
        _check_pair(&ba, &bo, "a", "out")
        _check_pair(&bb, &bo, "b", "out")
        _check_op(o, bo.dtype)
        if bo.readonly:
            raise ValueError("out is read-only")
        if bo.mem:
            raise TypeError("reduce_local takes host arrays")
        fn = lp_reduce_kernel(bo.dtype, o)
        with nogil:
            fn(bo.ptr, ba.ptr, bb.ptr, bo.count)
    finally:
        _release(&bo)
        _release(&ba)
        _release(&bb)
    return out
