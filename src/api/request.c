/* request.c: the engine's entry points.  Every call, blocking, nonblocking or persistent,
 * becomes a request:
 *
 *   1. validate what the bindings cannot get wrong but C callers can (dtype, op, memory),
 *   2. route device memory (device.c: real CUDA, emulation, or host),
 *   3. prepare the communicator's context (context.c: private duplicate, table agreement),
 *   4. decide algorithm, chunk, staging and the ring's node-local transport from the call's key
 *      (select.c: lp_decision_key, lp_decide: what every rank shares),
 *   5. with LPMPI_CHECK, check that every rank agrees on the call and the whole decision (check.c),
 *   6. take a request (the context's blocking one, a pooled nonblocking one, a new persistent
 *      one), pick its schedule (registry.c: the algorithm's, its staged pipeline for device
 *      memory, whole-buffer staging, or the single-rank copy), plan it and reserve its memory,
 *      events and MPI request slots (grow-only: nothing is allocated again by a request that
 *      is reused or restarted),
 *   7. start it: give it its tags (each start a new range of the context's tag space, the
 *      same on every rank), then run it to completion (blocking) or put it on the engine's
 *      active list (sched/progress.h).
 * A persistent request does 1-6 once; lp_start does 7. */
#include "engine.h"
#include "flight.h"
#include <limits.h>
#include <stdlib.h>

#define MEM_HOST LP_AREA_KIND_HOST
#define area_reserve lp_req_area_reserve

/* ------------------------------------------------------------------------------- lifetime */
static int req_new(lp_ctx_t *ctx, int kind, lp_req_t **out) {
    lp_req_t *r = calloc(1, sizeof *r);
    if (!r) return LP_FAIL(LP_ERR_NOMEM, "out of memory for a request");
    r->ctx = ctx;
    r->kind = kind;
    r->devid = -1;
    r->ev_first = -1;
    r->nat_ticket = -1;
    for (int i = 0; i < 3; i++) r->area_kind[i] = MEM_HOST;
    lp_engine_lock();
    ctx->refs++;
    lp_engine_live(r, 1);
    lp_engine_unlock();
    *out = r;
    return LP_OK;
}

/* free everything of an inactive request (its memory only if nothing can still land in it) */
static void req_destroy(lp_req_t *r) {
    lp_req_persistent_free(r);
    if (!r->poisoned) lp_req_areas_free(r);
    if (r->nev) lp_events_release(r->ev_first, r->nev);
    if (!r->poisoned) {
        free(r->reqs);
        free(r->fin);
    }
    free(r->lane0);
    free(r->vbuf);
    lp_engine_lock();
    lp_engine_live(r, 0);
    lp_ctx_unref(r->ctx);
    lp_engine_unlock();
    free(r);
}

void lp_req_destroy(lp_req_t *r) { req_destroy(r); }

/* the request a call of `kind` uses on ctx */
static int req_get(lp_ctx_t *ctx, int kind, lp_req_t **out) {
    if (kind == LP_REQ_BLOCKING) {
        if (ctx->breq && ctx->breq->poisoned) {
            req_destroy(ctx->breq);
            ctx->breq = NULL;
        }
        if (!ctx->breq) {
            int rc = req_new(ctx, kind, &ctx->breq);
            if (rc != LP_OK) return rc;
        }
        *out = ctx->breq;
        return LP_OK;
    }
    if (kind == LP_REQ_NONBLOCKING) {
        lp_engine_lock();
        lp_req_t *r = ctx->pool;
        if (r) {
            ctx->pool = r->pool_next;
            ctx->npool--;
        }
        lp_engine_unlock();
        if (r) {
            *out = r;
            return LP_OK;
        }
    }
    return req_new(ctx, kind, out);
}

/* ------------------------------------------------------------------------------- schedules */
/* one rank: the result is the input (a logical op gives 0 or 1: x LOR x) */
static int single_plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    p->nphases = lp_on(lp_traits(a->coll)->result, a->rank, a->root);   /* bcast: the root has it */
    return LP_OK;
}
static int single_phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    const char *src = a->sbuf;
    char *dst = a->rbuf;
    size_t bytes = a->count * a->esize;
    if (lp_per_rank_blocks(a->coll)) {     /* its one block, each side's (per-rank displacements) */
        size_t soff, slen, roff, rlen;
        lp_send_part(a, 0, &soff, &slen);
        lp_recv_part(a, 0, &roff, &rlen);
        src += soff * a->esize;
        dst += roff * a->esize;
        bytes = slen * a->esize;
    }
    if (!bytes) return LP_OK;
    if (!lp_lane_logical(r, a, dst, src, bytes) && src != dst) lp_lane_copy(r, a, dst, src, bytes, 0);
    return LP_OK;
}
const lp_sched_t lp_sched_single = {single_plan, single_phase, NULL, NULL, NULL};

