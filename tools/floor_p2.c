/* floor_p2.c: what a two-rank allreduce (float32 sum) costs on this machine with no library
 * around it: two processes pinned to CPUs 0 and 1, synchronised by counters in shared memory,
 * each design stripped to its copies and folds.  It answers: how fast could any implementation
 * of a design be here?  (docs/performance-archive.md, issue 14, third round.)
 *
 *   gcc -O3 -march=native -o /tmp/floor_p2 tools/floor_p2.c && /tmp/floor_p2 1048576 131072 5
 *
 * argv: message bytes, chunk bytes, rounds.  Each round times every design once (interleaved:
 * A B C D A B C D ...), ~1 GiB of message per design and round (at least 20 calls); printed: per design the median and
 * the range over rounds of the time per call (us), the slower rank's.  Exit status 1: a design
 * computed a wrong element; 2: bad arguments; 3: process_vm_readv is refused here.
 *
 * Designs (rank r owns half r of the message; every one computes the same bits):
 *   direct    the inputs and outputs live in memory both processes map: fold my half reading the
 *             peer's input where it lies, then copy the peer's result half where it lies.  What
 *             XPMEM-style attach would allow; plain numpy arrays are private memory, which no
 *             mechanism of this kernel lets another process load from.
 *   cma       single-copy reads (process_vm_readv) of the peer's input half into a private
 *             chunk buffer, fold into my output, then the peer's result half straight into my
 *             output, chunk by chunk (pipelined: gather chunk k once the peer folded it).
 *   cma-bulk  the same, but the gather reads the peer's whole result half after all folds
 *             (lpmpi's alg_ring_cma.c).
 *   shm       copy through shared slots: copy the part the peer owns into my slot, fold the
 *             peer's slot with my input into my output and my result slot, copy the peer's
 *             result slot into my output (lpmpi's alg_ring_shm.c; MPI libraries' shared-memory
 *             collectives move bytes the same way).
 *   shm-nt    shm, with the result streamed to the output (non-temporal stores, SSE2) from the
 *             fold's registers, which also store it plainly into my result slot, and the gather
 *             streaming too (lpmpi's shm from 32 MiB). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { DIRECT, CMA, CMA_BULK, SHM, SHM_NT, NDESIGN };
static const char *names[NDESIGN] = {"direct", "cma", "cma-bulk", "shm", "shm-nt"};

typedef struct { _Alignas(64) atomic_long c; } ctr_t;
static ctr_t *ctr;           /* one counter per rank, in shared memory */
static atomic_int *fail;     /* shared: a rank's exit status on failure, so that its peer stops too */
static double *res;          /* shared: [round][design][rank] seconds per call */
static int me, peer;
static long step;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void sync_peer(void) {              /* both ranks reached the same step */
    step++;
    atomic_store_explicit(&ctr[me].c, step, memory_order_release);
    while (atomic_load_explicit(&ctr[peer].c, memory_order_acquire) < step)
        if (atomic_load(fail)) exit(atomic_load(fail));
}
static void die(int status) {
    atomic_store(fail, status);
    exit(status);
}
static void cma(pid_t pid, void *dst, const void *src, size_t len) {
    struct iovec l = {dst, len}, r = {(void *)src, len};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)len) {
        perror("process_vm_readv");
        die(errno == EPERM ? 3 : 1);            /* 3: refused here (ptrace permissions) */
    }
}
static void fold(float *o, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i];
}

/* o = a + b streamed (where 16-byte aligned, with SSE2), r = the same, plainly; then copy */
static void fold_nt(float *o, float *r, const float *a, const float *b, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    for (; i < n && ((uintptr_t)(o + i) & 15); i++) r[i] = o[i] = a[i] + b[i];
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i));
        _mm_stream_ps(o + i, v);
        _mm_storeu_ps(r + i, v);
    }
    _mm_sfence();
