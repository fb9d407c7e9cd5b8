/* ring over shared memory: the ring allreduce's result, computed by the ranks of one node through
 * a segment they all map (POSIX shared memory), synchronised by counters in that segment
 * instead of MPI messages.
 *
 * Why: the MPI-message transports pay a few microseconds per synchronisation and, above the
 * caches, move every byte through main memory more than once.  Here a round's bytes go
 * through two slots per rank that stay in the caches, and a rank learns that a peer's slot is
 * ready by reading a counter (tens of nanoseconds).  Main-memory traffic per rank is then the
 * inputs read once and the result written once.
 *
 * The segment (made at a communicator's first collective, context.c; transport/shm.c): per rank a region of
 * three counters (in, out, done; one cache line each) and two slots of `slot` bytes.  Every
 * counter only grows; it counts the rounds its rank finished in that stage, over every request
 * of the communicator (the rounds of one request are numbered from a->shm_base, which the
 * context hands out at each start in start order: the same on every rank, MPI's collective
 * order).
 *
 * A request cuts each of ring's P blocks into chunks of c elements (c * P * esize <= slot);
 * round k moves chunk k of every block.  Round g = shm_base + k uses slot g mod 2:
 *   in   (wait: every peer's done >= g - 1, so that round g - 2 has left my slot g mod 2)
 *        copy chunk k of every block I do not own from sendbuf into my slot; in = g + 1
 *   red  (wait: every peer's in >= g + 1) fold chunk k of my block in ring's order,
 *        x_o op (x_{o-1} op (... op x_{o+1})) (the peers' parts from their slots: the bits of
 *        ring over MPI), AVG's division, into my slot's place of my block, then into my
 *        recvbuf; out = g + 1
 *   gather (wait: every peer's out >= g + 1) copy every peer's chunk k of its block from its
 *        slot into my recvbuf; done = g + 1
 * and a stage of round g also waits until this rank finished that stage of round g - 1 (its
 * counter is g), which orders the rounds of several outstanding requests.  Nothing reads a
 * user buffer of another rank: in place needs no extra step.  The waits are polls (the engine
 * spins on them a while, then sleeps until a peer stores a counter: transport/shm.c
 * lp_shm_arm, sched/wait.c idle_wait); a request never blocks inside a step.
 *
 * Chosen (request.c) for the ring (allreduce, allgather, reduce_scatter: the rows whose `shm` field
 * is set) on host memory where the context made the segment
 * and a table row asks for it, or by the model's rule (internal.h: lp_ring_transport, model.c:
 * lp_nt_rule: small messages; its speed depends on where the host runs the ranks' cores). */
#include "internal.h"
#include "../transport/shm.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* the transport's steps (lane sub-kinds), in round order */
enum { SHM_IN, SHM_RED, SHM_GATHER };
static const lp_xport_t xport;

/* ---- the schedule ---- */

/* The collectives (the row's `shm`): allreduce as above; reduce_scatter its in and red (block r
 * rank r's, its result into recvbuf's one block); allgather its in (my own block's chunk into my
 * slot, and into my recvbuf) and gather (the peers' chunks from their slots).  A stage a
 * collective does not have still stores its counter (the next request's rounds wait on all
 * three) and waits for no peer. */
static int reduces(const lp_args_t *a) { return lp_traits(a->coll)->has_op; }
static int has_stage(const lp_args_t *a, int st) {
    return st == 0 || (st == 1 ? reduces(a) : a->coll != LP_REDUCE_SCATTER);
}
/* blocks a slot holds per round: the P blocks' chunks, or (allgather) my own block's */
static size_t slot_blocks(const lp_args_t *a) { return reduces(a) ? (size_t)a->size : 1; }

/* elements of chunk k of a block (c elements per block per round) */
static size_t chunk_elems(const lp_args_t *a) {
    size_t cap = a->shm->slot / (slot_blocks(a) * a->esize), c = a->chunk_elems;
    if (cap < 1) cap = 1;
    return c < cap ? c : cap;
}

size_t lp_shm_rounds(const lp_args_t *a) {
    size_t off, len;
    lp_ring_block(a, 0, &off, &len);                  /* block 0 is the longest */
    size_t c = chunk_elems(a);
    return (len + c - 1) / c;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    size_t n = lp_shm_rounds(a);
    lp_lane_t *in = lp_lane_xport(r, a, &xport, SHM_IN, NULL, n, 1);
    lp_lane_t *red = lp_lane_xport(r, a, &xport, SHM_RED, NULL, n, 1);
    lp_lane_t *out = lp_lane_xport(r, a, &xport, SHM_GATHER, NULL, n, 1);
    lp_lane_after(red, in, 0);
    lp_lane_after(out, red, 0);
    return LP_OK;
}

