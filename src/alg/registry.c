/* The one registry of algorithms: name, collective, chunked or not, schedule and
 * alpha-beta-gamma cost.  It drives dispatch, lpmpi.algorithms(), the tuning-table
 * validator, "auto"'s model and the tuner's search space.  Adding an algorithm means one row
 * here and one schedule file (schedule.h says what a schedule is).  The last column names an
 * algorithm's own schedule for device memory staged through the host (STAGED transport,
 * internal.h); NULL runs its schedule on a pinned host copy of the whole buffer
 * (lp_sched_stage_whole).
 *
 * Costs: P ranks, n bytes, c chunk bytes; m->alpha s/message, m->beta s/byte moved,
 * m->gamma s/byte reduced. */
#include "engine.h"
#include <math.h>

static double lg(int P) { return ceil(log2((double)P)); }
static double nchunks(double n, double c) { return c > 0 ? ceil(n / c) : 1; }

/* lp: K = n/c chunks through a chain of P-1 links: (K + P - 2) steps of one chunk each */
static double cost_bcast_lp(const lp_model_t *m, int P, double n, double c) {
    return (nchunks(n, c) + P - 2) * (m->alpha + fmin(c, n) * m->beta);
}
static double cost_reduce_lp(const lp_model_t *m, int P, double n, double c) {
    return (nchunks(n, c) + P - 2) * (m->alpha + fmin(c, n) * (m->beta + m->gamma));
}
/* allreduce: two opposite chains of n/2 bytes each (K = n/(2c) chunks per chain), each a
 * reduce up its chain overlapped with the broadcast of its results back down.  Single-port
 * model (one full-duplex link per rank, as a node's NIC or a GPU's PCIe link): a middle rank
 * sends each chain's partials one way and its results the other, 2n bytes through its one
 * port, and reduces n; an end rank (both ranks when P = 2) sends n and reduces n/2.  So:
 * K + 2P - 3 message latencies, the port's bytes (ports * n beta, ports * n/2 gamma), and the
 * pipeline fill, 2P - 3 hops of one chunk (c (beta + gamma) each).  Against SimGrid on the
 * fat-tree with one chunk in flight per direction (docs/paper.md): within 5% for P = 2..256,
 * 10% pessimistic at P = 1024. */
static double cost_allreduce_lp(const lp_model_t *m, int P, double n, double c) {
    double cc = fmin(c, n / 2), ports = P > 2 ? 2 : 1, fill = 2 * P - 3;
    return (nchunks(n / 2, c) + fill) * m->alpha + ports * n * (m->beta + m->gamma / 2)
           + fill * cc * (m->beta + m->gamma);
}
/* mst: log P rounds of the whole message */
static double cost_bcast_mst(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return lg(P) * (m->alpha + n * m->beta);
}
static double cost_reduce_mst(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return lg(P) * (m->alpha + n * (m->beta + m->gamma));
}
static double cost_allreduce_mst(const lp_model_t *m, int P, double n, double c) {
    return cost_reduce_mst(m, P, n, c) + cost_bcast_mst(m, P, n, c);
}
/* be: Rabenseifner over pof2 ranks, plus the fold for the rest */
static double fold(const lp_model_t *m, int P, double n) {
    int q = 1;
    while (q * 2 <= P) q *= 2;
    return q == P ? 0 : 2 * (m->alpha + n * m->beta) + n * m->gamma;
}
static double cost_allreduce_be(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    double q = exp2(floor(log2((double)P))), f = (q - 1) / q;
    return 2 * log2(q) * m->alpha + 2 * f * n * m->beta + f * n * m->gamma + fold(m, P, n);
}
static double cost_reduce_be(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    double q = exp2(floor(log2((double)P))), f = (q - 1) / q;
    return 2 * log2(q) * m->alpha + 2 * f * n * m->beta + f * n * m->gamma + fold(m, P, n) / 2;
}
static double cost_bcast_be(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    double f = (double)(P - 1) / P;
    int pow2 = (P & (P - 1)) == 0;
    return (lg(P) + (pow2 ? lg(P) : P - 1)) * m->alpha + 2 * f * n * m->beta;
}
/* ring: 2(P-1) steps of n/P bytes, each step's block sent in chunks */
static double cost_allreduce_ring(const lp_model_t *m, int P, double n, double c) {
    double blk = n / P;
    return (P - 1) * (nchunks(blk, c) + 1) * m->alpha + 2 * (P - 1) * blk * m->beta +
           (P - 1) * blk * m->gamma;
}
/* native: modelled as MPICH's own choice (recursive doubling / binomial trees up to 2 KiB,
 * Rabenseifner / scatter-allgather above) with half lpmpi's per-message latency, since the
 * library's small-message collectives skip lpmpi's call path and point-to-point layer */
