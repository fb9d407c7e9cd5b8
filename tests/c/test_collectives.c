/* C unit test of every registered algorithm under mpiexec (run by ctest at P = 1..5), on
 * host memory, then under the host emulation of device memory (devops.h): the staged
 * transport (LP's staged pipeline, whole-buffer staging for the others) and the CUDA-aware
 * routing of the algorithms' local work; each case in its three forms: blocking, nonblocking
 * (lp_request + lp_wait) and persistent (lp_request, then lp_start + lp_wait twice).
 * Each rank builds every rank's input deterministically, so it can compute the exact
 * expected result locally.  Prints one line per failure and "N passed, M failed" on rank 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lpmpi.h"

static int rank, size;
static const char *mode_name = "host";
static int form;                        /* 0 blocking, 1 nonblocking, 2 persistent */
static void fill(void *buf, lp_dtype_t dt, size_t n, int r);
static const char *const form_names[] = {"blocking", "nonblocking", "persistent"};

/* one collective call in the current form (persistent: started twice, the input refilled by
 * `refill` before each start) */
static int call(lp_coll_t coll, void *s, void *r, size_t n, lp_dtype_t dt, lp_op_t op, int root, int alg,
                size_t chunk, void (*refill)(void *, lp_dtype_t, size_t, int), int who) {
    if (form == 0) {
        if (coll == LP_ALLREDUCE) return lp_allreduce(MPI_COMM_WORLD, s, r, n, dt, op, alg, chunk, LP_MEM_HOST);
        if (coll == LP_REDUCE) return lp_reduce(MPI_COMM_WORLD, s, r, n, dt, op, root, alg, chunk, LP_MEM_HOST);
        return lp_bcast(MPI_COMM_WORLD, s, n, dt, root, alg, chunk, LP_MEM_HOST);
    }
    lp_req_t *q = NULL;
    int rc = lp_request(&q, form == 1 ? LP_REQ_NONBLOCKING : LP_REQ_PERSISTENT, coll, MPI_COMM_WORLD, s,
                        coll == LP_BCAST ? s : r, n, dt, op, root, alg, chunk, LP_MEM_HOST, NULL,
                        LP_FLOAT32);
    if (rc) return rc;
    for (int round = 0; round < (form == 2 ? 2 : 1) && rc == 0; round++) {
        if (form == 2) {
            refill(s, dt, n, who);
            rc = lp_start(q);
        }
        if (rc == 0) rc = lp_wait(q);
    }
    if (rc == 0) rc = lp_req_free(q);
    return rc;
}
static long passed, failed;

/* input of rank r, element i: small integers, exact in every type used here */
static double val(int r, size_t i) { return (double)((int)((i * 7 + (size_t)r * 13) % 11) - 5); }

static void fill(void *buf, lp_dtype_t dt, size_t n, int r) {
    for (size_t i = 0; i < n; i++) {
        double v = val(r, i);
        switch (dt) {
        case LP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case LP_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
        case LP_FLOAT64: ((double *)buf)[i] = v; break;
        case LP_FLOAT32: ((float *)buf)[i] = (float)v; break;
        default: abort();
        }
    }
}

static void expect(void *out, lp_dtype_t dt, lp_op_t op, size_t n) {
    size_t es = lp_dtype_size(dt);
    char *tmp = malloc(n * es + 1);
    fill(out, dt, n, 0);
    for (int r = 1; r < size; r++) {
        fill(tmp, dt, n, r);
        lp_reduce_kernel(dt, op)(out, out, tmp, n);
    }
    if (op == LP_AVG) lp_scale(out, n, dt, size);
    free(tmp);
}

/* bcast's input: the root's data on the root, zeros elsewhere */
static void bcast_fill(void *buf, lp_dtype_t dt, size_t n, int root) {
    if (rank == root) fill(buf, dt, n, root);
    else memset(buf, 0, n * lp_dtype_size(dt));
}

