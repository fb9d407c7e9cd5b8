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
    """LPMPI_SHM_SPIN_US (lpmpi._env at import): microseconds at most a waiting rank polls
    before it sleeps (the shared-memory transport) or yields its core (MPI requests); -1: it
    never does.  Returns the previous value (us)."""
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
