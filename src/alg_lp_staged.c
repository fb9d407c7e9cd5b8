/* Staged linear pipelining: LP (alg_lp.c) for device memory over an MPI without device support.
 * Each chunk is staged through pinned host slots with asynchronous copies on the engine's own
 * streams, and reduced on the device, so that for successive chunks the device-to-host copy,
 * the MPI transfer, the host-to-device copy and the device reduction all overlap.
 *
 * Same chains, chunks, tags and message order as alg_lp.c (a staged rank and a host rank
 * interoperate); the device work goes through a->dev (devops.h: CUDA, or the host emulation).
 *
 *   per chunk k, slot s = k mod W (W = staging buffers), stream UP of the chain:
 *     tail     D2H  sbuf[k] -> out[s]                                      event up[s] -> Isend out[s]
 *     middle   Irecv in[s];  H2D in[s] -> din[s];  reduce acc = sbuf[k] op din[s];
 *              D2H acc -> out[s]                                           event up[s] -> Isend out[s]
 *     head     Irecv in[s];  H2D;  reduce into rbuf[k];  (AVG: scale);
 *              allreduce: D2H rbuf[k] -> out[s]                            event up[s] -> Isend down
 *   finals, stream DOWN of the chain, slot t = k mod W:
 *     Irecv fin[t] -> H2D fin[t] -> rbuf[k] (event dn[t]) and at once Isend fin[t] further down;
 *     bcast root: D2H rbuf[k] -> fin[t] (event dn[t]) -> Isend fin[t].
 *   acc is rbuf[k] (allreduce: that region is overwritten by the final later) or, on the middle
 *   ranks of reduce, whose rbuf is never written, a device slot dout[s].
 *
 *   time --->        chunk k          chunk k+1        chunk k+2
 *   copy engine D2H  [D2H k]          [D2H k+1]        [D2H k+2]
 *   MPI                       [send k]         [send k+1]
 *   copy engine H2D      [H2D k-1]         [H2D k]          [H2D k+1]
 *   SMs                          [red k-1]        [red k]
 *
 * Slot reuse is guarded by events and request completion, in chunk order: in[s] is reposted
 * once chunk k's up-stage event completed (its H2D has read in[s]); out[s] is rewritten once
 * the send of chunk k-W completed; fin[t] is reposted once its H2D event completed and its
 * forward send completed.  A final is copied into rbuf only after this rank's partial of that
 * chunk left (the final cannot exist before), so it never overwrites data still to be read.
 * The two directions use separate streams, so a final's H2D never waits behind the next
 * partial's copies.  Nothing blocks while anything could progress: with device work pending
 * the loop polls events and MPI requests; with none it waits in MPI_Waitany.
 *
 * Cost: the LP cost (cost_*_lp, src/registry.c) with chunk steps of max(alpha + c beta, c / B_pcie, c gamma_dev)
 * once the pipeline is full, plus about two chunk copies to fill and drain it.
 * Memory: per chain 3 W chunk slots of pinned host memory and 2 W of device memory.
 * Limits: W <= 64 (events); chunk_bytes as LP. */
#include "internal.h"
#include <sched.h>

typedef struct {
    const lp_args_t *a;
    const lp_devops_t *d;
    int up, down;             /* directions in use */
    int left, right;          /* neighbours in the chain (real ranks or -1) */
    int tag_up, tag_down;
    int s_up, s_dn;           /* streams */
    int e_up, e_dn;           /* first event of each W-array */
    size_t base, bytes, K, W, cb;
    size_t ss;                /* slot stride: min(cb, bytes), rounded up to 256 bytes */
    char *in, *out, *fin;     /* pinned: W slots each */
    char *din, *dout;         /* device: W slots each */
    MPI_Request *pr, *ps, *fr, *fs;
    size_t pr_post;           /* partial receives posted */
    size_t up_launch, up_done;/* up-stage device work enqueued / its event completed */
    size_t ps_post, ps_done;  /* partial sends posted / retired */
    size_t fr_post, fr_done;  /* final receives posted / completed (H2D and forward enqueued) */
    size_t fl;                /* bcast root: D2H of finals enqueued */
    size_t fe_done;           /* final-stage events completed */
    size_t fs_post, fs_done;  /* final sends posted / retired */
} schain_t;

static inline size_t s_off(const schain_t *c, size_t k) { return c->base + k * c->cb; }
static inline size_t s_len(const schain_t *c, size_t k) {
    size_t off = k * c->cb;
    return c->bytes - off < c->cb ? c->bytes - off : c->cb;
}

