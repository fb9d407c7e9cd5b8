/* ring: the ring's two phases, reduce-scatter and allgather, chained into three collectives
 * (as NCCL's runRing composes allreduce):
 *
 *   allreduce      = reduce-scatter, finish (AVG, acc_dtype), allgather   (rank r owns block r+1)
 *   reduce_scatter = reduce-scatter, finish                               (rank r owns block r)
 *   allgather      = its own block in place, allgather                    (rank r owns block r)
 *
 * A ring view (view_t below) says where the P blocks are: allreduce's near-equal blocks of the
 * one buffer (lp_block), or reduce_scatter's / allgather's blocks of `count` elements each;
 * which block a rank owns (its index + shift); where partial sums go.
 *
 * Reduce-scatter step s = 0 .. P-2 (o = the block this rank owns):
 *   send block o-1-s to r+1 (step 0: my input; later: the partial I made at step s-1), receive
 *   block o-2-s from r-1 and reduce it with my input's block into a partial (the last step:
 *   into my result).  Within a step the block travels as chunks of chunk_bytes, W in flight,
 *   so reducing chunk j overlaps receiving chunk j+1.
 * Allgather step s = 0 .. P-2: send block o-s to r+1, receive block o-1-s from r-1 into place.
 *
 * Steps (allreduce, P = 3, blocks A B C; "x+y" is a partial sum):
 *
 *   reduce-scatter   step 0: 0 -A-> 1   1 -B-> 2   2 -C-> 0      (each adds what it receives)
 *                    step 1: 0 -C-> 1   1 -A-> 2   2 -B-> 0      -> 0 owns B, 1 owns C, 2 owns A
 *   allgather        step 0: 0 -B-> 1   1 -C-> 2   2 -A-> 0
 *                    step 1: 0 -A-> 1   1 -B-> 2   2 -C-> 0      -> every rank holds A B C
 *
 * Schedule, reduce-scatter step s (one phase each):
 *   RR   RECV   chunk j of the received block from r-1 into slot j mod W   after RED j-W
 *   RS   SEND   chunk j of the sent block to r+1
 *   RED  REDUCE partial chunk j = my input's chunk j op slot j mod W       after RR j
 * finish: SCALE (AVG) / NARROW (acc_dtype) of the owned block; allgather step s: SEND and
 * RECV of whole blocks (in pieces of the largest MPI message).  allgather out of place first
 * copies its input into its own block (a COPY beside step 0, which sends from the input).
 *
 * Partials: allreduce reduces into recvbuf's block (its final place); reduce_scatter into two
 * scratch blocks used in turn (step s sends what step s-1 made while it makes the next), and
 * the last step into recvbuf.  In place (reduce_scatter: the buffer holds the P blocks and the
 * result lands in its first block, MPI's semantics) the input block 0 is read before the last
 * step writes the result over it (block 0 is reduced or sent at an earlier step, or it is
 * this rank's own block, reduced in place element by element).
 *
 * Cost: src/alg/registry.c (cost_*_ring): 2 (P - 1) steps of n/P bytes for allreduce, P - 1 for
 *   the other two; P - 1 reductions of n/P bytes where the collective reduces.
 * Limits: none on P or count; chunk_bytes clamped to lp_max_msg_bytes by the caller.
 * acc_dtype (allreduce): the owner rounds its block once, after the reduce-scatter; the
 *   allgather moves 16-bit blocks (half the bytes).
 * Order: every block's result is computed once, by its owner, in ring order: bitwise
 *   identical results on every rank.  Memory: W chunk slots (+ 2 blocks for reduce_scatter). */
#include "internal.h"

typedef struct {
    const lp_args_t *a;
    size_t count;       /* allreduce: the whole buffer (near-equal blocks) */
    int uniform;        /* a block per rank (reduce_scatter, allgather, their v forms: lp_ring_block) */
    int shift;          /* the block rank index i owns: i + shift */
    size_t maxblk;      /* elements of the largest block */
} view_t;

static view_t view_of(const lp_args_t *a) {
    return lp_per_rank_blocks(a->coll) ? (view_t){a, a->count, 1, 0, lp_block_max(a)}
                                       : (view_t){a, a->count, 0, 1, a->count / (size_t)a->size + 1};
}

/* block b of the view: elements [*off, *off + *len) of a P-block buffer */
static void block(const view_t *v, int P, int b, size_t *off, size_t *len) {
    b = ((b % P) + P) % P;
    if (v->uniform) lp_ring_block(v->a, lp_ring_rank(v->a, b), off, len);   /* position b's rank's */
    else lp_block(v->count, P, b, off, len);
}

static size_t window(const lp_args_t *a, const view_t *v) {   /* slots: chunks of the largest block */
    size_t ce = a->chunk_elems, blk = v->maxblk;
    size_t K = (blk + ce - 1) / ce;
    return a->window < K ? a->window : (K ? K : 1);
}

