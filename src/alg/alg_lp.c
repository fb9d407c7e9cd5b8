/* Linear pipelining (LP): the message is cut into chunks that flow along a chain of ranks,
 * so every link of the chain is busy at once.
 *
 *   chain position v = 0 (head) ... P-1 (tail)
 *
 *   up   (reduce):   tail -> ... -> v+1 -> v -> v-1 -> ... -> head   partial sums
 *   down (bcast):    head -> ... -> v-1 -> v -> v+1 -> ... -> tail   finished chunks
 *
 *   time --->   chunk:  0   1   2   3   4 ...
 *   link P-1->P-2      [0] [1] [2] [3] [4]
 *   link P-2->P-3          [0] [1] [2] [3] [4]          (one step behind per hop)
 *
 * reduce    = up only, chain ordered from the root (v = rank - root mod P), head = root.
 * bcast     = down only, chain ordered from the root.
 * allreduce = up and down at once: the head finishes chunk k and sends it back down while
 *             chunk k+1.. still travel up, so each link carries traffic both ways (full
 *             duplex).  Two such chains run at once in opposite rank orders (0..P-1 and
 *             P-1..0), each carrying half of the message: the chain's two ends then share
 *             the reduction work (at P = 2 each rank reduces half instead of one rank all).
 *
 * Cost (alpha latency, beta per byte moved, gamma per byte reduced; K = n/c chunks of c
 * bytes): bcast and reduce take K + P - 2 steps of one chunk; allreduce (two chains of
 * n/(2c) chunks) K + 2P - 3 latencies plus a middle rank's port carrying 2n.  The formulas
 * are written once, in src/alg/registry.c (cost_*_lp); nearly flat in P while the pipeline fill
 * stays small against n.  The optimal chunk is the registry cost's minimum
 * (lp_optimal_chunk, src/tune/model.c; lpmpi.model.optimal_chunk); "auto" takes the best power
 * of two (lp_best_chunk).
 *
 * Several nodes: the chains follow node order (lp_chain_at), crossing each node boundary once.
 *
 * Deterministic order: chunk k's result is x_0 op (x_1 op (... op x_{P-1})) in chain order,
 * computed once at the head and copied everywhere else, so allreduce results are
 * bitwise identical on every rank and run to run.
 *
 * Schedule: one phase; per chain, the lanes of a rank at chain position v (W = the window):
 *
 *   PR   RECV   partial k from v+1 into slot k mod W      after RED k-W (the slot is free)
 *   RED  REDUCE out k = own k op slot k mod W             after PR k, after PS k-W
 *   FIN  SCALE  AVG: chunk k /= P, at the head            after RED k
 *   PS   SEND   out k (the tail: own k) to v-1            after RED k
 *   FR   RECV   final k from v-1 into recvbuf             after PS k (its region has left)
 *                (relayed(): into slot k mod W instead,  after FC k-W)
 *   FC   COPY   relayed(): slot -> recvbuf k, streaming   after FR k
 *   FS   SEND   final k to v+1                            after FR (FC) k (head: FIN or RED k)
 *
 * i.e. receive-reduce-send up the chain and receive-copy-send down it; `out` is recvbuf,
 * or W slots of its own on the middle ranks of reduce (their recvbuf is never written).
 * The engine keeps W chunks in flight per transfer lane, so the reduction of chunk k
 * overlaps the transfers of chunks k+1.. in both directions.
 * acc_dtype (float32 partials for 16-bit data): the head rounds chunk k (NARROW, after FIN or
 * RED) into the 16-bit result, and FR / FS move 16-bit chunks of half the bytes down the chain.
 * Memory: W chunk slots for incoming partials, plus W for outgoing partials on the middle
 * ranks of reduce, plus W for incoming finals where relayed().  Limits: none on P or count; chunk_bytes is clamped to lp_max_msg_bytes
 * by the decision. */
#include "internal.h"

typedef struct {
    int up, down;           /* directions in use */
    int left, right;        /* real ranks of v-1 and v+1, or -1 */
    int tag_up, tag_down;
    size_t base, bytes;     /* the part of the message this chain carries */
    size_t cb, K, W;        /* chunk bytes, chunks, window */
} chain_t;

