/* mst: binomial (minimum spanning) trees, the whole message per edge.
 *
 * What: bcast down a binomial tree rooted at the root; reduce up the same tree, a parent
 *   folding its children in increasing distance order; allreduce = reduce to rank 0 + bcast
 *   from rank 0 (identical bits everywhere).
 *
 * Steps (bcast, P = 8, virtual ranks v = rank - root mod P):
 *
 *   round 1:  0 -> 4
 *   round 2:  0 -> 2   4 -> 6
 *   round 3:  0 -> 1   2 -> 3   4 -> 5   6 -> 7          (reduce: the same edges, reversed)
 *
 * Schedule (transfers of the whole message go in pieces of the largest MPI message):
 *   bcast    one phase: RECV from the parent; SEND to every child, piece k after RECV k
 *            and after piece k went to the previous child: children one at a time, in
 *            decreasing distance (sent at once they would share the rank's link, and the
 *            farthest subtree, the deepest, would start forwarding log P times later); a
 *            deep tree forwards piece k while it receives piece k + 1.
 *   reduce   phase i (distance 2^i) on a rank with a child there: RECV the child's vector
 *            into scratch, REDUCE acc = (own or acc) op it, piece k after RECV k; at the
 *            rank's own distance a SEND of acc to the parent; a last phase on the root:
 *            SCALE (AVG).
 *   allreduce  the reduce to rank 0, then the bcast from rank 0 (recvbuf is the accumulator).
 *
 * Cost: cost_*_mst in src/alg/registry.c: ceil(log2 P) rounds of the whole message (and of its
 *   reduction for reduce).  Good for small messages; grows with log P for large ones.
 * Limits: none on P or count.  Order: acc = (own op child1) op child2 ... (fixed).
 * Memory: n bytes of scratch for an incoming child (and n more for the accumulator on
 *   non-root ranks of reduce, whose recvbuf is never written). */
#include "internal.h"

/* phases of the tree reduce: one per round, and the root's finish */
static int reduce_phases(int P) { return lp_binom_rounds(P) + 1; }

/* phase i of the reduce towards `root` into acc (meaningful on the root only); tmp: n bytes */
static void tree_reduce(lp_req_t *r, const lp_args_t *a, char *acc, char *tmp, int root, int i) {
    const int P = a->size, v = lp_vrank(a->rank, root, P), rounds = lp_binom_rounds(P);
    const int tag = a->tag0 + LP_TAG_MST;
    const size_t bytes = a->count * a->esize, pb = lp_piece_bytes(a);
    if (i == rounds) {                                 /* the root's result */
        if (v == 0) lp_lane_scale(r, a, acc, bytes, 0);
        return;
    }
    int mask = 1 << i;
    if (v && lp_lowbit(v) < mask) return;              /* sent its vector already */
    /* acc is untouched until the first child arrives: until then own data stands for it */
    const char *cur = a->sbuf;
    for (int m = 1; m < mask; m <<= 1)
        if (lp_binom_has_child(v, m, P)) cur = acc;
    if (v & mask) {                                    /* this round: up to the parent */
        lp_lane_send(r, a, cur, bytes, pb, lp_rrank(v - mask, root, P), tag);
    } else if (lp_binom_has_child(v, mask, P)) {
        lp_lane_t *rv = lp_lane_recv(r, a, tmp, bytes, pb, lp_rrank(v + mask, root, P), tag);
        lp_lane_after(lp_lane_reduce(r, a, acc, cur, tmp, bytes, pb), rv, 0);
    }
}

/* the bcast from `root` of buf: one phase */
static void tree_bcast(lp_req_t *r, const lp_args_t *a, char *buf, int root) {
    const int P = a->size, v = lp_vrank(a->rank, root, P), tag = a->tag0 + LP_TAG_MST;
    const size_t bytes = a->count * a->esize, pb = lp_piece_bytes(a);
    lp_lane_t *rv = NULL, *prev = NULL;
    int top = v ? lp_lowbit(v) : 1 << lp_binom_rounds(P);
    if (v) rv = lp_lane_recv(r, a, buf, bytes, pb, lp_rrank(lp_binom_parent(v), root, P), tag);
    for (int mask = top >> 1; mask > 0; mask >>= 1) {
        if (v + mask >= P) continue;
        lp_lane_t *s = lp_lane_send(r, a, buf, bytes, pb, lp_rrank(v + mask, root, P), tag);
        lp_lane_after(s, rv, 0);
        lp_lane_after(s, prev, 0);      /* one child at a time: the farthest starts forwarding */
        prev = s;                       /* first, as it would not if the link were shared */
    }
}

/* ---- bcast ---- */
static int bcast_phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    tree_bcast(r, a, a->rbuf, a->root);
    return LP_OK;
}

/* ---- reduce ---- */
static int reduce_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    size_t bytes = a->count * a->esize;
    p->nphases = reduce_phases(a->size);
    p->work = a->rank == a->root ? bytes : 2 * bytes;
    return LP_OK;
}
static int reduce_phase(lp_req_t *r, const lp_args_t *a, int i) {
    char *s = lp_req_area(r, LP_AREA_WORK);
    char *acc = a->rank == a->root ? a->rbuf : s + a->count * a->esize;
    tree_reduce(r, a, acc, s, a->root, i);
    return LP_OK;
}

/* ---- allreduce ---- */
static int allreduce_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = reduce_phases(a->size) + 1;
    p->work = a->count * a->esize;
    return LP_OK;
}
static int allreduce_phase(lp_req_t *r, const lp_args_t *a, int i) {
    if (i < reduce_phases(a->size))     /* recvbuf doubles as the accumulator */
        tree_reduce(r, a, a->rbuf, lp_req_area(r, LP_AREA_WORK), 0, i);
    else
        tree_bcast(r, a, a->rbuf, 0);
    return LP_OK;
}

const lp_sched_t lp_sched_bcast_mst = {lp_plan_one_phase, bcast_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_reduce_mst = {reduce_plan, reduce_phase, NULL, NULL, NULL};
const lp_sched_t lp_sched_allreduce_mst = {allreduce_plan, allreduce_phase, NULL, NULL, NULL};
