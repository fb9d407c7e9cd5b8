/* topo.h: the neighbour and block arithmetic of every schedule, in one place (as Open MPI's
 * coll_base_topo.h and coll_base_functions.h): blocks of a message, virtual ranks relative to a
 * root, the chain (LP), the ring, the binomial tree (MST, BE's scatter and gather) and the
 * recursive halving / doubling groups with their fold (BE).  Pure functions, no MPI. */
#ifndef LPMPI_TOPO_H
#define LPMPI_TOPO_H

#include <stddef.h>

/* ---- blocks ---- */
/* block i of `nblocks` near-equal blocks of `count` elements: elements [*off, *off + *len) */
static inline void lp_block(size_t count, int nblocks, int i, size_t *off, size_t *len) {
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks, ui = (size_t)i;
    *off = ui * q + (ui < r ? ui : r);
    *len = q + (ui < r ? 1 : 0);
}
/* elements of blocks [lo, hi) */
static inline void lp_blocks(size_t count, int nblocks, int lo, int hi, size_t *off, size_t *len) {
    size_t o1, l1, o2, l2;
    if (hi <= lo) { lp_block(count, nblocks, lo, off, &l1); *len = 0; return; }
    lp_block(count, nblocks, lo, &o1, &l1);
    lp_block(count, nblocks, hi - 1, &o2, &l2);
    *off = o1; *len = o2 + l2 - o1;
}

/* ---- ranks relative to a root ---- */
static inline int lp_vrank(int rank, int root, int size) { return (rank - root + size) % size; }
static inline int lp_rrank(int vrank, int root, int size) { return (vrank + root) % size; }
static inline int lp_pof2_floor(int p) { int q = 1; while (q * 2 <= p) q *= 2; return q; }

/* ---- chain (LP) ----
 * position v of `rank` on the chain that starts at `head` and goes up (dir = 1) or down
 * (dir = -1) in rank order, and the real ranks of its neighbours v-1 (*left) and v+1
 * (*right), -1 at the ends */
static inline void lp_chain_pos(int rank, int head, int dir, int P, int *v, int *left, int *right) {
    *v = dir > 0 ? lp_vrank(rank, head, P) : lp_vrank(head, rank, P);
    *left = *v > 0 ? (head + dir * (*v - 1) + P) % P : -1;
    *right = *v < P - 1 ? (head + dir * (*v + 1) + P) % P : -1;
}

/* ---- ring ---- */
static inline int lp_ring_right(int rank, int P) { return (rank + 1) % P; }
static inline int lp_ring_left(int rank, int P) { return (rank - 1 + P) % P; }
/* ring reduce-scatter step s: the block rank sends, and the one it receives and reduces */
static inline int lp_ring_rs_send(int rank, int P, int s) { return ((rank - s) % P + P) % P; }
static inline int lp_ring_rs_recv(int rank, int P, int s) { return ((rank - s - 1) % P + P) % P; }
/* the block a rank owns after the reduce-scatter, and allgather step s's blocks */
static inline int lp_ring_owned(int rank, int P) { return (rank + 1) % P; }
static inline int lp_ring_ag_send(int rank, int P, int s) { return ((rank + 1 - s) % P + P) % P; }
static inline int lp_ring_ag_recv(int rank, int P, int s) { return ((rank - s) % P + P) % P; }

/* ---- binomial tree over virtual ranks v = 0 .. P-1 (root 0) ----
 * round i (mask = 2^i): v < mask with v + mask < P sends to v + mask (bcast) or receives from
 * it (reduce); v with lowest set bit `mask` is a child of v - mask. */
static inline int lp_binom_rounds(int P) { int r = 0; while ((1 << r) < P) r++; return r; }
static inline int lp_lowbit(int v) { return v & -v; }
/* the parent of v (-1 for the root) */
static inline int lp_binom_parent(int v) { return v ? v - lp_lowbit(v) : -1; }
/* does v exchange with v + mask (mask below v's lowest set bit, or v = 0)? */
static inline int lp_binom_has_child(int v, int mask, int P) {
    return (v == 0 || mask < lp_lowbit(v)) && v + mask < P;
}

/* ---- recursive halving / doubling with a fold (BE) ----
 * pof2 = the largest power of two <= P takes part; the rem = P - pof2 extra ranks are folded
 * first: among virtual ranks 0 .. 2 rem - 1 each odd one sends its vector to the even one
 * below and sits out (newrank -1); the others are renumbered 0 .. pof2 - 1. */
typedef struct {
    int P, pof2, rem, v, newrank, root;
} lp_rd_t;

static inline void lp_rd_init(lp_rd_t *b, int rank, int P, int root) {
    b->P = P;
    b->pof2 = lp_pof2_floor(P);
    b->rem = P - b->pof2;
    b->root = root;
    b->v = lp_vrank(rank, root, P);
    if (b->v < 2 * b->rem) b->newrank = (b->v % 2) ? -1 : b->v / 2;
    else b->newrank = b->v - b->rem;
}
/* real rank of a participant */
static inline int lp_rd_real(const lp_rd_t *b, int newrank) {
    int v = newrank < b->rem ? 2 * newrank : newrank + b->rem;
    return lp_rrank(v, b->root, b->P);
}
/* folded pairs: 1 when v is in the fold, its partner's real rank in *partner */
static inline int lp_rd_folded(const lp_rd_t *b, int *partner) {
    if (b->v >= 2 * b->rem) return 0;
    *partner = lp_rrank(b->v % 2 ? b->v - 1 : b->v + 1, b->root, b->P);
    return 1;
}
static inline int lp_log2(int pof2) { int r = 0; while ((1 << r) < pof2) r++; return r; }

#endif
