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
#include "autotune.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


int lp_autotune;                           /* LPMPI_AUTOTUNE */

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
        lp_at_add_cand(k, ctx, lead.alg, lead.chunk * 2, lead.transport ? lead.transport : LP_TP_MODEL);
        lp_at_add_cand(k, ctx, lead.alg, lead.chunk / 2, lead.transport ? lead.transport : LP_TP_MODEL);
    }
    for (int tp = LP_TP_MPI; tp < LP_NTP; tp++) lp_at_add_cand(k, ctx, lead.alg, lead.chunk, tp);
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
            I->median[i] = k->nts[i] ? lp_at_lower_median(k->ts[i], (size_t)k->nts[i]) : NAN;
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
        lp_at_candidates(k, ctx, ch);
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
