/* lpsim: a small C driver that times lpmpi's C engine (the src/ files, built unchanged) collective by
 * collective.  The same file builds two ways:
 *
 *   smpicc (SimGrid SMPI): the engine runs on a modelled platform (an XML file in sim/platforms/), every
 *     MPI call of the engine goes through SMPI's network model, MPI_Wtime is simulated time.
 *   mpicc (real MPI, e.g. the mpich wheel): the same program measured on this machine, to
 *     calibrate and check the simulated runs.
 *
 * sim/Makefile builds both; sim/run.py runs them and writes JSON.  Rank 0 prints one JSON
 * object per (algorithm, size) on stdout, each line starting with "LPSIM ".
 *
 * Options (all --name value):
 *   --coll allreduce|reduce|bcast   collective (default allreduce)
 *   --algs lp,mst,be,ring,native    lpmpi registry names; "native" is the MPI library's own
 *                                   collective (under SMPI: the smpi/<coll> selector's choice)
 *   --sizes 1048576,67108864        message sizes in bytes (float32 elements)
 *   --reps R --warmup W             timed and untimed calls per (algorithm, size)
 *   --alpha A --beta B --gamma G    the alpha-beta-gamma model given to lp_model_set, used by
 *                                   lp_best_chunk to choose the chunk (the platform's own values)
 *   --alpha-net A --beta-net B      the model's network term (lp_model_set_net: s per message and
 *                                   per byte through a node's NIC); given, the chunk is
 *                                   lp_best_chunk's for the communicator's nodes (hosts, from
 *                                   MPI_Comm_split_type), as the engine chooses it across nodes;
 *                                   not given, for one node (the platforms before the box)
 *   --chunk C                       force chunk_bytes (0: model-optimal, lp_best_chunk)
 *   --charge-gamma G                SMPI only: charge G seconds per byte reduced by the engine's
 *                                   kernels as simulated computation (smpi_execute); 0 = free
 *   --real-reduce 0|1               SMPI only: execute the engine's kernels for real (default 0:
 *                                   buffers are SMPI shared memory, their contents meaningless)
 *   --verify                        private buffers with known data; check every result exactly
 *                                   (small integers in float32: every order of sums is exact)
 *   --window W                      chunks in flight per direction (lp_configure)
 *
 * SMPI specifics, all outside src/ (whose files are compiled unchanged):
 *   - big buffers come from SMPI_SHARED_MALLOC, so P = 1024 ranks of 64 MiB fit in memory;
 *   - request.c is compiled with -Dposix_memalign=lpsim_posix_memalign and
 *     -Dlp_reduce_kernel=lpsim_reduce_kernel (sim/Makefile): the requests' scratch
 *     comes from shared memory above 1 MiB, and the kernel a call picks is wrapped so that a
 *     reduction costs --charge-gamma seconds per byte of simulated time, and runs for real
 *     only with --real-reduce 1 or --verify.  reduce.c itself keeps the real lp_reduce_kernel.
 *   - every engine file is compiled with -include sim/smpi_compat.h: SMPI's sleep() macro is
 *     undefined (it clashes with a transport method named sleep) and MPI_Comm_idup, which
 *     SimGrid 3.32 does not implement, becomes lpsim_comm_idup below (a blocking dup), and
 *     MPI_Testsome (the engine's poll across nodes) becomes lpsim_testsome: a test that blocks
 *     in MPI_Waitsome where it finds nothing (SimGrid's clock stands still while an actor polls).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "lpmpi.h"

#if defined(SMPI_SHARED_MALLOC)
#define LPSIM_SMPI 1
#else
#define LPSIM_SMPI 0
#endif

#define MAXALGS 16
#define MAXSIZES 64

static double charge_gamma = 0.0;
static int real_reduce = 1;

/* ------------------------------------------------------------------ engine hooks */
#if LPSIM_SMPI
#define SHARED_THRESH ((size_t)1 << 20)
int lpsim_posix_memalign(void **p, size_t align, size_t size);
int lpsim_posix_memalign(void **p, size_t align, size_t size) {
    if (size >= SHARED_THRESH && !real_reduce) {
        *p = SMPI_SHARED_MALLOC(size);            /* page aligned; freed by smpi_shared_free */
        return *p ? 0 : 12;
    }
    return posix_memalign(p, align, size);
}

/* the kernel request.c asked for, and its element size (one collective at a time per rank;
 * globals are private to each simulated rank under SMPI's privatization) */
static lp_reduce_fn real_fn;
static size_t real_esize;

static void wrapped_kernel(void *out, const void *a, const void *b, size_t n) {
    if (real_reduce) real_fn(out, a, b, n);
    if (charge_gamma > 0 && n) smpi_execute(charge_gamma * (double)(n * real_esize));
}

lp_reduce_fn lpsim_reduce_kernel(lp_dtype_t dt, lp_op_t op);
lp_reduce_fn lpsim_reduce_kernel(lp_dtype_t dt, lp_op_t op) {
    lp_reduce_fn f = lp_reduce_kernel(dt, op);
    if (!f) return NULL;
    real_fn = f;
    real_esize = lp_dtype_size(dt);
    return wrapped_kernel;
}

