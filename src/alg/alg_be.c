/* be: bidirectional exchange (Rabenseifner for allreduce and reduce, scatter-allgather for
 * bcast).
 *
 * What: allreduce: recursive-halving reduce-scatter, then recursive-doubling allgather, over
 *   pof2 = the largest power of two <= P.  The rem = P - pof2 extra ranks are folded first:
 *   among virtual ranks 0..2 rem-1 each odd one sends its whole vector to the even one below
 *   and sits out; the unfold at the end sends the result back (topo.h: lp_rd_t).
 *   reduce: fold + reduce-scatter as above, then a binomial gather of the finished blocks to
 *   the root (the fold is done relative to the root, so the root never sits out).
 *   bcast: binomial scatter of P blocks from the root, then allgather: recursive doubling for
 *   P a power of two, a ring otherwise (MPICH's scatter_ring_allgather).
 *   reduce_scatter (issue 26): the fold and the recursive halving of allreduce over the P
 *   blocks of count elements (newrank i stands for the real ranks 2i, 2i + 1 when i < rem,
 *   else i + rem: its range of blocks is contiguous), then each rank copies its block out and
 *   a folded pair's even rank sends the odd one its block (unfold), AVG / acc_dtype last.
 *   allgather: the fold sends the extra ranks' blocks to their partners, recursive doubling
 *   over the newranks' ranges of blocks, the unfold sends the extras all P blocks.
 *
 * Steps (allreduce, P = 4, blocks A B C D):
 *
 *   step 1 (distance 2):  0 <-> 2, 1 <-> 3  swap halves, reduce   -> each holds 2 blocks
 *   step 2 (distance 1):  0 <-> 1, 2 <-> 3  swap halves, reduce   -> each holds 1 block
 *   steps 3, 4:           the same pairs in reverse order copy the finished blocks around
 *
 * Schedule: one phase per step above (a rank that sits a step out has an empty phase): a
 *   halving step is SEND of the half given away, RECV of the half kept into scratch and
 *   REDUCE into the work vector, piece k after RECV k; a doubling step a SEND and a RECV;
 *   the fold a SEND or a RECV + REDUCE; the finished block's SCALE (AVG) its own phase.
 *   Transfers go in pieces of the largest MPI message.
 *
 * Cost: cost_*_be in src/alg/registry.c: 2 log2(pof2) latencies, 2 (pof2-1)/pof2 n bytes moved,
 *   (pof2-1)/pof2 n reduced, plus the fold for P not a power of two.
 * Limits: none on P or count.  Order: each block's result is computed once, by its owner, in
 *   a fixed order: bitwise identical results everywhere.
 * Memory: n bytes of scratch (n more for the work vector on non-root ranks of reduce);
 *   reduce_scatter: 2 n (n: its P blocks), allgather: none. */
#include "internal.h"

/* ---- fold + recursive halving: phases 0 .. log2(pof2) ----
 * afterwards a participating rank holds the finished block `newrank` (of pof2 blocks) in
 * work; folded-out ranks only send.  The vector a step reads is sendbuf until the first
 * reduction has written work. */
static int rs_phases(const lp_rd_t *b) { return 1 + lp_log2(b->pof2); }

/* the elements [*off, *off + *len) of newranks [lo, hi): pof2 near-equal blocks of the
 * vector (allreduce, reduce), or the P blocks of count elements of the real ranks those
 * newranks stand for (reduce_scatter, allgather: no root, so virtual ranks are real ones) */
static void range(const lp_args_t *a, const lp_rd_t *b, int lo, int hi, size_t *off, size_t *len) {
    if (!lp_per_rank_blocks(a->coll)) {
        lp_blocks(a->count, b->pof2, lo, hi, off, len);
        return;
    }
    size_t first = (size_t)(lo < b->rem ? 2 * lo : lo + b->rem);
    size_t end = (size_t)(hi < b->rem ? 2 * hi : hi + b->rem);
    *off = first * a->count;
    *len = (end - first) * a->count;
}

