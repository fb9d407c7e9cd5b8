/* alive.c: a peer that died.  Which processes of this node are still there, and the wake-up
 * requests that get a thread blocked in MPI out of its wait when MPICH's launcher says a
 * process of the job ended (issue 48: sched/wait.c fails the waits, obs/watch.c's watch thread takes
 * the notice and wakes them; context.c, alg_ring_shm.c record the processes).  The bottom
 * layer: it calls nothing of lpmpi's.
 *
 * Liveness: a process is its id and start time from /proc/<pid>/stat (a pid the kernel gave to
 * another process since has another start time); gone = no entry, a zombie, or that other
 * process.  Only processes of this node can be looked at (and only in one pid namespace).
 *
 * Wake-up: a thread blocked in MPI_Waitsome (sched/wait.c) when the notice comes must get out
 * of it.  Nothing is added to the waits beforehand: a request more in every blocking wait (a
 * generalized request, or a receive from the rank itself) cost MPICH 8-16% of an 8 B tree
 * allreduce or bcast, and a pending generalized request slowed every call while it merely
 * existed (docs/debugging.md "Costs").  Instead the watch thread, on the first notice,
 * registers a hook that MPICH runs inside every thread's progress (MPIX_Async_start, looked up
 * at run time): on the blocked thread itself, sched/wait.c's hook cancels the receives of its
 * wait whose communicator lost a rank of this node, so MPI returns, and the wait fails naming
 * it.  Where the library has no such hook (Open MPI, Intel MPI 2021), or a wait holds sends
 * only, the watch thread ends a rank still blocked there (obs/watch.c), as for MPI's own blocking
 * calls (below), which nothing wakes. */
#include "internal.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------- liveness */
#if defined(__linux__)
/* process pid's state letter and start time (clock ticks after boot); 0 without an entry */
static int proc_stat(int pid, char *state, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');            /* after the command name, which may hold spaces */
    if (!p || sscanf(p + 1, " %c", state) != 1) return 0;
    for (int field = 3; field <= 22 && p; field++) p = strchr(p + 1, ' ');   /* the space before field 22 */
    return p && sscanf(p + 1, "%llu", start) == 1;
}
#endif

uint64_t lp_proc_since(int pid) {
#if defined(__linux__)
    char st = 0;
    unsigned long long t = 0;
    return proc_stat(pid, &st, &t) ? (uint64_t)t : 0;
#else
    (void)pid;
    return 0;
#endif
}

int lp_proc_gone(const lp_proc_t *p) {
#if defined(__linux__)
    char st = 0;
    unsigned long long t = 0;
    return !proc_stat(p->pid, &st, &t) || st == 'Z' || st == 'X' || t != p->since;
#else
    (void)p;
    return 0;
#endif
}

int lp_procs_lost(const lp_proc_t *p, int n, int *pid) {
    for (int r = 0; p && r < n; r++)
        if (p[r].pid && lp_proc_gone(&p[r])) {
            *pid = p[r].pid;
            return r;
        }
    return -1;
}

int lp_dead_words(const lp_proc_t *p, int n, MPI_Comm comm, const char *whose, char *buf, size_t len,
                  int *world, int maxw) {
    char ranks[200] = "", pids[200] = "", wrs[200] = "";
    size_t a = 0, b = 0, c = 0;
    int k = 0;
    for (int r = 0; p && r < n; r++) {
        if (!p[r].pid || !lp_proc_gone(&p[r])) continue;
        int w = comm != MPI_COMM_NULL ? lp_world_rank_of(comm, r) : -1;
        if (k < maxw) world[k] = w >= 0 ? w : r;
        if (a < sizeof ranks) a += (size_t)snprintf(ranks + a, sizeof ranks - a, "%s%d", k ? ", " : "", r);
        if (b < sizeof pids) b += (size_t)snprintf(pids + b, sizeof pids - b, "%s%d", k ? ", " : "", p[r].pid);
        if (w >= 0 && c < sizeof wrs) c += (size_t)snprintf(wrs + c, sizeof wrs - c, "%s%d", k ? ", " : "", w);
        k++;
    }
    if (k == 1)
        snprintf(buf, len, "rank %s of %s (process %s on this node%s%s) is gone", ranks, whose, pids,
                 c ? ", world rank " : "", wrs);
    else if (k > 1)
        snprintf(buf, len, "ranks %s of %s (processes %s on this node%s%s) are gone", ranks, whose, pids,
                 c ? ", world ranks " : "", wrs);
    return k;
}

