/* flight.c: what the collectives did, kept and told: the flight recorder, the trace, and the
 * watchdog's thread.
 *
 * Flight recorder (always on unless LPMPI_FR_SIZE=0): a ring of the process's last
 * LPMPI_FR_SIZE calls (default 256), each written by the thread making the call: entered (the
 * communicator being prepared, the ranks agreeing), started (its sequence number on its
 * communicator, the same on every rank; algorithm, chunk, transport; its phase), done or
 * failed.  A call costs a claimed slot (one atomic add), a few stores and coarse clock reads
 * (5 ns each): the monotonic clock's coarse form, whose few milliseconds are what a hang needs.
 * A slot reused by a later call (more than LPMPI_FR_SIZE calls since) is never written by the
 * old call again: each slot carries its call's process-wide number (gen).
 *
 * Dumps (lp_fr_dump: JSON, fr.<world rank>.json in LPMPI_FR_DIR): the ring, oldest first, with
 * what each call still running waits for (the peers of its outstanding transfers, MPI's own
 * collective, a transport's counters: the watchdog's words), the communicators (id, size, this
 * rank, their world ranks) and the clocks.  Written by the watchdog when it fires, by
 * lpmpi.dump_flight_recorder(), and on SIGUSR1: the handler writes one byte into a pipe that
 * the watch thread reads, so that a rank stuck inside MPI (a blocking MPI collective, no lpmpi
 * code running) still dumps.  The dump reads the ring and the running requests without a lock
 * (a stuck rank moves nothing; a live one may show a call one step further than it was).
 *
 * The watch thread (started at the first communicator's context) also is the watchdog of last
 * resort (LPMPI_ABORT_TIMEOUT, default 1800 s): a call entered longer ago than that, and not
 * complete, dumps the recorder, says what it waits for on stderr and aborts the job (MPI_Abort:
 * a hung job ends instead of holding its nodes forever, as torch's NCCL watchdog does).
 * LPMPI_TIMEOUT, where set, raises on the waiting ranks before that (progress.c).
 *
 * Trace (LPMPI_TRACE=dir): each call's record (the ring entry with precise clock reads, and the
 * start time of each phase for a sample of calls: the first 16 on each communicator, then one
 * in 16) appended to a buffer written to dir/trace.<world rank>.bin every LP_TRACE_BUF records
 * and at exit, where lpmpi/trace.py makes it Chrome trace-event JSON.  A killed job loses at
 * most the buffer (LP_TRACE_BUF calls); lpmpi-trace converts what the .bin files hold.  After
 * LPMPI_TRACE_MAX records a rank keeps one call in 100 of each communicator (by sequence
 * number: the same calls on every rank). */
#include "engine.h"
#include "flight.h"
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

/* ------------------------------------------------------------------------------- settings */
lp_fr_ent_t *lp_fr_ring;             /* NULL: the recorder is off (recording: flight.h) */
uint64_t lp_fr_mask;
atomic_ullong lp_fr_next;            /* calls recorded (the next call's gen - 1) */
#define ring lp_fr_ring
#define ring_mask lp_fr_mask
#define ring_next lp_fr_next
static char fr_dir[1024] = "";       /* where dumps go ("" : lpmpi-fr in the working directory) */
static double abort_after_s = 1800;  /* LPMPI_ABORT_TIMEOUT (0: off) */
static int world_rank = -1, world_size = 0;
int lp_trace_on;                     /* LPMPI_TRACE set: precise clocks, records written */

static long long mono_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int lp_fr_configure(long size, const char *dir, double abort_timeout_s) {
    if (size < 0 || size > (1L << 24)) return LP_FAIL(LP_ERR_ARG, "LPMPI_FR_SIZE %ld: 0..16777216", size);
    if (dir) snprintf(fr_dir, sizeof fr_dir, "%s", dir);
    abort_after_s = abort_timeout_s < 0 ? 0 : abort_timeout_s;
    uint64_t n = 1;
    while (n < (uint64_t)size) n <<= 1;
    if (!size) n = 0;
    if ((ring ? ring_mask + 1 : 0) == n) return LP_OK;
    lp_fr_ent_t *r = n ? calloc(n, sizeof *r) : NULL;
    if (n && !r) return LP_FAIL(LP_ERR_NOMEM, "out of memory for a flight recorder of %ld calls", size);
    ring = NULL;                     /* (configured at import, before any call: nothing is lost) */
    ring_mask = n ? n - 1 : 0;
    ring = r;
    return LP_OK;
}

