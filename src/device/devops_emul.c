/* devops_emul.c: host emulation of the device operations (interface and rules in devops.h).
 *
 * "Device" memory is host memory; a copy is memcpy, a reduction the host kernel of reduce.c,
 * AVG's division lp_scale.  What makes it a useful stand-in for CUDA is the timing: every
 * operation is queued on its stream and runs later, in stream order, when
 *   - an event recorded after it is queried and the emulation decides it is complete (event
 *     number s, in record order, reports "not ready" to its first s % 3 queries), or
 *   - its stream is synchronised.
 * So a staging pipeline that touches a buffer before the event guarding it completed sees
 * stale data (or overwrites data still to be copied), exactly the bugs that would corrupt
 * results on a GPU, and the staged path can be tested on machines without one. */
#include "devops.h"
#include "internal.h"
#include <pthread.h>
#include <stdlib.h>

/* requests on different threads (a progress thread, callers) may drive device work at once */
static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;

enum { E_COPY, E_REDUCE, E_SCALE, E_RECORD };

typedef struct {
    int kind, event;
    void *dst;
    const void *a, *b;
    size_t n;              /* bytes (copy) or elements */
    lp_dtype_t dt;
    lp_op_t op;
    double div;
} eop_t;

typedef struct {
    eop_t *ops;
    size_t head, tail, cap;   /* queued: ops[head .. tail) */
} queue_t;

static queue_t queues[LP_MAX_STREAMS];
static struct {
    int pending, stream, polls_left;
} events[LP_MAX_EVENTS];
static unsigned long nrecords;
static long stat_not_ready, stat_ops;

void lp_emul_stats(long *not_ready, long *ops) {
    *not_ready = stat_not_ready;
    *ops = stat_ops;
}

static void exec(const eop_t *o) {
    stat_ops++;
    switch (o->kind) {
    case E_COPY:
        if (o->n && o->dst != o->a) memmove(o->dst, o->a, o->n);
        break;
    case E_REDUCE:
        if (o->n) lp_reduce_kernel(o->dt, o->op)(o->dst, o->a, o->b, o->n);
        break;
    case E_SCALE:
        if (o->n) lp_scale(o->dst, o->n, o->dt, o->div);
        break;
    case E_RECORD:
        events[o->event].pending = 0;
        break;
    }
}

/* run stream s's queue in order; stop after the record of `event` (-1: run everything) */
static void drain(int s, int event) {
    queue_t *q = &queues[s];
    while (q->head < q->tail) {
        eop_t o = q->ops[q->head++];
        exec(&o);
        if (o.kind == E_RECORD && o.event == event) break;
    }
    if (q->head == q->tail) q->head = q->tail = 0;
}

static int push_locked(int s, const eop_t *o) {
    if (s < 0 || s >= LP_MAX_STREAMS) return LP_FAIL(LP_ERR_ARG, "emulated stream %d out of range", s);
    queue_t *q = &queues[s];
    if (q->tail == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        eop_t *n = realloc(q->ops, cap * sizeof *n);
        if (!n) return LP_FAIL(LP_ERR_NOMEM, "out of memory for the emulated stream queue");
        q->ops = n;
        q->cap = cap;
    }
    q->ops[q->tail++] = *o;
    return LP_OK;
}

static int push(int s, const eop_t *o) {
    pthread_mutex_lock(&M);
    int rc = push_locked(s, o);
    pthread_mutex_unlock(&M);
    return rc;
}

static int e_locate(const void *ptr, int *device) {
    (void)ptr;
    *device = -1;
    return LP_OK;
}
static int e_enter(int device, int *saved) {
    (void)device;
    *saved = 0;
    return LP_OK;
}
static void e_leave(int saved) { (void)saved; }

static int e_copy(void *dst, const void *src, size_t bytes, int stream) {
    eop_t o = {.kind = E_COPY, .dst = dst, .a = src, .n = bytes};
    return push(stream, &o);
}

static int e_reduce(void *out, const void *a, const void *b, size_t n, lp_dtype_t dt, lp_op_t op,
                    int stream) {
    if (!lp_reduce_kernel(dt, op)) return LP_FAIL(LP_ERR_ARG, "no kernel for %s on %s", lp_op_name(op),
                                                  lp_dtype_name(dt));
    eop_t o = {.kind = E_REDUCE, .dst = out, .a = a, .b = b, .n = n, .dt = dt, .op = op};
    return push(stream, &o);
}

static int e_scale(void *buf, size_t n, lp_dtype_t dt, double divisor, int stream) {
    eop_t o = {.kind = E_SCALE, .dst = buf, .n = n, .dt = dt, .div = divisor};
    return push(stream, &o);
}

static int e_record(int ev, int stream) {
    if (ev < 0 || ev >= LP_MAX_EVENTS) return LP_FAIL(LP_ERR_ARG, "emulated event %d out of range", ev);
    pthread_mutex_lock(&M);
    if (events[ev].pending) drain(events[ev].stream, ev);   /* re-record: as CUDA, the old one is gone */
    eop_t o = {.kind = E_RECORD, .event = ev};
    int rc = push_locked(stream, &o);
    if (rc == LP_OK) {
        events[ev].pending = 1;
        events[ev].stream = stream;
        events[ev].polls_left = (int)(nrecords++ % 3);
    }
    pthread_mutex_unlock(&M);
    return rc;
}

static int e_query(int ev, int *done) {
    if (ev < 0 || ev >= LP_MAX_EVENTS) return LP_FAIL(LP_ERR_ARG, "emulated event %d out of range", ev);
    pthread_mutex_lock(&M);
    if (events[ev].pending && events[ev].polls_left > 0) {
        events[ev].polls_left--;
        stat_not_ready++;
        *done = 0;
    } else {
        if (events[ev].pending) drain(events[ev].stream, ev);
        *done = 1;
    }
    pthread_mutex_unlock(&M);
    return LP_OK;
}

static void sync_locked(int stream) {
    for (int s = 0; s < LP_MAX_STREAMS; s++)
        if (stream < 0 || s == stream) drain(s, -1);
}

static int e_sync(int stream) {
    pthread_mutex_lock(&M);
    sync_locked(stream);
    pthread_mutex_unlock(&M);
    return LP_OK;
}

static int e_alloc(int kind, size_t bytes, void **out) {
    void *p = NULL;
    size_t want = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, want ? want : 64) != 0)
        return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu bytes of emulated %s memory", want,
                       kind == LP_ALLOC_PINNED ? "pinned" : "device");
    memset(p, 0xA5, want);   /* never-written staging bytes are recognisable garbage */
    *out = p;
    return LP_OK;
}

static void e_free(int kind, void *p) {
    (void)kind;
    e_sync(-1);    /* nothing queued may still point into it */
    free(p);
}

static void e_release(void) {
    pthread_mutex_lock(&M);
    sync_locked(-1);
    for (int s = 0; s < LP_MAX_STREAMS; s++) {
        free(queues[s].ops);
        queues[s] = (queue_t){0};
    }
    pthread_mutex_unlock(&M);
}

const lp_devops_t lp_devops_emul = {
    .name = "emulated",
    .locate = e_locate, .enter = e_enter, .leave = e_leave,
    .d2h = e_copy, .h2d = e_copy, .d2d = e_copy,
    .reduce = e_reduce, .scale = e_scale,
    .record = e_record, .query = e_query, .sync = e_sync,
    .mem_alloc = e_alloc, .mem_free = e_free, .release = e_release,
};
