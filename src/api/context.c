/* context.c: the private context of each communicator lpmpi is used on.
 *
 * Cached on the user's communicator with an MPI keyval (as mpi4py does) and freed by the
 * keyval's delete callback when the user frees the communicator, or at MPI_Finalize at the
 * latest.  A context holds a private duplicate of the communicator (lpmpi's messages never
 * match the user's: an MPI_Comm_dup, one more context id of the MPI library per communicator
 * lpmpi is used on), the requests made on it (the blocking calls' one, reused call after call,
 * and a small pool of finished nonblocking ones), the count of requests started on it (which
 * gives each start its own range of tags), auto's last decisions, and the outcome of the table
 * agreement of its first call:
 *
 *   every rank contributes the fingerprint of its tuning table (lpmpi/tables.py's hash of the
 *   rows and the model); if any differs, rank 0 broadcasts its rows and model and every rank
 *   decides from those on this communicator (lp_decide), so ranks never choose differently.
 *
 * The agreement is part of preparing a context (lp_ctx_ready), which the collectives and the
 * LPMPI_CHECK path of a rank with a local argument error both do first, so the internal
 * collectives of a first call are the same on every rank whatever the local outcome. */
#include "engine.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the keyval, the list of live contexts and their counters are shared by every thread: one
 * lock around them (never held across a collective MPI call) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int keyval = MPI_KEYVAL_INVALID;
static lp_ctx_t *live;            /* every context not yet freed */
static long nlive;
static long mismatches;           /* contexts whose ranks held different tables */

/* the last context each thread looked up (every call looks up its communicator's context, an
 * MPI attribute search): valid while no context has been freed since (generation) */
static atomic_ulong freed_gen;
static _Thread_local struct { MPI_Comm user; lp_ctx_t *ctx; unsigned long gen; } last = {MPI_COMM_NULL, NULL, 0};

static inline lp_ctx_t *cached(MPI_Comm user) {
    return last.ctx && last.user == user && last.gen == atomic_load_explicit(&freed_gen, memory_order_acquire)
               ? last.ctx : NULL;
}
static inline void remember(MPI_Comm user, lp_ctx_t *ctx) {
    last.user = user;
    last.ctx = ctx;
    last.gen = atomic_load_explicit(&freed_gen, memory_order_acquire);
}

long lp_comm_contexts(void) { return nlive; }
long lp_table_mismatches(void) { return mismatches; }

/* the communicator is freed (or MPI finalized): complete what runs on it, free its requests
 * and its duplicate; the context itself goes when the last request pointing at it does */
/* what ends with a context and with the library (lifecycle.c installs them at load: the
 * requests of a context, the engine at MPI_Finalize; context.c never calls up into them) */
static void (*teardown_hook)(lp_ctx_t *);
static void (*finalize_hook)(void);
void lp_ctx_set_hooks(void (*teardown)(lp_ctx_t *), void (*finalize)(void)) {
    teardown_hook = teardown;
    finalize_hook = finalize;
}

static void ctx_free(lp_ctx_t *c) {
    atomic_fetch_add_explicit(&freed_gen, 1, memory_order_acq_rel);
    pthread_mutex_lock(&lock);
    for (lp_ctx_t **p = &live; *p; p = &(*p)->next)
        if (*p == c) { *p = c->next; nlive--; break; }
    pthread_mutex_unlock(&lock);
    if (teardown_hook) teardown_hook(c);   /* its requests completed and destroyed */
    lp_autotune_detach(c);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->node);
    free(c->order);
    free(c->pos);
    free(c->hosts);
    free(c->alive);
    c->alive = NULL;
    c->node = c->order = c->pos = NULL;
    c->hosts = NULL;
    lp_node_transports_close(c);
    free(c->skip);
    c->skip = NULL;
    if (c->table) { lp_table_free(c->table); free(c->table); }
    c->table = NULL;
    lp_engine_lock();
    c->freed = 1;
    int last = c->refs == 0;
    lp_engine_unlock();
    if (last) free(c);
}

