/* direct, compressed: allreduce, reduce_scatter (both forms) and allgather with the data on
 * the wire encoded (compression=, codec.c), every value rounded at most twice.
 *
 * What (P ranks; segment j: the part of the result rank j owns: allreduce, the j-th of P
 * near-equal runs of whole 256-element blocks; reduce_scatter, block j; allgather, rank j's
 * block):
 *   encode     each rank encodes every segment of its input it sends, once (rounding 1);
 *   exchange   each rank sends encoded segment j to rank j: a direct reduce-scatter, so that
 *              no partial sum ever travels (a ring would re-encode one at every hop and its
 *              error would grow with P: NVIDIA/nccl#1026, Megatron-LM#6199);
 *   reduce     the owner decodes the P - 1 segments it got and adds them to its own exact
 *              input in rank order, in float32 (float64 for float64 data): the same bits on
 *              every rank and run; AVG divides once;
 *   (reduce_scatter ends here: the owner's result, rounded once to the data type if it is a
 *   16-bit one)
 *   encode     allreduce: the owner encodes its reduced segment, once (rounding 2);
 *   allgather  the encoded segments are forwarded unchanged to every rank;
 *   decode     every rank, the owner too, decodes every segment into its result: every rank
 *              holds the same bits.  allgather: its own block is encoded, gathered and decoded
 *              likewise (one rounding).
 *
 *   rank 0: [x0 x1 x2] --enc--> e(x0_0) e(x0_1) e(x0_2) ---+   seg 0: x0_0 + d(e(x1_0)) + d(e(x2_0))
 *   rank 1: [x0 x1 x2] --enc--> ...                        +-> (each owner)  --enc--> gathered --dec
 *
 * Several nodes of L ranks each (allreduce; the same L on every node, L = 1 included): exact
 * within the node, encoded only across it, still two roundings (hier_*, below):
 *   node reduce-scatter  each rank sends shard m of its input (L near-equal runs of whole
 *              blocks) to its node's rank m, raw; rank l sums shard l in float32 (rank order);
 *   across     the ranks with the same l on the N nodes run the direct compressed allreduce
 *              above on their node sums' shard l (rounded once as it leaves, once as the
 *              owner's result), each decoding shard l's result into its output;
 *   node allgather  the shards' results, raw, to the node's other ranks: every rank the same
 *              bits.  Each NIC then carries 2 (N - 1) / N of the encoded message, as a ring of
 *              N ranks would the raw one.
 *
 * Cost: 2 (P - 1) messages and 2 (P - 1) / P of the encoded bytes per rank (as a ring's bytes,
 * at 1/2, ~1/4, ~1/8 of float32's size for bf16, int8, int4), plus the codecs' passes over the
 * data (registry.c: cost_cz).  Flat: the segments go whole, in groups of XCH peers (the lane
 * limit).  Hierarchical: in pieces (the call's chunk, the model's choice: lp_cz_chunk), their
 * stages in a wavefront, so that codecs and node-local copies overlap the network (the box, 2
 * nodes x 2 ranks, 64 MiB int8: 2.7x -> 3.5x uncompressed auto; docs/compression.md); the
 * blocks stay the 256-element grid of the message, though which node's data is exact (its own
 * segment) follows the pieces: the bits depend on the chunk, the same on every rank.  Memory:
 * the encoded input, the P - 1 encoded segments received, the float32 (float64) accumulator of
 * one segment, the gathered encoded result (hierarchical: also the L raw shards of a piece). */
#include "internal.h"
#include <limits.h>
#include <stdlib.h>

enum { XCH = 7 };                 /* peers per exchange phase: 2 XCH lanes <= LP_LANES_MAX */
enum { CZ_ENC_ALL, CZ_REDUCE, CZ_ENC_RES, CZ_DEC_ALL, CZ_OUT };   /* the local steps (lane sub) */
enum { CZ_ALIGN = 64 };
static const lp_xport_t xport;

static int groups(int P) { return (P - 1 + XCH - 1) / XCH; }
static size_t up(size_t b) { return (b + CZ_ALIGN - 1) & ~(size_t)(CZ_ALIGN - 1); }
static int acc64(const lp_args_t *a) { return a->dt == LP_FLOAT64; }
static size_t accsz(const lp_args_t *a) { return acc64(a) ? 8 : 4; }
/* the decode writes the result with streaming stores: a result larger than the caches, out of
 * place (in place, recvbuf is the input this call just read, its lines cached: alg_ring_shm.c) */
static int stream(const lp_args_t *a) {
    return a->sbuf != a->rbuf && lp_key_bytes(a->coll, a->count, a->esize, a->size) >= lp_stream_min;
}