#define TEST(req, flagp) LP_MPI(MPI_Test(&(req), (flagp), MPI_STATUS_IGNORE))

/* advance one chain as far as it goes without blocking */
static int schain_step(schain_t *c, int *moved, int *done) {
    const lp_args_t *a = c->a;
    const lp_devops_t *d = c->d;
    int rc = LP_OK, flag;
    const size_t K = c->K, W = c->W;
    const int up_src = c->up && c->right >= 0;      /* receives partials */
    const int up_dst = c->up && c->left >= 0;       /* sends partials */
    const int up_head = c->up && c->left < 0;
    const int dn_src = c->down && c->left >= 0;     /* receives finals */
    const int dn_dst = c->down && c->right >= 0;    /* sends finals */
    const int dn_root = c->down && !c->up && c->left < 0;   /* bcast root: finals from rbuf */
    /* 1. partial receives: in[s] is free once the previous chunk of slot s left it */
    while (up_src && c->pr_post < K && c->pr_post < c->up_done + W) {
        size_t k = c->pr_post++;
        LP_MPI(MPI_Irecv(c->in + (k % W) * c->ss, (int)s_len(c, k), MPI_BYTE, c->right, c->tag_up,
                         a->comm, &c->pr[k % W]));
        *moved = 1;
    }
    /* 2. enqueue the up-stage device work of chunk up_launch */
    while (c->up && c->up_launch < K) {
        size_t k = c->up_launch, s = k % W, off = s_off(c, k), len = s_len(c, k), n = len / a->esize;
        if (up_dst && k >= c->ps_done + W) break;              /* out[s] still being sent */
        if (up_head && c->down && k >= c->fs_done + W) break;  /* out[s] still going down */
        if (up_src) {
            if (k >= c->pr_post) break;
            TEST(c->pr[s], &flag);
            if (!flag) break;
        }
        char *outs = c->out + s * c->ss;
        if (!up_src) {                                         /* tail: own data as is */
            LP_TRY(d->d2h(outs, a->sbuf + off, len, c->s_up));
        } else {
            char *acc = (up_dst && a->coll == LP_REDUCE) ? c->dout + s * c->ss : a->rbuf + off;
            char *dins = c->din + s * c->ss;
            LP_TRY(d->h2d(dins, c->in + s * c->ss, len, c->s_up));
            LP_TRY(d->reduce(acc, a->sbuf + off, dins, n, a->dt, a->op, c->s_up));
            if (up_head && a->op == LP_AVG) LP_TRY(d->scale(acc, n, a->dt, (double)a->size, c->s_up));
            if (up_dst || c->down) LP_TRY(d->d2h(outs, acc, len, c->s_up));
        }
        LP_TRY(d->record(c->e_up + (int)s, c->s_up));
        c->up_launch++;
        *moved = 1;
    }
    /* 3. up-stage events, in order */
    while (c->up_done < c->up_launch) {
        LP_TRY(d->query(c->e_up + (int)(c->up_done % W), &flag));
        if (!flag) break;
        c->up_done++;
        *moved = 1;
    }
    /* 4. send partials whose copy to the host finished */
    while (up_dst && c->ps_post < c->up_done) {
        size_t k = c->ps_post++;
        LP_MPI(MPI_Isend(c->out + (k % W) * c->ss, (int)s_len(c, k), MPI_BYTE, c->left, c->tag_up,
                         a->comm, &c->ps[k % W]));
        *moved = 1;
    }
    /* 5. retire partial sends in order */
    while (up_dst && c->ps_done < c->ps_post) {
        TEST(c->ps[c->ps_done % W], &flag);
        if (!flag) break;
        c->ps_done++;
        *moved = 1;
    }
    /* 6. finals: receive into fin[t] once its last use (copy in and forward) is over */
    while (dn_src && c->fr_post < K && c->fr_post < c->fe_done + W &&
           (!dn_dst || c->fr_post < c->fs_done + W)) {
        size_t k = c->fr_post++;
        LP_MPI(MPI_Irecv(c->fin + (k % W) * c->ss, (int)s_len(c, k), MPI_BYTE, c->left, c->tag_down,
                         a->comm, &c->fr[k % W]));
        *moved = 1;
    }
    /* 7. a received final goes to rbuf (H2D) and, from the same pinned slot, further down */
    while (dn_src && c->fr_done < c->fr_post) {
        size_t k = c->fr_done, t = k % W;
        TEST(c->fr[t], &flag);
        if (!flag) break;
        LP_TRY(d->h2d(a->rbuf + s_off(c, k), c->fin + t * c->ss, s_len(c, k), c->s_dn));
        LP_TRY(d->record(c->e_dn + (int)t, c->s_dn));
        c->fr_done++;
        *moved = 1;
    }
    /* 7'. bcast root: its finals come from rbuf */
    while (dn_root && c->fl < K && c->fl < c->fs_done + W) {
        size_t k = c->fl++, t = k % W;
        LP_TRY(d->d2h(c->fin + t * c->ss, a->rbuf + s_off(c, k), s_len(c, k), c->s_dn));
        LP_TRY(d->record(c->e_dn + (int)t, c->s_dn));
        *moved = 1;
    }
    /* 8. final-stage events, in order */
    size_t launched = dn_src ? c->fr_done : dn_root ? c->fl : 0;
    while (c->fe_done < launched) {
        LP_TRY(d->query(c->e_dn + (int)(c->fe_done % W), &flag));
        if (!flag) break;
        c->fe_done++;
        *moved = 1;
    }
    /* 9. send finals down: forwarded as soon as received; from the root once copied out */
    size_t avail = dn_src ? c->fr_done : dn_root ? c->fe_done : (c->down ? c->up_done : 0);
    char *src = up_head ? c->out : c->fin;
    while (dn_dst && c->fs_post < avail && c->fs_post < c->fs_done + W) {
        size_t k = c->fs_post++;
        LP_MPI(MPI_Isend(src + (k % W) * c->ss, (int)s_len(c, k), MPI_BYTE, c->right, c->tag_down,
                         a->comm, &c->fs[k % W]));
        *moved = 1;
    }
    /* 10. retire final sends in order */
    while (dn_dst && c->fs_done < c->fs_post) {
        TEST(c->fs[c->fs_done % W], &flag);
        if (!flag) break;
        c->fs_done++;
        *moved = 1;
    }
    *done = (!c->up || c->up_done == K) && (!up_dst || c->ps_done == K) &&
            (!dn_src || (c->fr_done == K && c->fe_done == K)) && (!dn_root || c->fe_done == K) &&
            (!dn_dst || c->fs_done == K);
cleanup:
    return rc;
}

