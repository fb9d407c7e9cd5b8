/* check.c: do the ranks agree, before they communicate?
 *
 * LPMPI_CHECK, on a call: every rank contributes the values of its call (collective, count,
 * dtype, op, root, acc_dtype, memory kind), its whole decision (algorithm, chunk, the node-local
 * transport asked for and the one the ring resolved, staging buffers, the decision's size), and
 * for a persistent start which request and whether its
 * own arguments were bad; one MPI_Allgather gives every rank all of them, so every rank raises
 * the same MismatchError, naming the values and the ranks that hold them ("ranks disagree on
 * dtype: float32 on ranks 0-2, float64 on rank 3"), instead of hanging in a collective the
 * others never enter.  One collective per checked call; off by default.
 *
 * Always, on a communicator's first call (context.c, inside the table agreement's one
 * collective): the knobs that change what a rank sends or which MPI calls it makes (the
 * algorithm and chunk overrides, the transport override, and the knob table's knobs marked so:
 * lpmpi/_knobs.py, knobs.h LP_KNOBS_AGREE).  Ranks that differ would compute
 * wrong results silently or hang; every rank raises MismatchError naming the knob instead. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>

static const char *const ck_names[LP_CK_N] = {
    [LP_CK_COLL] = "collective", [LP_CK_COUNT] = "count", [LP_CK_DTYPE] = "dtype", [LP_CK_OP] = "op",
    [LP_CK_ROOT] = "root", [LP_CK_ACC] = "acc_dtype (the 16-bit data carried in float32)",
    [LP_CK_MEM] = "memory kind", [LP_CK_ALG] = "algorithm", [LP_CK_CHUNK] = "chunk_bytes",
    [LP_CK_TP] = "node-local transport asked for", [LP_CK_RING_TP] = "the ring's node-local transport",
    [LP_CK_STAGING] = "staging buffers", [LP_CK_KEY_BYTES] = "the decision's size (bytes)",
    [LP_CK_PREQ] = "persistent request (numbered as made)", [LP_CK_COMP] = "compression"};
static const char *const tp_names[LP_NTP] = {"none", "mpi", "shm", "cma"};
static const char *const ring_tp_names[] = {"mpi", "shm", "cma"};

/* field `f`'s value as the user wrote it */
static void value_text(int f, int64_t v, char *s, size_t n) {
    switch (f) {
    case LP_CK_COLL: snprintf(s, n, "%s", lp_coll_name((lp_coll_t)v)); break;
    case LP_CK_DTYPE: snprintf(s, n, "%s", lp_dtype_name((lp_dtype_t)v)); break;
    case LP_CK_OP: snprintf(s, n, "%s", v < 0 ? "(none)" : lp_op_name((lp_op_t)v)); break;
    case LP_CK_ALG: snprintf(s, n, "%s", lp_algo_name((int)v)); break;
    case LP_CK_PREQ: snprintf(s, n, v ? "#%lld" : "none", (long long)v); break;
    case LP_CK_COMP: snprintf(s, n, "%s", v ? lp_cz_name((int)v) : "None"); break;
    case LP_CK_ACC: snprintf(s, n, "%s", v < 0 ? "none" : lp_dtype_name((lp_dtype_t)v)); break;
    case LP_CK_MEM: snprintf(s, n, "%s", v == LP_MEM_HOST ? "host" : "device"); break;
    case LP_CK_TP: snprintf(s, n, "%s", v >= 0 && v < LP_NTP ? tp_names[v] : "?"); break;
    case LP_CK_RING_TP: snprintf(s, n, "%s", v < 0 ? "(no ring)" : v < 3 ? ring_tp_names[v] : "?"); break;
    default: snprintf(s, n, "%lld", (long long)v); break;
    }
}

/* append to s (capacity n, used *len) the ranks r of `all` (stride `st`) whose column `f`
 * equals `v`, as "rank 3" or "ranks 0-2, 5" */