/* segment j: its offset and length (elements) in the input (in: 1) or the result (in: 0) */
static void seg(const lp_args_t *a, int j, int in, size_t *off, size_t *len) {
    if (a->coll == LP_ALLREDUCE) {
        size_t S = (a->count + (size_t)a->size - 1) / (size_t)a->size;
        S = (S + 255) / 256 * 256;                           /* whole blocks */
        size_t o = S * (size_t)j;
        *off = o < a->count ? o : a->count;
        *len = o < a->count ? (a->count - o < S ? a->count - o : S) : 0;
    } else if (a->coll == LP_ALLGATHER) {
        lp_recv_part(a, j, off, len);                        /* rank j's block of the result */
        if (in && a->sbuf != a->rbuf) *off = 0;              /* its own input: sendbuf */
    } else {                                                 /* reduce_scatter(_v): block j */
        if (in) lp_send_part(a, j, off, len);
        else lp_recv_part(a, j, off, len);
    }
}
static size_t ebytes(const lp_args_t *a, int j) {
    size_t off, len;
    seg(a, j, 1, &off, &len);
    return lp_cz_bytes(a->comp, len);
}

/* the work area: [encoded input: segment j at eoff(j)][received: P slots of my segment's
 * encoded bytes][accumulator][gathered encoded result: segment j at eoff(j)] */
typedef struct { size_t in, recv, acc, all, total, slot; } layout_t;
static size_t eoff(const lp_args_t *a, int j) {
    size_t o = 0;
    for (int i = 0; i < j; i++) o += up(ebytes(a, i));
    return o;
}
static layout_t layout(const lp_args_t *a) {
    layout_t L = {0};
    size_t off, len, all = eoff(a, a->size);
    seg(a, a->rank, 1, &off, &len);
    L.slot = up(lp_cz_bytes(a->comp, len));
    const int reduces = a->coll != LP_ALLGATHER;
    L.in = 0;
    L.recv = reduces ? all : 0;
    L.acc = L.recv + (reduces ? (size_t)a->size * L.slot : 0);
    L.all = L.acc + (reduces ? up(len * accsz(a)) : 0);
    L.total = L.all + (a->coll != LP_REDUCE_SCATTER && a->coll != LP_REDUCE_SCATTER_V ? all : 0);
    return L;
}

/* a local step of this schedule (an XPORT lane: the engine runs it, names no codec) */
static lp_lane_t *local(lp_req_t *r, const lp_args_t *a, int sub, size_t steps) {
    lp_lane_t *l = lp_lane_xport(r, a, &xport, sub, NULL, steps, 1);
    return l;
}

/* ---- several nodes of L ranks each: exact in the node, encoded across (allreduce) ----
 * The message goes in K pieces (the call's chunk: lp_cz_chunk, registry.c) on one grid: piece
 * p is elements [p c, (p + 1) c), shard m of it [m Sh, (m + 1) Sh) within it, cross segment j of
 * shard l [j S, (j + 1) S) within that (c = L Sh = L N S, S whole 256-element blocks); the last
 * piece's parts are cut at the message's end (some may be empty), so that every part of every
 * piece sits at the same place of its piece's work area.
 *
 * Two forms of the same arithmetic (the same bits):
 *   flow   (L + N <= 8, but 7 nodes of one rank with 16-bit data) two phases of lanes chained piece by piece (the engine's dependencies):
 *          the reduce-scatter half (node exchange, node sum, encode, cross exchange, cross sum,
 *          encode of the result), then the gather half (cross gather, decode, node gather).
 *          Every transfer of a half is posted as soon as its piece is ready (a window of them
 *          per peer), so each NIC stays busy without a step in between: in the box (4 nodes of
 *          1 rank, 1 Gbit/s, MPICH over TCP), messages to three peers in lock-step rounds ran
 *          1.16-1.48x the link bound, the same posted with a window 1.05-1.06x.
 *   wavefront (larger layouts: lanes and dependencies of a phase are bounded) the nine stages
 *          of every piece in phases: phase t runs stage t - D p of every piece p (D = 1, or
 *          more where over 8 pieces would share a phase); an exchange
 *          stage talks to X peers at once (two lanes each, every piece's stage in a phase
 *          within LP_LANES_MAX; hlanes).
 * Every (peer, tag) stream carries its pieces in order on both sides. */
enum { KMAX = 32 };
int lp_test_cz_wavefront;                     /* tests: the wavefront at any layout (the same bits) */
void lp_set_test_cz_wavefront(int on) { lp_test_cz_wavefront = on; }
typedef struct {
    int L, N, l, k, K, X;     /* ranks a node, nodes, my place, my node; pieces; peers a stage */
    int D;                    /* the wavefront: phases between two pieces' starts */
    int flow;                 /* the two phases of chained lanes (above), else the wavefront */
    size_t c, Sh, S;          /* elements of a piece, of its shards, of a shard's segments */
    size_t po, pn;            /* the current piece: its offset and elements */
} hier_t;

