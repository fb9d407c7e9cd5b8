/* Engine: errors, per-communicator contexts, algorithm selection, consistency checks and the
 * three collective entry points that dispatch through the registry. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void lp_native_free(void);

/* ---------------------------------------------------------------- errors */
static _Thread_local char errbuf[1024];

const char *lp_errmsg(void) { return errbuf; }

int lp_fail(int code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    int n = snprintf(errbuf, sizeof errbuf, "%s:%d: ", file, line);
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof errbuf) vsnprintf(errbuf + n, sizeof errbuf - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

int lp_mpi_fail(int mpierr, const char *file, int line, const char *call) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpierr, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", mpierr);
    return lp_fail(LP_ERR_MPI, file, line, "%s failed: %s", call, s);
}

/* ---------------------------------------------------------------- knobs */
int lp_window = 4;
static int check_enabled;

void lp_configure(size_t max_msg_bytes, int window, int check) {
    if (max_msg_bytes) lp_max_msg_bytes = max_msg_bytes;
    if (window > 0) lp_window = window;
    check_enabled = check;
}

/* ---------------------------------------------------------------- contexts */
static int keyval = MPI_KEYVAL_INVALID;
static lp_ctx_t *live;            /* every context not yet freed */

typedef struct { lp_ctx_t c; MPI_Comm user; } ctx_node_t;

static void ctx_free(lp_ctx_t *c) {
    for (lp_ctx_t **p = &live; *p; p = &(*p)->next)
        if (*p == c) { *p = c->next; break; }
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->scratch);
    free(c->reqs);
    free(c->idx);
    free(c);
}

static int ctx_delete(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm; (void)kv; (void)extra;
    ctx_free((lp_ctx_t *)val);
    return MPI_SUCCESS;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: free everything still cached */
static int at_finalize(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm; (void)kv; (void)val; (void)extra;
    while (live) {
        ctx_node_t *n = (ctx_node_t *)live;
        if (MPI_Comm_delete_attr(n->user, keyval) != MPI_SUCCESS) ctx_free(live);
    }
    MPI_Comm_free_keyval(&keyval);
    lp_native_free();
    lp_device_release();
    return MPI_SUCCESS;
}

static int init_once(void) {
    int rc = LP_OK, fin_kv;
    if (keyval != MPI_KEYVAL_INVALID) return LP_OK;
    LP_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, ctx_delete, &keyval, NULL));
    LP_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &fin_kv, NULL));
    LP_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, fin_kv, NULL));
cleanup:
    return rc;
}

int lp_ctx_get(MPI_Comm user, lp_ctx_t **out) {
    int rc = LP_OK, flag = 0;
    void *val = NULL;
    ctx_node_t *n = NULL;
    LP_TRY(init_once());
    LP_MPI(MPI_Comm_get_attr(user, keyval, &val, &flag));
    if (flag) { *out = val; return LP_OK; }
    n = calloc(1, sizeof *n);
    if (!n) return LP_FAIL(LP_ERR_NOMEM, "out of memory for a communicator context");
    n->c.comm = MPI_COMM_NULL;
    n->user = user;
    LP_MPI(MPI_Comm_dup(user, &n->c.comm));
    LP_MPI(MPI_Comm_rank(n->c.comm, &n->c.rank));
    LP_MPI(MPI_Comm_size(n->c.comm, &n->c.size));
    LP_MPI(MPI_Comm_set_attr(user, keyval, &n->c));
    n->c.next = live;
    live = &n->c;
    *out = &n->c;
    return LP_OK;
cleanup:
    if (n) {
        if (n->c.comm != MPI_COMM_NULL) MPI_Comm_free(&n->c.comm);
        free(n);
    }
    return rc;
}

