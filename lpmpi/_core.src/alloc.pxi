# ---------------------------------------------------------------- recvbuf=None: the result's allocation
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

cdef object _alloc_like(obj, int dtype, int mem=0):
    """recvbuf=None: a numpy array with the input's shape and dtype (device input: a device
    array, see _alloc_device)."""
    if mem:
        return _alloc_device(obj, dtype)
    return _alloc_shaped(obj, dtype, _shape_of(obj), 0)

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
