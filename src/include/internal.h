/* internal.h: what the algorithm files share: the arguments of a call, the registry's types,
 * the schedule builders (schedule.h), the neighbour arithmetic (topo.h), device transports and
 * the knobs.  Not part of the public C interface; the engine's own state is in engine.h. */
#ifndef LPMPI_INTERNAL_H
#define LPMPI_INTERNAL_H

#include "lpmpi.h"
#include "lp_status.h"
#include "devops.h"
#include "schedule.h"
#include "topo.h"
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>   /* lp_copy_out's streaming stores */
#endif

/* ---- how the bytes of device memory travel (device.c) ----
 *   HOST    host memory: the schedules as written.
 *   STAGED  device memory, MPI without device support: the LP schedule stages each chunk
 *           through pinned host slots (alg_lp_staged.c); the other algorithms run on a pinned
 *           host copy of the whole buffer (lp_sched_stage_whole: copy to host, run, copy back).
 *   AWARE   device memory, CUDA-aware MPI: device pointers go to MPI as they are; the
 *           schedules' local steps (reductions, copies, AVG) run on the device and their
 *           scratch is device memory. */
enum { LP_XPORT_HOST = 0, LP_XPORT_STAGED = 1, LP_XPORT_AWARE = 2 };

/* devops and transport for a call on memory `mem` (emulation: every call) */
int lp_device_route(lp_mem_t mem, const lp_devops_t **dev, int *xport);

/* a process of this node: its id and start time (/proc: a pid given to another process since
 * has another start time); pid 0: not watched */
typedef struct { int pid; uint64_t since; } lp_proc_t;

/* ---- arguments of one collective call, resolved and validated ---- */
typedef struct lp_args {
    MPI_Comm comm;          /* the context's private duplicate */
    int rank, size;
    lp_coll_t coll;
    const char *sbuf;       /* data contributed by this rank (bcast: the buffer) */
    char *rbuf;             /* result (reduce: root only, NULL elsewhere) */
    size_t count;           /* elements of a block (lp_colls[coll].sblocks / rblocks say how many
                               blocks each buffer holds); with per-rank counts (lp_call_t): the
                               P-block buffer's elements (alltoallv: 0) */
    /* per-rank counts (lp_call_t; the request's copies): sendbuf's / recvbuf's P blocks, NULL
     * where that buffer's blocks are `count` elements each (lp_block_at reads them); vint: the
     * same as MPI's int arrays (sc, sd, rc, rd: P each; NULL where a value passes INT_MAX) */
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    const int *vint;
    lp_dtype_t dt;
    size_t esize;           /* bytes per element */
    lp_op_t op;
    lp_reduce_fn fn;        /* NULL for bcast */
    int root;
    size_t chunk_elems;     /* >= 1, chunked algorithms only */
    lp_mem_t mem;
    const lp_devops_t *dev; /* non-NULL: sbuf/rbuf are device memory, handled by these ops */
    int xport;              /* LP_XPORT_* */
    size_t window;          /* chunks in flight per lane (LPMPI_WINDOW when the request was made) */
    size_t piece;           /* bytes of the pieces of whole-buffer transfers: the largest MPI
                               message, in whole elements (lp_piece_bytes) */
    size_t staging;         /* staged pipeline: staging buffers (chunks in flight) per direction */
    int tag0;               /* this start's first tag: schedules use tag0 + LP_TAG_* */
    int blocking;           /* a blocking call (NATIVE steps may use MPI's blocking collectives) */
    int persistent;         /* a persistent request (NATIVE steps use MPI's persistent ones) */
    char *acc;              /* acc_dtype: the 16-bit result (NULL: none; then dt is LP_FLOAT32,
                               sbuf/rbuf the float32 copy the reduction runs on, and every
                               result ends rounded once into acc, in acc_dt) */
    lp_dtype_t acc_dt;      /* LP_FLOAT16 or LP_BFLOAT16 */
    /* nodes (the context's, see lp_ctx): node[r] = the lowest rank on r's node; with more than
     * one node, order = the ranks sorted by node (then rank), pos its inverse; else NULL */
    const int *node, *order, *pos;
    /* the node-local transport (alg_ring_cma.c): every rank's process id, or NULL: MPI only */
    const int *pids;
    /* the processes of the ranks of this node (the context's: a notice checks them), or NULL */
    const lp_proc_t *alive;
    /* the shared-memory transport (alg_ring_shm.c): the segment, or NULL; this start's first
     * round (the context's count of rounds started before it) */
    const struct lp_shm *shm;
    uint64_t shm_base;
    int transport;          /* LP_TP_* the decision asked for (the ring allreduce's node-local one) */
    int ring_tp;            /* LP_RING_* the ring's node-local transport resolved to, once, in the
                               decision (request.c); -1: the schedule is no node-local ring */
    int comp;               /* LP_COMP_*: the wire format of a compressed call (alg_compress.c) */
} lp_args_t;

