/* engine.h: the engine's own state, shared by its core files and by none of the algorithms.
 *
 *   config.c       knobs (window, largest MPI message, LPMPI_CHECK)
 *   context.c      per-communicator contexts and the table agreement of their first call
 *   registry.c     the one algorithm registry and each algorithm's cost
 *   model.c        the alpha-beta-gamma model's parameters and predictions
 *   table.c        tuning-table rows, their lookup and their fingerprint
 *   select.c       environment overrides and the one decision function (lp_decide)
 *   check.c        LPMPI_CHECK: do the ranks agree on a call?
 *   request.c      the entry points: a call becomes a request (context, decision, check,
 *                  schedule, memory), blocking, nonblocking or persistent
 *   sched/progress.h     the one progress engine: runs every request's schedule, observes every
 *                  completion, the optional progress thread
 *   schedule.c     the helpers schedules build their lanes with
 *
 * Data flows one way: request.c -> select.c -> (table.c, model.c -> registry.c), and
 * request.c -> sched/progress.h -> the schedules (alg_*.c); contexts hold what select.c reads per
 * communicator and the requests made on it. */
#ifndef LPMPI_ENGINE_H
#define LPMPI_ENGINE_H

#include "internal.h"
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

typedef struct lp_ctx lp_ctx_t;

/* ---- tuning rows (table.c) ---- */
/* transport: LP_TP_* (the ring allreduce's node-local transport; LP_TP_MODEL: the model's) */
/* nodes: the number of nodes of the machine the row was measured on (a one-node row never
 * decides across nodes, nor the reverse) */
/* learned: > 0 for the online tuner's row (LPMPI_AUTOTUNE_FILE, the per-machine cache): the
 * time it measured (seconds); its key starts settled on it, that time the drift's reference */
typedef struct { int coll, mem, P, alg; double lo, hi; size_t chunk; int staging, acc, transport, nodes; double learned; } lp_row_t;
typedef struct {
    lp_row_t *rows;
    size_t nrows, cap;
    uint64_t hash;        /* the fingerprint lpmpi/tables.py computed of them (0: none) */
} lp_table_t;

extern lp_table_t lp_table;           /* this process's table */
/* the row of `t` for (coll, mem, P, acc) covering nbytes, or NULL (the last matching row wins) */
const lp_row_t *lp_table_lookup(const lp_table_t *t, lp_coll_t coll, lp_mem_t mem, int P, int nodes, int acc,
                                size_t nbytes);
/* copy `src`'s rows into `dst` (dst's old rows freed) */
int lp_table_copy(lp_table_t *dst, const lp_table_t *src);
void lp_table_free(lp_table_t *t);

/* ---- model (model.c) ---- */
extern lp_model_t lp_model;           /* this process's model parameters */
double lp_predict_with(const lp_model_t *m, int alg, int P, int nodes, double nbytes, double chunk_bytes);
size_t lp_best_chunk_with(const lp_model_t *m, int alg, int P, int nodes, size_t nbytes);
/* traffic.c: the network term of a prediction (0 on one node) */
double lp_net_cost(const lp_model_t *m, int alg, int P, int nodes, double nbytes, double chunk_bytes);

/* ---- selection (select.c) ----
 * Everything "auto" reads (model, table rows, overrides) has a generation, bumped by every
 * change: a context's cached decision from an older generation is stale. */
extern unsigned long lp_select_gen;
int lp_decide(lp_ctx_t *ctx, const lp_key_t *key, int alg, size_t chunk_bytes, lp_choice_t *out);

/* ---- online tuning (autotune.c) ---- */
extern int lp_autotune;
/* a call's place in its key's window: the slot's word holds the window's generation (high 24
 * bits) and this rank's time in ns (low 40; LP_AT_PENDING while the call runs) */