/* the schedule of r's call, its plan, and its memory */
static int req_plan(lp_req_t *r) {
    int rc = LP_OK;
    const lp_algo_t *A = &lp_algos[r->alg];
    const lp_args_t *a = &r->a;
    lp_plan_t p = {0};
    r->inner = NULL;
    if (a->count == 0 && !lp_args_counted(a)) r->sched = NULL;
    else if (a->size == 1) r->sched = &lp_sched_single;
    else if (a->comp) r->sched = &lp_sched_cz;        /* compressed: its own phases (alg_compress.c) */
    else if (a->xport == LP_XPORT_STAGED && A->staged) r->sched = A->staged;
    else if (a->xport == LP_XPORT_STAGED || (a->xport == LP_XPORT_AWARE && A->sched->host_only &&
                                             A->sched->host_only(a))) {
        r->sched = &lp_sched_stage_whole;
        r->inner = A->sched;
    } else if (a->ring_tp >= 0) {          /* node-local transports, resolved in the decision */
        r->sched = a->ring_tp == LP_RING_SHM ? A->shm : a->ring_tp == LP_RING_CMA ? A->cma : A->sched;
    } else r->sched = A->sched;
    if (r->sched) LP_TRY(r->sched->plan(r, a, &p));
    r->nsched = p.nphases;
    r->nphases = p.nphases + (a->acc && a->rbuf && a->count && !p.narrows);
    /* scratch lives with the buffers: device memory on the AWARE transport */
    int work_dev = a->dev && a->xport == LP_XPORT_AWARE && r->sched != &lp_sched_stage_whole &&
                   r->sched != &lp_sched_single;
    LP_TRY(area_reserve(r, LP_AREA_WORK, p.work, work_dev ? LP_ALLOC_DEVICE : MEM_HOST));
    LP_TRY(area_reserve(r, LP_AREA_PINNED, p.pinned, LP_ALLOC_PINNED));
    LP_TRY(area_reserve(r, LP_AREA_DEVICE, p.device, LP_ALLOC_DEVICE));
    if (p.events > r->nev) {
        if (r->nev) lp_events_release(r->ev_first, r->nev);
        r->nev = 0;
        LP_TRY(lp_events_reserve(p.events, &r->ev_first));
        r->nev = p.events;
    }
    size_t w = a->window > a->staging ? a->window : a->staging;
    LP_TRY(lp_req_slots(r, LP_LANES_MAX * (w ? w : 1)));
cleanup:
    return rc;
}

/* does r's schedule call MPI's collectives (native, itself or inside whole-buffer staging)? */
static int issues_native(const lp_req_t *r) {
    const lp_sched_t *s = r->inner ? r->inner : r->sched;
    return s == &lp_sched_native;
}

/* give a start its tags: the context's next tag range, once no active request holds it; and
 * its ticket in the context's order of native issues (engine.h) */
static int req_tags(lp_req_t *r) {
    lp_ctx_t *ctx = r->ctx;
    unsigned long slot = ctx->seq++ & (ctx->nslots - 1);
    int others = atomic_load_explicit(&lp_nactive, memory_order_relaxed) != 0;
    if (others) {
        int rc = lp_engine_slot_wait(ctx, slot);
        if (rc != LP_OK) return rc;
    }
    r->a.tag0 = (int)(slot * LP_TAGS_PER_REQ);
    r->nat_ticket = issues_native(r) ? ctx->nat_next++ : -1;
    if (r->a.ring_tp == LP_RING_SHM) {             /* its rounds of the segment, in start order
                                                      (the decision's transport: the row's shm
                                                      schedule runs, request.c req_plan) */
        r->a.shm_base = ctx->shm_next;
        ctx->shm_next += lp_shm_rounds(&r->a);
    }
    /* MPI's blocking collectives (native) only where every rank makes the same choice: a
     * communicator that never had a nonblocking or persistent request (no watchdog: it
     * cannot interrupt them); requests in flight on other communicators do not move meanwhile */
    r->a.blocking = r->kind == LP_REQ_BLOCKING && !ctx->nb_made && !lp_timeout_ns;
    if (r->fr) lp_fr_start(r);
    return LP_OK;
}

/* ------------------------------------------------------------------------------- calls */
static int acquire(lp_ctx_t *ctx) {
    if (atomic_exchange_explicit(&ctx->busy, 1, memory_order_acquire))
        return LP_FAIL(LP_ERR_BUSY, "another thread is running a collective on this communicator "
                       "(MPI allows one collective at a time per communicator: use one "
                       "communicator per thread, e.g. comm.Dup())");
    return LP_OK;
}
static void release(lp_ctx_t *ctx) { atomic_store_explicit(&ctx->busy, 0, memory_order_release); }

