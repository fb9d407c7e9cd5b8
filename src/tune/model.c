/* model.c: the alpha-beta-gamma machine model "auto" falls back on where no table row
 * applies: its three parameters and the predictions of the registry's cost formulas
 * (registry.c holds every formula, once).  lpmpi/model.py fits the parameters on the running
 * machine (or a tuning table brings the tuner's fit). */
#include "engine.h"
#include <math.h>

/* defaults for a 2-core VM with the mpich wheel: alpha is the effective per-chunk cost of a
 * pipeline step (latency plus the rendezvous handshake), which sets the chunk size.  The
 * network term (communicators spanning nodes; traffic.c) defaults to 10 Gbit/s Ethernet under
 * TCP (25 us a message, 1.25 GB/s a NIC each way) until lpmpi.model.fit or a table's model
 * brings the measured values (the box at 1 Gbit/s: docs/performance-archive.md, "Issue 38") */
lp_model_t lp_model = {8e-6, 0.2e-9, 0.15e-9, 25e-6, 0.8e-9};

/* The rule "auto" follows for the node-local transport of the ring allreduce where no table row
 * names one (internal.h: lp_ring_transport): defaults for a machine without a table, chosen so
 * that no launch loses to the MPI library's own allreduce on the machines measured (P = 2,
 * MPICH 5.0.2, float32 SUM; AMD EPYC and Intel Xeon 2-core VMs; docs/performance-archive.md, "Issue 24"):
 *  - cma_min 16 KiB: single-copy reads from here, where the communicator has them.  Below, their
 *    three exchanges cost more than the copies save (ring over MPI 2.2 us at 8 B against 6.0).
 *    They are the one transport whose speed holds when the host runs the two vCPUs where a
 *    cache line handed between them costs 3x more (core-to-core round trip 450-620 ns instead
 *    of 60-370), which on the EPYC VM happens for seconds to minutes at a time, a third of an
 *    afternoon: then 64 KiB / 256 KiB / 1 MiB / 64 MiB take cma 21 / 52 / 180 us / 7.3 ms,
 *    shared memory 48 / 170 / 680 us / 52 ms and MPICH's allreduce 53 / 171 / 615 us / 34 ms.
 *    In the good spells shared memory is faster (fresh inputs, 16-64 KiB ~2x, 1 MiB 65 against
 *    113 us; 64 MiB 7.3 against 9.9 ms), so a table measured on a machine whose cores share
 *    their caches may ask for it; the default does not bet on the host.
 *  - shm_min 4 KiB, shm_max 3 MiB: shared memory, where single-copy reads are not usable (ptrace
 *    refused) or below cma_min; from shm_max ring over MPI (its slow mode loses 7x at 64 MiB).
 *    Below shm_min ring over MPI's two messages cost less than the segment's rounds. */
lp_nt_rule_t lp_nt_rule = {.cma_min = 16384, .shm_min = 4096, .shm_max = (size_t)3 << 20};

void lp_model_set(double a, double b, double g) {
    lp_model.alpha = a;
    lp_model.beta = b;
    lp_model.gamma = g;
    lp_select_gen++;
}

void lp_model_set_net(double a, double b) {
    lp_model.alpha_net = a;
    lp_model.beta_net = b;
    lp_select_gen++;
}

void lp_model_get_net(double *a, double *b) {
    *a = lp_model.alpha_net;
    *b = lp_model.beta_net;
}

void lp_model_get(double *a, double *b, double *g) {
    *a = lp_model.alpha;
    *b = lp_model.beta;
    *g = lp_model.gamma;
}

/* the registry's cost, and on several nodes what the busiest NIC adds (traffic.c) */
double lp_predict_with(const lp_model_t *m, int alg, int P, int nodes, double n, double c) {
    if (alg < 0 || alg >= lp_nalgos || P < 1) return -1;
    if (P == 1) return n * m->beta;
    return lp_algos[alg].cost(m, P, n, c) + lp_net_cost(m, alg, P, nodes, n, c);
}

double lp_algo_predict(int alg, int P, int nodes, double n, double c) {
    return lp_predict_with(&lp_model, alg, P, nodes, n, c);
}

/* the grid of chunk sizes "auto" and the tuner consider: powers of two, LP_CHUNK_MIN up to the
 * message size (at least one), at most LP_CHUNK_MAX and the largest single message */
