/* direct: every block straight from the rank that holds it to the rank that gets it, for the
 * collectives that move blocks between pairs of ranks (their rows: lp_sends_to, lp_send_part,
 * lp_recv_part): alltoall and alltoallv ("pairwise": every rank sends block j to rank j),
 * gather and scatter ("linear": the root receives or sends P - 1 blocks).
 *
 * Over MPI (lp_sched_direct), pairwise exchange: step j = 1 .. P-1 sends to me + j and receives
 * from me - j (mod P), so that at every step each rank sends to one peer and receives from
 * another (no rank is every rank's target at once, as with a naive loop); the steps go in
 * groups of XCH (the lane limit), a group's transfers all in flight at once.
 *
 *     step 1:  0 -> 1 -> 2 -> 3 -> 0        step 2:  0 -> 2, 1 -> 3, 2 -> 0, 3 -> 1   ...
 *
 * Over single-copy reads (lp_sched_direct_cma; ranks of one node, Linux process_vm_readv):
 *   hello   each rank sends every peer the address of the block meant for it (MPI, a pointer);
 *   read    each rank copies every block meant for it from its sender's buffer straight into
 *           its recvbuf: one copy per byte, where MPI's shared-memory path makes two;
 *   end     each rank tells every peer it has read: only then may a peer return (its sendbuf
 *           may change after that).
 *
 * In place: alltoall(v) first copies its input aside (the peers' blocks land over it, MPI's
 * rule), gather's root and scatter's root keep their own block where it is.  Zero-length blocks
 * are skipped by both sides (each knows the length: MPI's rule that counts match pairwise).
 * Cost (registry.c, cost_direct): (P - 1) messages of n/P bytes per rank, the root's P - 1 for
 * gather and scatter.  Limits: none on P, counts or displacements.  Memory: the input's extent
 * in place (alltoall), the address tables (cma). */
#include "internal.h"

enum { XCH = 7 };                 /* peers per group: 2 XCH lanes + a copy <= LP_LANES_MAX */
static int groups(int P) { return (P - 1 + XCH - 1) / XCH; }

/* alltoall(v) in place: the input goes aside first, and is sent from there */
static int aside(const lp_args_t *a) {
    const lp_coll_traits_t *T = lp_traits(a->coll);
    return a->sbuf == a->rbuf && T->sblocks == 0 && T->rblocks == 0;
}
static size_t aside_bytes(const lp_args_t *a) {
    size_t end = 0, off, len;
    if (!aside(a)) return 0;
    for (int p = 0; p < a->size; p++) {
        lp_send_part(a, p, &off, &len);
        if (len && off + len > end) end = off + len;
    }
    return end * a->esize;
}
/* what the sends read: the input, or its copy aside */
static const char *source(lp_req_t *r, const lp_args_t *a) {
    return aside(a) ? lp_req_area(r, LP_AREA_WORK) : a->sbuf;
}
/* this rank's own block, copied locally (nothing to copy in place) */
static void own_block(lp_req_t *r, const lp_args_t *a) {
    const lp_coll_traits_t *T = lp_traits(a->coll);
    size_t soff, slen, roff, rlen;
    if (a->sbuf == a->rbuf || !lp_on(T->input, a->rank, a->root) || !lp_on(T->result, a->rank, a->root)) return;
    lp_send_part(a, a->rank, &soff, &slen);
    lp_recv_part(a, a->rank, &roff, &rlen);
    if (slen) lp_lane_copy(r, a, a->rbuf + roff * a->esize, a->sbuf + soff * a->esize, slen * a->esize, 0);
}