typedef struct { struct lp_at_key *key; _Atomic uint64_t *word; unsigned gen; double t0; } lp_at_slot_t;
#define LP_AT_NS_BITS 40
#define LP_AT_NS_MASK ((UINT64_C(1) << LP_AT_NS_BITS) - 1)
#define LP_AT_PENDING LP_AT_NS_MASK          /* handed out, its call not ended */
#define LP_AT_FAILED (LP_AT_NS_MASK - 1)
#define LP_AT_MISSING (LP_AT_NS_MASK - 2)     /* never ran */
static inline uint64_t lp_at_word(unsigned gen, uint64_t v) { return ((uint64_t)gen << LP_AT_NS_BITS) | v; }
/* the call ended (ran 1 ok, 0 failed, -1 never ran): its time into its slot, on any thread (a
 * nonblocking call's end, sched/exec.c ended), only while the slot still holds its window's
 * LP_AT_PENDING (a late end never writes into a later window) */
static inline void lp_at_slot_end(lp_at_slot_t *s, int ran) {
    if (!s->key) return;
    s->key = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - s->t0;
    const uint64_t v = ran <= 0 ? (ran == 0 ? LP_AT_FAILED : LP_AT_MISSING)
                     : t <= 0 ? 0 : t * 1e9 >= (double)(LP_AT_MISSING - 1) ? LP_AT_MISSING - 1 : (uint64_t)(t * 1e9);
    uint64_t want = lp_at_word(s->gen, LP_AT_PENDING);
    atomic_compare_exchange_strong_explicit(s->word, &want, lp_at_word(s->gen, v), memory_order_release,
                                            memory_order_relaxed);
}
/* a call's choice under LPMPI_AUTOTUNE (ch: the static decision, replaced; slot: the call's
 * place in its key's window (esize: the dtype's size, part of the key)).  A blocking call's
 * slot is closed by lp_autotune_done (ran as lp_at_slot_end), which may agree the window's
 * times; a nonblocking call's by lp_at_slot_end when the request ends. */
int lp_autotune_pick(lp_ctx_t *ctx, const lp_key_t *key, int esize, int kind, lp_choice_t *ch, lp_at_slot_t *slot);
int lp_autotune_done(lp_ctx_t *ctx, lp_at_slot_t *slot, int ran);
int lp_autotune_open(lp_ctx_t *ctx);       /* the context's duplicate (context.c, first call) */
void lp_autotune_detach(lp_ctx_t *ctx);    /* its communicator goes (context.c) */
int lp_autotune_key_info(lp_ctx_t *ctx, const lp_key_t *key, int esize, lp_at_info_t *out);
/* the key's settled choice into *ch (1), or 0 where it has none (persistent requests' starts) */
int lp_autotune_settled(lp_ctx_t *ctx, const lp_key_t *key, int esize, lp_choice_t *ch);

/* ---- the flight recorder and the trace (obs/: recorder.c, trace.c, watch.c) ---- */
enum { LP_FR_PHASES = 8 };
enum { LP_FR_ENTERED = 0, LP_FR_STARTED = 1, LP_FR_DONE = 2, LP_FR_FAILED = 3 };
enum { LP_TRACE_SAMPLED = 1 };
/* a flight-recorder entry, one call: its communicator's id and its number there (the same on
 * every rank), clocks (ns, CLOCK_MONOTONIC; 0: not yet), sizes, what it is (LP_COLL, dtype, op,
 * root), its decision (registry index, chunk bytes, LP_TP_*), form (LP_REQ_*), LP_FR_* state, rc,
 * phase; the trace's phase starts (its sampled calls); the running request (NULL once ended) */
typedef struct {
    _Atomic uint64_t gen;
    uint64_t comm, seq;
    int64_t t_enter, t_start, t_end;
    uint64_t count, bytes, chunk;
    int32_t coll, dt, op, root, alg, tp, form, state, rc, phase, nphases, comp;   /* comp: LP_COMP_* */
    int64_t t_phase[LP_FR_PHASES];
    const struct lp_req *req;
    const char *alg_name;     /* the registry's name of alg ("" before the start) */
} lp_fr_ent_t;
/* the trace's file: 64-byte records (lpmpi/trace.py reads them: keep the two alike), a call's
 * (flags without LP_TRACE_PHASES) and, for the calls whose phases were timed, one more with the
 * phases' starts (flags with it): t_phase0 and each later phase's start - t_phase0 (ns) */
