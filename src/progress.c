/* progress.c: the one progress engine.  It runs the schedule of every request (schedule.h),
 * blocking, nonblocking and persistent alike, and is the only place where lpmpi observes a
 * completion: of MPI requests (MPI_Waitsome / MPI_Testsome, in observe) and of device work
 * (event queries, in retire).
 *
 * Advancing a request: for each lane of its running phase, retire the steps that completed
 * (in order), then issue the next steps whose window has room and whose dependencies are met;
 * local steps (REDUCE, COPY, SCALE) run at once.  Repeat while anything moved; when every lane
 * is done, build the next phase.  Then observe: test the outstanding MPI requests (spinning,
 * then yielding the core: never blocked inside MPI, issue 53; mpi_idle), and advance again.
 *
 * Many requests: nonblocking and persistent requests, once started, are on the active list.
 * Any wait, test or blocking call advances every active request and observes all of them at
 * once (one MPI_Waitsome over all their requests), so requests complete in any order and a
 * rank that waits for one keeps the others moving for its peers.  A blocking call's own
 * request is private (not on the list): with nothing else active it runs alone, exactly as a
 * blocking collective should, with no lock taken.
 *
 * Threads: the active list and every request on it are guarded by one mutex, the engine lock.
 * A thread that waits inside MPI (MPI_Waitsome) releases the lock and "owns" the requests it
 * waits on; other threads (callers of test or wait, the progress thread) skip owned requests
 * and wait for their release (a condition variable) when everything they need is owned.  So
 * no thread ever holds the lock while it blocks, and a request is observed by one thread at a
 * time.  The optional progress thread (lp_progress_thread) loops: advance, test, advance,
 * yielding the processor when nothing moved, and sleeping when nothing is active or a waiter
 * observes everything (a waiter blocks in MPI_Waitsome whether the thread runs or not). */
#include "engine.h"
#include "flight.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>

static pthread_mutex_t E = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t skip_lock = PTHREAD_MUTEX_INITIALIZER;   /* native order's skipped tickets */
static pthread_mutex_t fork_gate = PTHREAD_MUTEX_INITIALIZER;   /* the progress thread's MPI calls */
static pthread_cond_t Ec = PTHREAD_COND_INITIALIZER;   /* released, completed, started, stop */
static lp_req_t *active;          /* started nonblocking and persistent requests, not complete */
atomic_long lp_nactive;
static atomic_ulong gen;          /* bumped when the active set or its ownership changes */
static lp_req_t *live;            /* every request not yet freed (MPI_Finalize) */
static atomic_long fault_after;   /* tests: the n-th next point-to-point call fails */
static atomic_ullong node_bytes;  /* sent to other nodes (lp_node_bytes) */

/* passes of advance() on this thread that moved a request (the progress thread's sign of life
 * for steps no MPI call reports: local steps, shared-memory rounds) */
static _Thread_local unsigned long moves;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

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

/* the progress thread */
static pthread_t pt;
static atomic_int pt_running;
static int pt_stop;

void lp_engine_lock(void) { pthread_mutex_lock(&E); }
void lp_engine_unlock(void) { pthread_mutex_unlock(&E); }
long lp_outstanding(void) { return atomic_load(&lp_nactive); }
int lp_progress_thread_running(void) { return atomic_load(&pt_running); }
void lp_test_fault(long after) { atomic_store(&fault_after, after); }

