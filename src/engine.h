/* engine.h: the engine's own state, shared by its core files and by none of the algorithms.
 *
 *   config.c       knobs (window, largest MPI message, LPMPI_CHECK)
 *   context.c      per-communicator contexts and the table agreement of their first call
 *   registry.c     the one algorithm registry and each algorithm's cost
 *   model.c        the alpha-beta-gamma model's parameters and predictions
 *   table.c        tuning-table rows, their lookup and their fingerprint
 *   select.c       environment overrides and the one decision function (lp_decide)
 *   check.c        LPMPI_CHECK: do the ranks agree on a call?
 *   collectives.c  the entry points: prepare the context, decide, check, dispatch
 *
 * Data flows one way: collectives.c -> select.c -> (table.c, model.c -> registry.c); contexts
 * hold what select.c reads per communicator. */
#ifndef LPMPI_ENGINE_H
#define LPMPI_ENGINE_H

#include "internal.h"
#include <stdatomic.h>

/* ---- tuning rows (table.c) ---- */
typedef struct { int coll, mem, P, alg; double lo, hi; size_t chunk; int staging; } lp_row_t;
typedef struct {
    lp_row_t *rows;
    size_t nrows, cap;
    uint64_t hash;        /* the fingerprint lpmpi/tables.py computed of them (0: none) */
} lp_table_t;

extern lp_table_t lp_table;           /* this process's table */
/* the row of `t` for (coll, mem, P) covering nbytes, or NULL (the last matching row wins) */
const lp_row_t *lp_table_lookup(const lp_table_t *t, lp_coll_t coll, lp_mem_t mem, int P, size_t nbytes);
/* copy `src`'s rows into `dst` (dst's old rows freed) */
int lp_table_copy(lp_table_t *dst, const lp_table_t *src);
void lp_table_free(lp_table_t *t);

/* ---- model (model.c) ---- */
extern lp_model_t lp_model;           /* this process's model parameters */
double lp_predict_with(const lp_model_t *m, int alg, int P, double nbytes, double chunk_bytes);
size_t lp_best_chunk_with(const lp_model_t *m, int alg, int P, size_t nbytes);

/* ---- selection (select.c) ----
 * Everything "auto" reads (model, table rows, overrides) has a generation, bumped by every
 * change: a context's cached decision from an older generation is stale. */
extern unsigned long lp_select_gen;
int lp_decide(lp_ctx_t *ctx, lp_coll_t coll, int P, size_t nbytes, lp_mem_t mem, int alg,
              size_t chunk_bytes, lp_choice_t *out);

/* ---- contexts (context.c) ---- */
struct lp_ctx {
    MPI_Comm comm;            /* private duplicate: lpmpi's messages never match the user's */
    MPI_Comm user;            /* the user's communicator it is cached on */
    int rank, size;
    void *scratch;            /* grow-only arena, reused call after call */
    size_t scratch_bytes;
    MPI_Request *reqs;        /* grow-only request array */
    size_t nreqs;
    int *idx;                 /* grow-only index array (MPI_Waitsome) */
    size_t nidx;
    int tables;               /* 0 unchecked, 1 every rank has the same table, -1 they differ */
    lp_table_t *table;        /* tables differ: rank 0's rows (NULL: this process's) */
    lp_model_t model;         /* tables differ: rank 0's model (else unused) */
    struct {                  /* auto's last decision per collective (the model is not free) */
        unsigned long gen;
        size_t nbytes;
        int mem;
        lp_choice_t choice;
    } last[LP_NCOLLS];
    atomic_int busy;          /* a collective runs on it (one thread at a time: MPI's rule) */
    struct lp_ctx *next;      /* list of live contexts, freed at MPI_Finalize at the latest */
};

/* the context of `user`, created (collective) if it has none */
int lp_ctx_get(MPI_Comm user, lp_ctx_t **out);
/* the context of `user` if it has one, else *out = NULL (local) */
int lp_ctx_find(MPI_Comm user, lp_ctx_t **out);
/* lp_ctx_get, then on its first call the table agreement (collective, the same on every rank
 * whatever this rank's arguments); *first_mismatch (may be NULL) = 1 if it found them differing */
int lp_ctx_ready(MPI_Comm user, lp_ctx_t **out, int *first_mismatch);

/* ---- LPMPI_CHECK (check.c) ----
 * v: this rank's values of the call (LP_CK_* order) or NULL with local_err; every rank learns
 * whether they agree and, where not, which ranks hold which value */
enum { LP_CK_COLL, LP_CK_COUNT, LP_CK_DTYPE, LP_CK_OP, LP_CK_ROOT, LP_CK_ALG, LP_CK_CHUNK, LP_CK_N };
int lp_check_agree(lp_ctx_t *ctx, const int64_t *v, int local_err);

/* ---- knobs (config.c) ---- */
extern int lp_check_enabled;

/* ---- what MPI_Finalize releases besides the contexts ---- */
void lp_native_free(void);     /* alg_native.c: lpmpi's user ops and types */
void lp_device_release(void);  /* device.c: streams, events, arenas */

#endif