/* a call up to its decision (shared by lp_request and lp_request_decision) */
typedef struct {
    lp_ctx_t *ctx;
    const lp_devops_t *dev;
    int xport, accum;
    lp_mem_t mem;
    lp_reduce_fn fn;
    lp_key_t key;
    lp_choice_t ch;
    int ring_tp;              /* LP_RING_*, -1: no node-local ring (lp_args_t.ring_tp) */
} call_t;

/* 1-3: the checks C callers can get wrong, memory routing, the prepared context */
static int call_check(call_t *c, const lp_call_t *k) {
    int rc = LP_OK;
    const lp_coll_t coll = k->coll;
    const lp_dtype_t dt = k->dt, acc_dt = k->acc_dt;
    const lp_op_t op = k->op;
    const int root = k->root;
    const void *acc = k->acc;
    size_t count = k->count;
    lp_mem_t mem = k->mem;
    if ((int)coll < 0 || coll >= LP_NCOLLS) return LP_FAIL(LP_ERR_ARG, "unknown collective %d", (int)coll);
    const lp_coll_traits_t *T = lp_traits(coll);
    if ((int)dt < 0 || dt >= LP_NDTYPES) return LP_FAIL(LP_ERR_ARG, "unknown dtype %d", (int)dt);
    if ((int)mem < 0 || mem >= LP_NMEMS) return LP_FAIL(LP_ERR_ARG, "unknown memory kind %d", (int)mem);
    c->accum = lp_accumulates(dt, acc_dt);
    if ((acc && !c->accum) ||
        (c->accum && (!T->has_op || (op != LP_SUM && op != LP_AVG) || mem != LP_MEM_HOST)))
        return LP_FAIL(LP_ERR_ARG, "acc: a float32 SUM or AVG allreduce/reduce/reduce_scatter on host memory, "
                       "rounded to float16 or bfloat16");
    if (k->comp) {                       /* compression: float data, SUM / AVG, host memory */
        if (k->comp < 0 || k->comp >= LP_NCOMPS || lp_cz_algo(coll) < 0)
            return LP_FAIL(LP_ERR_ARG, "compression %d on %s", k->comp, lp_coll_name(coll));
        if (dt != LP_FLOAT16 && dt != LP_BFLOAT16 && dt != LP_FLOAT32 && dt != LP_FLOAT64)
            return LP_FAIL(LP_ERR_ARG, "compression needs float data, not %s", lp_dtype_name(dt));
        if (k->comp == LP_COMP_BF16 && lp_dtype_size(dt) <= 2)
            return LP_FAIL(LP_ERR_ARG, "compression bf16 is not narrower than %s", lp_dtype_name(dt));
        if (T->has_op && op != LP_SUM && op != LP_AVG)
            return LP_FAIL(LP_ERR_ARG, "compression needs op sum or avg, not %s", lp_op_name(op));
        if (mem != LP_MEM_HOST || acc)
            return LP_FAIL(LP_ERR_ARG, "compression on host memory, without acc_dtype");
    }
    c->fn = NULL;
    if (T->has_op && !(c->fn = lp_reduce_kernel(dt, op)))
        return LP_FAIL(LP_ERR_ARG, "op %s is not defined on %s", lp_op_name(op), lp_dtype_name(dt));
    LP_TRY(lp_device_route(mem, &c->dev, &c->xport));
    if (c->dev) mem = LP_MEM_CUDA;                /* emulation decides as for device memory */
    c->mem = mem;
    LP_TRY(lp_ctx_ready(k->comm, &c->ctx, NULL));
    if (root < 0 || root >= c->ctx->size) return LP_FAIL(LP_ERR_ARG, "root %d out of range", root);
    if (k->scounts && T->rblocks == 1) count = k->scounts[c->ctx->rank];   /* my block's (per-rank counts) */
    if (c->accum && !acc && count && lp_on(T->result, c->ctx->rank, root))   /* (empty: may be NULL) */
        return LP_FAIL(LP_ERR_ARG, "acc: NULL on a rank that gets a result (the 16-bit output)");
cleanup:
    return rc;
}

/* the ring's node-local transport of c's choice, resolved here once by the key's bytes (the
 * schedule follows it: req_plan) */