/* position *v of this rank on the chain that starts at rank `head` and goes up (dir = 1) or down
 * (dir = -1), and the ranks of its neighbours v-1 (*left) and v+1 (*right), -1 at the ends.
 * One node: rank order (lp_chain_pos).  Several: node order (a->order, reversed for dir = -1),
 * starting with head and the rest of head's node, then the following nodes, so that the chain
 * crosses each node boundary once whatever the placement.  lp_chain_first / lp_chain_last: the
 * heads of the two opposite chains of allreduce (the first and the last rank of that order). */
void lp_chain_at(const lp_args_t *a, int head, int dir, int *v, int *left, int *right);
static inline int lp_chain_first(const lp_args_t *a) { return a->order ? a->order[0] : 0; }
static inline int lp_chain_last(const lp_args_t *a) { return a->order ? a->order[a->size - 1] : a->size - 1; }
/* LP's chains for a call (alg_lp.c; the staged pipeline uses the same): from the collective's
 * row, partial sums go up the chain where it reduces, finished chunks come down where ranks
 * other than the head get the result; a collective with a root has one chain from the root,
 * one without two opposite chains, each carrying half of the message (their heads share the
 * reduction work).  Returns how many (1 or 2). */
typedef struct {
    int up, down, head, dir;
    size_t base, bytes;     /* the part of the message it carries */
    int tag_up, tag_down;   /* relative to tag0 */
} lp_chain_spec_t;
int lp_chain_specs(const lp_args_t *a, lp_chain_spec_t s[2]);
/* the allreduce result its broadcast/allgather part moves, and its element size: recvbuf, or
 * acc_dtype's 16-bit result */
static inline char *lp_result_buf(const lp_args_t *a, size_t *es) {
    *es = a->acc ? lp_dtype_size(a->acc_dt) : a->esize;
    return a->acc ? a->acc : a->rbuf;
}
/* elements [off, off + len) of recvbuf are final: AVG's division, then acc_dtype's rounding into
 * the 16-bit result (schedule.c) */
void lp_lane_finish(lp_req_t *r, const lp_args_t *a, size_t off, size_t len);
/* the ring over node order: this rank's index on it and the rank at index i */
static inline int lp_ring_index(const lp_args_t *a) { return a->pos ? a->pos[a->rank] : a->rank; }
static inline int lp_ring_rank(const lp_args_t *a, int i) { return a->order ? a->order[i] : i; }

/* memcpy, with non-temporal stores where nt (and the CPU has them); the caller fences
 * (lp_fence_nt).  A streaming store writes the line without first reading it into this core's
 * caches, and without the dear hand-over of a line another core holds: on the AMD EPYC VM of
 * issue 24, rewriting 512 KiB that another vCPU had just read with process_vm_readv took 45-50
 * us with plain stores in most launches (9 us in others) and 19 us with streaming ones in every
 * launch (docs/results/issue24/inplace2/nt_probe.c). */
static inline void lp_copy_out(char *dst, const char *src, size_t len, int nt) {
#if defined(__SSE2__)
    if (nt && len >= 256) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
        memcpy(dst, src, head);
        dst += head; src += head; len -= head;
        size_t n = len / 64;
        for (size_t i = 0; i < n; i++, dst += 64, src += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
            _mm_stream_si128((__m128i *)dst, a);
            _mm_stream_si128((__m128i *)(dst + 16), b);
            _mm_stream_si128((__m128i *)(dst + 32), c);
            _mm_stream_si128((__m128i *)(dst + 48), d);
        }
        len -= n * 64;
    }
