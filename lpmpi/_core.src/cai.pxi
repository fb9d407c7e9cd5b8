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
