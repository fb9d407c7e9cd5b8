/* lpmpi C engine: public interface.  No Python in here.
 *
 * Vocabulary, used everywhere in src/:
 *   chunk        the unit that moves along a chain/ring at once; chunk_bytes is its size
 *                (rounded down to whole elements, at least one element).
 *   window (W)   how many chunks a rank keeps in flight per direction.
 *   block        one of P near-equal parts of the message (ring, be).
 *   piece        a part of a single MPI message split so that no MPI count exceeds
 *                lp_max_msg_bytes (keeps every count in int range for > 2 GiB messages).
 */
#ifndef LPMPI_H
#define LPMPI_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "knobs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ---- */
enum {
    LP_OK = 0,
    LP_ERR_MPI = 1,      /* an MPI call failed */
    LP_ERR_NOMEM = 2,    /* allocation failed */
    LP_ERR_ARG = 3,      /* bad argument reached the engine (Python validates first) */
    LP_ERR_MISMATCH = 4, /* LPMPI_CHECK: ranks disagree */
    LP_ERR_CUDA = 5,     /* CUDA runtime failure */
    LP_ERR_UNSUPPORTED = 6,
    LP_ERR_INTERNAL = 7, /* a bug of lpmpi (a pipeline that cannot progress, ...) */
    LP_ERR_BUSY = 8,     /* two threads ran collectives on one communicator at once */
    LP_ERR_TIMEOUT = 9,  /* LPMPI_TIMEOUT: a collective did not complete in time */
    LP_ERR_PEER = 10     /* a peer process of the node-local transport is gone */
};

/* ---- element types (order is ABI with lpmpi/_core.pyx) ---- */
typedef enum {
    LP_BOOL = 0,
    LP_INT8, LP_INT16, LP_INT32, LP_INT64,
    LP_UINT8, LP_UINT16, LP_UINT32, LP_UINT64,
    LP_FLOAT16, LP_BFLOAT16, LP_FLOAT32, LP_FLOAT64,
    LP_COMPLEX64, LP_COMPLEX128,
    LP_NDTYPES
} lp_dtype_t;

/* ---- reduction ops (order is ABI with lpmpi/_core.pyx) ---- */
typedef enum {
    LP_SUM = 0, LP_PROD, LP_MAX, LP_MIN, LP_AVG,
    LP_LAND, LP_LOR, LP_LXOR, LP_BAND, LP_BOR, LP_BXOR,
    LP_NOPS
} lp_op_t;

/* the collectives, in the order of their rows (core/colls.c: lp_colls); reduce_scatter_v is
 * MPI_Reduce_scatter (counts per rank), which lpmpi's reduce_scatter(..., counts=) calls */
typedef enum { LP_ALLREDUCE = 0, LP_REDUCE, LP_BCAST, LP_ALLGATHER, LP_REDUCE_SCATTER, LP_ALLTOALL,
               LP_ALLTOALLV, LP_ALLGATHERV, LP_REDUCE_SCATTER_V, LP_GATHER, LP_SCATTER,
               LP_NCOLLS } lp_coll_t;
const char *lp_coll_name(lp_coll_t coll);   /* "allreduce", "reduce", "bcast", "allgather", ... */
/* a collective's row (registry.c): reduces, has a root, which ranks bring data and get the
 * result (0 all, 1 the root, 2 all but the root), blocks of `count` elements in sendbuf and
 * recvbuf (0: P), its ring runs over the shared-memory transport, its blocks have per-rank
 * counts (lp_call_t: 1 recvbuf's, 2 sendbuf's, 3 both); LP_ERR_ARG for an unknown collective */
int lp_coll_traits(lp_coll_t coll, int *has_op, int *has_root, int *input, int *result,
                   int *sblocks, int *rblocks, int *shm, int *vcounts);
const char *lp_coll_mpi_name(lp_coll_t coll);   /* the MPI library's own: "MPI_Allreduce", ... */
/* "" for a collective called by its own name, else the collective whose function calls it
 * (reduce_scatter_v: lpmpi.reduce_scatter(..., counts=)) */