/* the phases of each collective, in order */
static int has_rs(const lp_args_t *a) { return lp_traits(a->coll)->has_op; }
static int has_ag(const lp_args_t *a) { return lp_traits(a->coll)->result == LP_ON_ALL && lp_traits(a->coll)->sblocks; }

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    const view_t v = view_of(a);
    const int P = a->size;
    p->nphases = (has_rs(a) ? P : 0) + (has_ag(a) ? P - 1 : 0);
    p->narrows = a->acc != NULL;
    p->work = has_rs(a) ? window(a, &v) * a->chunk_elems * a->esize : 0;
    if (has_rs(a) && !has_ag(a)) p->work += 2 * v.maxblk * a->esize;   /* reduce_scatter's partials */
    return LP_OK;
}

/* reduce-scatter step s */
static void rs_step(lp_req_t *r, const lp_args_t *a, const view_t *v, int s) {
    const int P = a->size, me = lp_ring_index(a), o = me + v->shift;
    const int right = lp_ring_rank(a, lp_ring_right(me, P)), left = lp_ring_rank(a, lp_ring_left(me, P));
    const size_t es = a->esize, cb = a->chunk_elems * es, W = window(a, v);
    const int tag = a->tag0 + LP_TAG_RING;
    char *slots = lp_req_area(r, LP_AREA_WORK);
    char *part = slots + W * cb;                       /* reduce_scatter: two partial blocks */
    size_t soff, slen, roff, rlen;
    block(v, P, o - 1 - s, &soff, &slen);
    block(v, P, o - 2 - s, &roff, &rlen);
    lp_lane_t *rr = lp_lane_recv(r, a, slots, rlen * es, cb, left, tag);
    lp_lane_slots(rr, 0, slots, cb, (unsigned)W);
    rr->W = W;
    /* what step s sends: my input's block at step 0, else the partial step s - 1 made */
    const char *src;
    char *dst;
    if (v->uniform) {
        src = s == 0 ? a->sbuf + soff * es : part + (size_t)((s - 1) & 1) * v->maxblk * es;
        dst = s == P - 2 ? a->rbuf : part + (size_t)(s & 1) * v->maxblk * es;
    } else {
        src = (s == 0 ? a->sbuf : a->rbuf) + soff * es;
        dst = a->rbuf + roff * es;
    }
    lp_lane_t *rs = lp_lane_send(r, a, src, slen * es, cb, right, tag);
    rs->W = W;
    lp_lane_t *red = lp_lane_reduce(r, a, dst, a->sbuf + roff * es, slots, rlen * es, cb);
    lp_lane_slots(red, 2, slots, cb, (unsigned)W);
    lp_lane_after(red, rr, 0);
    lp_lane_after(rr, red, -(long)W);
    /* reduce_scatter in place at P = 2: rank 1 sends its input block 0 while its result goes
     * over it (chunk j once chunk j has left) */
    if (src == dst) lp_lane_after(red, rs, 0);
}

/* allgather step s (step 0 of allgather out of place also puts its input in its own block) */
static void ag_step(lp_req_t *r, const lp_args_t *a, const view_t *v, int s) {
    const int P = a->size, me = lp_ring_index(a), o = me + v->shift;
    const int right = lp_ring_rank(a, lp_ring_right(me, P)), left = lp_ring_rank(a, lp_ring_left(me, P));
    const int tag = a->tag0 + LP_TAG_RING;
    const size_t pb = lp_piece_bytes(a);
    size_t ges, soff, slen, roff, rlen;
    char *buf = lp_result_buf(a, &ges);                /* acc_dtype: the 16-bit blocks */
    block(v, P, o - s, &soff, &slen);
    block(v, P, o - 1 - s, &roff, &rlen);
    const char *src = buf + soff * ges;
    if (s == 0 && !has_rs(a) && a->sbuf != a->rbuf) { /* allgather: my input into my block */
        lp_lane_copy(r, a, buf + soff * ges, a->sbuf, slen * ges, 0);
        src = a->sbuf;
    }
    lp_lane_send(r, a, src, slen * ges, pb, right, tag);
    lp_lane_recv(r, a, buf + roff * ges, rlen * ges, pb, left, tag);
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    /* over node order on several nodes (lp_ring_index): one crossing per node boundary */
    const view_t v = view_of(a);
    const int P = a->size;
    if (has_rs(a)) {
        if (i < P - 1) {
            rs_step(r, a, &v, i);
            return LP_OK;
        }
        if (i == P - 1) {                              /* my block is final */
            size_t off, len;
            if (v.uniform) {
                lp_recv_part(a, a->rank, &off, &len);  /* my block, the whole recvbuf */
                lp_lane_finish(r, a, 0, len);
            } else {
                block(&v, P, lp_ring_index(a) + v.shift, &off, &len);
                lp_lane_finish(r, a, off, len);        /* acc_dtype: rounded once, here */
            }
            return LP_OK;
        }
        i -= P;
    }
    ag_step(r, a, &v, i);
    return LP_OK;
}

const lp_sched_t lp_sched_ring = {plan, phase, NULL, NULL, NULL};
