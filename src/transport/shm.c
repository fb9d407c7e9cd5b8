/* transport/shm.c: the shared-memory segment of a one-node communicator's ranks (POSIX shared
 * memory or an anonymous memory file every rank maps; transport.c opens and closes it with the
 * communicator's node-local transports), and waiting on its counters without spinning.  What
 * the segment is for, and the rounds that run through it: alg/alg_ring_shm.c (ring over shared
 * memory); its layout: shm.h. */
#include "shm.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <signal.h>
#endif

/* ---- waiting without spinning (sched/progress.h: a thread whose requests wait only for counters
 * spins a while, then arms, makes one more pass over its steps, and sleeps if it moved none).
 * The arm is a Dekker handshake with step(): the sleeper counts itself in sleepers, then
 * reads its word, then (the pass) reads the counters; a peer stores its counter, then reads
 * sleepers and, seeing one, bumps the word and wakes it.  Either the pass sees the new counter
 * or the peer sees the sleeper, whose futex wait then returns at once (the word moved). */
void lp_shm_arm(const void *seg, int me, uint32_t *v) {
    const lp_shm_t *s = seg;
    atomic_fetch_add_explicit(sleepers(s, me), 1, memory_order_seq_cst);
    *v = atomic_load_explicit(ev_word(s, me), memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
}

void lp_shm_disarm(const void *seg, int me) {
    const lp_shm_t *s = seg;
    atomic_fetch_sub_explicit(sleepers(s, me), 1, memory_order_relaxed);
}

void lp_shm_sleep(const void *seg, int me, uint32_t v, long timeout_ns) {
    const lp_shm_t *s = seg;
#if defined(__linux__)
    struct timespec t = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    /* shared (not FUTEX_PRIVATE): the word is in a segment that other processes map */
    syscall(SYS_futex, (uint32_t *)ev_word(s, me), FUTEX_WAIT, v, &t, NULL, 0);
#else
    (void)v; (void)timeout_ns;
    sched_yield();
#endif
    lp_shm_disarm(s, me);
}

/* after a counter store: wake the peers that sleep (a load per peer when none does) */
void lp_shm_wake_peers(const lp_shm_t *s, int me) {
    atomic_thread_fence(memory_order_seq_cst);
    for (int j = 1; j < s->P; j++) {
        int p = (me + j) % s->P;
        if (!atomic_load_explicit(sleepers(s, p), memory_order_relaxed)) continue;
        atomic_fetch_add_explicit(ev_word(s, p), 1, memory_order_seq_cst);
#if defined(__linux__)
        syscall(SYS_futex, (uint32_t *)ev_word(s, p), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
    }
}

/* ---- the segment (context.c calls these on every rank of a one-node communicator) ---- */

/* slot bytes for P ranks: 1 MiB, less where P is large (2 P slots in all: at most 32 MiB) */
static size_t slot_for(int P) {
    size_t s = ((size_t)16 << 20) / (size_t)P;
    if (s > ((size_t)1 << 20)) s = (size_t)1 << 20;
    return s & ~(size_t)4095;
}

#if defined(__linux__)
/* 0 when the file's pages are allocated (posix_fallocate; where the file system cannot do it,
 * EOPNOTSUPP/EINVAL, the segment is still used, as before the check) */
static int reserve(int fd, size_t bytes) {
    int e = posix_fallocate(fd, 0, (off_t)bytes);
    return e == 0 || e == EOPNOTSUPP || e == EINVAL ? 0 : -1;
}
#endif

/* a rank of the segment whose process is gone (exited, killed, a zombie; *pid: its process
 * id), or -1 */
int lp_shm_gone(const void *seg, int me, int *pid) {
    const lp_shm_t *s = seg;
#if defined(__linux__)
    if (!s->watch) return -1;
    for (int r = 0; r < s->P; r++) {
        if (r == me) continue;
        if (lp_proc_gone(&(lp_proc_t){s->pid[r], s->since[r]})) {
            *pid = s->pid[r];
            return r;
        }
    }
#else
    (void)s; (void)me; (void)pid;
#endif
    return -1;
}

#if defined(__linux__)
/* Named segments: "/lpmpi-<creator pid>-<n>-<ns>".  Before it makes a segment, rank 0 removes
 * those whose creator process is gone (killed between making and unlinking its own): a live
 * job's are never touched (its creator is alive; a reused pid only delays a removal). */
static void sweep_stale(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        long pid = 0;
        char name[300];
        if (strncmp(e->d_name, "lpmpi-", 6) != 0 || sscanf(e->d_name + 6, "%ld-", &pid) != 1 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        shm_unlink(name);
    }
    closedir(d);
}

/* why this process's last segment could not be made ("" where it could, or another rank
 * failed): the step and the system's error, for lpmpi-info */
static char shm_why[160];
static int force_named;          /* tests: the named path (lp_test_shm_named) */
void lp_test_shm_named(int on) { force_named = on; }
const char *lp_shm_failure(void) { return shm_why; }
static void why(const char *step, size_t bytes) {
    snprintf(shm_why, sizeof shm_why, "%s of %zu bytes: %s%s", step, bytes, strerror(errno),
             errno == ENOMEM ? " (RLIMIT_AS or the memory limit?)"
             : errno == ENOSPC ? " (no room in /dev/shm?)" : "");
}

/* map s->bytes of a file every rank of comm opens: rank 0 makes it, the others open it by the
 * path it broadcasts.  named = 0: an anonymous memory file (memfd_create) the others open
 * through /proc/<pid>/fd/<fd>: it has no name anywhere, so nothing is left behind whichever
 * process is killed when.  named = 1: a POSIX segment, unlinked once every rank mapped it.
 * Collective; *ok = 1 where this rank mapped it (s->base). */
static int attach(MPI_Comm comm, int rank, lp_shm_t *s, int named, int *ok) {
    static atomic_uint made;
    int rc = LP_OK, fd = -1;
    struct { char name[64]; int ok; } hdr = {{0}, 0};
    *ok = 0;
    if (rank == 0 && s) {
        if (named) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            snprintf(hdr.name, sizeof hdr.name, "/lpmpi-%ld-%u-%lx", (long)getpid(),
                     atomic_fetch_add(&made, 1), (unsigned long)t.tv_nsec);
            fd = shm_open(hdr.name, O_CREAT | O_EXCL | O_RDWR, 0600);
        } else {
            fd = (int)syscall(SYS_memfd_create, "lpmpi-shm", 1u /* MFD_CLOEXEC */);
            snprintf(hdr.name, sizeof hdr.name, "/proc/%ld/fd/%d", (long)getpid(), fd);
        }
        /* the pages are reserved now: a tmpfs without room for them (a container's small
         * /dev/shm) refuses here, and the transport is not used, instead of a SIGBUS at the
         * first store into a page it cannot supply */
        if (fd < 0) why(named ? "shm_open" : "memfd_create", s->bytes);
        else if (ftruncate(fd, (off_t)s->bytes) != 0) why("ftruncate", s->bytes);
        else if (reserve(fd, s->bytes) != 0) why("posix_fallocate", s->bytes);
        else hdr.ok = 1;
        if (fd >= 0 && !hdr.ok && named) shm_unlink(hdr.name);
    }
    LP_MPI(MPI_Bcast(&hdr, (int)sizeof hdr, MPI_BYTE, 0, comm));
    if (rank != 0 && hdr.ok && s) {
        fd = named ? shm_open(hdr.name, O_RDWR, 0) : open(hdr.name, O_RDWR | O_CLOEXEC);
        if (fd < 0) why(named ? "shm_open" : "open /proc/<pid>/fd", s->bytes);
    }
    if (hdr.ok && s && fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && (size_t)st.st_size >= s->bytes) {
            void *m = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED) { s->base = m; *ok = 1; shm_why[0] = 0; }
            else why("mmap", s->bytes);
        }
    }
    /* rank 0 keeps its file open (memfd: the others' path) and the name (named) until every
     * rank has it mapped or gave up */
    if (hdr.ok) LP_MPI(MPI_Barrier(comm));
    if (rank == 0 && named && hdr.ok) shm_unlink(hdr.name);