int lp_ctx_scratch(lp_ctx_t *ctx, size_t bytes, void **out) {
    if (bytes > ctx->scratch_bytes) {
        void *p = NULL;
        size_t want = (bytes + 63) & ~(size_t)63;
        if (posix_memalign(&p, 64, want) != 0)
            return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu bytes of scratch space", want);
        free(ctx->scratch);
        ctx->scratch = p;
        ctx->scratch_bytes = want;
    }
    *out = ctx->scratch;
    return LP_OK;
}

/* grow a cached array to at least n elements of `size` bytes (contents not kept) */
static int grow(void **arr, size_t *cap, size_t n, size_t size, const char *what) {
    if (n > *cap) {
        void *r = realloc(*arr, n * size);
        if (!r) return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu %s", n, what);
        *arr = r;
        *cap = n;
    }
    return LP_OK;
}

int lp_ctx_indices(lp_ctx_t *ctx, size_t n, int **out) {
    int rc = grow((void **)&ctx->idx, &ctx->nidx, n, sizeof *ctx->idx, "request indices");
    *out = ctx->idx;
    return rc;
}

int lp_ctx_requests(lp_ctx_t *ctx, size_t n, MPI_Request **out) {
    int rc = grow((void **)&ctx->reqs, &ctx->nreqs, n, sizeof *ctx->reqs, "MPI requests");
    *out = ctx->reqs;
    return rc;
}

/* ---------------------------------------------------------------- registry access */
int lp_algo_count(void) { return lp_nalgos; }
const char *lp_algo_name(int i) { return i >= 0 && i < lp_nalgos ? lp_algos[i].name : "?"; }
int lp_algo_coll(int i) { return i >= 0 && i < lp_nalgos ? (int)lp_algos[i].coll : -1; }
int lp_algo_chunked(int i) { return i >= 0 && i < lp_nalgos ? lp_algos[i].chunked : 0; }
int lp_algo_find(lp_coll_t coll, const char *name) {
    for (int i = 0; i < lp_nalgos; i++)
        if (lp_algos[i].coll == coll && strcmp(lp_algos[i].name, name) == 0) return i;
    return -1;
}

/* generation of everything "auto" reads (model, table, overrides): cached decisions from an
 * older generation are stale.  Starts at 1 so zeroed cache entries never match. */
static unsigned long select_gen = 1;

/* ---------------------------------------------------------------- model */
/* defaults for a 2-core VM with the mpich wheel: alpha is the effective per-chunk cost of
 * a pipeline step (latency plus the rendezvous handshake), which sets the chunk size;
 * lpmpi.model refits all three on the running machine */
static lp_model_t model = {8e-6, 0.2e-9, 0.15e-9};

void lp_model_set(double a, double b, double g) {
    model.alpha = a; model.beta = b; model.gamma = g;
    select_gen++;
}
void lp_model_get(double *a, double *b, double *g) { *a = model.alpha; *b = model.beta; *g = model.gamma; }

double lp_algo_predict(int alg, int P, double n, double c) {
    if (alg < 0 || alg >= lp_nalgos || P < 1) return -1;
    if (P == 1) return n * model.beta;
    return lp_algos[alg].cost(&model, P, n, c);
}

size_t lp_best_chunk(int alg, int P, size_t nbytes) {
    if (alg < 0 || alg >= lp_nalgos || !lp_algos[alg].chunked) return 0;
    size_t best = (size_t)1 << 10;
    double tbest = -1;
    for (size_t c = (size_t)1 << 10; c <= ((size_t)1 << 24) && c <= lp_max_msg_bytes; c <<= 1) {
        double t = lp_algo_predict(alg, P, (double)nbytes, (double)c);
        if (tbest < 0 || t < tbest) { tbest = t; best = c; }
        if (c >= nbytes) break;
    }
    return best;
}

/* ---------------------------------------------------------------- tables and overrides */
typedef struct { int coll, mem, P, alg; double lo, hi; size_t chunk; int staging; } row_t;
static row_t *rows;
static size_t nrows, cap_rows;
static int ovr_alg[LP_NCOLLS] = {-1, -1, -1};
static size_t ovr_chunk[LP_NCOLLS];

