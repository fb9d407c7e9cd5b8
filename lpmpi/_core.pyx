# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython bindings of the lpmpi C engine.

Every argument is checked and normalised here with the GIL held, before any communication;
the engine then runs with the GIL released, and its status becomes an exception.
"""
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_FORMAT,
                             PyBUF_C_CONTIGUOUS)
from libc.string cimport memset
cimport numpy as cnp
from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_COMM_NULL, MPI_Comm_test_inter, MPI_Comm_size, MPI_Comm_rank,
                            MPI_Op, MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,
                            MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR)
from lpmpi._clpmpi cimport *
from libc.stdint cimport uint64_t, uintptr_t

import numpy as np
import os as _os
from operator import index as _index
from mpi4py import MPI as PyMPI
from lpmpi._errors import LPError, MismatchError
from lpmpi._ops import Op

cnp.import_array()

# looked up once: these sit on every call's path
cdef object _IN_PLACE = PyMPI.IN_PLACE
cdef object _WORLD = PyMPI.COMM_WORLD
cdef type _Comm = PyMPI.Comm
cdef type _MPIOp = PyMPI.Op

# element types, in the order of lp_dtype_t
DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
# ops, in the order of lp_op_t
OP_NAMES = ("sum", "prod", "max", "min", "avg", "land", "lor", "lxor", "band", "bor", "bxor")
COLLECTIVES = ("allreduce", "reduce", "bcast")
CUDA_BUILD = bool(lp_cuda_built())  # compiled with nvcc: device kernels and the CUDA transports
MEMORY_KINDS = ("host", "cuda")
CHUNK_MIN, CHUNK_MAX = LP_CHUNK_MIN, LP_CHUNK_MAX
WINDOW_MAX, STAGING_MAX = LP_WINDOW_MAX, LP_STAGING_MAX
DEFAULT_STAGING = LP_STAGING_DEFAULT
cdef enum:
    C_ALLREDUCE = 0
    C_REDUCE = 1
    C_BCAST = 2
    BF16 = 10

# (kind, itemsize) -> lp_dtype_t, for numpy dtypes
cdef dict _KIND = {
    (b"b", 1): 0, (b"i", 1): 1, (b"i", 2): 2, (b"i", 4): 3, (b"i", 8): 4,
    (b"u", 1): 5, (b"u", 2): 6, (b"u", 4): 7, (b"u", 8): 8,
    (b"f", 2): 9, (b"f", 4): 11, (b"f", 8): 12, (b"c", 8): 13, (b"c", 16): 14,
}
# buffer-protocol format character -> (kind, signed)
cdef dict _FORMAT = {
    "?": b"b", "b": b"i", "h": b"i", "i": b"i", "l": b"i", "q": b"i", "n": b"i",
    "B": b"u", "H": b"u", "I": b"u", "L": b"u", "Q": b"u", "N": b"u",
    "e": b"f", "f": b"f", "d": b"f", "Zf": b"c", "Zd": b"c",
}

# ---------------------------------------------------------------- configuration
cdef bint _check_enabled = False
cdef bint _debug = False
cdef long _mismatches_seen = 0
cdef set _debug_seen = set()

cdef bint _emulate = False
cdef int _aware_setting = -1

def _env_flag(name):
    v = _os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    return v.strip().lower() not in ("0", "false", "no", "off")

def _configure_device(emulate=None, cuda_aware=None, staging_buffers=None):
    """Device-memory knobs; None reads the environment: LPMPI_EMULATE_STAGING=1 (host emulation
    of the staged CUDA path: every buffer, host arrays included, is staged as if it were device
    memory), LPMPI_CUDA_AWARE=0/1 (force the transport; unset: ask the MPI library),
    LPMPI_STAGING_BUFFERS=n (chunks in flight per direction of the staged pipeline, 1..64)."""
    global _emulate, _aware_setting
    if emulate is None:
        emulate = bool(_env_flag("LPMPI_EMULATE_STAGING"))
    if cuda_aware is None:
        f = _env_flag("LPMPI_CUDA_AWARE")
        cuda_aware = -1 if f is None else int(f)
    if staging_buffers is None:
        v = _os.environ.get("LPMPI_STAGING_BUFFERS", "").strip()
        staging_buffers = 0
        if v:
            try:
                staging_buffers = int(v, 0)
                if not 1 <= staging_buffers <= 64:
                    raise ValueError
            except ValueError:
                import warnings
                warnings.warn(f"lpmpi: ignoring LPMPI_STAGING_BUFFERS={v!r} (not an int in 1..64)",
                              stacklevel=2)
                staging_buffers = 0
    _emulate = bool(emulate)
    _aware_setting = cuda_aware
    lp_configure_device(_emulate, cuda_aware, staging_buffers)

_configure_device()

def set_staging_buffers(int n):
    """Staging buffers (chunks in flight per direction) of the staged device pipeline, 1..64
    (the tuner's knob; LPMPI_STAGING_BUFFERS at import)."""
    if not 1 <= n <= 64:
        raise ValueError(f"staging buffers must be in 1..64, got {n}")
    lp_configure_device(_emulate, _aware_setting, n)

def cuda_info():
    """What this build and process do with device memory (``python -m lpmpi info``).

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

def _configure(size_t max_msg_bytes, int window, bint check, bint debug=False):
    """Apply environment knobs (called by lpmpi at import)."""
    global _check_enabled, _debug
    _check_enabled = check
    _debug = debug
    lp_configure(max_msg_bytes, window, check)

cdef void _debug_log(int coll, size_t nbytes, MPI_Comm h, int alg, size_t chunk, int mem=0) noexcept:
    """LPMPI_DEBUG=1: on rank 0, the choice once per collective, size bucket and size."""
    cdef int rank = 0, size = 0, a = alg, src = -1, w = 0
    cdef size_t c = chunk
    cdef lp_choice_t ch
    MPI_Comm_rank(h, &rank)
    MPI_Comm_size(h, &size)
    bucket = nbytes.bit_length()
    if rank != 0 or (coll, bucket, size, mem) in _debug_seen:
        return
    _debug_seen.add((coll, bucket, size, mem))
    if alg == LP_ALG_AUTO:
        lp_choose(h, coll, nbytes, mem, alg, chunk, &ch)
        a, c, src = ch.alg, ch.chunk, ch.source
    why = ("override", "table", "model")[src] if src >= 0 else "requested"
    chs = f" chunk {c}" if lp_algo_chunked(a) else ""
    import sys
    where = " (device memory)" if mem else ""
    print(f"lpmpi: {COLLECTIVES[coll]} {nbytes} B{where} (bucket < 2^{bucket}) P={size}: "
          f"{lp_algo_name(a).decode()}{chs} [{why}]", file=sys.stderr, flush=True)

cdef inline int _after_call(int rc) except -1:
    """Turn a failed status into an exception; warn once when ranks held different tables."""
    global _mismatches_seen
    if lp_table_mismatches() != _mismatches_seen:
        _mismatches_seen = lp_table_mismatches()
        if _mismatches_seen == 1:
            import warnings
            warnings.warn("lpmpi: ranks of a communicator loaded different tuning tables; "
                          "'auto' uses the cost model on it", RuntimeWarning, stacklevel=3)
    if rc != LP_OK:
        _raise_status(rc)
    return 0

# ---------------------------------------------------------------- registry
cdef dict _ALG = {}          # (collective index, name) -> registry index
cdef tuple _ALGS_BY_COLL

def _build_registry():
    global _ALGS_BY_COLL
    per = [[], [], []]
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

def _algorithm_info(collective):
    """[(name, registry index, chunked)] for a collective (used by the tuner and tables)."""
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
    return chunk_bytes

# ---------------------------------------------------------------- communicators
cdef int _comm(comm, MPI_Comm *out, int *size) except -1:
    cdef int inter = 0
    if comm is None:
        comm = _WORLD
    elif not isinstance(comm, _Comm):
        raise TypeError(f"comm must be an mpi4py communicator (MPI.Comm) or None, got {type(comm).__name__}")
    cdef MPI_Comm h = (<MPI.Comm>comm).ob_mpi
    if h == MPI_COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    MPI_Comm_test_inter(h, &inter)
    if inter:
        raise ValueError("comm is an intercommunicator; lpmpi needs an intracommunicator")
    MPI_Comm_size(h, size)
    out[0] = h
    return 0

# ---------------------------------------------------------------- ops
cdef dict _OPS = {}
for _i, _n in enumerate(OP_NAMES):
    _OPS[_n] = _i
    _OPS[_n.upper()] = _i

cdef int _op(op) except -1:
    cdef MPI_Op h
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        i = _OPS.get(op)
        if i is not None:
            return i
    elif isinstance(op, _MPIOp):
        h = (<MPI.Op>op).ob_mpi
        if h == MPI_SUM: return 0
        if h == MPI_PROD: return 1
        if h == MPI_MAX: return 2
        if h == MPI_MIN: return 3
        if h == MPI_LAND: return 5
        if h == MPI_LOR: return 6
        if h == MPI_LXOR: return 7
        if h == MPI_BAND: return 8
        if h == MPI_BOR: return 9
        if h == MPI_BXOR: return 10
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

cdef int _numpy_dtype(cnp.ndarray a) except -2:
    cdef cnp.dtype d = <cnp.dtype>cnp.PyArray_DESCR(a)
    if not cnp.PyArray_ISNOTSWAPPED(a):
        raise TypeError("byte-swapped (non-native byte order) arrays are not supported")
    t = _KIND.get((bytes([d.kind]), d.itemsize)) if d.kind in b"biufc" else None
    if t is None:
        if d.itemsize == 2 and d.name == "bfloat16":
            return BF16
        return -1
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

cdef int _get_buf(obj, str name, Buf *b) except -1:
    """Fill b from a numpy array, a buffer-protocol object, or (later) a device array."""
    cdef cnp.ndarray a
    memset(b, 0, sizeof(Buf))
    if cnp.PyArray_Check(obj):
        a = <cnp.ndarray>obj
        if not cnp.PyArray_IS_C_CONTIGUOUS(a):
            raise ValueError(f"{name} must be C-contiguous")
        b.dtype = _numpy_dtype(a)
        if b.dtype < 0:
            raise TypeError(f"{name} has unsupported dtype {a.dtype}")
        b.ptr = <char *>cnp.PyArray_DATA(a)
        b.count = <size_t>cnp.PyArray_SIZE(a)
        b.readonly = not cnp.PyArray_ISWRITEABLE(a)
        return 0
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    except TypeError as e:   # PyTorch raises it for dtypes the interface lacks (bfloat16)
        if _is_torch_cuda(obj):
            return _get_torch(obj, name, b)
        raise TypeError(f"{name}: {e}") from None
    if cai is not None:
        return _get_cai(obj, cai, name, b)
    try:
        PyObject_GetBuffer(obj, &b.view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)
    except BufferError:
        try:
            memoryview(obj)
        except TypeError:
            raise TypeError(f"{name} must be a numpy array, a buffer-protocol object or a "
                            f"device array, got {type(obj).__name__}") from None
        raise ValueError(f"{name} must be C-contiguous") from None
    except TypeError:
        raise TypeError(f"{name} must be a numpy array, a buffer-protocol object or a device "
                        f"array, got {type(obj).__name__}") from None
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
    return type(obj).__module__.startswith("torch") and bool(getattr(obj, "is_cuda", False))

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

cdef object _alloc_device(obj, int dtype):
    """recvbuf=None for a device input: PyTorch for a tensor, else CuPy (emulation without
    CuPy: lpmpi's host-backed stand-in)."""
    shape = tuple(obj.__cuda_array_interface__["shape"]) if not _is_torch_cuda(obj) else None
    if shape is None:
        import torch
        return torch.empty_like(obj, memory_format=torch.contiguous_format)
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

cdef object _alloc_like(obj, int dtype, int mem=0):
    """recvbuf=None: a numpy array with the input's shape and dtype (device input: a device
    array, see _alloc_device)."""
    if mem:
        return _alloc_device(obj, dtype)
    if cnp.PyArray_Check(obj):
        return np.empty(obj.shape, obj.dtype)
    return np.empty(memoryview(obj).shape, DTYPE_NAMES[dtype])

cdef int _check_pair(Buf *s, Buf *r, str sname, str rname) except -1:
    if s.dtype != r.dtype:
        raise TypeError(f"{sname} and {rname} have different dtypes "
                        f"({DTYPE_NAMES[s.dtype]} and {DTYPE_NAMES[r.dtype]})")
    if s.count != r.count:
        raise ValueError(f"{sname} and {rname} have different element counts ({s.count} and {r.count})")
    if s.mem != r.mem:
        raise TypeError(f"{sname} and {rname} must both be host or both be device arrays")
    return 0

cdef int _check_op(int op, int dtype) except -1:
    if not lp_op_valid(dtype, op):
        raise TypeError(f"op {OP_NAMES[op]!r} is not defined on dtype {DTYPE_NAMES[dtype]}")
    return 0

cdef int _check_root(root, int size) except -1:
    root = _as_int(root, "root", "an int")
    if not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for a communicator of size {size}")
    return 0

cdef int _raise_status(int rc) except -1:
    msg = lp_errmsg().decode("utf-8", "replace")
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

# ---------------------------------------------------------------- collectives
def allreduce(sendbuf, recvbuf=None, op="sum", comm=None, *, algorithm="auto", chunk_bytes=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` and leave the result on every rank.

    Returns ``recvbuf`` (a new numpy array when None).  In place: ``sendbuf`` is
    ``lpmpi.IN_PLACE`` (then ``recvbuf`` holds the input) or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.allreduce(np.ones(4, np.float32))   # doctest: +SKIP
    """
    cdef Buf s, r
    cdef MPI_Comm h
    cdef int size = 0, o = 0, alg = 0, rc
    cdef size_t chunk = 0
    cdef bint inplace
    s.has_view = False
    r.has_view = False
    _comm(comm, &h, &size)
    try:
        o = _op(op)
        alg = _alg_index(C_ALLREDUCE, algorithm)
        chunk = _chunk(chunk_bytes)
        inplace = sendbuf is _IN_PLACE
        if inplace:
            if recvbuf is None:
                raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
            sendbuf = recvbuf
        elif recvbuf is sendbuf:
            inplace = True
        _get_buf(sendbuf, "sendbuf", &s)
        _check_op(o, s.dtype)
        if recvbuf is None:
            recvbuf = _alloc_like(sendbuf, s.dtype, s.mem)
        if inplace:
            r = s
            r.has_view = False
        else:
            _get_buf(recvbuf, "recvbuf", &r)
            _check_pair(&s, &r, "sendbuf", "recvbuf")
        if r.readonly:
            raise ValueError("recvbuf is read-only")
        if s.mem:
            _sync_streams(&s, &r)
    except BaseException:
        _release(&s)
        _release(&r)
        _local_error(h)
        raise
    if _debug:
        _debug_log(C_ALLREDUCE, s.count * lp_dtype_size(s.dtype), h, alg, chunk, s.mem or _emulate)
    try:
        with nogil:
            rc = lp_allreduce(h, s.ptr, r.ptr, s.count, s.dtype, o, alg, chunk, s.mem)
    finally:
        _release(&s)
        _release(&r)
    _after_call(rc)
    return recvbuf


def reduce(sendbuf, recvbuf=None, op="sum", root=0, comm=None, *, algorithm="auto",
           chunk_bytes=None):
    """Reduce ``sendbuf`` over all ranks of ``comm`` into ``recvbuf`` on ``root``.

    Returns ``recvbuf`` on the root (a new numpy array when None) and None elsewhere; a
    ``recvbuf`` passed on another rank is checked but never written.  In place on the root:
    ``sendbuf`` is ``lpmpi.IN_PLACE`` or ``recvbuf is sendbuf``.

    >>> import numpy as np, lpmpi
    >>> y = lpmpi.reduce(np.ones(4), root=0)   # doctest: +SKIP
    """
    cdef Buf s, r
    cdef MPI_Comm h
    cdef int size = 0, o = 0, alg = 0, rc, rank
    cdef size_t chunk = 0
    cdef bint inplace, is_root
    s.has_view = False
    r.has_view = False
    _comm(comm, &h, &size)
    try:
        o = _op(op)
        _check_root(root, size)
        alg = _alg_index(C_REDUCE, algorithm)
        chunk = _chunk(chunk_bytes)
        MPI_Comm_rank(h, &rank)
        is_root = rank == _index(root)
        inplace = sendbuf is _IN_PLACE
        if inplace:
            if recvbuf is None:
                raise TypeError("recvbuf must be given when sendbuf is IN_PLACE")
            sendbuf = recvbuf
        elif recvbuf is sendbuf:
            inplace = True
        _get_buf(sendbuf, "sendbuf", &s)
        _check_op(o, s.dtype)
        if inplace:
            r = s
            r.has_view = False
            if r.readonly:
                raise ValueError("recvbuf is read-only")
        elif recvbuf is not None:
            _get_buf(recvbuf, "recvbuf", &r)
            _check_pair(&s, &r, "sendbuf", "recvbuf")
            if r.readonly:
                raise ValueError("recvbuf is read-only")
        elif is_root:
            recvbuf = _alloc_like(sendbuf, s.dtype, s.mem)
            _get_buf(recvbuf, "recvbuf", &r)
        if s.mem:
            _sync_streams(&s, &r if is_root else NULL)
    except BaseException:
        _release(&s)
        _release(&r)
        _local_error(h)
        raise
    cdef char *rp = r.ptr if is_root else NULL
    cdef int rank_root = _index(root)
    if _debug:
        _debug_log(C_REDUCE, s.count * lp_dtype_size(s.dtype), h, alg, chunk, s.mem or _emulate)
    try:
        with nogil:
            rc = lp_reduce(h, s.ptr, rp, s.count, s.dtype, o, rank_root, alg, chunk, s.mem)
    finally:
        _release(&s)
        _release(&r)
    _after_call(rc)
    return recvbuf if is_root else None


def bcast(buf, root=0, comm=None, *, algorithm="auto", chunk_bytes=None):
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place; returns ``buf``.

    >>> import numpy as np, lpmpi
    >>> x = lpmpi.bcast(np.arange(4.0), root=0)   # doctest: +SKIP
    """
    cdef Buf b
    cdef MPI_Comm h
    cdef int size = 0, alg = 0, rc
    cdef size_t chunk = 0
    b.has_view = False
    _comm(comm, &h, &size)
    try:
        _check_root(root, size)
        alg = _alg_index(C_BCAST, algorithm)
        chunk = _chunk(chunk_bytes)
        if buf is _IN_PLACE or buf is None:
            raise TypeError("buf must be an array, not IN_PLACE or None")
        _get_buf(buf, "buf", &b)
        if b.readonly:
            raise ValueError("buf is read-only (it is written on every rank but the root)")
        if b.mem:
            _sync_streams(&b, NULL)
    except BaseException:
        _release(&b)
        _local_error(h)
        raise
    cdef int rank_root = root
    if _debug:
        _debug_log(C_BCAST, b.count * lp_dtype_size(b.dtype), h, alg, chunk, b.mem or _emulate)
    try:
        with nogil:
            rc = lp_bcast(h, b.ptr, b.count, b.dtype, rank_root, alg, chunk, b.mem)
    finally:
        _release(&b)
    _after_call(rc)
    return buf

# ---------------------------------------------------------------- selection, model, tables
def select(collective, nbytes, comm=None, memory="host"):
    """``(algorithm, chunk_bytes)`` that algorithm="auto" would use (chunk None if unchunked)."""
    info = explain_choice(collective, nbytes, comm, memory)
    return info[0], info[1]

def explain_choice(collective, nbytes, comm=None, memory="host"):
    """``(algorithm, chunk_bytes or None, source)`` with source 'override', 'table' or 'model'."""
    cdef int size = 0, alg = 0, src = 0, w = 0
    cdef size_t chunk = 0
    cdef lp_choice_t ch
    cdef int c = _coll_index(collective)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
    if memory not in MEMORY_KINDS:
        raise ValueError(f"memory must be one of {MEMORY_KINDS}, got {memory!r}")
    cdef MPI_Comm h
    _comm(comm, &h, &size)
    lp_choose(h, c, nbytes, MEMORY_KINDS.index(memory), LP_ALG_AUTO, 0, &ch)
    alg, chunk, src = ch.alg, ch.chunk, ch.source
    name = lp_algo_name(alg).decode()
    return name, (chunk if lp_algo_chunked(alg) else None), ("override", "table", "model")[src]

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
    """Model time in seconds of one algorithm (chunk None = the model's optimal chunk)."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if alg < 0:
        raise ValueError("predict needs a concrete algorithm")
    cdef double ch = lp_best_chunk(alg, P, <size_t>nbytes) if chunk_bytes is None else chunk_bytes
    return lp_algo_predict(alg, P, nbytes, ch)

def best_chunk(collective, algorithm, int P, size_t nbytes):
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    r = lp_best_chunk(alg, P, nbytes)
    return r or None

def table_clear():
    lp_table_clear()

def table_set_hash(h):
    """Fingerprint of the loaded table (compared across ranks on each communicator's first call)."""
    lp_table_set_hash(<uint64_t>(h & 0xFFFFFFFFFFFFFFFF))

def table_mismatches():
    """Communicators on which ranks held different tables (and so fell back to the model)."""
    return lp_table_mismatches()

def table_add(collective, memory, int P, double lo, double hi, algorithm, chunk_bytes,
              staging_buffers=None):
    """One tuning row; staging_buffers (1..64, device memory's staged pipeline) optional."""
    c = _coll_index(collective)
    alg = _alg_index(c, algorithm)
    if lp_table_add(c, MEMORY_KINDS.index(memory), P, lo, hi, alg,
                    0 if chunk_bytes is None else chunk_bytes,
                    0 if staging_buffers is None else staging_buffers) != LP_OK:
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
    bo.has_view = ba.has_view = bb.has_view = False
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