#else
    (void)nt;
#endif
    memcpy(dst, src, len);
}
/* after lp_copy_out(..., nt): the streaming stores are visible before what follows */
static inline void lp_fence_nt(int nt) {
#if defined(__SSE2__)
    if (nt) _mm_sfence();
#else
    (void)nt;
#endif
}

/* ---- the collectives as rows (core/colls.c: lp_colls, generated from the descriptor lpmpi/_colls.py) ----
 * Every "which collective is this?" question of the engine reads its row: who brings data,
 * whose buffer the call writes, whether it reduces, whether it has a root, how many blocks of
 * `count` elements each buffer holds, and the MPI library's own calls (alg_native.c).  A new
 * collective is an entry of lpmpi/_colls.py and its schedules (docs/design.md). */
enum { LP_ON_ALL = 0, LP_ON_ROOT = 1, LP_ON_NONROOT = 2 };   /* which ranks */
/* one piece of a native call (alg_native.c): what MPI's collective gets */
typedef struct {
    const void *s;
    void *rb;
    int n;
    MPI_Datatype t;
    MPI_Op op;
    int root;
    MPI_Comm comm;
    const int *sc, *sd, *rc, *rd;   /* per-rank counts and displacements (v collectives) */
} lp_piece_t;
typedef struct {                /* the MPI library's calls of one collective, on one piece */
    int (*blocking)(const lp_piece_t *p);
    int (*nonblocking)(const lp_piece_t *p, MPI_Request *q);
    int (*persistent)(const lp_piece_t *p, MPI_Request *q);   /* NULL before MPI 4 */
} lp_native_calls_t;
typedef struct {
    const char *name;
    unsigned char has_op;       /* reduces: an op, its kernel, AVG's division, acc_dtype */
    unsigned char has_root;
    unsigned char input;        /* LP_ON_*: the ranks whose data goes in */
    unsigned char result;       /* LP_ON_*: the ranks whose buffer the call writes */
    unsigned char sblocks, rblocks;   /* blocks of `count` elements in sendbuf / recvbuf:
                                         1, or 0 for P (the communicator's size) */
    const char *mpi_name;       /* the MPI library's own collective, e.g. "MPI_Allreduce" */
    unsigned char shm;          /* its ring runs over the shared-memory segment (alg_ring_shm.c)
                                   where the decision asks; single-copy reads serve every ring */
    unsigned char vcounts;      /* per-rank counts (lp_call_t): LP_V_RECV, LP_V_SEND, both; 0 none */
    const char *via;            /* NULL: called by its own name; else the collective whose
                                   function calls it (reduce_scatter_v: reduce_scatter(counts=)) */
    unsigned char prefix;       /* rank r's result reduces ranks 0..r (scan): AVG divides by r + 1 */
} lp_coll_traits_t;
enum { LP_V_RECV = 1, LP_V_SEND = 2 };
/* what AVG divides a reduced element by: the ranks whose inputs it holds */
#define LP_AVG_DIVISOR(a) ((double)(lp_colls[(a)->coll].prefix ? (a)->rank + 1 : (a)->size))
extern const lp_coll_traits_t lp_colls[LP_NCOLLS];
static inline const lp_coll_traits_t *lp_traits(lp_coll_t c) { return &lp_colls[c]; }
/* does this rank (of a call's arguments) bring data / get the result written? */
static inline int lp_on(int which, int rank, int root) {
    return which == LP_ON_ALL || (which == LP_ON_ROOT) == (rank == root);
}
/* 1 where a buffer holds a block per rank (allgather, reduce_scatter, ...), 0 where both hold
 * the message (element-wise collectives: allreduce, reduce, bcast) */