/* (engine lock held) a request let go of c */
void lp_ctx_unref(lp_ctx_t *c) {
    if (--c->refs == 0 && c->freed) free(c);
}

static int ctx_delete(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm; (void)kv; (void)extra;
    if (lp_forked) return MPI_SUCCESS;   /* a forked child: the parent's context is left alone */
    ctx_free((lp_ctx_t *)val);
    return MPI_SUCCESS;
}

/* every context still cached, freed (lifecycle.c's finalize calls it in its order) */
void lp_ctx_free_all(void) {
    while (live)
        if (MPI_Comm_delete_attr(live->user, keyval) != MPI_SUCCESS) ctx_free(live);
    MPI_Comm_free_keyval(&keyval);
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: the library's end (lifecycle.c) */
static int at_finalize(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm; (void)kv; (void)val; (void)extra;
    if (lp_forked) return MPI_SUCCESS;   /* a forked child: nothing of the parent's is touched */
    if (finalize_hook) finalize_hook();
    else lp_ctx_free_all();
    return MPI_SUCCESS;
}

static int init_once(void) {
    int rc = LP_OK, fin_kv, kv = MPI_KEYVAL_INVALID;
    pthread_mutex_lock(&lock);
    if (keyval != MPI_KEYVAL_INVALID) goto cleanup;
    LP_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, ctx_delete, &kv, NULL));
    LP_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &fin_kv, NULL));
    LP_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, fin_kv, NULL));
    keyval = kv;
cleanup:
    pthread_mutex_unlock(&lock);
    return rc;
}

int lp_ctx_find(MPI_Comm user, lp_ctx_t **out) {
    int rc = LP_OK, flag = 0;
    void *val = NULL;
    if ((*out = cached(user))) return LP_OK;
    if (keyval == MPI_KEYVAL_INVALID) return LP_OK;
    LP_MPI(MPI_Comm_get_attr(user, keyval, &val, &flag));
    if (flag) remember(user, *out = val);
cleanup:
    return rc;
}

int lp_ctx_get(MPI_Comm user, lp_ctx_t **out) {
    int rc = LP_OK, flag = 0;
    void *val = NULL;
    lp_ctx_t *c = NULL;
    if ((*out = cached(user))) return LP_OK;
    LP_TRY(init_once());
    LP_MPI(MPI_Comm_get_attr(user, keyval, &val, &flag));
    if (flag) { remember(user, *out = val); return LP_OK; }
    c = calloc(1, sizeof *c);
    if (!c) return LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator context");
    c->comm = MPI_COMM_NULL;
    c->tcomm = MPI_COMM_NULL;
    c->user = user;
    c->lost = -1;
    {   /* every rank is here (a nonblocking barrier: LPMPI_TIMEOUT, agreed only after this,
         * may be set on some ranks; the watchdog's wait, where it is on, fails if a rank never
         * enters this first call), then the duplicate, blocking.  Not MPI_Comm_idup: MPICH's
         * nonblocking context-id agreement, beside a blocking one of another thread (this
         * function's MPI_Comm_split_type for another communicator), livelocked about once in
         * 1000 runs of four threads' first calls on four communicators (issue 41: both ranks
         * spinning, one thread in MPI_Comm_split_type, one in the MPI_Comm_idup's wait); the
         * blocking agreements order themselves (the lowest context id goes first) */
        MPI_Request q = MPI_REQUEST_NULL;
        MPI_Comm dup = MPI_COMM_NULL;
        int P = 0;
        LP_MPI(MPI_Comm_size(user, &P));
        LP_MPI(MPI_Ibarrier(user, &q));
        rc = lp_mpi_wait_timed(&q, "the first lpmpi collective on this communicator (its ranks' barrier)", P);
        if (rc != LP_OK) goto cleanup;     /* the pending barrier is left to MPI */
        LP_MPI(MPI_Comm_dup(user, &dup));
        c->comm = dup;
    }
    LP_MPI(MPI_Comm_rank(c->comm, &c->rank));
    LP_MPI(MPI_Comm_size(c->comm, &c->size));
    int *ub = NULL, has_ub = 0;
    LP_MPI(MPI_Comm_get_attr(c->comm, MPI_TAG_UB, &ub, &has_ub));
    /* tag ranges of LP_TAGS_PER_REQ tags: at least 32767 / 8 (MPI's guaranteed tag bound) */
    long ntags = has_ub && ub && *ub > 0 ? (long)*ub + 1 : 32768;
    c->nslots = 1;                /* a power of two: a start's range is seq mod nslots */
    while (c->nslots * 2 <= (unsigned long)(ntags / LP_TAGS_PER_REQ) && c->nslots < (1ul << 20))
        c->nslots *= 2;
    LP_MPI(MPI_Comm_set_attr(user, keyval, c));
    pthread_mutex_lock(&lock);
    c->next = live;
    live = c;
    nlive++;
    pthread_mutex_unlock(&lock);
    remember(user, *out = c);
    return LP_OK;
cleanup:
    if (c) {
        if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
        free(c);
    }
    return rc;
}

