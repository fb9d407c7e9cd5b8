/* Staged linear pipelining: LP (alg_lp.c) for device memory over an MPI without device support.
 * Each chunk is staged through pinned host slots with asynchronous copies on the engine's own
 * streams, and reduced on the device, so that for successive chunks the device-to-host copy,
 * the MPI transfer, the host-to-device copy and the device reduction all overlap.
 *
 * Same chains, chunks, tags and message order as alg_lp.c (a staged rank and a host rank
 * interoperate); the device work goes through a->dev (devops.h: CUDA, or the host emulation).
 *
 *   per chunk k, slot s = k mod W (W = staging buffers), stream UP of the chain:
 *     tail     D2H  sbuf[k] -> out[s]                                      event up[s] -> Isend out[s]
 *     middle   Irecv in[s];  H2D in[s] -> din[s];  reduce acc = sbuf[k] op din[s];
 *              D2H acc -> out[s]                                           event up[s] -> Isend out[s]
 *     head     Irecv in[s];  H2D;  reduce into rbuf[k];  (AVG: scale);
 *              allreduce: D2H rbuf[k] -> out[s]                            event up[s] -> Isend down
 *   finals, stream DOWN of the chain, slot t = k mod W:
 *     Irecv fin[t] -> H2D fin[t] -> rbuf[k] (event dn[t]) and at once Isend fin[t] further down;
 *     bcast root: D2H rbuf[k] -> fin[t] (event dn[t]) -> Isend fin[t].
 *   acc is rbuf[k] (allreduce: that region is overwritten by the final later) or, on the middle
 *   ranks of reduce, whose rbuf is never written, a device slot dout[s].
 *
 *   time --->        chunk k          chunk k+1        chunk k+2
 *   copy engine D2H  [D2H k]          [D2H k+1]        [D2H k+2]
 *   MPI                       [send k]         [send k+1]
 *   copy engine H2D      [H2D k-1]         [H2D k]          [H2D k+1]
 *   SMs                          [red k-1]        [red k]
 *
 * Schedule: one phase; per chain the lanes (W = staging buffers; DEV lanes end each step with
 * an event, so "after" a DEV step means after its device work ran):
 *
 *   PR   RECV  partial k from v+1 into in[s]                          after UP k-W
 *   UP   DEV   (stream up) the per-chunk device work above            after PR k, PS k-W
 *                                                                     (head of allreduce: FS k-W)
 *   PS   SEND  out[s] to v-1                                          after UP k
 *   FR   RECV  final k from v-1 into fin[t]                           after DN k-W, FS k-W
 *   DN   DEV   (stream down) H2D fin[t] -> rbuf[k]; bcast root: D2H rbuf[k] -> fin[t]
 *                                                                     after FR k (root: FS k-W)
 *   FS   SEND  fin[t] (head of allreduce: out[s]) to v+1             after FR k (root: DN k,
 *                                                                     head: UP k)
 *
 * Slot reuse is guarded by those dependencies, in chunk order: in[s] is reposted once chunk
 * k's up-stage event completed (its H2D has read in[s]); out[s] is rewritten once the send of
 * chunk k-W completed; fin[t] is reposted once its H2D event completed and its forward send
 * completed.  A final is copied into rbuf only after this rank's partial of that chunk left
 * (the final cannot exist before), so it never overwrites data still to be read.  The two
 * directions use separate streams, so a final's H2D never waits behind the next partial's
 * copies.  The engine polls events and MPI requests while device work is in flight.
 *
 * Cost: the LP cost (cost_*_lp, src/alg/registry.c) with chunk steps of max(alpha + c beta, c / B_pcie, c gamma_dev)
 * once the pipeline is full, plus about two chunk copies to fill and drain it.
 * Memory: per chain 3 W chunk slots of pinned host memory and 2 W of device memory.
 * Limits: W <= 64 (events); chunk_bytes as LP. */
#include "internal.h"

typedef struct {
    int up, down;             /* directions in use */
    int left, right;          /* neighbours in the chain (real ranks or -1) */
    int tag_up, tag_down;
    int s_up, s_dn;           /* streams */
    size_t base, bytes, K, W, cb;
    size_t ss;                /* slot stride: min(cb, bytes), rounded up to 256 bytes */
} schain_t;

/* chain `i` over the ranks from `head` in direction dir, carrying bytes [base, base + bytes) */
static void schain_init(const lp_args_t *a, schain_t *c, int i, int up, int down, int head, int dir,
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
    c->ss = ((c->cb < bytes ? c->cb : bytes) + 255) & ~(size_t)255;
    c->W = a->staging < c->K ? a->staging : c->K;
    if (c->W == 0) c->W = 1;
    c->s_up = 1 + 2 * i;
    c->s_dn = 2 + 2 * i;
    c->tag_up = a->tag0 + tag_up;
    c->tag_down = a->tag0 + tag_down;
}

/* the same chains as alg_lp.c */
static int schains(const lp_args_t *a, schain_t c[2]) {
    lp_chain_spec_t s[2];
    int n = lp_chain_specs(a, s);
    for (int i = 0; i < n; i++)
        schain_init(a, &c[i], i, s[i].up, s[i].down, s[i].head, s[i].dir, s[i].base, s[i].bytes,
                    s[i].tag_up, s[i].tag_down);
    return n;
}