/* device work still to complete (then poll rather than block in MPI) */
static int schain_device_pending(const schain_t *c) {
    size_t launched = (c->down && c->left >= 0) ? c->fr_done : (c->down && !c->up && c->left < 0) ? c->fl : 0;
    return c->up_done < c->up_launch || c->fe_done < launched;
}

static int schain_waiting(schain_t *c, MPI_Request **src, int n) {
    size_t W = c->W;
    if (c->up && c->right >= 0 && c->up_launch < c->pr_post) src[n++] = &c->pr[c->up_launch % W];
    if (c->up && c->left >= 0 && c->ps_done < c->ps_post) src[n++] = &c->ps[c->ps_done % W];
    if (c->down && c->left >= 0 && c->fr_done < c->fr_post) src[n++] = &c->fr[c->fr_done % W];
    if (c->down && c->right >= 0 && c->fs_done < c->fs_post) src[n++] = &c->fs[c->fs_done % W];
    return n;
}

static int schains_run(schain_t *cs, int n) {
    int rc = LP_OK;
    MPI_Request *rq = NULL;
    size_t per = 4 * cs[0].W;
    LP_TRY(lp_ctx_requests(cs[0].a->ctx, (size_t)n * per, &rq));
    for (size_t i = 0; i < (size_t)n * per; i++) rq[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < n; i++) {
        schain_t *c = &cs[i];
        c->pr = rq + i * per; c->ps = c->pr + c->W; c->fr = c->ps + c->W; c->fs = c->fr + c->W;
    }
    for (;;) {
        int moved = 0, all = 1, pending = 0;
        for (int i = 0; i < n; i++) {
            int done = 0;
            LP_TRY(schain_step(&cs[i], &moved, &done));
            all = all && done;
            pending = pending || schain_device_pending(&cs[i]);
        }
        if (all) break;
        if (moved) continue;
        if (pending) {            /* device work in flight: poll it and MPI alike */
            sched_yield();
            continue;
        }
        MPI_Request w[8], *src[8];
        int m = 0, idx;
        for (int i = 0; i < n; i++) m = schain_waiting(&cs[i], src, m);
        if (m == 0) { rc = LP_FAIL(LP_ERR_INTERNAL, "staged lp pipeline stalled (a bug of lpmpi: please report it)"); goto cleanup; }
        for (int i = 0; i < m; i++) w[i] = *src[i];
        LP_MPI(MPI_Waitany(m, w, &idx, MPI_STATUS_IGNORE));
        if (idx != MPI_UNDEFINED) *src[idx] = w[idx];
    }
    LP_TRY(cs[0].d->sync(-1));
cleanup:
    return rc;
}

