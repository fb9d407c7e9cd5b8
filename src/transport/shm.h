/* transport/shm.h: the shared-memory segment's layout (transport/shm.c makes and maps it; the
 * schedule that runs rounds through it, alg/alg_ring_shm.c, reads and stores its counters).  Per
 * rank a region of `stride` bytes: HEAD bytes of counters (in, out, done: one cache line each;
 * line CTR_EV holds the rank's wake-up word, a futex, and how many of its threads sleep on it),
 * then two slots of `slot` bytes. */
#ifndef LPMPI_TRANSPORT_SHM_H
#define LPMPI_TRANSPORT_SHM_H

#include "internal.h"
#include <stdatomic.h>
#include <stdint.h>

/* the counters, indexed like the steps that advance them (the lane's sub) */
enum { CTR_IN = 0, CTR_OUT = 1, CTR_DONE = 2, CTR_EV = 3, HEAD = 256, LINE = 64 };

typedef _Atomic uint64_t ctr_t;
static inline ctr_t *ctr(const lp_shm_t *s, int p, int which) {
    return (ctr_t *)(s->base + (size_t)p * s->stride + (size_t)which * LINE);
}
static inline char *slot_of(const lp_shm_t *s, int p, uint64_t g) {
    return s->base + (size_t)p * s->stride + HEAD + (size_t)(g & 1) * s->slot;
}

typedef _Atomic uint32_t word_t;
static inline word_t *ev_word(const lp_shm_t *s, int p) {
    return (word_t *)(s->base + (size_t)p * s->stride + (size_t)CTR_EV * LINE);
}
static inline word_t *sleepers(const lp_shm_t *s, int p) { return ev_word(s, p) + 1; }

/* waiting without spinning (shm.c): arm, disarm, sleep (the transport interface's, schedule.h
 * lp_xport_t), wake the sleeping peers after a counter store, and a peer whose process is gone */
void lp_shm_arm(const void *seg, int me, uint32_t *v);
void lp_shm_disarm(const void *seg, int me);
void lp_shm_sleep(const void *seg, int me, uint32_t v, long timeout_ns);
void lp_shm_wake_peers(const lp_shm_t *s, int me);
int lp_shm_gone(const void *seg, int me, int *pid);

#endif