#define NATIVE_SMALL 2048.0
static double cost_native_small(const lp_model_t *m, int P, double n, int reduce) {
    return lg(P) * (m->alpha * 0.5 + n * (m->beta + (reduce ? m->gamma : 0)));
}
static double cost_allreduce_native(const lp_model_t *m, int P, double n, double c) {
    return n <= NATIVE_SMALL ? cost_native_small(m, P, n, 1) : cost_allreduce_be(m, P, n, c);
}
static double cost_reduce_native(const lp_model_t *m, int P, double n, double c) {
    return n <= NATIVE_SMALL ? cost_native_small(m, P, n, 1) : cost_reduce_be(m, P, n, c);
}
static double cost_bcast_native(const lp_model_t *m, int P, double n, double c) {
    return n <= NATIVE_SMALL ? cost_native_small(m, P, n, 0) : cost_bcast_be(m, P, n, c);
}

/* allgather and reduce_scatter (n: the P blocks' bytes, as nccl-tests counts them): ring's
 * P - 1 steps of one block.  reduce_scatter's block goes in chunks, the reduction of chunk j
 * overlapping the transfer of chunk j + 1: per step K = blk/c latencies, the block at the
 * slower of moving and reducing, and one chunk of the faster one (the pipeline's tail) */
/* over shared memory a round moves a chunk of every block (a synchronisation per chunk); over
 * MPI a step sends a whole block whatever the chunk, and the model's best chunk, the block,
 * prices that */
static double cost_allgather_ring(const lp_model_t *m, int P, double n, double c) {
    return (P - 1) * (nchunks(n / P, c) * m->alpha + n / P * m->beta);
}
static double cost_reduce_scatter_ring(const lp_model_t *m, int P, double n, double c) {
    double blk = n / P;
    return (P - 1) * (nchunks(blk, c) * m->alpha + blk * fmax(m->beta, m->gamma) +
                      fmin(c, blk) * fmin(m->beta, m->gamma));
}
/* native: MPICH's recursive doubling / halving (log P rounds, (P-1)/P n bytes), without
 * allreduce's small-message discount: at P = 2 on the AMD EPYC VM of issue 26 MPICH's own
 * allgather / reduce_scatter_block were slower than lpmpi's ring at every size from 1 KiB
 * (1 KiB 3.4 against 2.2-2.9 us; docs/performance-archive.md "Issue 26"), so at P = 2 the two tie and
 * the tie goes to the ring where single-copy reads exist (select.c) */
static double cost_allgather_native(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return lg(P) * m->alpha + (P - 1) * n / P * m->beta;
}
static double cost_reduce_scatter_native(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return lg(P) * m->alpha + (P - 1) * n / P * (m->beta + m->gamma);
}

/* lp (alg_lp_blocks.c): a link carries P-1 blocks each way in K chunks, P-2 hops of pipeline
 * fill; reduce_scatter reduces what it passes on */