/* chain `i` over the ranks from `head` in direction dir, carrying bytes [base, base + bytes) */
static void schain_setup(const lp_args_t *a, schain_t *c, int i, int up, int down, int head, int dir,
                         size_t base, size_t bytes) {
    memset(c, 0, sizeof *c);
    int v;
    c->a = a;
    c->d = a->dev;
    c->up = up;
    c->down = down;
    lp_chain_pos(a->rank, head, dir, a->size, &v, &c->left, &c->right);
    c->base = base;
    c->bytes = bytes;
    c->cb = a->chunk_elems * a->esize;
    c->K = (bytes + c->cb - 1) / c->cb;
    c->ss = ((c->cb < bytes ? c->cb : bytes) + 255) & ~(size_t)255;
    c->W = a->staging < c->K ? a->staging : c->K;
    if (c->W == 0) c->W = 1;
    c->s_up = 1 + 2 * i;
    c->s_dn = 2 + 2 * i;
    c->e_up = (int)(2 * (size_t)i * (size_t)LP_STAGING_MAX);
    c->e_dn = c->e_up + LP_STAGING_MAX;
    if (!up) c->up_done = c->up_launch = c->ps_done = c->ps_post = c->K;   /* nothing goes up */
}

static int schains_alloc(schain_t *cs, int n) {
    int rc = LP_OK;
    const lp_devops_t *d = cs[0].d;
    size_t hbytes = 0, dbytes = 0;
    void *h = NULL, *dv = NULL;
    for (int i = 0; i < n; i++) {
        hbytes += 3 * cs[i].W * cs[i].ss;
        dbytes += 2 * cs[i].W * cs[i].ss;
    }
    LP_TRY(d->arena(LP_ARENA_PINNED, 0, hbytes, &h));
    LP_TRY(d->arena(LP_ARENA_DEVICE, 0, dbytes, &dv));
    for (int i = 0; i < n; i++) {
        size_t slot = cs[i].W * cs[i].ss;
        cs[i].in = h; cs[i].out = cs[i].in + slot; cs[i].fin = cs[i].out + slot;
        h = cs[i].fin + slot;
        cs[i].din = dv; cs[i].dout = cs[i].din + slot;
        dv = cs[i].dout + slot;
    }
cleanup:
    return rc;
}

static int run_single(const lp_args_t *a, int up, int down, int tag_up, int tag_down) {
    int rc = LP_OK;
    schain_t c;
    schain_setup(a, &c, 0, up, down, a->root, 1, 0, a->count * a->esize);
    c.tag_up = tag_up;
    c.tag_down = tag_down;
    LP_TRY(schains_alloc(&c, 1));
    rc = schains_run(&c, 1);
cleanup:
    return rc;
}

int lp_bcast_lp_staged(const lp_args_t *a) { return run_single(a, 0, 1, 0, LP_TAG_BCAST); }

int lp_reduce_lp_staged(const lp_args_t *a) { return run_single(a, 1, 0, LP_TAG_REDUCE, 0); }

/* allreduce: the two opposite chains of alg_lp.c, each with its own streams and events */
int lp_allreduce_lp_staged(const lp_args_t *a) {
    int rc = LP_OK;
    schain_t c[2];
    size_t half = (a->count + 1) / 2 * a->esize, total = a->count * a->esize;
    schain_setup(a, &c[0], 0, 1, 1, 0, 1, 0, half);
    schain_setup(a, &c[1], 1, 1, 1, a->size - 1, -1, half, total - half);
    int nch = total > half ? 2 : 1;
    c[0].tag_up = LP_TAG_ALLREDUCE;
    c[0].tag_down = LP_TAG_ALLREDUCE_BACK;
    c[1].tag_up = LP_TAG_ALLREDUCE2;
    c[1].tag_down = LP_TAG_ALLREDUCE2_BACK;
    LP_TRY(schains_alloc(c, nch));
    rc = schains_run(c, nch);
cleanup:
    return rc;
}
