/* run.c: the progress engine's requests (progress.h): the active list (started nonblocking and
 * persistent requests, guarded by the engine lock; a waiter owns the requests it observes), the
 * entry points (run a blocking call's private request, start, wait, test, lp_progress, wait for
 * a tag slot, drain a communicator), and whether this process is a forked child (thread.c
 * switches a child's engine off; every entry refuses there).  How progress and its locking
 * work: wait.c's banner. */
#include "progress.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

pthread_mutex_t lp_eng_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t lp_eng_cv = PTHREAD_COND_INITIALIZER;   /* released, completed, started, stop */
lp_req_t *lp_eng_active;          /* started nonblocking and persistent requests, not complete */
atomic_long lp_nactive;
atomic_ulong lp_eng_gen;          /* bumped when the active set or its ownership changes */
lp_req_t *lp_eng_all;            /* every request not yet freed (MPI_Finalize) */


void lp_engine_lock(void) { pthread_mutex_lock(&lp_eng_mu); }
void lp_engine_unlock(void) { pthread_mutex_unlock(&lp_eng_mu); }
long lp_outstanding(void) { return atomic_load(&lp_nactive); }

void lp_engine_live(lp_req_t *r, int add) {
    if (add) {
        r->lprev = NULL;
        r->lnext = lp_eng_all;
        if (lp_eng_all) lp_eng_all->lprev = r;
        lp_eng_all = r;
    } else {
        if (r->lprev) r->lprev->lnext = r->lnext;
        else if (lp_eng_all == r) lp_eng_all = r->lnext;
        if (r->lnext) r->lnext->lprev = r->lprev;
        r->lprev = r->lnext = NULL;
    }
}


/* set in a forked child (thread.c) */
int lp_forked;

int lp_not_forked(void) {
    if (!lp_forked) return LP_OK;
    return LP_FAIL(LP_ERR_UNSUPPORTED, "lpmpi cannot communicate in a forked child process (its MPI "
                   "state belongs to the parent); communicate in the parent, or start workers with "
                   "the 'spawn' method");
}

/* ------------------------------------------------------------------------------- the lists */
static void unlink_active(lp_req_t *r) {
    if (r->prev) r->prev->next = r->next;
    else if (lp_eng_active == r) lp_eng_active = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    atomic_fetch_sub(&lp_nactive, 1);
    atomic_fetch_add(&lp_eng_gen, 1);
}

/* (locked) advance every active request no thread owns; retire the completed ones */
void lp_eng_advance_all(void) {
    int any = 0;
    for (lp_req_t *r = lp_eng_active, *nx; r; r = nx) {
        nx = r->next;
        if (r->owned) continue;
        lp_eng_advance_or_fail(r);
        if (r->state != LP_REQ_ACTIVE) {
            unlink_active(r);
            any = 1;
        }
    }
    if (any) pthread_cond_broadcast(&lp_eng_cv);
}

/* (locked) G.set = `first` (a private request, or NULL) and every active request no thread
 * owns, now owned by this one */
int lp_eng_own_all(lp_req_t *first) {
    int rc = LP_OK;
    lp_eng_set.nset = 0;
    if (first) LP_TRY(lp_eng_set_push(first));
    for (lp_req_t *r = lp_eng_active; r; r = r->next) {
        if (r->owned) continue;
        LP_TRY(lp_eng_set_push(r));
        r->owned = 1;
    }
cleanup:
    if (rc != LP_OK) {
        for (size_t j = 0; j < lp_eng_set.nset; j++)
            if (lp_eng_set.set[j] != first) lp_eng_set.set[j]->owned = 0;
        lp_eng_set.nset = 0;
    }
    return rc;
}

