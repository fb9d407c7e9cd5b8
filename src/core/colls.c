/* colls.c: the collectives' table (internal.h: lp_coll_traits_t), one row per collective in
 * lp_coll_t's order: its name, whether it reduces or has a root, which ranks bring data and get
 * the result, its buffers' blocks, the MPI library's own call, per-rank counts.  Data at the
 * bottom of the engine (core/): every layer reads it, and it names no function of any layer
 * above (the MPI library's calls of each collective are alg/alg_native.c's own table). */
#include "engine.h"

const lp_coll_traits_t lp_colls[LP_NCOLLS] = {
    /* name        op root input       result         sblocks rblocks  MPI's own call  ring over shm, per-rank counts */
    {"allreduce",  1, 0,   LP_ON_ALL,  LP_ON_ALL,     1, 1, "MPI_Allreduce", 1, 0},
    {"reduce",     1, 1,   LP_ON_ALL,  LP_ON_ROOT,    1, 1, "MPI_Reduce",    0, 0},
    {"bcast",      0, 1,   LP_ON_ROOT, LP_ON_NONROOT, 1, 1, "MPI_Bcast",     0, 0},
    {"allgather",  0, 0,   LP_ON_ALL,  LP_ON_ALL,     1, 0, "MPI_Allgather", 1, 0},
    {"reduce_scatter", 1, 0, LP_ON_ALL, LP_ON_ALL,    0, 1, "MPI_Reduce_scatter_block", 1, 0},
    {"alltoall",   0, 0,   LP_ON_ALL,  LP_ON_ALL,     0, 0, "MPI_Alltoall",  0, 0},
    {"alltoallv",  0, 0,   LP_ON_ALL,  LP_ON_ALL,     0, 0, "MPI_Alltoallv", 0, LP_V_SEND | LP_V_RECV},
    {"allgatherv", 0, 0,   LP_ON_ALL,  LP_ON_ALL,     1, 0, "MPI_Allgatherv", 0, LP_V_RECV},
    {"reduce_scatter_v", 1, 0, LP_ON_ALL, LP_ON_ALL,  0, 1, "MPI_Reduce_scatter", 0,
     LP_V_SEND, "reduce_scatter"},
    {"gather",     0, 1,   LP_ON_ALL,  LP_ON_ROOT,    1, 0, "MPI_Gather",    0, 0},
    {"scatter",    0, 1,   LP_ON_ROOT, LP_ON_ALL,     0, 1, "MPI_Scatter",   0, 0},
};

static const char *const mem_names[LP_NMEMS] = {"host", "cuda"};
const char *lp_coll_name(lp_coll_t c) { return (unsigned)c < LP_NCOLLS ? lp_colls[c].name : "?"; }
const char *lp_coll_mpi_name(lp_coll_t c) { return (unsigned)c < LP_NCOLLS ? lp_colls[c].mpi_name : "?"; }
const char *lp_coll_via(lp_coll_t c) { return (unsigned)c < LP_NCOLLS && lp_colls[c].via ? lp_colls[c].via : ""; }
int lp_coll_traits(lp_coll_t c, int *has_op, int *has_root, int *input, int *result, int *sblocks,
                   int *rblocks, int *shm, int *vcounts) {
    if ((unsigned)c >= LP_NCOLLS) return LP_ERR_ARG;
    const lp_coll_traits_t *t = &lp_colls[c];
    *has_op = t->has_op;
    *has_root = t->has_root;
    *input = t->input;
    *result = t->result;
    *sblocks = t->sblocks;
    *rblocks = t->rblocks;
    *shm = t->shm;
    *vcounts = t->vcounts;
    return LP_OK;
}
const char *lp_mem_name(lp_mem_t m) { return (unsigned)m < LP_NMEMS ? mem_names[m] : "?"; }
