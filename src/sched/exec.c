/* exec.c: executing a request's schedule (schedule.h), for the progress engine (progress.h).
 * Advancing a request: for each lane of its running phase, retire the steps that completed
 * (in order), then issue the next steps whose window has room and whose dependencies are met;
 * local steps (REDUCE, COPY, SCALE) run at once.  Repeat while anything moved; when every lane
 * is done, build the next phase.  A failed request is cancelled, freed and ended here; MPI's own
 * collectives issue in the native order (a ticket per start, engine.h). */
#include "progress.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>

pthread_mutex_t lp_eng_skip_mu = PTHREAD_MUTEX_INITIALIZER;   /* native order's skipped tickets */
static atomic_long fault_after;   /* tests: the n-th next point-to-point call fails */
static atomic_ullong node_bytes;  /* sent to other nodes (lp_node_bytes) */

/* passes of advance() on this thread that moved a request (the progress thread's sign of life
 * for steps no MPI call reports: local steps, shared-memory rounds) */
_Thread_local unsigned long lp_eng_moves;

/* r is complete or failed: its flight-recorder entry (and trace record) ends, and its time
 * under LPMPI_AUTOTUNE is recorded */
static inline void ended(lp_req_t *r) {
    lp_at_slot_end(&r->at_slot, r->rc == LP_OK);   /* its time, LPMPI_AUTOTUNE (none: no-op) */
    if (!r->fr) return;
    lp_fr_end(r->fr, r->rc);
    r->fr = 0;
}

unsigned long long lp_node_bytes(int reset) {
    return reset ? atomic_exchange(&node_bytes, 0) : atomic_load(&node_bytes);
}

void lp_test_fault(long after) { atomic_store(&fault_after, after); }

/* ------------------------------------------------------------------------------- native order */
/* r gives back its ticket (ctx's order of native issues, engine.h): the holder of the turn
 * passes it on; a ticket given back out of turn (its request failed before its turn) is kept
 * in ctx->skip until the turn reaches it.  The holder stores the turn, then reads nskip; a
 * giver out of turn counts itself in nskip, then reads the turn (both seq_cst): one of them
 * sees the other and passes the turn over the skipped tickets, under skip_lock (its own: fail()
 * runs with the engine lock held or not). */
static void skip_pass(lp_ctx_t *c) {
    for (int moved = 1; moved;) {
        moved = 0;
        long t = atomic_load(&c->nat_turn);
        for (int i = 0; i < atomic_load(&c->nskip); i++) {
            if (c->skip[i] != t) continue;
            c->skip[i] = c->skip[atomic_load(&c->nskip) - 1];
            atomic_fetch_sub(&c->nskip, 1);
            atomic_store(&c->nat_turn, t + 1);
            moved = 1;
            break;
        }
    }
}

void lp_nat_release(lp_req_t *r) {
    long t = r->nat_ticket;
    if (t < 0) return;
    lp_ctx_t *c = r->ctx;
    r->nat_ticket = -1;
    if (atomic_load(&c->nat_turn) == t) {
        atomic_store(&c->nat_turn, t + 1);
        if (atomic_load(&c->nskip) == 0) return;
        pthread_mutex_lock(&lp_eng_skip_mu);
        skip_pass(c);
        pthread_mutex_unlock(&lp_eng_skip_mu);
        return;
    }
    pthread_mutex_lock(&lp_eng_skip_mu);
    int n = atomic_load(&c->nskip);
    if (n == c->skipcap) {
        int cap = c->skipcap ? 2 * c->skipcap : 8;
        long *s = realloc(c->skip, (size_t)cap * sizeof *s);
        if (!s) {               /* cannot remember it: the requests after it cannot issue */
            pthread_mutex_unlock(&lp_eng_skip_mu);
            return;
        }
        c->skip = s;
        c->skipcap = cap;
    }
    c->skip[n] = t;
    atomic_fetch_add(&c->nskip, 1);
    skip_pass(c);
    pthread_mutex_unlock(&lp_eng_skip_mu);
}

