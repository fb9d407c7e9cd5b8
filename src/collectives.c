/* collectives.c: the engine's three entry points.  Each call
 *
 *   1. validates what the bindings cannot get wrong but C callers can (dtype, op, memory),
 *   2. routes device memory (device.c: real CUDA, emulation, or host),
 *   3. prepares the communicator's context (context.c: private duplicate, table agreement),
 *   4. decides algorithm, chunk and staging (select.c: lp_decide, the one decision),
 *   5. with LPMPI_CHECK, checks that every rank agrees (check.c),
 *   6. dispatches through the registry (registry.c) to the host algorithm, the algorithm's
 *      staged pipeline for device memory, or the single-rank copy. */
#include "engine.h"

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
    int rc = LP_OK, bound = 0, saved = 0, xport;
    const lp_devops_t *dev = NULL;
    lp_ctx_t *ctx = NULL;
    lp_choice_t ch;
    lp_reduce_fn fn = NULL;
    if ((int)dt < 0 || dt >= LP_NDTYPES) return LP_FAIL(LP_ERR_ARG, "unknown dtype %d", (int)dt);
    if ((int)mem < 0 || mem >= LP_NMEMS) return LP_FAIL(LP_ERR_ARG, "unknown memory kind %d", (int)mem);
    if (coll != LP_BCAST && !(fn = lp_reduce_kernel(dt, op)))
        return LP_FAIL(LP_ERR_ARG, "op %s is not defined on %s", lp_op_name(op), lp_dtype_name(dt));
    LP_TRY(lp_device_route(mem, &dev, &xport));
    if (dev) mem = LP_MEM_CUDA;                   /* emulation decides as for device memory */
    LP_TRY(lp_ctx_ready(comm, &ctx, NULL));
    if (root < 0 || root >= ctx->size) return LP_FAIL(LP_ERR_ARG, "root %d out of range", root);
    if (atomic_exchange_explicit(&ctx->busy, 1, memory_order_acquire))
        return LP_FAIL(LP_ERR_BUSY, "another thread is running a collective on this communicator "
                       "(MPI allows one collective at a time per communicator: use one "
                       "communicator per thread, e.g. comm.Dup())");
    size_t esize = lp_dtype_size(dt), nbytes = count * esize;
    LP_TRY(lp_decide(ctx, coll, ctx->size, nbytes, mem, alg, chunk_bytes, &ch));
    if (lp_check_enabled) {
        int64_t v[LP_CK_N] = {coll, (int64_t)count, dt, coll == LP_BCAST ? -1 : (int64_t)op,
                              coll == LP_ALLREDUCE ? -1 : root, ch.alg, (int64_t)ch.chunk};
        LP_TRY(lp_check_agree(ctx, v, 0));
    }
    if (count == 0) goto cleanup;
    const lp_algo_t *A = &lp_algos[ch.alg];
    lp_args_t a = {
        .ctx = ctx, .comm = ctx->comm, .rank = ctx->rank, .size = ctx->size, .coll = coll,
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dt = dt, .esize = esize, .op = op, .fn = fn,
        .root = root, .chunk_elems = ch.chunk / esize ? ch.chunk / esize : 1, .mem = mem,
        .dev = dev, .xport = xport, .staging = (size_t)(ch.staging > 0 ? ch.staging : lp_staging),
    };
    if (dev) {
        LP_TRY(dev->bind(sbuf ? sbuf : rbuf, &saved));
        bound = 1;
    }
    if (ctx->size == 1) rc = run_single_rank(&a);
    else if (xport == LP_XPORT_STAGED) rc = A->staged ? A->staged(&a) : lp_stage_whole(&a, A->run);
    else rc = A->run(&a);
cleanup:
    if (bound) {
        if (rc != LP_OK) dev->sync(-1);   /* nothing of this call may still run afterwards */
        dev->unbind(saved);
    }
    if (ctx && rc != LP_ERR_BUSY) atomic_store_explicit(&ctx->busy, 0, memory_order_release);
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
