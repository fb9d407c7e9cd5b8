/* traffic.c: what each algorithm sends over the network, from its pattern (the same neighbour
 * arithmetic as its schedule: topo.h, lp_chain_at, lp_chain_specs), per node: the bytes and
 * messages a node's ranks send to ranks of other nodes.  Two users:
 *
 *   - the cost model (model.c): on a communicator spanning several nodes an algorithm pays,
 *     on top of its registry cost, what its busiest NIC's bytes and messages cost beyond
 *     the node-local rates (the model's network term: alpha_net, beta_net);
 *   - the box bench (lpmpi.cluster, lpmpi.bench): the NICs' byte counters against this count.
 *
 * Layout: node[r] = the lowest rank on rank r's node (as the context's node map); the chains
 * and rings follow node order as the schedules do (lp_chain_at, lp_ring_rank).  "auto" decides
 * on the key (P, nodes) alone, so the model assumes lp_block_layout: ranks in blocks by
 * node, the first P mod N nodes one rank more (hydra's and Open MPI's default placement).
 *
 * Each registry row names its pattern (lp_algo_t.traffic; native is priced as be, as its cost:
 * MPICH's Rabenseifner / scatter-allgather; the MPI library's real pattern may differ, which
 * the tables correct). */
#include "engine.h"
#include <stdlib.h>
#include <string.h>

typedef lp_traffic_t tr_t;
struct lp_traffic {
    const int *node;        /* node[r]: the lowest rank on r's node */
    const int *order, *pos; /* the ranks in node order, and each rank's index there */
    double *bytes, *msgs;   /* per rank: sent off-node (summed per node at the end) */
    double c;               /* chunk bytes (0: whole transfers, in pieces of the largest message) */
};

static double pieces(const tr_t *t, double bytes) {
    if (bytes <= 0) return 0;
    double c = t->c > 0 ? t->c : (double)lp_max_msg_bytes;
    double k = bytes / c;
    return k <= 1 ? 1 : (double)(size_t)(k + 0.999999);
}
static void put(tr_t *t, int from, int to, double bytes) {
    if (from < 0 || to < 0 || from == to || bytes <= 0 || t->node[from] == t->node[to]) return;
    t->bytes[from] += bytes;
    t->msgs[from] += pieces(t, bytes);
}

/* a stand-in for a rank's call arguments: what lp_chain_at / lp_chain_specs read */
static void fake_args(lp_args_t *a, lp_coll_t coll, int P, int rank, int root, size_t count,
                      const int *node, const int *order, const int *pos) {
    memset(a, 0, sizeof *a);
    a->coll = coll;
    a->size = P;
    a->rank = rank;
    a->root = root;
    a->count = count;
    a->esize = 1;
    a->node = node;
    a->order = order;
    a->pos = pos;
}

/* lp (allreduce, reduce, bcast): per chain, up = partials tail -> head, down = finals */
void lp_traffic_lp(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    for (int r = 0; r < P; r++) {
        lp_args_t a;
        lp_chain_spec_t s[2];
        fake_args(&a, coll, P, r, root, (size_t)n, t->node, t->order, t->pos);
        int k = lp_chain_specs(&a, s);
        for (int i = 0; i < k; i++) {
            int v, left, right;
            lp_chain_at(&a, s[i].head, s[i].dir, &v, &left, &right);
            if (s[i].up) put(t, r, left, (double)s[i].bytes);
            if (s[i].down) put(t, r, right, (double)s[i].bytes);
        }
    }
}

/* binomial tree from root: reduce (children -> parents) or bcast (parents -> children); mst:
 * reduce, bcast, or allreduce = reduce to 0 + bcast from 0 */
static void binomial(tr_t *t, int P, int root, double n, int to_root) {
    for (int v = 1; v < P; v++) {
        int me = lp_rrank(v, root, P), parent = lp_rrank(lp_binom_parent(v), root, P);
        if (to_root) put(t, me, parent, n);
        else put(t, parent, me, n);
    }
}