static double cost_allgather_lp(const lp_model_t *m, int P, double n, double c) {
    double moved = (P - 1) * n / P;
    return (nchunks(moved, c) + P - 2) * m->alpha + moved * m->beta + (P - 2) * fmin(c, n / P) * m->beta;
}
static double cost_reduce_scatter_lp(const lp_model_t *m, int P, double n, double c) {
    double moved = (P - 1) * n / P;
    return (nchunks(moved, c) + P - 2) * m->alpha + moved * fmax(m->beta, m->gamma) +
           (P - 1) * fmin(c, n / P) * (m->beta + m->gamma);
}
/* be: the fold (the extras' blocks in, all P blocks back out: allgather; the whole input in,
 * one block back: reduce_scatter) and log2(pof2) rounds over (pof2-1)/pof2 of the blocks */
static double cost_allgather_be(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    double q = exp2(floor(log2((double)P))), f = (q - 1) / q;
    return log2(q) * m->alpha + f * n * m->beta + (q == P ? 0 : 2 * m->alpha + (n + n / P) * m->beta);
}
static double cost_reduce_scatter_be(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    double q = exp2(floor(log2((double)P))), f = (q - 1) / q;
    return log2(q) * m->alpha + f * n * (m->beta + m->gamma) +
           (q == P ? 0 : 2 * m->alpha + (n + n / P) * m->beta + n * m->gamma);
}

/* blocks between pairs (alg_direct.c; n: the P blocks' bytes of the rank that sends or gets
 * the most, as nccl-tests counts alltoall): pairwise exchange P - 1 messages each way of n/P
 * bytes; gather's root receives and scatter's root sends P - 1 blocks.  native: MPICH's Bruck
 * (small blocks) or scattered / pairwise exchange: fewer latencies (log P with half lpmpi's
 * per-message cost, as cost_native_small), the same bytes */
static double cost_direct(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return (P - 1) * m->alpha + (P - 1) * n / P * m->beta;
}
static double cost_direct_native(const lp_model_t *m, int P, double n, double c) {
    (void)c;
    return lg(P) * m->alpha * 0.5 + (P - 1) * n / P * m->beta;
}

/* compressed (alg_compress.c): a direct reduce-scatter and allgather of the encoded bytes,
 * plus the codecs' passes (encode, decode and add: about 0.25 ns a byte each on one core here,
 * docs/compression.md); c: the wire's bytes per input byte, from the call (select's key has
 * none: 1/4 as int8 over float32) */
static double cost_cz(const lp_model_t *m, int P, double n, double c) {
    double w = c > 0 && c < 1 ? c : 0.25;
    return 2 * (P - 1) * m->alpha + 2 * (P - 1) / (double)P * n * w * m->beta + 3 * n * m->gamma;
}

/* the compressed allreduce on N nodes of L ranks each (alg_compress.c's hierarchy) in K
 * pieces: what crosses the network (each NIC: 2 (N - 1) / N of the encoded message) and what
 * the ranks compute (the node's exchanges of raw shards, the sums, the codecs' passes) overlap
 * piece by piece, as a pipeline of K stages does: the longer of the two, plus the shorter one's
 * K-th part (its fill and drain), plus each piece's messages.  K = 1 runs them one after the
 * other.  The piece size is data (the model's parameters), not a threshold. */
static double cost_cz_pieces(const lp_model_t *m, int comp, size_t esize, int L, int N, double n, int K) {
    double wire = (double)lp_cz_bytes(comp, (size_t)(n / (double)esize));
    double net = 2.0 * (N - 1) / N * wire * m->beta_net + 2.0 * (N - 1) * m->alpha_net;
    double cpu = 2.0 * (L - 1) / L * n * m->beta + n * m->gamma + 3.0 * n / L * m->gamma;
    double lo = net < cpu ? net : cpu, hi = net < cpu ? cpu : net;
    return hi + lo / K + (double)K * (2.0 * (L - 1) + 4.0 * (N - 1) + 5.0) * m->alpha;
}
size_t lp_cz_chunk(const lp_model_t *m, int comp, size_t esize, int P, int nodes, size_t n) {
    if (nodes < 2 || P % nodes || !esize) return n;       /* (no hierarchy) */
    int best = 1;
    double tbest = 0;
    for (int K = 1; K <= 32; K *= 2) {
        double t = cost_cz_pieces(m, comp, esize, P / nodes, nodes, (double)n, K);
        if (K == 1 || t < tbest) { best = K; tbest = t; }
    }
    return (n + (size_t)best - 1) / (size_t)best;
}

