/* be: bidirectional exchange (Rabenseifner for allreduce and reduce, scatter-allgather for
 * bcast).
 *
 * What: allreduce: recursive-halving reduce-scatter, then recursive-doubling allgather, over
 *   pof2 = the largest power of two <= P.  The rem = P - pof2 extra ranks are folded first:
 *   among virtual ranks 0..2 rem-1 each odd one sends its whole vector to the even one below
 *   and sits out; the unfold at the end sends the result back.
 *   reduce: fold + reduce-scatter as above, then a binomial gather of the finished blocks to
 *   the root (the fold is done relative to the root, so the root never sits out).
 *   bcast: binomial scatter of P blocks from the root, then allgather: recursive doubling for
 *   P a power of two, a ring otherwise (MPICH's scatter_ring_allgather).
 *
 * Steps (allreduce, P = 4, blocks A B C D):
 *
 *   step 1 (distance 2):  0 <-> 2, 1 <-> 3  swap halves, reduce   -> each holds 2 blocks
 *   step 2 (distance 1):  0 <-> 1, 2 <-> 3  swap halves, reduce   -> each holds 1 block
 *   steps 3, 4:           the same pairs in reverse order copy the finished blocks around
 *
 * Cost: cost_*_be in src/registry.c: 2 log2(pof2) latencies, 2 (pof2-1)/pof2 n bytes moved,
 *   (pof2-1)/pof2 n reduced, plus the fold for P not a power of two.
 * Limits: none on P or count.  Order: each block's result is computed once, by its owner, in
 *   a fixed order: bitwise identical results everywhere.
 * Memory: n bytes of scratch (n more for the work vector on non-root ranks of reduce). */
#include "internal.h"

typedef struct {
    int P, pof2, rem, v, newrank, root;
} be_t;

static void be_init(const lp_args_t *a, be_t *b, int root) {
    b->P = a->size;
    b->pof2 = lp_pof2_floor(b->P);
    b->rem = b->P - b->pof2;
    b->root = root;
    b->v = lp_vrank(a->rank, root, b->P);
    if (b->v < 2 * b->rem) b->newrank = (b->v % 2) ? -1 : b->v / 2;
    else b->newrank = b->v - b->rem;
}
static int be_real(const be_t *b, int newrank) {
    int v = newrank < b->rem ? 2 * newrank : newrank + b->rem;
    return lp_rrank(v, b->root, b->P);
}

/* fold + recursive halving: afterwards a participating rank holds the finished block
 * `newrank` (of pof2 blocks) in work; folded-out ranks did nothing but send. */
static int be_reduce_scatter(const lp_args_t *a, const be_t *b, char *work, char *tmp) {
    int rc = LP_OK;
    size_t es = a->esize, bytes = a->count * es;
    const char *src = a->sbuf;
    if (b->v < 2 * b->rem) {
        if (b->v % 2) {
            LP_TRY(lp_send(a, a->sbuf, bytes, lp_rrank(b->v - 1, b->root, b->P), LP_TAG_BE));
            goto cleanup;
        }
        LP_TRY(lp_recv(a, tmp, bytes, lp_rrank(b->v + 1, b->root, b->P), LP_TAG_BE));
        LP_TRY(lp_reduce_local(a, work, a->sbuf, tmp, a->count));
        src = work;
    }
    int lo = 0, hi = b->pof2;
    for (int mask = b->pof2 / 2; mask >= 1; mask /= 2) {
        int mid = lo + (hi - lo) / 2, klo, khi, glo, ghi;
        if (b->newrank & mask) { klo = mid; khi = hi; glo = lo; ghi = mid; }
        else { klo = lo; khi = mid; glo = mid; ghi = hi; }
        size_t koff, klen, goff, glen;
        lp_blocks(a->count, b->pof2, klo, khi, &koff, &klen);
        lp_blocks(a->count, b->pof2, glo, ghi, &goff, &glen);
        LP_TRY(lp_sendrecv(a, src + goff * es, glen * es, be_real(b, b->newrank ^ mask),
                           tmp, klen * es, be_real(b, b->newrank ^ mask), LP_TAG_BE));
        LP_TRY(lp_reduce_local(a, work + koff * es, src + koff * es, tmp, klen));
        src = work;
        lo = klo;
        hi = khi;
    }
    if (src != work) LP_TRY(lp_copy(a, work, src, bytes));   /* pof2 == 1: nothing exchanged */
cleanup:
    return rc;
}

