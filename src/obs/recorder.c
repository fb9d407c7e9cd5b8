/* recorder.c: what the collectives did, kept and told: the flight recorder (its files: obs.h;
 * the trace: trace.c; the watchdog's thread: watch.c).
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
 * LPMPI_TIMEOUT, where set, raises on the waiting ranks before that (sched/wait.c).
 *
 * Trace (LPMPI_TRACE=dir): each call's record (the ring entry with precise clock reads, and the
 * start time of each phase for a sample of calls: the first 16 on each communicator, then one
 * in 16) appended to a buffer written to dir/trace.<world rank>.bin every LP_TRACE_BUF records
 * and at exit, where lpmpi/trace.py makes it Chrome trace-event JSON.  A killed job loses at
 * most the buffer (LP_TRACE_BUF calls); lpmpi-trace converts what the .bin files hold.  After
 * LPMPI_TRACE_MAX records a rank keeps one call in 100 of each communicator (by sequence
 * number: the same calls on every rank). */
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


/* ------------------------------------------------------------------------------- settings */
lp_fr_ent_t *lp_fr_ring;             /* NULL: the recorder is off (recording: flight.h) */
uint64_t lp_fr_mask;
atomic_ullong lp_fr_next;            /* calls recorded (the next call's gen - 1) */
#define ring lp_fr_ring
#define ring_mask lp_fr_mask
#define ring_next lp_fr_next
static char fr_dir[1024] = "";       /* where dumps go ("" : lpmpi-fr in the working directory) */
double lp_obs_abort_after_s = LP_KNOB_ABORT_TIMEOUT_DEFAULT;   /* LPMPI_ABORT_TIMEOUT (0: off) */
int lp_obs_world_rank = -1, lp_obs_world_size = 0;
int lp_trace_on;                     /* LPMPI_TRACE set: precise clocks, records written */
void (*lp_fr_flush_hook)(void);      /* what a dump flushes after it (trace.c sets it) */
/* the launcher's notices (watch.c counts them as they come) */
atomic_uint lp_fr_notice_count;      /* the launcher's notices seen (lp_fr_notices) */
atomic_llong lp_obs_notice_ns;       /* when the last one came (CLOCK_MONOTONIC) */
long long lp_fr_notice_ns(void) { return atomic_load_explicit(&lp_obs_notice_ns, memory_order_relaxed); }

long long lp_obs_mono_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int lp_fr_configure(long size, const char *dir, double abort_timeout_s) {
    if (size < 0 || size > (1L << 24)) return LP_FAIL(LP_ERR_ARG, "LPMPI_FR_SIZE %ld: 0..16777216", size);
    if (dir) snprintf(fr_dir, sizeof fr_dir, "%s", dir);
    lp_obs_abort_after_s = abort_timeout_s < 0 ? 0 : abort_timeout_s;
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

void lp_fr_comm_add(uint64_t id, int size, int rank, const int *world) {
    if (lp_obs_world_rank < 0) {
        int init = 0;
        MPI_Initialized(&init);
        if (init) {
            MPI_Comm_rank(MPI_COMM_WORLD, &lp_obs_world_rank);
            MPI_Comm_size(MPI_COMM_WORLD, &lp_obs_world_size);
        }
    }
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
/* what a dump says of a peer that is gone (sched/wait.c found it): the last message, and the
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

int lp_obs_mkdirs(const char *path) {
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

int lp_fr_dump(const char *reason, const char *dir, char *path, size_t pathn) {
    char d[1024], tmp[1100], fin[1100];
    if (!dir || !*dir) dir = dump_dir(d, sizeof d);
    if (lp_obs_mkdirs(dir)) return LP_FAIL(LP_ERR_ARG, "flight recorder: cannot create %s: %s", dir, strerror(errno));
    int wr = lp_obs_world_rank >= 0 ? lp_obs_world_rank : 0;
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
    const long long mono = lp_obs_mono_ns(CLOCK_MONOTONIC), real = lp_obs_mono_ns(CLOCK_REALTIME);
    fprintf(f, "{\"format\":\"lpmpi-flight-recorder\",\"version\":1,\"rank\":%d,\"world_size\":%d,"
            "\"pid\":%d,\"host\":", wr, lp_obs_world_size, (int)getpid());
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
                lp_op_name((lp_op_t)e.op), e.root, e.alg_name,
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
    if (lp_fr_flush_hook) lp_fr_flush_hook();   /* the trace's buffered calls too (trace.c: a dump
                                                  is often the last word) */
    return LP_OK;
}
