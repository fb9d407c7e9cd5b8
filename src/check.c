/* check.c: LPMPI_CHECK, do the ranks agree on a call before it communicates?
 *
 * Every rank contributes the values of its call (collective, count, dtype, op, root,
 * algorithm, chunk) and whether its own arguments were bad; one MPI_Allgather gives every
 * rank all of them, so every rank raises the same MismatchError, naming the values and the
 * ranks that hold them ("ranks disagree on dtype: float32 on ranks 0-2, float64 on rank 3"),
 * instead of hanging in a collective the others never enter.  One collective per checked
 * call; off by default. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>

static const char *const ck_names[LP_CK_N] = {"collective", "count", "dtype", "op", "root",
                                              "algorithm", "chunk_bytes"};

/* field `f`'s value as the user wrote it */
static void value_text(int f, int64_t v, char *s, size_t n) {
    switch (f) {
    case LP_CK_COLL: snprintf(s, n, "%s", lp_coll_name((lp_coll_t)v)); break;
    case LP_CK_DTYPE: snprintf(s, n, "%s", lp_dtype_name((lp_dtype_t)v)); break;
    case LP_CK_OP: snprintf(s, n, "%s", v < 0 ? "(none)" : lp_op_name((lp_op_t)v)); break;
    case LP_CK_ALG: snprintf(s, n, "%s", lp_algo_name((int)v)); break;
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

/* the message for field f, on which the ranks differ: up to 4 distinct values with their ranks */
static int disagree(const int64_t *all, int P, int st, int f) {
    char s[768], val[64];
    size_t len = (size_t)snprintf(s, sizeof s, "LPMPI_CHECK: ranks disagree on %s: ", ck_names[f]);
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
    for (int i = 0; i < LP_CK_N; i++) mine[i] = v ? v[i] : 0;
    mine[LP_CK_N] = local_err;
    LP_MPI(MPI_Allgather(mine, st, MPI_INT64_T, all, st, MPI_INT64_T, ctx->comm));
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
            if (all[r * st + f] != all[f]) { rc = disagree(all, P, st, f); goto cleanup; }
cleanup:
    free(all);
    return rc;
}

int lp_check_local_error(MPI_Comm comm) {
    lp_ctx_t *ctx;
    int rc = lp_ctx_ready(comm, &ctx, NULL);
    if (rc == LP_OK) rc = lp_check_agree(ctx, NULL, 1);
    return rc;
}