const char *lp_coll_via(lp_coll_t coll);

/* compression (lossy, opt-in; codec.c has the formats): the wire format of the data a
 * compressed collective sends (allreduce, reduce_scatter, allgather) */
typedef enum { LP_COMP_NONE = 0, LP_COMP_BF16, LP_COMP_INT8, LP_COMP_INT4, LP_NCOMPS } lp_comp_t;
const char *lp_cz_name(int comp);           /* "none", "bf16", "int8", "int4" */
int lp_algo_wire(int alg);                  /* 1: a compressed call's row (registry.c) */
int lp_cz_algo(lp_coll_t coll);             /* the row that runs coll compressed, or -1 */
void lp_set_test_cz_reencode(int on);       /* tests: re-encode partial sums (alg_compress.c) */
void lp_set_test_cz_wavefront(int on);      /* tests: the hierarchical form's wavefront (alg_compress.c) */
const char *lp_cz_isa(void);                /* the codecs' instruction set: "avx512", "avx2", "scalar" */
/* the codecs themselves (codec.c), for the bindings and tests: encoded bytes of n elements;
 * encode n elements of x (float16, bfloat16, float32, float64); decode into float32 / float64
 * (acc: add to y); decode into dtype dt */
size_t lp_cz_bytes(int comp, size_t n);
/* the piece bytes "auto" takes for a compressed allreduce of nbytes of esize-byte elements on
 * P ranks over `nodes` nodes (the model's: registry.c); nbytes where it runs in one piece */
size_t lp_cz_chunk_of(int comp, size_t esize, int P, int nodes, size_t nbytes);
void lp_cz_encode(int comp, lp_dtype_t dt, const void *x, size_t n, void *wire);
void lp_cz_decode_acc(int comp, int acc64, const void *wire, size_t n, void *y, int acc);
int lp_cz_decode(int comp, lp_dtype_t dt, const void *wire, size_t n, void *y);

/* memory kind of the user's buffers: the seam for device memory */
typedef enum { LP_MEM_HOST = 0, LP_MEM_CUDA = 1, LP_NMEMS } lp_mem_t;
const char *lp_mem_name(lp_mem_t mem);      /* "host", "cuda" */

#define LP_ALG_AUTO (-1)

/* ---- limits (Python reads them from here: lpmpi.engine) ----
 * LP_CHUNK_MIN .. LP_CHUNK_MAX: the chunk sizes the model and the tuner consider (powers of two);
 * LP_WINDOW_MAX: chunks in flight per direction (LPMPI_WINDOW);
 * LP_STAGING_MAX: staging buffers of the staged device pipeline (LPMPI_STAGING_BUFFERS). */
enum {
    LP_CHUNK_MIN = 1 << 10,
    LP_CHUNK_MAX = 1 << 24,
    LP_WINDOW_DEFAULT = LP_KNOB_WINDOW_DEFAULT,      /* (knobs.h: from the knob table) */
    LP_WINDOW_MAX = LP_KNOB_WINDOW_MAX,
    LP_STAGING_DEFAULT = LP_KNOB_STAGING_BUFFERS_DEFAULT,
    LP_STAGING_MAX = LP_KNOB_STAGING_BUFFERS_MAX
};

/* ---- element types and reduction kernels (reduce.c) ---- */

/* out[i] = a[i] op b[i] for i < n.  out may be the same pointer as a or b (never a partial
 * overlap).  For LP_AVG the kernel is the SUM kernel: the division by P happens once, on the
 * finished result (lp_scale). */
typedef void (*lp_reduce_fn)(void *out, const void *a, const void *b, size_t n);

size_t lp_dtype_size(lp_dtype_t dt);
const char *lp_dtype_name(lp_dtype_t dt);
const char *lp_op_name(lp_op_t op);
/* NULL when the pairing is not in the contract (e.g. MAX on complex, SUM on bool). */
lp_reduce_fn lp_reduce_kernel(lp_dtype_t dt, lp_op_t op);
int lp_op_valid(lp_dtype_t dt, lp_op_t op);
/* buf[i] /= divisor, in the element type (float16/bfloat16 through float32); used by AVG. */
void lp_scale(void *buf, size_t n, lp_dtype_t dt, double divisor);
/* acc_dtype="float32": dst[i] = (float)src[i] for float16/bfloat16 src, and back with round to
 * nearest even; LP_ERR_ARG for any other dt. */