/* chain over the ranks starting at `head`, going up (dir = 1) or down (dir = -1) in rank
 * order, carrying bytes [base, base + bytes) of the message */
static void chain_init(const lp_args_t *a, chain_t *c, int up, int down, int head, int dir,
                       size_t base, size_t bytes, int tag_up, int tag_down) {
    int v;
    memset(c, 0, sizeof *c);
    c->up = up;
    c->down = down;
    lp_chain_at(a, head, dir, &v, &c->left, &c->right);
    c->base = base;
    c->bytes = bytes;
    c->cb = a->chunk_elems * a->esize;
    c->K = (bytes + c->cb - 1) / c->cb;
    c->W = a->window < c->K ? a->window : c->K;
    if (c->W == 0) c->W = 1;
    c->tag_up = a->tag0 + tag_up;
    c->tag_down = a->tag0 + tag_down;
}

static int out_slots(const lp_args_t *a, const chain_t *c) {   /* middle ranks of reduce */
    (void)a;
    return c->up && !c->down && c->right >= 0 && c->left >= 0;
}

/* 1 where chunk k's final would land in the very lines this rank has just sent up the chain
 * (the tail in place, sending its own input; a middle rank of allreduce, sending its partial
 * from recvbuf) and the reader of those lines is a process of this node (MPI's single-copy
 * transfers: the left neighbour's core has just read them).  Rewriting lines another core has
 * just read costs that core's copies: on the AMD EPYC VM of issue 24 lp in place at 64 MiB took
 * 2-2.3x its out-of-place time in some spells (0.75x in others).  The final is then received
 * into one of W slots of this rank and copied into place with streaming stores (FC below), which
 * cost the same whoever read the lines (docs/results/issue24/inplace2/nt_probe.c).  Host memory,
 * no acc_dtype (its finals are the 16-bit result, never sent up). */
static int relayed(const lp_args_t *a, const chain_t *c) {
    if (!(c->up && c->down && c->left >= 0) || a->dev || a->acc) return 0;
    if (c->right < 0 && a->sbuf != a->rbuf) return 0;      /* tail out of place: other lines */
    return !a->node || a->node[c->left] == a->node[a->rank];
}

static size_t chain_scratch(const lp_args_t *a, const chain_t *c) {
    int in_slots = c->up && c->right >= 0;
    return (size_t)(in_slots + out_slots(a, c) + relayed(a, c)) * c->W * c->cb;
}

