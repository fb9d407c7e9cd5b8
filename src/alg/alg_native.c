/* native: the MPI library's own collectives, on lpmpi's private communicator.
 *
 * What: MPI_Allreduce / MPI_Reduce / MPI_Bcast.  Where the library lacks a type (float16,
 *   bfloat16), does not define an op on a type (MPI has no MAX or bitwise ops on MPI_C_BOOL),
 *   differs from numpy (MPI's floating MAX/MIN drop NaN, numpy's propagate it), or gets an op
 *   wrong (Open MPI's vectorized 8/16-bit integer SUM/PROD saturates instead of wrapping,
 *   open-mpi/ompi#8045), native runs the library's collective with lpmpi's own kernel
 *   registered through MPI_Op_create on a contiguous byte type, so results still follow the
 *   contract.  AVG is SUM followed by a local division (every rank divides identical sums:
 *   identical results).  Device memory on a CUDA-aware MPI: device pointers go to the library
 *   for its built-in (type, op) pairs; the pairs that need lpmpi's user op (a host function)
 *   run on a pinned host copy (whole-buffer staging: lp_sched_stage_whole, device.c).
 *
 * Steps: the library's own (MPICH: recursive doubling / binomial trees for small messages,
 *   Rabenseifner / scatter-allgather for large ones; see its cvars).
 *
 *   user buffers --> [split into pieces of <= lp_max_msg_bytes] --> MPI_Allreduce per piece
 *
 * Schedule: one NATIVE lane over the pieces (SCALE after it for AVG).  A blocking call runs
 *   MPI_Allreduce / MPI_Reduce / MPI_Bcast per piece when no other lpmpi request is
 *   outstanding; a nonblocking one MPI_Iallreduce / MPI_Ireduce / MPI_Ibcast; a persistent one
 *   the MPI 4 persistent collectives (MPI_Allreduce_init ..., made once, started each time),
 *   or the nonblocking ones with an MPI 3 library (lp_native_forms says which).
 *
 * Cost: cost_*_native in src/alg/registry.c, a model of MPICH's own choice (binomial up to 2 KiB
 *   with half lpmpi's per-message latency, Rabenseifner above); the tuner measures the truth.
 * Limits: counts are split into pieces of at most lp_max_msg_bytes (element-wise ops allow
 *   it), so every MPI count fits in an int.  Order: the library's (MPICH's is deterministic
 *   for a fixed P and size). */
#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>

/* lpmpi's user types and ops: created once, by the first thread that needs them, under a lock
 * (collectives may run from several threads on different communicators) */
static MPI_Datatype user_type[LP_NDTYPES];   /* MPI_DATATYPE_NULL until first needed */
static MPI_Op user_op[LP_NOPS];
static atomic_int user_ready, mpi_kind = -1;
static pthread_mutex_t user_lock = PTHREAD_MUTEX_INITIALIZER;

/* user-op callbacks: one per op; the element type is recovered from the datatype handle */
static lp_dtype_t dtype_of(MPI_Datatype t) {
    for (int d = 0; d < LP_NDTYPES; d++)
        if (user_type[d] == t) return (lp_dtype_t)d;
    return LP_NDTYPES;
}
#define LP_UOP(OP)                                                                            \
    static void uop_##OP(void *in, void *inout, int *len, MPI_Datatype *t) {                  \
        lp_dtype_t d = dtype_of(*t);                                                          \
        lp_reduce_fn f = d < LP_NDTYPES ? lp_reduce_kernel(d, OP) : NULL;                     \
        if (f) f(inout, inout, in, (size_t)*len);                                             \
    }
LP_UOP(LP_SUM) LP_UOP(LP_PROD) LP_UOP(LP_MAX) LP_UOP(LP_MIN) LP_UOP(LP_AVG) LP_UOP(LP_LAND)
LP_UOP(LP_LOR) LP_UOP(LP_LXOR) LP_UOP(LP_BAND) LP_UOP(LP_BOR) LP_UOP(LP_BXOR)
static MPI_User_function *const uop_fn[LP_NOPS] = {
    uop_LP_SUM, uop_LP_PROD, uop_LP_MAX, uop_LP_MIN, uop_LP_AVG, uop_LP_LAND,
    uop_LP_LOR, uop_LP_LXOR, uop_LP_BAND, uop_LP_BOR, uop_LP_BXOR};