/* ------------------------------------------------------------------------------- one step */
static inline char *at(const lp_region_t *g, size_t k) {
    size_t i = g->mask ? k & g->mask : (g->slots > 1 ? k % g->slots : 0);
    return g->base + i * g->stride;
}
static inline size_t step_len(const lp_lane_t *l, size_t k) {
    size_t off = k * l->cb;
    return l->bytes - off < l->cb ? l->bytes - off : l->cb;
}
static inline int is_async(const lp_lane_t *l) { return l->kind >= LP_STEP_NATIVE || l->kind <= LP_STEP_RECV; }

static int injected(void) {
    long n = atomic_load_explicit(&fault_after, memory_order_relaxed);
    if (n <= 0) return 0;
    return atomic_fetch_sub(&fault_after, 1) == 1;
}

/* device work of the AWARE transport's local steps: on stream 0, waited for (MPI reads next) */
static int dev_now(const lp_devops_t *d, int rc) {
    return rc != LP_OK ? rc : d->sync(0);
}

static int local_step(const lp_lane_t *l, size_t k) {
    const lp_args_t *a = l->a;
    const lp_devops_t *d = a->dev;
    size_t len = step_len(l, k), n = len / a->esize;
    char *o = at(&l->r[0], k);
    if (!len) return LP_OK;
    switch (l->kind) {
    case LP_STEP_REDUCE: {
        const char *x = at(&l->r[1], k), *y = at(&l->r[2], k);
        if (d) return dev_now(d, d->reduce(o, x, y, n, a->dt, l->rop, 0));
        l->fn(o, x, y, n);
        return LP_OK;
    }
    case LP_STEP_COPY: {
        const char *x = at(&l->r[1], k);
        if (o == x) return LP_OK;
        if (d) return dev_now(d, d->d2d(o, x, len, 0));
        lp_copy_out(o, x, len, l->nt);
        lp_fence_nt(l->nt);
        return LP_OK;
    }
    case LP_STEP_XPORT:
        return l->xp->step(l, k, o, len);
    case LP_STEP_NARROW:
        if (d) return LP_FAIL(LP_ERR_INTERNAL, "acc_dtype on device memory (a bug of lpmpi)");
        return lp_narrow(o, (const float *)at(&l->r[1], k), n, a->acc_dt);
    default:   /* SCALE */
        if (d) return dev_now(d, d->scale(o, n, a->dt, LP_AVG_DIVISOR(a), 0));
        lp_scale(o, n, a->dt, LP_AVG_DIVISOR(a));
        return LP_OK;
    }
}

/* a DEV step: its device operations on the lane's stream, then its event */
static int dev_step(const lp_lane_t *l, size_t k) {
    int rc = LP_OK;
    const lp_args_t *a = l->a;
    const lp_devops_t *d = a->dev;
    size_t len = step_len(l, k), n = len / a->esize;
    for (int i = 0; i < l->ndops; i++) {
        const lp_dop_t *o = &l->dop[i];
        char *dst = at(&l->r[o->dst], k);
        const char *x = at(&l->r[o->x], k), *y = at(&l->r[o->y], k);
        switch (o->kind) {
        case LP_DOP_D2H: LP_TRY(d->d2h(dst, x, len, l->stream)); break;
        case LP_DOP_H2D: LP_TRY(d->h2d(dst, x, len, l->stream)); break;
        case LP_DOP_D2D: LP_TRY(d->d2d(dst, x, len, l->stream)); break;
        case LP_DOP_REDUCE: LP_TRY(d->reduce(dst, x, y, n, a->dt, l->rop, l->stream)); break;
        default: LP_TRY(d->scale(dst, n, a->dt, (double)a->size, l->stream)); break;
        }
    }
    LP_TRY(d->record(l->ev0 + (int)l->islot, l->stream));
cleanup:
    return rc;
}

