/* watch.c: the watch thread (the flight recorder's, obs.h; started at the first communicator's
 * context, lp_fr_watch_arm): SIGUSR1 dumps the recorder (the handler writes a byte into a pipe
 * the thread reads), the launcher's notices (a process of the job ended), the watchdog of last
 * resort (LPMPI_ABORT_TIMEOUT: recorder.c's banner) and the trace's full buffers (trace.c). */
#include "obs.h"
#include "schedule.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------- the watch thread */
static int sig_pipe[2] = {-1, -1};
static atomic_int armed;
static pthread_t watch_tid;

static struct sigaction prev_usr1;   /* the handler before lpmpi's (MPICH installs one): called after */
/* the bytes of the pipe: 2 a trace buffer is full; SIG_USER, SIG_NOTICE: SIGUSR1 (on_usr1) */
enum { SIG_USER = 1, SIG_NOTICE = 3 };

/* SIGUSR1 comes from two senders.  MPICH's launcher (hydra's proxy, the rank's parent process)
 * sends it to the surviving processes when a process of the job ends, under
 * -disable-auto-cleanup: its failure notice, which MPICH's own handler (installed at MPI_Init,
 * called after ours) counts.  Anyone else (`kill -USR1 <pid>`; a batch system's warning, which
 * comes from the rank's parent too, slurmstepd) asks for a dump: a notice is SIGUSR1 from the
 * parent where the parent is hydra_pmi_proxy (MPICH's and Intel MPI's launchers).  The notice must
 * leave the rank exactly as MPICH leaves it: nothing on stdout or stderr, because hydra's proxy,
 * woken by any output of a survivor after a process of its died by a signal, reaps that process
 * and SIGKILLs every other process it started (proxy/pmip.c's waitpid loop; the survivor "died
 * without a word").  So the notice writes the dump quietly (a file: the rank's state when its
 * peer went) and tells the engine (lp_fr_notices: waits check their peers at once); a user's
 * signal writes the dump and says where. */
static pid_t launcher;               /* the rank's parent where it is hydra's proxy (arm), else 0 */
int lp_fr_launcher_watched(void) { return launcher != 0; }

static void on_usr1(int sig, siginfo_t *info, void *uctx) {
    int e = errno;
    char b = info && info->si_code == SI_USER && launcher && info->si_pid == launcher ? SIG_NOTICE : SIG_USER;
    if (b == SIG_NOTICE) {
        atomic_store_explicit(&lp_obs_notice_ns, lp_obs_mono_ns(CLOCK_MONOTONIC), memory_order_relaxed);
        atomic_fetch_add_explicit(&lp_fr_notice_count, 1, memory_order_release);
    }
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &b, 1) < 0) { /* full: a dump is pending anyway */ }
    errno = e;
    if (prev_usr1.sa_flags & SA_SIGINFO) {
        if (prev_usr1.sa_sigaction) prev_usr1.sa_sigaction(sig, info, uctx);
    } else if (prev_usr1.sa_handler != SIG_DFL && prev_usr1.sa_handler != SIG_IGN && prev_usr1.sa_handler) {
        prev_usr1.sa_handler(sig);
    }
}

/* the oldest call still running (entered, not ended) longer than `after_ns`, or NULL (a copy) */
static int overdue_call(long long after_ns, lp_fr_ent_t *out) {
    if (!lp_fr_ring) return 0;
    const long long now = lp_obs_mono_ns(CLOCK_MONOTONIC_COARSE);
    uint64_t last = atomic_load(&lp_fr_next), n = lp_fr_mask + 1;
    for (uint64_t g = last > n ? last - n + 1 : 1; g <= last; g++) {
        lp_fr_ent_t *e = &lp_fr_ring[(g - 1) & lp_fr_mask];
        if (atomic_load(&e->gen) != g || e->state >= LP_FR_DONE) continue;
        if (now - e->t_enter > after_ns) {
            *out = *e;
            return 1;
        }
    }
    return 0;
}