int lp_world_rank_of(MPI_Comm comm, int rank) {
    MPI_Group g = MPI_GROUP_NULL, w = MPI_GROUP_NULL;
    int out = -1;
    if (MPI_Comm_group(comm, &g) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &w) == MPI_SUCCESS &&
        MPI_Group_translate_ranks(g, 1, &rank, w, &out) != MPI_SUCCESS)
        out = -1;
    if (g != MPI_GROUP_NULL) MPI_Group_free(&g);
    if (w != MPI_GROUP_NULL) MPI_Group_free(&w);
    return out == MPI_UNDEFINED ? -1 : out;
}

/* ------------------------------------------------------------------------------- wake-up */
atomic_int lp_wake_ok;

/* the hook (sched/wait.c's) and MPICH's way to run it inside any thread's progress, looked up
 * at run time (MPICH 4.2 and newer; not in Open MPI nor Intel MPI 2021) */
static int (*wake_fn)(void);

void lp_wake_set(int (*fn)(void)) { wake_fn = fn; }

#if defined(MPIX_STREAM_NULL)           /* MPICH's headers: MPIX_Async_start's stream argument */
/* MPIX_Async_start(poll_fn, state, stream), poll_fn(thing) -> 0 (MPIX_ASYNC_NOPROGRESS) */
typedef int (*async_poll_t)(void *thing);
typedef int (*async_start_t)(async_poll_t, void *, MPIX_Stream);
static int wake_poll(void *thing) {
    (void)thing;
    if (wake_fn) wake_fn();
    return 0;                            /* no progress: it stays, every later wait may need it */
}
#endif

int lp_wake_can(void) {
#if defined(MPIX_STREAM_NULL)
    return dlsym(RTLD_DEFAULT, "MPIX_Async_start") != NULL;
#else
    return 0;
#endif
}

int lp_wake_waiters(void) {
    static atomic_int started;
    if (atomic_exchange(&started, 1)) return 1;
#if defined(MPIX_STREAM_NULL)
    async_start_t start = (async_start_t)dlsym(RTLD_DEFAULT, "MPIX_Async_start");
    if (start && start(wake_poll, NULL, MPIX_STREAM_NULL) == MPI_SUCCESS) return 1;
#endif
    atomic_store(&started, 0);
    return 0;
}

/* ------------------------------------------------------------------------------- inside MPI */
/* The threads blocked in MPI's own blocking calls, which nothing wakes: MPI's blocking
 * collectives (native, alg_native.c) and a communicator's first-call barrier (sched/run.c).
 * Each thread's slot holds what it waits in (the call's arguments where there is one) while it
 * is inside, and counts its entries; two stores a call.  The watch thread reads them after a
 * notice (obs/watch.c: a rank stuck there when a peer died is ended, saying so). */
enum { INSIDE_SLOTS = 64 };
static struct {
    _Atomic(const lp_args_t *) a;
    _Atomic(const char *) what;          /* NULL: not inside */
    atomic_ulong seq;
} inside[INSIDE_SLOTS];
static atomic_int inside_used;
static _Thread_local int inside_me = -1;

int lp_inside_enter(const lp_args_t *a, const char *what) {
    if (inside_me == -1) inside_me = atomic_fetch_add(&inside_used, 1);
    const int i = inside_me < INSIDE_SLOTS ? inside_me : -1;
    if (i < 0) return -1;
    atomic_store_explicit(&inside[i].seq, atomic_load_explicit(&inside[i].seq, memory_order_relaxed) + 1,
                          memory_order_relaxed);      /* (only this thread writes it) */
    atomic_store_explicit(&inside[i].a, a, memory_order_relaxed);
    atomic_store_explicit(&inside[i].what, what, memory_order_release);
    return i;
}

void lp_inside_leave(int i) {
    if (i >= 0) atomic_store_explicit(&inside[i].what, NULL, memory_order_release);
}

int lp_inside_n(void) {
    int n = atomic_load_explicit(&inside_used, memory_order_acquire);
    return n < INSIDE_SLOTS ? n : INSIDE_SLOTS;
}

const char *lp_inside_get(int i, const lp_args_t **a, unsigned long *seq) {
    const char *what = atomic_load_explicit(&inside[i].what, memory_order_acquire);
    *a = atomic_load_explicit(&inside[i].a, memory_order_relaxed);
    *seq = atomic_load_explicit(&inside[i].seq, memory_order_relaxed);
    return what;
}