/* ------------------------------------------------------------------------------- waiting */
/* what running request r waits for, in words (the watchdog's message and the dumps); peers:
 * the ranks (of its communicator) of its outstanding point-to-point transfers, up to maxp */
int lp_req_waiting(const lp_req_t *r, char *what, size_t n, int *peers, int maxp) {
    char list[512] = "";
    size_t m = 0;
    int np = 0, native = 0, devw = r->dev_inflight != 0;
    const char *xwait = NULL;
    for (const lp_lane_t *l = r->lane, *end = r->lane + r->nlanes; l < end; l++) {
        if (l->done == l->n) continue;
        if (l->kind == LP_STEP_NATIVE) native = 1;
        else if (l->kind == LP_STEP_XPORT && l->xp && l->xp->waits_for) xwait = l->xp->waits_for;
        else if ((l->kind == LP_STEP_SEND || l->kind == LP_STEP_RECV) && l->issued > l->done && l->peer >= 0) {
            int seen = 0;
            for (int i = 0; i < np && !seen; i++) seen = peers[i] == l->peer;
            if (seen || np >= maxp) continue;
            peers[np++] = l->peer;
            const lp_ctx_t *c = r->ctx;
            const char *host = c && c->hosts && l->peer < c->size ? c->hosts + (size_t)l->peer * LP_HOST_LEN : NULL;
            if (m < sizeof list)
                m += (size_t)snprintf(list + m, sizeof list - m, host ? "%s%d (on %s)" : "%s%d",
                                      m ? ", " : "", l->peer, host);
        }
    }
    if (np) snprintf(what, n, "waiting for rank(s) %s", list);
    else if (native) snprintf(what, n, "waiting inside MPI's own collective (every rank must enter it)");
    else if (xwait) snprintf(what, n, "waiting for %s", xwait);
    else if (devw) snprintf(what, n, "waiting for device work");
    else if (r->turn_wait) snprintf(what, n, "waiting for an earlier request's MPI collective");
    else snprintf(what, n, "waiting for its peers");
    return np;
}

/* ------------------------------------------------------------------------------- communicators */
/* the communicators calls were made on (their ids, sizes, this rank, world ranks): a dump names
 * them; kept after their contexts go (a dump may show calls on them) */
typedef struct { uint64_t id; int size, rank; int *world; } fr_comm_t;
static fr_comm_t *comms;
static int ncomms, comms_cap;
static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;
enum { FR_COMMS_MAX = 4096 };        /* the oldest forgotten past this */

static void arm(void);

void lp_fr_comm_add(uint64_t id, int size, int rank, const int *world) {
    if (world_rank < 0) {
        int init = 0;
        MPI_Initialized(&init);
        if (init) {
            MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
            MPI_Comm_size(MPI_COMM_WORLD, &world_size);
        }
    }
    arm();
    int *w = world ? malloc((size_t)size * sizeof *w) : NULL;
    if (w) memcpy(w, world, (size_t)size * sizeof *w);
    pthread_mutex_lock(&comms_lock);
    if (ncomms == FR_COMMS_MAX) {
        free(comms[0].world);
        memmove(comms, comms + 1, (size_t)(ncomms - 1) * sizeof *comms);
        ncomms--;
    }
    if (ncomms == comms_cap) {
        int cap = comms_cap ? 2 * comms_cap : 16;
        fr_comm_t *c = realloc(comms, (size_t)cap * sizeof *c);
        if (!c) {
            pthread_mutex_unlock(&comms_lock);
            free(w);
            return;
        }
        comms = c;
        comms_cap = cap;
    }
    comms[ncomms++] = (fr_comm_t){id, size, rank, w};
    pthread_mutex_unlock(&comms_lock);
}

/* ------------------------------------------------------------------------------- a peer gone */
/* what a dump says of a peer that is gone (progress.c found it): the last message, and the
 * world ranks named so far */
