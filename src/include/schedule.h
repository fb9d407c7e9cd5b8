/* schedule.h: schedules, the one form every algorithm takes, and the request that runs one.
 *
 * Words (used everywhere in src/):
 *   request   one collective operation (lp_req_t): the call's arguments, its schedule, its
 *             progress and its scratch memory.  Blocking, nonblocking and persistent calls are
 *             all requests, run by the one progress engine (sched/progress.h).
 *   phase     a schedule is a sequence of phases, each started once the one before it has
 *             completed on this rank.  Phase i is described by the algorithm's phase function,
 *             a pure function of the call and i, filled in when the phase begins.
 *   lane      a phase is a set of lanes that run at once.  A lane is a sequence of n steps of
 *             one primitive; step k works on chunk k, bytes [k cb, min((k+1) cb, bytes)) of the
 *             lane's regions (cb: the lane's chunk bytes, a multiple of the element size).
 *   region    where a lane's step k reads or writes: base + k * stride (a contiguous range), or
 *             base + (k mod slots) * stride (a ring of chunk slots, reused every `slots` steps).
 *   window    a lane keeps at most W steps in flight (MPI transfers, device work).
 *   dependency  step k of lane L waits until step k + lag of lane M has completed (lag < 0:
 *             a slot is reused, LP_ALL: all of M); steps of one lane complete in order.
 *
 * Primitives (lane kinds):
 *   SEND, RECV   MPI point-to-point of chunk k with a peer (MPI_Isend / MPI_Irecv)
 *   REDUCE       out[k] = x[k] op y[k], local (on the device for device memory on CUDA-aware MPI)
 *   COPY, SCALE  out[k] = x[k] (with streaming stores where the lane says nt); out[k] /= P
 *                (AVG's division, once, on a finished result)
 *   XPORT        a transport's local step, behind its interface (lp_xport_t below: the engine
 *                knows no transport): the single-copy reads of alg_ring_cma.c (process_vm_readv
 *                of the peers' buffers, folded or stored), the rounds of alg_ring_shm.c over a
 *                shared segment (step k is round k: bytes = steps, cb = 1; a step starts once
 *                the transport's ready() says the peers are there: a poll, the engine spins,
 *                then sleeps through the transport's arm/sleep between polls)
 *   NARROW       acc_dtype: out[k] = x[k] rounded from float32 to the 16-bit type (out's chunks
 *                are half the bytes of x's: region 0's stride is cb / 2)
 *   NATIVE       the MPI library's own collective on piece k (MPI_Iallreduce, ...; its blocking
 *                form in a blocking call; its persistent form in a persistent request)
 *   DEV          device work on the lane's stream (copy to host / to device, device reduce,
 *                scale; up to LP_DOPS_MAX of them), then an event; done once the event has
 *                completed
 *
 * The compound primitives of NCCL and of the literature are lanes chained by dependencies:
 * receive-reduce = RECV, then REDUCE after it; receive-reduce-send = RECV, REDUCE, SEND;
 * receive-copy-send = RECV into the output, then SEND after it.  An algorithm is a file with
 * a plan (phases and scratch) and a phase function that builds lanes with the lp_lane_*
 * helpers below (schedule.c); it never calls MPI itself and never observes a completion. */
#ifndef LPMPI_SCHEDULE_H
#define LPMPI_SCHEDULE_H

#include "lpmpi.h"

/* lane kinds */
enum { LP_STEP_SEND, LP_STEP_RECV, LP_STEP_REDUCE, LP_STEP_COPY, LP_STEP_SCALE, LP_STEP_NARROW,
       LP_STEP_XPORT, LP_STEP_NATIVE, LP_STEP_DEV };
/* a transport's steps, behind one interface: the progress engine (sched/progress.h) calls these and
 * names no transport.  XPORT lanes (alg_ring_cma.c, alg_ring_shm.c) run step(); NATIVE lanes
 * (the MPI library's own collectives, alg_native.c) issue() an MPI request.  A transport whose
 * steps wait for its peers (ready() == 0) tells the engine how to wait for them asleep: arm,
 * then one more pass over the steps, then sleep (which disarms); gone() names a peer process
 * that died meanwhile (MPI notices dead peers of its own transfers; nobody else would). */
