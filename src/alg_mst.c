/* MST: binomial (minimum spanning) trees, whole message per edge.
 *
 *   bcast from root, P = 8 (virtual ranks):   0 -> 4; 0 -> 2, 4 -> 6; 0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
 *   reduce to root: the same tree, edges reversed; a parent folds its children in in
 *   increasing distance order: acc = (own op child1) op child2 ... (fixed, deterministic order)
 *   allreduce = reduce to rank 0 + bcast from rank 0 (identical bits everywhere).
 *
 * Cost: bcast ceil(log2 P)(alpha + n beta); reduce ceil(log2 P)(alpha + n (beta + gamma));
 * allreduce the sum of both.  Good for small messages; grows with log P for large ones.
 * Memory: reduce needs n bytes of scratch for an incoming child (and n more for the
 * accumulator on non-root ranks of reduce, whose recvbuf is never written). */
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
