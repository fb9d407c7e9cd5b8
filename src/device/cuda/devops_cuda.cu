/* devops_cuda.cu: the device operations (devops.h) on the CUDA runtime.
 *
 * Per device, created on first use: LP_MAX_STREAMS non-blocking streams (never the legacy
 * default stream, so the engine's copies do not serialise with other work in the process) and
 * LP_MAX_EVENTS events without timing.  Requests allocate their own pinned host memory
 * (cudaHostAlloc, portable) and device memory (cudaMalloc).  A request learns the device that
 * owns its buffers once (cudaPointerGetAttributes); whichever thread advances it makes that
 * device current (enter) and gives the thread's own back after (leave).
 * Copies are cudaMemcpyAsync with cudaMemcpyDefault (unified addressing decides the direction);
 * reductions launch the kernels of kernels.cu.
 *
 * Linked with the static CUDA runtime: importing lpmpi needs no GPU and no driver; the first
 * CUDA call happens when a device array arrives (or `python -m lpmpi info` counts devices). */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devops.h"

extern "C" int lp_cuda_launch_reduce(void *out, const void *a, const void *b, size_t n, lp_dtype_t dt,
                                     lp_op_t op, cudaStream_t s);
extern "C" void lp_cuda_launch_scale(void *buf, size_t n, lp_dtype_t dt, double d, cudaStream_t s);

#define CU_FAIL(code, ...) lp_fail((code), __FILE__, __LINE__, __VA_ARGS__)
/* run a CUDA runtime call; on failure record "call: error string" and return LP_ERR_CUDA */
#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    cudaGetLastError(); \
    return CU_FAIL(LP_ERR_CUDA, "%s failed: %s (%s)", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
} } while (0)

#define MAX_DEVICES 64

typedef struct {
    cudaStream_t st[LP_MAX_STREAMS];
    cudaEvent_t ev[LP_MAX_EVENTS];
} devstate_t;

static devstate_t *states[MAX_DEVICES];
static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_local int cur = -1;       /* the device this thread entered */

static int state(devstate_t **out) {
    if (cur < 0 || cur >= MAX_DEVICES) return CU_FAIL(LP_ERR_CUDA, "no CUDA device bound (device %d)", cur);
    if (!states[cur]) {
        pthread_mutex_lock(&states_lock);
        if (!states[cur]) states[cur] = (devstate_t *)calloc(1, sizeof(devstate_t));
        pthread_mutex_unlock(&states_lock);
        if (!states[cur]) return CU_FAIL(LP_ERR_NOMEM, "out of memory for the CUDA state");
    }
    *out = states[cur];
    return LP_OK;
}

static int stream(int i, cudaStream_t *out) {
    devstate_t *s;
    int rc = state(&s);
    if (rc != LP_OK) return rc;
    if (i < 0 || i >= LP_MAX_STREAMS) return CU_FAIL(LP_ERR_ARG, "stream %d out of range", i);
    if (!s->st[i]) CU(cudaStreamCreateWithFlags(&s->st[i], cudaStreamNonBlocking));
    *out = s->st[i];
    return LP_OK;
}

static int event(int i, cudaEvent_t *out) {
    devstate_t *s;
    int rc = state(&s);
    if (rc != LP_OK) return rc;
    if (i < 0 || i >= LP_MAX_EVENTS) return CU_FAIL(LP_ERR_ARG, "event %d out of range", i);
    if (!s->ev[i]) CU(cudaEventCreateWithFlags(&s->ev[i], cudaEventDisableTiming));
    *out = s->ev[i];
    return LP_OK;
}

static int c_locate(const void *ptr, int *device) {
    int dev = -1;
    if (ptr) {
        cudaPointerAttributes at;
        memset(&at, 0, sizeof at);
        CU(cudaPointerGetAttributes(&at, ptr));
        if ((at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged) && at.device >= 0)
            dev = at.device;
    }
    if (dev < 0) CU(cudaGetDevice(&dev));
    if (dev >= MAX_DEVICES) return CU_FAIL(LP_ERR_CUDA, "device %d: at most %d devices", dev, MAX_DEVICES);
    *device = dev;
    return LP_OK;
}

static int c_enter(int dev, int *saved) {
    int prev = 0;
    CU(cudaGetDevice(&prev));
    if (dev < 0) dev = prev;
    if (dev >= MAX_DEVICES) return CU_FAIL(LP_ERR_CUDA, "device %d: at most %d devices", dev, MAX_DEVICES);
    if (dev != prev) CU(cudaSetDevice(dev));
    *saved = prev;
    cur = dev;
    return LP_OK;
}