struct lp_lane_s;
struct lp_args;
typedef struct lp_xport {
    const char *name;
    const char *waits_for;      /* what a waiting step waits for, in words (stall reports) */
    int (*ready)(const struct lp_lane_s *l, size_t k);          /* NULL: always */
    int (*step)(const struct lp_lane_s *l, size_t k, char *out, size_t len);
    int (*issue)(const struct lp_lane_s *l, size_t k, MPI_Request *q, MPI_Request *persistent,
                 int *done);
    const void *(*segment)(const struct lp_args *a);   /* what a waiter waits on (NULL: yield) */
    void (*arm)(const void *seg, int rank, uint32_t *v);
    void (*disarm)(const void *seg, int rank);
    void (*sleep)(const void *seg, int rank, uint32_t v, long timeout_ns);   /* disarms */
    int (*gone)(const void *seg, int rank, int *pid);  /* a dead peer's rank (its pid), or -1 */
} lp_xport_t;

/* device operations of a DEV lane's step */
enum { LP_DOP_D2H, LP_DOP_H2D, LP_DOP_D2D, LP_DOP_REDUCE, LP_DOP_SCALE };

enum { LP_LANES_MAX = 16, LP_REGIONS_MAX = 6, LP_DEPS_MAX = 6, LP_DOPS_MAX = 4 };
#define LP_ALL ((long)1 << 60)   /* dependency lag: every step of the other lane */

struct lp_args;

typedef struct {
    char *base;
    size_t stride;          /* bytes between chunks (slot size for rings) */
    unsigned slots;         /* 0: contiguous; else a ring of `slots` chunk slots */
    size_t mask;            /* chunk k's slot is k & mask when not 0 (contiguous: all ones;
                               a ring of 2^j slots: 2^j - 1), else k mod slots */
} lp_region_t;

typedef struct {
    unsigned char kind, dst, x, y;   /* LP_DOP_*, region indices */
} lp_dop_t;

typedef struct lp_lane_s {
    unsigned char kind;     /* LP_STEP_* */
    unsigned char sub;      /* XPORT: the transport's own kind of step */
    unsigned char ndeps, ndops, stream;
    unsigned char nt;       /* COPY on host memory: write with streaming stores (lp_copy_out) */
    int peer, tag;          /* SEND, RECV */
    size_t bytes, cb, n;    /* bytes covered, chunk bytes, steps */
    size_t W;               /* steps in flight (SEND, RECV, NATIVE, DEV) */
    const struct lp_args *a;   /* the arguments its data belongs to: dtype, op, P, device */
    lp_req_t *owner;        /* the request whose phase it is */
    lp_region_t r[LP_REGIONS_MAX];   /* SEND/RECV: r[0]; REDUCE: r[0] = r[1] op r[2]; COPY:
                                        r[0] = r[1]; SCALE: r[0]; NATIVE: r[0] send, r[1] recv */
    /* (lag clamped to an int: steps never reach 2^31; 8 bytes an entry: six of them take the
     * bytes three of {char, long} took, the lane's size unchanged) */
    struct { int lag; unsigned char lane; } dep[LP_DEPS_MAX];
    lp_dop_t dop[LP_DOPS_MAX];
    lp_op_t rop;            /* REDUCE: the op (the call's, or LOR for one rank's logical ops) */
    const lp_xport_t *xp;   /* XPORT, NATIVE: whose steps */
    size_t cma_off;         /* CMA_REDUCE: the byte offset of its block in every rank's buffers */
    lp_reduce_fn fn;        /* REDUCE on host memory: its kernel */
    /* progress (sched/progress.h only) */
    size_t issued, done;
    size_t islot, dslot;    /* issued mod W, done mod W: the next request slot / event */
    size_t req0;            /* first of its W request slots */
    int ev0;                /* DEV: first of its W events */
} lp_lane_t;

/* what a request needs, from its schedule's plan (sizes in bytes) */
typedef struct {
    int nphases;
    size_t work;            /* scratch in the memory of the call's buffers (lp_req_t.work) */
    size_t pinned;          /* pinned host memory (STAGED transport) */
    size_t device;          /* device memory (STAGED transport) */
    int events;             /* device events */
    int narrows;            /* acc_dtype: the schedule writes the 16-bit result (a->acc) itself;
                               else the engine adds a last phase that rounds the float32 result */
} lp_plan_t;

/* an algorithm's schedule (one per algorithm and collective; registry.c lists them) */
typedef struct {
    /* phases and memory of a call */
    int (*plan)(lp_req_t *r, const struct lp_args *a, lp_plan_t *p);
    /* build the lanes of phase i (0 <= i < nphases); a phase without lanes is skipped */
    int (*phase)(lp_req_t *r, const struct lp_args *a, int i);
    /* optional: 1 when this call must run on host memory (device buffers are then staged
     * whole through pinned host memory even with CUDA-aware MPI) */
    int (*host_only)(const struct lp_args *a);
    /* optional: persistent requests, once at init / at free (native: MPI_Allreduce_init ...) */
    int (*init)(lp_req_t *r, const struct lp_args *a);
    void (*fini)(lp_req_t *r);
} lp_sched_t;
/* a plan of one phase and no memory (a schedule's plan where it needs nothing else) */
int lp_plan_one_phase(lp_req_t *r, const struct lp_args *a, lp_plan_t *p);