static size_t round_up(size_t v, size_t u) { return (v + u - 1) / u * u; }
/* piece p of the message becomes the current one */
static void piece(const lp_args_t *a, hier_t *h, int p) {
    size_t o = h->c * (size_t)p;
    h->po = o < a->count ? o : a->count;
    h->pn = o < a->count ? (a->count - o < h->c ? a->count - o : h->c) : 0;
}
/* the part [o, o + u) of the current piece (o, u: within a piece), cut at its end */
static size_t cut(const hier_t *h, size_t o, size_t u) { return o < h->pn ? (h->pn - o < u ? h->pn - o : u) : 0; }
/* elements of that part over every piece (the last one's cut) */
static size_t across(const lp_args_t *a, const hier_t *h, size_t o, size_t u) {
    hier_t t = *h;
    piece(a, &t, h->K - 1);
    return (size_t)(h->K - 1) * u + cut(&t, o, u);
}

static int hgroups(const hier_t *h, int n) { return (n - 1 + h->X - 1) / h->X; }

/* stages of a piece: node exchange (GL), node sum, encode, cross exchange (GN), cross sum,
 * encode result, cross gather (GN), decode, node gather (GL); phases: K - 1 more */
static int hstages(const hier_t *h) { return 2 * hgroups(h, h->L) + 2 * hgroups(h, h->N) + 5; }
/* lanes of a piece's stage s (at most: 2 X an exchange, 1 a local step) */
static int hstage_lanes(const hier_t *h, int s) {
    const int GL = hgroups(h, h->L), GN = hgroups(h, h->N);
    const int len[] = {GL, 2, GN, 2, GN, 1, GL}, ex[] = {1, 0, 1, 0, 1, 0, 1};
    for (int b = 0; b < 7; s -= len[b++])
        if (s < len[b]) return ex[b] ? 2 * h->X : 1;
    return 0;
}
/* the most lanes a phase of the wavefront opens (stage t - D p of every piece p) */
static int hlanes(const hier_t *h) {
    const int S = hstages(h);
    int most = 0;
    for (int t = 0; t < S + h->D * (h->K - 1); t++) {
        int n = 0;
        for (int p = 0; p < h->K; p++)
            if (t - h->D * p >= 0 && t - h->D * p < S) n += hstage_lanes(h, t - h->D * p);
        if (n > most) most = n;
    }
    return most;
}

/* the node sum of shard l: one rank a node (L) with data of the accumulator's type reads its
 * input in place (no copy, no node sum step) */
static int nsum_in_place(const lp_args_t *a, int L) {
    return L == 1 && a->dt == (acc64(a) ? LP_FLOAT64 : LP_FLOAT32);
}

/* the hierarchy of a (1; piece 0 current), or 0: a one-node or uneven layout runs flat.  One
 * rank a node (L = 1) takes this path too, for its pieces: the node stages are then empty but
 * for the node sum (a copy into the accumulator's type, where the data is not of that type) */
static int hier(const lp_args_t *a, hier_t *h) {
    if (a->coll != LP_ALLREDUCE || !a->order || !a->node || a->size < 2) return 0;
    int L = 0;
    for (int r = 0; r < a->size; r++) L += a->node[r] == a->node[0];
    if (a->size % L || a->size / L < 2) return 0;
    for (int r = 0; r < a->size; r++) {              /* every node has L ranks */
        int c = 0;
        for (int q = 0; q < a->size; q++) c += a->node[q] == a->node[r];
        if (c != L) return 0;
    }
    h->L = L;
    h->N = a->size / L;
    h->l = a->pos[a->rank] % L;
    h->k = a->pos[a->rank] / L;
    /* the cross sum waits for N - 1 receiving lanes and the node sum (none where the input is
     * summed in place: one rank a node, data of the accumulator's type) */
    const int nsum = !nsum_in_place(a, L);
    h->flow = L + h->N <= 8 && h->N - 1 + nsum <= LP_DEPS_MAX && !lp_test_cz_wavefront;
    /* pieces of whole blocks of every shard and segment, at most KMAX of them, none larger
     * than the message needs (the same grid in both forms: the same bits) */
    const size_t unit = (size_t)L * (size_t)h->N * 256;
    size_t c = round_up(a->chunk_elems > unit ? a->chunk_elems : unit, unit);
    size_t least = round_up((a->count + KMAX - 1) / KMAX, unit), most = round_up(a->count ? a->count : 1, unit);
    c = c > least ? c : least;
    h->c = c < most ? c : most;
    h->K = a->count > h->c ? (int)((a->count + h->c - 1) / h->c) : 1;
    h->Sh = h->c / (size_t)L;
    h->S = h->Sh / (size_t)h->N;
    /* the wavefront: piece p starts D phases after piece p - 1, D the least that keeps at most
     * 8 pieces in a phase at one peer a stage (S stages then; two lanes each: LP_LANES_MAX); its
     * peers a stage all of them (up to XCH) as long as a phase's lanes (every piece's stage in
     * it) fit */
    const int S = 2 * (h->L - 1) + 2 * (h->N - 1) + 5;
    for (h->D = 1; h->K > LP_LANES_MAX / 2 && (S + h->D - 1) / h->D > LP_LANES_MAX / 2; h->D++) {}
    int X = (h->L > h->N ? h->L : h->N) - 1;
    for (h->X = X < XCH ? X : XCH; h->X > 1 && hlanes(h) > LP_LANES_MAX; h->X--) {}
    piece(a, h, 0);
    return 1;
}
static int node_peer(const lp_args_t *a, const hier_t *h, int m) { return a->order[h->k * h->L + m]; }
static int cross_peer(const lp_args_t *a, const hier_t *h, int j) { return a->order[j * h->L + h->l]; }
/* shard m of the current piece; cross segment j of its shard l (offsets in elements, from the
 * message) */