/* rank 0's rows and model to every rank of ctx (tables differ) */
static int adopt_rank0(lp_ctx_t *ctx) {
    int rc = LP_OK;
    double m[5] = {lp_model.alpha, lp_model.beta, lp_model.gamma, lp_model.alpha_net, lp_model.beta_net};
    uint64_t n = ctx->rank == 0 ? lp_table.nrows : 0;
    lp_table_t *t = calloc(1, sizeof *t);
    if (!t) return LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator's table");
    if (ctx->rank == 0) LP_TRY(lp_table_copy(t, &lp_table));
    LP_MPI(MPI_Bcast(m, 5, MPI_DOUBLE, 0, ctx->comm));
    LP_MPI(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, ctx->comm));
    if (ctx->rank != 0 && n) {
        t->rows = calloc((size_t)n, sizeof *t->rows);
        if (!t->rows) { rc = LP_FAIL(LP_ERR_NOMEM, "out of memory for %llu table rows", (unsigned long long)n); goto cleanup; }
        t->nrows = t->cap = (size_t)n;
    }
    if (n) LP_MPI(MPI_Bcast(t->rows, (int)(n * sizeof *t->rows), MPI_BYTE, 0, ctx->comm));
    ctx->model = (lp_model_t){m[0], m[1], m[2], m[3], m[4]};
    ctx->table = t;
    return LP_OK;
cleanup:
    lp_table_free(t);
    free(t);
    return rc;
}

/* the flight recorder learns the communicator: id, size, this rank, its world ranks */
static void fr_register(const lp_ctx_t *ctx) {
    MPI_Group g = MPI_GROUP_NULL, w = MPI_GROUP_NULL;
    int *in = malloc(2 * (size_t)ctx->size * sizeof *in), ok = 0;
    if (in && MPI_Comm_group(ctx->comm, &g) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &w) == MPI_SUCCESS) {
        for (int i = 0; i < ctx->size; i++) in[i] = i;
        ok = MPI_Group_translate_ranks(g, ctx->size, in, w, in + ctx->size) == MPI_SUCCESS;
    }
    if (g != MPI_GROUP_NULL) MPI_Group_free(&g);
    if (w != MPI_GROUP_NULL) MPI_Group_free(&w);
    lp_fr_comm_add(ctx->id, ctx->size, ctx->rank, ok ? in + ctx->size : NULL);
    lp_fr_watch_arm();
    free(in);
}

/* first collective on a communicator: do all ranks hold the same table, and the same knobs
 * (check.c: those differing raise MismatchError on every rank, on every call, the context
 * staying unprepared)? */