cleanup:
    if (fd >= 0) close(fd);
    return rc;
}
#endif

int lp_shm_open(MPI_Comm comm, int rank, int P, lp_shm_t **out) {
    int rc = LP_OK, ok = 0;
    *out = NULL;
#if defined(__linux__)
    lp_shm_t *s = calloc(1, sizeof *s);
    unsigned long long *all = NULL;
    if (s) {
        s->P = P;
        s->slot = slot_for(P);
        s->stride = HEAD + 2 * s->slot;
        s->bytes = s->stride * (size_t)P;
    }
    if (rank == 0) sweep_stale();   /* earlier jobs' leftovers, whichever path made them */
    if (!force_named) LP_TRY(attach(comm, rank, s, 0, &ok));
    int every = ok;
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, &every, 1, MPI_INT, MPI_MIN, comm));
    if (!every) {                   /* /proc refused somewhere: a named segment */
        if (s && s->base) munmap(s->base, s->bytes);
        if (s) s->base = NULL;
        LP_TRY(attach(comm, rank, s, 1, &ok));
    }
    /* every rank's mapping, process id and start time (the liveness check: a waiter whose peer
     * is gone raises instead of waiting forever; where this rank cannot see a peer's /proc
     * entry as it was, another pid namespace, there is no check) */
    {
        unsigned long long me[3] = {(unsigned long long)ok, (unsigned long long)getpid(),
                                    lp_proc_since((int)getpid())};
        all = malloc((size_t)P * sizeof me);
        if (s) {
            s->pid = malloc((size_t)P * sizeof *s->pid);
            s->since = malloc((size_t)P * sizeof *s->since);
        }
        int have = all && s && s->pid && s->since;
        LP_MPI(MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, comm));
        if (!have) ok = 0;
        else {
            LP_MPI(MPI_Allgather(me, 3, MPI_UNSIGNED_LONG_LONG, all, 3, MPI_UNSIGNED_LONG_LONG, comm));
            s->watch = 1;
            for (int r = 0; r < P; r++) {
                ok &= all[3 * r] != 0;
                s->pid[r] = (int)all[3 * r + 1];
                s->since[r] = all[3 * r + 2];
                if (!all[3 * r + 2] || lp_proc_since(s->pid[r]) != s->since[r]) s->watch = 0;
            }
        }
    }
    if (ok) {
        *out = s;
        s = NULL;
    }
cleanup:
    free(all);
    lp_shm_close(s);
#else
    (void)comm; (void)rank; (void)P;
    LP_MPI(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm));
cleanup:
#endif
    return rc;
}

void lp_shm_close(lp_shm_t *s) {
    if (!s) return;
#if defined(__linux__)
    if (s->base) munmap(s->base, s->bytes);
#endif
    free(s->pid);
    free(s->since);
    free(s);
}
