/* autotune.c: "auto" that tunes itself while the program runs (LPMPI_AUTOTUNE=1), and the one
 * measurement-and-decision core the offline tuner (lpmpi.tune, through lpmpi.bench's harness)
 * shares with it: a configuration's time is the median over calls of the slowest rank's time
 * (lp_tune_median), a configuration is pruned when that is more than a factor slower than the
 * best so far (lp_tune_pruned), and the choice is the fastest, the preferred one (MPI's own)
 * where it is within a tie (lp_tune_decide).
 *
 * Online, per key (communicator, collective, size class, dtype size, memory kind, acc_dtype, nodes; blocking
 * calls), the blocking calls of "auto":
 *
 *   explore   a few candidates (the static decision: table row or model; MPI's own; the model's
 *             next best algorithms; the static choice's chunk x2 and /2 and its other node-local
 *             transports) in rounds of blocks of consecutive calls (A A A B B B ...: 3, 3, then 4
 *             a candidate, each block's first call, the switch, apart).  After each round
 *             every rank has the same numbers: the per-call times of the round, reduced with
 *             one MPI_MAX (an MPI_Iallreduce on a private duplicate of the communicator, issued
 *             right after the round's last call, waited for at the key's next call).  A
 *             candidate's first call is its warm-up (a plan, the first use of a transport or of
 *             the MPI library's algorithm: Intel MPI's took 30 us where its later calls take 4):
 *             its time never decides.  The candidates slower than the best by the round's
 *             factor are dropped: 3x after the first round (two samples each, AT_K0; MPI's own
 *             is never dropped there), 1.5x and 1.2x later, on AT_KMIN samples at least, and MPI's own
 *             never on fewer samples than the leader has;
 *             after the third round the leader's untried neighbours (chunk x2, /2, its other
 *             transports) join it for rounds 2 and 3 again (twice at most: a hill climb); then
 *             the finalists (the leader, MPI's own, the runner-up) run in blocks of AT_BLOCK
 *             consecutive calls, as the program will run its choice, and the medians of the
 *             blocks' second halves (the switch can last several calls) decide: lp_tune_decide's choice, MPI's own within
 *             a tie.  Rounds and blocks together: 64 calls at most.
 *   settled   the choice runs; its per-call times are agreed the same way once per window
 *             (window: about 100 us of calls, doubling while the windows agree with the
 *             reference up to 1 ms, 16..256 calls; at 1 ms one call in AT_STRIDE is timed, the
 *             others run the choice untimed), the reduction waited for one window
 *             later (off the critical path).  The first settled window's median is the
 *             reference (exploring calls switch plans from call to call: their times are no
 *             reference for a choice that runs alone); a window whose median is more than
 *             DRIFT slower or faster than it, three times in a row, re-explores: the previous
 *             winners, MPI's own and the static choice.
 *   learned   a key whose static decision is a row the tuner learned in an earlier run
 *             (LPMPI_AUTOTUNE_FILE, by default the per-machine cache: lpmpi/autotune.py) starts
 *             settled on it, the time it measured then the reference: no exploration; three
 *             windows 1.25x slower or faster than that re-explore, as above.
 *
 * Every rank takes the same decision at the same call of a key: the call counts are equal on
 * every rank (MPI orders collectives per communicator), and every decision reads only the
 * reduced numbers.  A candidate that failed on any rank (its time is FAILED after the MAX) is
 * never tried again.  Nonblocking calls are a key's calls as the blocking ones are (explored,
 * settled, timed): a call's time runs from its start to its end as the engine sees it (the
 * program's wait or test that completes it, or the progress thread), what the program waits
 * for; a window whose last call is nonblocking is agreed at the key's next call (every rank
 * there in program order), a call not ended by then on some rank counting as no sample.
 * Persistent requests take the key's settled choice at each start, else the static one. */
#include "engine.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int lp_autotune;                           /* LPMPI_AUTOTUNE */

/* ------------------------------------------------------------------ the shared core */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double lp_tune_median(const double *x, size_t n) {
    if (!n) return NAN;
    double stack[64], *v = n <= 64 ? stack : malloc(n * sizeof *v);
    if (!v) return NAN;
    memcpy(v, x, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    if (v != stack) free(v);
    return m;
}

/* the lower median (n even: the lower middle; of two samples, the smaller): what the rounds rank
 * and cut by.  A candidate's next calls after its first can still run slow (ring over shm at
 * 256 KiB on the AMD EPYC: 1-4 ms, then 150-220 us, then 25-30 us; over CMA 120-175, 70-80,
 * 55-64, then 33): noise that only ever adds, which the mean of two samples carried into the
 * ranking (ring over shm ranked 81 us where it runs 25) */
static double lower_median(const double *x, size_t n) {
    if (n < 2 || n % 2) return lp_tune_median(x, n);
    double v[16];                   /* (a candidate keeps AT_KEEP = 16 samples) */
    size_t m = n < 16 ? n : 16;
    memcpy(v, x, m * sizeof *v);
    qsort(v, m, sizeof *v, cmp_double);
    return v[m / 2 - 1];
}

int lp_tune_pruned(double t, double best, double factor) { return t > best * factor; }

int lp_tune_decide(const double *t, int n, int prefer, double tie) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(t[i]) && (best < 0 || t[i] < t[best])) best = i;
    if (best >= 0 && prefer >= 0 && prefer < n && !isnan(t[prefer]) && t[prefer] <= t[best] * (1 + tie))
        best = prefer;
    return best;
}