static int table_agree(lp_ctx_t *ctx, int *first_mismatch) {
    int rc = LP_OK;
    const uint64_t k = lp_knobs_hash();
    /* h[4]: the communicator's id, rank 0's proposal (its world rank + 1, and its count of
     * contexts: unique in the job), the same on every rank after the MAX */
    static atomic_ulong made;
    int wr = 0;
    LP_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &wr));
    uint64_t h[5] = {lp_table.hash, ~lp_table.hash, k, ~k,
                     ctx->rank == 0 ? ((uint64_t)(wr + 1) << 32) | (atomic_fetch_add(&made, 1) + 1) : 0};
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, h, 5, MPI_UINT64_T, MPI_MAX, ctx->comm));
    if (!ctx->id) {                 /* (knobs that differ bring every call back here) */
        ctx->id = h[4];
        fr_register(ctx);
    }
    if (h[2] != k || h[3] != ~k) return lp_knobs_disagree(ctx);   /* every rank sees it */
    if (h[0] == lp_table.hash && h[1] == ~lp_table.hash) {
        ctx->tables = 1;
        return LP_OK;
    }
    LP_TRY(adopt_rank0(ctx));
    ctx->tables = -1;
    mismatches++;
    if (first_mismatch) *first_mismatch = 1;
cleanup:
    return rc;
}

/* first collective on a communicator: which ranks share a node (MPI_Comm_split_type), and, on
 * more than one node, the ranks in node order (then rank order) that chains and rings follow */