size_t lp_best_chunk_with(const lp_model_t *m, int alg, int P, int nodes, size_t nbytes) {
    if (alg < 0 || alg >= lp_nalgos || !lp_algos[alg].chunked) return 0;
    size_t best = LP_CHUNK_MIN;
    double tbest = -1;
    for (size_t c = LP_CHUNK_MIN; c <= LP_CHUNK_MAX && c <= lp_max_msg_bytes; c <<= 1) {
        double t = lp_predict_with(m, alg, P, nodes, (double)nbytes, (double)c);
        if (tbest < 0 || t < tbest) { tbest = t; best = c; }
        if (c >= nbytes) break;
    }
    return best;
}

size_t lp_best_chunk(int alg, int P, int nodes, size_t nbytes) {
    return lp_best_chunk_with(&lp_model, alg, P, nodes, nbytes);
}

/* the piece size of a compressed call under the current model (registry.c's lp_cz_chunk) */
size_t lp_cz_chunk_of(int comp, size_t esize, int P, int nodes, size_t nbytes) {
    return lp_cz_chunk(&lp_model, comp, esize, P, nodes, nbytes);
}

/* golden-section search over log(chunk) in [1, n] of the registry's cost; the formulas are
 * unimodal in the chunk (a latency term falling like n/c, a fill term growing like c), up to
 * the steps of ceil(n/c), so the search lands within a few percent of the true optimum */
double lp_optimal_chunk(int alg, int P, int nodes, double n) {
    if (alg < 0 || alg >= lp_nalgos || !lp_algos[alg].chunked || n <= 1 || P < 2) return n > 1 ? n : 1;
    const double g = (sqrt(5.0) - 1) / 2;
    double lo = 0, hi = log(n);
    double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    double f1 = lp_algo_predict(alg, P, nodes, n, exp(x1)), f2 = lp_algo_predict(alg, P, nodes, n, exp(x2));
    for (int i = 0; i < 80 && hi - lo > 1e-9; i++) {
        if (f1 <= f2) { hi = x2; x2 = x1; f2 = f1; x1 = hi - g * (hi - lo); f1 = lp_algo_predict(alg, P, nodes, n, exp(x1)); }
        else { lo = x1; x1 = x2; f1 = f2; x2 = lo + g * (hi - lo); f2 = lp_algo_predict(alg, P, nodes, n, exp(x2)); }
    }
    double c = exp((lo + hi) / 2);
    /* the ends of the range: one chunk for the whole message is often the best (P = 2) */
    if (lp_algo_predict(alg, P, nodes, n, n) <= lp_algo_predict(alg, P, nodes, n, c)) c = n;
    return c < 1 ? 1 : c > n ? n : c;
}

/* ---- the network term (traffic.c counts each pattern) ---- */
int lp_net_traffic(int alg, int P, const int *node, int root, double n, double c, double *bytes, double *msgs) {
    if (alg < 0 || alg >= lp_nalgos) return LP_ERR_ARG;
    const lp_algo_t *A = &lp_algos[alg];
    return lp_traffic_count(A->traffic, A->coll, P, node, root, n, A->chunked ? c : 0, bytes, msgs);
}

/* the network term of a prediction: the busiest node's off-node bytes and messages at what
 * they cost beyond the node-local rates (model.c adds it to the registry's cost) */
double lp_net_cost(const lp_model_t *m, int alg, int P, int nodes, double n, double c) {
    if (nodes <= 1 || P <= 1 || (m->alpha_net <= m->alpha && m->beta_net <= m->beta)) return 0;
    int small[64], *node = P <= 64 ? small : malloc((size_t)P * sizeof *node);
    double sb[128], *buf = P <= 64 ? sb : malloc(2 * (size_t)P * sizeof *buf);
    double worst = 0;
    if (node && buf) {
        lp_block_layout(P, nodes, node);
        if (lp_net_traffic(alg, P, node, 0, n, c, buf, buf + P) == LP_OK) {
            double da = m->alpha_net > m->alpha ? m->alpha_net - m->alpha : 0;
            double db = m->beta_net > m->beta ? m->beta_net - m->beta : 0;
            for (int r = 0; r < P; r++) {
                double x = buf[r] * db + buf[P + r] * da;
                if (x > worst) worst = x;
            }
        }
    }
    if (node != small) free(node);
    if (buf != sb) free(buf);
    return worst;
}