/* ------------------------------------------------------------------ online */
#define AT_MAXC LP_AT_MAXC
#define AT_WIN 256         /* calls per window at most */
#define AT_KEEP 16         /* samples kept per candidate */
#define MISSING 1e200      /* a slot with no time (dropped after the MAX) */
#define FAILED 1e300       /* a call that failed on some rank */
static const double round_factor[] = {3.0, 1.5, 1.2};   /* drop past this x the best, per round */
static const int round_reps[] = {3, 3, 4};               /* calls per candidate, per round: a block
                                                          (its first call, the switch, apart) */
#define AT_K0 2             /* samples a candidate has before the first round's 3x cut may drop it:
                               one sample alone dropped the best (issue 50, AMD EPYC, Intel MPI,
                               64 MiB: ring over shm's one sample 47.7 ms in a launch's first calls,
                               where it then takes 7.5; settled 2.08x the grid's best) */
#define NROUNDS 3
#define AT_KMIN 3           /* samples a candidate has before the 1.5x and 1.2x cuts may drop it;
                               a first call's time (Intel MPI's first use of its algorithm: 30 us
                               where it then takes 4) never counts (issue 50) */
#define AT_REFINES 2        /* neighbour rounds around the leader before settling */
#define AT_FIRST 10         /* candidates of the first round at most */
#define AT_FINALS 3         /* finalists confirmed in blocks: the leader, MPI's own, the runner-up */
#define AT_BLOCK 6          /* consecutive calls of a finalist in the confirmation (its first half apart) */
#define AT_BUDGET (64 - AT_FINALS * AT_BLOCK)   /* calls of the rounds at most: settled within 64 */
#define DRIFT 1.25          /* a settled window this much slower (or faster) than the reference */
#define DRIFT_WINDOWS 3     /* in a row: re-explore (2 re-explored on this VM's noise alone) */
#define LEARNED_DRIFT 4.0   /* a learned row's time against this run's first window: further off
                               re-explores (across runs the program's pattern of calls differs: a
                               size run after other sizes' calls runs colder than alone; at DRIFT
                               a row learned alone re-explored in a run that mixes sizes) */
#define AT_SPAN_MIN 100e-6 /* a settled window: about this much of calls at first, after a window
                               off the reference, or a drift; doubling per quiet window up to */
#define AT_SPAN_MAX 1e-3   /* (the reduction's cost spread over up to AT_WIN calls: issue 50) */
#define AT_STRIDE 4        /* then one call in this many is timed: two clock reads a call cost ~3% at 8 B */
#define TIE 0.03            /* within this of MPI's own: MPI's own (lpmpi.tune's TIE) */

enum { AT_EXPLORE = 0, AT_SETTLED = 1 };

#define W_NS_BITS LP_AT_NS_BITS
#define W_NS_MASK LP_AT_NS_MASK
#define W_GEN_MASK 0xFFFFFFu
#define W_PENDING LP_AT_PENDING
#define W_FAILED LP_AT_FAILED
#define W_MISSING LP_AT_MISSING
#define wword lp_at_word

typedef struct lp_at_key {
    struct lp_at_key *next;   /* every key of the process (the report) */
    struct lp_at_key *ctx_next;    /* its communicator's keys */
    lp_ctx_t *ctx;            /* NULL once its communicator is freed */
    lp_at_info_t info;        /* what the report shows (the key, the state, counters) */
    double ts[AT_MAXC][AT_KEEP];   /* agreed times per candidate (the last AT_KEEP) */
    int nts[AT_MAXC];
    int failed[AT_MAXC];
    int warm[AT_MAXC];             /* its first call (plan, first use of a transport or of the MPI
                                      library's algorithm) ran: that call's time never decides */
    int prev[AT_MAXC], nprev;      /* earlier winners (re-exploration tries them first) */
    /* the window: slots in call order, each a candidate and this rank's time */
    int wlen, wn, wc[AT_WIN];
    /* each slot's word: the window's generation (high 24 bits) and this rank's time in ns (low
     * 40 bits; W_PENDING while its call runs).  A nonblocking call's completion writes it from
     * whichever thread sees it end (engine.h lp_at_slot_end), only while the slot still holds its
     * generation's W_PENDING: a late completion never writes into a later window */
    _Atomic uint64_t ws[AT_WIN];
    unsigned wgen;
    int due;                  /* the window's last call was nonblocking: its times go at the key's next call */
    /* the reduction of the last window, in flight */
    double snd[AT_WIN], rcv[AT_WIN];
    int rc_[AT_WIN], nred, pending;
    long apply_at;            /* the key's call count at which it is waited for and applied */
    MPI_Request q;
    int round, hi, lo, refines;
    int fin[AT_FINALS], nfin;      /* confirming (nfin > 0): the finalists, in blocks */
    int cap;                  /* candidates it may hold now (AT_FIRST at first, AT_MAXC with refines) */
    long ecalls;              /* calls of this exploration (AT_BUDGET at most) */
    double ref;               /* settled: the reference time */
    double learned_ref;       /* a learned key: its row's time, checked against the first window */
    long xseq;                /* ctx->at_seq at its last exploring call */
    long wseq, red_wseq;      /* ctx->at_seq when its window began; the reduced window's */
    double span;              /* settled: the seconds of calls a window aims at (AT_SPAN_MIN..MAX) */
    int stride, skip;         /* settled: one call in `stride` timed (AT_STRIDE once span is AT_SPAN_MAX) */
} lp_at_key_t;