static void ranks_text(const int64_t *all, int P, int st, int f, int64_t v, char *s, size_t n, size_t *len) {
    int count = 0;
    for (int r = 0; r < P; r++) count += all[r * st + f] == v;
    *len += (size_t)snprintf(s + *len, *len < n ? n - *len : 0, count == 1 ? "rank " : "ranks ");
    const char *sep = "";
    for (int r = 0; r < P; r++) {
        if (all[r * st + f] != v) continue;
        int e = r;
        while (e + 1 < P && all[(e + 1) * st + f] == v) e++;
        if (*len < n) {
            if (e > r) *len += (size_t)snprintf(s + *len, n - *len, "%s%d-%d", sep, r, e);
            else *len += (size_t)snprintf(s + *len, n - *len, "%s%d", sep, r);
        }
        sep = ", ";
        r = e;
    }
}

typedef void (*text_fn)(int f, int64_t v, char *s, size_t n);

/* the message for field f, on which the ranks differ: up to 4 distinct values with their ranks */
static int disagree(const int64_t *all, int P, int st, int f, const char *what, const char *name,
                    text_fn value_text) {
    char s[768], val[64];
    size_t len = (size_t)snprintf(s, sizeof s, "%s: ranks disagree on %s: ", what, name);
    int shown = 0;
    for (int r = 0; r < P && len < sizeof s; r++) {
        int64_t v = all[r * st + f];
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = all[q * st + f] == v;
        if (seen) continue;
        if (shown == 4) { len += (size_t)snprintf(s + len, sizeof s - len, ", ..."); break; }
        value_text(f, v, val, sizeof val);
        len += (size_t)snprintf(s + len, sizeof s - len, "%s%s on ", shown ? ", " : "", val);
        ranks_text(all, P, st, f, v, s, sizeof s, &len);
        shown++;
    }
    return LP_FAIL(LP_ERR_MISMATCH, "%s", s);
}

int lp_check_agree(lp_ctx_t *ctx, const int64_t *v, int local_err) {
    int rc = LP_OK;
    const int st = LP_CK_N + 1, P = ctx->size;
    int64_t mine[LP_CK_N + 1];
    int64_t *all = malloc((size_t)P * st * sizeof *all);
    if (!all) return LP_FAIL(LP_ERR_NOMEM, "LPMPI_CHECK: out of memory for %d ranks' values", P);
    /* MPI's collective order: this agreement goes after every native step issued before it
     * (sched/exec.c's tickets), so wait for the requests still holding one */
    if (ctx->nat_next != atomic_load(&ctx->nat_turn)) LP_TRY(lp_engine_drain(ctx));
    for (int i = 0; i < LP_CK_N; i++) mine[i] = v ? v[i] : 0;
    mine[LP_CK_N] = local_err;
    /* always the nonblocking form (MPI never matches a blocking collective with a nonblocking
     * one, and the wait's form depends on this rank's state): lp_mpi_wait_timed blocks in MPI
     * where it can, advances the requests in flight meanwhile (a peer may wait for one of them
     * before it gets here), and under the watchdog raises where a rank never enters */
    MPI_Request q = MPI_REQUEST_NULL;
    LP_MPI(MPI_Iallgather(mine, st, MPI_INT64_T, all, st, MPI_INT64_T, ctx->comm, &q));
    LP_TRY(lp_mpi_wait_timed(&q, "LPMPI_CHECK's agreement on this call (MPI_Iallgather)", P));
    int bad = 0;
    for (int r = 0; r < P; r++) bad += all[r * st + LP_CK_N] != 0;
    if (bad) {
        char s[512];
        size_t len = 0;
        ranks_text(all, P, st, LP_CK_N, 1, s, sizeof s, &len);
        rc = LP_FAIL(LP_ERR_MISMATCH, "LPMPI_CHECK: %s raised an argument error for this call", s);
        goto cleanup;
    }
    for (int f = 0; f < LP_CK_N; f++)
        for (int r = 1; r < P; r++)
            if (all[r * st + f] != all[f]) {
                rc = disagree(all, P, st, f, "LPMPI_CHECK", ck_names[f], value_text);
                goto cleanup;
            }
cleanup:
    free(all);
    return rc;
}


/* ---------------------------------------------------------------- knobs */
/* the values compared: per collective its algorithm and chunk overrides, the transport override,
 * then the knob table's knobs that ranks must agree on (knobs.h LP_KNOBS_AGREE, generated from
 * lpmpi/_knobs.py) */
