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
 * allreduce = up and down at once: the head finishes chunk k and sends it back down while
 *             chunk k+1.. still travel up, so each link carries traffic both ways (full
 *             duplex).  Two such chains run at once in opposite rank orders (0..P-1 and
 *             P-1..0), each carrying half of the message: the chain's two ends then share
 *             the reduction work (at P = 2 each rank reduces half instead of one rank all).
 *
 * Cost (alpha latency, beta per byte moved, gamma per byte reduced; K = n/c chunks of c
 * bytes): bcast and reduce take K + P - 2 steps of one chunk; allreduce (two chains of
 * n/(2c) chunks) K + 2P - 3 latencies plus a middle rank's port carrying 2n.  The formulas
 * are written once, in src/registry.c (cost_*_lp); nearly flat in P while the pipeline fill
 * stays small against n.  The optimal chunk is the registry cost's minimum
 * (lp_optimal_chunk, src/model.c; lpmpi.model.optimal_chunk); "auto" takes the best power
 * of two (lp_best_chunk).
 *
 * Deterministic order: chunk k's result is x_0 op (x_1 op (... op x_{P-1})) in chain order,
 * computed once at the head and copied everywhere else, so allreduce results are
 * bitwise identical on every rank and run to run.
 *
 * Implementation: one state machine per rank with four request windows of W chunks
 * (partial receive, partial send, final receive, final send).  It never blocks on one
 * request while another could progress: when nothing moved it waits on any of the oldest
 * outstanding requests (MPI_Waitsome), so the reduction of chunk k overlaps the transfers
 * of chunks k+1.. in both directions.  Memory: W chunk slots for incoming partials, plus W
 * for outgoing partials on non-root ranks of reduce (their recvbuf is never written).
 * Limits: none on P or count; chunk_bytes is clamped to lp_max_msg_bytes by the caller. */
#include "internal.h"

typedef struct {
    const lp_args_t *a;
    int up, down;           /* directions in use */
    int left, right;        /* real ranks of v-1 and v+1, or -1 */
    int tag_up, tag_down;
    size_t base, bytes;     /* the part of the message this chain carries */
    size_t K, W, cb;        /* chunks, window, chunk bytes (full chunk) */
    char *rslot, *sslot;    /* W incoming partial slots; W outgoing partial slots or NULL */
    MPI_Request *pr, *ps, *fr, *fs;   /* W requests each: partial recv/send, final recv/send */
    /* counters, each in chunk order: posted / completed */
    size_t pr_post, pdone, ps_done, fr_post, fr_done, fs_post, fs_done;
} chain_t;

static inline size_t chunk_off(const chain_t *c, size_t k) { return c->base + k * c->cb; }
static inline size_t chunk_len(const chain_t *c, size_t k) {
    size_t off = k * c->cb;
    return c->bytes - off < c->cb ? c->bytes - off : c->cb;
}

/* MPI_Test that also accepts MPI_REQUEST_NULL (already complete) */
/* a request is complete once MPI_Waitsome (in chains_run) has set it to MPI_REQUEST_NULL:
 * completions are only ever observed through a wait, never MPI_Test (SimGrid's SMPI, for one,
 * pays for every request a test completed at each later wait) */
#define TEST(req, flagp) (*(flagp) = ((req) == MPI_REQUEST_NULL))