const lp_algo_t lp_algos[] = {
    /* name      collective     chunked  schedule                    cost                   staged schedule, pattern between nodes (traffic.c) */
    {"lp",     LP_ALLREDUCE, 1, &lp_sched_lp,               cost_allreduce_lp, &lp_sched_lp_staged, lp_traffic_lp},
    {"mst",    LP_ALLREDUCE, 0, &lp_sched_allreduce_mst,    cost_allreduce_mst, NULL, lp_traffic_mst},
    {"be",     LP_ALLREDUCE, 0, &lp_sched_allreduce_be,     cost_allreduce_be, NULL, lp_traffic_be},
    {"ring",   LP_ALLREDUCE, 1, &lp_sched_ring,             cost_allreduce_ring, NULL, lp_traffic_ring, &lp_sched_ring_cma, &lp_sched_ring_shm},
    {"native", LP_ALLREDUCE, 0, &lp_sched_native,           cost_allreduce_native, NULL, lp_traffic_be},
    {"lp",     LP_REDUCE,    1, &lp_sched_lp,               cost_reduce_lp, &lp_sched_lp_staged, lp_traffic_lp},
    {"mst",    LP_REDUCE,    0, &lp_sched_reduce_mst,       cost_reduce_mst, NULL, lp_traffic_mst},
    {"be",     LP_REDUCE,    0, &lp_sched_reduce_be,        cost_reduce_be, NULL, lp_traffic_be},
    {"native", LP_REDUCE,    0, &lp_sched_native,           cost_reduce_native, NULL, lp_traffic_be},
    {"lp",     LP_BCAST,     1, &lp_sched_lp,               cost_bcast_lp, &lp_sched_lp_staged, lp_traffic_lp},
    {"mst",    LP_BCAST,     0, &lp_sched_bcast_mst,        cost_bcast_mst, NULL, lp_traffic_mst},
    {"be",     LP_BCAST,     0, &lp_sched_bcast_be,         cost_bcast_be, NULL, lp_traffic_be},
    {"native", LP_BCAST,     0, &lp_sched_native,           cost_bcast_native, NULL, lp_traffic_be},
    /* be before lp and ring: the model's ties at P = 2 go to the first (select.c) */
    {"be",     LP_ALLGATHER, 0, &lp_sched_allgather_be,     cost_allgather_be, NULL, lp_traffic_be},
    {"lp",     LP_ALLGATHER, 1, &lp_sched_allgather_lp,     cost_allgather_lp, NULL, lp_traffic_lp_blocks},
    {"ring",   LP_ALLGATHER, 1, &lp_sched_ring,             cost_allgather_ring, NULL, lp_traffic_ring, &lp_sched_ring_cma, &lp_sched_ring_shm},
    {"native", LP_ALLGATHER, 0, &lp_sched_native,           cost_allgather_native, NULL, lp_traffic_be},
    {"lp",     LP_REDUCE_SCATTER, 1, &lp_sched_reduce_scatter_lp, cost_reduce_scatter_lp, NULL, lp_traffic_lp_blocks},
    {"ring",   LP_REDUCE_SCATTER, 1, &lp_sched_ring,        cost_reduce_scatter_ring, NULL, lp_traffic_ring, &lp_sched_ring_cma, &lp_sched_ring_shm},
    {"be",     LP_REDUCE_SCATTER, 0, &lp_sched_reduce_scatter_be, cost_reduce_scatter_be, NULL, lp_traffic_be},
    {"native", LP_REDUCE_SCATTER, 0, &lp_sched_native,      cost_reduce_scatter_native, NULL, lp_traffic_be},
    /* native first: the model's ties go to the first (select.c) */
    {"native", LP_ALLTOALL,  0, &lp_sched_native,           cost_direct_native, NULL, lp_traffic_direct},
    {"pairwise", LP_ALLTOALL, 0, &lp_sched_direct,          cost_direct, NULL, lp_traffic_direct, &lp_sched_direct_cma, NULL},
    {"native", LP_ALLTOALLV, 0, &lp_sched_native,           cost_direct_native, NULL, lp_traffic_direct},
    {"pairwise", LP_ALLTOALLV, 0, &lp_sched_direct,         cost_direct, NULL, lp_traffic_direct, &lp_sched_direct_cma, NULL},
    {"native", LP_ALLGATHERV, 0, &lp_sched_native,          cost_allgather_native, NULL, lp_traffic_be},
    {"ring",   LP_ALLGATHERV, 1, &lp_sched_ring,            cost_allgather_ring, NULL, lp_traffic_ring, &lp_sched_ring_cma, NULL},
    {"native", LP_REDUCE_SCATTER_V, 0, &lp_sched_native,    cost_reduce_scatter_native, NULL, lp_traffic_be},
    {"ring",   LP_REDUCE_SCATTER_V, 1, &lp_sched_ring,      cost_reduce_scatter_ring, NULL, lp_traffic_ring, &lp_sched_ring_cma, NULL},
    {"native", LP_GATHER,    0, &lp_sched_native,           cost_direct_native, NULL, lp_traffic_direct},
    {"linear", LP_GATHER,    0, &lp_sched_direct,           cost_direct, NULL, lp_traffic_direct, &lp_sched_direct_cma, NULL},
    {"native", LP_SCATTER,   0, &lp_sched_native,           cost_direct_native, NULL, lp_traffic_direct},
    {"linear", LP_SCATTER,   0, &lp_sched_direct,           cost_direct, NULL, lp_traffic_direct, &lp_sched_direct_cma, NULL},
    {"native", LP_SCAN,      0, &lp_sched_native,           cost_allreduce_native, NULL, lp_traffic_be},
    /* compressed calls only (the wire column: alg_compress.c) */
    {"direct", LP_ALLREDUCE, 0, &lp_sched_cz,               cost_cz, NULL, lp_traffic_direct, NULL, NULL, 1},
    {"direct", LP_REDUCE_SCATTER, 0, &lp_sched_cz,          cost_cz, NULL, lp_traffic_direct, NULL, NULL, 1},
    {"direct", LP_REDUCE_SCATTER_V, 0, &lp_sched_cz,        cost_cz, NULL, lp_traffic_direct, NULL, NULL, 1},
    {"direct", LP_ALLGATHER, 0, &lp_sched_cz,               cost_cz, NULL, lp_traffic_direct, NULL, NULL, 1},
};
const int lp_nalgos = (int)(sizeof lp_algos / sizeof lp_algos[0]);