static inline void lane_step_done(lp_req_t *r, lp_lane_t *l) {
    if (++l->done == l->n) r->lanes_left--;
}

/* may step k of l start?  (its dependencies have completed) */
static inline int deps_met(const lp_req_t *r, const lp_lane_t *l, size_t k) {
    for (int i = 0; i < l->ndeps; i++) {
        const lp_lane_t *m = &r->lane[l->dep[i].lane];
        long need = (long)k + l->dep[i].lag + 1;
        if (need <= 0) continue;
        if ((size_t)need > m->n) need = (long)m->n;
        if (m->done < (size_t)need) return 0;
    }
    return 1;
}

/* issue the steps of l that may start: every transfer that may be posted, but one local step
 * at a time (a reduction's result then leaves, by the lanes after it, before the next
 * reduction runs: the peer gets chunk k as early as possible) */
static int issue(lp_req_t *r, lp_lane_t *l, int *moved) {
    int rc = LP_OK;
    const lp_args_t *a = l->a;
    const int async = is_async(l);
    while (l->issued < l->n) {
        size_t k = l->issued;
        int now = 0;
        if (async && k - l->done >= l->W) break;
        if (l->ndeps && !deps_met(r, l, k)) break;
        if (l->kind == LP_STEP_XPORT && l->xp->ready && !l->xp->ready(l, k)) {
            r->polling = 1;
            r->poll_xp = l->xp;
            break;
        }
        if (l->kind == LP_STEP_NATIVE && r->nat_ticket >= 0 &&
            atomic_load_explicit(&r->ctx->nat_turn, memory_order_acquire) != r->nat_ticket) {
            r->turn_wait = 1;          /* an earlier request's native steps go first */
            break;
        }
        switch (l->kind) {
        case LP_STEP_SEND:
            if (injected()) { rc = LP_FAIL(LP_ERR_MPI, "MPI_Isend failed: injected fault (tests)"); goto cleanup; }
            if (a->order && a->node[l->peer] != a->node[a->rank])
                atomic_fetch_add_explicit(&node_bytes, step_len(l, k), memory_order_relaxed);
            LP_MPI(MPI_Isend(at(&l->r[0], k), (int)step_len(l, k), MPI_BYTE, l->peer, l->tag, a->comm,
                             &r->reqs[l->req0 + l->islot]));
            break;
        case LP_STEP_RECV:
            if (injected()) { rc = LP_FAIL(LP_ERR_MPI, "MPI_Irecv failed: injected fault (tests)"); goto cleanup; }
            LP_MPI(MPI_Irecv(at(&l->r[0], k), (int)step_len(l, k), MPI_BYTE, l->peer, l->tag, a->comm,
                             &r->reqs[l->req0 + l->islot]));
            break;
        case LP_STEP_NATIVE:
            LP_TRY(l->xp->issue(l, k, &r->reqs[l->req0 + l->islot], r->preq ? &r->preq[k] : NULL, &now));
            break;
        case LP_STEP_DEV:
            LP_TRY(dev_step(l, k));
            r->dev_inflight++;
            break;
        default:
            LP_TRY(local_step(l, k));
            now = 1;
            break;
        }
        l->issued++;
        if (l->kind == LP_STEP_NATIVE && l->issued == l->n) lp_nat_release(r);
        if (async && ++l->islot == l->W) l->islot = 0;
        *moved = 1;
        if (now) {                     /* done at once: a local step, a blocking native one */
            if (async && ++l->dslot == l->W) l->dslot = 0;
            lane_step_done(r, l);
        }
        if (!async) break;
    }
cleanup:
    return rc;
}

