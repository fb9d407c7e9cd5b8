/* rewrite_probe.c: does rewriting memory that another process has just read with
 * process_vm_readv cost more than writing memory nobody else read?  (issue 24, item 5: the
 * hypothesis for lp's slow in-place mode: in place, a chain's tail receives chunk k's result
 * into the lines the head's kernel has just read out of its buffer.)
 *
 *   cc -O2 -o rewrite_probe rewrite_probe.c && ./rewrite_probe [rounds [split]]
 *   (split: B on CPU 0, A on CPU 1, as two pinned ranks)
 *
 * B (the parent) owns a 64 MiB buffer (huge pages where the kernel gives them, as numpy's
 * madvise does); A (a child) reads chunk k (512 KiB) of it with process_vm_readv, then B writes
 * 512 KiB either into that chunk ("same": the lines A's core just read) or into the chunk half
 * the buffer away ("other": not read for a long time).  B's write time per chunk, median of the
 * rounds, alternating the two kinds round by round so that a spell of the host hits both.  No
 * hardware counters needed (this VM has none). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>

static void nt_set(char *d, int v, size_t n) {
    __m128i x = _mm_set1_epi8((char)v);
    for (size_t i = 0; i < n; i += 64) {
        _mm_stream_si128((__m128i *)(d + i), x); _mm_stream_si128((__m128i *)(d + i + 16), x);
        _mm_stream_si128((__m128i *)(d + i + 32), x); _mm_stream_si128((__m128i *)(d + i + 48), x);
    }
    _mm_sfence();
}

#define N ((size_t)64 << 20)
#define C ((size_t)512 << 10)
#define K (N / C)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int nt = getenv("NT") != NULL; int rounds = argc > 1 ? atoi(argv[1]) : 20, split = argc > 2 && !strcmp(argv[2], "split");
    int to_a[2], to_b[2];
    cpu_set_t cpus;
    if (pipe(to_a) || pipe(to_b)) return 1;
    pid_t parent = getpid(), pid = fork();
    if (split) {                                      /* B on CPU 0, A on CPU 1 */
        CPU_ZERO(&cpus);
        CPU_SET(pid == 0 ? 1 : 0, &cpus);
        sched_setaffinity(0, sizeof cpus, &cpus);
    }
    if (pid == 0) {                                   /* A: the reader */
        char *local = aligned_alloc(4096, C);
        uintptr_t addr;
        memset(local, 0, C);
        if (read(to_a[0], &addr, sizeof addr) != sizeof addr) _exit(2);
        for (long k; read(to_a[0], &k, sizeof k) == sizeof k && k >= 0;) {
            struct iovec l = {local, C}, r = {(void *)(addr + (size_t)k * C), C};
            if (process_vm_readv(parent, &l, 1, &r, 1, 0) != (ssize_t)C) _exit(3);
            if (write(to_b[1], &k, sizeof k) != sizeof k) _exit(4);
        }
        _exit(0);
    }
    char *buf = aligned_alloc((size_t)2 << 20, N);
    madvise(buf, N, MADV_HUGEPAGE);
    memset(buf, 1, N);
    uintptr_t addr = (uintptr_t)buf;
    if (write(to_a[1], &addr, sizeof addr) != sizeof addr) return 1;
    double *t[2];
    t[0] = calloc((size_t)rounds, sizeof(double));
    t[1] = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < 2 * rounds; r++) {
        int same = (r & 1) ^ ((r >> 1) & 1);          /* same/other alternating, order rotated */
        double sum = 0;
        for (long k = 0; k < (long)K; k++) {
            long got;
            if (write(to_a[1], &k, sizeof k) != sizeof k || read(to_b[0], &got, sizeof got) != sizeof got) return 1;
            char *dst = buf + (size_t)(same ? k : (k + (long)K / 2) % (long)K) * C;
            double t0 = now();
            if (nt) nt_set(dst, (int)(r & 0x7f), C); else memset(dst, (int)(r & 0x7f), C);
            sum += now() - t0;
        }
        t[same][r / 2] = sum / (double)K;
    }
    long stop = -1;
    if (write(to_a[1], &stop, sizeof stop) != sizeof stop) return 1;
    waitpid(pid, NULL, 0);
    qsort(t[0], (size_t)rounds, sizeof(double), cmp);
    qsort(t[1], (size_t)rounds, sizeof(double), cmp);
    printf("write of 512 KiB just read by the other process: median %.1f us (min %.1f, max %.1f)\n",
           t[1][rounds / 2] * 1e6, t[1][0] * 1e6, t[1][rounds - 1] * 1e6);
    printf("write of 512 KiB nobody read:                     median %.1f us (min %.1f, max %.1f)\n",
           t[0][rounds / 2] * 1e6, t[0][0] * 1e6, t[0][rounds - 1] * 1e6);
    printf("ratio same/other: %.2f\n", t[1][rounds / 2] / t[0][rounds / 2]);
    return 0;
}
