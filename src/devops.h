/* devops.h: the "device operations" the engine needs for device memory, behind one interface
 * with two implementations:
 *
 *   lp_devops_cuda   the CUDA runtime (src/cuda/devops_cuda.cu, built when nvcc is found;
 *                    defines LPMPI_HAVE_CUDA): cudaMemcpyAsync on the engine's own non-blocking
 *                    streams, events, pinned host and device arenas, the reduction kernels of
 *                    src/cuda/kernels.cu.
 *   lp_devops_emul   a host emulation (src/devops_emul.c): "device" memory is host memory, copies
 *                    are memcpy and reductions the host kernels of reduce.c, but every operation
 *                    is queued on its stream and runs only when an event recorded after it is
 *                    found complete (the first query of an event always says "not yet") or the
 *                    stream is synchronised.  A pipeline that reads a staging buffer before its
 *                    event completed therefore reads stale bytes and fails the tests, on any
 *                    machine (LPMPI_EMULATE_STAGING=1).
 *
 * Streams and events are small integers (0 ..), created on first use, per device.  Every call
 * returns an LP_* status and records a message (lp_errmsg) on failure.  Operations are
 * asynchronous with respect to the host: only query (when *done is set) and sync order them.
 * Arenas: grow-only scratch reused call after call; asking for a bigger one frees the old one
 * (after synchronising), so a pointer is valid until the next request of the same arena. */
#ifndef LPMPI_DEVOPS_H
#define LPMPI_DEVOPS_H

#include <stddef.h>
#include <stdint.h>
#include "lp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LP_ARENA_PINNED = 0, LP_ARENA_DEVICE = 1 };
#define LP_NARENAS 4            /* arenas of each kind (slot 0 .. 3) */
#define LP_MAX_STREAMS 8
#define LP_MAX_EVENTS (4 * LP_STAGING_MAX)   /* two chains x two directions */

typedef struct lp_devops {
    const char *name;
    /* make the device that owns ptr current (CUDA: cudaSetDevice); *saved gets what to give
     * back to unbind.  ptr NULL: keep the current device. */
    int (*bind)(const void *ptr, int *saved);
    void (*unbind)(int saved);
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
    /* arena `slot` of `kind`, at least `bytes` (64-byte aligned) */
    int (*arena)(int kind, int slot, size_t bytes, void **out);
    void (*release)(void);                 /* free every stream, event and arena (finalize) */
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