/* (locked) give G.set back, retiring the completed requests */
void lp_eng_release_all(lp_req_t *private_req) {
    for (size_t j = 0; j < lp_eng_set.nset; j++) {
        lp_req_t *r = lp_eng_set.set[j];
        if (r == private_req) continue;
        r->owned = 0;
        if (r->state != LP_REQ_ACTIVE) unlink_active(r);
    }
    lp_eng_set.nset = 0;
    atomic_fetch_add(&lp_eng_gen, 1);
    pthread_cond_broadcast(&lp_eng_cv);
}

size_t lp_eng_count_done(void) {
    size_t n = 0;
    for (size_t j = 0; j < lp_eng_set.nset; j++) n += lp_eng_set.set[j]->state != LP_REQ_ACTIVE;
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
            lp_eng_advance_or_fail(r);
            if (r->state != LP_REQ_ACTIVE) return;
            if (atomic_load(&lp_nactive) == 0) {   /* alone: no lock, exactly a blocking call */
                lp_eng_observe_one(r);
                if (lp_timeout_ns) lp_eng_overdue(r);
                continue;
            }
        }
        pthread_mutex_lock(&lp_eng_mu);
        lp_eng_advance_all();
        if (!private_req && r->state != LP_REQ_ACTIVE) {
            pthread_mutex_unlock(&lp_eng_mu);
            return;
        }
        if (!private_req && r->owned) {   /* another thread observes r: wait for its release */
            pthread_cond_wait(&lp_eng_cv, &lp_eng_mu);
            pthread_mutex_unlock(&lp_eng_mu);
            continue;
        }
        if (lp_eng_own_all(private_req ? r : NULL) != LP_OK) {   /* out of memory for the set */
            pthread_mutex_unlock(&lp_eng_mu);
            sched_yield();
            continue;
        }
        /* the waiter blocks in MPI on everything it owns; a progress thread finds nothing
         * left to observe and sleeps meanwhile (two threads polling one core would halve it) */
        unsigned long g0 = atomic_load(&lp_eng_gen);
        pthread_mutex_unlock(&lp_eng_mu);
        size_t done0 = lp_eng_count_done();
        do {
            lp_eng_observe_set(1);
            for (size_t j = 0; j < lp_eng_set.nset; j++) lp_eng_advance_or_fail(lp_eng_set.set[j]);
            if (lp_timeout_ns) lp_eng_overdue(r);
        } while (r->state == LP_REQ_ACTIVE && lp_eng_count_done() == done0 && atomic_load(&lp_eng_gen) == g0);
        pthread_mutex_lock(&lp_eng_mu);
        lp_eng_release_all(private_req ? r : NULL);
        pthread_mutex_unlock(&lp_eng_mu);
        if (r->state != LP_REQ_ACTIVE) return;
    }
}

static void wait_for(lp_req_t *r, int private_req) {
    wait_for_(r, private_req);
    lp_eng_idle_end();
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
    if (lp_timeout_ns) r->t_start = lp_eng_now_ns();
    return lp_eng_phase_begin(r);
}

int lp_engine_run(lp_req_t *r) {
    int rc;
    if ((rc = begin(r)) != LP_OK) lp_eng_fail(r, rc);
    while (r->state == LP_REQ_ACTIVE) {         /* alone: no lock, exactly a blocking call */
        if ((rc = lp_eng_advance(r)) != LP_OK) lp_eng_fail(r, rc);
        if (r->state != LP_REQ_ACTIVE) break;
        if (atomic_load_explicit(&lp_nactive, memory_order_relaxed) != 0) {
            wait_for(r, 1);                      /* others are active: observe them too */
            break;
        }
        lp_eng_observe_one(r);
        if (lp_timeout_ns) lp_eng_overdue(r);
    }
    lp_eng_idle_end();
    return r->rc == LP_OK ? LP_OK : report(r);
}