int lp_allreduce_be(const lp_args_t *a) {
    int rc = LP_OK;
    be_t b;
    be_init(a, &b, 0);
    size_t es = a->esize, bytes = a->count * es;
    void *tmp;
    LP_TRY(lp_scratch(a, bytes, &tmp));
    LP_TRY(be_reduce_scatter(a, &b, a->rbuf, tmp));
    if (b.newrank >= 0) {
        size_t off, len;
        lp_block(a->count, b.pof2, b.newrank, &off, &len);
        LP_TRY(lp_finish(a, a->rbuf + off * es, len));
        for (int mask = 1; mask < b.pof2; mask *= 2) {       /* recursive doubling */
            int mine = b.newrank & ~(mask - 1), theirs = (b.newrank ^ mask) & ~(mask - 1);
            size_t moff, mlen, toff, tlen;
            lp_blocks(a->count, b.pof2, mine, mine + mask, &moff, &mlen);
            lp_blocks(a->count, b.pof2, theirs, theirs + mask, &toff, &tlen);
            LP_TRY(lp_sendrecv(a, a->rbuf + moff * es, mlen * es, be_real(&b, b.newrank ^ mask),
                               a->rbuf + toff * es, tlen * es, be_real(&b, b.newrank ^ mask), LP_TAG_BE));
        }
    }
    if (b.v < 2 * b.rem) {                                    /* unfold */
        if (b.v % 2) LP_TRY(lp_recv(a, a->rbuf, bytes, lp_rrank(b.v - 1, 0, b.P), LP_TAG_BE));
        else LP_TRY(lp_send(a, a->rbuf, bytes, lp_rrank(b.v + 1, 0, b.P), LP_TAG_BE));
    }
cleanup:
    return rc;
}

int lp_reduce_be(const lp_args_t *a) {
    int rc = LP_OK;
    be_t b;
    be_init(a, &b, a->root);
    size_t es = a->esize, bytes = a->count * es;
    int is_root = b.v == 0;
    void *s;
    LP_TRY(lp_scratch(a, is_root ? bytes : 2 * bytes, &s));
    char *tmp = s, *work = is_root ? a->rbuf : (char *)s + bytes;
    LP_TRY(be_reduce_scatter(a, &b, work, tmp));
    if (b.newrank < 0) goto cleanup;
    int lo = b.newrank, hi = b.newrank + 1;                   /* binomial gather to newrank 0 */
    for (int mask = 1; mask < b.pof2; mask *= 2) {
        size_t off, len;
        if (b.newrank & mask) {
            lp_blocks(a->count, b.pof2, lo, hi, &off, &len);
            LP_TRY(lp_send(a, work + off * es, len * es, be_real(&b, b.newrank - mask), LP_TAG_BE));
            break;
        }
        lp_blocks(a->count, b.pof2, hi, hi + mask, &off, &len);
        LP_TRY(lp_recv(a, work + off * es, len * es, be_real(&b, b.newrank + mask), LP_TAG_BE));
        hi += mask;
    }
    if (is_root) LP_TRY(lp_finish(a, a->rbuf, a->count));
cleanup:
    return rc;
}

int lp_bcast_be(const lp_args_t *a) {
    int rc = LP_OK, P = a->size, root = a->root, v = lp_vrank(a->rank, root, P), mask = 1;
    size_t es = a->esize, off, len;
    char *buf = a->rbuf;
    while (mask < P) {                                        /* binomial scatter */
        if (v & mask) {
            lp_blocks(a->count, P, v, v + mask < P ? v + mask : P, &off, &len);
            LP_TRY(lp_recv(a, buf + off * es, len * es, lp_rrank(v - mask, root, P), LP_TAG_BE));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < P) {
            lp_blocks(a->count, P, v + mask, v + 2 * mask < P ? v + 2 * mask : P, &off, &len);
            LP_TRY(lp_send(a, buf + off * es, len * es, lp_rrank(v + mask, root, P), LP_TAG_BE));
        }
    }
    if (lp_pof2_floor(P) == P) {                              /* recursive doubling */
        for (mask = 1; mask < P; mask *= 2) {
            int mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
            size_t moff, mlen, toff, tlen;
            lp_blocks(a->count, P, mine, mine + mask, &moff, &mlen);
            lp_blocks(a->count, P, theirs, theirs + mask, &toff, &tlen);
            LP_TRY(lp_sendrecv(a, buf + moff * es, mlen * es, lp_rrank(v ^ mask, root, P),
                               buf + toff * es, tlen * es, lp_rrank(v ^ mask, root, P), LP_TAG_BE));
        }
    } else {                                                  /* ring */
        int right = lp_rrank((v + 1) % P, root, P), left = lp_rrank((v - 1 + P) % P, root, P);
        for (int s = 0; s < P - 1; s++) {
            int sb = (v - s + P) % P, rb = (v - s - 1 + 2 * P) % P;
            size_t soff, slen, roff, rlen;
            lp_block(a->count, P, sb, &soff, &slen);
            lp_block(a->count, P, rb, &roff, &rlen);
            LP_TRY(lp_sendrecv(a, buf + soff * es, slen * es, right, buf + roff * es, rlen * es, left,
                               LP_TAG_BE));
        }
    }
cleanup:
    return rc;
}