static void shard(const hier_t *h, int m, size_t *off, size_t *len) {
    size_t o = h->Sh * (size_t)m;
    *off = h->po + (o < h->pn ? o : h->pn);
    *len = cut(h, o, h->Sh);
}
static size_t xrel(const hier_t *h, int j) { return h->Sh * (size_t)h->l + h->S * (size_t)j; }
static void xseg(const hier_t *h, int j, size_t *off, size_t *len) {
    size_t o = xrel(h, j);
    *off = h->po + (o < h->pn ? o : h->pn);
    *len = cut(h, o, h->S);
}
/* encoded bytes: of cross segment j of the current piece; of a whole one; of it over every piece */
static size_t xbytes(const lp_args_t *a, const hier_t *h, int j) {
    size_t o, n;
    xseg(h, j, &o, &n);
    return lp_cz_bytes(a->comp, n);
}
static size_t xfull(const lp_args_t *a, const hier_t *h) { return lp_cz_bytes(a->comp, h->S); }
static size_t xacross(const lp_args_t *a, const hier_t *h, int j) {
    hier_t t = *h;
    piece(a, &t, h->K - 1);
    return (size_t)(h->K - 1) * xfull(a, h) + xbytes(a, &t, j);
}
/* a piece's work (the same places in every piece): [raw: L slots of a shard][node sum: a
 * shard][encoded node sum: N segments][received: N slots of my segment's][cross sum: my
 * segment][gathered encoded results: N segments]; piece p's at p * stride */
typedef struct { size_t slot, raw, acc, in, recv, xslot, xacc, all, total; } hlayout_t;
static size_t xoff(const lp_args_t *a, const hier_t *h, int j) { return (size_t)j * up(xfull(a, h)); }
static hlayout_t hlayout(const lp_args_t *a, const hier_t *h) {
    hlayout_t L = {0};
    size_t enc = xoff(a, h, h->N);
    L.slot = up(h->Sh * a->esize);
    L.raw = 0;
    L.acc = L.raw + (size_t)h->L * L.slot;
    L.in = L.acc + up(h->Sh * accsz(a));
    L.xslot = up(xfull(a, h));
    L.recv = L.in + enc;
    L.xacc = L.recv + (size_t)h->N * L.xslot;
    L.all = L.xacc + up(h->S * accsz(a));
    L.total = L.all + enc;
    return L;
}
static size_t hstride(const lp_args_t *a, const hier_t *h) { return up(hlayout(a, h).total); }
/* the local steps: of one piece (its work area the lane's region); H_ENC_X and H_DEC_X step
 * k: cross segment k (the wavefront), F_ENC_X and F_DEC_X step k: piece k, all of them (flow) */
enum { H_NODE_SUM = 16, H_ENC_X, H_X_SUM, H_ENC_RES, H_DEC_X, F_ENC_X, F_DEC_X };

/* a local step lane of the wavefront: piece p's (its work area pw) */
static void hlocal(lp_req_t *r, const lp_args_t *a, int sub, size_t steps, char *pw) {
    lp_lane_t *l = lp_lane_xport(r, a, &xport, sub, pw, steps, 1);
    if (l) l->r[0].stride = 0;
}