int lp_engine_start(lp_req_t *r) {
    int rc;
    pthread_mutex_lock(&lp_eng_mu);
    rc = begin(r);
    if (rc != LP_OK) lp_eng_fail(r, rc);
    if (r->state == LP_REQ_ACTIVE) {
        r->owned = 0;
        r->prev = NULL;
        r->next = lp_eng_active;
        if (lp_eng_active) lp_eng_active->prev = r;
        lp_eng_active = r;
        atomic_fetch_add(&lp_nactive, 1);
        atomic_fetch_add(&lp_eng_gen, 1);
        lp_eng_advance_or_fail(r);            /* post its first steps now */
        if (r->state != LP_REQ_ACTIVE) unlink_active(r);
    }
    pthread_cond_broadcast(&lp_eng_cv);
    pthread_mutex_unlock(&lp_eng_mu);
    return LP_OK;                      /* a failure is the request's, reported by test/wait */
}

int lp_engine_wait(lp_req_t *r) {
    if (r->state == LP_REQ_ACTIVE) wait_for(r, 0);   /* (a forked child has none active) */
    return report(r);
}

/* (locked; returns locked) one test of every active request no thread owns: owned, tested and
 * advanced without the lock, given back */
static void test_once(void) {
    if (lp_eng_own_all(NULL) != LP_OK || !lp_eng_set.nset) return;
    pthread_mutex_unlock(&lp_eng_mu);
    lp_eng_observe_set(0);
    for (size_t j = 0; j < lp_eng_set.nset; j++) lp_eng_advance_or_fail(lp_eng_set.set[j]);
    pthread_mutex_lock(&lp_eng_mu);
    lp_eng_release_all(NULL);
}

int lp_engine_test(lp_req_t *r, int *done) {
    pthread_mutex_lock(&lp_eng_mu);
    if (r->state == LP_REQ_ACTIVE) {
        lp_eng_advance_all();
        if (r->state == LP_REQ_ACTIVE) test_once();
    }
    *done = r->state != LP_REQ_ACTIVE;
    pthread_mutex_unlock(&lp_eng_mu);
    return *done ? report(r) : LP_OK;
}

int lp_progress(void) {
    if (lp_forked) return lp_not_forked();
    pthread_mutex_lock(&lp_eng_mu);
    lp_eng_advance_all();
    test_once();
    pthread_mutex_unlock(&lp_eng_mu);
    return LP_OK;
}

/* (locked) the active request of ctx holding tag slot `slot`, if any */
static lp_req_t *find_active(lp_ctx_t *ctx, unsigned long slot, int any_slot) {
    for (lp_req_t *r = lp_eng_active; r; r = r->next)
        if ((!ctx || r->ctx == ctx) && (any_slot || (unsigned long)r->a.tag0 / LP_TAGS_PER_REQ == slot))
            return r;
    return NULL;
}

int lp_engine_slot_wait(lp_ctx_t *ctx, unsigned long slot) {
    for (;;) {
        pthread_mutex_lock(&lp_eng_mu);
        lp_req_t *r = find_active(ctx, slot, 0);
        pthread_mutex_unlock(&lp_eng_mu);
        if (!r) return LP_OK;
        wait_for(r, 0);
    }
}

int lp_engine_drain(lp_ctx_t *ctx) {
    for (;;) {
        pthread_mutex_lock(&lp_eng_mu);
        lp_req_t *r = find_active(ctx, 0, 1);
        pthread_mutex_unlock(&lp_eng_mu);
        if (!r) return LP_OK;
        wait_for(r, 0);
    }
}

/* wait for q (an agreement's MPI call, off the engine's requests), advancing the engine's
 * requests meanwhile, under the watchdog and the launcher's notice (engine.h) */
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
    long long t0 = lp_eng_now_ns();
    for (;;) {
        int done = 0, e = MPI_Test(q, &done, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS) return lp_mpi_fail(e, __FILE__, __LINE__, what);
        if (done) return LP_OK;
        if (others) {
            int prc = lp_progress();
            if (prc != LP_OK) return prc;
        }
        const long long t = lp_eng_now_ns(), age = t - t0, since = lp_fr_notice_ns();
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
