/* Linear pipelining (LP): the message is cut into chunks that flow along a chain of ranks,
 * so every link of the chain is busy at once.
 *
 *   chain position v = 0 (head) ... P-1 (tail)
 *
 *   up   (reduce):   tail -> ... -> v+1 -> v -> v-1 -> ... -> head   partial sums
 *   down (bcast):    head -> ... -> v-1 -> v -> v+1 -> ... -> tail   finished chunks
 *
 *   time --->   chunk:  0   1   2   3   4 ...
 *   link P-1->P-2      [0] [1] [2] [3] [4]
 *   link P-2->P-3          [0] [1] [2] [3] [4]          (one step behind per hop)
 *
 * reduce    = up only, chain ordered from the root (v = rank - root mod P), head = root.
 * bcast     = down only, chain ordered from the root.
 * allreduce = up and down at once along the chain 0..P-1: the head finishes chunk k and
 *             sends it back down while chunk k+1.. still travel up, so each link carries
 *             traffic both ways (full duplex).
 *
 * Cost with K = n/c chunks of c bytes (alpha latency, beta per byte moved, gamma per byte
 * reduced):  bcast (K + P - 2)(alpha + c beta);  reduce (K + P - 2)(alpha + c (beta + gamma));
 * allreduce (K + 2P - 3)(alpha + c (beta + gamma)).  Nearly flat in P for K >> P.
 * Optimal chunk for reduce: c* = sqrt(n alpha / ((P - 2) (beta + gamma))).
 *
 * Deterministic order: chunk k's result is x_0 op (x_1 op (... op x_{P-1})) in chain order,
 * computed once at the head and copied everywhere else, so allreduce results are
 * bitwise identical on every rank and run to run.
 *
 * Implementation: one state machine per rank with four request windows of W chunks
 * (partial receive, partial send, final receive, final send).  It never blocks on one
 * request while another could progress: when nothing moved it waits on any of the oldest
 * outstanding requests (MPI_Waitany), so the reduction of chunk k overlaps the transfers
 * of chunks k+1.. in both directions.  Memory: W chunk slots for incoming partials, plus W
 * for outgoing partials on non-root ranks of reduce (their recvbuf is never written).
 * Limits: none on P or count; chunk_bytes is clamped to lp_max_msg_bytes by the caller. */
#include "internal.h"

typedef struct {
    const lp_args_t *a;
    int up, down;           /* directions in use */
    int v, P;               /* chain position, chain length */
    int left, right;        /* real ranks of v-1 and v+1, or -1 */
    int tag_up, tag_down;
    size_t K, W, cb;        /* chunks, window, chunk bytes (full chunk) */
    char *rslot, *sslot;    /* W incoming partial slots; W outgoing partial slots or NULL */
} chain_t;

static inline size_t chunk_off(const chain_t *c, size_t k) { return k * c->cb; }
static inline size_t chunk_len(const chain_t *c, size_t k) {
    size_t total = c->a->count * c->a->esize, off = k * c->cb;
    return total - off < c->cb ? total - off : c->cb;
}

/* MPI_Test that also accepts MPI_REQUEST_NULL (already complete) */
#define TEST(req, flagp) LP_MPI(MPI_Test(&(req), (flagp), MPI_STATUS_IGNORE))