/* SimGrid 3.32 lacks MPI_Comm_idup; the engine's files call this instead (sim/smpi_compat.h) */
int lpsim_comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int lpsim_comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
    *request = MPI_REQUEST_NULL;
    return MPI_Comm_dup(comm, newcomm);
}


/* the engine's polls across nodes, made blocking where they find nothing (sim/smpi_compat.h) */
int lpsim_testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]);
int lpsim_testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]) {
    int rc = MPI_Testsome(incount, requests, outcount, indices, statuses);
    if (rc == MPI_SUCCESS && *outcount == 0)
        rc = MPI_Waitsome(incount, requests, outcount, indices, statuses);
    return rc;
}

#endif

static void *big_alloc(size_t bytes, int shared) {
#if LPSIM_SMPI
    if (shared) return SMPI_SHARED_MALLOC(bytes ? bytes : 1);
#else
    (void)shared;
#endif
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    return p;
}

static void big_free(void *p, int shared) {
#if LPSIM_SMPI
    if (shared) { SMPI_SHARED_FREE(p); return; }
#else
    (void)shared;
#endif
    free(p);
}

/* ------------------------------------------------------------------ helpers */
static int split_list(char *s, char **out, int max) {
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* rank r's value at element i: small integers, so float32 sums are exact in any order */
static float value(int r, size_t i) { return (float)(((i * 7u + (size_t)r * 13u) % 8u) + 1u); }

static int check(lp_coll_t coll, const float *res, size_t count, int rank, int P, int root) {
    if (coll == LP_REDUCE && rank != root) return 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        if (coll == LP_BCAST) want = value(root, i);
        else for (int r = 0; r < P; r++) want += value(r, i);
        if (res[i] != want) {
            fprintf(stderr, "lpsim: rank %d: element %zu is %g, expected %g\n", rank, i, (double)res[i],
                    (double)want);
            return 1;
        }
    }
    return 0;
}

static int run_one(lp_coll_t coll, int alg, MPI_Comm comm, float *s, float *r, size_t count, int root,
                   size_t chunk) {
    switch (coll) {
    case LP_ALLREDUCE: return lp_allreduce(comm, s, r, count, LP_FLOAT32, LP_SUM, alg, chunk, LP_MEM_HOST);
    case LP_REDUCE: return lp_reduce(comm, s, r, count, LP_FLOAT32, LP_SUM, root, alg, chunk, LP_MEM_HOST);
    default: return lp_bcast(comm, r, count, LP_FLOAT32, root, alg, chunk, LP_MEM_HOST);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);

    lp_coll_t coll = LP_ALLREDUCE;
    char algbuf[256] = "lp,mst,be,ring,native", sizebuf[1024] = "67108864";
    int reps = 3, warmup = 1, verify = 0, window = 0, root = 0, real_flag = -1;
    double alpha = 1e-6, beta = 8e-11, gamma_ = 0.0, alpha_net = -1, beta_net = -1;
    long long chunk_force = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--verify")) { verify = 1; continue; }
        if (!v) { if (!rank) fprintf(stderr, "lpsim: %s needs a value\n", k); MPI_Abort(MPI_COMM_WORLD, 2); }
        i++;
        if (!strcmp(k, "--coll")) coll = !strcmp(v, "reduce") ? LP_REDUCE : !strcmp(v, "bcast") ? LP_BCAST : LP_ALLREDUCE;
        else if (!strcmp(k, "--algs")) snprintf(algbuf, sizeof algbuf, "%s", v);
        else if (!strcmp(k, "--sizes")) snprintf(sizebuf, sizeof sizebuf, "%s", v);
        else if (!strcmp(k, "--reps")) reps = atoi(v);
        else if (!strcmp(k, "--warmup")) warmup = atoi(v);
        else if (!strcmp(k, "--alpha")) alpha = atof(v);
        else if (!strcmp(k, "--beta")) beta = atof(v);
        else if (!strcmp(k, "--gamma")) gamma_ = atof(v);
        else if (!strcmp(k, "--alpha-net")) alpha_net = atof(v);
        else if (!strcmp(k, "--beta-net")) beta_net = atof(v);
        else if (!strcmp(k, "--chunk")) chunk_force = atoll(v);
        else if (!strcmp(k, "--charge-gamma")) charge_gamma = atof(v);
        else if (!strcmp(k, "--real-reduce")) real_flag = atoi(v);
        else if (!strcmp(k, "--window")) window = atoi(v);
        else if (!strcmp(k, "--root")) root = atoi(v);
#if LPSIM_SMPI
#endif
        else { if (!rank) fprintf(stderr, "lpsim: unknown option %s\n", k); MPI_Abort(MPI_COMM_WORLD, 2); }
    }
    if (reps < 1) reps = 1;
    /* under SMPI: shared (meaningless) buffers and no real reductions unless verifying */
    int shared = LPSIM_SMPI && !verify;
    real_reduce = LPSIM_SMPI ? (verify ? 1 : (real_flag > 0)) : 1;
    if (real_reduce) shared = 0;
    lp_configure(0, window, 0);
    lp_model_set(alpha, beta, gamma_);
