/* device.c: device memory in the engine.
 *
 * Which device operations (devops.h) and which transport (internal.h: STAGED or AWARE) a call
 * on device memory uses, the device events of requests, and whole-buffer staging for the
 * algorithms that have no staged pipeline of their own (a schedule around theirs).
 *
 * Transport: LPMPI_CUDA_AWARE=0/1 decides; otherwise the MPI library is asked once
 * (Open MPI: MPIX_Query_cuda_support from mpi-ext.h; MPICH >= 4.1:
 * MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)); any other library, and the emulation,
 * stage through the host.
 * Emulation (LPMPI_EMULATE_STAGING=1): every buffer, host arrays included, is "device" memory
 * handled by lp_devops_emul, so the staged transport (or, with LPMPI_CUDA_AWARE=1, the AWARE
 * routing) runs on machines without a GPU. */
#include "engine.h"
#include <pthread.h>
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
void lp_device_knobs(int *emu, int *aware) {
    *emu = emulate;
    *aware = aware_cfg;
}
int lp_device_emulated(void) { return emulate; }
int lp_device_aware(void) { return aware_cfg; }

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

/* ---------------------------------------------------------------- events of requests */
/* LP_MAX_EVENTS event numbers shared by all outstanding requests: each request reserves a
 * contiguous range once (first fit) and gives it back when it is freed */
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char ev_used[LP_MAX_EVENTS];

int lp_events_reserve(int n, int *first) {
    int run = 0;
    pthread_mutex_lock(&ev_lock);
    for (int i = 0; i < LP_MAX_EVENTS; i++) {
        run = ev_used[i] ? 0 : run + 1;
        if (run == n) {
            *first = i - n + 1;
            memset(ev_used + *first, 1, (size_t)n);
            pthread_mutex_unlock(&ev_lock);
            return LP_OK;
        }
    }
    pthread_mutex_unlock(&ev_lock);
    return LP_FAIL(LP_ERR_NOMEM, "out of device events: too many device requests outstanding "
                   "(%d events in all)", LP_MAX_EVENTS);
}

void lp_events_release(int first, int n) {
    if (first < 0 || n <= 0) return;
    pthread_mutex_lock(&ev_lock);
    memset(ev_used + first, 0, (size_t)n);
    pthread_mutex_unlock(&ev_lock);
}

/* ---------------------------------------------------------------- STAGED: whole buffer */
/* The algorithms without a staged pipeline of their own, on device memory over MPI without
 * device support (and native's user ops on CUDA-aware MPI, which run on the host): copy to
 * pinned host memory, run the host schedule r->inner there, copy the result back, no overlap.
 * This is also the "copy to host + MPI's native collective + copy back" baseline of the
 * benchmark (algorithm="native" on device memory without CUDA-aware MPI).
 *   phase 0             DEV: D2H sendbuf -> host copy (bcast: on the root)
 *   phases 1 .. n       the inner schedule's phases on the host copies (r->h)
 *   phase n + 1         DEV: H2D host result -> recvbuf (where this rank has a result) */

/* the bytes each copy moves: sendbuf's and recvbuf's (their blocks: allgather's recvbuf and
 * reduce_scatter's sendbuf hold P); in place the one buffer, all of it, goes down (allgather:
 * the rank's block at its place; reduce_scatter: the P blocks, the result back from the first) */
static size_t down_bytes(const lp_args_t *a) {
    size_t s = lp_buf_bytes(a->coll, a->count, a->esize, a->size, 0);
    size_t r = lp_buf_bytes(a->coll, a->count, a->esize, a->size, 1);
    return a->sbuf == a->rbuf && r > s ? r : s;
}
static size_t up_bytes(const lp_args_t *a) { return lp_buf_bytes(a->coll, a->count, a->esize, a->size, 1); }

/* the host copies' arguments (pinned area: sendbuf's copy, then recvbuf's unless in place) */
static void host_args(lp_req_t *r, const lp_args_t *a, lp_args_t *h) {
    char *hs = lp_req_area(r, LP_AREA_PINNED);
    *h = *a;
    h->dev = NULL;
    h->xport = LP_XPORT_HOST;
    h->sbuf = hs;
    h->rbuf = a->rbuf ? (a->sbuf == a->rbuf ? hs : hs + down_bytes(a)) : NULL;
}

static int whole_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    int rc = LP_OK;
    lp_args_t h;
    lp_plan_t in = {0};
    host_args(r, a, &h);
    LP_TRY(r->inner->plan(r, &h, &in));
    p->nphases = in.nphases + 2;
    p->work = in.work;         /* host memory (request.c) */
    p->pinned = down_bytes(a) + (a->rbuf && a->sbuf != a->rbuf ? up_bytes(a) : 0);
    p->events = 1;
cleanup:
    return rc;
}

static int whole_phase(lp_req_t *r, const lp_args_t *a, int i) {
    host_args(r, a, &r->h);
    if (i == 0) {
        if (lp_on(lp_traits(a->coll)->input, a->rank, a->root)) {
            lp_lane_t *l = lp_lane_dev(r, a, 1, down_bytes(a), 0);
            lp_lane_region(l, 0, r->h.sbuf);
            lp_lane_region(l, 1, a->sbuf);
            lp_lane_dop(l, LP_DOP_D2H, 0, 1, 0);
        }
    } else if (i < r->nphases - 1) {
        return r->inner->phase(r, &r->h, i - 1);
    } else if (lp_on(lp_traits(a->coll)->result, a->rank, a->root)) {
        lp_lane_t *l = lp_lane_dev(r, a, 1, up_bytes(a), 0);
        lp_lane_region(l, 0, a->rbuf);
        lp_lane_region(l, 1, r->h.rbuf);
        lp_lane_dop(l, LP_DOP_H2D, 0, 1, 0);
    }
    return LP_OK;
}

const lp_sched_t lp_sched_stage_whole = {whole_plan, whole_phase, NULL, NULL, NULL};