static inline int lp_per_rank_blocks(lp_coll_t c) { return lp_colls[c].sblocks != 1 || lp_colls[c].rblocks != 1; }
/* the bytes of a call's sendbuf (recv = 0) or recvbuf (recv = 1): its blocks of `count` elements
 * (per-rank counts: `count` is already the P blocks') */
static inline size_t lp_buf_bytes(lp_coll_t c, size_t count, size_t esize, int P, int recv) {
    if (lp_colls[c].vcounts) return count * esize;
    size_t b = recv ? lp_colls[c].rblocks : lp_colls[c].sblocks;
    return count * esize * (b ? b : (size_t)P);
}
/* block b (a rank) of a call's sendbuf (recv = 0) or recvbuf (recv = 1), in elements: a buffer
 * of P blocks: block b, by its per-rank counts or `count` each; a buffer of one block: all of it
 * (this rank's count of the other side's counts where they are per rank) */
static inline void lp_block_at(const lp_args_t *a, int recv, int b, size_t *off, size_t *len) {
    const lp_coll_traits_t *T = &lp_colls[a->coll];
    const size_t *cnt = recv ? a->rcounts : a->scounts, *dsp = recv ? a->rdispls : a->sdispls;
    if (cnt) { *off = dsp[b]; *len = cnt[b]; return; }
    if ((recv ? T->rblocks : T->sblocks) == 0) { *off = (size_t)b * a->count; *len = a->count; return; }
    const size_t *other = recv ? a->scounts : a->rcounts;
    *off = 0;
    *len = other ? other[a->rank] : a->count;
}
/* the largest block of the P-block buffer (ring's partial blocks and slots) */
static inline size_t lp_block_max(const lp_args_t *a) {
    const size_t *cnt = a->rcounts ? a->rcounts : a->scounts;
    if (!cnt) return a->count;
    size_t m = 0;
    for (int i = 0; i < a->size; i++) m = cnt[i] > m ? cnt[i] : m;
    return m;
}
/* does rank i send to rank j in a collective that moves blocks between pairs (alltoall, gather,
 * scatter, allgather: alg_direct.c)? Its input goes to the ranks that get a result, through the
 * root where there is one */
static inline int lp_sends_to(const lp_args_t *a, int i, int j) {
    const lp_coll_traits_t *T = &lp_colls[a->coll];
    return i != j && lp_on(T->input, i, a->root) && lp_on(T->result, j, a->root) &&
           (!T->has_root || i == a->root || j == a->root);
}
/* a collective whose count does not say whether a call moves anything (alltoallv: every rank
 * has its own counts; its count is 0 by convention, lp_call_t) */
static inline int lp_count_keyless(lp_coll_t c) { return lp_colls[c].vcounts == (LP_V_SEND | LP_V_RECV); }
static inline int lp_args_counted(const lp_args_t *a) { return lp_count_keyless(a->coll); }
/* what this rank sends to rank p (elements of its sendbuf) and receives from p (of its recvbuf) */
static inline void lp_send_part(const lp_args_t *a, int p, size_t *off, size_t *len) { lp_block_at(a, 0, p, off, len); }
static inline void lp_recv_part(const lp_args_t *a, int p, size_t *off, size_t *len) { lp_block_at(a, 1, p, off, len); }
/* the node-local rings' P blocks (alg_ring_cma.c, alg_ring_shm.c): allreduce's near-equal blocks
 * of its one buffer, block b owned by rank b - 1 (ring's); reduce_scatter's and allgather's
 * blocks of `count` elements, block r rank r's.  Offsets in elements of the P-block buffer. */
static inline int lp_ring_block_of(const lp_args_t *a, int rank) {
    return lp_per_rank_blocks(a->coll) ? rank : lp_ring_owned(rank, a->size);
}
static inline void lp_ring_block(const lp_args_t *a, int b, size_t *off, size_t *len) {
    if (lp_per_rank_blocks(a->coll)) {
        lp_block_at(a, lp_colls[a->coll].rblocks == 0, b, off, len);   /* the P-block buffer */
    } else {
        lp_block(a->count, a->size, b, off, len);
    }
}
/* the bytes a decision and the transport rule are keyed by: the larger buffer's, i.e. the
 * message or the P blocks (as nccl-tests counts allgather and reduce_scatter) */