void lp_traffic_mst(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    if (coll != LP_BCAST) binomial(t, P, coll == LP_REDUCE ? root : 0, n, 1);
    if (coll != LP_REDUCE) binomial(t, P, coll == LP_BCAST ? root : 0, n, 0);
}

/* bytes of newranks [lo, hi)'s share: pof2 near-equal parts of n, or (per-rank blocks) the
 * real ranks those newranks stand for (alg_be.c: range) */
static double rd_range(const lp_rd_t *b, int blocks, int lo, int hi, double n) {
    if (!blocks) return n * (hi - lo) / b->pof2;
    double first = lo < b->rem ? 2.0 * lo : lo + b->rem, end = hi < b->rem ? 2.0 * hi : hi + b->rem;
    return n * (end - first) / b->P;
}

/* be: fold, recursive halving (distance pof2/2 first), recursive doubling back, unfold */
static void be_halving(tr_t *t, int P, int root, double n, int blocks, int doubling, int gather) {
    for (int r = 0; r < P; r++) {
        lp_rd_t b;
        int partner;
        lp_rd_init(&b, r, P, root);
        if (lp_rd_folded(&b, &partner)) {
            if (b.newrank < 0) put(t, r, partner, n);             /* fold: the whole vector in */
            else if (doubling) put(t, r, partner, n);             /* unfold: the result back */
            else if (blocks) put(t, r, partner, n / P);           /* unfold: the extra's block */
        }
        if (b.newrank < 0) continue;
        int lo = 0, hi = b.pof2;
        for (int mask = b.pof2 / 2; mask > 0; mask /= 2) {             /* halving */
            int mid = lo + (hi - lo) / 2, glo = b.newrank & mask ? lo : mid, ghi = b.newrank & mask ? mid : hi;
            put(t, r, lp_rd_real(&b, b.newrank ^ mask), rd_range(&b, blocks, glo, ghi, n));
            if (b.newrank & mask) lo = mid; else hi = mid;
        }
        if (doubling)
            for (int mask = 1; mask < b.pof2; mask *= 2) {              /* doubling: what it holds */
                int mine = b.newrank & ~(mask - 1);
                put(t, r, lp_rd_real(&b, b.newrank ^ mask), rd_range(&b, blocks, mine, mine + mask, n));
            }
        if (gather)
            for (int mask = 1; mask < b.pof2; mask *= 2)                /* binomial gather */
                if (!(b.newrank & (mask - 1)) && (b.newrank & mask))
                    put(t, r, lp_rd_real(&b, b.newrank - mask), rd_range(&b, 0, b.newrank, b.newrank + mask, n));
    }
}

/* be allgather: the extras' blocks in, recursive doubling over the newranks' blocks, all back out */
static void be_allgather(tr_t *t, int P, double n) {
    for (int r = 0; r < P; r++) {
        lp_rd_t b;
        int partner;
        lp_rd_init(&b, r, P, 0);
        if (lp_rd_folded(&b, &partner)) put(t, r, partner, b.newrank < 0 ? n / P : n);
        if (b.newrank < 0) continue;
        for (int mask = 1; mask < b.pof2; mask *= 2) {
            int mine = b.newrank & ~(mask - 1);
            put(t, r, lp_rd_real(&b, b.newrank ^ mask), rd_range(&b, 1, mine, mine + mask, n));
        }
    }
}

/* be bcast: binomial scatter of P blocks, then recursive doubling (P a power of two) or a ring */
static void be_bcast(tr_t *t, int P, int root, double n) {
    int top = 1;
    while (top < P) top *= 2;
    for (int v = 0; v < P; v++) {
        int me = lp_rrank(v, root, P);
        int low = v ? lp_lowbit(v) : top;
        for (int mask = low >> 1; mask > 0; mask >>= 1)
            if (v + mask < P) {
                int hi = v + 2 * mask < P ? v + 2 * mask : P;
                put(t, me, lp_rrank(v + mask, root, P), n * (hi - v - mask) / P);
            }
        if ((P & (P - 1)) == 0) {
            for (int mask = 1; mask < P; mask *= 2) put(t, me, lp_rrank(v ^ mask, root, P), n * mask / P);
        } else {
            put(t, me, lp_rrank((v + 1) % P, root, P), n * (P - 1) / P);
        }
    }
}