const lp_sched_t lp_sched_ring_shm = {lp_plan_one_phase, phase, NULL, NULL, NULL};

/* ---- the steps (sched/progress.h) ---- */

/* Messages of at least lp_stream_min bytes (reduce.c) write recvbuf with non-temporal
 * stores: they do not fit the caches anyway. */

/* SUM of float32 or float64, written twice from the same registers: to dst with non-temporal
 * stores and to acc (my slot, where the peers gather it) with plain ones; x op y in the order of
 * the kernels' a op b, each element alone (the kernels' bits).  One pass instead of the fold into
 * the slot and a copy out of it (P = 2, `lpmpi-bench --algorithms auto,ring --sizes 32MiB,64MiB`,
 * builds alternated 3 times: 64 MiB 11.1-11.7 -> 10.1-10.9 ms, 32 MiB 5.23-5.26 -> 5.12-5.23 ms).
 * NULL for other types and ops, and where the CPU has no AVX2 (then the fold and copy_out). */
typedef void (*sum2_fn)(char *dst, char *acc, const char *x, const char *y, size_t n);
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SUM2(name, T, tgt, V, W, LOAD, ADD, STORE, STREAM)                                 \
    __attribute__((target(tgt))) static void name(char *d_, char *c_, const char *x_,      \
                                                  const char *y_, size_t n) {              \
        T *d = (T *)d_, *acc = (T *)c_;                                                    \
        const T *x = (const T *)x_, *y = (const T *)y_;                                    \
        size_t i = 0;                                                                      \
        for (; i < n && ((uintptr_t)(d + i) & (sizeof(V) - 1)); i++) acc[i] = d[i] = x[i] + y[i]; \
        for (; i + W <= n; i += W) {                                                       \
            V v = ADD(LOAD(x + i), LOAD(y + i));                                           \
            STREAM(d + i, v);                                                              \
            STORE(acc + i, v);                                                             \
        }                                                                                  \
        for (; i < n; i++) acc[i] = d[i] = x[i] + y[i];                                    \
    }
SUM2(sum2_f32_512, float, "avx512f", __m512, 16, _mm512_loadu_ps, _mm512_add_ps, _mm512_storeu_ps, _mm512_stream_ps)
SUM2(sum2_f64_512, double, "avx512f", __m512d, 8, _mm512_loadu_pd, _mm512_add_pd, _mm512_storeu_pd, _mm512_stream_pd)
SUM2(sum2_f32_256, float, "avx2", __m256, 8, _mm256_loadu_ps, _mm256_add_ps, _mm256_storeu_ps, _mm256_stream_ps)
SUM2(sum2_f64_256, double, "avx2", __m256d, 4, _mm256_loadu_pd, _mm256_add_pd, _mm256_storeu_pd, _mm256_stream_pd)
static sum2_fn sum2_for(const lp_args_t *a) {
    if (a->op != LP_SUM || (a->dt != LP_FLOAT32 && a->dt != LP_FLOAT64)) return NULL;
    const int f32 = a->dt == LP_FLOAT32;
    if (__builtin_cpu_supports("avx512f")) return f32 ? sum2_f32_512 : sum2_f64_512;
    if (__builtin_cpu_supports("avx2")) return f32 ? sum2_f32_256 : sum2_f64_256;
    return NULL;
}
#else
static sum2_fn sum2_for(const lp_args_t *a) { (void)a; return NULL; }
#endif


static int ready(const lp_lane_t *l, size_t k) {
    const lp_args_t *a = l->a;
    const lp_shm_t *s = a->shm;
    const int P = a->size, me = a->rank, st = l->sub;
    const uint64_t g = a->shm_base + k;
    if (atomic_load_explicit(ctr(s, me, st), memory_order_relaxed) != g) return 0;
    /* in: round g - 2 has left my slot (every peer's done >= g - 1); red: the peers' inputs
     * of round g (in >= g + 1); gather: the peers' results of round g (out >= g + 1) */
    const int wait = st == 0 ? CTR_DONE : st == 1 ? CTR_IN : CTR_OUT;
    const uint64_t need = st == 0 ? (g >= 1 ? g - 1 : 0) : has_stage(a, st) ? g + 1 : 0;
    for (int j = 1; j < P; j++)
        if (atomic_load_explicit(ctr(s, (me + j) % P, wait), memory_order_acquire) < need) return 0;
    return 1;
}

/* chunk k of block b: its first element and length */
static inline void chunk_of(const lp_args_t *a, int b, size_t c, size_t k, size_t *off, size_t *len) {
    size_t bo, bl;
    lp_ring_block(a, b, &bo, &bl);
    size_t lo = k * c < bl ? k * c : bl, hi = (k + 1) * c < bl ? (k + 1) * c : bl;
    *off = bo + lo;
    *len = hi - lo;
}