static inline size_t lp_key_bytes(lp_coll_t c, size_t count, size_t esize, int P) {
    size_t s = lp_buf_bytes(c, count, esize, P, 0), r = lp_buf_bytes(c, count, esize, P, 1);
    return s > r ? s : r;
}

/* alpha-beta-gamma machine model: seconds per message, per byte moved, per byte reduced within
 * a node; alpha_net, beta_net: per message and per byte through a node's NIC (traffic.c) */
typedef struct { double alpha, beta, gamma, alpha_net, beta_net; } lp_model_t;

/* cost model of an algorithm: predicted seconds for P ranks, n bytes, chunk c bytes */
typedef double (*lp_cost_fn)(const lp_model_t *m, int P, double n, double c);

/* what an algorithm sends between nodes (traffic.c): adds every rank's off-node bytes and
 * messages of one call of `coll` on P ranks, n bytes, root, to t (the layout is in t) */
typedef struct lp_traffic lp_traffic_t;
typedef void (*lp_traffic_fn)(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);
void lp_traffic_lp(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);        /* chains */
void lp_traffic_lp_blocks(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);
void lp_traffic_ring(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);
void lp_traffic_mst(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);
void lp_traffic_be(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);
void lp_traffic_direct(lp_traffic_t *t, lp_coll_t coll, int P, int root, double n);   /* pairs */
/* pattern fn's bytes and messages from each node to the others (lp_net_traffic's, for a pattern) */
int lp_traffic_count(lp_traffic_fn fn, lp_coll_t coll, int P, const int *node, int root, double n, double c,
                     double *bytes, double *msgs);

/* one entry of the single algorithm registry (registry.c) */
typedef struct {
    const char *name;
    lp_coll_t coll;
    int chunked;                /* honours chunk_bytes */
    const lp_sched_t *sched;    /* its schedule (host memory; device memory on CUDA-aware MPI) */
    lp_cost_fn cost;
    const lp_sched_t *staged;   /* its own schedule on the STAGED transport; NULL: whole-buffer
                                   staging around sched (lp_sched_stage_whole) */
    lp_traffic_fn traffic;      /* its pattern between nodes (the model's network term) */
    /* its schedules over the node-local transports (NULL: none): the decision resolves the
     * transport once (request.c) and the request runs the schedule it names */
    const lp_sched_t *cma, *shm;
    /* 1: the row runs compressed calls only (compression=: its phases carry the wire format of
     * codec.c; alg_compress.c): never a candidate of an uncompressed call, of a table or of
     * the tuner, nor in lpmpi.algorithms() */
    int wire;
} lp_algo_t;

extern const lp_algo_t lp_algos[];
extern const int lp_nalgos;

/* schedule.c: group g of xch peers of an exchange of len bytes with every peer (per_peer: src
 * holds one piece per destination rank; dst gets one per source rank) */
void lp_lanes_exchange(lp_req_t *r, const lp_args_t *a, int g, int xch, const void *src, int per_peer,
                       void *dst, size_t len);

/* ---- schedules (one file per family) ---- */
extern const lp_sched_t lp_sched_lp, lp_sched_lp_staged;    /* all three collectives */
extern const lp_sched_t lp_sched_allgather_lp, lp_sched_reduce_scatter_lp;   /* alg_lp_blocks.c */
extern const lp_sched_t lp_sched_allreduce_mst, lp_sched_reduce_mst, lp_sched_bcast_mst;
extern const lp_sched_t lp_sched_allreduce_be, lp_sched_reduce_be, lp_sched_bcast_be,
    lp_sched_allgather_be, lp_sched_reduce_scatter_be;
extern const lp_sched_t lp_sched_ring;
extern const lp_sched_t lp_sched_ring_cma;   /* ring's allreduce over the node-local transport */
/* blocks between pairs (alg_direct.c): alltoall(v)'s pairwise exchange, gather's and scatter's
 * linear one, over MPI or single-copy reads */
