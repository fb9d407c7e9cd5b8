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
 * Cost: cost_*_mst in src/registry.c: ceil(log2 P) rounds of the whole message (and of its
 *   reduction for reduce).  Good for small messages; grows with log P for large ones.
 * Limits: none on P or count.  Order: acc = (own op child1) op child2 ... (fixed).
 * Memory: n bytes of scratch for an incoming child (and n more for the accumulator on
 *   non-root ranks of reduce, whose recvbuf is never written). */
#include "internal.h"

static int tree_bcast(const lp_args_t *a, char *buf, int root) {
    int rc = LP_OK, P = a->size, v = lp_vrank(a->rank, root, P), mask = 1;
    size_t bytes = a->count * a->esize;
    while (mask < P) {
        if (v & mask) {
            LP_TRY(lp_recv(a, buf, bytes, lp_rrank(v - mask, root, P), LP_TAG_MST));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < P) LP_TRY(lp_send(a, buf, bytes, lp_rrank(v + mask, root, P), LP_TAG_MST));
cleanup:
    return rc;
}

/* reduce into acc (valid on the root of the tree only); tmp: n bytes of scratch */
static int tree_reduce(const lp_args_t *a, char *acc, char *tmp, int root) {
    int rc = LP_OK, P = a->size, v = lp_vrank(a->rank, root, P);
    size_t bytes = a->count * a->esize;
    const char *cur = a->sbuf;             /* acc is untouched until the first child arrives */
    for (int mask = 1; mask < P; mask <<= 1) {
        if (v & mask) {
            LP_TRY(lp_send(a, cur, bytes, lp_rrank(v - mask, root, P), LP_TAG_MST));
            break;
        }
        if (v + mask < P) {
            LP_TRY(lp_recv(a, tmp, bytes, lp_rrank(v + mask, root, P), LP_TAG_MST));
            LP_TRY(lp_reduce_local(a, acc, cur, tmp, a->count));
            cur = acc;
        }
    }
    if (v == 0) {
        LP_TRY(lp_copy(a, acc, cur, bytes));
        LP_TRY(lp_finish(a, acc, a->count));
    }
cleanup:
    return rc;
}

int lp_bcast_mst(const lp_args_t *a) { return tree_bcast(a, a->rbuf, a->root); }

int lp_reduce_mst(const lp_args_t *a) {
    int rc = LP_OK;
    size_t bytes = a->count * a->esize;
    int is_root = a->rank == a->root;
    void *s;
    LP_TRY(lp_scratch(a, is_root ? bytes : 2 * bytes, &s));
    char *acc = is_root ? a->rbuf : (char *)s + bytes;
    LP_TRY(tree_reduce(a, acc, s, a->root));
cleanup:
    return rc;
}

int lp_allreduce_mst(const lp_args_t *a) {
    int rc = LP_OK;
    void *s;
    LP_TRY(lp_scratch(a, a->count * a->esize, &s));
    LP_TRY(tree_reduce(a, a->rbuf, s, 0));   /* recvbuf doubles as the accumulator */
    LP_TRY(tree_bcast(a, a->rbuf, 0));
cleanup:
    return rc;
}