static void report(int ok, const char *what, const char *alg, lp_dtype_t dt, lp_op_t op, size_t n,
                   size_t chunk, int root, int inplace, const char *why) {
    if (ok) { passed++; return; }
    failed++;
    printf("FAIL rank=%d mode=%s form=%s %s alg=%s dtype=%s op=%s count=%zu chunk=%zu root=%d inplace=%d: %s\n", rank,
           mode_name, form_names[form], what, alg, lp_dtype_name(dt), lp_op_name(op), n, chunk, root, inplace, why);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t counts[] = {0, 1, 2, 7, 31, 1000};
    const size_t chunks[] = {0, 4, 12, 100};
    const struct { lp_dtype_t dt; lp_op_t op; } cases[] = {
        {LP_INT32, LP_SUM}, {LP_FLOAT64, LP_SUM}, {LP_UINT8, LP_BXOR}, {LP_FLOAT32, LP_MAX},
        {LP_FLOAT64, LP_AVG}};
    static const char *const modes[] = {"host", "emulated-staged", "emulated-aware"};
    for (form = 0; form < 3; form++)
    for (int mode = 0; mode < 3; mode++) {
    if (form > 0 && mode == 2) continue;
    mode_name = modes[mode];
    lp_configure_device(mode > 0, mode == 2, 0);
    for (int alg = 0; alg < lp_algo_count(); alg++) {
        lp_coll_t coll = (lp_coll_t)lp_algo_coll(alg);
        const char *name = lp_algo_name(alg);
        if (lp_algo_wire(alg)) continue;   /* compressed calls only (lossy; tests/compress_cases.py) */
        int has_op, has_root, input, result, sblocks, rblocks, shm, vcounts;
        lp_coll_traits(coll, &has_op, &has_root, &input, &result, &sblocks, &rblocks, &shm, &vcounts);
        if (sblocks != 1 || rblocks != 1) continue;   /* the collectives with a block per rank: their
                                                         buffers differ (tests/blocks_cases.py,
                                                         tests/move_cases.py) */
        if (coll != LP_ALLREDUCE && coll != LP_REDUCE && coll != LP_BCAST)
            continue;   /* element-wise with other results (scan's prefix): tests/move_cases.py */
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            lp_dtype_t dt = cases[ci].dt;
            lp_op_t op = cases[ci].op;
            size_t es = lp_dtype_size(dt);
            for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
                if (mode > 0 && (ni == 2 || ni == 3)) continue;   /* emulation: a sample */
                size_t n = counts[ni];
                char *in = malloc(n * es + 1), *out = malloc(n * es + 1), *ref = malloc(n * es + 1);
                for (size_t ki = 0; ki < sizeof chunks / sizeof chunks[0]; ki++) {
                    if (mode > 0 && ki % 2 == 1 && n != 1000) continue;
                    size_t chunk = chunks[ki];
                    for (int root = 0; root < (coll == LP_ALLREDUCE ? 1 : size); root++) {
                        for (int inplace = 0; inplace < 2; inplace++) {
                            int rc;
                            fill(in, dt, n, rank);
                            memset(out, 0x5a, n * es);
                            if (coll == LP_BCAST) {
                                if (rank != root) memset(in, 0, n * es);
                                rc = call(LP_BCAST, in, in, n, dt, op, root, alg, chunk, bcast_fill, root);
                                fill(ref, dt, n, root);
                                report(rc == 0 && memcmp(in, ref, n * es) == 0, "bcast", name, dt, op, n,
                                       chunk, root, 0, rc ? lp_errmsg() : "wrong result");
                                break;
                            }
                            void *s = in, *r = inplace ? in : out;
                            rc = call(coll, s, coll == LP_ALLREDUCE || rank == root ? r : NULL, n, dt, op,
                                      root, alg, chunk, fill, rank);
                            expect(ref, dt, op, n);
                            int ok = rc == 0;
                            if (coll == LP_ALLREDUCE || rank == root) ok = ok && memcmp(r, ref, n * es) == 0;
                            else {   /* non-root: input untouched, recvbuf never written */
                                fill(ref, dt, n, rank);
                                ok = ok && memcmp(in, ref, n * es) == 0;
                                if (!inplace)
                                    for (size_t i = 0; i < n * es; i++) ok = ok && (unsigned char)out[i] == 0x5a;
                            }
                            report(ok, coll == LP_ALLREDUCE ? "allreduce" : "reduce", name, dt, op, n, chunk,
                                   root, inplace, rc ? lp_errmsg() : "wrong result");
                        }
                    }
                }
                free(in);
                free(out);
                free(ref);
            }
        }
    }
    }
    long tot[2] = {passed, failed};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld passed, %ld failed\n", tot[0], tot[1]);
    MPI_Finalize();
    return tot[1] ? 1 : 0;
}
