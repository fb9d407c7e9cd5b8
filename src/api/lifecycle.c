/* lifecycle.c: how the engine's state ends, in one place and in its order:
 *
 *   a communicator freed by the user (its context's keyval delete callback, context.c): the
 *     requests on it completed (sched/progress.h) and destroyed (request.c), then the context's own
 *     data (context.c: its duplicate, node map, transports, table);
 *   MPI_Finalize (MPI_COMM_SELF's attribute, deleted first): the progress thread stopped and
 *     every started request completed (sched/progress.h), the persistent requests' MPI objects
 *     freed, every context freed as above, lpmpi's MPI types and ops (alg_native.c), the
 *     device's streams and events (device.c).
 *
 * The top of the engine's layers: it calls down into each of them; context.c, which owns the
 * keyval and the list of contexts, calls these two through the hooks installed at load
 * (lp_ctx_set_hooks), never naming this file. */
#include "engine.h"

static void ctx_teardown(lp_ctx_t *c) {
    lp_engine_drain(c);
    if (c->breq) lp_req_destroy(c->breq);
    c->breq = NULL;
    while (c->pool) {
        lp_req_t *r = c->pool;
        c->pool = r->pool_next;
        lp_req_destroy(r);
    }
    c->npool = 0;
}

static void finalize(void) {
    lp_engine_finalize();     /* the progress thread stopped, every started request completed */
    lp_req_finalize();        /* persistent requests' MPI objects */
    lp_ctx_free_all();
    lp_native_free();
    lp_device_release();
}

__attribute__((constructor)) static void install(void) { lp_ctx_set_hooks(ctx_teardown, finalize); }
