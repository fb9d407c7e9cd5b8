/* tunecore.c: the one measurement-and-decision core the online tuner (autotune.c) and the offline
 * one (lpmpi.tune, through lpmpi.bench's harness) share: a configuration's time is the median over
 * calls of the slowest rank's time (lp_tune_median), the online rounds rank by the lower median
 * (lp_at_lower_median), and the choice is the fastest, the preferred one (MPI's own) where it is
 * within a tie (lp_tune_decide). */
#include "autotune.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double lp_tune_median(const double *x, size_t n) {
    if (!n) return NAN;
    double stack[64], *v = n <= 64 ? stack : malloc(n * sizeof *v);
    if (!v) return NAN;
    memcpy(v, x, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    if (v != stack) free(v);
    return m;
}

/* the lower median (n even: the lower middle; of two samples, the smaller): what the rounds rank
 * and cut by.  A candidate's next calls after its first can still run slow (ring over shm at
 * 256 KiB on the AMD EPYC: 1-4 ms, then 150-220 us, then 25-30 us; over CMA 120-175, 70-80,
 * 55-64, then 33): noise that only ever adds, which the mean of two samples carried into the
 * ranking (ring over shm ranked 81 us where it runs 25) */
double lp_at_lower_median(const double *x, size_t n) {
    if (n < 2 || n % 2) return lp_tune_median(x, n);
    double v[16];                   /* (a candidate keeps AT_KEEP = 16 samples) */
    size_t m = n < 16 ? n : 16;
    memcpy(v, x, m * sizeof *v);
    qsort(v, m, sizeof *v, cmp_double);
    return v[m / 2 - 1];
}

int lp_tune_pruned(double t, double best, double factor) { return t > best * factor; }

int lp_tune_decide(const double *t, int n, int prefer, double tie) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(t[i]) && (best < 0 || t[i] < t[best])) best = i;
    if (best >= 0 && prefer >= 0 && prefer < n && !isnan(t[prefer]) && t[prefer] <= t[best] * (1 + tie))
        best = prefer;
    return best;
}