static int chain_run(chain_t *c) {
    const lp_args_t *a = c->a;
    int rc = LP_OK;
    const size_t K = c->K, W = c->W;
    const int has_up_src = c->up && c->right >= 0;    /* receives partials */
    const int has_up_dst = c->up && c->left >= 0;     /* sends partials */
    const int has_dn_src = c->down && c->left >= 0;   /* receives finals */
    const int has_dn_dst = c->down && c->right >= 0;  /* sends finals */
    MPI_Request *rq = NULL;
    LP_TRY(lp_ctx_requests(a->ctx, 4 * W, &rq));
    MPI_Request *pr = rq, *ps = rq + W, *fr = rq + 2 * W, *fs = rq + 3 * W;
    for (size_t i = 0; i < 4 * W; i++) rq[i] = MPI_REQUEST_NULL;

    /* counters: posted / completed, each in chunk order */
    size_t pr_post = 0, pdone = 0, ps_done = 0, fr_post = 0, fr_done = 0, fs_post = 0, fs_done = 0;
    if (!c->up) pdone = K;               /* nothing to reduce */
    for (;;) {
        int moved = 0, flag;
        /* 1. keep W partial receives posted */
        while (has_up_src && pr_post < K && pr_post < pdone + W) {
            size_t k = pr_post++;
            LP_MPI(MPI_Irecv(c->rslot + (k % W) * c->cb, (int)chunk_len(c, k), MPI_BYTE, c->right,
                             c->tag_up, a->comm, &pr[k % W]));
            moved = 1;
        }
        /* 2. produce partial (or, at the head, final) chunk pdone */
        while (c->up && pdone < K) {
            size_t k = pdone, s = k % W, off = chunk_off(c, k), len = chunk_len(c, k);
            if (has_up_dst && k - ps_done >= W) break;       /* no free partial-send slot */
            if (has_up_src && k >= pr_post) break;            /* its receive is not posted yet */
            flag = 1;
            if (has_up_src) { TEST(pr[s], &flag); }
            if (!flag) break;
            const char *out = a->sbuf + off;                  /* tail: own data as is */
            if (has_up_src) {
                char *dst = (c->sslot && has_up_dst) ? c->sslot + s * c->cb : a->rbuf + off;
                a->fn(dst, a->sbuf + off, c->rslot + s * c->cb, len / a->esize);
                out = dst;
            } else if (!has_up_dst) {                         /* P == 1 */
                lp_copy(a->rbuf + off, a->sbuf + off, len);
                out = a->rbuf + off;
            }
            if (has_up_dst) {
                LP_MPI(MPI_Isend(out, (int)len, MPI_BYTE, c->left, c->tag_up, a->comm, &ps[s]));
            } else {
                lp_finish(a, a->rbuf + off, len / a->esize);  /* head: chunk k is final */
            }
            pdone++;
            moved = 1;
        }
        /* 3. retire partial sends in order */
        while (has_up_dst && ps_done < pdone) {
            TEST(ps[ps_done % W], &flag);
            if (!flag) break;
            ps_done++;
            moved = 1;
        }
        /* 4. post final receives; a chunk's region is free once its partial has left */
        while (has_dn_src && fr_post < K && fr_post < fr_done + W && (!has_up_dst || fr_post < ps_done)) {
            size_t k = fr_post++;
            LP_MPI(MPI_Irecv(a->rbuf + chunk_off(c, k), (int)chunk_len(c, k), MPI_BYTE, c->left,
                             c->tag_down, a->comm, &fr[k % W]));
            moved = 1;
        }
        /* 5. complete final receives in order */
        while (has_dn_src && fr_done < fr_post) {
            TEST(fr[fr_done % W], &flag);
            if (!flag) break;
            fr_done++;
            moved = 1;
        }
        /* 6. forward finished chunks down the chain */
        size_t avail = c->down ? (has_dn_src ? fr_done : pdone) : 0;
        while (has_dn_dst && fs_post < avail && fs_post < fs_done + W) {
            size_t k = fs_post++;
            LP_MPI(MPI_Isend(a->rbuf + chunk_off(c, k), (int)chunk_len(c, k), MPI_BYTE, c->right,
                             c->tag_down, a->comm, &fs[k % W]));
            moved = 1;
        }
        /* 7. retire final sends in order */
        while (has_dn_dst && fs_done < fs_post) {
            TEST(fs[fs_done % W], &flag);
            if (!flag) break;
            fs_done++;
            moved = 1;
        }
        int done = pdone == K && (!has_up_dst || ps_done == K) && (!has_dn_src || fr_done == K) &&
                   (!has_dn_dst || fs_done == K);
        if (done) break;
        if (!moved) {
            /* block until the oldest outstanding request of any stream completes */
            MPI_Request w[4];
            MPI_Request *src[4];
            int n = 0, idx;
            if (has_up_src && pdone < pr_post) { src[n] = &pr[pdone % W]; w[n++] = pr[pdone % W]; }
            if (has_up_dst && ps_done < pdone) { src[n] = &ps[ps_done % W]; w[n++] = ps[ps_done % W]; }
            if (has_dn_src && fr_done < fr_post) { src[n] = &fr[fr_done % W]; w[n++] = fr[fr_done % W]; }
            if (has_dn_dst && fs_done < fs_post) { src[n] = &fs[fs_done % W]; w[n++] = fs[fs_done % W]; }
            if (n == 0) { rc = LP_FAIL(LP_ERR_ARG, "lp pipeline stalled (internal error)"); goto cleanup; }
            LP_MPI(MPI_Waitany(n, w, &idx, MPI_STATUS_IGNORE));
            if (idx != MPI_UNDEFINED) *src[idx] = w[idx];   /* now MPI_REQUEST_NULL */
        }
    }
cleanup:
    return rc;
}

static int chain_setup(const lp_args_t *a, chain_t *c, int up, int down, int head) {
    int rc = LP_OK;
    memset(c, 0, sizeof *c);
    c->a = a;
    c->up = up;
    c->down = down;
    c->P = a->size;
    c->v = lp_vrank(a->rank, head, a->size);
    c->left = c->v > 0 ? lp_rrank(c->v - 1, head, a->size) : -1;
    c->right = c->v < c->P - 1 ? lp_rrank(c->v + 1, head, a->size) : -1;
    c->cb = a->chunk_elems * a->esize;
    c->K = (a->count + a->chunk_elems - 1) / a->chunk_elems;
    c->W = (size_t)lp_window < c->K ? (size_t)lp_window : c->K;
    if (c->W == 0) c->W = 1;
    int need_rslot = up && c->right >= 0;
    int need_sslot = up && c->right >= 0 && c->left >= 0 && a->coll == LP_REDUCE;
    size_t slots = (size_t)(need_rslot + need_sslot) * c->W;
    if (slots) {
        void *p;
        LP_TRY(lp_ctx_scratch(a->ctx, slots * c->cb, &p));
        c->rslot = p;
        c->sslot = need_sslot ? c->rslot + c->W * c->cb : NULL;
    }
cleanup:
    return rc;
}

int lp_bcast_lp(const lp_args_t *a) {
    chain_t c;
    int rc = chain_setup(a, &c, 0, 1, a->root);
    if (rc) return rc;
    c.tag_down = LP_TAG_BCAST;
    return chain_run(&c);
}

int lp_reduce_lp(const lp_args_t *a) {
    chain_t c;
    int rc = chain_setup(a, &c, 1, 0, a->root);
    if (rc) return rc;
    c.tag_up = LP_TAG_REDUCE;
    return chain_run(&c);
}

int lp_allreduce_lp(const lp_args_t *a) {
    chain_t c;
    int rc = chain_setup(a, &c, 1, 1, 0);
    if (rc) return rc;
    c.tag_up = LP_TAG_ALLREDUCE;
    c.tag_down = LP_TAG_ALLREDUCE_BACK;
    return chain_run(&c);
}