int lp_widen(float *dst, const void *src, size_t n, lp_dtype_t dt);
int lp_narrow(void *dst, const float *src, size_t n, lp_dtype_t dt);

/* ---- collectives (request.c) ----
 * count: elements.  alg: index into the registry or LP_ALG_AUTO.  chunk_bytes: 0 = choose.
 * In place: sbuf == rbuf.  reduce: rbuf is used on root only (NULL elsewhere is fine).
 * All return an LP_* status; lp_errmsg() describes the last failure of this thread and
 * lp_errwhere() the file:line that detected it. */
int lp_allreduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
                 lp_op_t op, int alg, size_t chunk_bytes, lp_mem_t mem);
int lp_reduce(MPI_Comm comm, const void *sbuf, void *rbuf, size_t count, lp_dtype_t dt,
              lp_op_t op, int root, int alg, size_t chunk_bytes, lp_mem_t mem);
int lp_bcast(MPI_Comm comm, void *buf, size_t count, lp_dtype_t dt, int root, int alg,
             size_t chunk_bytes, lp_mem_t mem);

/* ---- requests: nonblocking and persistent collectives (request.c, sched/progress.h) ----
 * lp_request makes a request for one collective call (arguments as above, bcast: sbuf ==
 * rbuf == the buffer, op ignored): the same checks, context preparation, decision and
 * LPMPI_CHECK agreement as a blocking call, made at once (collective on a communicator's first
 * call and with LPMPI_CHECK).  LP_REQ_NONBLOCKING: started at once (like MPI_Iallreduce);
 * LP_REQ_PERSISTENT: inactive until lp_start (like MPI_Allreduce_init), startable again once
 * complete, its schedule, scratch and tags reserved once.  Every rank must start the requests
 * of a communicator in the same order (blocking calls included); any number may be
 * outstanding and they may complete in any order.  The buffers belong to lpmpi until the
 * request completes.  lp_test / lp_wait / lp_waitall advance every outstanding request of the
 * process; a request's own failure (an MPI error inside its progress) is returned by its test
 * or wait.  lp_req_free: an inactive or completed request (a persistent one after its last
 * wait); never one in flight.
 * acc_dtype: a call accumulates (lp_accumulates) when dt is LP_FLOAT32 and acc_dt is LP_FLOAT16
 * or LP_BFLOAT16: a SUM or AVG allreduce / reduce / reduce_scatter of 16-bit data run on its
 * float32 widening (sbuf, rbuf), carried in float32 and rounded once into acc, the 16-bit
 * result (allreduce by lp, ring and be: before the broadcast/allgather part, which then moves
 * 16-bit data).  Every rank passes the same dt and acc_dt (the decision reads them); acc is
 * NULL exactly where the rank gets no result (reduce's non-roots).  A plain call passes
 * acc = NULL and acc_dt = dt. */
typedef struct lp_req lp_req_t;
static inline int lp_accumulates(lp_dtype_t dt, lp_dtype_t acc_dt) {
    return dt == LP_FLOAT32 && (acc_dt == LP_FLOAT16 || acc_dt == LP_BFLOAT16);
}
enum { LP_REQ_BLOCKING = 0, LP_REQ_NONBLOCKING = 1, LP_REQ_PERSISTENT = 2 };
int lp_request(lp_req_t **req, int kind, lp_coll_t coll, MPI_Comm comm, const void *sbuf,
               void *rbuf, size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg,
               size_t chunk_bytes, lp_mem_t mem, void *acc, lp_dtype_t acc_dt);
