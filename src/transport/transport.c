/* transport.c: the node-local transports a communicator's context has: which ones every rank
 * of a one-node communicator can use (probe), making them (open) and letting go of them (close).
 * Their steps live with their schedules, behind the interface of schedule.h (lp_xport_t):
 * single-copy reads (alg_ring_cma.c) and a shared-memory segment (alg_ring_shm.c).  The context
 * (context.c) holds what they made (ctx->pids, ctx->shm) and calls these two functions only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* process_vm_readv (sys/uio.h) */
#endif
#include "engine.h"
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/uio.h>
#endif

/* the node-local transport's capability check, on every rank of a one-node communicator at once
 * (the same answer everywhere).  LPMPI_NODE_TRANSPORT of every rank is gathered: mpi anywhere
 * turns it off, and only what every rank allows is tried.  Shared memory (alg_ring_shm.c): the
 * ranks map one segment; it is used where every rank mapped it.  Single-copy reads
 * (alg_ring_cma.c): each rank reads its right neighbour's probe word with process_vm_readv;
 * usable where no rank failed the probe.  With both, request.c picks one by message size. */
static volatile uint64_t cma_probe;
#define CMA_MAGIC 0x6c706d7069636d61ull
enum { ALLOW_SHM = 1, ALLOW_CMA = 2 };

int lp_node_transports_open(lp_ctx_t *ctx) {
    int rc = LP_OK, P = ctx->size, cma_why = LP_NT_CMA, allow = 0;
    struct { int64_t pid; uint64_t addr; int64_t allow; } me, *all = NULL;
    if (P == 1 || ctx->nnodes > 1) {               /* the same on every rank: no communication */
        ctx->nt_why = P == 1 ? LP_NT_OFF_ONE : LP_NT_OFF_NODES;
        return LP_OK;
    }
    me.pid = (int64_t)getpid();
    cma_probe = CMA_MAGIC ^ (uint64_t)me.pid;
    me.addr = (uint64_t)(uintptr_t)&cma_probe;
    me.allow = lp_node_transport == LP_NTM_AUTO ? ALLOW_SHM | ALLOW_CMA
             : lp_node_transport == LP_NTM_SHM ? ALLOW_SHM
             : lp_node_transport == LP_NTM_CMA ? ALLOW_CMA : 0;
    all = malloc((size_t)P * sizeof *all);
    if (!all) return LP_FAIL(LP_ERR_NOMEM, "out of memory for the node-local transport's check");
    LP_MPI(MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, ctx->comm));
    allow = ALLOW_SHM | ALLOW_CMA;
    for (int r = 0; r < P; r++) allow &= (int)all[r].allow;
#if !defined(__linux__)
    allow = 0;
#endif
    if (allow & ALLOW_SHM) {                       /* collective: every rank tries */
        LP_TRY(lp_shm_open(ctx->comm, ctx->rank, P, &ctx->shm));
        if (ctx->shm && !(allow & ALLOW_CMA)) {
            ctx->nt_why = LP_NT_SHM;
            goto cleanup;
        }
    }
    if (!(allow & ALLOW_CMA)) {
#if defined(__linux__)
        ctx->nt_why = allow & ALLOW_SHM ? LP_NT_OFF_SHM : LP_NT_OFF_ENV;
#else
        ctx->nt_why = LP_NT_OFF_OS;
#endif
        goto cleanup;
    }
#if defined(__linux__)
    {
        int right = (ctx->rank + 1) % P;
        uint64_t v = 0;
        struct iovec l = {&v, sizeof v}, rm = {(void *)(uintptr_t)all[right].addr, sizeof v};
        if (process_vm_readv((pid_t)all[right].pid, &l, 1, &rm, 1, 0) != (ssize_t)sizeof v ||
            v != (CMA_MAGIC ^ (uint64_t)all[right].pid))
            cma_why = LP_NT_OFF_PERM;
    }
#endif
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, &cma_why, 1, MPI_INT, MPI_MAX, ctx->comm));
    if (ctx->shm) ctx->nt_why = cma_why == LP_NT_CMA ? LP_NT_BOTH : LP_NT_SHM;
    else if (allow & ALLOW_SHM)                    /* the segment was tried and refused */
        ctx->nt_why = cma_why == LP_NT_CMA ? LP_NT_CMA_NOSHM : LP_NT_OFF_PERM_NOSHM;
    else ctx->nt_why = cma_why;
    if (cma_why == LP_NT_CMA) {
        if (!(ctx->pids = malloc((size_t)P * sizeof *ctx->pids))) {
            rc = LP_FAIL(LP_ERR_NOMEM, "out of memory for the node-local transport");
            goto cleanup;
        }
        for (int r = 0; r < P; r++) ctx->pids[r] = (int)all[r].pid;
    }
cleanup:
    free(all);
    return rc;
}

/* local: the segment's name was unlinked when it was made */
void lp_node_transports_close(lp_ctx_t *ctx) {
    free(ctx->pids);
    ctx->pids = NULL;
    lp_shm_close(ctx->shm);
    ctx->shm = NULL;
}

/* ---- single-copy reads (Linux cross-memory attach): the node-local transport of alg_ring_cma.c
 * and alg_direct.c ---- */
/* len bytes of process pid at remote into local */
int lp_cma_read(int pid, void *local, const void *remote, size_t len) {
#if defined(__linux__)
    char *dst = local;
    const char *src = remote;
    while (len) {
        struct iovec l = {dst, len}, rm = {(void *)src, len};
        ssize_t got = process_vm_readv(pid, &l, 1, &rm, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            return LP_FAIL(LP_ERR_MPI, "process_vm_readv from process %d failed: %s", pid,
                           got < 0 ? strerror(errno) : "no progress");
        }
        dst += got;
        src += got;
        len -= (size_t)got;
    }
    return LP_OK;
#else
    (void)pid; (void)local; (void)remote; (void)len;
    return LP_FAIL(LP_ERR_INTERNAL, "the node-local transport needs Linux");
#endif
}