static uint64_t table_hash;
static long table_mismatch;

void lp_table_clear(void) { nrows = 0; table_hash = 0; select_gen++; }
void lp_table_set_hash(uint64_t h) { table_hash = h; }
long lp_table_mismatches(void) { return table_mismatch; }

/* first collective on a communicator: do all ranks hold the same table? */
static int table_agree(lp_ctx_t *ctx) {
    int rc = LP_OK;
    uint64_t h[2] = {table_hash, ~table_hash};
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, ctx->comm));
    ctx->table_state = (h[0] == table_hash && h[1] == ~table_hash) ? 1 : -1;
    if (ctx->table_state < 0) table_mismatch++;
cleanup:
    return rc;
}

int lp_table_add(lp_coll_t coll, lp_mem_t mem, int P, double lo, double hi, int alg, size_t chunk,
                 int staging) {
    if (alg < 0 || alg >= lp_nalgos || lp_algos[alg].coll != coll || P < 1 || !(lo < hi) ||
        (int)mem < 0 || mem >= LP_NMEMS || staging < 0 || staging > LP_MAX_EVENTS / 4)
        return LP_FAIL(LP_ERR_ARG, "invalid tuning row");
    if (nrows == cap_rows) {
        size_t cap = cap_rows ? 2 * cap_rows : 64;
        row_t *r = realloc(rows, cap * sizeof *r);
        if (!r) return LP_FAIL(LP_ERR_NOMEM, "out of memory for tuning rows");
        rows = r;
        cap_rows = cap;
    }
    rows[nrows++] = (row_t){(int)coll, (int)mem, P, alg, lo, hi, chunk, staging};
    select_gen++;
    return LP_OK;
}

void lp_set_override(lp_coll_t coll, int alg, size_t chunk) {
    if ((int)coll < 0 || coll >= LP_NCOLLS) return;
    ovr_alg[coll] = alg;
    ovr_chunk[coll] = chunk;
    select_gen++;
}

void lp_select(lp_coll_t coll, int P, size_t nbytes, lp_mem_t mem, int use_table, int *alg, size_t *chunk,
               int *staging, int *source) {
    double n = (double)nbytes;
    int a = -1, w = 0;
    size_t c = 0;
    if (ovr_alg[coll] >= 0) {                                 /* 1. environment */
        a = ovr_alg[coll];
        *source = LP_SRC_OVERRIDE;
    }
    for (size_t i = 0; use_table && a < 0 && i < nrows; i++) {   /* 2. tuning table */
        const row_t *r = &rows[i];
        if (r->coll == (int)coll && r->mem == (int)mem && r->P == P && r->lo <= n && n < r->hi) {
            a = r->alg;
            c = r->chunk;
            w = r->staging;
            *source = LP_SRC_TABLE;
        }
    }
    if (a < 0) {                                              /* 3. cost model */
        double tbest = 0;
        for (int i = 0; i < lp_nalgos; i++) {
            if (lp_algos[i].coll != coll) continue;
            size_t ci = (ovr_chunk[coll] && lp_algos[i].chunked) ? ovr_chunk[coll] : lp_best_chunk(i, P, nbytes);
            double t = lp_algo_predict(i, P, n, (double)ci);
            if (a < 0 || t < tbest) { a = i; tbest = t; c = ci; }
        }
        *source = LP_SRC_MODEL;
    }
    if (!lp_algos[a].chunked) c = 0;
    else if (ovr_chunk[coll]) { c = ovr_chunk[coll]; *source = LP_SRC_OVERRIDE; }
    else if (!c) c = lp_best_chunk(a, P, nbytes);
    *alg = a;
    *chunk = c;
    *staging = w;
}