static int user_init(void) {
    int rc = LP_OK, d = 0, o = 0;
    if (atomic_load_explicit(&user_ready, memory_order_acquire)) return LP_OK;
    pthread_mutex_lock(&user_lock);
    if (!atomic_load_explicit(&user_ready, memory_order_relaxed)) {
        for (d = 0; d < LP_NDTYPES; d++) {
            LP_MPI(MPI_Type_contiguous((int)lp_dtype_size((lp_dtype_t)d), MPI_BYTE, &user_type[d]));
            LP_MPI(MPI_Type_commit(&user_type[d]));
        }
        for (o = 0; o < LP_NOPS; o++) LP_MPI(MPI_Op_create(uop_fn[o], 1, &user_op[o]));
        atomic_store_explicit(&user_ready, 1, memory_order_release);
    }
cleanup:
    if (rc != LP_OK) {                /* undo a partial initialisation: the next call retries */
        for (int i = 0; i < d && i < LP_NDTYPES; i++) MPI_Type_free(&user_type[i]);
        for (int i = 0; i < o; i++) MPI_Op_free(&user_op[i]);
    }
    pthread_mutex_unlock(&user_lock);
    return rc;
}

void lp_native_free(void) {          /* called at finalize */
    if (!atomic_load(&user_ready)) return;
    for (int d = 0; d < LP_NDTYPES; d++) MPI_Type_free(&user_type[d]);
    for (int o = 0; o < LP_NOPS; o++) MPI_Op_free(&user_op[o]);
    atomic_store(&user_ready, 0);
}

enum { MPI_OTHER, MPI_OPEN_MPI, MPI_INTEL };
static int library(void) {
    if (mpi_kind < 0) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) v[0] = 0;
        mpi_kind = strstr(v, "Open MPI") ? MPI_OPEN_MPI : strstr(v, "Intel(R) MPI") ? MPI_INTEL : MPI_OTHER;
    }
    return mpi_kind;
}
static int open_mpi(void) { return library() == MPI_OPEN_MPI; }