/* retire the completed steps of l, in order */
static int retire(lp_req_t *r, lp_lane_t *l, int *moved) {
    int rc = LP_OK;
    if (lp_eng_uses_mpi(l)) {
        while (l->done < l->issued) {
            size_t s = l->req0 + l->dslot;
            if (!r->fin[s]) break;
            r->fin[s] = 0;
            if (++l->dslot == l->W) l->dslot = 0;
            lane_step_done(r, l);
            *moved = 1;
        }
    } else if (l->kind == LP_STEP_DEV) {
        while (l->done < l->issued) {
            int ok = 0;
            LP_TRY(l->a->dev->query(l->ev0 + (int)l->dslot, &ok));
            if (!ok) break;
            if (++l->dslot == l->W) l->dslot = 0;
            r->dev_inflight--;
            lane_step_done(r, l);
            *moved = 1;
        }
    }
cleanup:
    return rc;
}

/* ------------------------------------------------------------------------------- phases */
/* Phase 0 as built last time, kept by the request: a request started again with the same
 * plan and buffers (a blocking call in a loop, a persistent or pooled request) copies it back
 * instead of building it, and only its tags move to this start's range. */
static int cache_save(lp_req_t *r, size_t nreq) {
    if (!r->lane0 && !(r->lane0 = malloc(LP_LANES_MAX * sizeof *r->lane0))) return LP_OK;
    memcpy(r->lane0, r->lane, (size_t)r->nlanes * sizeof *r->lane0);
    r->c_nlanes = r->nlanes;
    r->c_left = r->lanes_left;
    r->c_nreq = nreq;
    r->c_tag0 = r->a.tag0;
    r->c_sbuf = r->a.sbuf;
    r->c_rbuf = r->a.rbuf;
    r->c_acc = r->a.acc;
    r->cached = 1;
    return LP_OK;
}

static int cache_hit(lp_req_t *r) {
    if (!r->cached || r->c_sbuf != r->a.sbuf || r->c_rbuf != r->a.rbuf || r->c_acc != r->a.acc)
        return 0;
    int dtag = r->a.tag0 - r->c_tag0;
    memcpy(r->lane, r->lane0, (size_t)r->c_nlanes * sizeof *r->lane);
    r->nlanes = r->c_nlanes;
    r->lanes_left = r->c_left;
    if (dtag)
        for (int i = 0; i < r->nlanes; i++) r->lane[i].tag += dtag;
    return 1;
}

/* build phase r->phase (skipping empty ones); past the last: the request is done */
int lp_eng_phase_begin(lp_req_t *r) {
    int rc = LP_OK;
    while (r->phase < r->nphases) {
        size_t nreq = 0;
        int nev = 0;
        if (r->phase == 0 && cache_hit(r)) {
            nreq = r->c_nreq;
        } else {
            r->nlanes = 0;
            r->build_rc = LP_OK;
            if (r->phase < r->nsched) LP_TRY(r->sched->phase(r, &r->a, r->phase));
            else {                                  /* acc_dtype: round this rank's result once */
                size_t off, len;
                lp_recv_part(&r->a, r->a.rank, &off, &len);
                if (!lp_per_rank_blocks(r->a.coll)) len = r->a.count;
                lp_lane_narrow(r, &r->a, r->a.acc, r->a.rbuf, len * r->a.esize, 0);
            }
            LP_TRY(r->build_rc);
            r->lanes_left = 0;
            for (int i = 0; i < r->nlanes; i++) {
                lp_lane_t *l = &r->lane[i];
                if (l->W > l->n) l->W = l->n;
                if (l->W == 0) l->W = 1;
                if (lp_eng_uses_mpi(l)) {
                    l->req0 = nreq;
                    nreq += l->W;
                } else if (l->kind == LP_STEP_DEV) {
                    l->ev0 = r->ev_first + nev;
                    nev += (int)l->W;
                }
                if (l->n) r->lanes_left++;
            }
            if (nev > r->nev) {
                rc = LP_FAIL(LP_ERR_INTERNAL, "a schedule phase needs %d device events, %d were "
                             "reserved (a bug of lpmpi: please report it)", nev, r->nev);
                goto cleanup;
            }
            if (nreq > r->reqcap) LP_TRY(lp_req_slots(r, nreq));
            if (r->phase == 0) LP_TRY(cache_save(r, nreq));
        }
        for (size_t i = 0; i < nreq; i++) r->reqs[i] = MPI_REQUEST_NULL;
        memset(r->fin, 0, nreq);
        r->nreq = nreq;
        if (r->fr_phases) lp_fr_phase(r);   /* the trace's sampled calls (a dump reads r->phase) */
        if (r->lanes_left) return LP_OK;
        r->phase++;
    }
    r->nlanes = 0;
    r->nreq = 0;
    r->state = LP_REQ_DONE;
    ended(r);
cleanup:
    return rc;
}