static int hstage(lp_req_t *r, const lp_args_t *a, const hier_t *h, int p, int i) {
    char *w = lp_req_area(r, LP_AREA_WORK) + (size_t)p * hstride(a, h);
    const hlayout_t L = hlayout(a, h);
    const int GL = hgroups(h, h->L), GN = hgroups(h, h->N), es = (int)a->esize, X = h->X;
    if (i < GL) {                                   /* node reduce-scatter of the raw shards */
        for (int j = X * i + 1; j <= X * i + X && j < h->L; j++) {
            int to = (h->l + j) % h->L, from = (h->l - j + h->L) % h->L;
            size_t o, n, mo, mn;
            shard(h, to, &o, &n);
            shard(h, h->l, &mo, &mn);
            if (n) lp_lane_send(r, a, a->sbuf + o * (size_t)es, n * (size_t)es, n * (size_t)es,
                                node_peer(a, h, to), a->tag0 + LP_TAG_UP);
            if (mn) lp_lane_recv(r, a, w + L.raw + (size_t)from * L.slot, mn * (size_t)es, mn * (size_t)es,
                                 node_peer(a, h, from), a->tag0 + LP_TAG_UP);
        }
        return LP_OK;
    }
    i -= GL;
    if (i == 0) { hlocal(r, a, H_NODE_SUM, 1, w); return LP_OK; }
    if (i == 1) { hlocal(r, a, H_ENC_X, (size_t)h->N, w); return LP_OK; }
    i -= 2;
    if (i < GN) {                                   /* across: encoded segments to their owners */
        for (int j = X * i + 1; j <= X * i + X && j < h->N; j++) {
            int to = (h->k + j) % h->N, from = (h->k - j + h->N) % h->N;
            size_t tb = xbytes(a, h, to), mb = xbytes(a, h, h->k);
            if (tb) lp_lane_send(r, a, w + L.in + xoff(a, h, to), tb, tb, cross_peer(a, h, to), a->tag0 + LP_TAG_DOWN);
            if (mb) lp_lane_recv(r, a, w + L.recv + (size_t)from * L.xslot, mb, mb, cross_peer(a, h, from),
                                 a->tag0 + LP_TAG_DOWN);
        }
        return LP_OK;
    }
    i -= GN;
    if (i == 0) { hlocal(r, a, H_X_SUM, 1, w); return LP_OK; }
    if (i == 1) { hlocal(r, a, H_ENC_RES, 1, w); return LP_OK; }
    i -= 2;
    if (i < GN) {                                   /* across: the owners' encoded results */
        for (int j = X * i + 1; j <= X * i + X && j < h->N; j++) {
            int to = (h->k + j) % h->N, from = (h->k - j + h->N) % h->N;
            size_t mb = xbytes(a, h, h->k), fb = xbytes(a, h, from);
            if (mb) lp_lane_send(r, a, w + L.all + xoff(a, h, h->k), mb, mb, cross_peer(a, h, to), a->tag0 + LP_TAG_UP2);
            if (fb) lp_lane_recv(r, a, w + L.all + xoff(a, h, from), fb, fb, cross_peer(a, h, from), a->tag0 + LP_TAG_UP2);
        }
        return LP_OK;
    }
    i -= GN;
    if (i == 0) { hlocal(r, a, H_DEC_X, (size_t)h->N, w); return LP_OK; }
    i -= 1;
    for (int j = X * i + 1; j <= X * i + X && j < h->L; j++) {   /* node allgather, raw */
        int to = (h->l + j) % h->L, from = (h->l - j + h->L) % h->L;
        size_t mo, mn, fo, fn;
        shard(h, h->l, &mo, &mn);
        shard(h, from, &fo, &fn);
        if (mn) lp_lane_send(r, a, a->rbuf + mo * (size_t)es, mn * (size_t)es, mn * (size_t)es, node_peer(a, h, to),
                             a->tag0 + LP_TAG_DOWN2);
        if (fn) lp_lane_recv(r, a, a->rbuf + fo * (size_t)es, fn * (size_t)es, fn * (size_t)es, node_peer(a, h, from),
                             a->tag0 + LP_TAG_DOWN2);
    }
    return LP_OK;
}

/* phase i of the wavefront: stage i - D p of every piece p that has one */
static int hphase(lp_req_t *r, const lp_args_t *a, hier_t *h, int i) {
    const int S = hstages(h);
    for (int p = 0; p < h->K; p++) {
        if (i - h->D * p < 0 || i - h->D * p >= S) continue;
        piece(a, h, p);
        int rc = hstage(r, a, h, p, i - h->D * p);
        if (rc != LP_OK) return rc;
    }
    return LP_OK;
}

/* ---- flow: the lanes of a half, step p of each = piece p ---- */
/* a transfer lane over every piece: `bytes` in all, cb a piece (the last one's cut), step p at
 * base + p * stride */
static lp_lane_t *fxfer(lp_req_t *r, const lp_args_t *a, int send, const void *base, size_t bytes, size_t cb,
                        size_t stride, int peer, int tag) {
    if (!bytes) return NULL;
    lp_lane_t *l = send ? lp_lane_send(r, a, base, bytes, cb, peer, tag) : lp_lane_recv(r, a, (void *)base, bytes, cb, peer, tag);
    if (l) l->r[0].stride = stride;
    return l;
}
/* a local step lane: step p works on piece p (its work area, at w0 + p * stride) */
static lp_lane_t *flocal(lp_req_t *r, const lp_args_t *a, const hier_t *h, int sub, char *w0, size_t stride) {
    lp_lane_t *l = lp_lane_xport(r, a, &xport, sub, w0, (size_t)h->K, 1);
    if (l) l->r[0].stride = stride;
    return l;
}
static void after_all(lp_lane_t *l, lp_lane_t *const *m, int n) {
    for (int i = 0; i < n; i++) lp_lane_after(l, m[i], 0);
}