static pthread_mutex_t klock = PTHREAD_MUTEX_INITIALIZER;
static lp_at_key_t *keys;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the size class of a key's bytes: [2^k, 1.5 2^k) and [1.5 2^k, 2^(k+1)) */
static int size_class(size_t b, double *lo, double *hi) {
    int k = 0;
    while (k < 62 && ((size_t)1 << (k + 1)) <= b) k++;
    double base = ldexp(1.0, k), mid = 1.5 * base;
    int upper = b > 0 && (double)b >= mid;
    if (lo) *lo = b == 0 ? 0 : upper ? mid : base;
    if (hi) *hi = b == 0 ? 1 : upper ? 2 * base : mid;
    return b == 0 ? -1 : 2 * k + upper;
}

static int same_cand(const lp_at_cand_t *a, const lp_at_cand_t *b) {
    return a->alg == b->alg && a->chunk == b->chunk && a->transport == b->transport;
}

/* the transport a candidate effectively runs (LP_TP_*; 0 where the algorithm has none here) */
static int eff_transport(const lp_ctx_t *ctx, int alg, size_t nbytes, int tp) {
    const lp_algo_t *A = &lp_algos[alg];
    int shm = ctx->shm != NULL && A->shm, cma = ctx->pids != NULL && A->cma;
    if (!shm && !cma) return 0;
    return lp_tp_of_ring(lp_ring_transport(shm, cma, nbytes, tp));
}

static void add_cand(lp_at_key_t *k, const lp_ctx_t *ctx, int alg, size_t chunk, int tp) {
    lp_at_info_t *I = &k->info;
    if (I->ncand >= k->cap || alg < 0 || alg >= lp_nalgos || (int)lp_algos[alg].coll != I->coll) return;
    lp_at_cand_t c = {.alg = alg, .chunk = lp_algos[alg].chunked ? chunk : 0,
                      .transport = eff_transport(ctx, alg, (size_t)I->nbytes, tp)};
    if (c.chunk > lp_max_msg_bytes) c.chunk = lp_max_msg_bytes;
    if (lp_algos[alg].chunked && c.chunk < 64) return;
    for (int i = 0; i < I->ncand; i++)
        if (same_cand(&I->cand[i], &c)) return;
    I->cand[I->ncand++] = c;
}

static int native_alg(lp_coll_t coll) {
    for (int i = 0; i < lp_nalgos; i++)
        if (lp_algos[i].coll == coll && lp_algos[i].sched == &lp_sched_native) return i;
    return -1;
}

/* the candidates, the same on every rank: they read only the key, the static decision (the
 * table or model every rank of ctx shares) and the communicator's transports */
static void candidates(lp_at_key_t *k, const lp_ctx_t *ctx, const lp_choice_t *base) {
    lp_at_info_t *I = &k->info;
    const lp_model_t *m = ctx->tables < 0 ? &ctx->model : &lp_model;
    const size_t nb = (size_t)I->nbytes;
    I->ncand = 0;
    k->cap = AT_FIRST;
    add_cand(k, ctx, base->alg, base->chunk, base->transport);             /* the static choice */
    add_cand(k, ctx, native_alg(I->coll), 0, 0);                           /* MPI's own */
    int order[64], n = 0;                                                  /* the model's ranking */
    double t[64];
    for (int i = 0; i < lp_nalgos && n < 64; i++) {
        if ((int)lp_algos[i].coll != I->coll || lp_algos[i].wire) continue;
        t[n] = lp_predict_with(m, i, I->P, I->nodes, (double)nb,
                               (double)lp_best_chunk_with(m, i, I->P, I->nodes, nb));
        order[n++] = i;
    }
    for (int a = 1; a < n; a++)                                           /* insertion sort: stable */
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            double x = t[b]; t[b] = t[b - 1]; t[b - 1] = x;
            int y = order[b]; order[b] = order[b - 1]; order[b - 1] = y;
        }
    int top[2], ntop = 0;
    for (int i = 0; i < n && ntop < 2; i++) {
        int before = I->ncand;
        add_cand(k, ctx, order[i], lp_best_chunk_with(m, order[i], I->P, I->nodes, nb), LP_TP_MODEL);
        if (I->ncand > before) top[ntop++] = order[i];
    }
    for (int j = 0; j < ntop; j++)                          /* their node-local transports, each */
        for (int tp = LP_TP_MPI; tp < LP_NTP; tp++)
            add_cand(k, ctx, top[j], lp_best_chunk_with(m, top[j], I->P, I->nodes, nb), tp);
    if (lp_algos[base->alg].chunked) {                                     /* the chunk's neighbours */
        add_cand(k, ctx, base->alg, base->chunk * 2, base->transport);
        add_cand(k, ctx, base->alg, base->chunk / 2, base->transport);
    }
    for (int tp = LP_TP_MPI; tp < LP_NTP; tp++)                            /* its other transports */
        add_cand(k, ctx, base->alg, base->chunk, tp);
    /* a coarse spread of its chunk where room is left: the model's chunk can be far from the
     * best (issue 50, 16 MiB from no table: ring with 8 MiB chunks, where 256 KiB ones stay in
     * the caches and take 1.3x less), further than the neighbours' rounds walk (x2, /2 twice) */
    if (lp_algos[base->alg].chunked) {
        add_cand(k, ctx, base->alg, base->chunk / 8, base->transport);
        add_cand(k, ctx, base->alg, base->chunk / 64, base->transport);
    } else if (ntop) {         /* an unchunked static choice: the model's first algorithm's spread
                                * (AMD EPYC, 64 MiB from no table: static be, the model's ring with
                                * 16 MiB chunks, the grid's best ring with 1 MiB ones over shm, where
                                * 16 MiB ones ran 30 ms in some segments and 7.3 in others) */
        size_t c0 = lp_best_chunk_with(m, top[0], I->P, I->nodes, nb);
        add_cand(k, ctx, top[0], c0 / 8, LP_TP_MODEL);
        add_cand(k, ctx, top[0], c0 / 64, LP_TP_MODEL);
    }
    I->native = -1;
    for (int i = 0; i < I->ncand; i++)
        if (lp_algos[I->cand[i].alg].sched == &lp_sched_native) I->native = i;
}