/* The call record (the one form every binding fills: lpmpi's Message, the XLA handlers): the
 * arguments of lp_request, and for the collectives whose blocks have per-rank counts
 * (lp_coll_traits' vcounts) their counts and displacements, in elements:
 *   scounts, sdispls   sendbuf's P blocks (alltoallv; reduce_scatter_v: the counts, packed),
 *   rcounts, rdispls   recvbuf's P blocks (alltoallv, allgatherv), else NULL;
 * the buffer with one block holds this rank's count of the other side.  count: elements of
 * one block for the other collectives; for allgatherv and reduce_scatter_v the sum of the
 * counts (the same on every rank: the decision's key); 0 for alltoallv (its counts differ
 * between ranks, so its decision is keyed by P alone).  The request copies the counts. */
typedef struct {
    lp_coll_t coll;
    MPI_Comm comm;
    const void *sbuf;
    void *rbuf;
    size_t count;
    lp_dtype_t dt;
    lp_op_t op;
    int root, alg;
    size_t chunk_bytes;
    lp_mem_t mem;
    void *acc;
    lp_dtype_t acc_dt;
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    int comp;                   /* LP_COMP_*: compressed on the wire (allreduce, reduce_scatter(_v),
                                   allgather; float data, SUM or AVG, host memory) */
} lp_call_t;
int lp_call_request(lp_req_t **req, int kind, const lp_call_t *call);
int lp_start(lp_req_t *req);
int lp_test(lp_req_t *req, int *done);
int lp_wait(lp_req_t *req);
/* wait for all n; returns the first failure (in array order) after all have completed */
int lp_waitall(int n, lp_req_t *const *reqs);
int lp_req_active(const lp_req_t *req);      /* started and not complete (no progress made) */
int lp_req_free(lp_req_t *req);
/* advance every outstanding request once, without waiting */
int lp_progress(void);
long lp_outstanding(void);                   /* requests started and not complete */
/* the background progress thread (LPMPI_PROGRESS_THREAD): it advances every outstanding
 * request while the caller computes; needs MPI_THREAD_MULTIPLE (LP_ERR_UNSUPPORTED with the
 * reason otherwise).  Stopped at MPI_Finalize at the latest. */
int lp_progress_thread(int on);
int lp_progress_thread_running(void);
/* native's forms in this MPI library: 1 nonblocking (MPI_Iallreduce ...), 2 persistent
 * (MPI 4's MPI_Allreduce_init ...); the forms missing fall back to the nonblocking ones */
int lp_native_forms(void);
/* tests only: the `after`-th next point-to-point call of the engine fails (0: never) */
void lp_test_fault(long after);
/* tests: make shared-memory segments as named POSIX segments (the path taken where /proc/<pid>/fd
 * is refused), not memory files */
void lp_test_shm_named(int on);

const char *lp_errmsg(void);
const char *lp_errwhere(void);

/* ---- communicators (context.c) ----
 * The first lpmpi call on a communicator creates its context (collective: a private
 * MPI_Comm_dup) and checks that every rank holds the same tuning table; where they differ,
 * every rank follows rank 0's table and model on that communicator (ranks choosing
 * differently would deadlock).  lp_comm_prepare does that step (idempotent; the collectives
 * call it themselves); *first_mismatch is set to 1 when this call found the tables differing. */
int lp_comm_prepare(MPI_Comm comm, int *first_mismatch);
/* 1 when comm's context exists and is prepared (local and cheap: one attribute lookup) */
int lp_comm_ready(MPI_Comm comm);
/* 1 when comm is the user communicator of a live, prepared context: a search of the live
 * contexts that makes no MPI call on comm (so a stale handle is safe to ask about) */
int lp_comm_known(MPI_Comm comm);
/* live contexts and the communicators whose ranks held different tables (tests, info) */
long lp_comm_contexts(void);
long lp_table_mismatches(void);
/* comm's nodes (its context must be prepared, else LP_ERR_ARG): the number of nodes and, in
 * node[0 .. size-1] (may be NULL), the lowest rank of each rank's node */
