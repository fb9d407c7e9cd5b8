/* sched/progress.h: what the progress engine's three files share (private to sched/).  The
 * engine is one piece of state, its lock and its lists, worked on by
 *   exec.c    execution: a request's steps (issue, retire), its phases, failing it, the native
 *             order of MPI's own collectives;
 *   wait.c    waiting: observing completions (MPI_Waitsome / MPI_Testsome, the transports'
 *             counters), spinning, yielding and sleeping, the watchdog, a peer that died;
 *   run.c     the active list and the requests' entry points (run, start, wait, test);
 *   thread.c  the progress thread, fork handling and finalize.
 * What progress is, and its locking: the banner of wait.c. */
#ifndef LPMPI_SCHED_PROGRESS_H
#define LPMPI_SCHED_PROGRESS_H

#include "engine.h"
#include "flight.h"
#include <pthread.h>

/* (hidden: the engine's own names, bound inside the extension; a thread-local one is then
 * reached as cheaply as a static one) */
#pragma GCC visibility push(hidden)

/* ---- exec.c */
extern pthread_mutex_t lp_eng_skip_mu;   /* native order's skipped tickets */
int lp_eng_phase_begin(lp_req_t *r);     /* r's phase r->phase: build its lanes */
int lp_eng_advance(lp_req_t *r);         /* retire and issue r's steps while any moves */
void lp_eng_fail(lp_req_t *r, int rc);   /* r failed with rc: cancel, free, end it */
void lp_eng_advance_or_fail(lp_req_t *r);
static inline int lp_eng_uses_mpi(const lp_lane_t *l) { return l->kind <= LP_STEP_RECV || l->kind == LP_STEP_NATIVE; }

extern _Thread_local unsigned long lp_eng_moves;   /* passes of advance() that moved a request */

/* ---- wait.c */
/* a process of the job ended (the launcher's notice): a wait with nothing moving this long after
 * it fails (wait.c's banner) */
static const long long NOTICE_GRACE_NS = 5000000000LL;
long long lp_eng_now_ns(void);
int lp_eng_overdue(lp_req_t *r);         /* the watchdog: r past LPMPI_TIMEOUT fails */
void lp_eng_idle_end(void);              /* a wait ended: its spin / yield state reset */
void lp_eng_observe_one(lp_req_t *r);    /* observe r alone (a blocking call's request) */
int lp_eng_set_push(lp_req_t *r);        /* add r to lp_eng_set */
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
} lp_gather_t;
extern _Thread_local lp_gather_t lp_eng_set;
int lp_eng_observe_set(int block);       /* observe lp_eng_set's requests (block: MPI_Waitsome) */

/* ---- run.c */
extern pthread_mutex_t lp_eng_mu;        /* the engine lock: the active list and its requests */
extern pthread_cond_t lp_eng_cv;         /* released, completed, started, stop */
extern lp_req_t *lp_eng_active;          /* started nonblocking and persistent requests, not complete */
extern atomic_ulong lp_eng_gen;          /* bumped when the active set or its ownership changes */
extern lp_req_t *lp_eng_all;             /* every request not yet freed (MPI_Finalize) */
void lp_eng_advance_all(void);           /* (locked) advance every active request no thread owns */
int lp_eng_own_all(lp_req_t *first);     /* (locked) own `first` and every unowned active request */
void lp_eng_release_all(lp_req_t *private_req);   /* (locked) give the set back */
size_t lp_eng_count_done(void);

#pragma GCC visibility pop
#endif