static lp_at_key_t *key_find(lp_ctx_t *ctx, const lp_key_t *kk, int esize) {
    lp_at_key_t *k = (unsigned)kk->coll < LP_NCOLLS ? ctx->at_last[kk->coll] : NULL;
    const double b = (double)kk->nbytes;
    if (k && k->info.mem == (int)kk->mem && k->info.acc == kk->acc && k->info.esize == esize &&
        b >= k->info.lo && b < k->info.hi && kk->nbytes)      /* the collective's last key */
        return k;
    int cls = size_class(kk->nbytes, NULL, NULL);
    for (k = ctx->at_keys; k; k = k->ctx_next)
        if (k->info.coll == (int)kk->coll && k->info.cls == cls && k->info.mem == (int)kk->mem &&
            k->info.acc == kk->acc && k->info.esize == esize) {
            ctx->at_last[kk->coll] = k;
            return k;
        }
    return NULL;
}

static void window_start(lp_at_key_t *k) {
    lp_at_info_t *I = &k->info;
    k->wseq = k->ctx ? k->ctx->at_seq : 0;
    k->wn = 0;
    k->wgen = (k->wgen + 1) & W_GEN_MASK;
    k->due = 0;
    if (I->state == AT_SETTLED) {
        /* about k->span of calls (100 us, doubling while the windows agree with the
         * reference, up to 1 ms), 16..AT_WIN: the reduction's cost hidden in many calls when
         * small, a change seen within a few short windows */
        double t = I->last_seconds > 0 ? I->last_seconds : I->seconds > 0 ? I->seconds : 1e-5;
        /* (AT_WIN calls; 64 until a window measured: a learned time far off is seen soon) */
        int w = (int)ceil(k->span / (t * k->stride)), most = isnan(I->last_seconds) ? 64 : AT_WIN / k->stride;
        k->wlen = w < 16 ? 16 : w > most ? most : w;
        for (int i = 0; i < k->wlen; i++) k->wc[i] = I->choice;
        return;
    }
    if (k->nfin) {                                   /* confirming: a block per finalist */
        k->wlen = 0;
        for (int f = 0; f < k->nfin; f++)
            for (int r = 0; r < AT_BLOCK; r++) k->wc[k->wlen++] = k->fin[f];
        return;
    }
    int alive[AT_MAXC], na = 0;
    for (int i = 0; i < I->ncand; i++)
        if (I->alive[i]) alive[na++] = i;
    /* blocks of consecutive calls, as the program runs its choice (each block's first call
     * apart: the switch), in an order rotated by round.  Interleaved call by call, a candidate
     * that keeps its data in the caches between its calls was measured cold: on the AMD EPYC
     * under MPICH, ring over shm took 28-341 us at 64 KiB-1 MiB in interleaved rounds where it
     * takes 12-60 in a row, and the key settled on ring over CMA at 1.34-1.77x the grid's best */
    int reps = round_reps[k->round];
    k->wlen = 0;
    for (int j = 0; j < na; j++)
        for (int r = 0; r < reps && k->wlen < AT_WIN; r++) k->wc[k->wlen++] = alive[(j + k->round) % na];
}