void lp_traffic_be(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    switch (coll) {
    case LP_ALLREDUCE: be_halving(t, P, 0, n, 0, 1, 0); break;
    case LP_REDUCE: be_halving(t, P, root, n, 0, 0, 1); break;
    case LP_REDUCE_SCATTER: case LP_REDUCE_SCATTER_V: be_halving(t, P, 0, n, 1, 0, 0); break;
    case LP_ALLGATHER: case LP_ALLGATHERV: be_allgather(t, P, n); break;
    case LP_BCAST: be_bcast(t, P, root, n); break;
    default: break;
    }
}

/* direct (alg_direct.c): every block from its sender to its receiver (n: the P blocks) */
void lp_traffic_direct(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    lp_args_t a;
    fake_args(&a, coll, P, 0, root, 0, t->node, t->order, t->pos);
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            if (lp_sends_to(&a, i, j)) put(t, i, j, n / P);
}

/* ring over node order: allreduce 2 (P-1) blocks, allgather / reduce_scatter P-1, each step's
 * block in chunks */
void lp_traffic_ring(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    (void)root;
    const double blk = n / P, steps = coll == LP_ALLREDUCE ? 2.0 * (P - 1) : P - 1.0;
    for (int i = 0; i < P; i++) {
        int me = t->order[i], right = t->order[(i + 1) % P];
        if (t->node[me] == t->node[right]) continue;
        t->bytes[me] += steps * blk;
        t->msgs[me] += steps * pieces(t, blk);
    }
}

/* lp allgather / reduce_scatter: the chain 0 .. P-1 in rank order, blocks passed both ways */
void lp_traffic_lp_blocks(tr_t *t, lp_coll_t coll, int P, int root, double n) {
    (void)root;
    const int gather = coll == LP_ALLGATHER;
    double blk = n / P;
    for (int i = 0; i + 1 < P; i++) {
        double right = gather ? i + 1 : P - 1 - i, left = gather ? P - 1 - i : i + 1;
        put(t, i, i + 1, right * blk);
        put(t, i + 1, i, left * blk);
    }
}

void lp_block_layout(int P, int nodes, int *node) {
    if (nodes < 1) nodes = 1;
    if (nodes > P) nodes = P;
    int q = P / nodes, extra = P % nodes, r = 0;
    for (int k = 0; k < nodes; k++) {
        int first = r, m = q + (k < extra);
        for (int j = 0; j < m; j++) node[r++] = first;
    }
}

int lp_traffic_count(lp_traffic_fn fn, lp_coll_t coll, int P, const int *node, int root, double n, double c,
                     double *bytes, double *msgs) {
    if (!fn || P < 1 || !node) return LP_ERR_ARG;
    int *order = malloc(2 * (size_t)P * sizeof *order);
    double *b = calloc(2 * (size_t)P, sizeof *b);
    if (!order || !b) { free(order); free(b); return LP_ERR_NOMEM; }
    int *pos = order + P;
    /* node order: nodes by their lowest rank, ranks in rank order (context.c: node_map) */
    int k = 0;
    for (int lead = 0; lead < P; lead++)
        if (node[lead] == lead)
            for (int r = lead; r < P; r++)
                if (node[r] == lead) order[k++] = r;
    if (k != P) { free(order); free(b); return LP_ERR_ARG; }   /* node[] is not a node map */
    for (int i = 0; i < P; i++) pos[order[i]] = i;
    tr_t t = {.node = node, .order = order, .pos = pos, .bytes = b, .msgs = b + P, .c = c};
    if (P > 1) fn(&t, coll, P, root, n);
    for (int r = 0; r < P; r++) bytes[r] = msgs[r] = 0;   /* per node, at its lowest rank */
    for (int r = 0; r < P; r++) {
        bytes[node[r]] += t.bytes[r];
        msgs[node[r]] += t.msgs[r];
    }
    free(order);
    free(b);
    return LP_OK;
}