int lp_comm_nodes(MPI_Comm comm, int *nnodes, int *node);
/* comm's node-local transport (prepared context), for the ring allreduce on host memory: *why
 * 6 = shared memory in use (a segment mapped by the ranks of one node), 0 = single-copy reads in
 * use (process_vm_readv), else why not: 1 LPMPI_NODE_TRANSPORT=mpi, 2 several nodes,
 * 3 process_vm_readv refused (ptrace permissions), 4 one rank, 5 not Linux, 7 the shared
 * segment could not be made (and single-copy reads were not allowed), 8 = both in use (each
 * where it is faster: shared memory below 3 MiB and from 32 MiB, single-copy reads between) */
int lp_comm_transport(MPI_Comm comm, int *why);
/* the transport of a ring allreduce of nbytes on host memory on comm (prepared context) when the
 * decision asks for `requested` (LP_TP_*): *which 1 shared memory, 2 single-copy reads, 0 MPI
 * point-to-point */
int lp_comm_ring_transport(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int requested, int *which);
/* the sizes of the model's rule (where no table row names a transport): shared memory for
 * [out[0], out[2]), single-copy reads from out[1] outside that range */
void lp_node_transport_sizes(size_t out[3]);
/* why this process's last shared-memory segment could not be made ("": it was, or another
 * rank failed) */
const char *lp_shm_failure(void);
/* bytes this process sent to ranks of other nodes in lpmpi's own point-to-point transfers
 * (not the MPI library's collectives of algorithm native), since the last reset */
unsigned long long lp_node_bytes(int reset);

/* ---- configuration (config.c) ----
 * knobs read from the environment by the bindings: largest single MPI message (test knob,
 * 0 = keep), chunks in flight per direction (0 = keep; at most LP_WINDOW_MAX), LPMPI_CHECK */
void lp_configure(size_t max_msg_bytes, int window, int check);
/* LPMPI_TIMEOUT: a collective not complete after ns nanoseconds fails with LP_ERR_TIMEOUT on the
 * ranks waiting for it (0: never); returns the previous value */
long long lp_set_timeout_ns(long long ns);
int lp_window_get(void);
/* ---- the flight recorder and the trace (obs/recorder.c) ----
 * the recorder keeps the last `size` calls (0: off; LPMPI_FR_SIZE, default 256); dumps go to
 * `dir` (LPMPI_FR_DIR; NULL: keep, "": lpmpi-fr in the working directory); abort_timeout_s:
 * LPMPI_ABORT_TIMEOUT, a call not complete after it dumps and aborts the job (0: never) */
int lp_fr_configure(long size, const char *dir, double abort_timeout_s);
/* write this rank's recorder to dir/fr.<world rank>.json (dir NULL or "": the configured one);
 * reason: why (in the file); path: where it went */
int lp_fr_dump(const char *reason, const char *dir, char *path, size_t pathn);
/* LPMPI_TRACE: each call's record to dir/trace.<world rank>.bin (dir NULL or "": off); after
 * max_records (0: 100000) one call in 100 */
int lp_trace_configure(const char *dir, unsigned long long max_records);
/* write the trace's last records and close its file (at exit); path: the file ("": none) */
int lp_trace_close(char *path, size_t n);
/* LPMPI_NODE_TRANSPORT for communicators prepared from now on: 1 auto (shared memory, else
 * single-copy reads, where they work), 2 shm only, 3 cma (single-copy reads) only, 0 mpi (MPI
 * point-to-point only) */
void lp_set_node_transport(int mode);
/* LPMPI_SHM_SPIN_US: nanoseconds at most a waiting rank polls before it sleeps (the
 * shared-memory transport's counters) or yields its core (MPI requests), an adaptive budget
 * (sched/wait.c); < 0: never sleeps nor yields; returns the previous value */
long lp_set_shm_spin(long ns);

/* ---- the algorithm registry (registry.c) ---- */
int lp_algo_count(void);
const char *lp_algo_name(int alg);
int lp_algo_coll(int alg);
int lp_algo_chunked(int alg);
int lp_algo_node_local(int alg);   /* its schedule runs over node-local transports (LP_TP_*) */
int lp_algo_find(lp_coll_t coll, const char *name);   /* -1 when unknown */