static int node_map(lp_ctx_t *ctx) {
    int rc = LP_OK, lead = ctx->rank, P = ctx->size;
    MPI_Comm node = MPI_COMM_NULL;
    /* with each rank's node, its process (id, start time): the liveness of the node's ranks */
    typedef struct { int64_t lead, pid; uint64_t since; } who_t;
    who_t me = {0, (int64_t)getpid(), 0}, *all = malloc((size_t)P * sizeof *all);
    int *nd = malloc((size_t)P * sizeof *nd), *order = NULL, *pos = NULL;
    if (!nd || !all) {
        free(nd);
        free(all);
        return LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator's node map");
    }
    LP_MPI(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, &lead, 1, MPI_INT, MPI_MIN, node));
    me.lead = lead;
    me.since = lp_proc_since((int)me.pid);
    LP_MPI(MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, ctx->comm));
    for (int r = 0; r < P; r++) nd[r] = (int)all[r].lead;
    if (!(ctx->alive = calloc((size_t)P, sizeof *ctx->alive))) {
        rc = LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator's node map");
        goto cleanup;
    }
    for (int r = 0; r < P; r++)          /* the other ranks of this node whose /proc entry is seen */
        if (r != ctx->rank && nd[r] == lead && all[r].since)
            ctx->alive[r] = (lp_proc_t){(int)all[r].pid, all[r].since};
    int nnodes = 0;
    for (int r = 0; r < P; r++) nnodes += nd[r] == r;
    if (nnodes > 1) {
        order = malloc((size_t)P * sizeof *order);
        pos = malloc((size_t)P * sizeof *pos);
        if (!order || !pos) { rc = LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator's node map"); goto cleanup; }
        /* a stable counting sort by node (its lowest rank): nodes in the order of their lowest
         * ranks, each node's ranks in rank order; pos is the bucket start, then the inverse */
        for (int r = 0; r < P; r++) pos[r] = 0;
        for (int r = 0; r < P; r++) pos[nd[r]]++;
        for (int l = 0, k = 0; l < P; l++) { int c = pos[l]; pos[l] = k; k += c; }
        for (int r = 0; r < P; r++) order[pos[nd[r]]++] = r;
        for (int k = 0; k < P; k++) pos[order[k]] = k;
        /* the hosts' names, for the watchdog's messages (one allgather, on the first call) */
        char mine[MPI_MAX_PROCESSOR_NAME + 1] = "", buf[LP_HOST_LEN] = {0};
        int len = 0;
        ctx->hosts = calloc((size_t)P, LP_HOST_LEN);
        if (!ctx->hosts) { rc = LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator's node map"); goto cleanup; }
        LP_MPI(MPI_Get_processor_name(mine, &len));
        snprintf(buf, sizeof buf, "%s", mine);         /* cut to LP_HOST_LEN - 1, zero-padded */
        LP_MPI(MPI_Allgather(buf, LP_HOST_LEN, MPI_CHAR, ctx->hosts, LP_HOST_LEN, MPI_CHAR, ctx->comm));
    }
    ctx->node = nd;
    ctx->order = order;
    ctx->pos = pos;
    ctx->nnodes = nnodes;
    nd = order = pos = NULL;
cleanup:
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    free(all);
    free(nd);
    free(order);
    free(pos);
    return rc;
}

int lp_comm_transport(MPI_Comm comm, int *why) {
    lp_ctx_t *ctx = NULL;
    int rc = lp_ctx_find(comm, &ctx);
    if (rc != LP_OK) return rc;
    if (!ctx || !ctx->node) return LP_FAIL(LP_ERR_ARG, "no collective ran on this communicator yet");
    *why = ctx->nt_why;
    return LP_OK;
}

int lp_comm_ring_transport(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int requested, int *which) {
    lp_ctx_t *ctx = NULL;
    int rc = lp_ctx_find(comm, &ctx);
    if (rc != LP_OK) return rc;
    if (!ctx || !ctx->node) return LP_FAIL(LP_ERR_ARG, "no collective ran on this communicator yet");
    if ((unsigned)coll >= LP_NCOLLS) return LP_FAIL(LP_ERR_ARG, "unknown collective %d", (int)coll);
    *which = lp_ring_transport(ctx->shm != NULL && lp_traits(coll)->shm, ctx->pids != NULL, nbytes, requested);
    return LP_OK;
}

void lp_node_transport_sizes(size_t out[3]) {
    out[0] = lp_nt_rule.shm_min;
    out[1] = lp_nt_rule.cma_min;
    out[2] = lp_nt_rule.shm_max;
}

int lp_comm_nodes(MPI_Comm comm, int *nnodes, int *node) {
    lp_ctx_t *ctx = NULL;
    int rc = lp_ctx_find(comm, &ctx);
    if (rc != LP_OK) return rc;
    if (!ctx || !ctx->node) return LP_FAIL(LP_ERR_ARG, "no collective ran on this communicator yet");
    *nnodes = ctx->nnodes;
    if (node) memcpy(node, ctx->node, (size_t)ctx->size * sizeof *node);
    return LP_OK;
}

int lp_ctx_ready(MPI_Comm user, lp_ctx_t **out, int *first_mismatch) {
    int rc = LP_OK;
    lp_ctx_t *ctx = NULL;
    if (first_mismatch) *first_mismatch = 0;
    LP_TRY(lp_ctx_get(user, &ctx));
    if (!ctx->node) {
        LP_TRY(node_map(ctx));
        LP_TRY(lp_node_transports_open(ctx));
    }
    if (!ctx->tables) {
        LP_TRY(table_agree(ctx, first_mismatch));
        LP_TRY(lp_autotune_open(ctx));       /* (the knobs agree: every rank or none) */
    }
    *out = ctx;
cleanup:
    return rc;
}

int lp_comm_ready(MPI_Comm comm) {
    lp_ctx_t *ctx = NULL;
    return lp_ctx_find(comm, &ctx) == LP_OK && ctx && ctx->tables != 0;
}

int lp_comm_known(MPI_Comm comm) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (lp_ctx_t *c = live; c && !found; c = c->next)
        found = c->user == comm && c->tables != 0;
    pthread_mutex_unlock(&lock);
    return found;
}

int lp_comm_prepare(MPI_Comm comm, int *first_mismatch) {
    lp_ctx_t *ctx;
    return lp_ctx_ready(comm, &ctx, first_mismatch);
}
