/* candidates.c: what a key of the online tuner explores (autotune.c's banner, "explore"): the
 * static decision (a table row or the model), MPI's own call, the model's next best algorithms,
 * the static choice's chunk x2 and /2 (an unchunked one: the model's first algorithm's chunk /8
 * and /64) and its other node-local transports; each candidate once, on the ring's transport it
 * would run on. */
#include "autotune.h"

static int same_cand(const lp_at_cand_t *a, const lp_at_cand_t *b) {
    return a->alg == b->alg && a->chunk == b->chunk && a->transport == b->transport;
}

/* the transport a candidate effectively runs (LP_TP_*; 0 where the algorithm has none here) */
static int eff_transport(const lp_ctx_t *ctx, int alg, size_t nbytes, int tp) {
    const lp_algo_t *A = &lp_algos[alg];
    int shm = ctx->shm != NULL && A->shm, cma = ctx->pids != NULL && A->cma;
    if (!shm && !cma) return 0;
    return lp_tp_of_ring(lp_ring_transport(shm, cma, nbytes, tp));
}

void lp_at_add_cand(lp_at_key_t *k, const lp_ctx_t *ctx, int alg, size_t chunk, int tp) {
    lp_at_info_t *I = &k->info;
    if (I->ncand >= k->cap || alg < 0 || alg >= lp_nalgos || (int)lp_algos[alg].coll != I->coll) return;
    lp_at_cand_t c = {.alg = alg, .chunk = lp_algos[alg].chunked ? chunk : 0,
                      .transport = eff_transport(ctx, alg, (size_t)I->nbytes, tp)};
    if (c.chunk > lp_max_msg_bytes) c.chunk = lp_max_msg_bytes;
    if (lp_algos[alg].chunked && c.chunk < 64) return;
    for (int i = 0; i < I->ncand; i++)
        if (same_cand(&I->cand[i], &c)) return;
    I->cand[I->ncand++] = c;
}

static int native_alg(lp_coll_t coll) {
    for (int i = 0; i < lp_nalgos; i++)
        if (lp_algos[i].coll == coll && lp_algos[i].sched == &lp_sched_native) return i;
    return -1;
}

/* the candidates, the same on every rank: they read only the key, the static decision (the
 * table or model every rank of ctx shares) and the communicator's transports */
void lp_at_candidates(lp_at_key_t *k, const lp_ctx_t *ctx, const lp_choice_t *base) {
    lp_at_info_t *I = &k->info;
    const lp_model_t *m = ctx->tables < 0 ? &ctx->model : &lp_model;
    const size_t nb = (size_t)I->nbytes;
    I->ncand = 0;
    k->cap = AT_FIRST;
    lp_at_add_cand(k, ctx, base->alg, base->chunk, base->transport);             /* the static choice */
    lp_at_add_cand(k, ctx, native_alg(I->coll), 0, 0);                           /* MPI's own */
    int order[64], n = 0;                                                  /* the model's ranking */
    double t[64];
    for (int i = 0; i < lp_nalgos && n < 64; i++) {
        if ((int)lp_algos[i].coll != I->coll || lp_algos[i].wire) continue;
        t[n] = lp_predict_with(m, i, I->P, I->nodes, (double)nb,
                               (double)lp_best_chunk_with(m, i, I->P, I->nodes, nb));
        order[n++] = i;
    }
    for (int a = 1; a < n; a++)                                           /* insertion sort: stable */
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            double x = t[b]; t[b] = t[b - 1]; t[b - 1] = x;
            int y = order[b]; order[b] = order[b - 1]; order[b - 1] = y;
        }
    int top[2], ntop = 0;
    for (int i = 0; i < n && ntop < 2; i++) {
        int before = I->ncand;
        lp_at_add_cand(k, ctx, order[i], lp_best_chunk_with(m, order[i], I->P, I->nodes, nb), LP_TP_MODEL);
        if (I->ncand > before) top[ntop++] = order[i];
    }
    for (int j = 0; j < ntop; j++)                          /* their node-local transports, each */
        for (int tp = LP_TP_MPI; tp < LP_NTP; tp++)
            lp_at_add_cand(k, ctx, top[j], lp_best_chunk_with(m, top[j], I->P, I->nodes, nb), tp);
    if (lp_algos[base->alg].chunked) {                                     /* the chunk's neighbours */
        lp_at_add_cand(k, ctx, base->alg, base->chunk * 2, base->transport);
        lp_at_add_cand(k, ctx, base->alg, base->chunk / 2, base->transport);
    }
    for (int tp = LP_TP_MPI; tp < LP_NTP; tp++)                            /* its other transports */
        lp_at_add_cand(k, ctx, base->alg, base->chunk, tp);
    /* a coarse spread of its chunk where room is left: the model's chunk can be far from the
     * best (issue 50, 16 MiB from no table: ring with 8 MiB chunks, where 256 KiB ones stay in
     * the caches and take 1.3x less), further than the neighbours' rounds walk (x2, /2 twice) */
    if (lp_algos[base->alg].chunked) {
        lp_at_add_cand(k, ctx, base->alg, base->chunk / 8, base->transport);
        lp_at_add_cand(k, ctx, base->alg, base->chunk / 64, base->transport);
    } else if (ntop) {         /* an unchunked static choice: the model's first algorithm's spread
                                * (AMD EPYC, 64 MiB from no table: static be, the model's ring with
                                * 16 MiB chunks, the grid's best ring with 1 MiB ones over shm, where
                                * 16 MiB ones ran 30 ms in some segments and 7.3 in others) */
        size_t c0 = lp_best_chunk_with(m, top[0], I->P, I->nodes, nb);
        lp_at_add_cand(k, ctx, top[0], c0 / 8, LP_TP_MODEL);
        lp_at_add_cand(k, ctx, top[0], c0 / 64, LP_TP_MODEL);
    }
    I->native = -1;
    for (int i = 0; i < I->ncand; i++)
        if (lp_algos[I->cand[i].alg].sched == &lp_sched_native) I->native = i;
}