static void reduce_scatter(lp_req_t *r, const lp_args_t *a, const lp_rd_t *b, char *work, char *tmp,
                           int i) {
    const size_t es = a->esize, pb = lp_piece_bytes(a);
    const size_t bytes = lp_buf_bytes(a->coll, a->count, es, a->size, 0);   /* the whole input */
    const int tag = a->tag0 + LP_TAG_BE;
    int partner;
    const int folded = lp_rd_folded(b, &partner);
    if (i == 0) {                                      /* the fold */
        if (!folded) return;
        if (b->newrank < 0) {
            lp_lane_send(r, a, a->sbuf, bytes, pb, partner, tag);
        } else {
            lp_lane_t *rv = lp_lane_recv(r, a, tmp, bytes, pb, partner, tag);
            lp_lane_after(lp_lane_reduce(r, a, work, a->sbuf, tmp, bytes, pb), rv, 0);
        }
        return;
    }
    if (b->newrank < 0) return;
    /* the range halved down to step i (distance pof2 / 2^i): keep [klo, khi), give [glo, ghi) */
    int lo = 0, hi = b->pof2, mask = b->pof2, klo = 0, khi = 0, glo = 0, ghi = 0;
    for (int s = 1; s <= i; s++) {
        int mid = lo + (hi - lo) / 2;
        mask /= 2;
        if (b->newrank & mask) { klo = mid; khi = hi; glo = lo; ghi = mid; }
        else { klo = lo; khi = mid; glo = mid; ghi = hi; }
        lo = klo;
        hi = khi;
    }
    const char *src = (folded || i > 1) ? work : a->sbuf;
    size_t koff, klen, goff, glen;
    range(a, b, klo, khi, &koff, &klen);
    range(a, b, glo, ghi, &goff, &glen);
    int peer = lp_rd_real(b, b->newrank ^ mask);
    lp_lane_send(r, a, src + goff * es, glen * es, pb, peer, tag);
    lp_lane_t *rv = lp_lane_recv(r, a, tmp, klen * es, pb, peer, tag);
    lp_lane_after(lp_lane_reduce(r, a, work + koff * es, src + koff * es, tmp, klen * es, pb), rv, 0);
}

/* ---- allreduce ---- */
static int allreduce_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    /* reduce-scatter, finish, doubling, unfold */
    p->nphases = rs_phases(&b) + 1 + lp_log2(b.pof2) + 1;
    p->narrows = a->acc != NULL;
    p->work = a->count * a->esize;
    return LP_OK;
}

static int allreduce_phase(lp_req_t *r, const lp_args_t *a, int i) {
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    const size_t pb = lp_piece_bytes(a);
    const int tag = a->tag0 + LP_TAG_BE, nrs = rs_phases(&b), lg = lp_log2(b.pof2);
    /* acc_dtype: the owned block is rounded once; the doubling and unfold move 16-bit data */
    size_t res_es, off, len;
    char *res = lp_result_buf(a, &res_es);
    if (i < nrs) {
        reduce_scatter(r, a, &b, a->rbuf, lp_req_area(r, LP_AREA_WORK), i);
    } else if (i == nrs) {                             /* the owned block is final */
        if (b.newrank < 0) return LP_OK;
        lp_block(a->count, b.pof2, b.newrank, &off, &len);
        lp_lane_finish(r, a, off, len);
    } else if (i <= nrs + lg) {                        /* recursive doubling */
        if (b.newrank < 0) return LP_OK;
        int mask = 1 << (i - nrs - 1);
        int mine = b.newrank & ~(mask - 1), theirs = (b.newrank ^ mask) & ~(mask - 1);
        size_t moff, mlen, toff, tlen;
        lp_blocks(a->count, b.pof2, mine, mine + mask, &moff, &mlen);
        lp_blocks(a->count, b.pof2, theirs, theirs + mask, &toff, &tlen);
        int peer = lp_rd_real(&b, b.newrank ^ mask);
        lp_lane_send(r, a, res + moff * res_es, mlen * res_es, pb, peer, tag);
        lp_lane_recv(r, a, res + toff * res_es, tlen * res_es, pb, peer, tag);
    } else {                                           /* unfold */
        int partner;
        const size_t rbytes = a->count * res_es;
        if (!lp_rd_folded(&b, &partner)) return LP_OK;
        if (b.newrank < 0) lp_lane_recv(r, a, res, rbytes, pb, partner, tag);
        else lp_lane_send(r, a, res, rbytes, pb, partner, tag);
    }
    return LP_OK;
}