/* advance one chain as far as it goes without blocking; *moved is set if anything happened */
static int chain_step(chain_t *c, int *moved, int *done) {
    const lp_args_t *a = c->a;
    int rc = LP_OK, flag;
    const size_t K = c->K, W = c->W;
    const int has_up_src = c->up && c->right >= 0;    /* receives partials */
    const int has_up_dst = c->up && c->left >= 0;     /* sends partials */
    const int has_dn_src = c->down && c->left >= 0;   /* receives finals */
    const int has_dn_dst = c->down && c->right >= 0;  /* sends finals */
    /* 1. keep W partial receives posted */
    while (has_up_src && c->pr_post < K && c->pr_post < c->pdone + W) {
        size_t k = c->pr_post++;
        LP_MPI(MPI_Irecv(c->rslot + (k % W) * c->cb, (int)chunk_len(c, k), MPI_BYTE, c->right,
                         c->tag_up, a->comm, &c->pr[k % W]));
        *moved = 1;
    }
    /* 2. produce partial (or, at the head, final) chunk pdone */
    while (c->up && c->pdone < K) {
        size_t k = c->pdone, s = k % W, off = chunk_off(c, k), len = chunk_len(c, k);
        if (has_up_dst && k - c->ps_done >= W) break;    /* no free partial-send slot */
        if (has_up_src && k >= c->pr_post) break;         /* its receive is not posted yet */
        flag = 1;
        if (has_up_src) TEST(c->pr[s], &flag);
        if (!flag) break;
        const char *out = a->sbuf + off;                  /* tail: own data as is */
        if (has_up_src) {
            char *dst = (c->sslot && has_up_dst) ? c->sslot + s * c->cb : a->rbuf + off;
            LP_TRY(lp_reduce_local(a, dst, a->sbuf + off, c->rslot + s * c->cb, len / a->esize));
            out = dst;
        }
        if (has_up_dst)
            LP_MPI(MPI_Isend(out, (int)len, MPI_BYTE, c->left, c->tag_up, a->comm, &c->ps[s]));
        else
            LP_TRY(lp_finish(a, a->rbuf + off, len / a->esize));  /* head: chunk k is final */
        c->pdone++;
        *moved = 1;
    }
    /* 3. retire partial sends in order */
    while (has_up_dst && c->ps_done < c->pdone) {
        TEST(c->ps[c->ps_done % W], &flag);
        if (!flag) break;
        c->ps_done++;
        *moved = 1;
    }
    /* 4. post final receives; a chunk's region is free once its partial has left */
    while (has_dn_src && c->fr_post < K && c->fr_post < c->fr_done + W &&
           (!has_up_dst || c->fr_post < c->ps_done)) {
        size_t k = c->fr_post++;
        LP_MPI(MPI_Irecv(a->rbuf + chunk_off(c, k), (int)chunk_len(c, k), MPI_BYTE, c->left,
                         c->tag_down, a->comm, &c->fr[k % W]));
        *moved = 1;
    }
    /* 5. complete final receives in order */
    while (has_dn_src && c->fr_done < c->fr_post) {
        TEST(c->fr[c->fr_done % W], &flag);
        if (!flag) break;
        c->fr_done++;
        *moved = 1;
    }
    /* 6. forward finished chunks down the chain */
    size_t avail = c->down ? (has_dn_src ? c->fr_done : c->pdone) : 0;
    while (has_dn_dst && c->fs_post < avail && c->fs_post < c->fs_done + W) {
        size_t k = c->fs_post++;
        LP_MPI(MPI_Isend(a->rbuf + chunk_off(c, k), (int)chunk_len(c, k), MPI_BYTE, c->right,
                         c->tag_down, a->comm, &c->fs[k % W]));
        *moved = 1;
    }
    /* 7. retire final sends in order */
    while (has_dn_dst && c->fs_done < c->fs_post) {
        TEST(c->fs[c->fs_done % W], &flag);
        if (!flag) break;
        c->fs_done++;
        *moved = 1;
    }
    *done = c->pdone == K && (!has_up_dst || c->ps_done == K) && (!has_dn_src || c->fr_done == K) &&
            (!has_dn_dst || c->fs_done == K);
cleanup:
    return rc;
}

/* run n chains to completion at once.  It never blocks while a chain could move: when
 * nothing moved it waits in MPI_Waitsome for any outstanding request of any chain, which
 * marks every completed one (MPI_REQUEST_NULL), and the chains advance from those marks. */