static void chain_lanes(lp_req_t *r, const lp_args_t *a, const chain_t *c, char *slots) {
    const int up_src = c->up && c->right >= 0, up_dst = c->up && c->left >= 0;
    const int dn_src = c->down && c->left >= 0, dn_dst = c->down && c->right >= 0;
    const long W = (long)c->W;
    char *in = slots, *out = out_slots(a, c) ? slots + c->W * c->cb : NULL;
    char *fin_slots = relayed(a, c) ? slots + (size_t)((c->up && c->right >= 0) + (out != NULL)) * c->W * c->cb : NULL;
    const char *own = a->sbuf + c->base;
    char *res = a->rbuf ? a->rbuf + c->base : NULL;
    /* acc_dtype (allreduce): the head rounds chunk k once; the 16-bit chunks go down */
    const int acc = a->acc && c->up && c->down;
    const size_t ratio_es = acc ? a->esize / lp_dtype_size(a->acc_dt) : 1;   /* float32 / 16-bit */
    char *dres = acc ? a->acc + c->base / ratio_es : res;
    const size_t dbytes = c->bytes / ratio_es, dcb = c->cb / ratio_es;
    lp_lane_t *pr = NULL, *red = NULL, *fin = NULL, *ps = NULL, *fr = NULL, *fc = NULL, *nar = NULL, *fs;
    if (up_src) {
        pr = lp_lane_recv(r, a, in, c->bytes, c->cb, c->right, c->tag_up);
        lp_lane_slots(pr, 0, in, c->cb, (unsigned)c->W);
        red = lp_lane_reduce(r, a, out ? out : res, own, in, c->bytes, c->cb);
        if (out) lp_lane_slots(red, 0, out, c->cb, (unsigned)c->W);
        lp_lane_slots(red, 2, in, c->cb, (unsigned)c->W);
        lp_lane_after(pr, red, -W);
        lp_lane_after(red, pr, 0);
        if (!up_dst) {                       /* head: chunk k is final */
            fin = lp_lane_scale(r, a, res, c->bytes, c->cb);
            lp_lane_after(fin, red, 0);
            if (acc) {
                nar = lp_lane_narrow(r, a, dres, res, c->bytes, c->cb);
                lp_lane_after(nar, fin ? fin : red, 0);
            }
        }
    }
    if (up_dst) {
        ps = lp_lane_send(r, a, red ? (out ? out : res) : own, c->bytes, c->cb, c->left, c->tag_up);
        if (red && out) lp_lane_slots(ps, 0, out, c->cb, (unsigned)c->W);
        lp_lane_after(ps, red, 0);
        lp_lane_after(red, ps, -W);
    }
    if (dn_src) {
        fr = lp_lane_recv(r, a, fin_slots ? fin_slots : dres, dbytes, dcb, c->left, c->tag_down);
        if (!acc) lp_lane_after(fr, ps, 0);  /* acc: it writes the 16-bit result, not res */
        if (fin_slots) {                     /* relayed(): FR into slot k mod W, FC copies it out */
            lp_lane_slots(fr, 0, fin_slots, dcb, (unsigned)c->W);
            fc = lp_lane_copy(r, a, dres, fin_slots, dbytes, dcb);
            fc->nt = 1;
            lp_lane_slots(fc, 1, fin_slots, dcb, (unsigned)c->W);
            lp_lane_after(fc, fr, 0);
            lp_lane_after(fr, fc, -W);
        }
    }
    if (dn_dst) {                            /* from recvbuf: a slot read by v+1 and rewritten W
                                                chunks later would cost what relayed() saves */
        fs = lp_lane_send(r, a, dres, dbytes, dcb, c->right, c->tag_down);
        lp_lane_after(fs, dn_src ? (fc ? fc : fr) : nar ? nar : fin ? fin : red, 0);
    }
}

int lp_chain_specs(const lp_args_t *a, lp_chain_spec_t s[2]) {
    const lp_coll_traits_t *T = lp_traits(a->coll);
    const int up = T->has_op, down = T->result != LP_ON_ROOT;
    size_t total = a->count * a->esize;
    if (T->has_root) {
        s[0] = (lp_chain_spec_t){up, down, a->root, 1, 0, total, up ? LP_TAG_UP : 0, down ? LP_TAG_DOWN : 0};
        return 1;
    }
    size_t half = (a->count + 1) / 2 * a->esize;
    s[0] = (lp_chain_spec_t){up, down, lp_chain_first(a), 1, 0, half, LP_TAG_UP, LP_TAG_DOWN};
    s[1] = (lp_chain_spec_t){up, down, lp_chain_last(a), -1, half, total - half, LP_TAG_UP2, LP_TAG_DOWN2};
    return total > half ? 2 : 1;
}

static int chains(const lp_args_t *a, chain_t c[2]) {
    lp_chain_spec_t s[2];
    int n = lp_chain_specs(a, s);
    for (int i = 0; i < n; i++)
        chain_init(a, &c[i], s[i].up, s[i].down, s[i].head, s[i].dir, s[i].base, s[i].bytes,
                   s[i].tag_up, s[i].tag_down);
    return n;
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    chain_t c[2];
    int n = chains(a, c);
    p->nphases = 1;
    p->narrows = a->acc && n && c[0].up && c[0].down;
    for (int i = 0; i < n; i++) p->work += chain_scratch(a, &c[i]);
    return LP_OK;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    chain_t c[2];
    char *slots = lp_req_area(r, LP_AREA_WORK);
    int n = chains(a, c);
    for (int j = 0; j < n; j++) {
        chain_lanes(r, a, &c[j], slots);
        slots += chain_scratch(a, &c[j]);
    }
    return LP_OK;
}

/* one schedule for the three collectives (the chains differ, see chains()) */
const lp_sched_t lp_sched_lp = {plan, phase, NULL, NULL, NULL};
