/* schedule.c: the helpers that schedules build their phases with (schedule.h).  A phase's lanes live
 * in the request (lp_req_t.lane); these fill the next one.  Running them is sched/progress.h's job. */
#include "engine.h"
#include <limits.h>

static lp_lane_t overflow_lane;   /* given out when a phase asks for too many lanes (a bug) */

static lp_lane_t *lane_new(lp_req_t *r, const lp_args_t *a, int kind, size_t bytes, size_t cb) {
    if (r->nlanes >= LP_LANES_MAX) {
        r->build_rc = LP_FAIL(LP_ERR_INTERNAL, "a schedule phase asked for more than %d lanes "
                              "(a bug of lpmpi: please report it)", LP_LANES_MAX);
        memset(&overflow_lane, 0, sizeof overflow_lane);
        overflow_lane.owner = r;
        return &overflow_lane;
    }
    /* every field a lane of this kind reads is set here or by its builder (no memset: a
     * blocking call of a few bytes builds its lanes on every call) */
    lp_lane_t *l = &r->lane[r->nlanes++];
    l->kind = (unsigned char)kind;
    l->ndeps = l->ndops = l->stream = l->nt = 0;
    l->owner = r;
    l->a = a;
    l->bytes = bytes;
    if (cb && cb < bytes) {
        l->cb = cb;
        l->n = (bytes + cb - 1) / cb;
    } else {                      /* one chunk (no division: small calls build lanes per call) */
        l->cb = bytes ? bytes : 1;
        l->n = bytes != 0;
    }
    l->W = a->window ? a->window : 1;
    l->rop = a->op;
    l->fn = a->fn;
    l->issued = l->done = l->islot = l->dslot = 0;
    return l;
}

void lp_lane_after(lp_lane_t *l, const lp_lane_t *m, long lag) {
    if (!l || !m || l == &overflow_lane || m == &overflow_lane) return;
    lp_req_t *r = l->owner;
    if (l->ndeps >= LP_DEPS_MAX) {
        r->build_rc = LP_FAIL(LP_ERR_INTERNAL, "a lane has more than %d dependencies (a bug of "
                              "lpmpi: please report it)", LP_DEPS_MAX);
        return;
    }
    l->dep[l->ndeps].lane = (unsigned char)(m - r->lane);
    l->dep[l->ndeps].lag = lag > INT_MAX ? INT_MAX : lag < -INT_MAX ? -INT_MAX : (int)lag;
    l->ndeps++;
}

void lp_lane_dop(lp_lane_t *l, int kind, int dst, int x, int y) {
    if (!l || l->ndops >= LP_DOPS_MAX) {
        if (l && l != &overflow_lane)
            l->owner->build_rc = LP_FAIL(LP_ERR_INTERNAL, "a device lane has more than %d "
                                         "operations (a bug of lpmpi)", LP_DOPS_MAX);
        return;
    }
    l->dop[l->ndops++] = (lp_dop_t){(unsigned char)kind, (unsigned char)dst, (unsigned char)x,
                                    (unsigned char)y};
}

static lp_lane_t *lane_p2p(lp_req_t *r, const lp_args_t *a, int kind, const void *buf, size_t bytes,
                           size_t cb, int peer, int tag) {
    lp_lane_t *l = lane_new(r, a, kind, bytes, cb);
    lp_lane_region(l, 0, buf);
    l->peer = peer;
    l->tag = tag;
    return l;
}

lp_lane_t *lp_lane_send(lp_req_t *r, const lp_args_t *a, const void *buf, size_t bytes, size_t cb,
                        int peer, int tag) {
    return lane_p2p(r, a, LP_STEP_SEND, buf, bytes, cb, peer, tag);
}

lp_lane_t *lp_lane_recv(lp_req_t *r, const lp_args_t *a, void *buf, size_t bytes, size_t cb, int peer,
                        int tag) {
    return lane_p2p(r, a, LP_STEP_RECV, buf, bytes, cb, peer, tag);
}

lp_lane_t *lp_lane_reduce(lp_req_t *r, const lp_args_t *a, void *out, const void *x, const void *y,
                          size_t bytes, size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_REDUCE, bytes, cb);
    lp_lane_region(l, 0, out);
    lp_lane_region(l, 1, x);
    lp_lane_region(l, 2, y);
    return l;
}

lp_lane_t *lp_lane_copy(lp_req_t *r, const lp_args_t *a, void *dst, const void *src, size_t bytes,
                        size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_COPY, bytes, cb);
    lp_lane_region(l, 0, dst);
    lp_lane_region(l, 1, src);
    return l;
}

lp_lane_t *lp_lane_scale(lp_req_t *r, const lp_args_t *a, void *buf, size_t bytes, size_t cb) {
    if (a->op != LP_AVG || !lp_traits(a->coll)->has_op) return NULL;
    lp_lane_t *l = lane_new(r, a, LP_STEP_SCALE, bytes, cb);
    lp_lane_region(l, 0, buf);
    return l;
}