static int ring_tp_for(const lp_ctx_t *ctx, lp_coll_t coll, size_t count, int dev, int alg, size_t nbytes,
                       int tp) {
    const lp_algo_t *A = &lp_algos[alg];
    if (!(count || lp_count_keyless(coll)) || ctx->size < 2 || dev || !(A->cma || A->shm)) return -1;
    return lp_ring_transport(ctx->shm != NULL && A->shm, ctx->pids != NULL && A->cma, nbytes, tp);
}
static void call_ring_transport(call_t *c, const lp_call_t *k) {
    c->ring_tp = ring_tp_for(c->ctx, k->coll, k->count, c->dev != NULL, c->ch.alg, c->key.nbytes, c->ch.transport);
}

/* 4: the key (lp_decision_key: what every rank shares), the decision, and the ring's node-local
 * transport, resolved here once by the key's bytes (the schedule follows it: req_plan) */
static int call_decide(call_t *c, const lp_call_t *k) {
    lp_ctx_t *ctx = c->ctx;
    const lp_coll_t coll = k->coll;
    const size_t count = k->count;
    c->key = lp_decision_key(coll, ctx->size, ctx->nnodes, count, k->dt, k->acc_dt, c->mem);
    if (k->comp) {                       /* compressed: its row (the wire column), no other */
        int cz = lp_cz_algo(coll);
        if (k->alg != LP_ALG_AUTO && k->alg != cz)
            return LP_FAIL(LP_ERR_ARG, "compression runs with algorithm \"auto\" or \"direct\", not %s",
                           lp_algo_name(k->alg));
        const lp_model_t *m = ctx->tables < 0 ? &ctx->model : &lp_model;
        size_t chunk = k->chunk_bytes ? k->chunk_bytes
                                      : lp_cz_chunk(m, k->comp, lp_dtype_size(k->dt), ctx->size, ctx->nnodes, c->key.nbytes);
        c->ch = (lp_choice_t){.alg = cz, .chunk = chunk,
                              .source = k->alg == LP_ALG_AUTO ? LP_SRC_MODEL : LP_SRC_REQUESTED,
                              .transport_source = LP_SRC_MODEL, .tables = ctx->tables};
        c->ring_tp = -1;
        return LP_OK;
    }
    int rc = lp_decide(ctx, &c->key, k->alg, k->chunk_bytes, &c->ch);
    if (rc != LP_OK) return rc;
    call_ring_transport(c, k);
    return LP_OK;
}

static int call_staging(const call_t *c) { return c->ch.staging > 0 ? c->ch.staging : lp_staging; }

/* the call record's per-rank counts: present exactly where its row has them */
static int call_counts(const lp_call_t *k) {
    if ((unsigned)k->coll >= LP_NCOLLS) return LP_OK;
    int v = lp_traits(k->coll)->vcounts;
    if (!!(v & LP_V_SEND) != !!(k->scounts && k->sdispls) || !!(v & LP_V_RECV) != !!(k->rcounts && k->rdispls))
        return LP_FAIL(LP_ERR_ARG, "%s: per-rank counts and displacements %s", lp_coll_name(k->coll),
                       v ? "missing" : "given to a collective without them");
    return LP_OK;
}

int lp_request_decision(lp_decision_t *out, lp_coll_t coll, MPI_Comm comm, const void *sbuf, void *rbuf,
                        size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg, size_t chunk_bytes,
                        lp_mem_t mem, void *acc, lp_dtype_t acc_dt) {
    const lp_call_t k = {.coll = coll, .comm = comm, .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt,
                         .op = op, .root = root, .alg = alg, .chunk_bytes = chunk_bytes, .mem = mem,
                         .acc = acc, .acc_dt = acc_dt};
    return lp_call_decision(out, &k);
}

int lp_call_decision(lp_decision_t *out, const lp_call_t *k) {
    int rc = LP_OK;
    call_t c = {0};
    LP_TRY(call_counts(k));
    if (lp_forked) return lp_not_forked();
    if (!lp_comm_ready(k->comm))
        return LP_FAIL(LP_ERR_ARG, "lp_request_decision: the communicator is not prepared (lp_comm_prepare)");
    LP_TRY(call_check(&c, k));
    LP_TRY(call_decide(&c, k));
    *out = (lp_decision_t){.choice = c.ch, .key = c.key,
                           .ring_transport = lp_tp_of_ring(c.ring_tp)};
    out->choice.staging = call_staging(&c);
cleanup:
    return rc;
}

int lp_request(lp_req_t **out, int kind, lp_coll_t coll, MPI_Comm comm, const void *sbuf, void *rbuf,
               size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg, size_t chunk_bytes,
               lp_mem_t mem, void *acc, lp_dtype_t acc_dt) {
    const lp_call_t k = {.coll = coll, .comm = comm, .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt,
                         .op = op, .root = root, .alg = alg, .chunk_bytes = chunk_bytes, .mem = mem,
                         .acc = acc, .acc_dt = acc_dt};
    return lp_call_request(out, kind, &k);
}

