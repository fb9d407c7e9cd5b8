/* table.c: the tuning-table rows "auto" follows before the model.  lpmpi/tables.py reads and
 * validates the JSON tables at import and adds their rows here, with their fingerprint (a hash
 * of rows and model that every rank computes alike: contexts compare it across ranks). */
#include "engine.h"
#include <math.h>
#include <stdlib.h>

lp_table_t lp_table;

void lp_table_clear(void) {
    lp_table.nrows = 0;
    lp_table.hash = 0;
    lp_select_gen++;
}

void lp_table_set_hash(uint64_t h) {
    lp_table.hash = h;
    lp_select_gen++;
}

static int table_push(lp_table_t *t, const lp_row_t *row) {
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        lp_row_t *r = realloc(t->rows, cap * sizeof *r);
        if (!r) return LP_FAIL(LP_ERR_NOMEM, "out of memory for tuning rows");
        t->rows = r;
        t->cap = cap;
    }
    t->rows[t->nrows++] = *row;
    return LP_OK;
}

int lp_table_add(lp_coll_t coll, lp_mem_t mem, int P, double lo, double hi, int alg, size_t chunk,
                 int staging, int acc, int transport, int nodes, double learned) {
    if (alg < 0 || alg >= lp_nalgos || lp_algos[alg].coll != coll || lp_algos[alg].wire || P < 1 || !(lo < hi) ||
        nodes < 1 || nodes > P ||
        (int)mem < 0 || mem >= LP_NMEMS || staging < 0 || staging > LP_STAGING_MAX ||
        transport < 0 || transport >= LP_NTP)
        return LP_FAIL(LP_ERR_ARG, "invalid tuning row");
    lp_row_t row = {(int)coll, (int)mem, P, alg, lo, hi, chunk, staging, acc != 0, transport, nodes,
                     learned > 0 && isfinite(learned) ? learned : 0};
    int rc = table_push(&lp_table, &row);
    lp_select_gen++;
    return rc;
}

const lp_row_t *lp_table_lookup(const lp_table_t *t, lp_coll_t coll, lp_mem_t mem, int P, int nodes,
                                int acc, size_t nbytes) {
    const lp_row_t *hit = NULL;
    double n = (double)nbytes;
    for (size_t i = 0; i < t->nrows; i++) {
        const lp_row_t *r = &t->rows[i];
        if (r->coll == (int)coll && r->mem == (int)mem && r->P == P && r->nodes == nodes && r->acc == acc &&
            r->lo <= n &&
            n < r->hi)
            hit = r;
    }
    return hit;
}

int lp_table_copy(lp_table_t *dst, const lp_table_t *src) {
    int rc = LP_OK;
    dst->nrows = 0;
    dst->hash = src->hash;
    for (size_t i = 0; i < src->nrows; i++) LP_TRY(table_push(dst, &src->rows[i]));
cleanup:
    return rc;
}

void lp_table_free(lp_table_t *t) {
    free(t->rows);
    t->rows = NULL;
    t->nrows = t->cap = 0;
}