static void explore(lp_at_key_t *k, int first) {
    lp_at_info_t *I = &k->info;
    I->state = AT_EXPLORE;
    k->round = 0;
    k->refines = 0;
    k->nfin = 0;
    k->ecalls = 0;
    for (int i = 0; i < I->ncand; i++) {
        I->alive[i] = !k->failed[i];
        k->nts[i] = 0;
        I->median[i] = NAN;
    }
    if (!first) {          /* re-exploring: the previous winners and MPI's own first, then the rest */
        int keep[AT_MAXC] = {0}, nk = 0;
        for (int j = k->nprev - 1; j >= 0 && nk < 4; j--) if (!keep[k->prev[j]]) { keep[k->prev[j]] = 1; nk++; }
        if (I->native >= 0) keep[I->native] = 1;
        keep[0] = 1;       /* the static choice */
        for (int i = 0; i < I->ncand; i++) I->alive[i] = I->alive[i] && keep[i];
    }
    window_start(k);
}

static void settle(lp_at_key_t *k, int choice) {
    lp_at_info_t *I = &k->info;
    k->nfin = 0;
    I->state = AT_SETTLED;
    I->choice = choice;
    I->seconds = I->median[choice];
    k->ref = NAN;           /* the first settled window's median: exploring calls switch plans */
    k->span = AT_SPAN_MIN;
    k->stride = 1;
    k->skip = 0;
    I->last_seconds = NAN;
    k->hi = k->lo = 0;
    I->settles++;
    if (I->settles == 1) I->settle_calls = I->calls;
    if (k->nprev == 0 || k->prev[k->nprev - 1] != choice) {
        if (k->nprev == AT_MAXC) memmove(k->prev, k->prev + 1, (AT_MAXC - 1) * sizeof *k->prev);
        else k->nprev++;
        k->prev[k->nprev - 1] = choice;
    }
    I->gen++;
    window_start(k);
}

/* hill climbing from the leader c: its chunk x2 and /2 (its transport kept) and its other
 * node-local transports (its chunk kept) that were not candidates yet join it, from round 2
 * (2 calls each, then 4); returns 0 where there is none (the same on every rank: the candidates
 * and c are) */
static int refine(lp_at_key_t *k, int c) {
    lp_at_info_t *I = &k->info;
    const lp_ctx_t *ctx = k->ctx;
    const lp_at_cand_t lead = I->cand[c];
    int before = I->ncand;
    k->refines++;
    k->cap = AT_MAXC;
    if (!ctx || (!lp_algos[lead.alg].chunked && !lp_algos[lead.alg].cma && !lp_algos[lead.alg].shm)) return 0;
    if (lp_algos[lead.alg].chunked) {
        add_cand(k, ctx, lead.alg, lead.chunk * 2, lead.transport ? lead.transport : LP_TP_MODEL);
        add_cand(k, ctx, lead.alg, lead.chunk / 2, lead.transport ? lead.transport : LP_TP_MODEL);
    }
    for (int tp = LP_TP_MPI; tp < LP_NTP; tp++) add_cand(k, ctx, lead.alg, lead.chunk, tp);
    if (I->ncand == before) return 0;
    if (k->ecalls + (long)(I->ncand - before + 1) * (round_reps[1] + round_reps[2]) > AT_BUDGET) {
        I->ncand = before;                        /* no room in the budget: settle instead */
        return 0;
    }
    for (int i = 0; i < I->ncand; i++) {
        I->alive[i] = i == c || (i >= before && !k->failed[i]);
        if (i >= before) { k->nts[i] = 0; I->median[i] = NAN; }
    }
    k->round = 1;
    window_start(k);
    return 1;
}

/* the rounds chose c: the finalists (c, MPI's own, the runner-up: measured and not failed) run
 * in blocks of consecutive calls, as the program will run the choice (interleaved calls can
 * favour a candidate: on the Xeon, Intel MPI, 64 KiB, ring over CMA took 11 us interleaved and
 * 16 us in a row, where MPI's own took 13), and the blocks decide; c alone: settled at once */
static void confirm(lp_at_key_t *k, int c) {
    lp_at_info_t *I = &k->info;
    k->nfin = 0;
    k->fin[k->nfin++] = c;
    if (I->native >= 0 && I->native != c && !k->failed[I->native] && k->nts[I->native])
        k->fin[k->nfin++] = I->native;
    int ru = -1;
    for (int i = 0; i < I->ncand; i++)
        if (i != c && i != I->native && I->alive[i] && k->nts[i] && !isnan(I->median[i]) &&
            (ru < 0 || I->median[i] < I->median[ru])) ru = i;
    if (ru >= 0) k->fin[k->nfin++] = ru;
    if (k->nfin == 1) {
        settle(k, c);
        return;
    }
    window_start(k);
}

/* the blocks of the finalists: the median of each block's second half (its first calls: the
 * switch, which can last several calls: under Intel MPI at 64 MiB on the AMD EPYC, ring over shm's
 * block ran 45, 29, 28, 25, then 9.4 and 9.3 ms, its median 25 ms against MPI's own 19, where it
 * then ran 7.4 in a row; the program runs its choice in a row) */
