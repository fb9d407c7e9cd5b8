/* lp for the collectives whose buffers hold a block per rank (issue 26): allgather and
 * reduce_scatter as two linear pipelines along the chain of ranks 0 .. P-1, one each way.
 *
 * What (rank i, blocks of blk bytes, block b belongs to rank b):
 *   allgather       rightward: rank i receives blocks 0 .. i-1 from i-1 (in order, chunk by
 *                   chunk) and passes them and then its own block on to i+1; leftward: it
 *                   receives blocks i+1 .. P-1 from i+1 and passes its own block and then
 *                   those on to i-1.  Blocks 0 .. i (and i .. P-1) are contiguous in recvbuf,
 *                   so each direction is one region: a RECV lane and a SEND lane after it.
 *   reduce_scatter  rightward: rank i receives the left partials of blocks i .. P-1 (the sums
 *                   x_0 op ... op x_{i-1}), makes those of blocks i+1 .. P-1 (recv op x_i) and
 *                   sends them on; leftward the same from the right for blocks 0 .. i-1.  The
 *                   owner then combines its block: (left op x_i) op right (an end rank has one
 *                   side only), AVG's division and acc_dtype's rounding last.
 * Every link carries at most P-1 blocks each way, as in ring, and chunk j of a block leaves a
 * rank as soon as it has come in (and been reduced): the pipeline of the LP paper.
 *
 * Schedule:
 *   allgather  phase 0: COPY of the input into its own block (out of place);
 *              phase 1: RL  RECV [0, i blk) from i-1          SR  SEND [0, (i+1) blk) to i+1, after RL j
 *                       RR  RECV [(i+1) blk, P blk) from i+1  SL  SEND [i blk, P blk) to i-1,
 *                           after RR j - floor(blk / cb) (the chunks of the own block go first)
 *   reduce_scatter phase 0: RL RECV the left partials of blocks i .. P-1 into scratch A;
 *              RED A[blk ..] = A[blk ..] op x[(i+1) blk ..] after RL j + ceil(blk / cb); SR
 *              after RED j (rank 0 sends its input blocks 1 .. P-1 instead); the same leftward
 *              into scratch B (aligned: lag 0; rank P-1 sends its input blocks 0 .. P-2);
 *              phase 1: the owner's block into recvbuf (after phase 0: in place, the input's
 *              block 0, read by phase 0, is where the result goes); phase 2: AVG / acc_dtype.
 * Cost: cost_*_lp in src/alg/registry.c: K + P - 2 latencies (K chunks of the P-1 blocks a link
 *   carries), (P-1)/P n bytes.  Order: the left and right partials in chain order: the same
 *   bits on every run and in every form.  Limits: none on P or count.  The chain is the ranks'
 *   order (not the node-aware chain of lp's element-wise collectives: a block's place in the
 *   buffer is its rank).  Memory: reduce_scatter 2 P blk bytes of scratch. */
#include "internal.h"

/* the decision's chunk, at most the largest MPI message */
static size_t chunk(const lp_args_t *a) {
    size_t cb = a->chunk_elems * a->esize, pb = lp_piece_bytes(a);
    return cb < pb ? cb : pb;
}

static int ag_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r; (void)a;
    p->nphases = 2;
    return LP_OK;
}

static int ag_phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, me = a->rank, tag = a->tag0 + LP_TAG_UP;
    const size_t blk = a->count * a->esize, cb = chunk(a);
    char *buf = a->rbuf;
    if (i == 0) {
        if (a->sbuf != a->rbuf) lp_lane_copy(r, a, buf + (size_t)me * blk, a->sbuf, blk, 0);
        return LP_OK;
    }
    lp_lane_t *rl = NULL, *rr = NULL;
    if (me > 0) rl = lp_lane_recv(r, a, buf, (size_t)me * blk, cb, me - 1, tag);
    if (me < P - 1) {
        lp_lane_after(lp_lane_send(r, a, buf, (size_t)(me + 1) * blk, cb, me + 1, tag), rl, 0);
        rr = lp_lane_recv(r, a, buf + (size_t)(me + 1) * blk, (size_t)(P - 1 - me) * blk, cb, me + 1, tag);
    }
    if (me > 0)
        lp_lane_after(lp_lane_send(r, a, buf + (size_t)me * blk, (size_t)(P - me) * blk, cb, me - 1, tag),
                      rr, -(long)(blk / cb));
    return LP_OK;
}

static int rs_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = 3;
    p->narrows = a->acc != NULL;
    p->work = 2 * lp_buf_bytes(a->coll, a->count, a->esize, a->size, 0);   /* A, then B */
    return LP_OK;
}

static int rs_phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, me = a->rank, tag = a->tag0 + LP_TAG_UP;
    const size_t blk = a->count * a->esize, cb = chunk(a);
    const char *x = a->sbuf;
    char *A = lp_req_area(r, LP_AREA_WORK), *B = A + (size_t)P * blk;   /* left / right partials */
    if (i == 0) {
        if (me == 0) {                                 /* rightward: my input is the partial */
            lp_lane_send(r, a, x + blk, (size_t)(P - 1) * blk, cb, 1, tag);
        } else {
            lp_lane_t *rl = lp_lane_recv(r, a, A, (size_t)(P - me) * blk, cb, me - 1, tag);
            if (me < P - 1) {
                const size_t n = (size_t)(P - 1 - me) * blk;
                lp_lane_t *red = lp_lane_reduce(r, a, A + blk, A + blk, x + (size_t)(me + 1) * blk, n, cb);
                lp_lane_after(red, rl, (long)((blk + cb - 1) / cb));
                lp_lane_after(lp_lane_send(r, a, A + blk, n, cb, me + 1, tag), red, 0);
            }
        }
        if (me == P - 1) {                             /* leftward: the same from the right */
            lp_lane_send(r, a, x, (size_t)(P - 1) * blk, cb, P - 2, tag);
        } else {
            lp_lane_t *rr = lp_lane_recv(r, a, B, (size_t)(me + 1) * blk, cb, me + 1, tag);
            if (me > 0) {
                const size_t n = (size_t)me * blk;
                lp_lane_t *red = lp_lane_reduce(r, a, B, B, x, n, cb);
                lp_lane_after(red, rr, 0);
                lp_lane_after(lp_lane_send(r, a, B, n, cb, me - 1, tag), red, 0);
            }
        }
    } else if (i == 1) {                               /* my block: (left op x_me) op right */
        const char *mine = x + (size_t)me * blk, *right = B + (size_t)me * blk;
        char *out = a->rbuf;
        if (me == 0) {
            lp_lane_reduce(r, a, out, mine, right, blk, cb);
        } else {
            lp_lane_t *l = lp_lane_reduce(r, a, out, A, mine, blk, cb);
            if (me < P - 1) lp_lane_after(lp_lane_reduce(r, a, out, out, right, blk, cb), l, 0);
        }
    } else {
        lp_lane_finish(r, a, 0, a->count);             /* AVG, acc_dtype */
    }
    return LP_OK;
}

const lp_sched_t lp_sched_allgather_lp = {ag_plan, ag_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_reduce_scatter_lp = {rs_plan, rs_phase, NULL, NULL, NULL};