static MPI_Datatype builtin_type(lp_dtype_t d) {
    switch (d) {
    case LP_BOOL: return MPI_C_BOOL;
    case LP_INT8: return MPI_INT8_T;
    case LP_INT16: return MPI_INT16_T;
    case LP_INT32: return MPI_INT32_T;
    case LP_INT64: return MPI_INT64_T;
    case LP_UINT8: return MPI_UINT8_T;
    case LP_UINT16: return MPI_UINT16_T;
    case LP_UINT32: return MPI_UINT32_T;
    case LP_UINT64: return MPI_UINT64_T;
    case LP_FLOAT32: return MPI_FLOAT;
    case LP_FLOAT64: return MPI_DOUBLE;
    case LP_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
    case LP_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op builtin_op(lp_op_t o) {
    switch (o) {
    case LP_SUM: case LP_AVG: return MPI_SUM;
    case LP_PROD: return MPI_PROD;
    case LP_MAX: return MPI_MAX;
    case LP_MIN: return MPI_MIN;
    case LP_LAND: return MPI_LAND;
    case LP_LOR: return MPI_LOR;
    case LP_LXOR: return MPI_LXOR;
    case LP_BAND: return MPI_BAND;
    case LP_BOR: return MPI_BOR;
    case LP_BXOR: return MPI_BXOR;
    default: return MPI_OP_NULL;
    }
}

/* does MPI's own (type, op) pair give the contract's result for (d, o)? */
int lp_native_builtin(lp_dtype_t d, lp_op_t o) {
    if (builtin_type(d) == MPI_DATATYPE_NULL) return 0;
    if (d == LP_BOOL && !(o == LP_LAND || o == LP_LOR || o == LP_LXOR)) return 0;
    /* MPI's MAX/MIN do not propagate NaN; the contract follows numpy, which does */
    if ((d == LP_FLOAT32 || d == LP_FLOAT64) && (o == LP_MAX || o == LP_MIN)) return 0;
    if (open_mpi() && (o == LP_SUM || o == LP_PROD) &&
        (d == LP_INT8 || d == LP_INT16 || d == LP_UINT8 || d == LP_UINT16))
        return 0;
    return 1;
}

/* the (type, op) pair native uses for this dtype/op */
static int native_pair(lp_dtype_t d, lp_op_t o, MPI_Datatype *t, MPI_Op *op) {
    if (lp_native_builtin(d, o)) {
        *t = builtin_type(d);
        *op = builtin_op(o);
        return LP_OK;
    }
    int rc = user_init();
    if (rc == LP_OK) { *t = user_type[d]; *op = user_op[o == LP_AVG ? LP_SUM : o]; }
    return rc;
}

/* ---- the MPI library's calls of each collective, on one piece (native_calls below), made from
 * each collective's entry in lpmpi/_colls.py: its MPI call and its arguments of the piece p.
 * In place, alltoall's and gather's sendbuf is MPI_IN_PLACE, scatter's recvbuf (its root's
 * block stays in sendbuf, p->rb: SCATTER_ARGS); the per-rank counts of the v collectives are
 * MPI's int arrays (p->sc, sd, rc, rd).  The collectives' table (core/colls.c) is data below the
 * algorithms: it names no function of theirs, so the calls are this file's own table. ---- */
#define SCATTER_ARGS(p) ((p)->s == MPI_IN_PLACE ? (const void *)(p)->rb : (p)->s), (p)->n, (p)->t, \
    ((p)->s == MPI_IN_PLACE ? MPI_IN_PLACE : (p)->rb), (p)->n, (p)->t, (p)->root, (p)->comm
/* BEGIN GENERATED by tools/gen_colls.py from lpmpi/_colls.py: do not edit */
/* the MPI library's calls of each collective, on one piece */
static int allreduce_b(const lp_piece_t *p) {
    return MPI_Allreduce(p->s, p->rb, p->n, p->t, p->op, p->comm);
}
static int allreduce_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Iallreduce(p->s, p->rb, p->n, p->t, p->op, p->comm, q);
}
static int reduce_b(const lp_piece_t *p) {
    return MPI_Reduce(p->s, p->rb, p->n, p->t, p->op, p->root, p->comm);
}
static int reduce_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ireduce(p->s, p->rb, p->n, p->t, p->op, p->root, p->comm, q);
}
static int bcast_b(const lp_piece_t *p) { return MPI_Bcast(p->rb, p->n, p->t, p->root, p->comm); }
static int bcast_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ibcast(p->rb, p->n, p->t, p->root, p->comm, q);
}
static int allgather_b(const lp_piece_t *p) {
    return MPI_Allgather(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm);
}
static int allgather_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Iallgather(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm, q);
}
static int reduce_scatter_b(const lp_piece_t *p) {
    return MPI_Reduce_scatter_block(p->s, p->rb, p->n, p->t, p->op, p->comm);
}
static int reduce_scatter_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ireduce_scatter_block(p->s, p->rb, p->n, p->t, p->op, p->comm, q);
}
static int alltoall_b(const lp_piece_t *p) {
    return MPI_Alltoall(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm);
}
static int alltoall_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ialltoall(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm, q);
}
static int alltoallv_b(const lp_piece_t *p) {
    return MPI_Alltoallv(p->s, p->sc, p->sd, p->t, p->rb, p->rc, p->rd, p->t, p->comm);
}
static int alltoallv_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ialltoallv(p->s, p->sc, p->sd, p->t, p->rb, p->rc, p->rd, p->t, p->comm, q);
}
static int allgatherv_b(const lp_piece_t *p) {
    return MPI_Allgatherv(p->s, p->n, p->t, p->rb, p->rc, p->rd, p->t, p->comm);
}
static int allgatherv_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Iallgatherv(p->s, p->n, p->t, p->rb, p->rc, p->rd, p->t, p->comm, q);
}
static int reduce_scatter_v_b(const lp_piece_t *p) {
    return MPI_Reduce_scatter(p->s, p->rb, p->sc, p->t, p->op, p->comm);
}
static int reduce_scatter_v_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Ireduce_scatter(p->s, p->rb, p->sc, p->t, p->op, p->comm, q);
}
static int gather_b(const lp_piece_t *p) {
    return MPI_Gather(p->s, p->n, p->t, p->rb, p->n, p->t, p->root, p->comm);
}
static int gather_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Igather(p->s, p->n, p->t, p->rb, p->n, p->t, p->root, p->comm, q);
}
static int scatter_b(const lp_piece_t *p) { return MPI_Scatter(SCATTER_ARGS(p)); }
static int scatter_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Iscatter(SCATTER_ARGS(p), q);
}
static int scan_b(const lp_piece_t *p) { return MPI_Scan(p->s, p->rb, p->n, p->t, p->op, p->comm); }
static int scan_nb(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Iscan(p->s, p->rb, p->n, p->t, p->op, p->comm, q);
}
#if MPI_VERSION >= 4
static int allreduce_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Allreduce_init(p->s, p->rb, p->n, p->t, p->op, p->comm, MPI_INFO_NULL, q);
}
static int reduce_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Reduce_init(p->s, p->rb, p->n, p->t, p->op, p->root, p->comm, MPI_INFO_NULL, q);
}
static int bcast_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Bcast_init(p->rb, p->n, p->t, p->root, p->comm, MPI_INFO_NULL, q);
}
static int allgather_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Allgather_init(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm, MPI_INFO_NULL, q);
}
static int reduce_scatter_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Reduce_scatter_block_init(p->s, p->rb, p->n, p->t, p->op, p->comm, MPI_INFO_NULL, q);
}
static int alltoall_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Alltoall_init(p->s, p->n, p->t, p->rb, p->n, p->t, p->comm, MPI_INFO_NULL, q);
}
static int alltoallv_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Alltoallv_init(p->s, p->sc, p->sd, p->t, p->rb, p->rc, p->rd, p->t, p->comm, MPI_INFO_NULL, q);
}
static int allgatherv_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Allgatherv_init(p->s, p->n, p->t, p->rb, p->rc, p->rd, p->t, p->comm, MPI_INFO_NULL, q);
}
static int reduce_scatter_v_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Reduce_scatter_init(p->s, p->rb, p->sc, p->t, p->op, p->comm, MPI_INFO_NULL, q);
}
static int gather_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Gather_init(p->s, p->n, p->t, p->rb, p->n, p->t, p->root, p->comm, MPI_INFO_NULL, q);
}
static int scatter_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Scatter_init(SCATTER_ARGS(p), MPI_INFO_NULL, q);
}
static int scan_p(const lp_piece_t *p, MPI_Request *q) {
    return MPI_Scan_init(p->s, p->rb, p->n, p->t, p->op, p->comm, MPI_INFO_NULL, q);
}
#else
#define allreduce_p NULL
#define reduce_p NULL
#define bcast_p NULL
#define allgather_p NULL
#define reduce_scatter_p NULL
#define alltoall_p NULL
#define alltoallv_p NULL
#define allgatherv_p NULL
#define reduce_scatter_v_p NULL
#define gather_p NULL
#define scatter_p NULL
#define scan_p NULL
#endif
static const lp_native_calls_t native_calls[LP_NCOLLS] = {
    [LP_ALLREDUCE] = {allreduce_b, allreduce_nb, allreduce_p},
    [LP_REDUCE] = {reduce_b, reduce_nb, reduce_p},
    [LP_BCAST] = {bcast_b, bcast_nb, bcast_p},
    [LP_ALLGATHER] = {allgather_b, allgather_nb, allgather_p},
    [LP_REDUCE_SCATTER] = {reduce_scatter_b, reduce_scatter_nb, reduce_scatter_p},
    [LP_ALLTOALL] = {alltoall_b, alltoall_nb, alltoall_p},
    [LP_ALLTOALLV] = {alltoallv_b, alltoallv_nb, alltoallv_p},
    [LP_ALLGATHERV] = {allgatherv_b, allgatherv_nb, allgatherv_p},
    [LP_REDUCE_SCATTER_V] = {reduce_scatter_v_b, reduce_scatter_v_nb, reduce_scatter_v_p},
    [LP_GATHER] = {gather_b, gather_nb, gather_p},
    [LP_SCATTER] = {scatter_b, scatter_nb, scatter_p},
    [LP_SCAN] = {scan_b, scan_nb, scan_p},
};
/* END GENERATED */