/* ---------------------------------------------------------------- consistency check */
enum { CK_COLL, CK_COUNT, CK_DTYPE, CK_OP, CK_ROOT, CK_ALG, CK_CHUNK, CK_N };
static const char *const ck_names[CK_N] = {"collective", "count", "dtype", "op", "root",
                                           "algorithm", "chunk_bytes"};

/* every rank contributes its values and an error flag; MAX of (v, -v, err) tells all ranks
 * whether anyone differs */
static int agree(lp_ctx_t *ctx, const int64_t *v, int local_err) {
    int rc = LP_OK;
    int64_t buf[2 * CK_N + 1];
    for (int i = 0; i < CK_N; i++) { buf[i] = v ? v[i] : 0; buf[CK_N + i] = v ? -v[i] : 0; }
    buf[2 * CK_N] = local_err;
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, 2 * CK_N + 1, MPI_INT64_T, MPI_MAX, ctx->comm));
    if (buf[2 * CK_N])
        return LP_FAIL(LP_ERR_MISMATCH, "LPMPI_CHECK: an argument error on another rank");
    for (int i = 0; i < CK_N; i++)
        if (buf[i] != -buf[CK_N + i])
            return LP_FAIL(LP_ERR_MISMATCH, "LPMPI_CHECK: ranks disagree on %s (min %lld, max %lld)",
                           ck_names[i], (long long)-buf[CK_N + i], (long long)buf[i]);
cleanup:
    return rc;
}

int lp_check_local_error(MPI_Comm comm) {
    lp_ctx_t *ctx;
    int rc = lp_ctx_get(comm, &ctx);
    if (rc == LP_OK) rc = agree(ctx, NULL, 1);
    return rc;
}

/* ---------------------------------------------------------------- dispatch */
/* one rank: the result is the input (a logical op gives 0 or 1) */
static int run_single_rank(const lp_args_t *a) {
    size_t nbytes = a->count * a->esize;
    int logical = a->op == LP_LAND || a->op == LP_LOR || a->op == LP_LXOR;
    if (a->coll == LP_BCAST) return LP_OK;
    if (!a->dev) {
        if (logical) lp_reduce_kernel(a->dt, LP_LOR)(a->rbuf, a->sbuf, a->sbuf, a->count);
        else lp_copy(a, a->rbuf, a->sbuf, nbytes);
        return LP_OK;
    }
    int rc = LP_OK;
    if (logical) LP_TRY(a->dev->reduce(a->rbuf, a->sbuf, a->sbuf, a->count, a->dt, LP_LOR, 0));
    else if (a->rbuf != a->sbuf) LP_TRY(a->dev->d2d(a->rbuf, a->sbuf, nbytes, 0));
    LP_TRY(a->dev->sync(0));
cleanup:
    return rc;
}