static int step(const lp_lane_t *l, size_t k, char *out_, size_t len_) {
    (void)out_; (void)len_;
    const lp_args_t *a = l->a;
    const lp_shm_t *s = a->shm;
    const int P = a->size, me = a->rank, st = l->sub;
    const uint64_t g = a->shm_base + k;
    const size_t es = a->esize, c = chunk_elems(a);
    /* in place, recvbuf is the input this call just read, in the caches: plain stores there
     * (a streaming store to a cached dirty line writes it twice: `lpmpi-bench --forms
     * blocking,inplace --fresh-input`, ring in place / out of place at 32 and 64 MiB went
     * 1.12-1.24 -> 0.85-0.89) */
    const int nt = (st > 0 || !reduces(a)) && lp_key_bytes(a->coll, a->count, es, P) >= lp_stream_min &&
                   a->sbuf != a->rbuf;
    size_t off, len;
    if (!has_stage(a, st)) {
        /* nothing: the counter only */
    } else if (st == 0 && !reduces(a)) {               /* in (allgather): my block's chunk */
        chunk_of(a, me, c, k, &off, &len);
        const char *src = a->sbuf + (a->sbuf == a->rbuf ? off : off - (size_t)me * a->count) * es;
        if (len) memcpy(slot_of(s, me, g), src, len * es);
        if (len && a->sbuf != a->rbuf) lp_copy_out(a->rbuf + off * es, src, len * es, nt);
    } else if (st == 0) {                              /* in: my parts of the others' blocks */
        char *dst = slot_of(s, me, g);
        for (int j = 1; j < P; j++) {
            int b = lp_ring_block_of(a, (me + j) % P);
            chunk_of(a, b, c, k, &off, &len);
            if (len) memcpy(dst + (size_t)b * c * es, a->sbuf + off * es, len * es);
        }
    } else if (st == 1) {                              /* red: my block, in ring's order */
        const int b = lp_ring_block_of(a, me);
        chunk_of(a, b, c, k, &off, &len);
        /* where the result goes: allreduce's block of its buffer, reduce_scatter's one block */
        const size_t roff = lp_per_rank_blocks(a->coll) ? off - (size_t)b * a->count : off;
        /* in pieces of L1 size: a piece's result is copied out while it is in the L1 cache */
        const size_t piece = 16384 / es ? 16384 / es : 1;
        const sum2_fn sum2 = nt ? sum2_for(a) : NULL;
        for (size_t i = 0; i < len; i += piece) {
            const size_t m = len - i < piece ? len - i : piece, at = ((size_t)b * c + i) * es;
            char *acc = slot_of(s, me, g) + at;
            const char *x1 = slot_of(s, (me + 1) % P, g) + at, *x0 = a->sbuf + (off + i) * es;
            const char *y = x1;
            if (P > 2) {
                l->fn(acc, slot_of(s, (me + 2) % P, g) + at, x1, m);
                for (int j = 3; j < P; j++) l->fn(acc, slot_of(s, (me + j) % P, g) + at, acc, m);
                y = acc;
            }
            if (sum2) {                                /* x0 + y into recvbuf and my slot */
                sum2(a->rbuf + (roff + i) * es, acc, x0, y, m);
                continue;
            }
            l->fn(acc, x0, y, m);
            if (a->op == LP_AVG) lp_scale(acc, m, a->dt, (double)P);
            lp_copy_out(a->rbuf + (roff + i) * es, acc, m * es, nt);
        }
    } else {                                           /* gather: the peers' results */
        for (int j = 1; j < P; j++) {
            int p = (me + j) % P, b = lp_ring_block_of(a, p);
            const size_t at = reduces(a) ? (size_t)b * c * es : 0;
            chunk_of(a, b, c, k, &off, &len);
            if (len) lp_copy_out(a->rbuf + off * es, slot_of(s, p, g) + at, len * es, nt);
        }
    }
    lp_fence_nt(nt);
    atomic_store_explicit(ctr(s, me, st), g + 1, memory_order_release);
    lp_shm_wake_peers(s, me);
    return LP_OK;
}

/* the transport's interface (schedule.h): rounds that wait for the peers' counters */
static const void *segment(const lp_args_t *a) { return a->shm; }
static const lp_xport_t xport = {
    .name = "shm", .waits_for = "the other ranks' counters in the shared-memory segment",
    .ready = ready, .step = step, .segment = segment,
    .arm = lp_shm_arm, .disarm = lp_shm_disarm, .sleep = lp_shm_sleep, .gone = lp_shm_gone,
};