/* ---- alpha-beta-gamma model (model.c), used by "auto" where no table applies ---- */
void lp_model_set(double alpha, double beta, double gamma);
void lp_model_get(double *alpha, double *beta, double *gamma);
/* the network term: seconds per message and per byte through a node's NIC */
void lp_model_set_net(double alpha_net, double beta_net);
void lp_model_get_net(double *alpha_net, double *beta_net);
/* the registry's cost of alg for P ranks on `nodes` nodes (ranks in blocks by node), n bytes,
 * chunk c bytes (seconds): one node, the registry's formula; more, plus the network term */
double lp_algo_predict(int alg, int P, int nodes, double nbytes, double chunk_bytes);
/* model-optimal chunk among the powers of two LP_CHUNK_MIN..LP_CHUNK_MAX, 0 if unchunked */
size_t lp_best_chunk(int alg, int P, int nodes, size_t nbytes);
/* the chunk (any size, in [1, nbytes]) minimising the model's cost: a numeric search */
double lp_optimal_chunk(int alg, int P, int nodes, double nbytes);
/* traffic.c: the bytes and messages each node sends to other nodes in algorithm alg (root for
 * reduce and bcast, chunk c bytes: 0 = the model's whole transfers); node[r] = the lowest rank
 * on rank r's node; the results at the index of each node's lowest rank, 0 elsewhere */
int lp_net_traffic(int alg, int P, const int *node, int root, double nbytes, double chunk_bytes,
                   double *bytes, double *msgs);
/* the model's layout of P ranks on `nodes` nodes: blocks by node, the first P mod nodes one more */
void lp_block_layout(int P, int nodes, int *node);

/* ---- tuning tables (table.c) ----
 * rows: for (collective, memory, P) messages of [lo, hi) bytes use alg with chunk and, for
 * device memory, `staging` staging buffers (0 = the default).  acc = 1: a row for calls with
 * acc_dtype (16-bit data carried in float32), keyed by the 16-bit message's bytes and chunk
 * bytes of the float32 copy; such calls fall back to the plain rows at the float32 bytes.
 * nodes: how many nodes the table was measured on; a row decides only on communicators that
 * span that many (a one-node table never across nodes, nor the reverse).  learned: > 0 for a
 * row the online tuner learned (LPMPI_AUTOTUNE_FILE, the per-machine cache), the time it
 * measured in seconds: with LPMPI_AUTOTUNE=1 the key it decides starts settled on it (no
 * exploration), that time the reference its windows are compared with (drift). */
void lp_table_clear(void);
/* fingerprint of the loaded table (compared across ranks on each communicator's first call) */
void lp_table_set_hash(uint64_t hash);
int lp_table_add(lp_coll_t coll, lp_mem_t mem, int P, double lo, double hi, int alg, size_t chunk,
                 int staging, int acc, int transport, int nodes, double learned);
/* The node-local transport of a ring allreduce on host memory between the ranks of one node, as
 * a table row, the decision or an override asks for it: LP_TP_MODEL leaves it to the model's
 * rule (lp_nt_model), the others name one; one the communicator lacks falls back to the rule. */
enum { LP_TP_MODEL = 0, LP_TP_MPI = 1, LP_TP_SHM = 2, LP_TP_CMA = 3, LP_NTP = 4 };
/* the process's transport override (the tuner's and lpmpi-bench's dimension; LP_TP_MODEL: none):
 * every call's decision asks for it, above tables and model (every rank must set the same) */
int lp_set_transport_override(int tp);   /* returns the previous one */
/* environment override (LPMPI_ALGORITHM / LPMPI_CHUNK_BYTES): alg -1 = none, chunk 0 = none */
void lp_set_override(lp_coll_t coll, int alg, size_t chunk);

/* ---- the decision (select.c) ----
 * What a call uses: the algorithm asked for, else ("auto") the environment override, then the
 * tuning table, then the cost model; the chunk asked for, else the override's, the table's or
 * the model's (clamped to the largest single message).  The one function behind the
 * collectives, lpmpi.select, lpmpi.explain and LPMPI_DEBUG: on a communicator it reads only
 * what every rank shares once its context is prepared (see lp_comm_prepare). */