static int run(lp_coll_t coll, MPI_Comm comm, const void *sbuf, void *rbuf, size_t count,
               lp_dtype_t dt, lp_op_t op, int root, int alg, size_t chunk_bytes, lp_mem_t mem) {
    int rc = LP_OK, size, src, staging = 0, bound = 0, saved = 0, xport;
    const lp_devops_t *dev;
    lp_ctx_t *ctx;
    if ((int)dt < 0 || dt >= LP_NDTYPES) return LP_FAIL(LP_ERR_ARG, "unknown dtype %d", (int)dt);
    if ((int)mem < 0 || mem >= LP_NMEMS) return LP_FAIL(LP_ERR_ARG, "unknown memory kind %d", (int)mem);
    lp_reduce_fn fn = NULL;
    if (coll != LP_BCAST && !(fn = lp_reduce_kernel(dt, op)))
        return LP_FAIL(LP_ERR_ARG, "op %s is not defined on %s", lp_op_name(op), lp_dtype_name(dt));
    LP_TRY(lp_device_route(mem, &dev, &xport));
    if (dev) mem = LP_MEM_CUDA;                   /* emulation selects as for device memory */
    LP_TRY(lp_ctx_get(comm, &ctx));
    size = ctx->size;
    if (!ctx->table_state) LP_TRY(table_agree(ctx));
    if (root < 0 || root >= size) return LP_FAIL(LP_ERR_ARG, "root %d out of range", root);
    size_t esize = lp_dtype_size(dt), nbytes = count * esize;
    if (alg == LP_ALG_AUTO) {
        size_t c;
        if (ctx->last[coll].gen == select_gen && ctx->last[coll].nbytes == nbytes &&
            ctx->last[coll].mem == (int)mem) {
            alg = ctx->last[coll].alg;
            c = ctx->last[coll].chunk;
            staging = ctx->last[coll].staging;
        } else {
            lp_select(coll, size, nbytes, mem, ctx->table_state > 0, &alg, &c, &staging, &src);
            ctx->last[coll].gen = select_gen;
            ctx->last[coll].nbytes = nbytes;
            ctx->last[coll].mem = (int)mem;
            ctx->last[coll].alg = alg;
            ctx->last[coll].chunk = c;
            ctx->last[coll].staging = staging;
        }
        if (!chunk_bytes) chunk_bytes = c;
    } else if (alg < 0 || alg >= lp_nalgos || lp_algos[alg].coll != coll) {
        return LP_FAIL(LP_ERR_ARG, "algorithm %d is not a %s algorithm", alg,
                       coll == LP_BCAST ? "bcast" : coll == LP_REDUCE ? "reduce" : "allreduce");
    }
    const lp_algo_t *A = &lp_algos[alg];
    if (!A->chunked) chunk_bytes = 0;
    else if (!chunk_bytes) chunk_bytes = lp_best_chunk(alg, size, nbytes);
    if (chunk_bytes > lp_max_msg_bytes) chunk_bytes = lp_max_msg_bytes;
    if (check_enabled) {
        int64_t v[CK_N] = {coll, (int64_t)count, dt, coll == LP_BCAST ? -1 : (int64_t)op,
                           coll == LP_ALLREDUCE ? -1 : root, alg, (int64_t)chunk_bytes};
        LP_TRY(agree(ctx, v, 0));
    }
    if (count == 0) return LP_OK;
    lp_args_t a = {
        .ctx = ctx, .comm = ctx->comm, .rank = ctx->rank, .size = size, .coll = coll,
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt, .esize = esize, .op = op, .fn = fn,
        .root = root, .chunk_elems = chunk_bytes / esize ? chunk_bytes / esize : 1, .mem = mem,
        .dev = dev, .xport = xport, .staging = (size_t)(staging > 0 ? staging : lp_staging),
    };
    if (dev) {
        LP_TRY(dev->bind(sbuf ? sbuf : rbuf, &saved));
        bound = 1;
    }
    if (size == 1) rc = run_single_rank(&a);
    else if (xport == LP_XPORT_STAGED) rc = A->staged ? A->staged(&a) : lp_stage_whole(&a, A->run);
    else rc = A->run(&a);
cleanup:
    if (bound) {
        if (rc != LP_OK) dev->sync(-1);   /* nothing of this call may still run afterwards */
        dev->unbind(saved);
    }
    return rc;
}

int lp_allreduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
                 lp_op_t op, int alg, size_t chunk_bytes, lp_mem_t mem) {
    return run(LP_ALLREDUCE, comm, sbuf, rbuf, count, dt, op, 0, alg, chunk_bytes, mem);
}

int lp_reduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
              lp_op_t op, int root, int alg, size_t chunk_bytes, lp_mem_t mem) {
    return run(LP_REDUCE, comm, sbuf, rbuf, count, dt, op, root, alg, chunk_bytes, mem);
}

int lp_bcast(MPI_Comm comm, void *buf, size_t count, lp_dtype_t dt, int root, int alg,
             size_t chunk_bytes, lp_mem_t mem) {
    return run(LP_BCAST, comm, buf, buf, count, dt, LP_SUM, root, alg, chunk_bytes, mem);
}