/* ---- over MPI ---- */
static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = aside(a) + groups(a->size);
    p->work = aside_bytes(a);
    return LP_OK;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, me = a->rank, tag = a->tag0 + LP_TAG_RING;
    const size_t es = a->esize, pb = lp_piece_bytes(a);
    if (aside(a) && i-- == 0) {
        lp_lane_copy(r, a, lp_req_area(r, LP_AREA_WORK), a->rbuf, aside_bytes(a), 0);
        return LP_OK;
    }
    const char *src = source(r, a);
    if (i == 0) own_block(r, a);
    for (int j = XCH * i + 1; j <= XCH * i + XCH && j < P; j++) {
        int to = (me + j) % P, from = (me - j + P) % P;
        size_t off, len;
        if (lp_sends_to(a, me, to)) {
            lp_send_part(a, to, &off, &len);
            if (len) lp_lane_send(r, a, src + off * es, len * es, pb, to, tag);
        }
        if (lp_sends_to(a, from, me)) {
            lp_recv_part(a, from, &off, &len);
            if (len) lp_lane_recv(r, a, a->rbuf + off * es, len * es, pb, from, tag);
        }
    }
    return LP_OK;
}

const lp_sched_t lp_sched_direct = {plan, phase, NULL, NULL, NULL};

/* ---- over single-copy reads ---- */
static const lp_xport_t xport;
/* work area: [aside][in: P pointers][out: P pointers][exchange bytes: 2 P] */
static char **addr_in(lp_req_t *r, const lp_args_t *a) {
    return (char **)(lp_req_area(r, LP_AREA_WORK) + ((aside_bytes(a) + 63) & ~(size_t)63));
}
static size_t cma_work(const lp_args_t *a) {
    return ((aside_bytes(a) + 63) & ~(size_t)63) + 2 * (size_t)a->size * sizeof(char *) + 2 * (size_t)a->size;
}

static int cma_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = aside(a) + 2 * groups(a->size) + 1;   /* [aside], hello, read, end */
    p->work = cma_work(a);
    return LP_OK;
}


static int cma_phase(lp_req_t *r, const lp_args_t *a, int i) {
    const int P = a->size, me = a->rank, G = groups(P);
    if (aside(a) && i-- == 0) {
        lp_lane_copy(r, a, lp_req_area(r, LP_AREA_WORK), a->rbuf, aside_bytes(a), 0);
        return LP_OK;
    }
    char **in = addr_in(r, a), **out = in + P;
    char *xb = (char *)(out + P);
    if (i < G) {                                       /* hello: where each peer's block is */
        const char *src = source(r, a);
        for (int p = 0; p < P; p++) {
            size_t off, len;
            out[p] = NULL;
            if (!lp_sends_to(a, me, p)) continue;
            lp_send_part(a, p, &off, &len);
            out[p] = (char *)src + off * a->esize;
        }
        lp_lanes_exchange(r, a, i, XCH, out, 1, in, sizeof(char *));
    } else if (i == G) {                               /* read the blocks meant for me */
        own_block(r, a);
        lp_lane_t *l = lp_lane_xport(r, a, &xport, 0, a->rbuf, 1, 0);
        lp_lane_region(l, 3, (char *)in);
    } else {                                           /* end: I have read */
        lp_lanes_exchange(r, a, i - G - 1, XCH, xb, 0, xb + P, 1);
    }
    return LP_OK;
}

/* the read: every block meant for this rank, from its sender's buffer */
static int read_step(const lp_lane_t *l, size_t k, char *out, size_t len) {
    (void)k; (void)out; (void)len;
    const lp_args_t *a = l->a;
    char *const *in = (char *const *)l->r[3].base;
    int rc = LP_OK;
    for (int j = 1; j < a->size; j++) {
        int from = (a->rank - j + a->size) % a->size;
        size_t off, n;
        if (!lp_sends_to(a, from, a->rank)) continue;
        lp_recv_part(a, from, &off, &n);
        if (n) LP_TRY(lp_cma_read(a->pids[from], a->rbuf + off * a->esize, in[from], n * a->esize));
    }
cleanup:
    return rc;
}

static const lp_xport_t xport = {.name = "cma", .step = read_step};

const lp_sched_t lp_sched_direct_cma = {cma_plan, cma_phase, NULL, NULL, NULL};