/* After a notice: a thread inside MPI's own blocking call (native's blocking collectives, a
 * first call's barrier: alive.c's slots) whose communicator lost a rank of this node, or still
 * inside the same call STUCK_GRACE_NS after the notice.  MPI never returns from it (its fault tolerance is off
 * in these builds), and a blocking collective cannot be made nonblocking after the fact (MPI
 * never matches one with the other), so the rank is ended, saying why and which rank is gone,
 * the recorder dumped: better than hanging forever.  lpmpi's own waits raise (sched/wait.c). */
static const long long STUCK_GRACE_NS = 8000000000LL;
enum { STUCK_SLOTS = 64 };
static struct { unsigned long seq; long long seen; } stuck[STUCK_SLOTS];

static void stuck_check(void) {
    const long long since = lp_fr_notice_ns(), now = lp_obs_mono_ns(CLOCK_MONOTONIC);
    if (!since) return;
    for (int i = 0, n = lp_inside_n(); i < n && i < STUCK_SLOTS; i++) {
        unsigned long seq = 0;
        const lp_args_t *a = NULL;
        const char *where = lp_inside_get(i, &a, &seq);
        if (!where) continue;
        if (stuck[i].seq != seq || !stuck[i].seen) {      /* a call first seen inside now */
            stuck[i].seq = seq;
            stuck[i].seen = now;
        }
        int lvl = 0, world[64];
        MPI_Query_thread(&lvl);
        char msg[700], path[1100] = "", call[200] = "";
        int ndead = a ? lp_dead_words(a->alive, a->size, lvl == MPI_THREAD_MULTIPLE ? a->comm : MPI_COMM_NULL,
                                      "its communicator", msg, sizeof msg, world, 64) : 0;
        if (!ndead && now - (stuck[i].seen > since ? stuck[i].seen : since) < STUCK_GRACE_NS) continue;
        if (!ndead)
            snprintf(msg, sizeof msg, "a process of the job ended (the launcher's notice, %.1f s ago)",
                     (double)(now - since) / 1e9);
        if (a) snprintf(call, sizeof call, " (%s of %zu bytes)", lp_coll_name(a->coll), a->count * a->esize);
        lp_fr_lost(msg, world, ndead < 64 ? ndead : 64);
        int drc = lp_fr_ring ? lp_fr_dump("a peer is gone while this rank is inside MPI", NULL, path, sizeof path) : -1;
        fprintf(stderr, "lpmpi: rank %d: %s while this rank is inside %s%s, which cannot return; %s%s; "
                "ending this process (exit status 3)\n", lp_obs_world_rank, msg, where, call,
                drc == LP_OK ? "flight recorder written to " : "no flight recorder written", path);
        fflush(stderr);
        _exit(3);
    }
}