static void c_leave(int saved) {
    if (cur >= 0 && saved != cur) cudaSetDevice(saved);
    cur = saved;
}

static int c_copy(void *dst, const void *src, size_t bytes, int st) {
    cudaStream_t s;
    int rc = stream(st, &s);
    if (rc != LP_OK || !bytes) return rc;
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    return LP_OK;
}

static int c_reduce(void *out, const void *a, const void *b, size_t n, lp_dtype_t dt, lp_op_t op, int st) {
    cudaStream_t s;
    int rc = stream(st, &s);
    if (rc != LP_OK) return rc;
    if (!lp_cuda_launch_reduce(out, a, b, n, dt, op, s))
        return CU_FAIL(LP_ERR_ARG, "no device kernel for %s on %s", lp_op_name(op), lp_dtype_name(dt));
    CU(cudaGetLastError());
    return LP_OK;
}

static int c_scale(void *buf, size_t n, lp_dtype_t dt, double divisor, int st) {
    cudaStream_t s;
    int rc = stream(st, &s);
    if (rc != LP_OK) return rc;
    lp_cuda_launch_scale(buf, n, dt, divisor, s);
    CU(cudaGetLastError());
    return LP_OK;
}

static int c_record(int ev, int st) {
    cudaStream_t s;
    cudaEvent_t e;
    int rc = stream(st, &s);
    if (rc == LP_OK) rc = event(ev, &e);
    if (rc != LP_OK) return rc;
    CU(cudaEventRecord(e, s));
    return LP_OK;
}

static int c_query(int ev, int *done) {
    cudaEvent_t e;
    int rc = event(ev, &e);
    if (rc != LP_OK) return rc;
    cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) { *done = 0; return LP_OK; }
    CU(q);
    *done = 1;
    return LP_OK;
}

static int c_sync(int st) {
    devstate_t *s;
    int rc = state(&s);
    if (rc != LP_OK) return rc;
    for (int i = 0; i < LP_MAX_STREAMS; i++)
        if ((st < 0 || i == st) && s->st[i]) CU(cudaStreamSynchronize(s->st[i]));
    return LP_OK;
}

static int c_alloc(int kind, size_t bytes, void **out) {
    void *p = NULL;
    size_t want = (bytes + 4095) & ~(size_t)4095;
    if (kind == LP_ALLOC_PINNED) CU(cudaHostAlloc(&p, want, cudaHostAllocPortable));
    else CU(cudaMalloc(&p, want));
    *out = p;
    return LP_OK;
}

/* errors ignored: nothing to do about them, and the memory is gone either way */
static void c_free(int kind, void *p) {
    if (kind == LP_ALLOC_PINNED) cudaFreeHost(p);
    else cudaFree(p);
    cudaGetLastError();
}

/* at MPI_Finalize; errors ignored (the runtime may already be shutting down) */
static void c_release(void) {
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) { cudaGetLastError(); return; }
    for (int d = 0; d < MAX_DEVICES; d++) {
        devstate_t *s = states[d];
        if (!s) continue;
        if (cudaSetDevice(d) == cudaSuccess) {
            for (int i = 0; i < LP_MAX_STREAMS; i++)
                if (s->st[i]) { cudaStreamSynchronize(s->st[i]); cudaStreamDestroy(s->st[i]); }
            for (int i = 0; i < LP_MAX_EVENTS; i++)
                if (s->ev[i]) cudaEventDestroy(s->ev[i]);
        }
        free(s);
        states[d] = NULL;
    }
    cudaSetDevice(prev);
    cudaGetLastError();
}

extern "C" {

const lp_devops_t lp_devops_cuda = {
    "cuda", c_locate, c_enter, c_leave, c_copy, c_copy, c_copy, c_reduce, c_scale,
    c_record, c_query, c_sync, c_alloc, c_free, c_release,
};

int lp_cuda_device_count(int *n) {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {   /* no driver or no device: none visible */
        cudaGetLastError();
        c = 0;
    }
    *n = c;
    return LP_OK;
}

int lp_cuda_pointer_device(const void *p, int *device) {
    cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    CU(cudaPointerGetAttributes(&at, p));
    *device = (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged) ? at.device : -1;
    if (*device < -1) *device = 0;
    return LP_OK;
}

int lp_cuda_stream_sync(uintptr_t s) {
    cudaStream_t st = s == 1 ? cudaStreamLegacy : s == 2 ? cudaStreamPerThread : (cudaStream_t)s;
    CU(cudaStreamSynchronize(st));
    return LP_OK;
}

}  /* extern "C" */
