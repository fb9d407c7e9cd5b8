/* ring: ring reduce-scatter then ring allgather over P blocks, chunked (allreduce only).
 *
 * What: rank r owns block (r + 1) mod P of the result.  Reduce-scatter step s = 0 .. P-2:
 *   send block (r - s) mod P to r+1, receive block (r - s - 1) mod P from r-1 and reduce it
 *   into the local copy; allgather: P-1 steps pass the finished blocks around the ring.
 *   Within a step the block travels as chunks of chunk_bytes, W in flight, so reducing
 *   chunk j overlaps receiving chunk j+1.
 *
 * Steps (P = 3, blocks A B C; "x+y" is a partial sum):
 *
 *   reduce-scatter   step 0: 0 -A-> 1   1 -B-> 2   2 -C-> 0      (each adds what it receives)
 *                    step 1: 0 -C-> 1   1 -A-> 2   2 -B-> 0      -> 0 owns B, 1 owns C, 2 owns A
 *   allgather        step 0: 0 -B-> 1   1 -C-> 2   2 -A-> 0
 *                    step 1: 0 -A-> 1   1 -B-> 2   2 -C-> 0      -> every rank holds A B C
 *
 * Cost: cost_allreduce_ring in src/registry.c: 2 (P - 1) steps of n/P bytes, each step's
 *   block in ceil(n / (P c)) chunks; P - 1 reductions of n/P bytes.
 * Limits: none on P or count; chunk_bytes clamped to lp_max_msg_bytes by the caller.
 * Order: every block's result is computed once, by its owner, in ring order: bitwise
 *   identical results on every rank.  Memory: W chunk slots. */
#include "internal.h"

/* one reduce-scatter step: send [sb, sb+slen) from src; receive [roff, +rlen) from left in
 * chunks and reduce rbuf[roff..] = sbuf[roff..] op incoming */
static int rs_step(const lp_args_t *a, const char *src, size_t soff, size_t slen, size_t roff,
                   size_t rlen, int left, int right, char *slots, MPI_Request *rq) {
    int rc = LP_OK;
    size_t es = a->esize, ce = a->chunk_elems, W = (size_t)lp_window;
    size_t ns = (slen + ce - 1) / ce, nr = (rlen + ce - 1) / ce, n = ns > nr ? ns : nr;
    MPI_Request *sr = rq, *rr = rq + W;
    for (size_t j = 0; j < W && j < nr; j++) {
        size_t len = rlen - j * ce < ce ? rlen - j * ce : ce;
        LP_MPI(MPI_Irecv(slots + j * ce * es, (int)(len * es), MPI_BYTE, left, LP_TAG_RING, a->comm, &rr[j]));
    }
    for (size_t j = 0; j < n; j++) {
        if (j < ns) {   /* send chunk j once its request slot is free */
            size_t len = slen - j * ce < ce ? slen - j * ce : ce;
            LP_MPI(MPI_Wait(&sr[j % W], MPI_STATUS_IGNORE));
            LP_MPI(MPI_Isend(src + (soff + j * ce) * es, (int)(len * es), MPI_BYTE, right, LP_TAG_RING,
                             a->comm, &sr[j % W]));
        }
        if (j < nr) {   /* reduce chunk j, then reuse its slot for chunk j + W */
            size_t len = rlen - j * ce < ce ? rlen - j * ce : ce, off = (roff + j * ce) * es;
            char *slot = slots + (j % W) * ce * es;
            LP_MPI(MPI_Wait(&rr[j % W], MPI_STATUS_IGNORE));
            LP_TRY(lp_reduce_local(a, a->rbuf + off, a->sbuf + off, slot, len));
            size_t k = j + W;
            if (k < nr) {
                size_t klen = rlen - k * ce < ce ? rlen - k * ce : ce;
                LP_MPI(MPI_Irecv(slot, (int)(klen * es), MPI_BYTE, left, LP_TAG_RING, a->comm, &rr[j % W]));
            }
        }
    }
    LP_MPI(MPI_Waitall((int)W, sr, MPI_STATUSES_IGNORE));
cleanup:
    return rc;
}

int lp_allreduce_ring(const lp_args_t *a) {
    int rc = LP_OK, P = a->size, r = a->rank;
    int right = (r + 1) % P, left = (r - 1 + P) % P;
    size_t es = a->esize, W = (size_t)lp_window;
    void *slots;
    MPI_Request *rq;
    LP_TRY(lp_scratch(a, W * a->chunk_elems * es, &slots));
    LP_TRY(lp_ctx_requests(a->ctx, 2 * W, &rq));
    for (size_t i = 0; i < 2 * W; i++) rq[i] = MPI_REQUEST_NULL;
    for (int s = 0; s < P - 1; s++) {
        size_t soff, slen, roff, rlen;
        lp_block(a->count, P, (r - s + P) % P, &soff, &slen);
        lp_block(a->count, P, (r - s - 1 + 2 * P) % P, &roff, &rlen);
        /* the block sent at step s > 0 is the one reduced into rbuf at step s - 1 */
        LP_TRY(rs_step(a, s == 0 ? a->sbuf : a->rbuf, soff, slen, roff, rlen, left, right, slots, rq));
    }
    size_t off, len;
    lp_block(a->count, P, (r + 1) % P, &off, &len);
    LP_TRY(lp_finish(a, a->rbuf + off * es, len));
    for (int s = 0; s < P - 1; s++) {
        size_t soff, slen, roff, rlen;
        lp_block(a->count, P, (r + 1 - s + P) % P, &soff, &slen);
        lp_block(a->count, P, (r - s + P) % P, &roff, &rlen);
        LP_TRY(lp_sendrecv(a, a->rbuf + soff * es, slen * es, right, a->rbuf + roff * es, rlen * es,
                           left, LP_TAG_RING));
    }
cleanup:
    return rc;
}