/* ---- building a phase (schedule.c) ----
 * Each adds a lane to the phase being built and returns it; chunk bytes cb (0: one chunk for
 * everything); SEND/RECV/NATIVE/DEV lanes start with the engine's window (lp_window), which a
 * schedule may change (l->W).  lp_lane_scale returns NULL (no lane) unless the op is AVG;
 * lp_lane_after and lp_lane_slots accept NULL. */
lp_lane_t *lp_lane_send(lp_req_t *r, const struct lp_args *a, const void *buf, size_t bytes,
                        size_t cb, int peer, int tag);
lp_lane_t *lp_lane_recv(lp_req_t *r, const struct lp_args *a, void *buf, size_t bytes, size_t cb,
                        int peer, int tag);
lp_lane_t *lp_lane_reduce(lp_req_t *r, const struct lp_args *a, void *out, const void *x,
                          const void *y, size_t bytes, size_t cb);
lp_lane_t *lp_lane_copy(lp_req_t *r, const struct lp_args *a, void *dst, const void *src,
                        size_t bytes, size_t cb);
lp_lane_t *lp_lane_scale(lp_req_t *r, const struct lp_args *a, void *buf, size_t bytes, size_t cb);
/* a logical op's (LAND, LOR, LXOR) 0 or 1 of one rank's data, src into dst (x LOR x: a result
 * no other rank's data went into, as one rank's call or a prefix's rank 0); NULL (no lane)
 * unless the call reduces with a logical op */
lp_lane_t *lp_lane_logical(lp_req_t *r, const struct lp_args *a, void *dst, const void *src, size_t bytes);
/* an XPORT lane of transport xp, its step kind sub, writing out (the transport sets its other
 * regions; out may be NULL, and a lane of n rounds has bytes = n, cb = 1) */
lp_lane_t *lp_lane_xport(lp_req_t *r, const struct lp_args *a, const lp_xport_t *xp, int sub, void *out,
                         size_t bytes, size_t cb);
/* acc_dtype: the 16-bit dst (bytes / 2) from the float32 src (bytes), chunk k of cb bytes of src */
lp_lane_t *lp_lane_narrow(lp_req_t *r, const struct lp_args *a, void *dst, const void *src,
                          size_t bytes, size_t cb);
/* a NATIVE lane: xp's issue() of piece k (alg_native.c: the MPI library's collective) */
lp_lane_t *lp_lane_native(lp_req_t *r, const struct lp_args *a, const lp_xport_t *xp, const void *sbuf,
                          void *rbuf, size_t bytes, size_t cb);
/* a DEV lane on `stream`; add its device operations with lp_lane_dop, its regions with
 * lp_lane_region / lp_lane_slots */
lp_lane_t *lp_lane_dev(lp_req_t *r, const struct lp_args *a, int stream, size_t bytes, size_t cb);
void lp_lane_dop(lp_lane_t *l, int kind, int dst, int x, int y);
/* region i of l: contiguous from base (stride = chunk bytes) */
static inline void lp_lane_region(lp_lane_t *l, int i, const void *base) {
    if (!l) return;
    l->r[i].base = (char *)base;
    l->r[i].stride = l->cb;
    l->r[i].slots = 0;
    l->r[i].mask = ~(size_t)0;
}
/* region i of l: a ring of `slots` chunk slots of `stride` bytes from base */
static inline void lp_lane_slots(lp_lane_t *l, int i, const void *base, size_t stride, unsigned slots) {
    if (!l) return;
    l->r[i].base = (char *)base;
    l->r[i].stride = stride;
    l->r[i].slots = slots ? slots : 1;
    l->r[i].mask = (l->r[i].slots & (l->r[i].slots - 1)) ? 0 : l->r[i].slots - 1;
}
/* step k of l waits for step k + lag of m (m NULL: no dependency) */
void lp_lane_after(lp_lane_t *l, const lp_lane_t *m, long lag);

/* chunk bytes of whole-buffer transfers: the largest MPI message, in whole elements */
#define lp_piece_bytes(a) ((a)->piece)

#endif
