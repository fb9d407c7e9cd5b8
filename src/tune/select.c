/* select.c: the one decision of what a call runs, in three levels for "auto" (as Open MPI's
 * coll_tuned_decision_dynamic.c and NCCL's tuner):
 *
 *   1. environment override  LPMPI_ALGORITHM / LPMPI_CHUNK_BYTES (lp_set_override)
 *   2. tuning table          the row covering the message (table.c)
 *   3. cost model            the registry's fastest prediction (model.c, registry.c)
 *
 * and one chunk policy for every algorithm: the caller's chunk_bytes, else (auto) the
 * override's, the row's or the model's, else (an explicit algorithm) the model's best; 0 for
 * unchunked algorithms; at most the largest single MPI message.
 *
 * lp_decide is the only place this happens, on a key (lp_decision_key: only what every rank of
 * a call shares, never whether it is the root, in place, or has a result).  Every request
 * (request.c) calls it on a prepared context, lpmpi.select/explain and LPMPI_DEBUG through lp_choose on the same context (created by an
 * earlier call, or not yet, which lp_choice_t.tables says), so they report what the
 * collectives do.  On a communicator whose ranks held different tables it reads rank 0's rows
 * and model (context.c): what every rank shares.  Decisions are cached per context and
 * collective, keyed by size and memory kind, until anything they read changes. */
#include "engine.h"


/* the overrides per collective, +1: 0 is none (a zeroed slot of any collective, whatever
 * LP_NCOLLS is; an explicit {-1, -1, -1} left a fourth collective's slot at 0, "lp") */
static int ovr_alg1[LP_NCOLLS];
static size_t ovr_chunk[LP_NCOLLS];
#define ovr_alg(c) (ovr_alg1[c] - 1)
static int ovr_tp = LP_TP_MODEL;

int lp_set_transport_override(int tp) {
    int prev = ovr_tp;
    ovr_tp = tp > LP_TP_MODEL && tp < LP_NTP ? tp : LP_TP_MODEL;
    lp_select_gen++;
    return prev;
}

void lp_override_get(lp_coll_t coll, int *alg, size_t *chunk) {
    *alg = ovr_alg(coll);
    *chunk = ovr_chunk[coll];
}
int lp_transport_override_get(void) { return ovr_tp; }

void lp_set_override(lp_coll_t coll, int alg, size_t chunk) {
    if ((int)coll < 0 || coll >= LP_NCOLLS) return;
    ovr_alg1[coll] = alg < 0 ? 0 : alg + 1;
    ovr_chunk[coll] = chunk;
    lp_select_gen++;
}

/* auto's algorithm and chunk (before the caller's chunk_bytes) */
static void decide_auto(const lp_table_t *t, const lp_model_t *m, lp_coll_t coll, int P, int nodes,
                        size_t nbytes, lp_mem_t mem, int acc, int node_local, lp_choice_t *out) {
    int a = -1, w = 0, src = LP_SRC_MODEL, tp = LP_TP_MODEL;
    double learned = 0;
    size_t c = 0;
    if (ovr_alg(coll) >= 0) {                                        /* 1. environment */
        a = ovr_alg(coll);
        src = LP_SRC_OVERRIDE;
    }
    /* acc_dtype: its own rows (keyed by the 16-bit message), else the float32 copy's */
    const lp_row_t *row = a < 0 && acc ? lp_table_lookup(t, coll, mem, P, nodes, 1, nbytes / 2) : NULL;
    if (a < 0 && !row) row = lp_table_lookup(t, coll, mem, P, nodes, 0, nbytes);
    if (row) {                                                       /* 2. tuning table */
        a = row->alg;
        c = row->chunk;
        w = row->staging;
        tp = row->transport;
        learned = row->learned;
        src = LP_SRC_TABLE;
    }
    if (a < 0) {                                                     /* 3. cost model */
        double tbest = 0;
        for (int i = 0; i < lp_nalgos; i++) {
            if (lp_algos[i].coll != coll || lp_algos[i].wire) continue;
            size_t ci = (ovr_chunk[coll] && lp_algos[i].chunked) ? ovr_chunk[coll]
                                                                 : lp_best_chunk_with(m, i, P, nodes, nbytes);
            double ti = lp_predict_with(m, i, P, nodes, (double)nbytes, (double)ci);
            /* a tie (ring and be cost the same at P = 2) goes to an algorithm with node-local
             * transports where the communicator has one and the collective reduces: the model
             * prices every transfer as an MPI message, and single-copy reads fold the peers'
             * data straight from their buffers (allreduce, P = 2, this VM: 1 MiB ring 65 us
             * against be 110).  A plain copy (allgather) gains nothing from reading the peer's
             * buffer: MPI's pipeline through cache-resident cells moves the same DRAM bytes
             * without the kernel's page pinning, and the tie stays with the registry's order
             * (be first: allgather at P = 2, 8 launches half pinned, be 3.0-3.2x MPICH at
             * 512 KiB-2 MiB and 1.18-1.85x at 16-64 MiB, the ring 1.15-1.17x and 0.90-1.31x;
             * docs/results/issue26/s4/allgather_ring_be.txt) */
            int nl = node_local && mem == LP_MEM_HOST && lp_traits(coll)->has_op &&
                     lp_algo_node_local(i) && !lp_algo_node_local(a);
            if (a < 0 || ti < tbest || (nl && ti <= tbest * (1 + 1e-12))) { a = i; tbest = ti; c = ci; }
        }
        src = LP_SRC_MODEL;
    }
    if (!lp_algos[a].chunked) c = 0;
    else if (ovr_chunk[coll]) { c = ovr_chunk[coll]; src = LP_SRC_OVERRIDE; }
    else if (!c) c = lp_best_chunk_with(m, a, P, nodes, nbytes);
    *out = (lp_choice_t){.alg = a, .chunk = c, .staging = w, .source = src, .transport = tp,
                         .transport_source = tp ? LP_SRC_TABLE : LP_SRC_MODEL, .learned = learned};
}