extern const lp_sched_t lp_sched_direct, lp_sched_direct_cma;
/* the compressed collectives (alg_compress.c): allreduce, reduce_scatter(_v), allgather */
extern const lp_sched_t lp_sched_cz;
extern int lp_test_cz_wavefront;      /* tests: the compressed allreduce's wavefront form forced */
extern int lp_test_cz_reencode;       /* tests: re-encode partial sums (the design the tests reject) */
/* compression's other pieces (codec.c): acc (float32; float64 for float64 data) = x exactly
 * (add: acc += x); y (dtype) = acc, 16-bit types rounded once */
void lp_cz_widen(lp_dtype_t dt, const void *x, size_t n, void *acc, int add);
/* lp_cz_decode with the choice of stores made by the caller (stream: streaming stores for float32
 * results, where the call's whole result is at least lp_stream_min bytes) */
int lp_cz_decode_to(int comp, lp_dtype_t dt, const void *wire, size_t n, void *y, int stream);
/* the pieces of a compressed allreduce on several nodes of L ranks (alg_compress.c): the piece
 * bytes the model prices fastest (registry.c), of n bytes of esize-byte elements */
size_t lp_cz_chunk(const lp_model_t *m, int comp, size_t esize, int P, int nodes, size_t n);
int lp_cz_narrow(lp_dtype_t dt, const void *acc, size_t n, void *y);

/* a peer that died (alive.c): lp_proc_t's start time from /proc, and whether it is gone */
uint64_t lp_proc_since(int pid);      /* clock ticks after boot; 0 where /proc does not show it */
int lp_proc_gone(const lp_proc_t *p); /* no entry, a zombie, or another process now has the pid */
/* the first of n processes (pid 0: not watched) that is gone, or -1; *pid its process id */
int lp_procs_lost(const lp_proc_t *p, int n, int *pid);
int lp_world_rank_of(MPI_Comm comm, int rank);   /* rank's world rank, or -1 */
/* the words for every gone process of p[0..n) ("rank 2 of <whose> (process 1234 on this node,
 * world rank 2) is gone", or "ranks 0, 2 of ... are gone"; world ranks where comm is given:
 * MPI_COMM_NULL where MPI may not be called), their world ranks (or ranks) into world[maxw];
 * returns how many are gone */
int lp_dead_words(const lp_proc_t *p, int n, MPI_Comm comm, const char *whose, char *buf, size_t len,
                  int *world, int maxw);
/* the waits' wake-up: sched/progress.h's hook, run inside every thread's MPI progress from the first
 * notice on (lp_wake_waiters, the watch thread: 1 where MPI runs it; lp_wake_ok: the watch
 * thread may call MPI: MPI_THREAD_MULTIPLE) */
void lp_wake_set(int (*fn)(void));
int lp_wake_waiters(void);
int lp_wake_can(void);                /* the library has the hook's way in (MPIX_Async_start) */
extern atomic_int lp_wake_ok;         /* the watch thread runs, MPI is THREAD_MULTIPLE, and MPI has
                                         the hook's way in: blocked waits can be woken */
/* a thread inside MPI's own blocking call (native's collectives, a first call's barrier): its
 * slot (-1: none) holds what (and the call's arguments, or NULL) until it leaves; the watch
 * thread reads slot i (what: NULL where nobody is inside; seq: its count of entries) */
int lp_inside_enter(const lp_args_t *a, const char *what);
void lp_inside_leave(int slot);
int lp_inside_n(void);
const char *lp_inside_get(int i, const lp_args_t **a, unsigned long *seq);
/* len bytes of process pid at remote into local (transport.c: single-copy reads) */
int lp_cma_read(int pid, void *local, const void *remote, size_t len);
/* the shared-memory segment of a one-node communicator's ranks (alg_ring_shm.c): P regions of
 * `stride` bytes (three counters, then two slots of `slot` bytes) mapped at base */