/* the request's own copies of the call's per-rank counts (a->scounts ...) and MPI's int form
 * (a->vint, NULL where a value passes INT_MAX); their hash for the plan's key */
static int req_counts(lp_req_t *r, const lp_call_t *k, int P, uint64_t *hash) {
    const size_t *src[4] = {k->scounts, k->sdispls, k->rcounts, k->rdispls};
    const size_t need = 4 * (size_t)P * (sizeof(size_t) + sizeof(int));
    lp_args_t *a = &r->a;
    uint64_t h = 1469598103934665603ull;
    int fits = 1;
    *hash = 0;
    a->scounts = a->sdispls = a->rcounts = a->rdispls = NULL;
    a->vint = NULL;
    if (!k->scounts && !k->rcounts) return LP_OK;
    if (r->vcap < need) {
        size_t *p = realloc(r->vbuf, need);
        if (!p) return LP_FAIL(LP_ERR_NOMEM, "out of memory for the counts of a call");
        r->vbuf = p;
        r->vcap = need;
    }
    int *iv = (int *)(r->vbuf + 4 * (size_t)P);
    for (int j = 0; j < 4; j++) {
        size_t *dst = r->vbuf + (size_t)j * P;
        for (int i = 0; i < P; i++) {
            size_t x = src[j] ? src[j][i] : 0;
            dst[i] = x;
            iv[(size_t)j * P + i] = x <= (size_t)INT_MAX ? (int)x : 0;
            fits &= x <= (size_t)INT_MAX;
            h = (h ^ (x + (uint64_t)j)) * 1099511628211ull;
        }
    }
    if (k->scounts) { a->scounts = r->vbuf; a->sdispls = r->vbuf + P; }
    if (k->rcounts) { a->rcounts = r->vbuf + 2 * (size_t)P; a->rdispls = r->vbuf + 3 * (size_t)P; }
    a->vint = fits ? iv : NULL;
    *hash = h | 1;
    return LP_OK;
}

