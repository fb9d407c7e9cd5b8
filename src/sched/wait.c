/* wait.c: waiting, in the one progress engine (its files: progress.h).  It runs the schedule of every request (schedule.h),
 * blocking, nonblocking and persistent alike, and is the only place where lpmpi observes a
 * completion: of MPI requests (MPI_Waitsome / MPI_Testsome, in observe) and of device work
 * (event queries, in retire).
 *
 * Advancing a request (exec.c), then observing: test the outstanding MPI requests (spinning,
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
#include "progress.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>


long long lp_eng_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ------------------------------------------------------------------------------- a peer that died
 * MPICH's launcher (under -disable-auto-cleanup) tells the survivors that a process of the job
 * ended (SIGUSR1: obs/watch.c, lp_fr_notices).  MPI itself then says nothing (its fault tolerance
 * is off in these builds): a receive from the dead process never completes.  So from the first
 * notice on, waits poll (MPI_Testsome) and check, at once and every NOTICE_CHECK_NS, whether
 * a rank of this node in the communicator of a waiting request is gone (its /proc entry:
 * ctx_lost, alive.c); such requests fail (LP_ERR_PEER) naming it, and so does every later call
 * on that communicator.  One whose peers are on other nodes (no process to look at) fails when
 * nothing at all has moved for NOTICE_GRACE_NS after the notice.  A thread already blocked in
 * MPI_Waitsome when the notice comes is woken by its wake-up request (alive.c: one more pending
 * request in every blocking MPI wait, completed by the watch thread on a notice).  Before any
 * notice a call costs two loads more; MPI's own blocking collectives cannot be woken (obs/watch.c
 * ends a rank stuck in one, saying so). */
enum { NOTICE_CHECK_NS = 100000000 };
/* ------------------------------------------------------------------------------- the watchdog */
/* LPMPI_TIMEOUT: a request its waiter finds older than the timeout fails with LP_ERR_TIMEOUT,
 * naming what it waits for: the peers of its outstanding point-to-point transfers, MPI's own
 * collective (every rank), the shared-memory ring's counters or device work.  Its transfers are
 * cancelled as for any failure (MPI's collectives cannot be: the communicator is not usable
 * after it; the program decides, e.g. comm.Abort()).  Off: no clock is read. */
int lp_eng_overdue(lp_req_t *r) {
    if (!lp_timeout_ns || r->state != LP_REQ_ACTIVE) return 0;
    long long age = lp_eng_now_ns() - r->t_start;
    if (age < lp_timeout_ns) return 0;
    char what[700], path[1100] = "", fr[1200] = "";
    int peers[64];
    lp_req_waiting(r, what, sizeof what, peers, 64);
    if (lp_fr_dump("watchdog (LPMPI_TIMEOUT)", NULL, path, sizeof path) == LP_OK)   /* while it still waits */
        snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
    const lp_args_t *a = &r->a;
    lp_eng_fail(r, LP_FAIL(LP_ERR_TIMEOUT, "LPMPI_TIMEOUT: %s of %zu bytes (%s) on a communicator of %d "
                    "ranks not complete after %.1f s, %s (this rank is %d); the communicator is "
                    "unusable now (e.g. comm.Abort())%s", lp_coll_name(a->coll), a->count * a->esize,
                    r->alg_name, a->size, (double)age / 1e9, what, a->rank, fr));
    return 1;
}


/* ------------------------------------------------------------------------------- observing */
_Thread_local lp_gather_t lp_eng_set;


static int gather_room(size_t n) {
    if (n <= lp_eng_set.cap) return LP_OK;
    size_t c = n < 64 ? 64 : 2 * n;
    void *q = realloc(lp_eng_set.q, c * sizeof *lp_eng_set.q), *ix = NULL, *sl = NULL, *st = NULL, *ow = NULL;
    if (q) lp_eng_set.q = q;
    if ((ix = realloc(lp_eng_set.idx, c * sizeof *lp_eng_set.idx))) lp_eng_set.idx = ix;
    if ((sl = realloc(lp_eng_set.slot, c * sizeof *lp_eng_set.slot))) lp_eng_set.slot = sl;
    if ((st = realloc(lp_eng_set.st, c * sizeof *lp_eng_set.st))) lp_eng_set.st = st;
    if ((ow = realloc(lp_eng_set.own, c * sizeof *lp_eng_set.own))) lp_eng_set.own = ow;
    if (!q || !ix || !sl || !st || !ow) return LP_FAIL(LP_ERR_NOMEM, "out of memory for %zu requests", c);
    lp_eng_set.cap = c;
    return LP_OK;
}

