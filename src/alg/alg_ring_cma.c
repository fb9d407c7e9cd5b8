/* ring over the node-local transport: the ring allreduce's result, computed with single-copy
 * reads of the peers' buffers (Linux cross-memory attach, process_vm_readv) instead of
 * MPI messages, for the ranks of one node.
 *
 * Why: MPI's shared-memory path copies every byte twice (into a shared segment and out of
 * it); a reader that copies straight from its peer's buffer moves each byte once.  Per rank
 * the call then reads n (2P - 1)/P bytes and writes n: the memory-traffic bound of
 * lpmpi/bench/bound.py.
 *
 * What (P ranks of one node, block b of P near-equal blocks owned by rank b - 1, as in ring):
 *   hello      each rank sends its sendbuf and recvbuf addresses to every peer (MPI, the
 *              request's tag): a peer's hello also says its input is ready to be read;
 *   reduce     the owner o of block b reads the peers' parts of b chunk by chunk into two
 *              cache-sized slots and folds them in ring order, x_o op (x_{o-1} op (... op
 *              x_{o+1})), the exact order (and so the exact bits) of ring over MPI; AVG
 *              divides once; the result goes to o's recvbuf;
 *   mid        each rank tells every peer its block is final (after this a rank may write
 *              its other blocks: in place, no peer reads its input any more);
 *   gather     each rank copies every peer's final block from the peer's recvbuf into its own;
 *   end        each rank tells every peer it has copied: only then may a peer return (and
 *              its recvbuf change).
 * The exchanges (hello, mid, end) are MPI point-to-point of a few bytes with the request's
 * tag, in groups of XCH peers per phase (the lane limit); the copies are local steps.
 *
 * Chosen (request.c) for the ring allreduce on host memory where a table row asks for it, or by the
 * model's rule (internal.h: lp_ring_transport, model.c: lp_nt_rule) when the communicator's
 * context found the transport usable (context.c: one node, process_vm_readv of every peer works,
 * LPMPI_NODE_TRANSPORT is not "mpi" on any rank); everything else runs over MPI.
 * Memory: the address table (2 P pointers), two chunk slots, the exchange bytes. */
#include "internal.h"   /* the read itself: lp_cma_read (transport.c) */

enum { XCH = 7 };                 /* peers per exchange phase: 2 XCH lanes <= LP_LANES_MAX */
enum { CMA_REDUCE, CMA_GATHER };  /* the transport's steps (lane sub-kinds) */
static const lp_xport_t xport;

typedef struct { char *sbuf, *rbuf; } addr_t;

static int xch_phases(int P) { return (P - 1 + XCH - 1) / XCH; }
/* the blocks (internal.h: lp_ring_block); nothing reduced (allgather): the gather copies the
 * peers' inputs */
static int uniform(const lp_args_t *a) { return lp_per_rank_blocks(a->coll); }
static int reduces(const lp_args_t *a) { return lp_traits(a->coll)->has_op; }
static size_t slot_bytes(const lp_args_t *a) {
    size_t b = (uniform(a) ? lp_block_max(a) : a->count / (size_t)a->size + 1) * a->esize;
    size_t cb = a->chunk_elems * a->esize;
    return cb < b ? cb : b;
}

/* the stages of each collective (an exchange stage takes xch_phases(P) phases, a local one 1):
 *   allreduce                 hello, reduce, mid, gather, end
 *   reduce_scatter            hello, reduce, end      (in place: reduce into scratch, mid, copy)
 *   allgather                 hello, gather, end */
enum { ST_HELLO, ST_REDUCE, ST_MID, ST_COPY, ST_GATHER, ST_END };
static int stages(const lp_args_t *a, int st[6]) {
    int n = 0;
    st[n++] = ST_HELLO;
    if (reduces(a)) {
        st[n++] = ST_REDUCE;
        if (!uniform(a)) {                             /* allreduce: every block to everyone */
            st[n++] = ST_MID;
            st[n++] = ST_GATHER;
        } else if (a->sbuf == a->rbuf) {               /* the peers read my input meanwhile */
            st[n++] = ST_MID;
            st[n++] = ST_COPY;
        }
    } else {
        st[n++] = ST_GATHER;
    }
    st[n++] = ST_END;
    return n;
}
static int exchanging(int st) { return st == ST_HELLO || st == ST_MID || st == ST_END; }
/* reduce_scatter in place: its result waits here until every peer has read its input */
static size_t held_bytes(const lp_args_t *a) {
    size_t off, len;
    lp_recv_part(a, a->rank, &off, &len);
    return reduces(a) && uniform(a) && a->sbuf == a->rbuf ? len * a->esize : 0;
}
/* work area: [addresses of every rank: P addr_t][mine][exchange bytes: 2 P][2 slots] */
static addr_t *table(lp_req_t *r) { return (addr_t *)lp_req_area(r, LP_AREA_WORK); }
static char *xbytes(lp_req_t *r, const lp_args_t *a) { return (char *)(table(r) + a->size + 1); }
static char *slots(lp_req_t *r, const lp_args_t *a) {
    size_t off = (size_t)(a->size + 1) * sizeof(addr_t) + 2 * (size_t)a->size;
    return lp_req_area(r, LP_AREA_WORK) + ((off + 63) & ~(size_t)63);
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    size_t off = (size_t)(a->size + 1) * sizeof(addr_t) + 2 * (size_t)a->size;
    int st[6], n = stages(a, st);
    p->nphases = 0;
    for (int i = 0; i < n; i++) p->nphases += exchanging(st[i]) ? xch_phases(a->size) : 1;
    p->work = ((off + 63) & ~(size_t)63) + 2 * slot_bytes(a) + held_bytes(a);
    return LP_OK;
}