int lp_call_request(lp_req_t **out, int kind, const lp_call_t *k) {
    int rc = LP_OK, busy = 0;
    call_t c = {0};
    lp_req_t *r = NULL;
    const lp_coll_t coll = k->coll;
    const void *const sbuf = k->sbuf;
    void *const rbuf = k->rbuf;
    const size_t count = k->count;
    const lp_dtype_t dt = k->dt, acc_dt = k->acc_dt;
    const lp_op_t op = k->op;
    const int root = k->root;
    void *const acc = k->acc;
    uint64_t vhash = 0;
    lp_at_slot_t slot = {0};
    uint64_t fr = 0;              /* the call's flight-recorder entry (a persistent request's are its starts') */
    if (out) *out = NULL;
    LP_TRY(call_counts(k));
    if (lp_forked) return lp_not_forked();
    if (kind < LP_REQ_BLOCKING || kind > LP_REQ_PERSISTENT || (kind != LP_REQ_BLOCKING && !out))
        return LP_FAIL(LP_ERR_ARG, "bad request kind %d", kind);
    if (kind != LP_REQ_PERSISTENT && (unsigned)dt < LP_NDTYPES)
        fr = lp_fr_enter(coll, kind, count, lp_dtype_size(dt), dt, op, root, k->comp);
    LP_TRY(call_check(&c, k));
    lp_ctx_t *ctx = c.ctx;
    const lp_coll_traits_t *T = lp_traits(coll);
    const lp_devops_t *dev = c.dev;
    LP_TRY(acquire(ctx));
    busy = 1;
    if (fr) lp_fr_comm(fr, ctx);
    if (ctx->notice != lp_fr_notices() || ctx->lost >= 0) LP_TRY(lp_ctx_check_lost(ctx));   /* a peer died */
    if (kind != LP_REQ_BLOCKING) ctx->nb_made = 1;
    LP_TRY(call_decide(&c, k));
    if (lp_autotune && k->alg == LP_ALG_AUTO && !k->chunk_bytes && !k->comp) {   /* the online tuner's turn */
        LP_TRY(lp_autotune_pick(ctx, &c.key, (int)lp_dtype_size(k->dt), kind, &c.ch, &slot));
        call_ring_transport(&c, k);
    }
    const lp_choice_t ch = c.ch;
    const size_t esize = lp_dtype_size(dt), staging = (size_t)call_staging(&c);
    /* 5. LPMPI_CHECK: the call and its whole decision, the same on every rank */
    const int64_t ck[LP_CK_N] = {
        [LP_CK_COLL] = coll, [LP_CK_COUNT] = (int64_t)count, [LP_CK_DTYPE] = dt,
        [LP_CK_OP] = T->has_op ? (int64_t)op : -1, [LP_CK_ROOT] = T->has_root ? root : -1,
        [LP_CK_ACC] = c.accum ? (int64_t)acc_dt : -1, [LP_CK_MEM] = c.mem, [LP_CK_ALG] = ch.alg,
        [LP_CK_CHUNK] = (int64_t)ch.chunk, [LP_CK_TP] = ch.transport, [LP_CK_RING_TP] = c.ring_tp,
        [LP_CK_STAGING] = (int64_t)staging, [LP_CK_KEY_BYTES] = (int64_t)c.key.nbytes,
        [LP_CK_PREQ] = kind == LP_REQ_PERSISTENT ? ctx->npersist + 1 : 0, [LP_CK_COMP] = k->comp};
    if (lp_check_enabled) LP_TRY(lp_check_agree(ctx, ck, 0));
    LP_TRY(req_get(ctx, kind, &r));
    if (kind == LP_REQ_PERSISTENT) {
        memcpy(r->ck, ck, sizeof ck);
        ctx->npersist++;
        /* an "auto" persistent request follows its key's settled choice from start to start */
        r->at_follow = lp_autotune && k->alg == LP_ALG_AUTO && !k->chunk_bytes && ctx->tcomm != MPI_COMM_NULL;
        r->at_key = c.key;
        r->at_esize = (int)lp_dtype_size(k->dt);
    }
    lp_plan_key_t key = {ch.alg, coll, dt, op, root, c.xport, (int)(sbuf == rbuf), (int)(rbuf == NULL),
                         acc ? (int)acc_dt : -1, ch.transport, k->comp, lp_test_cz_wavefront, count, ch.chunk, (size_t)lp_window,
                         staging, dev, 0};
    int devid = -1;
    if (dev && count) LP_TRY(dev->locate(sbuf ? sbuf : rbuf, &devid));
    r->alg = ch.alg;
    r->alg_name = lp_algos[ch.alg].name;
    r->a = (lp_args_t){
        .comm = ctx->comm, .rank = ctx->rank, .size = ctx->size, .coll = coll,
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt, .esize = esize, .op = op, .fn = c.fn,
        .root = root, .chunk_elems = ch.chunk / esize ? ch.chunk / esize : 1, .mem = c.mem,
        .dev = dev, .xport = c.xport, .window = (size_t)lp_window,
        .piece = lp_max_msg_bytes >= esize ? lp_max_msg_bytes / esize * esize : esize,
        .staging = staging,
        .persistent = kind == LP_REQ_PERSISTENT,
        .acc = acc, .acc_dt = acc_dt,
        .node = ctx->node, .order = ctx->order, .pos = ctx->pos, .pids = ctx->pids, .alive = ctx->alive,
        .shm = ctx->shm, .transport = ch.transport, .ring_tp = c.ring_tp, .comp = k->comp,
    };
    LP_TRY(req_counts(r, k, ctx->size, &vhash));
    key.vhash = vhash;
    const int replan = !r->planned || memcmp(&key, &r->key, sizeof key) != 0;
    r->devid = devid;
    if (replan || devid >= 0) {
        r->planned = 0;
        r->cached = 0;                /* phase 0 as built for the old plan */
        LP_TRY(req_plan(r));
        r->key = key;
        r->planned = 1;
    }
    if (kind == LP_REQ_PERSISTENT && r->sched && r->sched->init) LP_TRY(r->sched->init(r, &r->a));
    r->at_slot = (lp_at_slot_t){0};
    if (kind != LP_REQ_PERSISTENT) {
        r->fr = fr;
        LP_TRY(req_tags(r));
        if (kind == LP_REQ_NONBLOCKING) {    /* its time ends with it (sched/exec.c ended) */
            r->at_slot = slot;
            slot.key = NULL;
        }
        if (kind == LP_REQ_BLOCKING) {
            rc = lp_engine_run(r);
            int trc = lp_autotune_done(ctx, &slot, rc == LP_OK);   /* (no-op untuned) */
            if (rc == LP_OK) rc = trc;
        } else LP_TRY(lp_engine_start(r));
    } else {
        r->state = LP_REQ_INACTIVE;
    }
    if (out) *out = r;
    r = NULL;
cleanup:
    if (fr && rc != LP_OK) lp_fr_end(fr, rc);        /* (one that ran ended where it failed) */
    if (slot.key) lp_autotune_done(c.ctx, &slot, -1);   /* an error before it ran: no time */
    if (r && kind != LP_REQ_BLOCKING) req_destroy(r);
    if (busy) release(ctx);
    return rc;
}

