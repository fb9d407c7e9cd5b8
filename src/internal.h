/* internal.h: what the algorithm files share (arguments of a call, the registry's types, local
 * work on host or device memory, point-to-point helpers, block and neighbour arithmetic, tags).
 * Not part of the public C interface; the engine's own state is in engine.h. */
#ifndef LPMPI_INTERNAL_H
#define LPMPI_INTERNAL_H

#include "lpmpi.h"
#include "lp_status.h"
#include "devops.h"
#include <string.h>

/* ---- per-communicator context (context.c; its fields: engine.h) ----
 * Algorithms use it only for scratch space and cached request/index arrays. */
typedef struct lp_ctx lp_ctx_t;
/* scratch space of at least `bytes` (64-byte aligned); invalidates earlier pointers */
int lp_ctx_scratch(lp_ctx_t *ctx, size_t bytes, void **out);
int lp_ctx_requests(lp_ctx_t *ctx, size_t n, MPI_Request **out);
int lp_ctx_indices(lp_ctx_t *ctx, size_t n, int **out);   /* for MPI_Waitsome */

/* ---- how the bytes of device memory travel (device.c) ----
 *   HOST    host memory: the algorithms as written.
 *   STAGED  device memory, MPI without device support: the LP pipeline stages each chunk
 *           through pinned host slots (alg_lp_staged.c); the other algorithms run on a pinned
 *           host copy of the whole buffer (lp_stage_whole: copy to host, run, copy back).
 *   AWARE   device memory, CUDA-aware MPI: device pointers go to MPI as they are; the
 *           algorithms' local work (reductions, copies, AVG, scratch) runs on the device
 *           through a->dev (lp_reduce_local, lp_copy, lp_finish, lp_scratch below). */
enum { LP_XPORT_HOST = 0, LP_XPORT_STAGED = 1, LP_XPORT_AWARE = 2 };

/* devops and transport for a call on memory `mem` (emulation: every call) */
int lp_device_route(lp_mem_t mem, const lp_devops_t **dev, int *xport);

/* ---- arguments of one collective call, resolved and validated ---- */
typedef struct {
    lp_ctx_t *ctx;
    MPI_Comm comm;          /* ctx->comm */
    int rank, size;
    lp_coll_t coll;
    const char *sbuf;       /* data contributed by this rank (bcast: the buffer) */
    char *rbuf;             /* result (reduce: root only, NULL elsewhere) */
    size_t count;           /* elements */
    lp_dtype_t dt;
    size_t esize;           /* bytes per element */
    lp_op_t op;
    lp_reduce_fn fn;        /* NULL for bcast */
    int root;
    size_t chunk_elems;     /* >= 1, chunked algorithms only */
    lp_mem_t mem;
    const lp_devops_t *dev; /* non-NULL: sbuf/rbuf are device memory, handled by these ops */
    int xport;              /* LP_XPORT_* */
    size_t staging;         /* staged pipeline: staging buffers (chunks in flight) per direction */
} lp_args_t;

typedef int (*lp_alg_fn)(const lp_args_t *a);

/* alpha-beta-gamma machine model: seconds per message, per byte moved, per byte reduced */
typedef struct { double alpha, beta, gamma; } lp_model_t;

/* cost model of an algorithm: predicted seconds for P ranks, n bytes, chunk c bytes */
typedef double (*lp_cost_fn)(const lp_model_t *m, int P, double n, double c);

/* one entry of the single algorithm registry (registry.c) */
typedef struct {
    const char *name;
    lp_coll_t coll;
    int chunked;            /* honours chunk_bytes */
    lp_alg_fn run;
    lp_cost_fn cost;
    lp_alg_fn staged;       /* its own pipeline on the STAGED transport; NULL: lp_stage_whole */
} lp_algo_t;

extern const lp_algo_t lp_algos[];
extern const int lp_nalgos;

/* ---- algorithms (one file per family) ---- */
int lp_allreduce_lp(const lp_args_t *a);
int lp_reduce_lp(const lp_args_t *a);
int lp_bcast_lp(const lp_args_t *a);
int lp_allreduce_mst(const lp_args_t *a);
int lp_reduce_mst(const lp_args_t *a);
int lp_bcast_mst(const lp_args_t *a);
int lp_allreduce_be(const lp_args_t *a);
int lp_reduce_be(const lp_args_t *a);
int lp_bcast_be(const lp_args_t *a);
int lp_allreduce_ring(const lp_args_t *a);
int lp_allreduce_native(const lp_args_t *a);
int lp_reduce_native(const lp_args_t *a);
int lp_bcast_native(const lp_args_t *a);
int lp_allreduce_lp_staged(const lp_args_t *a);
int lp_reduce_lp_staged(const lp_args_t *a);
int lp_bcast_lp_staged(const lp_args_t *a);

/* ---- point-to-point helpers (p2p.c) ----
 * Whole-buffer transfers split into pieces of at most lp_max_msg_bytes, so any byte size
 * works; all pieces of one transfer use one tag and arrive in order (MPI non-overtaking). */