enum { LP_SRC_OVERRIDE = 0, LP_SRC_TABLE = 1, LP_SRC_MODEL = 2, LP_SRC_REQUESTED = 3, LP_SRC_AUTOTUNE = 4 };
typedef struct {
    int alg;             /* registry index */
    size_t chunk;        /* chunk bytes (0 for unchunked algorithms) */
    int staging;         /* staging buffers of the table row (0: the default) */
    int source;          /* LP_SRC_* of the algorithm */
    int transport;       /* LP_TP_* asked for (LP_TP_MODEL: the model's rule) */
    int transport_source;  /* LP_SRC_* of the transport (LP_SRC_MODEL where the rule decides) */
    int tables;          /* the communicator's tables: 1 agree, -1 differ (rank 0's), 0 unchecked */
    double learned;      /* source LP_SRC_TABLE: > 0 for a row the online tuner learned, its time (lp_table_add) */
} lp_choice_t;
/* The decision key: only what the contract makes equal on every rank of a call: the
 * collective, P, the bytes the decision is keyed by (lp_decision_key: the message's, or the P
 * blocks' for allgather / reduce_scatter, as the engine sees them: acc_dtype's float32 copy),
 * the memory kind, whether it accumulates, and the communicator's number of nodes.  Never whether this rank is the root, works in
 * place or has a result buffer, nor the size of a buffer it widened or staged: every rank
 * computes the same key, so every rank takes the same decision. */
typedef struct {
    lp_coll_t coll;
    int P;
    size_t nbytes;
    lp_mem_t mem;
    int acc;
    int nodes;           /* the communicator's nodes (its context's, learnt collectively; 1 without) */
} lp_key_t;
/* the key of a call: count and dt as lp_request takes them (the engine's element count and
 * type), acc_dt as lp_request's */
lp_key_t lp_decision_key(lp_coll_t coll, int P, int nodes, size_t count, lp_dtype_t dt, lp_dtype_t acc_dt,
                         lp_mem_t mem);
/* local (no communication): comm's context is used if it exists, never created; nbytes: the
 * key's bytes (the tables' size coordinate: acc, the float32 copy's) */
int lp_choose(MPI_Comm comm, lp_coll_t coll, size_t nbytes, lp_mem_t mem, int acc, int alg,
              size_t chunk_bytes, lp_choice_t *out);
/* what lp_request would run for this call on this rank, without running it (no communication;
 * comm must have been prepared by lp_comm_prepare): the same checks, memory routing, key and
 * decision as lp_request.  ring_transport: LP_TP_MPI/SHM/CMA the ring's node-local transport
 * resolves to for this call, 0 where the schedule is no node-local ring. */
typedef struct {
    lp_choice_t choice;
    lp_key_t key;
    int ring_transport;
} lp_decision_t;
int lp_request_decision(lp_decision_t *out, lp_coll_t coll, MPI_Comm comm, const void *sbuf, void *rbuf,
                        size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg, size_t chunk_bytes,
                        lp_mem_t mem, void *acc, lp_dtype_t acc_dt);
int lp_call_decision(lp_decision_t *out, const lp_call_t *call);

/* ---- online tuning (autotune.c) ----
 * LPMPI_AUTOTUNE: "auto" explores candidates on its blocking calls and settles, per key, every
 * rank the same (see autotune.c); set before the first collective on a communicator (its
 * private duplicate for the agreements is made then).  Returns the previous setting. */
