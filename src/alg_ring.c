/* ring: ring reduce-scatter then ring allgather over P blocks, chunked (allreduce only).
 *
 * What: rank r owns block (r + 1) mod P of the result.  Reduce-scatter step s = 0 .. P-2:
 *   send block (r - s) mod P to r+1, receive block (r - s - 1) mod P from r-1 and reduce it
 *   into the local copy; allgather: P-1 steps pass the finished blocks around the ring.
 *   Within a reduce-scatter step the block travels as chunks of chunk_bytes, W in flight, so
 *   reducing chunk j overlaps receiving chunk j+1.
 *
 * Steps (P = 3, blocks A B C; "x+y" is a partial sum):
 *
 *   reduce-scatter   step 0: 0 -A-> 1   1 -B-> 2   2 -C-> 0      (each adds what it receives)
 *                    step 1: 0 -C-> 1   1 -A-> 2   2 -B-> 0      -> 0 owns B, 1 owns C, 2 owns A
 *   allgather        step 0: 0 -B-> 1   1 -C-> 2   2 -A-> 0
 *                    step 1: 0 -A-> 1   1 -B-> 2   2 -C-> 0      -> every rank holds A B C
 *
 * Schedule: phases 0 .. P-2, reduce-scatter step s:
 *   RR   RECV   chunk j of block (r-s-1) from r-1 into slot j mod W     after RED j-W
 *   RS   SEND   chunk j of block (r-s) (step 0: sendbuf, then recvbuf) to r+1
 *   RED  REDUCE recvbuf chunk j = sendbuf chunk j op slot j mod W       after RR j
 * phase P-1: SCALE (AVG) of the owned block; phases P .. 2P-2, allgather step s: SEND the
 * block (r+1-s) to r+1 and RECV block (r-s) from r-1 into recvbuf, whole (in pieces of the
 * largest MPI message).
 *
 * Cost: cost_allreduce_ring in src/registry.c: 2 (P - 1) steps of n/P bytes, each step's
 *   block in ceil(n / (P c)) chunks; P - 1 reductions of n/P bytes.
 * Limits: none on P or count; chunk_bytes clamped to lp_max_msg_bytes by the caller.
 * acc_dtype: the owner rounds its block once, after the reduce-scatter; the allgather moves
 *   16-bit blocks (half the bytes).
 * Order: every block's result is computed once, by its owner, in ring order: bitwise
 *   identical results on every rank.  Memory: W chunk slots. */
#include "internal.h"

static size_t window(const lp_args_t *a, size_t count) {   /* slots: chunks of the largest block */
    size_t ce = a->chunk_elems, K = (count / (size_t)a->size + 1 + ce - 1) / ce;
    return a->window < K ? a->window : (K ? K : 1);
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = 2 * a->size - 1;
    p->narrows = a->acc != NULL;
    p->work = window(a, a->count) * a->chunk_elems * a->esize;
    return LP_OK;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    /* over node order on several nodes (lp_ring_index): one crossing per node boundary */
    const int P = a->size, me = lp_ring_index(a);
    const int right = lp_ring_rank(a, lp_ring_right(me, P)), left = lp_ring_rank(a, lp_ring_left(me, P));
    const size_t es = a->esize, cb = a->chunk_elems * es;
    const int tag = a->tag0 + LP_TAG_RING;
    size_t soff, slen, roff, rlen;
    if (i < P - 1) {                                   /* reduce-scatter step i */
        const size_t W = window(a, a->count);
        char *slots = lp_req_area(r, LP_AREA_WORK);
        lp_block(a->count, P, lp_ring_rs_send(me, P, i), &soff, &slen);
        lp_block(a->count, P, lp_ring_rs_recv(me, P, i), &roff, &rlen);
        lp_lane_t *rr = lp_lane_recv(r, a, slots, rlen * es, cb, left, tag);
        lp_lane_slots(rr, 0, slots, cb, (unsigned)W);
        rr->W = W;
        /* the block sent at step i > 0 is the one reduced into recvbuf at step i - 1 */
        const char *src = i == 0 ? a->sbuf : a->rbuf;
        lp_lane_send(r, a, src + soff * es, slen * es, cb, right, tag)->W = W;
        lp_lane_t *red = lp_lane_reduce(r, a, a->rbuf + roff * es, a->sbuf + roff * es, slots,
                                        rlen * es, cb);
        lp_lane_slots(red, 2, slots, cb, (unsigned)W);
        lp_lane_after(red, rr, 0);
        lp_lane_after(rr, red, -(long)W);
    } else if (i == P - 1) {                           /* the owned block is final */
        lp_block(a->count, P, lp_ring_owned(me, P), &soff, &slen);
        lp_lane_finish(r, a, soff, slen);              /* acc_dtype: rounded once, here */
    } else {                                           /* allgather step i - P */
        const size_t pb = lp_piece_bytes(a);
        size_t ges;
        char *buf = lp_result_buf(a, &ges);            /* acc_dtype: the 16-bit blocks */
        lp_block(a->count, P, lp_ring_ag_send(me, P, i - P), &soff, &slen);
        lp_block(a->count, P, lp_ring_ag_recv(me, P, i - P), &roff, &rlen);
        lp_lane_send(r, a, buf + soff * ges, slen * ges, pb, right, tag);
        lp_lane_recv(r, a, buf + roff * ges, rlen * ges, pb, left, tag);
    }
    return LP_OK;
}

const lp_sched_t lp_sched_allreduce_ring = {plan, phase, NULL, NULL, NULL};