static int chains_run(chain_t *cs, int n) {
    int rc = LP_OK, *idx = NULL;
    MPI_Request *rq = NULL;
    size_t per = 4 * cs[0].W, total = (size_t)n * per;
    LP_TRY(lp_ctx_requests(cs[0].a->ctx, total, &rq));
    LP_TRY(lp_ctx_indices(cs[0].a->ctx, total, &idx));
    for (size_t i = 0; i < total; i++) rq[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < n; i++) {
        chain_t *c = &cs[i];
        c->pr = rq + i * per; c->ps = c->pr + c->W; c->fr = c->ps + c->W; c->fs = c->fr + c->W;
        if (!c->up) c->pdone = c->K;                      /* nothing to reduce */
    }
    for (;;) {
        int moved = 0, all = 1, outcount;
        for (int i = 0; i < n; i++) {
            int done = 0;
            LP_TRY(chain_step(&cs[i], &moved, &done));
            all = all && done;
        }
        if (all) break;
        if (moved) continue;
        LP_MPI(MPI_Waitsome((int)total, rq, &outcount, idx, MPI_STATUSES_IGNORE));
        if (outcount == MPI_UNDEFINED) {
            rc = LP_FAIL(LP_ERR_INTERNAL, "lp pipeline stalled (a bug of lpmpi: please report it)");
            goto cleanup;
        }
    }
cleanup:
    return rc;
}

/* chain over the ranks starting at `head`, going up (dir = 1) or down (dir = -1) in rank
 * order, carrying bytes [base, base + bytes) of the message; slots come from `slots` */
static size_t chain_setup(const lp_args_t *a, chain_t *c, int up, int down, int head, int dir,
                          size_t base, size_t bytes) {
    memset(c, 0, sizeof *c);
    int v;
    c->a = a;
    c->up = up;
    c->down = down;
    lp_chain_pos(a->rank, head, dir, a->size, &v, &c->left, &c->right);
    c->base = base;
    c->bytes = bytes;
    c->cb = a->chunk_elems * a->esize;
    c->K = (bytes + c->cb - 1) / c->cb;
    c->W = (size_t)lp_window < c->K ? (size_t)lp_window : c->K;
    if (c->W == 0) c->W = 1;
    int need_rslot = up && c->right >= 0;
    int need_sslot = need_rslot && c->left >= 0 && a->coll == LP_REDUCE;
    return (size_t)(need_rslot + need_sslot) * c->W * c->cb;   /* scratch bytes it needs */
}

static void chain_slots(chain_t *c, char *p) {
    int need_sslot = c->up && c->right >= 0 && c->left >= 0 && c->a->coll == LP_REDUCE;
    c->rslot = p;
    c->sslot = need_sslot ? p + c->W * c->cb : NULL;
}

static int run_single(const lp_args_t *a, int up, int down, int tag_up, int tag_down) {
    int rc = LP_OK;
    chain_t c;
    void *p = NULL;
    size_t need = chain_setup(a, &c, up, down, a->root, 1, 0, a->count * a->esize);
    if (need) LP_TRY(lp_scratch(a, need, &p));
    chain_slots(&c, p);
    c.tag_up = tag_up;
    c.tag_down = tag_down;
    rc = chains_run(&c, 1);
cleanup:
    return rc;
}

int lp_bcast_lp(const lp_args_t *a) { return run_single(a, 0, 1, 0, LP_TAG_BCAST); }

int lp_reduce_lp(const lp_args_t *a) { return run_single(a, 1, 0, LP_TAG_REDUCE, 0); }

/* allreduce: two chains in opposite directions, each carrying half of the message, so the
 * ends of the chain share the reduction work and every rank both reduces and forwards */
int lp_allreduce_lp(const lp_args_t *a) {
    int rc = LP_OK;
    chain_t c[2];
    void *p = NULL;
    size_t half = (a->count + 1) / 2 * a->esize, total = a->count * a->esize;
    size_t n0 = chain_setup(a, &c[0], 1, 1, 0, 1, 0, half);
    size_t n1 = chain_setup(a, &c[1], 1, 1, a->size - 1, -1, half, total - half);
    int nch = total > half ? 2 : 1;
    LP_TRY(lp_scratch(a, n0 + n1 + 64, &p));
    chain_slots(&c[0], p);
    chain_slots(&c[1], (char *)p + n0);
    c[0].tag_up = LP_TAG_ALLREDUCE;
    c[0].tag_down = LP_TAG_ALLREDUCE_BACK;
    c[1].tag_up = LP_TAG_ALLREDUCE2;
    c[1].tag_down = LP_TAG_ALLREDUCE2_BACK;
    rc = chains_run(c, nch);
cleanup:
    return rc;
}
