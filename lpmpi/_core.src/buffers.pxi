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

cdef bint _is_torch(obj):
    return type(obj).__module__.startswith("torch")

cdef bint _is_jax(obj):
    return type(obj).__module__.split(".", 1)[0] in ("jax", "jaxlib")

# plain CPU torch tensors without DLPack: torch's __dlpack__ costs about 5 us a call, the
# attributes read here under 1 us (filled on the first torch tensor seen: lpmpi never imports torch)
cdef object _TorchTensor = None
cdef dict _TORCH_DTYPES = None

cdef int _get_torch_cpu(obj, Buf *b) except -1:
    """Fill b from a CPU torch.Tensor (exactly that type) that is contiguous, needs no grad and
    carries no lazy negation or conjugation, of a dtype lpmpi takes: returns 1; anything else
    returns 0 (the DLPack path then takes it, with its checks and messages)."""
    global _TorchTensor, _TORCH_DTYPES
    if _TorchTensor is None:
        import torch
        _TorchTensor = torch.Tensor
        _TORCH_DTYPES = {getattr(torch, n): i for i, n in enumerate(DTYPE_NAMES)
                         if isinstance(getattr(torch, n, None), torch.dtype)}
    if type(obj) is not _TorchTensor or not obj.is_cpu or obj.requires_grad:
        return 0
    dt = _TORCH_DTYPES.get(obj.dtype)
    if dt is None or not obj.is_contiguous() or obj.is_neg() or obj.is_conj():
        return 0
    b.dtype = dt
    b.ptr = <char *><uintptr_t>obj.data_ptr()
    b.count = <size_t>obj.numel()
    b.readonly = False
    return 1

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
            if _get_torch_cpu(obj, b):
                return 0
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
