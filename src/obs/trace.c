/* trace.c: LPMPI_TRACE's records (recorder.c's banner: what a record holds, the sampling, the
 * files lpmpi/trace.py reads), the precise clock's anchors (flight.h), the buffers and the file
 * (files of the recorder: obs.h). */
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

/* ------------------------------------------------------------------------------- the trace */
/* Two buffers of LP_TRACE_BUF records: calls fill one while the watch thread writes the other to
 * the file (so the call that fills a buffer does not pay for the write); without the thread (the
 * recorder off), or with the other buffer still being written, the filling call writes it. */
enum { LP_TRACE_BUF = 4096 };   /* 256 KiB */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;   /* the file (and its first write) */
int lp_obs_wake_fd = -1;             /* the watch thread's pipe (watch.c): a byte 2 wakes it to write */
static void trace_flush(void);
static lp_trace_rec_t tbuf[2][LP_TRACE_BUF];
static int tcur, tn;                 /* the buffer being filled, its records */
/* the other buffer: -1 none; 2 n + b: buffer b's n records wait for the thread; -2: being written */
enum { FULL_NONE = -1, FULL_BUSY = -2 };
static atomic_int full = FULL_NONE;
static int tfd = -1;
static char trace_dir[1024];
static unsigned long long trace_max = LP_KNOB_TRACE_MAX_DEFAULT, traced;

_Atomic(const lp_tsc_anchor_t *) lp_tsc_now;
static lp_tsc_anchor_t anchors[8];   /* rotating: a reader holds one for nanoseconds, they change per buffer */
static int nanchor, tsc_ok = -1;   /* (nanchor: under file_lock) */
static int64_t tsc_first, ns_first;

/* a (TSC, CLOCK_MONOTONIC) pair read close together (the tightest of three) */
static void tsc_pair(int64_t *tsc, int64_t *ns) {
#if defined(__x86_64__)
    int64_t best = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        int64_t a = (int64_t)__rdtsc(), n = lp_obs_mono_ns(CLOCK_MONOTONIC), b = (int64_t)__rdtsc();
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
    if (lp_obs_mkdirs(dir)) return LP_FAIL(LP_ERR_ARG, "LPMPI_TRACE: cannot create %s: %s", dir, strerror(errno));
    snprintf(trace_dir, sizeof trace_dir, "%s", dir);
    if (max_records) trace_max = max_records;
    tsc_anchor();
    lp_fr_flush_hook = trace_flush;
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
        int wr = lp_obs_world_rank >= 0 ? lp_obs_world_rank : 0;
        snprintf(p, sizeof p, "%s/trace.%d.bin", trace_dir, wr);
        tfd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (tfd < 0) {
            lp_trace_on = 0;
            fprintf(stderr, "lpmpi: LPMPI_TRACE: cannot write %s: %s (tracing off)\n", p, strerror(errno));
            pthread_mutex_unlock(&file_lock);
            return;
        }
        lp_trace_hdr_t h = {{'L', 'P', 'M', 'P', 'I', 'T', 'R', '1'}, 2, (int32_t)sizeof(lp_trace_rec_t), wr,
                            lp_obs_world_size, (int32_t)getpid(), 0,
                            lp_obs_mono_ns(CLOCK_REALTIME) - lp_obs_mono_ns(CLOCK_MONOTONIC), {0}};
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
void lp_trace_drain(void) {
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
        if (atomic_load(&full) != FULL_NONE || lp_obs_wake_fd < 0) {
            trace_write(tcur, tn);                       /* no thread, or it is behind: here */
        } else {
            atomic_store(&full, 2 * tn + tcur);
            tcur ^= 1;
            if (write(lp_obs_wake_fd, &two, 1) != 1) lp_trace_drain();   /* (pipe full: here) */
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
        lp_trace_drain();
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
        if (path) snprintf(path, n, "%s/trace.%d.bin", trace_dir, lp_obs_world_rank >= 0 ? lp_obs_world_rank : 0);
    }
    lp_trace_on = 0;
    pthread_mutex_unlock(&file_lock);
    pthread_mutex_unlock(&trace_lock);
    return LP_OK;
}

/* a new anchor for the clock, under the file's lock (the watch thread, now and then) */
void lp_trace_reanchor(void) {
    pthread_mutex_lock(&file_lock);
    tsc_anchor();
    pthread_mutex_unlock(&file_lock);
}