#endif
    for (; i < n; i++) r[i] = o[i] = a[i] + b[i];
}
static void copy_nt(float *o, const float *s, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    for (; i < n && ((uintptr_t)(o + i) & 15); i++) o[i] = s[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(o + i, _mm_loadu_ps(s + i));
    _mm_sfence();
#endif
    for (; i < n; i++) o[i] = s[i];
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s BYTES CHUNK_BYTES ROUNDS\n", argv[0]); return 2; }
    const size_t n = strtoul(argv[1], 0, 0) / 4, h = n / 2, cf = strtoul(argv[2], 0, 0) / 4;
    const int rounds = atoi(argv[3]);
    if (n < 2 || cf < 1 || rounds < 1 || n % 2) { fprintf(stderr, "bad arguments\n"); return 2; }
    /* shared: counters, results, per rank: input, output (direct), two slots of a chunk, the
     * peer's pointers for cma */
    size_t head = 4096 + (size_t)rounds * NDESIGN * 2 * sizeof(double);
    head = (head + 4095) & ~(size_t)4095;
    char *sh = mmap(0, head + 4 * n * 4 + 4 * cf * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) { perror("mmap"); return 1; }
    ctr = (ctr_t *)sh;
    fail = (atomic_int *)(sh + 512);
    void **ptrs = (void **)(sh + 1024);
    res = (double *)(sh + 4096);
    float *sin[2] = {(float *)(sh + head), (float *)(sh + head) + n};
    float *sout[2] = {sin[1] + n, sin[1] + 2 * n};
    float *slot[2] = {sout[1] + n, sout[1] + n + 2 * cf};
    pid_t pids[2] = {getpid(), 0};
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    me = child == 0;
    peer = 1 - me;
    pids[1] = me ? getpid() : child;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(me, &cs);
    sched_setaffinity(0, sizeof cs, &cs);
    float *in = aligned_alloc(4096, n * 4), *out = aligned_alloc(4096, n * 4), *buf = aligned_alloc(4096, cf * 4);
    for (size_t i = 0; i < n; i++) in[i] = sin[me][i] = (float)(1 + me) + (float)(i % 7);
    ptrs[2 * me] = in;
    ptrs[2 * me + 1] = out;
    sync_peer();
    const float *pin = ptrs[2 * peer], *pout = ptrs[2 * peer + 1];
    const pid_t pp = pids[peer];
    const size_t nch = (h + cf - 1) / cf;
    /* shm's slots: per rank 2 chunks (input part for the peer, result for the peer) */
    float *myin = slot[me], *myres = slot[me] + cf, *pslot_in = slot[peer], *pslot_res = slot[peer] + cf;
    const size_t calls = (size_t)1 << 30 > 20 * n * 4 ? ((size_t)1 << 30) / (n * 4) : 20;  /* ~1 GiB each */
    for (int rd = 0; rd < rounds; rd++) {
        for (int d = 0; d < NDESIGN; d++) {
            double t0 = 0;
            for (size_t it = 0; it < calls + 20; it++) {
                if (it == 20) { sync_peer(); t0 = now(); }
                const size_t mo = (size_t)me * h, po = (size_t)peer * h;
                for (size_t k = 0; k < nch; k++) {
                    const size_t lo = k * cf, m = lo + cf > h ? h - lo : cf;
                    switch (d) {
                    case DIRECT:
                        fold(sout[me] + mo + lo, sin[me] + mo + lo, sin[peer] + mo + lo, m);
                        sync_peer();
                        memcpy(sout[me] + po + lo, sout[peer] + po + lo, m * 4);
                        break;
                    case CMA:
                        cma(pp, buf, pin + mo + lo, m * 4);
                        fold(out + mo + lo, in + mo + lo, buf, m);
                        sync_peer();
                        cma(pp, out + po + lo, pout + po + lo, m * 4);
                        break;
                    case CMA_BULK:
                        cma(pp, buf, pin + mo + lo, m * 4);
                        fold(out + mo + lo, in + mo + lo, buf, m);
                        if (k == nch - 1) {
                            sync_peer();
                            cma(pp, out + po, pout + po, h * 4);
                        }
                        break;
                    case SHM_NT:
                        memcpy(myin, in + po + lo, m * 4);
                        sync_peer();
                        fold_nt(out + mo + lo, myres, in + mo + lo, pslot_in, m);
                        sync_peer();
                        copy_nt(out + po + lo, pslot_res, m);
                        break;
                    case SHM:
                        memcpy(myin, in + po + lo, m * 4);
                        sync_peer();
                        fold(myres, in + mo + lo, pslot_in, m);
                        memcpy(out + mo + lo, myres, m * 4);
                        sync_peer();
                        memcpy(out + po + lo, pslot_res, m * 4);
                        break;
                    }
                    if (d == SHM || d == SHM_NT) sync_peer();   /* the chunk's slots are free again */
                }
                if (d != SHM && d != SHM_NT) sync_peer();   /* the peer has read my buffers */
            }
            double t = (now() - t0) / (double)calls;
            res[((size_t)rd * NDESIGN + (size_t)d) * 2 + (size_t)me] = t;
            const float *o = d == DIRECT ? sout[me] : out;
            for (size_t i = 0; i < n; i++)
                if (o[i] != (float)(3 + 2 * (int)(i % 7))) { fprintf(stderr, "%s: wrong result\n", names[d]); die(1); }
            sync_peer();
        }
    }
    if (me == 0) {
        int st = 0;
        waitpid(child, &st, 0);
        if (atomic_load(fail)) return atomic_load(fail);
        printf("# floor_p2: %zu bytes, chunk %zu bytes, %d rounds, the slower rank, us per call: median [min max]\n",
               n * 4, cf * 4, rounds);
        for (int d = 0; d < NDESIGN; d++) {
            double v[64];
            int k = rounds < 64 ? rounds : 64;
            for (int i = 0; i < k; i++) {
                double a = res[((size_t)i * NDESIGN + (size_t)d) * 2], b = res[((size_t)i * NDESIGN + (size_t)d) * 2 + 1];
                v[i] = (a > b ? a : b) * 1e6;
            }
            for (int i = 1; i < k; i++)
                for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { double x = v[j]; v[j] = v[j - 1]; v[j - 1] = x; }
            printf("%-9s %8.1f [%.1f %.1f]\n", names[d], k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2, v[0], v[k - 1]);
        }
    }
    return 0;
}