/* regions of the DEV lanes */
enum { R_OWN, R_ACC, R_IN, R_DIN, R_OUT };      /* UP */
enum { R_RES = 0, R_FIN = 1 };                   /* DN */

static void schain_lanes(lp_req_t *r, const lp_args_t *a, const schain_t *c, char *h, char *d) {
    const int up_src = c->up && c->right >= 0, up_dst = c->up && c->left >= 0;
    const int up_head = c->up && c->left < 0;
    const int dn_src = c->down && c->left >= 0, dn_dst = c->down && c->right >= 0;
    const int dn_root = c->down && !c->up && c->left < 0;
    const unsigned W = (unsigned)c->W;
    const size_t slot = c->W * c->ss;
    char *in = h, *out = h + slot, *fin = h + 2 * slot, *din = d, *dout = d + slot;
    const char *own = a->sbuf + c->base;
    char *res = a->rbuf ? a->rbuf + c->base : NULL;
    lp_lane_t *pr = NULL, *up = NULL, *ps = NULL, *fr = NULL, *dn = NULL, *fs = NULL;
    if (up_src) {
        pr = lp_lane_recv(r, a, in, c->bytes, c->cb, c->right, c->tag_up);
        lp_lane_slots(pr, 0, in, c->ss, W);
    }
    if (c->up) {
        up = lp_lane_dev(r, a, c->s_up, c->bytes, c->cb);
        lp_lane_region(up, R_OWN, own);
        lp_lane_slots(up, R_OUT, out, c->ss, W);
        if (!up_src) {                                     /* tail: own data as is */
            lp_lane_dop(up, LP_DOP_D2H, R_OUT, R_OWN, 0);
        } else {
            if (up_dst && !c->down) lp_lane_slots(up, R_ACC, dout, c->ss, W);   /* reduce's middle */
            else lp_lane_region(up, R_ACC, res);
            lp_lane_slots(up, R_IN, in, c->ss, W);
            lp_lane_slots(up, R_DIN, din, c->ss, W);
            lp_lane_dop(up, LP_DOP_H2D, R_DIN, R_IN, 0);
            lp_lane_dop(up, LP_DOP_REDUCE, R_ACC, R_OWN, R_DIN);
            if (up_head && a->op == LP_AVG) lp_lane_dop(up, LP_DOP_SCALE, R_ACC, 0, 0);
            if (up_dst || c->down) lp_lane_dop(up, LP_DOP_D2H, R_OUT, R_ACC, 0);
        }
        lp_lane_after(up, pr, 0);
        lp_lane_after(pr, up, -(long)W);
    }
    if (up_dst) {
        ps = lp_lane_send(r, a, out, c->bytes, c->cb, c->left, c->tag_up);
        lp_lane_slots(ps, 0, out, c->ss, W);
        lp_lane_after(ps, up, 0);
        lp_lane_after(up, ps, -(long)W);
    }
    if (dn_src) {
        fr = lp_lane_recv(r, a, fin, c->bytes, c->cb, c->left, c->tag_down);
        lp_lane_slots(fr, 0, fin, c->ss, W);
    }
    if (dn_src || dn_root) {
        dn = lp_lane_dev(r, a, c->s_dn, c->bytes, c->cb);
        lp_lane_region(dn, R_RES, res);
        lp_lane_slots(dn, R_FIN, fin, c->ss, W);
        if (dn_src) lp_lane_dop(dn, LP_DOP_H2D, R_RES, R_FIN, 0);
        else lp_lane_dop(dn, LP_DOP_D2H, R_FIN, R_RES, 0);
        lp_lane_after(dn, fr, 0);
        lp_lane_after(fr, dn, -(long)W);
    }
    if (dn_dst) {
        fs = lp_lane_send(r, a, up_head ? out : fin, c->bytes, c->cb, c->right, c->tag_down);
        lp_lane_slots(fs, 0, up_head ? out : fin, c->ss, W);
        lp_lane_after(fs, dn_src ? fr : dn_root ? dn : up, 0);
        lp_lane_after(fr, fs, -(long)W);
        if (dn_root) lp_lane_after(dn, fs, -(long)W);
        if (up_head) lp_lane_after(up, fs, -(long)W);
    }
}

static int plan(lp_req_t *r, const lp_args_t *a, lp_plan_t *p) {
    (void)r;
    schain_t c[2];
    int n = schains(a, c);
    p->nphases = 1;
    for (int i = 0; i < n; i++) {
        p->pinned += 3 * c[i].W * c[i].ss;
        p->device += 2 * c[i].W * c[i].ss;
        p->events += 2 * (int)c[i].W;
    }
    return LP_OK;
}

static int phase(lp_req_t *r, const lp_args_t *a, int i) {
    (void)i;
    schain_t c[2];
    char *h = lp_req_area(r, LP_AREA_PINNED), *d = lp_req_area(r, LP_AREA_DEVICE);
    int n = schains(a, c);
    for (int j = 0; j < n; j++) {
        schain_lanes(r, a, &c[j], h, d);
        h += 3 * c[j].W * c[j].ss;
        d += 2 * c[j].W * c[j].ss;
    }
    return LP_OK;
}

const lp_sched_t lp_sched_lp_staged = {plan, phase, NULL, NULL, NULL};