/* ---- reduce ---- */
static int reduce_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, a->root);
    size_t bytes = a->count * a->esize;
    p->nphases = rs_phases(&b) + lp_log2(b.pof2) + 1;   /* reduce-scatter, gather, finish */
    p->work = b.v == 0 ? bytes : 2 * bytes;
    return LP_OK;
}

static int reduce_phase(lp_req_t *r, const lp_args_t *a, int i) {
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, a->root);
    const size_t es = a->esize, pb = lp_piece_bytes(a);
    const int tag = a->tag0 + LP_TAG_BE, nrs = rs_phases(&b), lg = lp_log2(b.pof2);
    const int is_root = b.v == 0;
    char *s = lp_req_area(r, LP_AREA_WORK);
    char *tmp = s, *work = is_root ? a->rbuf : s + a->count * es;
    if (i < nrs) {
        reduce_scatter(r, a, &b, work, tmp, i);
        return LP_OK;
    }
    if (i == nrs + lg) {                               /* the root's result */
        if (is_root) lp_lane_scale(r, a, a->rbuf, a->count * es, 0);
        return LP_OK;
    }
    if (b.newrank < 0) return LP_OK;
    /* binomial gather to newrank 0: at distance mask, a rank whose bit is set sends the blocks
     * [newrank, newrank + mask) it has gathered and is done; the others receive the next ones */
    int mask = 1 << (i - nrs);
    if (b.newrank & (mask - 1)) return LP_OK;          /* sent already */
    size_t off, len;
    if (b.newrank & mask) {
        lp_blocks(a->count, b.pof2, b.newrank, b.newrank + mask, &off, &len);
        lp_lane_send(r, a, work + off * es, len * es, pb, lp_rd_real(&b, b.newrank - mask), tag);
    } else {
        lp_blocks(a->count, b.pof2, b.newrank + mask, b.newrank + 2 * mask, &off, &len);
        lp_lane_recv(r, a, work + off * es, len * es, pb, lp_rd_real(&b, b.newrank + mask), tag);
    }
    return LP_OK;
}

/* ---- bcast: binomial scatter of P blocks, then allgather ---- */
static int bcast_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    int P = a->size;
    p->nphases = 2 + (lp_pof2_floor(P) == P ? lp_log2(P) : P - 1);
    return LP_OK;
}

static int bcast_phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, root = a->root, v = lp_vrank(a->rank, root, P);
    const int tag = a->tag0 + LP_TAG_BE;
    const size_t es = a->esize, pb = lp_piece_bytes(a);
    char *buf = a->rbuf;
    size_t off, len;
    int top = v ? lp_lowbit(v) : 1 << lp_binom_rounds(P);
    if (i == 0) {                                      /* scatter: my range from the parent */
        if (!v) return LP_OK;
        lp_blocks(a->count, P, v, v + top < P ? v + top : P, &off, &len);
        lp_lane_recv(r, a, buf + off * es, len * es, pb, lp_rrank(v - top, root, P), tag);
    } else if (i == 1) {                               /* scatter: the children's ranges */
        for (int mask = top >> 1; mask > 0; mask >>= 1) {
            if (v + mask >= P) continue;
            lp_blocks(a->count, P, v + mask, v + 2 * mask < P ? v + 2 * mask : P, &off, &len);
            lp_lane_send(r, a, buf + off * es, len * es, pb, lp_rrank(v + mask, root, P), tag);
        }
    } else if (lp_pof2_floor(P) == P) {                /* recursive doubling */
        int mask = 1 << (i - 2);
        int mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
        size_t moff, mlen, toff, tlen;
        lp_blocks(a->count, P, mine, mine + mask, &moff, &mlen);
        lp_blocks(a->count, P, theirs, theirs + mask, &toff, &tlen);
        int peer = lp_rrank(v ^ mask, root, P);
        lp_lane_send(r, a, buf + moff * es, mlen * es, pb, peer, tag);
        lp_lane_recv(r, a, buf + toff * es, tlen * es, pb, peer, tag);
    } else {                                           /* ring */
        int s = i - 2, right = lp_rrank((v + 1) % P, root, P), left = lp_rrank((v - 1 + P) % P, root, P);
        size_t soff, slen, roff, rlen;
        lp_block(a->count, P, (v - s + P) % P, &soff, &slen);
        lp_block(a->count, P, (v - s - 1 + 2 * P) % P, &roff, &rlen);
        lp_lane_send(r, a, buf + soff * es, slen * es, pb, right, tag);
        lp_lane_recv(r, a, buf + roff * es, rlen * es, pb, left, tag);
    }
    return LP_OK;
}