lp_lane_t *lp_lane_logical(lp_req_t *r, const lp_args_t *a, void *dst, const void *src, size_t bytes) {
    if (!lp_traits(a->coll)->has_op || (a->op != LP_LAND && a->op != LP_LOR && a->op != LP_LXOR))
        return NULL;
    lp_lane_t *l = lp_lane_reduce(r, a, dst, src, src, bytes, 0);
    l->rop = LP_LOR;
    l->fn = lp_reduce_kernel(a->dt, LP_LOR);
    return l;
}

lp_lane_t *lp_lane_xport(lp_req_t *r, const lp_args_t *a, const lp_xport_t *xp, int sub, void *out,
                         size_t bytes, size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_XPORT, bytes, cb);
    l->xp = xp;
    l->sub = (unsigned char)sub;
    if (out) lp_lane_region(l, 0, out);
    l->cma_off = 0;
    return l;
}

int lp_plan_one_phase(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r; (void)a;
    p->nphases = 1;
    return LP_OK;
}

lp_lane_t *lp_lane_narrow(lp_req_t *r, const lp_args_t *a, void *dst, const void *src, size_t bytes,
                          size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_NARROW, bytes, cb);
    lp_lane_region(l, 0, dst);
    l->r[0].stride = l->cb / a->esize * lp_dtype_size(a->acc_dt);
    lp_lane_region(l, 1, src);
    return l;
}

void lp_lane_finish(lp_req_t *r, const lp_args_t *a, size_t off, size_t len) {
    const size_t es = a->esize;
    lp_lane_t *fin = lp_lane_scale(r, a, a->rbuf + off * es, len * es, 0);
    if (a->acc)
        lp_lane_after(lp_lane_narrow(r, a, a->acc + off * lp_dtype_size(a->acc_dt), a->rbuf + off * es,
                                     len * es, 0), fin, 0);
}

lp_lane_t *lp_lane_native(lp_req_t *r, const lp_args_t *a, const lp_xport_t *xp, const void *sbuf,
                          void *rbuf, size_t bytes, size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_NATIVE, bytes, cb);
    l->xp = xp;
    lp_lane_region(l, 0, sbuf);
    lp_lane_region(l, 1, rbuf);
    return l;
}

lp_lane_t *lp_lane_dev(lp_req_t *r, const lp_args_t *a, int stream, size_t bytes, size_t cb) {
    lp_lane_t *l = lane_new(r, a, LP_STEP_DEV, bytes, cb);
    l->stream = (unsigned char)stream;
    l->W = a->staging ? a->staging : 1;
    return l;
}

void lp_chain_at(const lp_args_t *a, int head, int dir, int *v, int *left, int *right) {
    const int P = a->size;
    if (!a->order) {
        lp_chain_pos(a->rank, head, dir, P, v, left, right);
        return;
    }
    /* S = a->order (dir = 1) or its reverse; head's node is S[b0, b1) */
#define S(i) (dir > 0 ? a->order[(i)] : a->order[P - 1 - (i)])
    const int hp = dir > 0 ? a->pos[head] : P - 1 - a->pos[head], hn = a->node[head];
    int b0 = hp, b1 = hp + 1, k = 0, prev = -1;
    while (b0 > 0 && a->node[S(b0 - 1)] == hn) b0--;
    while (b1 < P && a->node[S(b1)] == hn) b1++;
    *v = *left = *right = -1;
    /* the chain: head, the rest of S[b0, b1), S[b1, P), S[0, b0) */
    for (int part = 0; part < 4; part++) {
        int lo = part == 0 ? 0 : part == 1 ? b0 : part == 2 ? b1 : 0;
        int hi = part == 0 ? 1 : part == 1 ? b1 : part == 2 ? P : b0;
        for (int i = lo; i < hi; i++) {
            int r = part == 0 ? head : S(i);
            if (part == 1 && r == head) continue;
            if (*v >= 0) { *right = r; return; }
            if (r == a->rank) { *v = k; *left = prev; }
            prev = r;
            k++;
        }
    }
#undef S
}

/* group g of XCH peers of an all-to-all exchange of `len` bytes per pair (the node-local
 * transports' hello / mid / end rounds): for j = XCH g + 1 .. XCH g + XCH (< P), send to me + j
 * from src (src + (me + j) len where per_peer) and receive what me - j sends into
 * dst + (me - j) len, the request's ring tag */
void lp_lanes_exchange(lp_req_t *r, const lp_args_t *a, int g, int xch, const void *src, int per_peer,
                       void *dst, size_t len) {
    const int P = a->size, me = a->rank, tag = a->tag0 + LP_TAG_RING;
    for (int j = xch * g + 1; j <= xch * g + xch && j < P; j++) {
        int to = (me + j) % P, from = (me - j + P) % P;
        lp_lane_send(r, a, (const char *)src + (per_peer ? (size_t)to * len : 0), len, 0, to, tag);
        lp_lane_recv(r, a, (char *)dst + (size_t)from * len, len, 0, from, tag);
    }
}