int lp_allreduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
                 lp_op_t op, int alg, size_t chunk_bytes, lp_mem_t mem) {
    return lp_request(NULL, LP_REQ_BLOCKING, LP_ALLREDUCE, comm, sbuf, rbuf, count, dt, op, 0, alg,
                      chunk_bytes, mem, NULL, LP_FLOAT32);
}

int lp_reduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
              lp_op_t op, int root, int alg, size_t chunk_bytes, lp_mem_t mem) {
    return lp_request(NULL, LP_REQ_BLOCKING, LP_REDUCE, comm, sbuf, rbuf, count, dt, op, root, alg,
                      chunk_bytes, mem, NULL, LP_FLOAT32);
}

int lp_bcast(MPI_Comm comm, void *buf, size_t count, lp_dtype_t dt, int root, int alg,
             size_t chunk_bytes, lp_mem_t mem) {
    return lp_request(NULL, LP_REQ_BLOCKING, LP_BCAST, comm, buf, buf, count, dt, LP_SUM, root, alg,
                      chunk_bytes, mem, NULL, LP_FLOAT32);
}

/* ------------------------------------------------------------------------------- requests */
static int not_blocking(const lp_req_t *r, const char *what) {
    if (!r) return LP_FAIL(LP_ERR_ARG, "%s: NULL request", what);
    if (r->kind == LP_REQ_BLOCKING) return LP_FAIL(LP_ERR_ARG, "%s: not a user request", what);
    return LP_OK;
}

/* LPMPI_AUTOTUNE: a persistent "auto" request takes its key's settled choice at a start where
 * that changed (every rank alike: the key's state is the same at the same start); the plan made
 * again as lp_call_request made it, its persistent MPI requests and LPMPI_CHECK values with it */
static int req_retune(lp_req_t *r) {
    int rc = LP_OK;
    lp_choice_t ch = {.alg = r->alg, .chunk = (size_t)r->ck[LP_CK_CHUNK], .transport = r->a.transport};
    if (!lp_autotune_settled(r->ctx, &r->at_key, r->at_esize, &ch)) return LP_OK;
    if (!lp_algos[ch.alg].chunked) ch.chunk = 0;
    if (ch.alg == r->alg && (int64_t)ch.chunk == r->ck[LP_CK_CHUNK] && ch.transport == r->a.transport)
        return LP_OK;
    lp_args_t *a = &r->a;
    const int ring_tp = ring_tp_for(r->ctx, a->coll, a->count, a->dev != NULL, ch.alg, r->at_key.nbytes,
                                    ch.transport);
    lp_req_persistent_free(r);
    r->alg = ch.alg;
    r->alg_name = lp_algos[ch.alg].name;
    a->chunk_elems = ch.chunk / a->esize ? ch.chunk / a->esize : 1;
    a->transport = ch.transport;
    a->ring_tp = ring_tp;
    r->key.alg = ch.alg;
    r->key.transport = ch.transport;
    r->key.chunk = ch.chunk;
    r->planned = 0;
    r->cached = 0;
    LP_TRY(req_plan(r));
    r->planned = 1;
    if (r->sched && r->sched->init) LP_TRY(r->sched->init(r, a));
    r->ck[LP_CK_ALG] = ch.alg;
    r->ck[LP_CK_CHUNK] = (int64_t)ch.chunk;
    r->ck[LP_CK_TP] = ch.transport;
    r->ck[LP_CK_RING_TP] = ring_tp;
cleanup:
    return rc;
}

int lp_req_choice(const lp_req_t *r, int *alg, size_t *chunk, int *transport) {
    if (!r) return LP_FAIL(LP_ERR_ARG, "NULL request");
    *alg = r->alg;
    *chunk = r->key.chunk;
    *transport = lp_tp_of_ring(r->a.ring_tp);
    return LP_OK;
}

int lp_start(lp_req_t *r) {
    int rc = LP_OK;
    LP_TRY(not_blocking(r, "lp_start"));
    if (r->kind != LP_REQ_PERSISTENT)
        return LP_FAIL(LP_ERR_ARG, "only a persistent request can be started (a nonblocking one "
                       "started when it was made)");
    if (r->state == LP_REQ_ACTIVE)
        return LP_FAIL(LP_ERR_ARG, "the persistent request is still active: wait for it before "
                       "starting it again");
    if (lp_forked) return lp_not_forked();
    if (r->finalized) return LP_FAIL(LP_ERR_ARG, "MPI was finalized");
    if (r->ctx->freed)
        return LP_FAIL(LP_ERR_ARG, "the communicator of this persistent request was freed");
    LP_TRY(acquire(r->ctx));
    const lp_args_t *a = &r->a;
    r->fr = lp_fr_enter(a->coll, LP_REQ_PERSISTENT, a->count, a->esize, a->dt, a->op, a->root, a->comp);
    if (r->fr) lp_fr_comm(r->fr, r->ctx);
    if (r->ctx->notice != lp_fr_notices() || r->ctx->lost >= 0) rc = lp_ctx_check_lost(r->ctx);
    if (rc == LP_OK && r->at_follow) rc = req_retune(r);
    if (rc == LP_OK && lp_check_enabled) rc = lp_check_agree(r->ctx, r->ck, 0);   /* the same request everywhere */
    if (rc == LP_OK) rc = req_tags(r);
    if (rc == LP_OK) rc = lp_engine_start(r);
    if (rc != LP_OK && r->fr) {
        lp_fr_end(r->fr, rc);
        r->fr = 0;
    }
    release(r->ctx);
cleanup:
    return rc;
}