/* advance r as far as it goes without waiting */
int lp_eng_advance(lp_req_t *r) {
    int rc = LP_OK, saved = 0, entered = 0;
    const lp_devops_t *d = r->a.dev;
    if (d && r->devid >= 0) {
        LP_TRY(d->enter(r->devid, &saved));
        entered = 1;
    }
    while (r->state == LP_REQ_ACTIVE) {
        int moved = 0;
        lp_lane_t *l = r->lane, *end = r->lane + r->nlanes;
        r->polling = 0;
        r->turn_wait = 0;
        for (; l < end; l++) {
            if (l->done == l->n) continue;
            if (l->issued > l->done) LP_TRY(retire(r, l, &moved));
            LP_TRY(issue(r, l, &moved));
        }
        if (r->lanes_left == 0) {
            if (++r->phase == r->nphases) {       /* the last phase: done */
                r->nlanes = 0;
                r->nreq = 0;
                r->state = LP_REQ_DONE;
                ended(r);
                break;
            }
            LP_TRY(lp_eng_phase_begin(r));
            continue;
        }
        if (!moved) break;
        lp_eng_moves++;
    }
cleanup:
    if (entered) d->leave(saved);
    return rc;
}

/* r failed with rc (its message is this thread's lp_errmsg): keep the message for whoever
 * waits for it, take back what it still has in flight, and end it.  Point-to-point receives
 * are cancelled, sends let go of; MPI forbids cancelling collectives (NATIVE), which are left
 * to finish.  Its
 * memory is never reused (a transfer may still land in it). */
void lp_eng_fail(lp_req_t *r, int rc) {
    snprintf(r->err, sizeof r->err, "%s", lp_errmsg());
    snprintf(r->where, sizeof r->where, "%s", lp_errwhere());
    r->rc = rc;
    for (int i = 0; i < r->nlanes; i++) {
        lp_lane_t *l = &r->lane[i];
        if (!lp_eng_uses_mpi(l)) continue;
        for (size_t k = l->done; k < l->issued; k++) {
            size_t s = l->req0 + k % l->W;
            MPI_Request *q = &r->reqs[s];
            if (*q == MPI_REQUEST_NULL || r->fin[s]) continue;
            r->poisoned = 1;
            if (l->kind == LP_STEP_NATIVE) continue;
            /* receives are cancelled; sends only let go of (cancelling a send is deprecated
             * since MPI 4.1, and MPICH's UCX device crashes in ucp_request_cancel on one) */
            if (l->kind == LP_STEP_RECV) MPI_Cancel(q);
            MPI_Request_free(q);
        }
    }
    if (r->a.dev && r->dev_inflight) {
        int saved = 0;
        if (r->a.dev->enter(r->devid, &saved) == LP_OK) {
            r->a.dev->sync(-1);
            r->a.dev->leave(saved);
        }
    }
    r->dev_inflight = 0;
    r->nlanes = 0;
    r->nreq = 0;
    r->state = LP_REQ_DONE;
    ended(r);
    lp_nat_release(r);
}

void lp_eng_advance_or_fail(lp_req_t *r) {
    if (r->state != LP_REQ_ACTIVE) return;
    int rc = lp_eng_advance(r);
    if (rc != LP_OK) lp_eng_fail(r, rc);
}
