/* flight.h: recording a call in the flight recorder (obs/recorder.c), inline: these run on every
 * call (request.c, sched/progress.h), so each is a few loads and stores and, at the call's entry and
 * end, a read of the coarse monotonic clock (the precise one while tracing).  A slot reused by
 * a later call (LPMPI_FR_SIZE calls since) is never written by the old one: every function
 * checks the slot's gen first. */
#ifndef LPMPI_FLIGHT_H
#define LPMPI_FLIGHT_H

#include "engine.h"
#include <time.h>

/* the trace's precise clock: on x86-64 with an invariant TSC (constant_tsc and nonstop_tsc), the
 * time-stamp counter mapped to CLOCK_MONOTONIC's nanoseconds by an anchor, a (TSC, monotonic)
 * pair taken when the trace begins and again at each buffer the trace writes (its rate from the
 * first anchor to the latest: obs/trace.c), a few ns a read against clock_gettime's 20-25.  Ranks on
 * one host read one TSC and anchor to one CLOCK_MONOTONIC: their times agree within an anchor's
 * error (tens of ns), as clock_gettime's would. */
typedef struct { int64_t tsc0, ns0; uint64_t mult; } lp_tsc_anchor_t;   /* ns = ns0 + (dtsc * mult) >> 32 */
extern _Atomic(const lp_tsc_anchor_t *) lp_tsc_now;                   /* NULL: clock_gettime */
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline long long lp_fr_clock(int precise) {
#if defined(__x86_64__)
    const lp_tsc_anchor_t *a = precise ? atomic_load_explicit(&lp_tsc_now, memory_order_acquire) : NULL;
    if (a) return a->ns0 + (long long)(((__int128)((int64_t)__rdtsc() - a->tsc0) * (__int128)a->mult) >> 32);
#endif
    struct timespec t;
    clock_gettime(precise ? CLOCK_MONOTONIC : CLOCK_MONOTONIC_COARSE, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* the entry of call gen, or NULL (off, none, or reused by a later call) */
static inline lp_fr_ent_t *lp_fr_get(uint64_t gen) {
    if (!gen) return NULL;
    lp_fr_ent_t *e = &lp_fr_ring[(gen - 1) & lp_fr_mask];
    return atomic_load_explicit(&e->gen, memory_order_relaxed) == gen ? e : NULL;
}

/* a call begins: its entry (its gen; 0 with the recorder off) */
static inline uint64_t lp_fr_enter(int coll, int form, size_t count, size_t esize, int dt, int op, int root,
                                   int comp) {
    lp_fr_ent_t *ring = lp_fr_ring;
    if (!ring) return 0;
    uint64_t g = atomic_fetch_add_explicit(&lp_fr_next, 1, memory_order_relaxed) + 1;
    lp_fr_ent_t *e = &ring[(g - 1) & lp_fr_mask];
    atomic_store_explicit(&e->gen, 0, memory_order_relaxed);    /* (a dump skips it meanwhile) */
    e->req = NULL;
    e->comm = e->seq = 0;
    e->t_enter = lp_fr_clock(lp_trace_on);
    e->t_start = e->t_end = 0;
    e->count = count;
    e->bytes = count * esize;
    e->chunk = 0;
    e->coll = coll;
    e->dt = dt;
    e->op = op;
    e->root = root;
    e->comp = comp;
    e->alg = -1;
    e->alg_name = "";
    e->tp = e->rc = e->phase = e->nphases = 0;
    e->form = form;
    e->state = LP_FR_ENTERED;
    atomic_store_explicit(&e->gen, g, memory_order_release);
    return g;
}

/* its communicator is known (its number: the next start's on ctx) */
static inline void lp_fr_comm(uint64_t gen, const lp_ctx_t *ctx) {
    lp_fr_ent_t *e = lp_fr_get(gen);
    if (!e) return;
    e->comm = ctx->id;
    e->seq = ctx->seq + 1;
}

/* r starts (its tags taken: ctx->seq is its number) */
static inline void lp_fr_start(lp_req_t *r) {
    lp_fr_ent_t *e = lp_fr_get(r->fr);
    r->fr_phases = 0;
    if (!e) return;
    e->seq = r->ctx->seq;
    e->alg = r->alg;
    e->alg_name = r->alg_name;
    e->chunk = r->key.chunk;
    e->tp = lp_tp_of_ring(r->a.ring_tp);
    e->nphases = r->nphases;
    e->req = r;                  /* (a dump reads the running request's phase and peers) */
    if (lp_trace_on) {           /* the start's own clock only where the phases are timed */
        r->fr_phases = e->seq <= 16 || e->seq % 16 == 0;
        e->t_start = r->fr_phases ? lp_fr_clock(1) : e->t_enter;
        if (r->fr_phases)
            for (int i = 0; i < LP_FR_PHASES; i++) e->t_phase[i] = 0;
        else
            e->t_phase[0] = 0;       /* (the record: no phases) */
    }
    e->state = LP_FR_STARTED;
}

/* r, one of the trace's sampled calls, begins a phase (the other calls' phases are not
 * recorded: a dump reads a running request's phase from the request) */
static inline void lp_fr_phase(lp_req_t *r) {
    lp_fr_ent_t *e = lp_fr_get(r->fr);
    if (!e) return;
    e->phase = r->phase;
    if (r->phase < LP_FR_PHASES) e->t_phase[r->phase] = lp_fr_clock(1);
}

/* the call of gen ended (rc: LP_OK or its failure; an entry ended already is left) */
static inline void lp_fr_end(uint64_t gen, int rc) {
    lp_fr_ent_t *e = lp_fr_get(gen);
    if (!e || e->state >= LP_FR_DONE) return;
    e->t_end = lp_fr_clock(lp_trace_on);
    e->rc = rc;
    e->req = NULL;
    e->state = rc == LP_OK ? LP_FR_DONE : LP_FR_FAILED;
    if (lp_trace_on && e->t_start) lp_trace_put(e);
}

#endif