int lp_test(lp_req_t *r, int *done) {
    int rc = not_blocking(r, "lp_test");
    if (rc != LP_OK) return rc;
    if (r->state != LP_REQ_ACTIVE) {        /* complete, or an inactive persistent request */
        *done = 1;
        return r->state == LP_REQ_DONE ? lp_engine_wait(r) : LP_OK;
    }
    return lp_engine_test(r, done);
}

int lp_wait(lp_req_t *r) {
    int rc = not_blocking(r, "lp_wait");
    if (rc != LP_OK) return rc;
    if (r->state == LP_REQ_INACTIVE) return LP_OK;
    return lp_engine_wait(r);
}

int lp_waitall(int n, lp_req_t *const *reqs) {
    int first = -1;
    for (int i = 0; i < n; i++)
        if (lp_wait(reqs[i]) != LP_OK && first < 0) first = i;
    return first < 0 ? LP_OK : lp_wait(reqs[first]);
}

int lp_req_active(const lp_req_t *r) { return r && r->state == LP_REQ_ACTIVE; }

int lp_req_free(lp_req_t *r) {
    int rc = not_blocking(r, "lp_req_free");
    if (rc != LP_OK) return rc;
    if (r->state == LP_REQ_ACTIVE)
        return LP_FAIL(LP_ERR_ARG, "the request is still in flight: wait for it first");
    lp_ctx_t *ctx = r->ctx;
    if (r->kind == LP_REQ_NONBLOCKING && !r->poisoned && !r->finalized) {
        lp_engine_lock();
        int keep = !ctx->freed && ctx->npool < 8;
        if (keep) {
            r->state = LP_REQ_INACTIVE;
            r->pool_next = ctx->pool;
            ctx->pool = r;
            ctx->npool++;
        }
        lp_engine_unlock();
        if (keep) return LP_OK;
    }
    req_destroy(r);
    return LP_OK;
}

/* MPI_Finalize: the MPI objects of every live request go now (the requests themselves when
 * their owners free them) */

/* ------------------------------------------------------------------------------- other entry points */
/* lpmpi.select / explain: what auto decides for a size, on comm's context if it has one (select.c) */
int lp_choose(MPI_Comm comm, lp_coll_t coll, size_t nbytes, lp_mem_t mem, int acc, int alg,
              size_t chunk_bytes, lp_choice_t *out) {
    int rc = LP_OK, size = 0;
    lp_ctx_t *ctx = NULL;
    LP_TRY(lp_ctx_find(comm, &ctx));
    if (ctx) size = ctx->size;
    else LP_MPI(MPI_Comm_size(comm, &size));
    const lp_key_t k = {.coll = coll, .P = size, .nbytes = nbytes, .mem = mem, .acc = acc != 0,
                        .nodes = ctx && ctx->nnodes > 0 ? ctx->nnodes : 1};
    rc = lp_decide(ctx, &k, alg, chunk_bytes, out);
cleanup:
    return rc;
}

int lp_comm_autotune(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int esize, lp_mem_t mem, int acc,
                     lp_at_info_t *out, int *found) {
    lp_ctx_t *ctx = NULL;
    int rc = lp_ctx_find(comm, &ctx);
    if (rc != LP_OK) return rc;
    const lp_key_t k = {.coll = coll, .nbytes = nbytes, .mem = mem, .acc = acc != 0};
    *found = ctx ? lp_autotune_key_info(ctx, &k, esize, out) : 0;
    return LP_OK;
}

/* LPMPI_CHECK on a rank whose own arguments were bad: prepare the context as a call would, then
 * take part in the agreement (check.c), so that the other ranks raise instead of hanging */
int lp_check_local_error(MPI_Comm comm) {
    lp_ctx_t *ctx;
    int rc = lp_ctx_ready(comm, &ctx, NULL);
    if (rc == LP_OK) rc = lp_check_agree(ctx, NULL, 1);
    return rc;
}