/* ---- the schedule: one phase, a NATIVE lane over the pieces of the message (each at most the
 * largest MPI message, element-wise ops allow it) and, for AVG, a SCALE lane after it ---- */
/* element-wise collectives go in pieces of at most the largest MPI message; one with blocks
 * per rank (allgather, reduce_scatter) in one call, `count` elements of the block's type */
static int whole(const lp_args_t *a) { return lp_per_rank_blocks(a->coll); }
static size_t pieces_of(const lp_args_t *a) {
    size_t bytes = a->count * a->esize;
    return whole(a) && bytes ? bytes : lp_piece_bytes(a);
}
/* the bytes of its one lane: a collective with per-rank counts is one call whatever its count
 * (alltoallv's is 0: every rank calls MPI's, whatever its own counts) */
static size_t lane_bytes(const lp_args_t *a) {
    return lp_traits(a->coll)->vcounts ? 1 : a->count * a->esize;
}

static const lp_xport_t xport;
/* reduce_scatter_v in place: MPICH 5.0.2's MPI_Reduce_scatter with MPI_IN_PLACE and unequal
 * counts copies rank r's block to the buffer's start with an overlapping memcpy (its yaksa pack
 * asserts "memcpy argument memory ranges overlap" and aborts, P = 2, counts [n, n + 3]); so
 * in place it runs out of place into scratch (this rank's block), copied to the start after */