int lp_eng_set_push(lp_req_t *r) {
    if (lp_eng_set.nset == lp_eng_set.setcap) {
        size_t c = lp_eng_set.setcap ? 2 * lp_eng_set.setcap : 16;
        lp_req_t **s = realloc(lp_eng_set.set, c * sizeof *s);
        if (!s) return LP_FAIL(LP_ERR_NOMEM, "out of memory for the requests being observed");
        lp_eng_set.set = s;
        lp_eng_set.setcap = c;
    }
    lp_eng_set.set[lp_eng_set.nset++] = r;
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
long lp_spin_ns = LP_KNOB_SHM_SPIN_US_DEFAULT * 1000L;
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

void lp_eng_idle_end(void) {
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
    long long t = lp_eng_now_ns();
    if (W.moves != lp_eng_moves || W.seg != s || !W.since) {   /* a new wait: something moved since */
        if (W.since && !W.slept && W.seg == s && max >= 0)   /* the last one ended in its spin */
            W.budget = budget_grown(W.budget, max);
        lp_eng_idle_end();
        W.moves = lp_eng_moves;
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
    /* where the launcher tells of an ended process (hydra's SIGUSR1, watch.c), its notice follows
     * the exit by milliseconds, and this rank's own look (/proc, every SHM_ALIVE_NS) may come
     * first: the dump, the last word lpmpi-trace --hang reads, waits for it a little (300 ms at
     * most, on this failure path only) so that it says whether the launcher saw the death */
    for (long long t0 = lp_eng_now_ns(); lp_fr_launcher_watched() && !lp_fr_notices() &&
                                         lp_eng_now_ns() - t0 < 300000000LL;) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
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
    lp_gather_t *g = &lp_eng_set;
    if (!g->waiting) return 0;
    const unsigned nt = lp_fr_notices();
    const long long t = lp_eng_now_ns();
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
    const long long t = lp_eng_now_ns();
    if (N.moves != lp_eng_moves || !N.moved) {
        N.moves = lp_eng_moves;
        N.moved = t;
    }
    int any = 0;
    if (N.nt != nt || t - N.checked >= NOTICE_CHECK_NS) {
        N.nt = nt;
        N.checked = t;
        for (size_t j = 0; j < lp_eng_set.nset; j++) {
            lp_req_t *r = lp_eng_set.set[j];
            if (r->state != LP_REQ_ACTIVE || !r->ctx) continue;
            int pid = 0, dead = ctx_lost(r->ctx, &pid);
            if (dead < 0) continue;
            char what[700], w2[760];
            int peers[64];
            lp_req_waiting(r, what, sizeof what, peers, 64);
            snprintf(w2, sizeof w2, "was %s", what);
            int rc = lost_error(r->ctx, dead, pid, w2);
            for (size_t i = j; i < lp_eng_set.nset; i++)
                if (lp_eng_set.set[i]->state == LP_REQ_ACTIVE && lp_eng_set.set[i]->ctx == r->ctx) lp_eng_fail(lp_eng_set.set[i], rc);
            any = 1;
        }
    }
    const long long since = lp_fr_notice_ns();
    if (t - (N.moved > since ? N.moved : since) < NOTICE_GRACE_NS) return any;
    for (size_t j = 0; j < lp_eng_set.nset; j++) {
        lp_req_t *r = lp_eng_set.set[j];
        if (r->state != LP_REQ_ACTIVE) continue;
        char what[700];
        int peers[64];
        lp_req_waiting(r, what, sizeof what, peers, 64);
        lp_fr_lost("a process of the job ended (the launcher's notice) and a call waited for it", NULL, 0);
        char path[1100] = "", fr[1200] = "";
        if (lp_fr_ring && lp_fr_dump("a peer is gone (the launcher's notice)", NULL, path, sizeof path) == LP_OK)
            snprintf(fr, sizeof fr, "; flight recorder written to %s", path);
        lp_eng_fail(r, LP_FAIL(LP_ERR_PEER, "a process of the job ended (the launcher's notice, %.1f s ago) and "
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
    long long t = lp_eng_now_ns();
    if (A.moves != lp_eng_moves || !A.last) {
        A.moves = lp_eng_moves;
        A.last = t;
        return 0;
    }
    if (t - A.last < SHM_ALIVE_NS) return 0;
    A.last = t;
    int pid = 0, dead = xp->gone ? xp->gone(s, rank, &pid) : -1;
    if (dead < 0) return 0;
    lp_ctx_t *ctx = NULL;
    for (size_t j = 0; j < lp_eng_set.nset && !ctx; j++)
        if (xp->segment(&lp_eng_set.set[j]->a) == s) ctx = lp_eng_set.set[j]->ctx;
    char what[300];
    snprintf(what, sizeof what, "was waiting for %s (the %s transport)", xp->waits_for, xp->name);
    if (ctx && ctx->lost < 0) {      /* (sticky: later calls on it fail at once) */
        ctx->lost = dead;
        ctx->lost_pid = pid;
    }
    int rc = ctx ? lost_error(ctx, dead, pid, what)
                 : LP_FAIL(LP_ERR_PEER, "rank %d of this communicator (process %d on this node) is gone (killed "
                           "or exited) while this rank %s; the communicator is unusable now", dead, pid, what);
    for (size_t j = 0; j < lp_eng_set.nset; j++)
        if (lp_eng_set.set[j]->state == LP_REQ_ACTIVE && xp->segment(&lp_eng_set.set[j]->a) == s) lp_eng_fail(lp_eng_set.set[j], rc);
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
        if (!lp_eng_uses_mpi(l) || l->done == l->issued) continue;
        size_t s = l->req0 + l->dslot;
        if (r->fin[s]) {
            (*pending)++;
            continue;
        }
        if (r->reqs[s] == MPI_REQUEST_NULL) continue;
        lp_eng_set.q[*m] = r->reqs[s];
        lp_eng_set.own[*m] = r;
        lp_eng_set.slot[*m] = (int)s;
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
    if (Y.moves == lp_eng_moves && Y.since && Y.yielded) {     /* (yielding already: no clock read) */
        sched_yield();
        return;
    }
    if (Y.moves == lp_eng_moves && Y.since && ++Y.polls % 8) return;   /* a clock read in 8 polls */
    long long t = lp_eng_now_ns();
    if (Y.moves != lp_eng_moves || !Y.since) {                 /* a new wait: something moved since */
        if (Y.since && !Y.yielded && max >= 0)           /* the last one ended in its spin */
            Y.budget = budget_grown(Y.budget, max);
        Y.moves = lp_eng_moves;
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
int lp_eng_observe_set(int block) {
    /* one look-up of this thread's arrays (in a shared module each is a call, __tls_get_addr,
     * which the compiler otherwise repeats after every call below: the empty asm keeps the
     * address in a register) */
    lp_gather_t *g = &lp_eng_set;
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
        if (gather_heads(r, &m, &pending) != LP_OK) lp_eng_fail(r, LP_ERR_NOMEM);
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
                if (g->set[j]->state == LP_REQ_ACTIVE) lp_eng_fail(g->set[j], rc);
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
            if (g->set[j]->state == LP_REQ_ACTIVE) lp_eng_fail(g->set[j], rc);
        return 0;
    }
    if (cnt == MPI_UNDEFINED) cnt = 0;
    const int cancelled = g->cancelled;
    for (int j = 0; j < cnt; j++) {
        int i = g->idx[j];
        lp_req_t *r = g->own[i];
        if (mrc == MPI_ERR_IN_STATUS && g->st[j].MPI_ERROR != MPI_SUCCESS) {
            if (r->state == LP_REQ_ACTIVE)
                lp_eng_fail(r, lp_mpi_fail(g->st[j].MPI_ERROR, __FILE__, __LINE__, "MPI_Waitsome"));
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
void lp_eng_observe_one(lp_req_t *r) {
    if (lp_eng_set_push(r) != LP_OK) {
        lp_eng_fail(r, LP_ERR_NOMEM);
        return;
    }
    lp_eng_observe_set(1);
    lp_eng_set.nset = 0;
}