int lp_sendrecv(const lp_args_t *a, const void *sb, size_t sbytes, int dst,
                void *rb, size_t rbytes, int src, int tag);
int lp_send(const lp_args_t *a, const void *b, size_t bytes, int dst, int tag);
int lp_recv(const lp_args_t *a, void *b, size_t bytes, int src, int tag);

/* ---- block / neighbour arithmetic (p2p.c) ---- */
/* block i of `nblocks` near-equal blocks of `count` elements: [*off, *off + *len) */
static inline void lp_block(size_t count, int nblocks, int i, size_t *off, size_t *len) {
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks, ui = (size_t)i;
    *off = ui * q + (ui < r ? ui : r);
    *len = q + (ui < r ? 1 : 0);
}
/* byte offset and length of blocks [lo, hi) */
static inline void lp_blocks(size_t count, int nblocks, int lo, int hi, size_t *off, size_t *len) {
    size_t o1, l1, o2, l2;
    if (hi <= lo) { lp_block(count, nblocks, lo, off, &l1); *len = 0; return; }
    lp_block(count, nblocks, lo, &o1, &l1);
    lp_block(count, nblocks, hi - 1, &o2, &l2);
    *off = o1; *len = o2 + l2 - o1;
}
static inline int lp_pof2_floor(int p) { int q = 1; while (q * 2 <= p) q *= 2; return q; }
/* rank <-> virtual rank relative to root */
static inline int lp_vrank(int rank, int root, int size) { return (rank - root + size) % size; }
static inline int lp_rrank(int vrank, int root, int size) { return (vrank + root) % size; }

/* ---- local work, host or device (device.c) ----
 * The algorithms call these instead of a->fn, memcpy and lp_scale, so that on the AWARE
 * transport the same code runs on device pointers: each device operation runs on stream 0
 * and is waited for, since MPI touches the data next. */
int lp_dev_reduce_now(const lp_args_t *a, void *out, const void *x, const void *y, size_t n);
int lp_dev_copy_now(const lp_args_t *a, void *dst, const void *src, size_t bytes);
int lp_dev_scale_now(const lp_args_t *a, void *buf, size_t n);
/* scratch space in the memory of the call's buffers (host: the context's arena; device:
 * device arena 0); invalidates earlier pointers */
int lp_scratch(const lp_args_t *a, size_t bytes, void **out);
/* STAGED transport for algorithms without a pipeline of their own: copy the buffers into
 * pinned host memory, run the host algorithm `run` there, copy the result back */
int lp_stage_whole(const lp_args_t *a, lp_alg_fn run);
/* native on AWARE: 1 when MPI's own op handles (dt, op) (else lpmpi's user op, host only) */
int lp_native_builtin(lp_dtype_t dt, lp_op_t op);

/* out = x op y, n elements */
static inline int lp_reduce_local(const lp_args_t *a, void *out, const void *x, const void *y, size_t n) {
    if (a->dev) return lp_dev_reduce_now(a, out, x, y, n);
    if (n) a->fn(out, x, y, n);
    return LP_OK;
}
/* chain geometry shared by the host and staged LP pipelines: position v of `rank` on the chain
 * that starts at `head` and goes up (dir = 1) or down (dir = -1) in rank order, and the real
 * ranks of its neighbours v-1 (*left) and v+1 (*right), -1 at the ends */
static inline void lp_chain_pos(int rank, int head, int dir, int P, int *v, int *left, int *right) {
    *v = dir > 0 ? lp_vrank(rank, head, P) : lp_vrank(head, rank, P);
    *left = *v > 0 ? (head + dir * (*v - 1) + P) % P : -1;
    *right = *v < P - 1 ? (head + dir * (*v + 1) + P) % P : -1;
}

/* finishing touch on a result region computed by this rank: AVG divides by P */
static inline int lp_finish(const lp_args_t *a, void *buf, size_t n) {
    if (a->op != LP_AVG || n == 0) return LP_OK;
    if (a->dev) return lp_dev_scale_now(a, buf, n);
    lp_scale(buf, n, a->dt, (double)a->size);
    return LP_OK;
}
/* local copy that ignores empty and self copies */
static inline int lp_copy(const lp_args_t *a, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return LP_OK;
    if (a->dev) return lp_dev_copy_now(a, dst, src, bytes);
    memcpy(dst, src, bytes);
    return LP_OK;
}

/* knobs (config.c): chunks in flight per direction; staging buffers of the staged pipeline;
 * the largest single MPI message (p2p.c splits bigger transfers into pieces of this size) */
extern int lp_window;
extern int lp_staging;
extern size_t lp_max_msg_bytes;

/* tags: one per collective family keeps traces readable; ordering does the rest */
enum { LP_TAG_BCAST = 101, LP_TAG_REDUCE = 102, LP_TAG_ALLREDUCE = 103, LP_TAG_ALLREDUCE_BACK = 104,
       LP_TAG_RING = 105, LP_TAG_BE = 106, LP_TAG_MST = 107,
       LP_TAG_ALLREDUCE2 = 108, LP_TAG_ALLREDUCE2_BACK = 109 };

#endif