#define KN_ID(name, value, kind) +1
enum { KN_ALG = 0, KN_CHUNK = KN_ALG + LP_NCOLLS, KN_TP = KN_CHUNK + LP_NCOLLS,
       KN_N = KN_TP + 1 LP_KNOBS_AGREE(KN_ID) };
#undef KN_ID
#define KN_NAME(name, value, kind) name,
#define KN_KIND(name, value, kind) kind,
static const char *const kn_names[KN_N - KN_TP] = {
    "the transport override (lpmpi.engine.transport)", LP_KNOBS_AGREE(KN_NAME)};
static const int kn_kinds[KN_N - KN_TP] = {LP_KT_INT, LP_KNOBS_AGREE(KN_KIND)};
#undef KN_NAME
#undef KN_KIND
/* knob f's name (the per-collective ones name their collective, from its row) */
static const char *kn_name(int f, char *buf, size_t n) {
    if (f >= KN_TP) return kn_names[f - KN_TP];
    snprintf(buf, n, "%s (%s)", f < KN_CHUNK ? "LPMPI_ALGORITHM" : "LPMPI_CHUNK_BYTES",
             lp_coll_name((lp_coll_t)(f < KN_CHUNK ? f - KN_ALG : f - KN_CHUNK)));
    return buf;
}
static void knob_text(int f, int64_t v, char *s, size_t n) {
    if (f < KN_CHUNK) snprintf(s, n, "%s", v < 0 ? "unset" : lp_algo_name((int)v));
    else if (f < KN_TP) snprintf(s, n, v ? "%lld" : "unset", (long long)v);
    else if (f == KN_TP) snprintf(s, n, "%s", v >= 0 && v < LP_NTP ? tp_names[v] : "?");
    else if (kn_kinds[f - KN_TP] == LP_KT_TRISTATE) snprintf(s, n, "%s", v < 0 ? "unset" : v ? "1" : "0");
    else if (kn_kinds[f - KN_TP] == LP_KT_NS) snprintf(s, n, v ? "%g s" : "off", (double)v / 1e9);
    else snprintf(s, n, "%lld", (long long)v);
}

static void knobs_fill(int64_t v[KN_N]) {
    for (int c = 0; c < LP_NCOLLS; c++) {
        int a;
        size_t ch;
        lp_override_get((lp_coll_t)c, &a, &ch);
        v[KN_ALG + c] = a;
        v[KN_CHUNK + c] = (int64_t)ch;
    }
    int i = KN_TP;
    v[i++] = lp_transport_override_get();
#define KN_VALUE(name, value, kind) v[i++] = (int64_t)(value);
    LP_KNOBS_AGREE(KN_VALUE)
#undef KN_VALUE
}

uint64_t lp_knobs_hash(void) {
    int64_t v[KN_N];
    uint64_t h = 0xcbf29ce484222325ull;           /* FNV-1a over the values' bytes */
    knobs_fill(v);
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int lp_knobs_disagree(lp_ctx_t *ctx) {
    int rc = LP_OK, P = ctx->size;
    int64_t mine[KN_N];
    int64_t *all = malloc((size_t)P * KN_N * sizeof *all);
    if (!all) return LP_FAIL(LP_ERR_NOMEM, "out of memory for %d ranks' settings", P);
    knobs_fill(mine);
    LP_MPI(MPI_Allgather(mine, KN_N, MPI_INT64_T, all, KN_N, MPI_INT64_T, ctx->comm));
    for (int f = 0; f < KN_N; f++)
        for (int r = 1; r < P; r++)
            if (all[r * KN_N + f] != all[f]) {
                char name[64];
                rc = disagree(all, P, KN_N, f, "lpmpi's settings differ between the ranks (set them "
                              "alike on every rank)", kn_name(f, name, sizeof name), knob_text);
                goto cleanup;
            }
    rc = LP_FAIL(LP_ERR_INTERNAL, "the ranks' settings hash differently but agree (a bug of lpmpi)");
cleanup:
    free(all);
    return rc;
}