static int fphase(lp_req_t *r, const lp_args_t *a, const hier_t *h, int half) {
    char *w0 = lp_req_area(r, LP_AREA_WORK);
    const size_t st = hstride(a, h), es = a->esize, raw = h->c * es, sh = h->Sh * es, xf = xfull(a, h);
    const hlayout_t L = hlayout(a, h);
    lp_lane_t *got[LP_DEPS_MAX];
    int ng = 0;
    if (half == 0) {
        for (int j = 1; j < h->L; j++) {             /* node reduce-scatter of the raw shards */
            int to = (h->l + j) % h->L, from = (h->l - j + h->L) % h->L;
            fxfer(r, a, 1, a->sbuf + (size_t)to * sh, across(a, h, h->Sh * (size_t)to, h->Sh) * es, sh, raw,
                  node_peer(a, h, to), a->tag0 + LP_TAG_UP);
            lp_lane_t *g = fxfer(r, a, 0, w0 + L.raw + (size_t)from * L.slot, across(a, h, h->Sh * (size_t)h->l, h->Sh) * es,
                                 sh, st, node_peer(a, h, from), a->tag0 + LP_TAG_UP);
            if (g) got[ng++] = g;
        }
        lp_lane_t *ns = nsum_in_place(a, h->L) ? NULL : flocal(r, a, h, H_NODE_SUM, w0, st);
        after_all(ns, got, ng);
        lp_lane_t *enc = flocal(r, a, h, F_ENC_X, w0, st);
        lp_lane_after(enc, ns, 0);
        ng = 0;
        for (int j = 1; j < h->N; j++) {             /* across: encoded segments to their owners */
            int to = (h->k + j) % h->N, from = (h->k - j + h->N) % h->N;
            lp_lane_after(fxfer(r, a, 1, w0 + L.in + xoff(a, h, to), xacross(a, h, to), xf, st, cross_peer(a, h, to),
                                a->tag0 + LP_TAG_DOWN), enc, 0);
            lp_lane_t *g = fxfer(r, a, 0, w0 + L.recv + (size_t)from * L.xslot, xacross(a, h, h->k), xf, st,
                                 cross_peer(a, h, from), a->tag0 + LP_TAG_DOWN);
            if (g) got[ng++] = g;
        }
        lp_lane_t *xs = flocal(r, a, h, H_X_SUM, w0, st);
        after_all(xs, got, ng);
        lp_lane_after(xs, ns, 0);
        lp_lane_after(flocal(r, a, h, H_ENC_RES, w0, st), xs, 0);
        return LP_OK;
    }
    for (int j = 1; j < h->N; j++) {                 /* across: the owners' encoded results */
        int to = (h->k + j) % h->N, from = (h->k - j + h->N) % h->N;
        fxfer(r, a, 1, w0 + L.all + xoff(a, h, h->k), xacross(a, h, h->k), xf, st, cross_peer(a, h, to),
              a->tag0 + LP_TAG_UP2);
        lp_lane_t *g = fxfer(r, a, 0, w0 + L.all + xoff(a, h, from), xacross(a, h, from), xf, st,
                             cross_peer(a, h, from), a->tag0 + LP_TAG_UP2);
        if (g) got[ng++] = g;
    }
    lp_lane_t *dec = flocal(r, a, h, F_DEC_X, w0, st);
    after_all(dec, got, ng);
    for (int j = 1; j < h->L; j++) {                 /* node allgather of the results, raw */
        int to = (h->l + j) % h->L, from = (h->l - j + h->L) % h->L;
        lp_lane_after(fxfer(r, a, 1, a->rbuf + (size_t)h->l * sh, across(a, h, h->Sh * (size_t)h->l, h->Sh) * es, sh,
                            raw, node_peer(a, h, to), a->tag0 + LP_TAG_DOWN2), dec, 0);
        fxfer(r, a, 0, a->rbuf + (size_t)from * sh, across(a, h, h->Sh * (size_t)from, h->Sh) * es, sh, raw,
              node_peer(a, h, from), a->tag0 + LP_TAG_DOWN2);
    }
    return LP_OK;
}

/* the arithmetic of piece (the current one of h) at its work area w */
static void enc_x(const lp_args_t *a, const hier_t *h, const hlayout_t *L, char *w, int j) {
    const lp_dtype_t at = acc64(a) ? LP_FLOAT64 : LP_FLOAT32;
    size_t so, sn, o, n;
    if (j == h->k) return;
    shard(h, h->l, &so, &sn);
    xseg(h, j, &o, &n);
    const char *nsum = nsum_in_place(a, h->L) ? a->sbuf + so * a->esize : w + L->acc;
    if (n) lp_cz_encode(a->comp, at, nsum + (o - so) * accsz(a), n, w + L->in + xoff(a, h, j));
}
static int dec_x(const lp_args_t *a, const hier_t *h, const hlayout_t *L, char *w, int j) {
    size_t o, n;
    xseg(h, j, &o, &n);
    return n ? lp_cz_decode_to(a->comp, a->dt, w + L->all + xoff(a, h, j), n, a->rbuf + o * a->esize, stream(a)) : LP_OK;
}