/* ---- reduce_scatter: fold + recursive halving over the P blocks, copy out, unfold, finish ---- */
static int rsb_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    p->nphases = rs_phases(&b) + 2;
    p->narrows = a->acc != NULL;
    p->work = 2 * lp_buf_bytes(a->coll, a->count, a->esize, a->size, 0);   /* work, then tmp */
    return LP_OK;
}

static int rsb_phase(lp_req_t *r, const lp_args_t *a, int i) {
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    const size_t es = a->esize, blk = a->count * es, pb = lp_piece_bytes(a);
    const int tag = a->tag0 + LP_TAG_BE, nrs = rs_phases(&b);
    char *work = lp_req_area(r, LP_AREA_WORK), *tmp = work + (size_t)a->size * blk;
    int partner = -1;
    const int folded = lp_rd_folded(&b, &partner);
    if (i < nrs) {
        reduce_scatter(r, a, &b, work, tmp, i);
    } else if (i == nrs) {                             /* my block out; the extra's to it */
        if (b.newrank < 0) {
            lp_lane_recv(r, a, a->rbuf, blk, pb, partner, tag);
            return LP_OK;
        }
        lp_lane_copy(r, a, a->rbuf, work + (size_t)a->rank * blk, blk, 0);
        if (folded) lp_lane_send(r, a, work + (size_t)partner * blk, blk, pb, partner, tag);
    } else {                                           /* AVG's division, acc_dtype's rounding */
        lp_lane_finish(r, a, 0, a->count);
    }
    return LP_OK;
}

/* ---- allgather: fold (the extras' blocks to their partners), recursive doubling, unfold ---- */
static int agb_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    p->nphases = 2 + lp_log2(b.pof2);
    return LP_OK;
}

static int agb_phase(lp_req_t *r, const lp_args_t *a, int i) {
    lp_rd_t b;
    lp_rd_init(&b, a->rank, a->size, 0);
    const size_t es = a->esize, blk = a->count * es, pb = lp_piece_bytes(a);
    const int tag = a->tag0 + LP_TAG_BE, lg = lp_log2(b.pof2);
    char *mine = a->rbuf + (size_t)a->rank * blk;
    const char *in = a->sbuf == a->rbuf ? mine : a->sbuf;
    int partner = -1;
    const int folded = lp_rd_folded(&b, &partner);
    if (i == 0) {                                      /* my block in place; the fold */
        if (b.newrank < 0) {
            lp_lane_send(r, a, in, blk, pb, partner, tag);
            return LP_OK;
        }
        if (in != mine) lp_lane_copy(r, a, mine, in, blk, 0);
        if (folded) lp_lane_recv(r, a, a->rbuf + (size_t)partner * blk, blk, pb, partner, tag);
    } else if (i <= lg) {                              /* recursive doubling */
        if (b.newrank < 0) return LP_OK;
        int mask = 1 << (i - 1);
        int lo = b.newrank & ~(mask - 1), tlo = (b.newrank ^ mask) & ~(mask - 1);
        size_t moff, mlen, toff, tlen;
        range(a, &b, lo, lo + mask, &moff, &mlen);
        range(a, &b, tlo, tlo + mask, &toff, &tlen);
        int peer = lp_rd_real(&b, b.newrank ^ mask);
        lp_lane_send(r, a, a->rbuf + moff * es, mlen * es, pb, peer, tag);
        lp_lane_recv(r, a, a->rbuf + toff * es, tlen * es, pb, peer, tag);
    } else if (folded) {                               /* unfold: all P blocks to the extra */
        const size_t all = (size_t)a->size * blk;
        if (b.newrank < 0) lp_lane_recv(r, a, a->rbuf, all, pb, partner, tag);
        else lp_lane_send(r, a, a->rbuf, all, pb, partner, tag);
    }
    return LP_OK;
}

const lp_sched_t lp_sched_allreduce_be = {allreduce_plan, allreduce_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_reduce_scatter_be = {rsb_plan, rsb_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_allgather_be = {agb_plan, agb_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_reduce_be = {reduce_plan, reduce_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_bcast_be = {bcast_plan, bcast_phase, NULL, NULL, NULL};
