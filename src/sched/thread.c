/* thread.c: the optional progress thread (lp_progress_thread), fork handling (a forked child's
 * copy of the engine switched off) and the engine's finalize, for the progress engine
 * (progress.h; how progress and its locking work: wait.c). */
#include "progress.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>

static pthread_mutex_t fork_gate = PTHREAD_MUTEX_INITIALIZER;   /* the progress thread's MPI calls */

/* the progress thread */
static pthread_t pt;
static atomic_int pt_running;
static int pt_stop;

int lp_progress_thread_running(void) { return atomic_load(&pt_running); }

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
    long long last = lp_eng_now_ns();
    pthread_mutex_lock(&lp_eng_mu);
    while (!pt_stop) {
        lp_eng_advance_all();
        if (lp_eng_own_all(NULL) != LP_OK || lp_eng_set.nset == 0) {
            pthread_cond_wait(&lp_eng_cv, &lp_eng_mu);
            last = lp_eng_now_ns();
            continue;
        }
        pthread_mutex_unlock(&lp_eng_mu);
        pthread_mutex_lock(&fork_gate);    /* never inside MPI across a fork (see fork below) */
        size_t done0 = lp_eng_count_done();
        unsigned long moves0 = lp_eng_moves;
        int seen = lp_eng_observe_set(0);
        for (size_t j = 0; j < lp_eng_set.nset; j++) lp_eng_advance_or_fail(lp_eng_set.set[j]);
        pthread_mutex_unlock(&fork_gate);
        int completed = lp_eng_count_done() != done0;
        if (seen || completed || lp_eng_moves != moves0) last = lp_eng_now_ns();
        pthread_mutex_lock(&lp_eng_mu);
        lp_eng_release_all(NULL);
        if (!completed) {          /* give the core away often: ranks may share one */
            pthread_mutex_unlock(&lp_eng_mu);
            if (lp_eng_now_ns() - last < IDLE_NS) {
                sched_yield();
            } else {
                struct timespec nap = {0, IDLE_NAP_NS};
                nanosleep(&nap, NULL);
            }
            pthread_mutex_lock(&lp_eng_mu);
        }
    }
    pthread_mutex_unlock(&lp_eng_mu);
    return NULL;
}

int lp_progress_thread(int on) {
    int rc = LP_OK, provided = MPI_THREAD_SINGLE, err;
    if (on && lp_forked) return lp_not_forked();
    if (!on) {
        if (!atomic_load(&pt_running)) return LP_OK;
        pthread_mutex_lock(&lp_eng_mu);
        pt_stop = 1;
        pthread_cond_broadcast(&lp_eng_cv);
        pthread_mutex_unlock(&lp_eng_mu);
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

static void fork_prepare(void) {
    pthread_mutex_lock(&fork_gate);    /* the progress thread out of MPI: a fork in the middle of
                                          its MPI_Testsome left the child MPICH's mutex locked,
                                          and the child's MPI_Finalize aborted */
    pthread_mutex_lock(&lp_eng_mu);
    pthread_mutex_lock(&lp_eng_skip_mu);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&lp_eng_skip_mu);
    pthread_mutex_unlock(&lp_eng_mu);
    pthread_mutex_unlock(&fork_gate);
}
static void fork_child(void) {
    pthread_mutex_init(&lp_eng_mu, NULL);
    pthread_mutex_init(&lp_eng_skip_mu, NULL);
    pthread_mutex_init(&fork_gate, NULL);
    pthread_cond_init(&lp_eng_cv, NULL);
    lp_forked = 1;
    atomic_store(&pt_running, 0);
    pt_stop = 0;
    for (lp_req_t *r = lp_eng_all; r; r = r->lnext) {
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
    lp_eng_active = NULL;
    atomic_store(&lp_nactive, 0);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
void lp_engine_atfork(void) { pthread_once(&fork_once, fork_register); }
/* at load: a child forked before any collective is off too */
__attribute__((constructor)) static void atfork_at_load(void) { lp_engine_atfork(); }


/* ------------------------------------------------------------------------------- finalize */
void lp_engine_finalize(void) {
    lp_progress_thread(0);
    lp_engine_drain(NULL);
}

void lp_req_finalize(void) {
    pthread_mutex_lock(&lp_eng_mu);
    for (lp_req_t *r = lp_eng_all; r; r = r->lnext) lp_req_finalize_one(r);
    pthread_mutex_unlock(&lp_eng_mu);
}