static void confirmed(lp_at_key_t *k, const double *t, const int *cand, int n) {
    lp_at_info_t *I = &k->info;
    double med[AT_MAXC], x[AT_BLOCK];
    for (int i = 0; i < I->ncand; i++) med[i] = NAN;
    for (int f = 0; f < k->nfin; f++) {
        int nx = 0, seen = 0;
        for (int s = 0; s < n; s++) {
            if (cand[s] != k->fin[f] || t[s] >= MISSING * 0.5) continue;
            if (seen++ < AT_BLOCK / 2) continue;
            if (nx < AT_BLOCK) x[nx++] = t[s];
        }
        if (nx) med[k->fin[f]] = lp_tune_median(x, (size_t)nx);
    }
    int c = lp_tune_decide(med, I->ncand, I->native, TIE);
    if (c < 0) c = k->fin[0];
    if (!isnan(med[c])) I->median[c] = med[c];
    settle(k, c);
}

/* the reduced times of the last window: every rank computes the same from them */
static void apply(lp_at_key_t *k) {
    lp_at_info_t *I = &k->info;
    double win[AT_WIN];
    int nw = 0, added = 0;
    if (I->state == AT_EXPLORE && k->nfin) {          /* the finalists' blocks */
        for (int s = 0; s < k->nred; s++) {
            I->explore_seconds += k->rcv[s] < MISSING * 0.5 ? k->rcv[s] : 0;
            if (k->rcv[s] >= FAILED * 0.5) k->failed[k->rc_[s]] = 1;
        }
        int n = k->nred;
        k->nred = 0;
        confirmed(k, k->rcv, k->rc_, n);
        return;
    }
    for (int s = 0; s < k->nred; s++) {
        int c = k->rc_[s];
        double t = k->rcv[s];
        if (t >= FAILED * 0.5) {                      /* failed somewhere: never again */
            k->failed[c] = 1;
            I->alive[c] = 0;
            continue;
        }
        if (t >= MISSING * 0.5) continue;
        /* its first call (k->warm), and the first of each block (the switch): measured apart */
        if (I->state == AT_EXPLORE && (!k->warm[c] || s == 0 || k->rc_[s - 1] != c)) {
            k->warm[c] = 1;
            I->explore_seconds += t;
            continue;
        }
        if (I->state == AT_EXPLORE) {
            I->explore_seconds += t;
            int n = k->nts[c] < AT_KEEP ? k->nts[c]++ : (memmove(k->ts[c], k->ts[c] + 1, (AT_KEEP - 1) *
                                                                 sizeof(double)), AT_KEEP - 1);
            k->ts[c][n] = t;
            I->samples[c]++;
            added++;
        } else if (c == I->choice) {
            win[nw++] = t;
        }
    }
    k->nred = 0;
    if (I->state == AT_EXPLORE && !added) return;    /* nothing measured: the round goes on */
    if (I->state == AT_EXPLORE) {
        double best = INFINITY;
        int lead = -1;
        for (int i = 0; i < I->ncand; i++) {
            I->median[i] = k->nts[i] ? lower_median(k->ts[i], (size_t)k->nts[i]) : NAN;
            if (I->alive[i] && k->nts[i] && I->median[i] < best) { best = I->median[i]; lead = i; }
        }
        int na = 0;
        for (int i = 0; i < I->ncand; i++) {
            /* after the first round (a warm-up and AT_K0 samples each) only the far slower go (3x:
             * the cost of an exploration is theirs), MPI's own stays; later, a candidate goes on
             * AT_KMIN samples or more, MPI's own never on fewer than the leader has */
            int judged = k->round == 0 ? k->nts[i] >= AT_K0 && i != I->native
                                       : k->nts[i] >= AT_KMIN &&
                                         !(i == I->native && lead >= 0 && k->nts[i] < k->nts[lead]);
            if (I->alive[i] && judged && lp_tune_pruned(I->median[i], best, round_factor[k->round]))
                I->alive[i] = 0;
            na += I->alive[i];
        }
        ++k->round;
        if (k->round >= NROUNDS || na <= 1 || k->ecalls + (long)na * round_reps[k->round] > AT_BUDGET) {
            double t[AT_MAXC];
            for (int i = 0; i < I->ncand; i++) t[i] = I->alive[i] && k->nts[i] ? I->median[i] : NAN;
            int c = lp_tune_decide(t, I->ncand, I->native, TIE);
            if (c < 0) {                                  /* every candidate failed: the static one */
                c = 0;
                I->median[0] = NAN;
            }
            if (k->refines < AT_REFINES && refine(k, c)) return;   /* the leader's neighbours first */
            confirm(k, c);
            return;
        }
        window_start(k);
        return;
    }
    if (!nw) return;
    double m = lp_tune_median(win, (size_t)nw);
    I->last_seconds = m;
    /* a window during which another key of the communicator made an exploring call judges
     * nothing: that key's candidates' calls between ours (transports' first uses, cold caches)
     * slow ours down (a row learned alone, 4096 B, ran > 2x its time beside a 64 KiB key
     * exploring); a key whose size the program stopped calling mid-exploration stops counting */
    for (const lp_at_key_t *o = k->ctx ? k->ctx->at_keys : NULL; o; o = o->ctx_next)
        if (o != k && o->xseq >= k->red_wseq && o->xseq > 0) return;
    if (isnan(k->ref)) {
        const double L = k->learned_ref;
        k->learned_ref = 0;
        if (L > 0 && (m > L * LEARNED_DRIFT || m * LEARNED_DRIFT < L)) {   /* not the time it was learned at */
            if (m > L) I->drifts_slower++;
            else I->drifts_faster++;
            explore(k, 0);
            return;
        }
        k->ref = m;
        return;
    }
    k->hi = m > k->ref * DRIFT ? k->hi + 1 : 0;
    k->lo = m * DRIFT < k->ref ? k->lo + 1 : 0;
    k->span = k->hi || k->lo ? AT_SPAN_MIN : k->span * 2 < AT_SPAN_MAX ? k->span * 2 : AT_SPAN_MAX;
    k->stride = k->span >= AT_SPAN_MAX ? AT_STRIDE : 1;
    if (k->hi >= DRIFT_WINDOWS || k->lo >= DRIFT_WINDOWS) {
        if (k->hi) I->drifts_slower++;
        else I->drifts_faster++;
        explore(k, 0);
    }
}

