# ---------------------------------------------------------------- compression's codecs (codec.c)
# The wire formats of compression= (docs/compression.md), for tests, the bench and the torch
# hook: encode an array, decode bytes, the instruction set the codecs run on.
def _cz_isa():
    """The codecs' instruction set: "avx512", "avx2" or "scalar" (LPMPI_CODEC_ISA forces one)."""
    return lp_cz_isa().decode()


def _cz_encode(compression, x, out=None):
    """The encoded bytes (numpy uint8; into ``out`` where given) of a C-contiguous float array
    ``x`` (float16, bfloat16, float32, float64) in ``compression``'s wire format."""
    cdef int comp = COMPRESSIONS.index(compression) + 1
    cdef cnp.ndarray a = np.ascontiguousarray(x)
    cdef Buf b
    _get_buf(a, "x", &b)
    cdef size_t n = b.count
    if out is None:
        out = np.empty(lp_cz_bytes(comp, n), np.uint8)
    elif (<cnp.ndarray>out).nbytes != lp_cz_bytes(comp, n) or not (<cnp.ndarray>out).flags.c_contiguous:
        _release(&b)
        raise ValueError(f"out must be {lp_cz_bytes(comp, n)} contiguous bytes")
    with nogil:
        lp_cz_encode(comp, b.dtype, b.ptr, n, cnp.PyArray_DATA(<cnp.ndarray>out))
    _release(&b)
    return out


def _cz_decode(compression, wire, out):
    """Decode ``wire`` (from :func:`_cz_encode`) into the float array ``out`` (its dtype and
    element count); returns ``out``."""
    cdef int comp = COMPRESSIONS.index(compression) + 1
    cdef cnp.ndarray w = np.ascontiguousarray(wire, dtype=np.uint8)
    cdef Buf b
    _get_buf(out, "out", &b)
    if <size_t>w.size != lp_cz_bytes(comp, b.count):
        _release(&b)
        raise ValueError(f"wire holds {w.size} bytes, {lp_cz_bytes(comp, b.count)} expected")
    cdef int rc
    with nogil:
        rc = lp_cz_decode(comp, b.dtype, cnp.PyArray_DATA(w), b.count, b.ptr)
    _release(&b)
    if rc != LP_OK:
        _raise_status(rc)
    return out


def _test_cz_wavefront(on):
    """Tests: the hierarchical compressed allreduce runs as the wavefront of phases (the form of
    layouts too large for the two phases of chained lanes), the same bits."""
    lp_set_test_cz_wavefront(1 if on else 0)


def _test_cz_reencode(on):
    """Tests: the compressed reduce re-encodes its partial sums (the design the tests reject)."""
    lp_set_test_cz_reencode(1 if on else 0)


def _cz_bytes(compression, size_t n):
    """Encoded bytes of n elements in ``compression``'s wire format."""
    return lp_cz_bytes(COMPRESSIONS.index(compression) + 1, n)


def _cz_collectives():
    """The collectives whose functions take compression= (a compressed row; reduce_scatter's
    counts form is reduce_scatter's)."""
    return tuple(COLLECTIVES[c] for c in range(LP_NCOLLS)
                 if lp_cz_algo(c) >= 0 and _ROWS[c]["via"] is None)