/* ---- access for the bindings and the tables (lpmpi.h) ---- */
int lp_algo_count(void) { return lp_nalgos; }
const char *lp_algo_name(int i) { return i >= 0 && i < lp_nalgos ? lp_algos[i].name : "?"; }
int lp_algo_coll(int i) { return i >= 0 && i < lp_nalgos ? (int)lp_algos[i].coll : -1; }
int lp_algo_chunked(int i) { return i >= 0 && i < lp_nalgos ? lp_algos[i].chunked : 0; }
int lp_algo_wire(int i) { return i >= 0 && i < lp_nalgos ? lp_algos[i].wire : 0; }
/* the row that runs coll compressed (-1: none) */
int lp_cz_algo(lp_coll_t coll) {
    for (int i = 0; i < lp_nalgos; i++)
        if (lp_algos[i].coll == coll && lp_algos[i].wire) return i;
    return -1;
}
/* the algorithms with schedules over node-local transports (their row's cma / shm columns) */
int lp_algo_node_local(int i) {
    return i >= 0 && i < lp_nalgos && (lp_algos[i].cma || lp_algos[i].shm);
}
int lp_algo_find(lp_coll_t coll, const char *name) {
    for (int i = 0; i < lp_nalgos; i++)
        if (lp_algos[i].coll == coll && strcmp(lp_algos[i].name, name) == 0) return i;
    return -1;
}