lp_key_t lp_decision_key(lp_coll_t coll, int P, int nodes, size_t count, lp_dtype_t dt, lp_dtype_t acc_dt,
                         lp_mem_t mem) {
    return (lp_key_t){.coll = coll, .P = P, .nbytes = lp_key_bytes(coll, count, lp_dtype_size(dt), P),
                      .mem = mem, .acc = lp_accumulates(dt, acc_dt), .nodes = nodes > 0 ? nodes : 1};
}

int lp_decide(lp_ctx_t *ctx, const lp_key_t *k, int alg, size_t chunk_bytes, lp_choice_t *out) {
    const int differ = ctx && ctx->tables < 0;
    const lp_table_t *t = differ ? ctx->table : &lp_table;
    const lp_model_t *m = differ ? &ctx->model : &lp_model;
    const lp_coll_t coll = k->coll;
    const int P = k->P, acc = k->acc != 0;
    const size_t nbytes = k->nbytes;
    const lp_mem_t mem = k->mem;
    lp_choice_t ch = {0};
    if ((int)coll < 0 || coll >= LP_NCOLLS) return LP_FAIL(LP_ERR_ARG, "unknown collective %d", (int)coll);
    if ((int)mem < 0 || mem >= LP_NMEMS) return LP_FAIL(LP_ERR_ARG, "unknown memory kind %d", (int)mem);
    if (alg == LP_ALG_AUTO) {
        if (ctx && ctx->last[coll].gen == lp_select_gen && ctx->last[coll].nbytes == nbytes &&
            ctx->last[coll].mem == (int)mem && ctx->last[coll].acc == acc) {
            ch = ctx->last[coll].choice;
        } else {
            decide_auto(t, m, coll, P, k->nodes, nbytes, mem, acc, ctx && (ctx->shm || ctx->pids), &ch);
            if (ctx) {
                ctx->last[coll].gen = lp_select_gen;
                ctx->last[coll].nbytes = nbytes;
                ctx->last[coll].mem = (int)mem;
                ctx->last[coll].acc = acc;
                ctx->last[coll].choice = ch;
            }
        }
    } else {
        if (alg < 0 || alg >= lp_nalgos || lp_algos[alg].coll != coll)
            return LP_FAIL(LP_ERR_ARG, "algorithm %d is not a %s algorithm", alg, lp_coll_name(coll));
        if (lp_algos[alg].wire)
            return LP_FAIL(LP_ERR_ARG, "algorithm %s of %s runs compressed calls only (compression=)",
                           lp_algos[alg].name, lp_coll_name(coll));
        ch = (lp_choice_t){.alg = alg, .source = LP_SRC_REQUESTED, .transport_source = LP_SRC_MODEL};
    }
    if (ovr_tp != LP_TP_MODEL) {                 /* the transport override, above table and model */
        ch.transport = ovr_tp;
        ch.transport_source = LP_SRC_OVERRIDE;
    }
    if (!lp_algos[ch.alg].chunked) ch.chunk = 0;
    else if (chunk_bytes) ch.chunk = chunk_bytes;
    else if (!ch.chunk) ch.chunk = lp_best_chunk_with(m, ch.alg, P, k->nodes, nbytes);
    if (ch.chunk > lp_max_msg_bytes) ch.chunk = lp_max_msg_bytes;
    ch.tables = ctx ? ctx->tables : 0;
    *out = ch;
    return LP_OK;
}