/* wait for the reduction in flight (LPMPI_TIMEOUT covers it) and apply it */
static int finish(lp_ctx_t *ctx, lp_at_key_t *k) {
    if (!k->pending) return LP_OK;
    int rc = lp_mpi_wait_timed(&k->q, "LPMPI_AUTOTUNE's agreement on measured times (MPI_Iallreduce)",
                               ctx->size);
    k->pending = 0;
    if (rc != LP_OK) return rc;
    apply(k);
    return LP_OK;
}

/* the window is full: its times to every rank (one MAX), waited for later */
static int issue(lp_ctx_t *ctx, lp_at_key_t *k) {
    for (int s = 0; s < k->wn; s++) {
        const uint64_t w = atomic_load_explicit(&k->ws[s], memory_order_acquire), v = w & W_NS_MASK;
        /* (a nonblocking call not ended on this rank yet: no time, on every rank after the MAX) */
        k->snd[s] = (w >> W_NS_BITS) != k->wgen || v == W_PENDING || v == W_MISSING ? MISSING
                    : v == W_FAILED ? FAILED : 1e-9 * (double)v;
        k->rc_[s] = k->wc[s];
    }
    k->nred = k->wn;
    k->red_wseq = k->wseq;
    int mrc = MPI_Iallreduce(k->snd, k->rcv, k->wn, MPI_DOUBLE, MPI_MAX, ctx->tcomm, &k->q);
    if (mrc != MPI_SUCCESS) return LP_FAIL(LP_ERR_MPI, "LPMPI_AUTOTUNE: MPI_Iallreduce failed (%d)", mrc);
    k->pending = 1;
    /* exploring: applied at the key's next call; settled: a window later (off the critical path) */
    k->apply_at = k->info.calls + (k->info.state == AT_EXPLORE ? 0 : k->wlen);
    return LP_OK;
}

static int settled_choice(const lp_at_key_t *k, lp_choice_t *ch) {
    if (!k || !k->info.settles) return 0;
    const lp_at_cand_t *c = &k->info.cand[k->info.choice];
    ch->alg = c->alg;
    ch->chunk = c->chunk;
    ch->transport = c->transport;
    ch->source = ch->transport_source = LP_SRC_AUTOTUNE;
    return 1;
}

int lp_autotune_settled(lp_ctx_t *ctx, const lp_key_t *kk, int esize, lp_choice_t *ch) {
    return lp_autotune && ctx->tcomm != MPI_COMM_NULL && settled_choice(key_find(ctx, kk, esize), ch);
}