static void *watch_main(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);      /* signals are for the program's threads */
    for (;;) {
        int ms = lp_obs_abort_after_s > 0 ? (int)(lp_obs_abort_after_s * 1000 / 8) : -1;
        if (ms > 5000) ms = 5000;
        if (ms >= 0 && ms < 50) ms = 50;
        if (lp_trace_on && (ms < 0 || ms > 500)) ms = 500;   /* the trace's clock: a new anchor */
        if (lp_fr_notices() && (ms < 0 || ms > 200)) ms = 200;  /* after a notice: calls stuck in MPI */
        if (lp_trace_on) {
            lp_trace_reanchor();
        }
        struct pollfd p = {sig_pipe[0], POLLIN, 0};
        int k = poll(&p, 1, ms);
        if (k > 0) {
            char b[64];
            ssize_t got = read(sig_pipe[0], b, sizeof b);
            int usr1 = 0, notice = 0;
            for (ssize_t i = 0; i < got; i++) {
                usr1 |= b[i] == SIG_USER;
                notice |= b[i] == SIG_NOTICE;
            }
            lp_trace_drain();                                /* (2: a trace buffer is full) */
            char path[1100] = "";
            if (usr1 && lp_fr_ring && lp_fr_dump("SIGUSR1", NULL, path, sizeof path) == LP_OK)
                fprintf(stderr, "lpmpi: rank %d: flight recorder written to %s (SIGUSR1)\n", lp_obs_world_rank, path);
            else if (notice) {                            /* quietly: see on_usr1 */
                if (atomic_load(&lp_wake_ok)) lp_wake_waiters();   /* threads blocked in MPI_Waitsome */
                if (lp_fr_ring)
                    (void)lp_fr_dump("the launcher's notice (SIGUSR1): a process of the job ended", NULL, path,
                                     sizeof path);
            }
            if (lp_fr_notices()) stuck_check();
            continue;
        }
        if (lp_fr_notices()) stuck_check();
        lp_fr_ent_t e;
        if (lp_obs_abort_after_s <= 0 || !overdue_call((long long)(lp_obs_abort_after_s * 1e9), &e)) continue;
        char path[1100] = "", what[700] = "";
        const lp_req_t *r = e.req;
        int peers[64];
        if (e.state == LP_FR_STARTED && r && r->fr == e.gen && r->state == LP_REQ_ACTIVE)
            lp_req_waiting(r, what, sizeof what, peers, 64);
        else snprintf(what, sizeof what, "%s", e.comm ? "waiting for the ranks' agreement before the call"
                                                       : "preparing the communicator (every rank must enter)");
        int drc = lp_fr_dump("watchdog (LPMPI_ABORT_TIMEOUT)", NULL, path, sizeof path);
        fprintf(stderr, "lpmpi: rank %d: LPMPI_ABORT_TIMEOUT: %s #%llu (%llu bytes) on communicator %llu not "
                "complete after %.0f s, %s; %s%s; aborting the job (LPMPI_ABORT_TIMEOUT=0: never; "
                "LPMPI_TIMEOUT=seconds raises on the waiting ranks instead)\n", lp_obs_world_rank,
                lp_coll_name((lp_coll_t)e.coll), (unsigned long long)e.seq, (unsigned long long)e.bytes,
                (unsigned long long)e.comm, lp_obs_abort_after_s, what,
                drc == LP_OK ? "flight recorder written to " : "no flight recorder written", path);
        fflush(stderr);
        struct timespec nap = {0, 300000000};      /* the launcher forwards the message first */
        nanosleep(&nap, NULL);
        int lvl = 0;
        MPI_Query_thread(&lvl);
        if (lvl == MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 3);
        _exit(3);
    }
    return NULL;
}

/* the watch thread and the SIGUSR1 handler (the first communicator's context; once) */
void lp_fr_watch_arm(void) {
    if (atomic_exchange(&armed, 1)) return;
    if (pipe(sig_pipe)) return;       /* (with the recorder off too: the launcher's notices) */
    for (int i = 0; i < 2; i++) fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    lp_obs_wake_fd = sig_pipe[1];    /* (trace.c: a full buffer wakes the thread) */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 1 << 20);
    int e = pthread_create(&watch_tid, &at, watch_main, NULL);
    pthread_attr_destroy(&at);
    if (e) return;
    {                                /* the parent, where it is hydra's proxy: its SIGUSR1 is a notice */
        char path[64], comm[64] = "";
        pid_t pp = getppid();
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pp);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
            fclose(f);
        }
        if (strncmp(comm, "hydra_pmi_proxy", 15) == 0) launcher = pp;
    }
    int lvl = 0;                     /* the watch thread may complete the waits' wake-up requests */
    if (MPI_Query_thread(&lvl) == MPI_SUCCESS && lvl == MPI_THREAD_MULTIPLE && lp_wake_can())
        atomic_store(&lp_wake_ok, 1);
    /* SIGUSR1 dumps; a handler already there (MPICH's, the program's) is called after ours; a
     * signal the program ignores stays ignored */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, NULL, &prev_usr1) == 0 &&
        ((prev_usr1.sa_flags & SA_SIGINFO) || prev_usr1.sa_handler != SIG_IGN))
        sigaction(SIGUSR1, &sa, NULL);
}