enum { LP_TRACE_PHASES = 2, LP_TRACE_COMP_SHIFT = 4 };   /* flags >> 4: the compression (LP_COMP_*) */
typedef struct {
    uint64_t comm, seq;
    int64_t t_enter, t_end;   /* ns, CLOCK_MONOTONIC */
    uint64_t bytes;
    uint32_t chunk, start_off;    /* start_off: t_start - t_enter (ns, saturated) */
    uint8_t coll, dt, op, alg, tp, form, flags, nphases;
    int32_t root, rc;
} lp_trace_rec_t;
typedef struct {
    uint64_t comm, seq;
    int64_t t_phase0;
    uint32_t off[LP_FR_PHASES - 1];
    uint8_t pad[2], flags, nphases;
    uint8_t pad2[8];
} lp_trace_phases_t;
_Static_assert(sizeof(lp_trace_rec_t) == 64 && sizeof(lp_trace_phases_t) == 64,
               "lpmpi/trace.py reads 64-byte records");
_Static_assert(offsetof(lp_trace_rec_t, flags) == offsetof(lp_trace_phases_t, flags), "flags tell them apart");
typedef struct {
    char magic[8];            /* "LPMPITR1" */
    int32_t version, recsize, rank, world_size, pid, pad;
    int64_t mono_to_unix;     /* CLOCK_REALTIME - CLOCK_MONOTONIC (ns) when the file began */
    char host[64];
} lp_trace_hdr_t;
extern int lp_trace_on;
extern lp_fr_ent_t *lp_fr_ring;       /* the ring (NULL: off); recording: flight.h */
extern uint64_t lp_fr_mask;
extern atomic_ullong lp_fr_next;
void lp_trace_put(const lp_fr_ent_t *e);
void lp_fr_comm_add(uint64_t id, int size, int rank, const int *world);
void lp_fr_watch_arm(void);              /* the watch thread and SIGUSR1 (watch.c; once) */
/* the launcher's failure notices seen (SIGUSR1 from MPICH's hydra proxy: a process of the job ended;
 * obs/watch.c on_usr1); waits check their peers when it changes (sched/progress.h) */
extern atomic_uint lp_fr_notice_count;
static inline unsigned lp_fr_notices(void) {
    return atomic_load_explicit(&lp_fr_notice_count, memory_order_relaxed);
}
long long lp_fr_notice_ns(void);       /* CLOCK_MONOTONIC of the last notice (0: none) */
int lp_fr_launcher_watched(void);       /* 1 where the launcher's notices can come (hydra's proxy: watch.c) */
/* a peer is gone: what the dumps say from now on (msg), and its world rank (-1: not known) */
void lp_fr_lost(const char *msg, const int *world_ranks, int n);
/* sched/wait.c: a call starting on ctx after a notice: LP_ERR_PEER where a rank of its node is gone */
int lp_ctx_check_lost(lp_ctx_t *ctx);
int lp_req_waiting(const struct lp_req *r, char *what, size_t n, int *peers, int maxp);