void lp_engine_live(lp_req_t *r, int add) {
    if (add) {
        r->lprev = NULL;
        r->lnext = live;
        if (live) live->lprev = r;
        live = r;
    } else {
        if (r->lprev) r->lprev->lnext = r->lnext;
        else if (live == r) live = r->lnext;
        if (r->lnext) r->lnext->lprev = r->lprev;
        r->lprev = r->lnext = NULL;
    }
}

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
        pthread_mutex_lock(&skip_lock);
        skip_pass(c);
        pthread_mutex_unlock(&skip_lock);
        return;
    }
    pthread_mutex_lock(&skip_lock);
    int n = atomic_load(&c->nskip);
    if (n == c->skipcap) {
        int cap = c->skipcap ? 2 * c->skipcap : 8;
        long *s = realloc(c->skip, (size_t)cap * sizeof *s);
        if (!s) {               /* cannot remember it: the requests after it cannot issue */
            pthread_mutex_unlock(&skip_lock);
            return;
        }
        c->skip = s;
        c->skipcap = cap;
    }
    c->skip[n] = t;
    atomic_fetch_add(&c->nskip, 1);
    skip_pass(c);
    pthread_mutex_unlock(&skip_lock);
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
static inline int uses_mpi(const lp_lane_t *l) { return l->kind <= LP_STEP_RECV || l->kind == LP_STEP_NATIVE; }

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
        if (d) return dev_now(d, d->scale(o, n, a->dt, (double)a->size, 0));
        lp_scale(o, n, a->dt, (double)a->size);
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
    if (uses_mpi(l)) {
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
static int phase_begin(lp_req_t *r) {
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
                if (uses_mpi(l)) {
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
static int advance(lp_req_t *r) {
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
            LP_TRY(phase_begin(r));
            continue;
        }
        if (!moved) break;
        moves++;
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
static void fail(lp_req_t *r, int rc) {
    snprintf(r->err, sizeof r->err, "%s", lp_errmsg());
    snprintf(r->where, sizeof r->where, "%s", lp_errwhere());
    r->rc = rc;
    for (int i = 0; i < r->nlanes; i++) {
        lp_lane_t *l = &r->lane[i];
        if (!uses_mpi(l)) continue;
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

static void advance_or_fail(lp_req_t *r) {
    if (r->state != LP_REQ_ACTIVE) return;
    int rc = advance(r);
    if (rc != LP_OK) fail(r, rc);
}

/* ------------------------------------------------------------------------------- a peer that died
 * MPICH's launcher (under -disable-auto-cleanup) tells the survivors that a process of the job
 * ended (SIGUSR1: flight.c, lp_fr_notices).  MPI itself then says nothing (its fault tolerance
 * is off in these builds): a receive from the dead process never completes.  So from the first
 * notice on, waits poll (MPI_Testsome) and check, at once and every NOTICE_CHECK_NS, whether
 * a rank of this node in the communicator of a waiting request is gone (its /proc entry:
 * ctx_lost, alive.c); such requests fail (LP_ERR_PEER) naming it, and so does every later call
 * on that communicator.  One whose peers are on other nodes (no process to look at) fails when
 * nothing at all has moved for NOTICE_GRACE_NS after the notice.  A thread already blocked in
 * MPI_Waitsome when the notice comes is woken by its wake-up request (alive.c: one more pending
 * request in every blocking MPI wait, completed by the watch thread on a notice).  Before any
 * notice a call costs two loads more; MPI's own blocking collectives cannot be woken (flight.c
 * ends a rank stuck in one, saying so). */
enum { NOTICE_CHECK_NS = 100000000 };
static const long long NOTICE_GRACE_NS = 5000000000LL;
/* ------------------------------------------------------------------------------- the watchdog */
/* LPMPI_TIMEOUT: a request its waiter finds older than the timeout fails with LP_ERR_TIMEOUT,
 * naming what it waits for: the peers of its outstanding point-to-point transfers, MPI's own
 * collective (every rank), the shared-memory ring's counters or device work.  Its transfers are
 * cancelled as for any failure (MPI's collectives cannot be: the communicator is not usable
 * after it; the program decides, e.g. comm.Abort()).  Off: no clock is read. */
static int overdue(lp_req_t *r) {
    if (!lp_timeout_ns || r->state != LP_REQ_ACTIVE) return 0;
    long long age = now_ns() - r->t_start;
    if (age < lp_timeout_ns) return 0;
    char what[700], path[1100] = "", fr[1200] = "";
    int peers[64];
    lp_req_waiting(r, what, sizeof what, peers, 64);
    if (lp_fr_dump("watchdog (LPMPI_TIMEOUT)", NULL, path, sizeof path) == LP_OK)   /* while it still waits */
        snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
    const lp_args_t *a = &r->a;
    fail(r, LP_FAIL(LP_ERR_TIMEOUT, "LPMPI_TIMEOUT: %s of %zu bytes (%s) on a communicator of %d "
                    "ranks not complete after %.1f s, %s (this rank is %d); the communicator is "
                    "unusable now (e.g. comm.Abort())%s", lp_coll_name(a->coll), a->count * a->esize,
                    lp_algo_name(r->alg), a->size, (double)age / 1e9, what, a->rank, fr));
    return 1;
}

int lp_mpi_wait_timed(MPI_Request *q, const char *what, int P) {
    /* lpmpi requests in flight (nonblocking calls not waited for yet) advance while this waits,
     * as MPI's progress rule asks: a peer may wait for one of them before it reaches this
     * agreement (rank 0 starts a and b, then waits; rank 1 starts a, waits for it, starts b:
     * rank 0's agreement at b's start waits for rank 1, whose wait for a needs rank 0's steps) */
    const int others = atomic_load_explicit(&lp_nactive, memory_order_relaxed) != 0;
    if (!others && !lp_timeout_ns && !lp_fr_notices()) {   /* blocking (a notice cannot wake it: alive.c) */
        const int in = lp_inside_enter(NULL, "the first lpmpi collective on a communicator (its ranks' barrier)");
        int e = MPI_Wait(q, MPI_STATUS_IGNORE);
        lp_inside_leave(in);
        return e == MPI_SUCCESS ? LP_OK : lp_mpi_fail(e, __FILE__, __LINE__, what);
    }
    long long t0 = now_ns();
    for (;;) {
        int done = 0, e = MPI_Test(q, &done, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS) return lp_mpi_fail(e, __FILE__, __LINE__, what);
        if (done) return LP_OK;
        if (others) {
            int prc = lp_progress();
            if (prc != LP_OK) return prc;
        }
        const long long t = now_ns(), age = t - t0, since = lp_fr_notice_ns();
        if (since && t - (t0 > since ? t0 : since) >= NOTICE_GRACE_NS) {
            lp_fr_lost("a process of the job ended (the launcher's notice) and a communicator's ranks never all "
                       "entered its first lpmpi call", NULL, 0);
            return LP_FAIL(LP_ERR_PEER, "a process of the job ended (the launcher's notice, %.1f s ago) while "
                           "this rank waited in %s: its ranks never all arrived; the communicator is unusable now",
                           (double)(t - since) / 1e9, what);
        }
        if (lp_timeout_ns && age >= lp_timeout_ns) {
            char path[1100] = "", fr[1200] = "";
            if (lp_fr_dump("watchdog (LPMPI_TIMEOUT)", NULL, path, sizeof path) == LP_OK)
                snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
            return LP_FAIL(LP_ERR_TIMEOUT, "LPMPI_TIMEOUT: %s not complete after %.1f s: a rank of "
                           "this communicator of %d ranks has not entered the collective; the "
                           "communicator is unusable now (e.g. comm.Abort())%s", what,
                           (double)age / 1e9, P, fr);
        }
        if (others || age < 1000000) sched_yield();
        else {
            struct timespec nap = {0, 200000};
            nanosleep(&nap, NULL);
        }
    }
}

/* ------------------------------------------------------------------------------- observing */
/* the requests one thread observes at once, and the arrays of a gathered MPI_Waitsome */
typedef struct {
    lp_req_t **set;
    size_t nset, setcap;
    MPI_Request *q;
    int *idx, *slot;
    MPI_Status *st;
    lp_req_t **own;
    size_t cap;
    size_t waiting;             /* blocked in MPI_Waitsome on q[0..waiting) (0: not) */
    int cancelled;              /* the wake-up hook cancelled some of them */
} gather_t;
static _Thread_local gather_t G;


static int gather_room(size_t n) {
    if (n <= G.cap) return LP_OK;
    size_t c = n < 64 ? 64 : 2 * n;
    void *q = realloc(G.q, c * sizeof *G.q), *ix = NULL, *sl = NULL, *st = NULL, *ow = NULL;
    if (q) G.q = q;
    if ((ix = realloc(G.idx, c * sizeof *G.idx))) G.idx = ix;
    if ((sl = realloc(G.slot, c * sizeof *G.slot))) G.slot = sl;
    if ((st = realloc(G.st, c * sizeof *G.st))) G.st = st;
    if ((ow = realloc(G.own, c * sizeof *G.own))) G.own = ow;
    if (!q || !ix || !sl || !st || !ow) return LP_FAIL(LP_ERR_NOMEM, "out of memory for %zu requests", c);
    G.cap = c;
    return LP_OK;
}

static int set_push(lp_req_t *r) {
    if (G.nset == G.setcap) {
        size_t c = G.setcap ? 2 * G.setcap : 16;
        lp_req_t **s = realloc(G.set, c * sizeof *s);
        if (!s) return LP_FAIL(LP_ERR_NOMEM, "out of memory for the requests being observed");
        G.set = s;
        G.setcap = c;
    }
    G.set[G.nset++] = r;
    return LP_OK;
}

/* Nothing moved and the requests wait only for the peers' counters in transport xp's segment s
 * (NULL: other things too, or a caller that must not block): spin on the counters a while, then
 * sleep until a peer advances one (the transport's arm and sleep, schedule.h; alg_ring_shm.c).
 * A spinning waiter answers fastest while every rank owns a core; where ranks share cores,
 * with each other (more ranks than cores) or with other work (a data loader, another job), its
 * spin takes the time the peer it waits for needs: a sched_yield hands the rest of the slice to whatever else runs there (a busy process
 * beside the ranks: each wait then costs one of its slices), a plain spin keeps the core from a
 * peer queued on it.  So the spin adapts, as an adaptive mutex does: each thread's budget
 * halves whenever a wait had to sleep and doubles (up to lp_spin_ns) whenever the spin
 * alone saw the peers move; ranks that own their cores keep spinning, ranks that share one
 * soon sleep at once.  Measured (P = 2 and 3, docs/performance-archive.md "Waiting: a spin that adapts,
 * then a sleep").  The sleep's timeout is a safety net only: no wake-up is lost (the handshake). */
enum { SHM_SLEEP_NS = 2000000, SHM_SPIN_GROW_NS = 1000 };
long lp_spin_ns = 50000;
long lp_set_shm_spin(long ns) {
    long prev = lp_spin_ns;
    lp_spin_ns = ns < 0 ? -1 : ns;
    return prev;
}
static _Thread_local struct {
    unsigned long moves;        /* `moves` when this thread last looked */
    long long since;            /* when this wait began (0: none yet) */
    long budget;                /* ns it spins before it sleeps, in [0, lp_spin_ns] */
    int slept;                  /* this wait slept */
    const void *armed;          /* the segment it armed (counted in its sleepers), or NULL */
    const lp_xport_t *axp;      /* the transport of that segment */
    const void *seg;            /* the segment of this wait */
    int rank;
    uint32_t v;                 /* the wake-up word when it armed */
} W = {.budget = -2};

/* a waiter's spin budget (idle_wait's, mpi_idle's): kept within [0, max] (max: lp_spin_ns now;
 * -2: not set yet), and after a wait its spin answered, doubled (plus a step, from 0) */
static void budget_clamp(long *b, long max) {
    if (*b == -2 || *b > max) *b = max;
}
static long budget_grown(long b, long max) {
    return b * 2 + SHM_SPIN_GROW_NS < max ? b * 2 + SHM_SPIN_GROW_NS : max;
}

static void idle_end(void) {
    if (W.armed) W.axp->disarm(W.armed, W.rank);
    W.armed = NULL;
}

static void idle_wait(const lp_xport_t *xp, const void *s, int rank) {
    if (!s || !xp->arm) {
        sched_yield();
        return;
    }
    const long max = lp_spin_ns;
    budget_clamp(&W.budget, max);
    long long t = now_ns();
    if (W.moves != moves || W.seg != s || !W.since) {   /* a new wait: something moved since */
        if (W.since && !W.slept && W.seg == s && max >= 0)   /* the last one ended in its spin */
            W.budget = budget_grown(W.budget, max);
        idle_end();
        W.moves = moves;
        W.seg = s;
        W.since = t;
        W.slept = 0;
    }
    if (max < 0 || t - W.since < W.budget) return;      /* spin: the caller polls again */
    if (!W.armed) {              /* arm, then one more pass over the steps (the caller's loop) */
        xp->arm(s, rank, &W.v);
        W.armed = s;
        W.axp = xp;
        W.rank = rank;
        return;
    }
    xp->sleep(s, rank, W.v, SHM_SLEEP_NS);   /* disarms */
    W.armed = NULL;
    if (!W.slept) W.budget /= 2;
    W.slept = 1;
}

/* the failure of a request on ctx, whose rank `dead` (process pid on this node) is gone: the
 * flight recorder is dumped, naming it */
static int lost_error(lp_ctx_t *ctx, int dead, int pid, const char *what) {
    char path[1100] = "", fr[1200] = "", msg[900];
    int world[64], n = lp_dead_words(ctx->alive, ctx->size, ctx->comm, "this communicator", msg, sizeof msg,
                                     world, 64);
    if (!n) {                         /* (the shared-memory segment's own look saw it first) */
        world[0] = lp_world_rank_of(ctx->comm, dead);
        snprintf(msg, sizeof msg, "rank %d of this communicator (process %d on this node, world rank %d) is gone",
                 dead, pid, world[0]);
        n = 1;
    }
    snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (killed or exited)");
    lp_fr_lost(msg, world, n < 64 ? n : 64);
    if (lp_fr_ring && lp_fr_dump("a peer is gone", NULL, path, sizeof path) == LP_OK)
        snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
    return LP_FAIL(LP_ERR_PEER, "%s%s%s; the communicator is unusable now%s", msg, what ? " while this rank " : "",
                   what ? what : "", fr);
}

/* a rank of ctx's node whose process is gone, or -1 (*pid: its process id); sticky: a
 * communicator that lost a rank stays lost */
static int ctx_lost(lp_ctx_t *ctx, int *pid) {
    if (ctx->lost >= 0) {
        *pid = ctx->lost_pid;
        return ctx->lost;
    }
    int r = lp_procs_lost(ctx->alive, ctx->size, pid);
    if (r >= 0) {
        ctx->lost = r;
        ctx->lost_pid = *pid;
    }
    return r;
}

int lp_ctx_check_lost(lp_ctx_t *ctx) {
    unsigned nt = lp_fr_notices();
    if (nt == ctx->notice && ctx->lost < 0) return LP_OK;
    ctx->notice = nt;
    int pid = 0, dead = ctx_lost(ctx, &pid);
    return dead < 0 ? LP_OK : lost_error(ctx, dead, pid, "started a collective on it");
}

static _Thread_local struct { unsigned long moves; long long moved, checked; unsigned nt; } N;

/* The wake-up hook (alive.c): MPI runs it inside its progress from the first notice on, on
 * whichever thread makes progress.  On a thread blocked in MPI_Waitsome here, whose waiting
 * requests' communicator lost a rank of this node, it cancels the receives of that wait, so
 * that MPI returns from it and observe_set fails those requests.  (Once per notice, and every
 * NOTICE_CHECK_NS: it reads /proc.) */
static _Thread_local struct { unsigned nt; long long checked, cancelled; } H;
enum { CANCEL_GRACE_NS = 1000000000 };

static int wake_hook(void) {
    gather_t *g = &G;
    if (!g->waiting) return 0;
    const unsigned nt = lp_fr_notices();
    const long long t = now_ns();
    if (g->cancelled) {               /* still inside: a wait of sends only, which MPI cannot cancel */
        if (t - H.cancelled < CANCEL_GRACE_NS) return 0;
        for (size_t j = 0; j < g->nset; j++) {
            lp_req_t *r = g->set[j];
            char msg[700], path[1100] = "";
            int world[64], me = 0, nd = r->ctx ? lp_dead_words(r->ctx->alive, r->ctx->size, r->ctx->comm,
                                                               "its communicator", msg, sizeof msg, world, 64) : 0;
            if (!nd) continue;
            MPI_Comm_rank(MPI_COMM_WORLD, &me);
            lp_fr_lost(msg, world, nd < 64 ? nd : 64);
            int drc = lp_fr_ring ? lp_fr_dump("a peer is gone while this rank is inside MPI", NULL, path,
                                              sizeof path) : -1;
            fprintf(stderr, "lpmpi: rank %d: %s while this rank is inside an lpmpi wait blocked in MPI (%s of %zu "
                    "bytes), which MPI cannot end (its sends to the rank cannot be cancelled); %s%s; ending this "
                    "process (exit status 3)\n", me, msg, lp_coll_name(r->a.coll), r->a.count * r->a.esize,
                    drc == LP_OK ? "flight recorder written to " : "no flight recorder written", path);
            fflush(stderr);
            _exit(3);
        }
        return 0;
    }
    if (H.nt == nt && t - H.checked < NOTICE_CHECK_NS) return 0;
    H.nt = nt;
    H.checked = t;
    int any = 0;
    for (size_t j = 0; j < g->nset && !any; j++) {
        lp_req_t *r = g->set[j];
        int pid = 0;
        any = r->state == LP_REQ_ACTIVE && r->ctx && lp_procs_lost(r->ctx->alive, r->ctx->size, &pid) >= 0;
    }
    if (!any) return 0;
    g->cancelled = 1;
    H.cancelled = t;
    for (size_t i = 0; i < g->waiting; i++)
        if (g->q[i] != MPI_REQUEST_NULL) MPI_Cancel(&g->q[i]);
    return 1;
}

__attribute__((constructor)) static void wake_hook_set(void) { lp_wake_set(wake_hook); }

/* (after a notice) fail the requests of G.set whose communicator lost a rank of this node, or
 * that waited NOTICE_GRACE_NS after the notice with nothing moving; 1 where any failed */
static int notice_check(unsigned nt) {
    const long long t = now_ns();
    if (N.moves != moves || !N.moved) {
        N.moves = moves;
        N.moved = t;
    }
    int any = 0;
    if (N.nt != nt || t - N.checked >= NOTICE_CHECK_NS) {
        N.nt = nt;
        N.checked = t;
        for (size_t j = 0; j < G.nset; j++) {
            lp_req_t *r = G.set[j];
            if (r->state != LP_REQ_ACTIVE || !r->ctx) continue;
            int pid = 0, dead = ctx_lost(r->ctx, &pid);
            if (dead < 0) continue;
            char what[700], w2[760];
            int peers[64];
            lp_req_waiting(r, what, sizeof what, peers, 64);
            snprintf(w2, sizeof w2, "was %s", what);
            int rc = lost_error(r->ctx, dead, pid, w2);
            for (size_t i = j; i < G.nset; i++)
                if (G.set[i]->state == LP_REQ_ACTIVE && G.set[i]->ctx == r->ctx) fail(G.set[i], rc);
            any = 1;
        }
    }
    const long long since = lp_fr_notice_ns();
    if (t - (N.moved > since ? N.moved : since) < NOTICE_GRACE_NS) return any;
    for (size_t j = 0; j < G.nset; j++) {
        lp_req_t *r = G.set[j];
        if (r->state != LP_REQ_ACTIVE) continue;
        char what[700];
        int peers[64];
        lp_req_waiting(r, what, sizeof what, peers, 64);
        lp_fr_lost("a process of the job ended (the launcher's notice) and a call waited for it", NULL, 0);
        char path[1100] = "", fr[1200] = "";
        if (lp_fr_ring && lp_fr_dump("a peer is gone (the launcher's notice)", NULL, path, sizeof path) == LP_OK)
            snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
        fail(r, LP_FAIL(LP_ERR_PEER, "a process of the job ended (the launcher's notice, %.1f s ago) and "
                        "nothing moved since: %s of %zu bytes on a communicator of %d ranks was %s (this "
                        "rank is %d); the communicator is unusable now%s", (double)(t - since) / 1e9,
                        lp_coll_name(r->a.coll), r->a.count * r->a.esize, r->a.size, what, r->a.rank, fr));
        any = 1;
    }
    return any;
}

/* Requests of G.set wait for the counters of transport xp's segment s: every SHM_ALIVE_NS of a
 * wait in which nothing moved, is every peer's process still there (xp's gone(): alg_ring_shm.c
 * reads /proc)?  MPI notices a dead peer of its own transfers; nothing else would notice one
 * that will never advance a counter.  Where one is gone, those requests fail (LP_ERR_PEER) and this returns 1. */
enum { SHM_ALIVE_NS = 100000000 };
static _Thread_local struct { unsigned long moves; long long last; } A;

static int peers_gone(const lp_xport_t *xp, const void *s, int rank) {
    long long t = now_ns();
    if (A.moves != moves || !A.last) {
        A.moves = moves;
        A.last = t;
        return 0;
    }
    if (t - A.last < SHM_ALIVE_NS) return 0;
    A.last = t;
    int pid = 0, dead = xp->gone ? xp->gone(s, rank, &pid) : -1;
    if (dead < 0) return 0;
    lp_ctx_t *ctx = NULL;
    for (size_t j = 0; j < G.nset && !ctx; j++)
        if (xp->segment(&G.set[j]->a) == s) ctx = G.set[j]->ctx;
    char what[300];
    snprintf(what, sizeof what, "was waiting for %s (the %s transport)", xp->waits_for, xp->name);
    if (ctx && ctx->lost < 0) {      /* (sticky: later calls on it fail at once) */
        ctx->lost = dead;
        ctx->lost_pid = pid;
    }
    int rc = ctx ? lost_error(ctx, dead, pid, what)
                 : LP_FAIL(LP_ERR_PEER, "rank %d of this communicator (process %d on this node) is gone (killed "
                           "or exited) while this rank %s; the communicator is unusable now", dead, pid, what);
    for (size_t j = 0; j < G.nset; j++)
        if (G.set[j]->state == LP_REQ_ACTIVE && xp->segment(&G.set[j]->a) == s) fail(G.set[j], rc);
    return 1;
}

/* Gather into G the transfers of r that can move it: each MPI lane retires its steps in
 * order, so only its oldest outstanding request matters (a later one's completion is of no
 * use before it).  This keeps the set MPI polls at one request per lane whatever the window:
 * MPICH's MPI_Waitsome walks its whole array on every poll, and with every slot of every lane
 * in it a 16 KiB allreduce at P = 2 took 9% longer than before the one engine (an A/B of
 * polling first with MPI_Testsome measured slower still below 1 KiB, docs/performance-archive.md).
 * *pending counts heads already seen complete (r needs advancing, not observing). */
static int gather_heads(lp_req_t *r, size_t *m, int *pending) {
    int rc = LP_OK;
    LP_TRY(gather_room(*m + (size_t)r->nlanes + 1));     /* (+1: the wait's wake-up request) */
    for (const lp_lane_t *l = r->lane, *end = r->lane + r->nlanes; l < end; l++) {
        if (!uses_mpi(l) || l->done == l->issued) continue;
        size_t s = l->req0 + l->dslot;
        if (r->fin[s]) {
            (*pending)++;
            continue;
        }
        if (r->reqs[s] == MPI_REQUEST_NULL) continue;
        G.q[*m] = r->reqs[s];
        G.own[*m] = r;
        G.slot[*m] = (int)s;
        (*m)++;
    }
cleanup:
    return rc;
}

/* The watchdog's waits test instead of blocking in MPI: a yield once a wait has spun its
 * budget (mpi_idle below; a yield after every test cost 0.5 us of an 8 B allreduce's 2.2, AMD
 * EPYC, P = 2).
 * So do waits on communicators spanning several nodes: a message over the network takes tens
 * of microseconds, against which a test and a yield cost nothing, and a rank that yields hands
 * its core to one that has data to push into its sockets or a handshake to answer.  Where ranks
 * share cores (the cluster in a box: 4 ranks of 4 nodes on 2 cores) the blocking wait's spin
 * inside MPI kept those ranks off the core for whole time slices: allreduce over 4 nodes of one
 * rank at 1 Gbit/s, 1 MiB ring 18.4-24.8 ms blocking against 13.0 polling, 16 MiB be 270-282
 * against 220 (the link bound 201; AMD EPYC, docs/performance-archive.md "Issue 38") */

/* An empty test of MPI requests: spin, then yield, adapting as the shared-memory wait does
 * (idle_wait: the same budget, lp_spin_ns).  A yield after a few empty tests (before: one in
 * 32 from the first) hands the core away whether or not a peer needs it: with a busy
 * process beside the job and no pinning, the rank that shares a core with it gave it slices
 * back at every wait, and ring over cma or MPI at 64 KiB ran 0.72-0.77x of MPI's own call in
 * those launches (issue 53), where MPI's own wait spins.  So a wait spins for its budget
 * first: a wait that ended within its spin doubles the budget (ranks with a core each, or a
 * peer that runs: no yield at all), one that had to yield halves it (ranks sharing a core:
 * they soon yield at once, as they must for the peer to run). */
static _Thread_local struct {
    unsigned long moves;        /* `moves` when this wait began */
    long long since;            /* when it began (0: none yet) */
    long budget;                /* ns it spins before it yields, in [0, lp_spin_ns] */
    int yielded;                /* this wait yielded */
    unsigned polls;             /* empty tests since the last clock read */
} Y = {.budget = -2};

static void mpi_idle(void) {
    const long max = lp_spin_ns;
    budget_clamp(&Y.budget, max);
    if (Y.moves == moves && Y.since && Y.yielded) {     /* (yielding already: no clock read) */
        sched_yield();
        return;
    }
    if (Y.moves == moves && Y.since && ++Y.polls % 8) return;   /* a clock read in 8 polls */
    long long t = now_ns();
    if (Y.moves != moves || !Y.since) {                 /* a new wait: something moved since */
        if (Y.since && !Y.yielded && max >= 0)           /* the last one ended in its spin */
            Y.budget = budget_grown(Y.budget, max);
        Y.moves = moves;
        Y.since = t;
        Y.yielded = 0;
        Y.polls = 0;
    }
    if (max < 0 || t - Y.since < Y.budget) return;      /* spin: the caller tests again */
    Y.budget /= 2;
    Y.yielded = 1;
    sched_yield();
}

/* the completions of every request of G.set (owned by this thread, engine lock released);
 * block: wait for at least one (unless device work is in flight, whose completion no MPI
 * call reports: then test and yield).  Returns how many transfers it saw complete. */
static int observe_set(int block) {
    /* one look-up of this thread's arrays (in a shared module each is a call, __tls_get_addr,
     * which the compiler otherwise repeats after every call below: the empty asm keeps the
     * address in a register) */
    gather_t *g = &G;
    __asm__("" : "+r"(g));
    int rc = LP_OK, cnt = 0, dev = 0, pending = 0, mixed = 0, net = 0;
    const void *seg = NULL;         /* the one segment whose counters every waiting request polls */
    const lp_xport_t *xp = NULL;    /* its transport */
    int seg_rank = 0;
    size_t m = 0;
    for (size_t j = 0; j < g->nset; j++) {
        lp_req_t *r = g->set[j];
        if (r->state != LP_REQ_ACTIVE) continue;
        dev = dev || r->dev_inflight || r->polling || r->turn_wait;
        net = net || (r->ctx && r->ctx->nnodes > 1);
        const void *s = r->polling && r->poll_xp->segment ? r->poll_xp->segment(&r->a) : NULL;
        if (r->dev_inflight || r->turn_wait || (r->polling && (!s || (seg && seg != s)))) mixed = 1;
        if (s) {
            seg = s;
            xp = r->poll_xp;
            seg_rank = r->a.rank;
        }
        if (gather_heads(r, &m, &pending) != LP_OK) fail(r, LP_ERR_NOMEM);
    }
    if (seg && peers_gone(xp, seg, seg_rank)) return 0;
    const unsigned nt = lp_fr_notices();          /* a process of the job ended (above) */
    if (nt && notice_check(nt)) return 0;
    if (m == 0) {
        if (pending) return pending;
        if (dev) idle_wait(xp, block && !mixed ? seg : NULL, seg_rank);
        else if (block) {          /* active requests with nothing in flight cannot move */
            rc = LP_FAIL(LP_ERR_INTERNAL, "pipeline stalled (a bug of lpmpi: please report it)");
            for (size_t j = 0; j < g->nset; j++)
                if (g->set[j]->state == LP_REQ_ACTIVE) fail(g->set[j], rc);
        }
        return 0;
    }
    /* every wait tests and yields (never blocks inside MPI): MPI_Waitsome's spin inside MPICH
     * keeps the core from a peer that shares it (a busy process beside the job, more ranks
     * than cores): an 8 B allreduce took 7 ms a call with both ranks on one core, where MPI's
     * own took 13 us (issue 53); the watchdog, waits across nodes and after a notice need the
     * test anyway */
    (void)block;
    int mrc = MPI_Testsome((int)m, g->q, &cnt, g->idx, g->st);
    if (mrc != MPI_SUCCESS && mrc != MPI_ERR_IN_STATUS) {   /* nobody to blame: all of them */
        rc = lp_mpi_fail(mrc, __FILE__, __LINE__, "MPI_Waitsome");
        for (size_t j = 0; j < g->nset; j++)
            if (g->set[j]->state == LP_REQ_ACTIVE) fail(g->set[j], rc);
        return 0;
    }
    if (cnt == MPI_UNDEFINED) cnt = 0;
    const int cancelled = g->cancelled;
    for (int j = 0; j < cnt; j++) {
        int i = g->idx[j];
        lp_req_t *r = g->own[i];
        if (mrc == MPI_ERR_IN_STATUS && g->st[j].MPI_ERROR != MPI_SUCCESS) {
            if (r->state == LP_REQ_ACTIVE)
                fail(r, lp_mpi_fail(g->st[j].MPI_ERROR, __FILE__, __LINE__, "MPI_Waitsome"));
            continue;
        }
        r->reqs[g->slot[i]] = g->q[i];
        int c = 0;                    /* (the wake-up hook cancelled it: nothing arrived) */
        if (!cancelled || MPI_Test_cancelled(&g->st[j], &c) != MPI_SUCCESS || !c) r->fin[g->slot[i]] = 1;
    }
    if (cancelled) {                  /* the requests whose communicator lost a rank fail now */
        g->cancelled = 0;
        N.checked = 0;
        notice_check(lp_fr_notices());
    }
    if (!cnt && dev) sched_yield();
    else if (!cnt) mpi_idle();
    return cnt + pending;
}

/* observe r alone (a blocking call with nothing else active; the set is this thread's G) */
static void observe_one(lp_req_t *r) {
    if (set_push(r) != LP_OK) {
        fail(r, LP_ERR_NOMEM);
        return;
    }
    observe_set(1);
    G.nset = 0;
}

/* ------------------------------------------------------------------------------- the lists */
static void unlink_active(lp_req_t *r) {
    if (r->prev) r->prev->next = r->next;
    else if (active == r) active = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    atomic_fetch_sub(&lp_nactive, 1);
    atomic_fetch_add(&gen, 1);
}

/* (locked) advance every active request no thread owns; retire the completed ones */
static void advance_all(void) {
    int any = 0;
    for (lp_req_t *r = active, *nx; r; r = nx) {
        nx = r->next;
        if (r->owned) continue;
        advance_or_fail(r);
        if (r->state != LP_REQ_ACTIVE) {
            unlink_active(r);
            any = 1;
        }
    }
    if (any) pthread_cond_broadcast(&Ec);
}

/* (locked) G.set = `first` (a private request, or NULL) and every active request no thread
 * owns, now owned by this one */
static int own_all(lp_req_t *first) {
    int rc = LP_OK;
    G.nset = 0;
    if (first) LP_TRY(set_push(first));
    for (lp_req_t *r = active; r; r = r->next) {
        if (r->owned) continue;
        LP_TRY(set_push(r));
        r->owned = 1;
    }
cleanup:
    if (rc != LP_OK) {
        for (size_t j = 0; j < G.nset; j++)
            if (G.set[j] != first) G.set[j]->owned = 0;
        G.nset = 0;
    }
    return rc;
}

/* (locked) give G.set back, retiring the completed requests */
static void release_all(lp_req_t *private_req) {
    for (size_t j = 0; j < G.nset; j++) {
        lp_req_t *r = G.set[j];
        if (r == private_req) continue;
        r->owned = 0;
        if (r->state != LP_REQ_ACTIVE) unlink_active(r);
    }
    G.nset = 0;
    atomic_fetch_add(&gen, 1);
    pthread_cond_broadcast(&Ec);
}

static size_t count_done(void) {
    size_t n = 0;
    for (size_t j = 0; j < G.nset; j++) n += G.set[j]->state != LP_REQ_ACTIVE;
    return n;
}

/* Wait until r completes.  r is either private (a blocking call's request: not on the active
 * list) or started on the list.  Every active request no other thread observes is advanced
 * meanwhile, and observed with r in one MPI_Waitsome; a request another thread observes is
 * waited for until that thread gives it back (it never blocks on requests of its own that
 * could keep it from returning: it blocks only in sets that hold r). */
static void wait_for_(lp_req_t *r, int private_req) {
    for (;;) {
        if (private_req) {
            advance_or_fail(r);
            if (r->state != LP_REQ_ACTIVE) return;
            if (atomic_load(&lp_nactive) == 0) {   /* alone: no lock, exactly a blocking call */
                observe_one(r);
                if (lp_timeout_ns) overdue(r);
                continue;
            }
        }
        pthread_mutex_lock(&E);
        advance_all();
        if (!private_req && r->state != LP_REQ_ACTIVE) {
            pthread_mutex_unlock(&E);
            return;
        }
        if (!private_req && r->owned) {   /* another thread observes r: wait for its release */
            pthread_cond_wait(&Ec, &E);
            pthread_mutex_unlock(&E);
            continue;
        }
        if (own_all(private_req ? r : NULL) != LP_OK) {   /* out of memory for the set */
            pthread_mutex_unlock(&E);
            sched_yield();
            continue;
        }
        /* the waiter blocks in MPI on everything it owns; a progress thread finds nothing
         * left to observe and sleeps meanwhile (two threads polling one core would halve it) */
        unsigned long g0 = atomic_load(&gen);
        pthread_mutex_unlock(&E);
        size_t done0 = count_done();
        do {
            observe_set(1);
            for (size_t j = 0; j < G.nset; j++) advance_or_fail(G.set[j]);
            if (lp_timeout_ns) overdue(r);
        } while (r->state == LP_REQ_ACTIVE && count_done() == done0 && atomic_load(&gen) == g0);
        pthread_mutex_lock(&E);
        release_all(private_req ? r : NULL);
        pthread_mutex_unlock(&E);
        if (r->state != LP_REQ_ACTIVE) return;
    }
}

static void wait_for(lp_req_t *r, int private_req) {
    wait_for_(r, private_req);
    idle_end();
}

/* ------------------------------------------------------------------------------- requests */
static int report(const lp_req_t *r) {
    if (r->rc == LP_OK) return LP_OK;
    return lp_set_error(r->rc, r->err, r->where);
}

static int begin(lp_req_t *r) {
    r->phase = 0;
    r->rc = LP_OK;
    r->dev_inflight = 0;
    r->polling = 0;
    r->turn_wait = 0;
    r->state = LP_REQ_ACTIVE;
    if (lp_timeout_ns) r->t_start = now_ns();
    return phase_begin(r);
}

int lp_engine_run(lp_req_t *r) {
    int rc;
    if ((rc = begin(r)) != LP_OK) fail(r, rc);
    while (r->state == LP_REQ_ACTIVE) {         /* alone: no lock, exactly a blocking call */
        if ((rc = advance(r)) != LP_OK) fail(r, rc);
        if (r->state != LP_REQ_ACTIVE) break;
        if (atomic_load_explicit(&lp_nactive, memory_order_relaxed) != 0) {
            wait_for(r, 1);                      /* others are active: observe them too */
            break;
        }
        observe_one(r);
        if (lp_timeout_ns) overdue(r);
    }
    idle_end();
    return r->rc == LP_OK ? LP_OK : report(r);
}

int lp_engine_start(lp_req_t *r) {
    int rc;
    pthread_mutex_lock(&E);
    rc = begin(r);
    if (rc != LP_OK) fail(r, rc);
    if (r->state == LP_REQ_ACTIVE) {
        r->owned = 0;
        r->prev = NULL;
        r->next = active;
        if (active) active->prev = r;
        active = r;
        atomic_fetch_add(&lp_nactive, 1);
        atomic_fetch_add(&gen, 1);
        advance_or_fail(r);            /* post its first steps now */
        if (r->state != LP_REQ_ACTIVE) unlink_active(r);
    }
    pthread_cond_broadcast(&Ec);
    pthread_mutex_unlock(&E);
    return LP_OK;                      /* a failure is the request's, reported by test/wait */
}

int lp_engine_wait(lp_req_t *r) {
    if (r->state == LP_REQ_ACTIVE) wait_for(r, 0);   /* (a forked child has none active) */
    return report(r);
}

int lp_engine_test(lp_req_t *r, int *done) {
    pthread_mutex_lock(&E);
    if (r->state == LP_REQ_ACTIVE) {
        advance_all();
        if (r->state == LP_REQ_ACTIVE && own_all(NULL) == LP_OK && G.nset) {
            pthread_mutex_unlock(&E);
            observe_set(0);
            for (size_t j = 0; j < G.nset; j++) advance_or_fail(G.set[j]);
            pthread_mutex_lock(&E);
            release_all(NULL);
        }
    }
    *done = r->state != LP_REQ_ACTIVE;
    pthread_mutex_unlock(&E);
    return *done ? report(r) : LP_OK;
}

int lp_progress(void) {
    if (lp_forked) return lp_not_forked();
    pthread_mutex_lock(&E);
    advance_all();
    if (own_all(NULL) == LP_OK && G.nset) {
        pthread_mutex_unlock(&E);
        observe_set(0);
        for (size_t j = 0; j < G.nset; j++) advance_or_fail(G.set[j]);
        pthread_mutex_lock(&E);
        release_all(NULL);
    }
    pthread_mutex_unlock(&E);
    return LP_OK;
}

/* (locked) the active request of ctx holding tag slot `slot`, if any */
static lp_req_t *find_active(lp_ctx_t *ctx, unsigned long slot, int any_slot) {
    for (lp_req_t *r = active; r; r = r->next)
        if ((!ctx || r->ctx == ctx) && (any_slot || (unsigned long)r->a.tag0 / LP_TAGS_PER_REQ == slot))
            return r;
    return NULL;
}

int lp_engine_slot_wait(lp_ctx_t *ctx, unsigned long slot) {
    for (;;) {
        pthread_mutex_lock(&E);
        lp_req_t *r = find_active(ctx, slot, 0);
        pthread_mutex_unlock(&E);
        if (!r) return LP_OK;
        wait_for(r, 0);
    }
}

int lp_engine_drain(lp_ctx_t *ctx) {
    for (;;) {
        pthread_mutex_lock(&E);
        lp_req_t *r = find_active(ctx, 0, 1);
        pthread_mutex_unlock(&E);
        if (!r) return LP_OK;
        wait_for(r, 0);
    }
}

/* ------------------------------------------------------------------------------- the thread */
/* The thread: advance, test, advance, as long as anything it can observe is active.  Polling
 * is what moves messages along (the MPI library progresses inside the calls), so it spins,
 * yielding the processor after every pass that completed no request (the threads of two ranks
 * may share a core: one that never yields starves the other and the pipeline between them),
 * and naps (IDLE_NAP_NS at a time) once no transfer has completed and no step moved for IDLE_NS
 * (a shared-memory round completes no MPI transfer, but moves a step): the peers are
 * then busy elsewhere (computing before they start their side), and a computation sharing this
 * core should not be slowed down by a thread that has nothing to do.  Nothing active, or everything observed by a waiter: it sleeps until a
 * start or a release. */
enum { IDLE_NS = 1000000, IDLE_NAP_NS = 50000 };

static void *progress_main(void *arg) {
    (void)arg;
    long long last = now_ns();
    pthread_mutex_lock(&E);
    while (!pt_stop) {
        advance_all();
        if (own_all(NULL) != LP_OK || G.nset == 0) {
            pthread_cond_wait(&Ec, &E);
            last = now_ns();
            continue;
        }
        pthread_mutex_unlock(&E);
        pthread_mutex_lock(&fork_gate);    /* never inside MPI across a fork (see fork below) */
        size_t done0 = count_done();
        unsigned long moves0 = moves;
        int seen = observe_set(0);
        for (size_t j = 0; j < G.nset; j++) advance_or_fail(G.set[j]);
        pthread_mutex_unlock(&fork_gate);
        int completed = count_done() != done0;
        if (seen || completed || moves != moves0) last = now_ns();
        pthread_mutex_lock(&E);
        release_all(NULL);
        if (!completed) {          /* give the core away often: ranks may share one */
            pthread_mutex_unlock(&E);
            if (now_ns() - last < IDLE_NS) {
                sched_yield();
            } else {
                struct timespec nap = {0, IDLE_NAP_NS};
                nanosleep(&nap, NULL);
            }
            pthread_mutex_lock(&E);
        }
    }
    pthread_mutex_unlock(&E);
    return NULL;
}

int lp_progress_thread(int on) {
    int rc = LP_OK, provided = MPI_THREAD_SINGLE, err;
    if (on && lp_forked) return lp_not_forked();
    if (!on) {
        if (!atomic_load(&pt_running)) return LP_OK;
        pthread_mutex_lock(&E);
        pt_stop = 1;
        pthread_cond_broadcast(&Ec);
        pthread_mutex_unlock(&E);
        pthread_join(pt, NULL);
        atomic_store(&pt_running, 0);
        return LP_OK;
    }
    if (atomic_load(&pt_running)) return LP_OK;
    LP_MPI(MPI_Query_thread(&provided));
    if (provided != MPI_THREAD_MULTIPLE) {
        const char *lvl = provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE"
                          : provided == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                                            : "MPI_THREAD_SERIALIZED";
        return LP_FAIL(LP_ERR_UNSUPPORTED, "the progress thread calls MPI while the program does: it "
                       "needs MPI_THREAD_MULTIPLE, and MPI was initialized with %s (with mpi4py, "
                       "set mpi4py.rc.thread_level = 'multiple' before importing mpi4py.MPI; that "
                       "is mpi4py's default)", lvl);
    }
    pt_stop = 0;
    if ((err = pthread_create(&pt, NULL, progress_main, NULL)) != 0)
        return LP_FAIL(LP_ERR_UNSUPPORTED, "cannot start the progress thread (pthread_create: %s)",
                       strerror(err));
    atomic_store(&pt_running, 1);
cleanup:
    return rc;
}

/* ------------------------------------------------------------------------------- fork */
/* A forked child (a torch DataLoader worker, multiprocessing, subprocess's fork) shares the
 * parent's MPI state: any MPI call it makes can take messages meant for the parent.  So the
 * child's copy of the engine is switched off: no thread (none was copied), no active requests
 * (failed, their MPI objects and memory never touched again), every call refused, and its
 * MPI_Finalize hook does nothing (context.c), so a child exits at once and the parent is not
 * disturbed.  The engine lock is held across fork() (no thread holds it while it blocks), so
 * the child's copy is consistent; the child makes new locks. */
int lp_forked;

static void fork_prepare(void) {
    pthread_mutex_lock(&fork_gate);    /* the progress thread out of MPI: a fork in the middle of
                                          its MPI_Testsome left the child MPICH's mutex locked,
                                          and the child's MPI_Finalize aborted */
    pthread_mutex_lock(&E);
    pthread_mutex_lock(&skip_lock);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&skip_lock);
    pthread_mutex_unlock(&E);
    pthread_mutex_unlock(&fork_gate);
}
static void fork_child(void) {
    pthread_mutex_init(&E, NULL);
    pthread_mutex_init(&skip_lock, NULL);
    pthread_mutex_init(&fork_gate, NULL);
    pthread_cond_init(&Ec, NULL);
    lp_forked = 1;
    atomic_store(&pt_running, 0);
    pt_stop = 0;
    for (lp_req_t *r = live; r; r = r->lnext) {
        r->finalized = 1;        /* nothing of MPI is freed here */
        r->poisoned = 1;         /* nor its memory */
        r->owned = 0;
        r->prev = r->next = NULL;
        if (r->state == LP_REQ_ACTIVE) {
            r->state = LP_REQ_DONE;
            r->rc = LP_ERR_UNSUPPORTED;
            snprintf(r->err, sizeof r->err, "this request was in flight when the process forked: "
                     "only the parent process can complete it");
            r->where[0] = 0;
        }
    }
    active = NULL;
    atomic_store(&lp_nactive, 0);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
void lp_engine_atfork(void) { pthread_once(&fork_once, fork_register); }
/* at load: a child forked before any collective is off too */
__attribute__((constructor)) static void atfork_at_load(void) { lp_engine_atfork(); }

int lp_not_forked(void) {
    if (!lp_forked) return LP_OK;
    return LP_FAIL(LP_ERR_UNSUPPORTED, "lpmpi cannot communicate in a forked child process (its MPI "
                   "state belongs to the parent); communicate in the parent, or start workers with "
                   "the 'spawn' method");
}

/* ------------------------------------------------------------------------------- finalize */
void lp_engine_finalize(void) {
    lp_progress_thread(0);
    lp_engine_drain(NULL);
}

void lp_req_finalize(void) {
    pthread_mutex_lock(&E);
    for (lp_req_t *r = live; r; r = r->lnext) lp_req_finalize_one(r);
    pthread_mutex_unlock(&E);
}
