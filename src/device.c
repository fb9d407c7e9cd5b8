/* device.c: device memory in the engine.
 *
 * Which device operations (devops.h) and which transport (internal.h: STAGED or AWARE) a call
 * on device memory uses, the local device work of the AWARE transport (one operation on
 * stream 0, then wait: MPI reads the data next), scratch space in the buffers' memory, and
 * whole-buffer staging for the algorithms that have no staged pipeline of their own.
 *
 * Transport: LPMPI_CUDA_AWARE=0/1 decides; otherwise the MPI library is asked once
 * (Open MPI: MPIX_Query_cuda_support from mpi-ext.h; MPICH >= 4.1:
 * MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)); any other library, and the emulation,
 * stage through the host.
 * Emulation (LPMPI_EMULATE_STAGING=1): every buffer, host arrays included, is "device" memory
 * handled by lp_devops_emul, so the staged transport (or, with LPMPI_CUDA_AWARE=1, the AWARE
 * routing) runs on machines without a GPU. */
#include "engine.h"
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

int lp_staging = LP_STAGING_DEFAULT;
static int emulate;
static int aware_cfg = -1;        /* -1: ask the MPI library */
static int aware_detected = -1;
#ifdef LPMPI_HAVE_CUDA
static int cuda_used;
#endif

void lp_configure_device(int emu, int aware, int staging) {
    emulate = emu;
    aware_cfg = aware < 0 ? -1 : aware != 0;
    if (staging > 0) lp_staging = staging > LP_STAGING_MAX ? LP_STAGING_MAX : staging;
}

int lp_staging_buffers(void) { return lp_staging; }
int lp_device_emulated(void) { return emulate; }

int lp_cuda_built(void) {
#ifdef LPMPI_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

static int detect_cuda_aware(void) {
    int flag = 0;
#if defined(OPEN_MPI) && OPEN_MPI && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    flag = MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &flag) != MPI_SUCCESS) flag = 0;
#endif
    return flag != 0;
}

int lp_cuda_aware(void) {
    if (aware_cfg >= 0) return aware_cfg;
    if (emulate) return 0;
    if (aware_detected < 0) aware_detected = detect_cuda_aware();
    return aware_detected;
}

int lp_device_route(lp_mem_t mem, const lp_devops_t **dev, int *xport) {
    *dev = NULL;
    *xport = LP_XPORT_HOST;
    if (emulate) {
        *dev = &lp_devops_emul;
    } else if (mem == LP_MEM_HOST) {
        return LP_OK;
    } else {
#ifdef LPMPI_HAVE_CUDA
        *dev = &lp_devops_cuda;
        cuda_used = 1;
#else
        return LP_FAIL(LP_ERR_UNSUPPORTED, "this lpmpi build has no CUDA support (built without nvcc)");
#endif
    }
    *xport = lp_cuda_aware() ? LP_XPORT_AWARE : LP_XPORT_STAGED;
    return LP_OK;
}

void lp_device_release(void) {
    lp_devops_emul.release();
#ifdef LPMPI_HAVE_CUDA
    if (cuda_used) lp_devops_cuda.release();
#endif
}

void lp_device_stats(long *not_ready, long *ops) { lp_emul_stats(not_ready, ops); }

int lp_device_count(int *n) {
#ifdef LPMPI_HAVE_CUDA
    return lp_cuda_device_count(n);
#else
    *n = 0;
    return LP_OK;
#endif
}

int lp_device_pointer(const void *p, int *device) {
#ifdef LPMPI_HAVE_CUDA
    return lp_cuda_pointer_device(p, device);
#else
    (void)p;
    *device = -1;
    return LP_FAIL(LP_ERR_UNSUPPORTED, "this lpmpi build has no CUDA support");
#endif
}

int lp_device_stream_sync(uintptr_t stream) {
    if (emulate) return LP_OK;
#ifdef LPMPI_HAVE_CUDA
    return lp_cuda_stream_sync(stream);
#else
    (void)stream;
    return LP_FAIL(LP_ERR_UNSUPPORTED, "this lpmpi build has no CUDA support");
#endif
}

/* ---------------------------------------------------------------- AWARE: local device work */
int lp_dev_reduce_now(const lp_args_t *a, void *out, const void *x, const void *y, size_t n) {
    int rc = LP_OK;
    if (!n) return LP_OK;
    LP_TRY(a->dev->reduce(out, x, y, n, a->dt, a->op, 0));
    LP_TRY(a->dev->sync(0));
cleanup:
    return rc;
}

int lp_dev_copy_now(const lp_args_t *a, void *dst, const void *src, size_t bytes) {
    int rc = LP_OK;
    LP_TRY(a->dev->d2d(dst, src, bytes, 0));
    LP_TRY(a->dev->sync(0));
cleanup:
    return rc;
}

int lp_dev_scale_now(const lp_args_t *a, void *buf, size_t n) {
    int rc = LP_OK;
    LP_TRY(a->dev->scale(buf, n, a->dt, (double)a->size, 0));
    LP_TRY(a->dev->sync(0));
cleanup:
    return rc;
}

int lp_scratch(const lp_args_t *a, size_t bytes, void **out) {
    if (a->dev) return a->dev->arena(LP_ARENA_DEVICE, 0, bytes, out);
    return lp_ctx_scratch(a->ctx, bytes, out);
}

/* ---------------------------------------------------------------- STAGED: whole buffer */
/* Copy to pinned host memory, run the host algorithm, copy the result back: no overlap.  This
 * is also the "copy to host + MPI's native collective + copy back" baseline of the benchmark
 * (algorithm="native" on device memory without CUDA-aware MPI).  Pinned arenas 1 and 2. */
int lp_stage_whole(const lp_args_t *a, lp_alg_fn run) {
    int rc = LP_OK;
    const lp_devops_t *d = a->dev;
    size_t bytes = a->count * a->esize;
    int is_root = a->rank == a->root;
    int inplace = a->sbuf == a->rbuf;
    int result = a->coll == LP_ALLREDUCE || (a->coll == LP_REDUCE && is_root) ||
                 (a->coll == LP_BCAST && !is_root);
    void *hs = NULL, *hr = NULL;
    lp_args_t h = *a;
    LP_TRY(d->arena(LP_ARENA_PINNED, 1, bytes, &hs));
    hr = hs;
    if (!inplace && a->rbuf) LP_TRY(d->arena(LP_ARENA_PINNED, 2, bytes, &hr));
    if (a->coll != LP_BCAST || is_root) {
        LP_TRY(d->d2h(hs, a->sbuf, bytes, 0));
        LP_TRY(d->sync(0));
    }
    h.dev = NULL;
    h.xport = LP_XPORT_HOST;
    h.sbuf = hs;
    h.rbuf = a->rbuf ? hr : NULL;
    LP_TRY(run(&h));
    if (result) {
        LP_TRY(d->h2d(a->rbuf, h.rbuf, bytes, 0));
        LP_TRY(d->sync(0));
    }
cleanup:
    return rc;
}