/* ---- contexts (context.c) ---- */
struct lp_ctx {
    MPI_Comm comm;            /* private duplicate: lpmpi's messages never match the user's */
    MPI_Comm user;            /* the user's communicator it is cached on */
    int rank, size;
    uint64_t id;              /* the same on every rank (the flight recorder's and the trace's name) */
    int tables;               /* 0 unchecked, 1 every rank has the same table, -1 they differ */
    lp_table_t *table;        /* tables differ: rank 0's rows (NULL: this process's) */
    lp_model_t model;         /* tables differ: rank 0's model (else unused) */
    struct {                  /* auto's last decision per collective (the model is not free) */
        unsigned long gen;
        size_t nbytes;
        int mem, acc;
        lp_choice_t choice;
    } last[LP_NCOLLS];
    atomic_int busy;          /* a call is being made on it (one thread at a time: MPI's rule) */
    unsigned long seq;        /* requests started on it: the same count on every rank */
    unsigned long nslots;     /* tag ranges: requests that may be outstanding before tags repeat */
    lp_req_t *breq;           /* the blocking calls' request, reused call after call */
    lp_req_t *pool;           /* finished nonblocking requests, reused (under the engine lock) */
    int npool;
    int refs;                 /* requests that point at it (under the engine lock) */
    /* nodes (MPI_Comm_split_type SHARED, found by the first collective on it): node[r] = the
     * lowest rank of r's node; order / pos (NULL on one node): the ranks sorted by node then
     * rank, and each rank's index there, which chains and rings follow so that they cross
     * each node boundary once whatever the placement (block or round robin) */
    int *node, *order, *pos;
    int nnodes;
    /* several nodes: every rank's host name (MPI_Get_processor_name), LP_HOST_LEN bytes each,
     * so that the watchdog names the node of a rank it waits for; NULL on one node */
    char *hosts;
    /* the node-local transport (alg_ring_cma.c): every rank's process id when it is usable on
     * this communicator (one node, process_vm_readv works between every pair, nobody set
     * LPMPI_NODE_TRANSPORT=mpi), else NULL; why: LP_NT_* */
    int *pids;
    /* the other ranks of this node: their processes (pid 0: another node, or /proc hides it),
     * whose liveness waits check when the launcher says a process ended (lp_fr_notices) and
     * the shared-memory transport checks on its own; lost: the first rank found gone (-1:
     * none), its pid; notice: the notice count the waits last checked */
    lp_proc_t *alive;
    int lost, lost_pid;
    unsigned notice;
    /* the shared-memory transport (alg_ring_shm.c): the segment when it is in use on this
     * communicator, else NULL; rounds its requests have claimed, in start order */
    struct lp_shm *shm;
    uint64_t shm_next;
    int nt_why;
    int freed;                /* its communicator was freed: requests on it refuse to start */
    /* LPMPI_AUTOTUNE (autotune.c): a private duplicate for its agreements (made with the
     * context when autotune is on) and the keys it tunes */
    MPI_Comm tcomm;
    struct lp_at_key *at_keys;
    struct lp_at_key *at_last[LP_NCOLLS];   /* each collective's last key (a lookup's shortcut) */
    long at_seq;                            /* the tuner's calls on this communicator (every rank's the same) */
    /* MPI's collectives on comm must be called in the same order on every rank; the native
     * steps of outstanding requests are issued as they become ready (after a staging copy,
     * when a window of pieces has room), so each request that issues them takes a ticket at
     * its start (start order: the same on every rank) and issues only on its turn, until its
     * last one (sched/exec.c: nat_turn / nat_release).  Tickets given back out of turn (a
     * request that failed first) wait in skip until the turn reaches them. */
    long npersist;            /* persistent requests made on it (their LPMPI_CHECK numbers) */
    int nb_made;              /* a nonblocking or persistent request was made on it: its native
                                 steps use MPI's nonblocking collectives from now on (MPI never
                                 matches a blocking collective with a nonblocking one, and whether
                                 others are in flight differs between ranks; request.c) */
    long nat_next;            /* the next ticket (under busy: starts on ctx are serial) */
    atomic_long nat_turn;     /* the ticket that may issue now */
    atomic_int nskip;
    long *skip;               /* (under sched/exec.c's lp_eng_skip_mu) */
    int skipcap;
    struct lp_ctx *next;      /* list of live contexts, freed at MPI_Finalize at the latest */
};