#if LPSIM_SMPI
    /* the node-local transports (shared-memory segments, process_vm_readv) assume one OS process
     * per rank; SMPI's ranks share one: MPI between ranks of one host (the engine uses them only
     * on communicators within one node) */
    lp_set_node_transport(0);
#endif
    /* nodes: ranks sharing a host (SMPI: a simulated host; real MPI: a node) */
    int nodes = 1;
    {
        MPI_Comm node;
        int nrank = 0, leader = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &nrank);
        leader = nrank == 0;
        MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Comm_free(&node);
    }
    const int net = alpha_net >= 0 && beta_net >= 0;
    if (net) lp_model_set_net(alpha_net, beta_net);

    char *algs[MAXALGS], *sizes_s[MAXSIZES];
    int nalg = split_list(algbuf, algs, MAXALGS), nsz = split_list(sizebuf, sizes_s, MAXSIZES);
    const char *cname = coll == LP_ALLREDUCE ? "allreduce" : coll == LP_REDUCE ? "reduce" : "bcast";
    char libver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int lvlen = 0;
    MPI_Get_library_version(libver, &lvlen);
    for (char *c = libver; *c; c++) if (*c == '\n' || *c == '"' || *c == '\\' || *c == '\t') *c = ' ';
    libver[60] = 0;
    int failures = 0;
    /* the engine caches its context on the communicator it is given; a communicator of our own,
     * freed before MPI_Finalize, releases it there (SMPI rejects attribute calls made from
     * inside MPI_Finalize, where the engine's at-finalize hook would otherwise free it) */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    for (int si = 0; si < nsz; si++) {
        size_t nbytes = (size_t)atoll(sizes_s[si]), count = nbytes / sizeof(float);
        nbytes = count * sizeof(float);
        float *s = big_alloc(nbytes, shared), *r = big_alloc(nbytes, shared);
        if (!s || !r) { fprintf(stderr, "lpsim: rank %d: out of memory\n", rank); MPI_Abort(MPI_COMM_WORLD, 3); }
        if (!shared) {
            for (size_t i = 0; i < count; i++) s[i] = value(rank, i);
            memset(r, 0, nbytes);
        }
        for (int ai = 0; ai < nalg; ai++) {
            int alg = lp_algo_find(coll, algs[ai]);
            if (alg < 0) {
                if (!rank) fprintf(stderr, "lpsim: no %s algorithm %s\n", cname, algs[ai]);
                continue;
            }
            size_t chunk = 0;
            if (lp_algo_chunked(alg))
                chunk = chunk_force > 0 ? (size_t)chunk_force : lp_best_chunk(alg, P, net ? nodes : 1, nbytes);
            double *t = calloc((size_t)reps, sizeof *t);
            int bad = 0;
            for (int it = -warmup; it < reps; it++) {
                if (coll == LP_BCAST && rank == root && !shared)
                    for (size_t i = 0; i < count; i++) r[i] = value(root, i);
                else if (!shared) memset(r, 0, nbytes);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                int rc = run_one(coll, alg, comm, s, r, count, root, chunk);
                double dt = MPI_Wtime() - t0;
                if (rc != LP_OK) {
                    fprintf(stderr, "lpsim: rank %d: %s/%s failed: %s\n", rank, cname, algs[ai], lp_errmsg());
                    MPI_Abort(MPI_COMM_WORLD, 4);
                }
                if (it >= 0) t[it] = dt;
                if (verify && it == reps - 1) bad = check(coll, r, count, rank, P, root);
            }
            double *tmax = calloc((size_t)reps, sizeof *tmax);
            MPI_Reduce(t, tmax, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            int anybad = 0;
            MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
            if (!rank) {
                qsort(tmax, (size_t)reps, sizeof *tmax, cmp_double);
                double med = reps % 2 ? tmax[reps / 2] : 0.5 * (tmax[reps / 2 - 1] + tmax[reps / 2]);
                printf("LPSIM {\"coll\": \"%s\", \"alg\": \"%s\", \"P\": %d, \"nbytes\": %zu, "
                       "\"chunk_bytes\": %zu, \"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, "
                       "\"reps\": %d, \"simulated\": %s, \"verified\": %s, \"mpi\": \"%s\", "
                       "\"model\": [%g, %g, %g], \"model_net\": [%g, %g], \"nodes\": %d, "
                       "\"charge_gamma\": %g, \"real_reduce\": %d}\n",
                       cname, algs[ai], P, nbytes, chunk, med, tmax[0], tmax[reps - 1], reps,
                       LPSIM_SMPI ? "true" : "false", verify ? (anybad ? "false" : "true") : "null",
                       libver, alpha, beta, gamma_, net ? alpha_net : -1.0, net ? beta_net : -1.0, nodes,
                       charge_gamma, real_reduce);
                fflush(stdout);
                failures += anybad;
            }
            free(t);
            free(tmax);
        }
        big_free(s, shared);
        big_free(r, shared);
    }
    MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return failures ? 1 : 0;
}