typedef struct lp_shm {
    int P;
    size_t slot, stride, bytes;
    char *base;
    int *pid;                   /* every rank's process id, */
    unsigned long long *since;  /* and its start time (/proc: a pid reused is another process) */
    int watch;                  /* this rank sees every peer's /proc entry: liveness checks work */
} lp_shm_t;
extern const lp_sched_t lp_sched_ring_shm;   /* ring's allreduce over shared memory */
/* The node-local transport of a ring allreduce of nbytes on host memory, given which ones the
 * communicator has and what the decision asked for (a table row or the override: LP_TP_*; one
 * the communicator lacks falls back to the rule): the cost model's rule by size where nothing
 * asked (lp_nt_rule, model.c: its sizes and the measurements that set them).  request.c plans
 * with it, lp_comm_ring_transport reports it. */
enum { LP_RING_MPI = 0, LP_RING_SHM = 1, LP_RING_CMA = 2 };
typedef struct {
    size_t cma_min;            /* single-copy reads from cma_min, where the communicator has them */
    size_t shm_min, shm_max;   /* else shared memory for [shm_min, shm_max) */
} lp_nt_rule_t;
extern lp_nt_rule_t lp_nt_rule;
/* results of at least this many bytes are written with streaming stores (the ring over shared
 * memory, the codecs' decode): reduce.c, its measurements */
extern size_t lp_stream_min;
static inline int lp_ring_transport(int has_shm, int has_cma, size_t nbytes, int requested) {
    if (requested == LP_TP_MPI) return LP_RING_MPI;
    if (requested == LP_TP_SHM && has_shm) return LP_RING_SHM;
    if (requested == LP_TP_CMA && has_cma) return LP_RING_CMA;
    if (has_cma && nbytes >= lp_nt_rule.cma_min) return LP_RING_CMA;
    if (has_shm && nbytes >= lp_nt_rule.shm_min && nbytes < lp_nt_rule.shm_max) return LP_RING_SHM;
    return LP_RING_MPI;
}
/* the LP_TP_* a resolved LP_RING_* is (0 for -1: no node-local ring) */
static inline int lp_tp_of_ring(int ring_tp) {
    return ring_tp == LP_RING_MPI ? LP_TP_MPI : ring_tp == LP_RING_SHM ? LP_TP_SHM
           : ring_tp == LP_RING_CMA ? LP_TP_CMA : 0;
}
/* collective on comm (one node): map a segment on every rank, *out NULL where any rank failed */
int lp_shm_open(MPI_Comm comm, int rank, int P, lp_shm_t **out);
void lp_shm_close(lp_shm_t *s);
size_t lp_shm_rounds(const lp_args_t *a);
/* LPMPI_SHM_SPIN_US: how long (ns) at most a waiter polls before it sleeps (a transport's
 * counters) or yields (MPI requests) (sched/progress.h); < 0: never */
extern long lp_spin_ns;
extern const lp_sched_t lp_sched_native;

/* the memory areas a plan asked for (valid while the request lives) */
enum { LP_AREA_WORK = 0, LP_AREA_PINNED = 1, LP_AREA_DEVICE = 2 };
char *lp_req_area(lp_req_t *r, int area);
/* a schedule's init: n persistent MPI requests, owned (and freed) by the request */
int lp_req_alloc_persistent(lp_req_t *r, size_t n, MPI_Request **out);

/* native on AWARE: 1 when MPI's own op handles (dt, op) (else lpmpi's user op, host only) */
int lp_native_builtin(lp_dtype_t dt, lp_op_t op);

/* knobs (config.c): chunks in flight per direction; staging buffers of the staged pipeline;
 * the largest single MPI message (whole-buffer transfers go in pieces of this size) */
extern int lp_window;
extern int lp_node_transport;
extern int lp_staging;
extern size_t lp_max_msg_bytes;

/* tags, relative to a request's tag0 (every request has its own range of LP_TAGS_PER_REQ
 * tags, so that outstanding requests on one communicator never match each other's messages):
 * one per flow between a pair of ranks whose messages could otherwise cross */
enum { LP_TAG_UP = 0, LP_TAG_DOWN = 1, LP_TAG_UP2 = 2, LP_TAG_DOWN2 = 3, LP_TAG_RING = 4,
       LP_TAG_BE = 5, LP_TAG_MST = 6, LP_TAGS_PER_REQ = 8 };

#endif