/* why (not): 0, 6 and 8 in use; the others off */
enum { LP_NT_CMA = 0, LP_NT_OFF_ENV = 1, LP_NT_OFF_NODES = 2, LP_NT_OFF_PERM = 3, LP_NT_OFF_ONE = 4,
       LP_NT_OFF_OS = 5, LP_NT_SHM = 6, LP_NT_OFF_SHM = 7, LP_NT_BOTH = 8,
       LP_NT_CMA_NOSHM = 9, LP_NT_OFF_PERM_NOSHM = 10 };
/* LPMPI_NODE_TRANSPORT (lp_node_transport) */
enum { LP_NTM_MPI = 0, LP_NTM_AUTO = 1, LP_NTM_SHM = 2, LP_NTM_CMA = 3 };

/* the values of a call LPMPI_CHECK compares (check.c): the call's arguments, then its whole
 * decision (algorithm, chunk, asked and resolved node-local transport, staging buffers,
 * accumulation) */
enum { LP_CK_COLL, LP_CK_COUNT, LP_CK_DTYPE, LP_CK_OP, LP_CK_ROOT, LP_CK_ACC, LP_CK_MEM, LP_CK_ALG,
       LP_CK_CHUNK, LP_CK_TP, LP_CK_RING_TP, LP_CK_STAGING, LP_CK_KEY_BYTES,
       LP_CK_PREQ, LP_CK_COMP, LP_CK_N };   /* PREQ: a persistent request's number on its context (0: none) */

/* ---- requests (request.c, sched/progress.h) ---- */
enum { LP_REQ_INACTIVE = 0, LP_REQ_ACTIVE = 1, LP_REQ_DONE = 2 };

/* what a request's plan depends on (not the buffers' addresses): a blocking call whose key is
 * the last one's reuses its plan, memory and slots */
typedef struct {
    int alg, coll, dt, op, root, xport, in_place, no_recvbuf, acc_dt;
    int transport;            /* LP_TP_* asked for (an even number of ints: no padding, memcmp) */
    int comp;                 /* LP_COMP_* (the wire format) */
    int test_form;            /* tests: the compressed schedule's form forced (lp_test_cz_wavefront) */
    size_t count, chunk, window, staging;
    const lp_devops_t *dev;
    uint64_t vhash;           /* per-rank counts: a hash of them (0: none) */
} lp_plan_key_t;
_Static_assert(sizeof(lp_plan_key_t) == 12 * sizeof(int) + 4 * sizeof(size_t) + sizeof(void *) + 8,
               "lp_plan_key_t is compared with memcmp: it must have no padding");

enum { LP_HOST_LEN = 64 };