static int hstep(const lp_lane_t *l, size_t k, char *w, hier_t *h) {
    const lp_args_t *a = l->a;
    const int flow = l->sub == F_ENC_X || l->sub == F_DEC_X;
    piece(a, h, (int)((size_t)(w - lp_req_area(l->owner, LP_AREA_WORK)) / hstride(a, h)));
    const hlayout_t L = hlayout(a, h);
    const size_t es = a->esize;
    const lp_dtype_t at = acc64(a) ? LP_FLOAT64 : LP_FLOAT32;
    size_t so, sn, o, n;
    shard(h, h->l, &so, &sn);
    const char *nsum = nsum_in_place(a, h->L) ? a->sbuf + so * es : w + L.acc;
    switch (l->sub) {
    case H_NODE_SUM:                                /* shard l: the node's inputs in rank order */
        if (nsum != w + L.acc) return LP_OK;
        for (int m = 0; m < h->L && sn; m++) {
            const char *src = m == h->l ? a->sbuf + so * es : w + L.raw + (size_t)m * L.slot;
            lp_cz_widen(a->dt, src, sn, w + L.acc, m > 0);
        }
        return LP_OK;
    case H_ENC_X:                                   /* cross segment k of the node sum */
    case F_ENC_X:                                   /* every cross segment of it */
        for (int j = flow ? 0 : (int)k; j <= (flow ? h->N - 1 : (int)k); j++) enc_x(a, h, &L, w, j);
        return LP_OK;
    case H_X_SUM:                                   /* my cross segment: the nodes' sums in order */
        xseg(h, h->k, &o, &n);
        for (int j = 0; j < h->N && n; j++) {
            if (j == h->k) lp_cz_widen(at, nsum + (o - so) * accsz(a), n, w + L.xacc, j > 0);
            else lp_cz_decode_acc(a->comp, acc64(a), w + L.recv + (size_t)j * L.xslot, n, w + L.xacc, j > 0);
        }
        if (n && a->op == LP_AVG) lp_scale(w + L.xacc, n, at, (double)a->size);
        return LP_OK;
    case H_ENC_RES:
        xseg(h, h->k, &o, &n);
        if (n) lp_cz_encode(a->comp, at, w + L.xacc, n, w + L.all + xoff(a, h, h->k));
        return LP_OK;
    default:                                        /* H_DEC_X: segment k of shard l's result; F_DEC_X: all */
        for (int j = flow ? 0 : (int)k; j <= (flow ? h->N - 1 : (int)k); j++) {
            int rc = dec_x(a, h, &L, w, j);
            if (rc != LP_OK) return rc;
        }
        return LP_OK;
    }
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    const int G = groups(a->size);
    for (int j = 0; j < a->size; j++)
        if (ebytes(a, j) > (size_t)INT_MAX)
            return LP_FAIL(LP_ERR_ARG, "compression: a segment of %zu encoded bytes (at most 2^31 - 1: use "
                           "more ranks or split the call)", ebytes(a, j));
    hier_t h;
    if (hier(a, &h)) {
        p->nphases = h.flow ? 2 : hstages(&h) + h.D * (h.K - 1);
        p->work = (size_t)h.K * hstride(a, &h);
        return LP_OK;
    }
    if (a->coll == LP_ALLGATHER) p->nphases = 1 + G + 1;                 /* enc, exchange, dec */
    else if (a->coll == LP_ALLREDUCE) p->nphases = 1 + G + 1 + 1 + G + 1;
    else p->nphases = 1 + G + 1 + 1;                                     /* enc, exchange, reduce, out */
    p->work = layout(a).total;
    return LP_OK;
}

/* the exchange of group g: send segment `to`'s bytes at src(to), receive from `from` at dst */
static void exchange(lp_req_t *r, const lp_args_t *a, int g, int tag, int gather) {
    const int P = a->size, me = a->rank;
    char *w = lp_req_area(r, LP_AREA_WORK);
    const layout_t L = layout(a);
    for (int j = XCH * g + 1; j <= XCH * g + XCH && j < P; j++) {
        int to = (me + j) % P, from = (me - j + P) % P;
        if (gather) {          /* my encoded result to every peer; theirs into their slots */
            size_t mb = ebytes(a, me), fb = ebytes(a, from);
            if (mb) lp_lane_send(r, a, w + L.all + eoff(a, me), mb, mb, to, tag);
            if (fb) lp_lane_recv(r, a, w + L.all + eoff(a, from), fb, fb, from, tag);
        } else {               /* segment `to` of my input to its owner; mine from `from` */
            size_t tb = ebytes(a, to), mb = ebytes(a, me);
            if (tb) lp_lane_send(r, a, w + L.in + eoff(a, to), tb, tb, to, tag);
            if (mb) lp_lane_recv(r, a, w + L.recv + (size_t)from * L.slot, mb, mb, from, tag);
        }
    }
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    hier_t h;
    if (hier(a, &h)) return h.flow ? fphase(r, a, &h, i) : hphase(r, a, &h, i);
    const int G = groups(a->size);
    const int t1 = a->tag0 + LP_TAG_UP, t2 = a->tag0 + LP_TAG_DOWN;
    if (a->coll == LP_ALLGATHER) {
        if (i == 0) local(r, a, CZ_ENC_RES, 1);
        else if (i <= G) exchange(r, a, i - 1, t1, 1);
        else local(r, a, CZ_DEC_ALL, (size_t)a->size);
        return LP_OK;
    }
    if (i == 0) {
        local(r, a, CZ_ENC_ALL, (size_t)a->size);
        return LP_OK;
    }
    if (i <= G) {
        exchange(r, a, i - 1, t1, 0);
        return LP_OK;
    }
    i -= G + 1;
    if (i == 0) local(r, a, CZ_REDUCE, 1);
    else if (a->coll != LP_ALLREDUCE) local(r, a, CZ_OUT, 1);
    else if (i == 1) local(r, a, CZ_ENC_RES, 1);
    else if (i <= 1 + G) exchange(r, a, i - 2, t2, 1);
    else local(r, a, CZ_DEC_ALL, (size_t)a->size);
    return LP_OK;
}

