/* tune/autotune.h: the online tuner's key (one per communicator, collective, size class, ...)
 * and its constants, shared by autotune.c (explore -> settle -> watch), candidates.c (what a key
 * explores) and tunecore.c (the statistics lpmpi.tune shares).  Private to tune/. */
#ifndef LPMPI_TUNE_AUTOTUNE_H
#define LPMPI_TUNE_AUTOTUNE_H

#include "engine.h"

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

/* candidates.c: the key's candidates for a call whose static decision is *base; one more (alg,
 * chunk, transport: LP_TP_*), unless the key has it or no room */
void lp_at_candidates(lp_at_key_t *k, const lp_ctx_t *ctx, const lp_choice_t *base);
void lp_at_add_cand(lp_at_key_t *k, const lp_ctx_t *ctx, int alg, size_t chunk, int tp);
/* tunecore.c: of n samples, the lower median (of two the smaller) */
double lp_at_lower_median(const double *x, size_t n);

#endif
