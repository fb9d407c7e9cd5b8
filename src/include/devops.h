/* devops.h: the "device operations" the engine needs for device memory, behind one interface
 * with two implementations:
 *
 *   lp_devops_cuda   the CUDA runtime (src/device/cuda/devops_cuda.cu, built when nvcc is found;
 *                    defines LPMPI_HAVE_CUDA): cudaMemcpyAsync on the engine's own non-blocking
 *                    streams, events, pinned host and device memory, the reduction kernels
 *                    of src/device/cuda/kernels.cu.
 *   lp_devops_emul   a host emulation (src/device/devops_emul.c): "device" memory is host memory, copies
 *                    are memcpy and reductions the host kernels of reduce.c, but every operation
 *                    is queued on its stream and runs only when an event recorded after it is
 *                    found complete (the first query of an event always says "not yet") or the
 *                    stream is synchronised.  A pipeline that reads a staging buffer before its
 *                    event completed therefore reads stale bytes and fails the tests, on any
 *                    machine (LPMPI_EMULATE_STAGING=1).
 *
 * Streams and events are small integers (0 ..), created on first use, per device; events are
 * handed out to requests by device.c (lp_events_reserve), so that outstanding requests never
 * share one.  Every call returns an LP_* status and records a message (lp_errmsg) on failure.
 * Operations are asynchronous with respect to the host: only query (when *done is set) and
 * sync order them.  Memory: each request allocates its own pinned and device scratch once
 * (mem_alloc) and frees it when it is freed (mem_free). */
#ifndef LPMPI_DEVOPS_H
#define LPMPI_DEVOPS_H

#include <stddef.h>
#include <stdint.h>
#include "lp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LP_ALLOC_PINNED = 0, LP_ALLOC_DEVICE = 1 };
#define LP_MAX_STREAMS 8
#define LP_MAX_EVENTS 4096      /* for all outstanding requests (a staged LP takes 4 W at most) */

typedef struct lp_devops {
    const char *name;
    /* the device that owns ptr (-1: none / the current one) */
    int (*locate)(const void *ptr, int *device);
    /* make `device` current for this thread (CUDA: cudaSetDevice; device < 0: keep the
     * current one); *saved gets what to give back to leave */
    int (*enter)(int device, int *saved);
    void (*leave)(int saved);
    int (*d2h)(void *dst, const void *src, size_t bytes, int stream);
    int (*h2d)(void *dst, const void *src, size_t bytes, int stream);
    int (*d2d)(void *dst, const void *src, size_t bytes, int stream);
    /* out = a op b, n elements (AVG: SUM); out may equal a or b */
    int (*reduce)(void *out, const void *a, const void *b, size_t n, lp_dtype_t dt, lp_op_t op,
                  int stream);
    int (*scale)(void *buf, size_t n, lp_dtype_t dt, double divisor, int stream);
    int (*record)(int event, int stream);
    int (*query)(int event, int *done);    /* *done = 1 once the work before the record ran */
    int (*sync)(int stream);
    /* `bytes` of pinned host or device memory (kind LP_ALLOC_*), on the current device */
    int (*mem_alloc)(int kind, size_t bytes, void **out);
    void (*mem_free)(int kind, void *p);   /* after every operation that used it */
    void (*release)(void);                 /* free every stream and event (finalize) */
} lp_devops_t;

extern const lp_devops_t lp_devops_emul;
#ifdef LPMPI_HAVE_CUDA
extern const lp_devops_t lp_devops_cuda;
/* CUDA helpers for the bindings (devops_cuda.cu) */
int lp_cuda_device_count(int *n);
int lp_cuda_pointer_device(const void *p, int *device);   /* -1: not device memory */
int lp_cuda_stream_sync(uintptr_t stream);
#endif

/* emulation counters (tests): events queried while not yet complete, operations run */
void lp_emul_stats(long *not_ready, long *ops);

#ifdef __cplusplus
}
#endif
#endif