int lp_autotune_pick(lp_ctx_t *ctx, const lp_key_t *kk, int esize, int kind, lp_choice_t *ch, lp_at_slot_t *slot) {
    slot->key = NULL;
    if (!lp_autotune || ctx->tcomm == MPI_COMM_NULL || ctx->size < 2 || kk->mem != LP_MEM_HOST ||
        (ch->source != LP_SRC_TABLE && ch->source != LP_SRC_MODEL) || ch->transport_source == LP_SRC_OVERRIDE)
        return LP_OK;
    lp_at_key_t *k = key_find(ctx, kk, esize);
    if (kind == LP_REQ_PERSISTENT) {                 /* the settled choice, not measured */
        settled_choice(k, ch);
        return LP_OK;
    }
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) return LP_FAIL(LP_ERR_NOMEM, "out of memory for LPMPI_AUTOTUNE's state");
        lp_at_info_t *I = &k->info;
        I->coll = kk->coll;
        I->cls = size_class(kk->nbytes, &I->lo, &I->hi);
        I->mem = (int)kk->mem;
        I->acc = kk->acc;
        I->esize = esize;
        I->P = kk->P;
        I->nodes = kk->nodes;
        I->nbytes = (double)kk->nbytes;
        I->seconds = NAN;
        I->last_seconds = NAN;
        k->ctx = ctx;
        candidates(k, ctx, ch);
        if (ch->learned > 0) {   /* a row learned in an earlier run (LPMPI_AUTOTUNE_FILE): settled */
            for (int i = 1; i < I->ncand; i++) I->median[i] = NAN;
            I->median[0] = ch->learned;      /* (settle's seconds; its first window sized from it) */
            settle(k, 0);
            I->settle_calls = 0;
            /* its time then, checked against this run's first window (LEARNED_DRIFT): a machine
             * slower or faster re-explores; that window the reference, as a key's that explored */
            k->learned_ref = ch->learned;
        } else {
            explore(k, 1);
        }
        k->ctx_next = ctx->at_keys;
        ctx->at_keys = k;
        pthread_mutex_lock(&klock);
        k->next = keys;
        keys = k;
        pthread_mutex_unlock(&klock);
    }
    lp_at_info_t *I = &k->info;
    ++ctx->at_seq;
    if (I->state == AT_EXPLORE) k->xseq = ctx->at_seq;
    if (k->stride > 1 && I->state == AT_SETTLED && ++k->skip < k->stride) {   /* not timed: the choice */
        settled_choice(k, ch);
        I->calls++;
        return LP_OK;
    }
    k->skip = 0;
    int rc_ = LP_OK;
    if (k->due) {              /* the last window ended with a nonblocking call: its times go now */
        k->due = 0;
        if (k->pending && (rc_ = finish(ctx, k)) != LP_OK) return rc_;   /* (one reduction in flight) */
        if (k->wn >= k->wlen && (rc_ = issue(ctx, k)) != LP_OK) return rc_;   /* (unless that began a window) */
    }
    if (k->pending && I->calls >= k->apply_at && (rc_ = finish(ctx, k)) != LP_OK) return rc_;
    if (k->wn >= k->wlen) window_start(k);           /* (settled: the next window) */
    int c = k->wc[k->wn];
    const lp_at_cand_t *cd = &I->cand[c];
    ch->alg = cd->alg;
    ch->chunk = cd->chunk;
    ch->transport = cd->transport;
    ch->source = ch->transport_source = LP_SRC_AUTOTUNE;
    slot->key = k;
    slot->word = &k->ws[k->wn];
    slot->gen = k->wgen;
    atomic_store_explicit(&k->ws[k->wn], wword(k->wgen, W_PENDING), memory_order_relaxed);
    k->wn++;
    /* a nonblocking call's time: from here to its end as the engine sees it (lp_at_slot_end:
     * the program's wait or test, or the progress thread), what the program waits for */
    if (kind != LP_REQ_BLOCKING && k->wn >= k->wlen) k->due = 1;
    slot->t0 = now_s();
    I->calls++;
    I->timed_calls++;
    if (I->state == AT_EXPLORE) {
        I->explore_calls++;
        k->ecalls++;
    }
    return LP_OK;
}

int lp_autotune_done(lp_ctx_t *ctx, lp_at_slot_t *slot, int ran) {
    lp_at_key_t *k = slot->key;
    if (!k) return LP_OK;
    lp_at_slot_end(slot, ran);
    if (k->wn < k->wlen || k->due) return LP_OK;     /* (due: a nonblocking call ends the window) */
    if (k->pending) {                               /* the window before (settled: one window's lag) */
        int rc = finish(ctx, k);
        if (rc != LP_OK) return rc;
        if (k->wn < k->wlen) return LP_OK;          /* it changed the state: a new window began */
    }
    return issue(ctx, k);
}

/* the communicator is going: its reductions completed, its keys kept for the report */
void lp_autotune_detach(lp_ctx_t *ctx) {
    for (lp_at_key_t *k = ctx->at_keys; k; k = k->ctx_next) {
        if (k->pending) {
            MPI_Wait(&k->q, MPI_STATUS_IGNORE);
            k->pending = 0;
        }
        pthread_mutex_lock(&klock);
        k->ctx = NULL;
        pthread_mutex_unlock(&klock);
    }
    ctx->at_keys = NULL;
    memset(ctx->at_last, 0, sizeof ctx->at_last);
    if (ctx->tcomm != MPI_COMM_NULL) MPI_Comm_free(&ctx->tcomm);
}

int lp_autotune_open(lp_ctx_t *ctx) {
    if (!lp_autotune || ctx->size < 2 || ctx->tcomm != MPI_COMM_NULL) return LP_OK;
    int mrc = MPI_Comm_dup(ctx->comm, &ctx->tcomm);
    if (mrc != MPI_SUCCESS) return LP_FAIL(LP_ERR_MPI, "LPMPI_AUTOTUNE: MPI_Comm_dup failed (%d)", mrc);
    return LP_OK;
}

int lp_autotune_set(int on) {
    int prev = lp_autotune;
    lp_autotune = on != 0;
    return prev;
}

int lp_autotune_report(lp_at_info_t *out, int max) {
    int n = 0;
    pthread_mutex_lock(&klock);
    for (lp_at_key_t *k = keys; k; k = k->next) {
        if (n < max) {
            out[n] = k->info;
            out[n].comm_live = k->ctx != NULL;
        }
        n++;
    }
    pthread_mutex_unlock(&klock);
    return n;
}

int lp_autotune_key_info(lp_ctx_t *ctx, const lp_key_t *kk, int esize, lp_at_info_t *out) {
    lp_at_key_t *k = ctx ? key_find(ctx, kk, esize) : NULL;
    if (!k) return 0;
    *out = k->info;
    out->comm_live = 1;
    return 1;
}