struct lp_req {
    /* the call */
    lp_args_t a;              /* what its schedule sees */
    lp_args_t h;              /* whole-buffer staging: the host copies' arguments */
    size_t *vbuf;             /* per-rank counts: the call's copies (a.scounts ...), then a.vint */
    size_t vcap;              /* bytes of vbuf */
    const lp_sched_t *sched;  /* a's schedule (or the staging wrapper around `inner`) */
    const lp_sched_t *inner;
    lp_ctx_t *ctx;
    int kind;                 /* LP_REQ_BLOCKING, LP_REQ_NONBLOCKING, LP_REQ_PERSISTENT */
    int alg;                  /* registry index */
    const char *alg_name;     /* its name (the registry's, set with alg: the layers below the
                                 algorithms, progress and the recorder, name it from here) */
    int devid;                /* device of its buffers (device memory), else -1 */
    int planned;              /* its schedule, memory and slots are ready for `key` */
    lp_plan_key_t key;
    /* the running phase (sched/progress.h) */
    int nphases, phase;
    int nsched;               /* phases of the schedule; acc_dtype may add one (the rounding) */
    lp_lane_t lane[LP_LANES_MAX];
    int nlanes, lanes_left;
    int build_rc;             /* a schedule's phase failed to build (schedule.c) */
    lp_lane_t *lane0;         /* phase 0 as last built (sched/progress.h: a restart copies it back) */
    int cached, c_nlanes, c_left, c_tag0;
    size_t c_nreq;
    const char *c_sbuf, *c_rbuf, *c_acc;
    MPI_Request *reqs;        /* the phase's MPI requests: each transfer lane's W slots */
    unsigned char *fin;       /* fin[i]: reqs[i] completed (set where completions are observed) */
    size_t nreq, reqcap;
    MPI_Request *preq;        /* persistent collectives (native), one per piece */
    size_t npreq;
    size_t dev_inflight;      /* device steps issued and not yet complete */
    const struct lp_xport *poll_xp;   /* polling: the transport it polls (schedule.h) */
    int polling;              /* a step waits for a shared-memory counter (no MPI request
                                 reports it: the engine polls, yielding in between) */
    int turn_wait;            /* a native step waits for its turn (other requests' issues) */
    int64_t ck[LP_CK_N];      /* a persistent request: its call's values (LPMPI_CHECK at start) */
    int at_follow;            /* LPMPI_AUTOTUNE: a persistent "auto" request, which takes its key's
                                 settled choice at each start (request.c req_retune) */
    lp_key_t at_key;
    int at_esize;
    lp_at_slot_t at_slot;     /* LPMPI_AUTOTUNE: a nonblocking call's place in its key's window */
    long long t_start;        /* LPMPI_TIMEOUT on: when it started (ns, CLOCK_MONOTONIC) */
    uint64_t fr;              /* its call's flight-recorder entry (gen; 0: none) */
    int fr_phases;            /* the trace times its phases */
    long nat_ticket;          /* its place in ctx's order of native issues (-1: none held) */
    /* memory (grow-only while the request is reused) */
    char *area[3];            /* LP_AREA_WORK, LP_AREA_PINNED, LP_AREA_DEVICE */
    size_t area_bytes[3];
    int area_kind[3];         /* host (-1), LP_ALLOC_PINNED or LP_ALLOC_DEVICE */
    const lp_devops_t *area_ops[3];   /* the device operations that allocated it */
    int area_dev[3];          /* and on which device */
    int ev_first, nev;        /* device events reserved for it */
    /* state */
    int state;                /* LP_REQ_INACTIVE, _ACTIVE, _DONE */
    int rc;                   /* its failure (LP_OK) */
    char err[512];            /* and its message, for the test/wait that reports it */
    char where[160];          /* and where it was detected */
    int owned;                /* a thread is observing it with the engine lock released */
    int poisoned;             /* failed with transfers maybe still in flight: memory leaked */
    int finalized;            /* MPI was finalized: nothing of MPI left to free */
    struct lp_req *prev, *next;     /* the active list */
    struct lp_req *lprev, *lnext;   /* every live request (MPI_Finalize) */
    struct lp_req *pool_next;
};

/* reqmem.c: a request's memory (area kinds: LP_AREA_KIND_HOST, or LP_ALLOC_PINNED / DEVICE) */
enum { LP_AREA_KIND_HOST = -1 };
int lp_req_slots(lp_req_t *r, size_t n);        /* room for n MPI requests */
int lp_req_area_reserve(lp_req_t *r, int area, size_t bytes, int kind);
void lp_req_areas_free(lp_req_t *r);
void lp_req_persistent_free(lp_req_t *r);       /* its schedule's persistent MPI requests */
void lp_req_finalize_one(lp_req_t *r);          /* MPI_Finalize: its MPI objects */
/* request.c */
void lp_req_destroy(lp_req_t *r);               /* an inactive request, for good */
/* sched/progress.h (the engine lock is theirs) */
extern atomic_long lp_nactive;               /* requests on the active list */
int lp_engine_start(lp_req_t *r);            /* begin phase 0; nonblocking: onto the active list */
int lp_engine_run(lp_req_t *r);              /* blocking: start and complete, progressing others */
int lp_engine_wait(lp_req_t *r);
int lp_engine_test(lp_req_t *r, int *done);
int lp_engine_slot_wait(lp_ctx_t *ctx, unsigned long slot);   /* wait for an active request of
                                                                 ctx using tag slot `slot` */