enum { LOST_MAX = 64 };
static char lost_msg[600];
static int lost_world[LOST_MAX], nlost;
static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;

void lp_fr_lost(const char *msg, const int *wr, int n) {
    pthread_mutex_lock(&lost_lock);
    snprintf(lost_msg, sizeof lost_msg, "%s", msg);
    for (int k = 0; k < n; k++) {
        int seen = wr[k] < 0;
        for (int i = 0; i < nlost && !seen; i++) seen = lost_world[i] == wr[k];
        if (!seen && nlost < LOST_MAX) lost_world[nlost++] = wr[k];
    }
    pthread_mutex_unlock(&lost_lock);
}

/* ------------------------------------------------------------------------------- dumps */
static const char *state_name(int s) {
    static const char *n[] = {"entered", "started", "done", "failed"};
    return s >= 0 && s < 4 ? n[s] : "?";
}
static const char *form_name(int f) {
    static const char *n[] = {"blocking", "nonblocking", "persistent"};
    return f >= 0 && f < 3 ? n[f] : "?";
}
static const char *tp_name(int t) {
    static const char *n[] = {"", "mpi", "shm", "cma"};
    return t >= 0 && t < 4 ? n[t] : "";
}

/* a JSON string of s (quotes, backslashes and control characters escaped) */
static void jstr(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void tnum(FILE *f, const char *key, long long t) {
    if (t) fprintf(f, ",\"%s\":%lld", key, t);
    else fprintf(f, ",\"%s\":null", key);
}

static const char *dump_dir(char *buf, size_t n) {
    snprintf(buf, n, "%s", fr_dir[0] ? fr_dir : "lpmpi-fr");
    return buf;
}

static int mkdirs(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
}

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static void trace_flush(void);
static void trace_drain(void);
static void tsc_anchor(void);
static pthread_mutex_t file_lock;    /* (defined with the trace, below) */

int lp_fr_dump(const char *reason, const char *dir, char *path, size_t pathn) {
    char d[1024], tmp[1100], fin[1100];
    if (!dir || !*dir) dir = dump_dir(d, sizeof d);
    if (mkdirs(dir)) return LP_FAIL(LP_ERR_ARG, "flight recorder: cannot create %s: %s", dir, strerror(errno));
    int wr = world_rank >= 0 ? world_rank : 0;
    snprintf(fin, sizeof fin, "%s/fr.%d.json", dir, wr);
    snprintf(tmp, sizeof tmp, "%s/.fr.%d.json.%d", dir, wr, (int)getpid());
    pthread_mutex_lock(&dump_lock);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        pthread_mutex_unlock(&dump_lock);
        return LP_FAIL(LP_ERR_ARG, "flight recorder: cannot write %s: %s", tmp, strerror(errno));
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const long long mono = mono_ns(CLOCK_MONOTONIC), real = mono_ns(CLOCK_REALTIME);
    fprintf(f, "{\"format\":\"lpmpi-flight-recorder\",\"version\":1,\"rank\":%d,\"world_size\":%d,"
            "\"pid\":%d,\"host\":", wr, world_size, (int)getpid());
    jstr(f, host);
    fprintf(f, ",\"reason\":");
    jstr(f, reason ? reason : "");
    pthread_mutex_lock(&lost_lock);
    if (nlost || lost_msg[0]) {            /* a peer found gone: the dead ranks (world), the words */
        fprintf(f, ",\"dead_ranks\":[");
        for (int i = 0; i < nlost; i++) fprintf(f, "%s%d", i ? "," : "", lost_world[i]);
        fprintf(f, "],\"dead\":");
        jstr(f, lost_msg);
    }
    pthread_mutex_unlock(&lost_lock);
    const unsigned nn = lp_fr_notices();
    if (nn) fprintf(f, ",\"notices\":%u,\"notice_mono_ns\":%lld", nn, lp_fr_notice_ns());
    fprintf(f, ",\"mono_ns\":%lld,\"unix_ns\":%lld,\"size\":%llu,\"calls\":%llu,\n\"comms\":[", mono, real,
            (unsigned long long)(ring ? ring_mask + 1 : 0), (unsigned long long)atomic_load(&ring_next));
    pthread_mutex_lock(&comms_lock);
    for (int i = 0; i < ncomms; i++) {
        const fr_comm_t *c = &comms[i];
        fprintf(f, "%s\n{\"id\":%llu,\"size\":%d,\"rank\":%d,\"world_ranks\":[", i ? "," : "",
                (unsigned long long)c->id, c->size, c->rank);
        for (int j = 0; c->world && j < c->size; j++) fprintf(f, "%s%d", j ? "," : "", c->world[j]);
        fprintf(f, "]}");
    }
    pthread_mutex_unlock(&comms_lock);
    fprintf(f, "],\n\"entries\":[");
    uint64_t last = atomic_load(&ring_next), n = ring ? ring_mask + 1 : 0;
    int first = 1;
    for (uint64_t g = last > n ? last - n + 1 : 1; ring && g <= last; g++) {
        lp_fr_ent_t e = ring[(g - 1) & ring_mask];       /* a copy: the owner may move on */
        if (atomic_load(&e.gen) != g) continue;
        const lp_req_t *live = e.req;    /* a running call: its request's phase now */
        const int running = e.state == LP_FR_STARTED && live && live->fr == g && live->state == LP_REQ_ACTIVE;
        if (running) e.phase = live->phase;
        fprintf(f, "%s\n{\"gen\":%llu,\"comm\":%llu,\"seq\":%llu,\"collective\":\"%s\",\"form\":\"%s\","
                "\"state\":\"%s\",\"count\":%llu,\"bytes\":%llu,\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,"
                "\"algorithm\":\"%s\",\"chunk\":%llu,\"transport\":\"%s\",\"compression\":\"%s\",\"phase\":%d,"
                "\"phases\":%d,\"rc\":%d",
                first ? "" : ",", (unsigned long long)g, (unsigned long long)e.comm, (unsigned long long)e.seq,
                lp_coll_name((lp_coll_t)e.coll), form_name(e.form), state_name(e.state),
                (unsigned long long)e.count, (unsigned long long)e.bytes, lp_dtype_name((lp_dtype_t)e.dt),
                lp_op_name((lp_op_t)e.op), e.root, e.alg >= 0 ? lp_algo_name(e.alg) : "",
                (unsigned long long)e.chunk, tp_name(e.tp), lp_cz_name(e.comp), e.phase, e.nphases, e.rc);
        first = 0;
        tnum(f, "t_enter", e.t_enter);
        tnum(f, "t_start", e.t_start);
        tnum(f, "t_end", e.t_end);
        const lp_req_t *r = live;
        if (running) {
            char what[700];
            int peers[64], np = lp_req_waiting(r, what, sizeof what, peers, 64);
            fprintf(f, ",\"waiting\":");
            jstr(f, what);
            fprintf(f, ",\"peers\":[");
            for (int i = 0; i < np; i++) fprintf(f, "%s%d", i ? "," : "", peers[i]);
            fprintf(f, "]");
        } else if (e.state == LP_FR_ENTERED) {
            fprintf(f, ",\"waiting\":\"%s\"", e.comm ? "the ranks' agreement before the call (LPMPI_CHECK, the "
                    "tuner) or a free range of tags" : "the communicator's preparation (its first lpmpi call: "
                    "every rank must enter it)");
        }
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (!bad) bad = rename(tmp, fin) != 0;
    else unlink(tmp);
    pthread_mutex_unlock(&dump_lock);
    if (bad) return LP_FAIL(LP_ERR_ARG, "flight recorder: cannot write %s", fin);
    if (path) snprintf(path, pathn, "%s", fin);
    trace_flush();                 /* the trace's buffered calls too (a dump is often the last word) */
    return LP_OK;
}

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
atomic_uint lp_fr_notice_count;      /* the launcher's notices seen (lp_fr_notices) */
static atomic_llong notice_ns;       /* when the last one came (CLOCK_MONOTONIC) */
long long lp_fr_notice_ns(void) { return atomic_load_explicit(&notice_ns, memory_order_relaxed); }

static void on_usr1(int sig, siginfo_t *info, void *uctx) {
    int e = errno;
    char b = info && info->si_code == SI_USER && launcher && info->si_pid == launcher ? SIG_NOTICE : SIG_USER;
    if (b == SIG_NOTICE) {
        atomic_store_explicit(&notice_ns, mono_ns(CLOCK_MONOTONIC), memory_order_relaxed);
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
    if (!ring) return 0;
    const long long now = mono_ns(CLOCK_MONOTONIC_COARSE);
    uint64_t last = atomic_load(&ring_next), n = ring_mask + 1;
    for (uint64_t g = last > n ? last - n + 1 : 1; g <= last; g++) {
        lp_fr_ent_t *e = &ring[(g - 1) & ring_mask];
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
 * the recorder dumped: better than hanging forever.  lpmpi's own waits raise (progress.c). */
static const long long STUCK_GRACE_NS = 8000000000LL;
enum { STUCK_SLOTS = 64 };
static struct { unsigned long seq; long long seen; } stuck[STUCK_SLOTS];

static void stuck_check(void) {
    const long long since = lp_fr_notice_ns(), now = mono_ns(CLOCK_MONOTONIC);
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
        int drc = ring ? lp_fr_dump("a peer is gone while this rank is inside MPI", NULL, path, sizeof path) : -1;
        fprintf(stderr, "lpmpi: rank %d: %s while this rank is inside %s%s, which cannot return; %s%s; "
                "ending this process (exit status 3)\n", world_rank, msg, where, call,
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
        int ms = abort_after_s > 0 ? (int)(abort_after_s * 1000 / 8) : -1;
        if (ms > 5000) ms = 5000;
        if (ms >= 0 && ms < 50) ms = 50;
        if (lp_trace_on && (ms < 0 || ms > 500)) ms = 500;   /* the trace's clock: a new anchor */
        if (lp_fr_notices() && (ms < 0 || ms > 200)) ms = 200;  /* after a notice: calls stuck in MPI */
        if (lp_trace_on) {
            pthread_mutex_lock(&file_lock);
            tsc_anchor();
            pthread_mutex_unlock(&file_lock);
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
            trace_drain();                                /* (2: a trace buffer is full) */
            char path[1100] = "";
            if (usr1 && ring && lp_fr_dump("SIGUSR1", NULL, path, sizeof path) == LP_OK)
                fprintf(stderr, "lpmpi: rank %d: flight recorder written to %s (SIGUSR1)\n", world_rank, path);
            else if (notice) {                            /* quietly: see on_usr1 */
                if (atomic_load(&lp_wake_ok)) lp_wake_waiters();   /* threads blocked in MPI_Waitsome */
                if (ring)
                    (void)lp_fr_dump("the launcher's notice (SIGUSR1): a process of the job ended", NULL, path,
                                     sizeof path);
            }
            if (lp_fr_notices()) stuck_check();
            continue;
        }
        if (lp_fr_notices()) stuck_check();
        lp_fr_ent_t e;
        if (abort_after_s <= 0 || !overdue_call((long long)(abort_after_s * 1e9), &e)) continue;
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
                "LPMPI_TIMEOUT=seconds raises on the waiting ranks instead)\n", world_rank,
                lp_coll_name((lp_coll_t)e.coll), (unsigned long long)e.seq, (unsigned long long)e.bytes,
                (unsigned long long)e.comm, abort_after_s, what,
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
static void arm(void) {
    if (atomic_exchange(&armed, 1)) return;
    if (pipe(sig_pipe)) return;       /* (with the recorder off too: the launcher's notices) */
    for (int i = 0; i < 2; i++) fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
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

/* ------------------------------------------------------------------------------- the trace */
/* Two buffers of LP_TRACE_BUF records: calls fill one while the watch thread writes the other to
 * the file (so the call that fills a buffer does not pay for the write); without the thread (the
 * recorder off), or with the other buffer still being written, the filling call writes it. */
enum { LP_TRACE_BUF = 4096 };   /* 256 KiB */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;   /* the file (and its first write) */
static lp_trace_rec_t tbuf[2][LP_TRACE_BUF];
static int tcur, tn;                 /* the buffer being filled, its records */
/* the other buffer: -1 none; 2 n + b: buffer b's n records wait for the thread; -2: being written */
enum { FULL_NONE = -1, FULL_BUSY = -2 };
static atomic_int full = FULL_NONE;
static int tfd = -1;
static char trace_dir[1024];
static unsigned long long trace_max = 100000, traced;

_Atomic(const lp_tsc_anchor_t *) lp_tsc_now;
static lp_tsc_anchor_t anchors[8];   /* rotating: a reader holds one for nanoseconds, they change per buffer */
static int nanchor, tsc_ok = -1;   /* (nanchor: under file_lock) */
static int64_t tsc_first, ns_first;

/* a (TSC, CLOCK_MONOTONIC) pair read close together (the tightest of three) */
static void tsc_pair(int64_t *tsc, int64_t *ns) {
#if defined(__x86_64__)
    int64_t best = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        int64_t a = (int64_t)__rdtsc(), n = mono_ns(CLOCK_MONOTONIC), b = (int64_t)__rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
#else
    *tsc = *ns = 0;
#endif
}

/* a new anchor for the trace's clock (the trace begins; each buffer it writes; the watch thread
 * every 0.5 s): the first one waits 30 ms for a first rate */
static void tsc_anchor(void) {
#if defined(__x86_64__)
    if (tsc_ok < 0) {               /* invariant TSC? (/proc/cpuinfo's flags) */
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[8192];
        tsc_ok = 0;
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5)) {
                tsc_ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
                break;
            }
        if (f) fclose(f);
        if (!tsc_ok) return;
        tsc_pair(&tsc_first, &ns_first);
        struct timespec nap = {0, 30000000};        /* (the rate's error: ~1e-6, and falling) */
        nanosleep(&nap, NULL);
    }
    if (!tsc_ok) return;
    int64_t t = 0, n = 0;
    tsc_pair(&t, &n);
    if (t <= tsc_first || n <= ns_first) return;
    lp_tsc_anchor_t *a = &anchors[nanchor++ % 8];
    a->tsc0 = t;
    a->ns0 = n;
    a->mult = (uint64_t)((double)(n - ns_first) / (double)(t - tsc_first) * 4294967296.0);
    atomic_store_explicit(&lp_tsc_now, a, memory_order_release);
#endif
}

int lp_trace_configure(const char *dir, unsigned long long max_records) {
    if (!dir || !*dir) {
        lp_trace_on = 0;
        return LP_OK;
    }
    if (mkdirs(dir)) return LP_FAIL(LP_ERR_ARG, "LPMPI_TRACE: cannot create %s: %s", dir, strerror(errno));
    snprintf(trace_dir, sizeof trace_dir, "%s", dir);
    if (max_records) trace_max = max_records;
    tsc_anchor();
    lp_trace_on = 1;
    return LP_OK;
}

/* write n records of buffer b to the file (opened with its header on the first write); a new
 * anchor for the clock */
static void trace_write(int b, int n) {
    pthread_mutex_lock(&file_lock);
    tsc_anchor();
    if (tfd < 0 && n) {
        char p[1100];
        int wr = world_rank >= 0 ? world_rank : 0;
        snprintf(p, sizeof p, "%s/trace.%d.bin", trace_dir, wr);
        tfd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (tfd < 0) {
            lp_trace_on = 0;
            fprintf(stderr, "lpmpi: LPMPI_TRACE: cannot write %s: %s (tracing off)\n", p, strerror(errno));
            pthread_mutex_unlock(&file_lock);
            return;
        }
        lp_trace_hdr_t h = {{'L', 'P', 'M', 'P', 'I', 'T', 'R', '1'}, 2, (int32_t)sizeof(lp_trace_rec_t), wr,
                            world_size, (int32_t)getpid(), 0,
                            mono_ns(CLOCK_REALTIME) - mono_ns(CLOCK_MONOTONIC), {0}};
        gethostname(h.host, sizeof h.host - 1);
        if (write(tfd, &h, sizeof h) != (ssize_t)sizeof h) n = 0;
    }
    size_t left = (size_t)n * sizeof(lp_trace_rec_t);
    const char *p = (const char *)tbuf[b];
    while (left && tfd >= 0) {
        ssize_t k = write(tfd, p, left);
        if (k <= 0) break;
        p += k;
        left -= (size_t)k;
    }
    pthread_mutex_unlock(&file_lock);
}

/* the full buffer, if one waits: claimed, written, let go (the watch thread; trace_flush) */
static void trace_drain(void) {
    int f = atomic_load(&full);
    if (f < 0 || !atomic_compare_exchange_strong(&full, &f, FULL_BUSY)) return;
    trace_write(f & 1, f >> 1);
    atomic_store(&full, FULL_NONE);
}

static inline uint32_t u32sat(int64_t x) { return x < 0 ? 0 : x > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)x; }

/* (trace_lock held) the next record's place; a full buffer goes to the watch thread (or, with
 * none or it behind, is written here) */
static lp_trace_rec_t *trace_slot(void) {
    if (tn == LP_TRACE_BUF) {
        char two = 2;
        if (atomic_load(&full) != FULL_NONE || sig_pipe[1] < 0) {
            trace_write(tcur, tn);                       /* no thread, or it is behind: here */
        } else {
            atomic_store(&full, 2 * tn + tcur);
            tcur ^= 1;
            if (write(sig_pipe[1], &two, 1) != 1) trace_drain();   /* (pipe full: here) */
        }
        tn = 0;
    }
    return &tbuf[tcur][tn++];
}

void lp_trace_put(const lp_fr_ent_t *e) {
    if (traced >= trace_max && e->seq % 100) return;     /* (the same calls on every rank) */
    pthread_mutex_lock(&trace_lock);
    lp_trace_rec_t *t = trace_slot();
    t->comm = e->comm;
    t->seq = e->seq;
    t->t_enter = e->t_enter;
    t->t_end = e->t_end;
    t->bytes = e->bytes;
    t->chunk = u32sat((int64_t)e->chunk);
    t->start_off = u32sat(e->t_start - e->t_enter);
    t->coll = (uint8_t)e->coll;
    t->dt = (uint8_t)e->dt;
    t->op = (uint8_t)e->op;
    t->alg = (uint8_t)e->alg;
    t->tp = (uint8_t)e->tp;
    t->form = (uint8_t)e->form;
    t->flags = (uint8_t)((traced++ >= trace_max ? LP_TRACE_SAMPLED : 0) | e->comp << LP_TRACE_COMP_SHIFT);
    t->nphases = (uint8_t)e->nphases;
    t->root = e->root;
    t->rc = e->rc;
    if (e->t_phase[0]) {             /* a call whose phases were timed */
        lp_trace_phases_t *p = (lp_trace_phases_t *)trace_slot();
        memset(p, 0, sizeof *p);
        p->comm = e->comm;
        p->seq = e->seq;
        p->t_phase0 = e->t_phase[0];
        for (int i = 1; i < LP_FR_PHASES; i++)
            p->off[i - 1] = e->t_phase[i] ? u32sat(e->t_phase[i] - e->t_phase[0]) : 0;
        p->flags = LP_TRACE_PHASES;
        p->nphases = (uint8_t)e->nphases;
    }
    pthread_mutex_unlock(&trace_lock);
}

static void trace_flush(void) {
    if (!lp_trace_on) return;
    pthread_mutex_lock(&trace_lock);
    while (atomic_load(&full) != FULL_NONE) {       /* the other buffer first (the file's order) */
        trace_drain();
        if (atomic_load(&full) == FULL_BUSY) sched_yield();
    }
    if (tn) trace_write(tcur, tn);
    tn = 0;
    pthread_mutex_unlock(&trace_lock);
}

/* the trace's last records written and its file closed (at exit); the path of the file, "" if none */
int lp_trace_close(char *path, size_t n) {
    if (path && n) path[0] = 0;
    if (!lp_trace_on) return LP_OK;
    trace_flush();
    pthread_mutex_lock(&trace_lock);
    pthread_mutex_lock(&file_lock);
    if (tfd >= 0) {
        close(tfd);
        tfd = -1;
        if (path) snprintf(path, n, "%s/trace.%d.bin", trace_dir, world_rank >= 0 ? world_rank : 0);
    }
    lp_trace_on = 0;
    pthread_mutex_unlock(&file_lock);
    pthread_mutex_unlock(&trace_lock);
    return LP_OK;
}
