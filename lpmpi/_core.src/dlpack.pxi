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