static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, me = a->rank, X = xch_phases(P);
    addr_t *t = table(r);
    char *xb = xbytes(r, a);
    int st[6], n = stages(a, st), k = 0, g = i;
    while (k < n && g >= (exchanging(st[k]) ? X : 1)) g -= exchanging(st[k++]) ? X : 1;
    if (k == n) return LP_OK;
    const size_t es = a->esize;
    size_t off, len;
    switch (st[k]) {
    case ST_HELLO:                                     /* my addresses to everyone */
        t[P] = (addr_t){(char *)a->sbuf, a->rbuf};
        if (!reduces(a) && a->sbuf == a->rbuf) {       /* allgather in place: my block's place */
            lp_recv_part(a, me, &off, &len);
            t[P].sbuf = a->rbuf + off * es;
        }
        lp_lanes_exchange(r, a, g, XCH, &t[P], 0, t, sizeof(addr_t));
        break;
    case ST_MID:                                       /* my block is final (reduce_scatter: */
    case ST_END:                                       /* the peers' inputs read) / I copied */
        lp_lanes_exchange(r, a, g, XCH, xb, 0, xb + P, 1);
        break;
    case ST_REDUCE: {                                  /* reduce my block */
        lp_ring_block(a, lp_ring_block_of(a, me), &off, &len);
        const size_t cb = slot_bytes(a);
        char *out = held_bytes(a) ? slots(r, a) + 2 * cb : a->rbuf + (uniform(a) ? 0 : off * es);
        lp_lane_t *l = lp_lane_xport(r, a, &xport, CMA_REDUCE, out, len * es, cb);
        lp_lane_slots(l, 2, slots(r, a), cb, 2);       /* the accumulator and the next input */
        lp_lane_region(l, 3, (char *)t);
        l->cma_off = off * es;                         /* the block's byte offset, for the peers */
        if (!held_bytes(a))                            /* in place: AVG after the copy */
            lp_lane_after(lp_lane_scale(r, a, out, len * es, 0), l, LP_ALL);
        break;
    }
    case ST_COPY: {                                    /* reduce_scatter in place: into block 0 */
        lp_lane_t *c = lp_lane_copy(r, a, a->rbuf, slots(r, a) + 2 * slot_bytes(a), held_bytes(a), 0);
        lp_lane_after(lp_lane_scale(r, a, a->rbuf, held_bytes(a), 0), c, LP_ALL);
        break;
    }
    case ST_GATHER: {                                  /* every other block */
        lp_lane_t *l = lp_lane_xport(r, a, &xport, CMA_GATHER, a->rbuf, 1, 0);
        lp_lane_region(l, 3, (char *)t);
        lp_recv_part(a, me, &off, &len);
        if (!reduces(a) && a->sbuf != a->rbuf && len)  /* allgather: and my own */
            lp_lane_copy(r, a, a->rbuf + off * es, a->sbuf, len * es, 0);
        break;
    }
    }
    return LP_OK;
}

const lp_sched_t lp_sched_ring_cma = {plan, phase, NULL, NULL, NULL};

/* ---- the copies (local steps, sched/progress.h) ---- */


/* step k of a CMA_REDUCE lane: chunk k of my block, folded in ring order:
 * acc = x_{o+1}; acc = x_{o+j} op acc for j = 2 .. P-1; out = x_o op acc */
static int reduce_step(const lp_lane_t *l, size_t k, char *out, size_t len) {
    const lp_args_t *a = l->a;
    const int P = a->size, me = a->rank;
    const addr_t *t = (const addr_t *)l->r[3].base;
    const size_t off = l->cma_off + k * l->cb, n = len / a->esize;
    char *acc = l->r[2].base, *tmp = l->r[2].base + l->r[2].stride;
    int rc = LP_OK;
    LP_TRY(lp_cma_read(a->pids[(me + 1) % P], acc, t[(me + 1) % P].sbuf + off, len));
    for (int j = 2; j < P; j++) {
        int p = (me + j) % P;
        LP_TRY(lp_cma_read(a->pids[p], tmp, t[p].sbuf + off, len));
        l->fn(acc, tmp, acc, n);
    }
    l->fn(out, a->sbuf + off, acc, n);
cleanup:
    return rc;
}

/* the gather: every peer's final block (allgather: its input), from its buffer into mine */
static int gather(const lp_lane_t *l) {
    const lp_args_t *a = l->a;
    const int P = a->size, me = a->rank;
    const addr_t *t = (const addr_t *)l->r[3].base;
    int rc = LP_OK;
    for (int j = 1; j < P; j++) {
        int p = (me + j) % P;
        size_t off, len;
        lp_ring_block(a, lp_ring_block_of(a, p), &off, &len);
        /* allreduce: the owner's result; allgather: the peer's input (in place: at its place,
         * which its hello named) */
        const char *src = !reduces(a) ? t[p].sbuf : t[p].rbuf + off * a->esize;
        if (len) LP_TRY(lp_cma_read(a->pids[p], a->rbuf + off * a->esize, src, len * a->esize));
    }
cleanup:
    return rc;
}

/* the transport's interface (schedule.h): a local step, never waiting (the exchanges are MPI) */
static int step(const lp_lane_t *l, size_t k, char *out, size_t len) {
    return l->sub == CMA_REDUCE ? reduce_step(l, k, out, len) : gather(l);
}
static const lp_xport_t xport = {.name = "cma", .step = step};