/* tests only (LPMPI_TEST_CZ_REENCODE=1, config.c): the partial sum rounded again after every
 * rank's part, as a ring that re-encodes at every hop would: the bound tests must fail then */
int lp_test_cz_reencode;
void lp_set_test_cz_reencode(int on) { lp_test_cz_reencode = on; }
static void reencode(const lp_args_t *a, void *acc, size_t n, void *tmp) {
    lp_dtype_t t = acc64(a) ? LP_FLOAT64 : LP_FLOAT32;
    lp_cz_encode(a->comp, t, acc, n, tmp);
    lp_cz_decode_acc(a->comp, acc64(a), tmp, n, acc, 0);
}

/* the local steps: step k of CZ_ENC_ALL / CZ_DEC_ALL is segment k */
static int step(const lp_lane_t *l, size_t k, char *out, size_t len) {
    (void)len;
    const lp_args_t *a = l->a;
    hier_t h;
    if (l->sub >= H_NODE_SUM && hier(a, &h)) return hstep(l, k, out, &h);
    lp_req_t *r = l->owner;
    char *w = lp_req_area(r, LP_AREA_WORK);
    const layout_t L = layout(a);
    const int me = a->rank, P = a->size;
    const size_t es = a->esize;
    size_t off, n;
    switch (l->sub) {
    case CZ_ENC_ALL:                       /* segment k of my input, for its owner */
        if ((int)k == me) return LP_OK;    /* (the owner adds its own input exactly) */
        seg(a, (int)k, 1, &off, &n);
        if (n) lp_cz_encode(a->comp, a->dt, a->sbuf + off * es, n, w + L.in + eoff(a, (int)k));
        return LP_OK;
    case CZ_REDUCE: {                      /* my segment: the P inputs in rank order */
        seg(a, me, 1, &off, &n);
        if (!n) return LP_OK;
        void *acc = w + L.acc;
        for (int p = 0; p < P; p++) {
            if (p == me) lp_cz_widen(a->dt, a->sbuf + off * es, n, acc, p > 0);
            else lp_cz_decode_acc(a->comp, acc64(a), w + L.recv + (size_t)p * L.slot, n, acc, p > 0);
            if (lp_test_cz_reencode && p > 0 && p < P - 1)   /* tests: the wrong design, a ring's */
                reencode(a, acc, n, w + L.recv + (size_t)me * L.slot);
        }
        if (a->op == LP_AVG) lp_scale(acc, n, acc64(a) ? LP_FLOAT64 : LP_FLOAT32, (double)P);
        return LP_OK;
    }
    case CZ_OUT: {                         /* reduce_scatter: the owner's result, its block */
        size_t roff, rn;
        seg(a, me, 0, &roff, &rn);
        if (!rn) return LP_OK;
        return lp_cz_narrow(a->dt, w + L.acc, rn, a->rbuf + roff * es);
    }
    case CZ_ENC_RES:                       /* allreduce: my reduced segment; allgather: my block */
        seg(a, me, 1, &off, &n);
        if (!n) return LP_OK;
        if (a->coll == LP_ALLREDUCE)
            lp_cz_encode(a->comp, acc64(a) ? LP_FLOAT64 : LP_FLOAT32, w + L.acc, n, w + L.all + eoff(a, me));
        else
            lp_cz_encode(a->comp, a->dt, (a->sbuf == a->rbuf ? (const char *)a->rbuf : a->sbuf) + off * es, n,
                         w + L.all + eoff(a, me));
        return LP_OK;
    default:                               /* CZ_DEC_ALL: segment k into the result */
        seg(a, (int)k, 0, &off, &n);
        if (!n) return LP_OK;
        return lp_cz_decode_to(a->comp, a->dt, w + L.all + eoff(a, (int)k), n, a->rbuf + off * es, stream(a));
    }
}

static const lp_xport_t xport = {.name = "codec", .step = step};

const lp_sched_t lp_sched_cz = {plan, phase, NULL, NULL, NULL};