int lp_engine_drain(lp_ctx_t *ctx);          /* complete the active requests of ctx (NULL: all) */
void lp_nat_release(lp_req_t *r);            /* r issued its last native step, or ended */
/* wait for MPI request *q (one of lpmpi's internal collectives, `what`) within LPMPI_TIMEOUT */
int lp_mpi_wait_timed(MPI_Request *q, const char *what, int P);
void lp_engine_lock(void);
void lp_engine_unlock(void);
void lp_engine_live(lp_req_t *r, int add);   /* the list of live requests (locked) */
void lp_engine_finalize(void);               /* MPI_Finalize: thread stopped, all drained */
/* fork: a child's engine is off (sched/progress.h); lp_not_forked fails every call made there */
extern int lp_forked;
void lp_engine_atfork(void);
int lp_not_forked(void);
/* device memory of requests (device.c) */
int lp_events_reserve(int n, int *first);
void lp_events_release(int first, int n);

/* the context of `user`, created (collective) if it has none */
int lp_ctx_get(MPI_Comm user, lp_ctx_t **out);
/* the context of `user` if it has one, else *out = NULL (local) */
int lp_ctx_find(MPI_Comm user, lp_ctx_t **out);
/* lp_ctx_get, then on its first call the table agreement (collective, the same on every rank
 * whatever this rank's arguments); *first_mismatch (may be NULL) = 1 if it found them differing */
int lp_ctx_ready(MPI_Comm user, lp_ctx_t **out, int *first_mismatch);

/* ---- LPMPI_CHECK (check.c) ----
 * v: this rank's values of the call (LP_CK_* order) or NULL with local_err; every rank learns
 * whether they agree and, where not, which ranks hold which value */
int lp_check_agree(lp_ctx_t *ctx, const int64_t *v, int local_err);
/* the knobs that change what a rank sends (check.c): their fingerprint, and (collective, where
 * the fingerprints differ) the MismatchError naming the first knob that differs and its ranks */
uint64_t lp_knobs_hash(void);
int lp_knobs_disagree(lp_ctx_t *ctx);
void lp_override_get(lp_coll_t coll, int *alg, size_t *chunk);   /* select.c */
int lp_transport_override_get(void);
void lp_device_knobs(int *emulate, int *aware);                  /* device.c */
int lp_device_aware(void);              /* LPMPI_CUDA_AWARE: -1 unset (ask the library), 0, 1 */
extern long long lp_timeout_ns;   /* LPMPI_TIMEOUT (config.c); 0: off */

/* ---- knobs (config.c) ---- */
extern int lp_check_enabled;

/* ---- what MPI_Finalize releases besides the contexts ---- */
void lp_native_free(void);     /* alg_native.c: lpmpi's user ops and types */
void lp_device_release(void);  /* device.c: streams and events */
void lp_req_finalize(void);    /* sched/progress.h: the MPI objects of live requests */

/* ---- schedules of the engine itself ---- */
extern const lp_sched_t lp_sched_single;        /* one rank: the result is the input */
extern const lp_sched_t lp_sched_stage_whole;   /* copy to host, run r->inner, copy back */

/* ---- the node-local transports of a context (transport.c): probe and open on its first use
 * (collective over its ranks; sets ctx->nt_why, ctx->pids, ctx->shm), close at its free ---- */
int lp_node_transports_open(lp_ctx_t *ctx);
void lp_node_transports_close(lp_ctx_t *ctx);

/* ---- contexts: references held by requests (context.c; under the engine lock) ---- */
void lp_ctx_unref(lp_ctx_t *ctx);
/* lifecycle.c's hooks (installed at load): a context's requests at its end; the library's end at
 * MPI_Finalize, which frees every context with lp_ctx_free_all */
void lp_ctx_set_hooks(void (*teardown)(lp_ctx_t *), void (*finalize)(void));
void lp_ctx_free_all(void);

#endif