int lp_autotune_set(int on);
#define LP_AT_MAXC 12
typedef struct { int alg; size_t chunk; int transport; } lp_at_cand_t;   /* transport: LP_TP_* (0: none) */
typedef struct {
    int coll, cls, esize, mem, acc, P, nodes;
    double lo, hi, nbytes;          /* the size class [lo, hi) of the key's bytes; its first call's */
    int state;                      /* 0 exploring, 1 settled */
    int ncand, native, choice;      /* native: the candidate that is MPI's own (-1: none) */
    lp_at_cand_t cand[LP_AT_MAXC];
    int alive[LP_AT_MAXC];
    double median[LP_AT_MAXC];      /* seconds (NaN: not measured in this exploration) */
    long samples[LP_AT_MAXC];
    double seconds;                 /* the choice's time when it settled (NaN before) */
    double last_seconds;            /* the last settled window's median */
    long calls, explore_calls, settle_calls, settles, drifts_slower, drifts_faster;
    long timed_calls;               /* calls it read the clock for (settled and steady: one in AT_STRIDE) */
    double explore_seconds;         /* time spent in exploring calls (the slowest rank's) */
    unsigned long gen;              /* bumped at every settle */
    int comm_live;                  /* its communicator still exists */
} lp_at_info_t;
/* what a request runs now (a persistent "auto" request under LPMPI_AUTOTUNE follows its key's
 * settled choice from start to start): algorithm, chunk bytes (0: unchunked), node-local
 * transport LP_TP_* (0: none) */
int lp_req_choice(const lp_req_t *r, int *alg, size_t *chunk, int *transport);
/* every key's state (the first max of n; returns n) */
int lp_autotune_report(lp_at_info_t *out, int max);
/* the shared core (lpmpi.tune measures with it too): the median of n times; pruned (1) when t
 * is more than factor x best; the index of the fastest of t[0..n) (NaN: none), `prefer` where
 * it is within tie of it (-1: none) */
double lp_tune_median(const double *x, size_t n);
int lp_tune_pruned(double t, double best, double factor);
int lp_tune_decide(const double *t, int n, int prefer, double tie);
/* the online state of comm's key for (coll, nbytes, the dtype's size, mem, acc): *found 1 and
 * *out, 0 where none */
int lp_comm_autotune(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int esize, lp_mem_t mem, int acc,
                     lp_at_info_t *out, int *found);

/* ---- device memory (device.c) ----
 * A build with CUDA (nvcc found: LPMPI_HAVE_CUDA) accepts LP_MEM_CUDA buffers; device memory
 * travels through CUDA-aware MPI where the library has it, else staged through pinned host
 * buffers.  Emulation runs the staged path on host memory with every host buffer treated as
 * device memory, for testing without a GPU. */
int lp_cuda_built(void);
/* emulate: LPMPI_EMULATE_STAGING; cuda_aware: LPMPI_CUDA_AWARE (-1 = ask the MPI library);
 * staging_buffers: LPMPI_STAGING_BUFFERS, chunks in flight per direction of the staged LP
 * pipeline (0 = keep; at most 64) */
void lp_configure_device(int emulate, int cuda_aware, int staging_buffers);
int lp_device_emulated(void);
int lp_cuda_aware(void);            /* transport for device memory: 1 CUDA-aware MPI, 0 staged */
int lp_staging_buffers(void);
int lp_device_count(int *n);        /* visible CUDA devices (0 without CUDA or a driver) */
/* device ordinal owning p, or -1 when p is not device memory */
int lp_device_pointer(const void *p, int *device);
/* wait for a CUDA stream (__cuda_array_interface__ "stream": 1 legacy, 2 per-thread, or a
 * cudaStream_t); a no-op under emulation */
int lp_device_stream_sync(uintptr_t stream);
/* emulation counters: events found not ready, operations run */
void lp_device_stats(long *not_ready, long *ops);

/* ---- LPMPI_CHECK (check.c) ----
 * When this rank's own arguments were bad: take part in the agreement step (after the same
 * context preparation as a call) so that the other ranks raise instead of hanging.  Returns
 * LP_ERR_MISMATCH (or an MPI error). */
int lp_check_local_error(MPI_Comm comm);

/* ---- XLA FFI handlers (xla_ffi.c): lpmpi.jax's custom-call targets ----
 * The XLA_FFI_Handler of coll on memory kind mem (LP_MEM_CUDA: only in a CUDA build), NULL
 * where there is none; registered by lpmpi.jax with jax.ffi.register_ffi_target. */
void *lp_xla_handler(lp_coll_t coll, lp_mem_t mem);

#ifdef __cplusplus
}
#endif
#endif