static size_t held(const lp_args_t *a) {
    size_t off, len;
    if (a->sbuf != a->rbuf || lp_traits(a->coll)->vcounts != LP_V_SEND) return 0;
    lp_recv_part(a, a->rank, &off, &len);
    return len * a->esize;
}
/* what the library's call reads and writes (the same pointer: in place) */
static void bufs(lp_req_t *r, const lp_args_t *a, const char **s, char **rb) {
    *s = a->sbuf;
    *rb = held(a) ? lp_req_area(r, LP_AREA_WORK) : a->rbuf;
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = 1;
    p->work = held(a);
    return LP_OK;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    size_t bytes = lane_bytes(a), pb = whole(a) ? bytes : pieces_of(a);
    const char *s;
    char *rb;
    bufs(r, a, &s, &rb);
    lp_lane_t *nat = lp_lane_native(r, a, &xport, s, rb, bytes, pb), *last = nat;
    if (held(a)) lp_lane_after(last = lp_lane_copy(r, a, a->rbuf, rb, held(a), 0), nat, LP_ALL);
    if (lp_on(lp_traits(a->coll)->result, a->rank, a->root) && lp_traits(a->coll)->has_op) {
        size_t off, len;                                   /* AVG's division (else no lane) */
        lp_recv_part(a, a->rank, &off, &len);
        lp_lane_after(lp_lane_scale(r, a, a->rbuf, len * a->esize, whole(a) ? 0 : pb), last,
                      whole(a) ? LP_ALL : 0);
        /* a prefix's rank 0 (scan): MPI gives its input unchanged; lpmpi's logical ops give 0 or
         * 1 at every rank (x LOR x, as one rank's call) */
        if (lp_traits(a->coll)->prefix && a->rank == 0 && len)
            lp_lane_after(lp_lane_logical(r, a, a->rbuf, a->rbuf, len * a->esize), last, LP_ALL);
    }
    return LP_OK;
}

/* device memory on CUDA-aware MPI: lpmpi's user op runs on the host, so such pairs go through
 * host memory (whole-buffer staging) */
static int host_only(const lp_args_t *a) {
    return a->dev && lp_traits(a->coll)->has_op && !lp_native_builtin(a->dt, a->op);
}

/* piece k of lane l: what MPI's collective gets */
static int piece(const lp_args_t *a, const lp_lane_t *l, size_t k, lp_piece_t *pc) {
    const lp_coll_traits_t *T = lp_traits(a->coll);
    *pc = (lp_piece_t){NULL, NULL, 0, MPI_BYTE, MPI_OP_NULL, a->root, a->comm};
    size_t off = k * l->cb, len = l->bytes - off < l->cb ? l->bytes - off : l->cb;
    if (whole(a)) {                   /* count elements per block, one call */
        int rc = LP_OK;
        if (T->vcounts ? !a->vint : a->count > (size_t)INT_MAX)
            return LP_FAIL(LP_ERR_ARG, "native %s: blocks or displacements of more than %d elements "
                           "need several MPI calls (not implemented): use another algorithm",
                           T->name, INT_MAX);
        if (T->vcounts) {             /* MPI's int arrays; allgatherv sends its own count */
            const int P = a->size;
            pc->sc = a->vint;
            pc->sd = a->vint + P;
            pc->rc = a->vint + 2 * P;
            pc->rd = a->vint + 3 * P;
            pc->n = (T->vcounts & LP_V_RECV) ? pc->rc[a->rank] : pc->sc[a->rank];
        }
        if (T->has_op) rc = native_pair(a->dt, a->op, &pc->t, &pc->op);
        else if ((pc->t = builtin_type(a->dt)) == MPI_DATATYPE_NULL && (rc = user_init()) == LP_OK)
            pc->t = user_type[a->dt];
        if (!T->vcounts) pc->n = (int)a->count;
        pc->rb = l->r[1].base;
        pc->s = l->r[0].base == l->r[1].base ? MPI_IN_PLACE : (const void *)l->r[0].base;
        return rc;
    }
    if (!T->has_op) {                 /* data moves as it is: bytes */
        pc->rb = a->rbuf + off;
        pc->n = (int)len;
        return LP_OK;
    }
    int rc = native_pair(a->dt, a->op, &pc->t, &pc->op);
    int mine = lp_on(T->result, a->rank, a->root);
    pc->n = (int)(len / a->esize);
    pc->rb = mine ? a->rbuf + off : NULL;
    pc->s = (mine && a->sbuf == a->rbuf) ? MPI_IN_PLACE : (const void *)(a->sbuf + off);
    return rc;
}

/* the interface's issue() (schedule.h): piece k, as its persistent request (made at init), a
 * blocking call (done at once) or a nonblocking one */
static int issue(const lp_lane_t *l, size_t k, MPI_Request *q, MPI_Request *persistent, int *done) {
    int rc = LP_OK;
    const lp_args_t *a = l->a;
    const lp_native_calls_t *N = &native_calls[a->coll];
    lp_piece_t pc;
    *done = 0;
    if (persistent) {                 /* made at init (lp_native_init) */
        LP_MPI(MPI_Start(persistent));
        *q = *persistent;
        goto cleanup;
    }
    LP_TRY(piece(a, l, k, &pc));
    if (a->blocking) {                /* nothing else to progress meanwhile: the library's own */
        const int in = lp_inside_enter(a, "MPI's own blocking collective");   /* (alive.c) */
        int e = N->blocking(&pc);
        lp_inside_leave(in);
        LP_MPI(e);
        *done = 1;
    } else {
        LP_MPI(N->nonblocking(&pc, q));
    }
cleanup:
    return rc;
}

int lp_native_forms(void) {
#if MPI_VERSION >= 4
    return 3;
#else
    return 1;
#endif
}

/* persistent requests: MPI 4's persistent collectives, made once per piece (before MPI 4 the
 * nonblocking ones at each start) */
static int init(lp_req_t *r, const lp_args_t *a) {
    int rc = LP_OK;
    const lp_native_calls_t *N = &native_calls[a->coll];
    if (!N->persistent) return LP_OK;
    /* Intel MPI 2021.18's MPI_Allgather_init at P = 2 leaves rank 1's own block unwritten (or
     * writes stale bytes there, in place) from the second start on, sizes up to a few KiB
     * (mpi4py alone: docs/results/issue26/impi_persistent_allgather.py): there, each start
     * issues MPI_Iallgather instead */
    if (a->coll == LP_ALLGATHER && library() == MPI_INTEL) return LP_OK;
    size_t bytes = lane_bytes(a), pb = whole(a) ? bytes : pieces_of(a), n = (bytes + pb - 1) / pb;
    MPI_Request *pr;
    lp_lane_t l = {.a = a, .bytes = bytes, .cb = pb};
    const char *s;
    char *rb;
    bufs(r, a, &s, &rb);
    lp_lane_region(&l, 0, s);
    lp_lane_region(&l, 1, rb);
    lp_piece_t pc;
    LP_TRY(lp_req_alloc_persistent(r, n, &pr));
    for (size_t k = 0; k < n; k++) {
        LP_TRY(piece(a, &l, k, &pc));
        LP_MPI(N->persistent(&pc, &pr[k]));
    }
cleanup:
    return rc;
}

static const lp_xport_t xport = {.name = "native", .issue = issue};

/* one schedule for every collective: its row's calls */
const lp_sched_t lp_sched_native = {plan, phase, host_only, init, NULL};
