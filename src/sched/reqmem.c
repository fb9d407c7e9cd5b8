/* reqmem.c: a request's memory, below the schedules and the progress engine that use it: its
 * areas (scratch with the buffers, pinned host memory, device memory; grow-only while the
 * request is reused), its slots of MPI requests, and the persistent MPI requests its schedule
 * makes at init.  The request's life (made, planned, started, destroyed) is request.c's. */
#include "engine.h"
#include <stdlib.h>

/* ------------------------------------------------------------------------------- memory */
#define MEM_HOST LP_AREA_KIND_HOST

char *lp_req_area(lp_req_t *r, int area) { return r->area[area]; }

static void area_free(lp_req_t *r, int i) {
    if (!r->area[i]) return;
    if (r->area_kind[i] == MEM_HOST) {
        free(r->area[i]);
    } else {
        const lp_devops_t *d = r->area_ops[i];
        int saved = 0, entered = d->enter(r->area_dev[i], &saved) == LP_OK;
        d->mem_free(r->area_kind[i], r->area[i]);
        if (entered) d->leave(saved);
    }
    r->area[i] = NULL;
    r->area_bytes[i] = 0;
}

/* area i of at least `bytes`, of kind `kind` (a device kind: on the request's device) */
int lp_req_area_reserve(lp_req_t *r, int i, size_t bytes, int kind) {
    int rc = LP_OK, saved = 0, entered = 0;
    const lp_devops_t *d = r->a.dev;
    if (!bytes) return LP_OK;
    if (r->area[i] && r->area_bytes[i] >= bytes && r->area_kind[i] == kind &&
        (kind == MEM_HOST || (r->area_ops[i] == d && r->area_dev[i] == r->devid)))
        return LP_OK;
    area_free(r, i);
    size_t want = (bytes + 63) & ~(size_t)63;
    void *p = NULL;
    if (kind == MEM_HOST) {
        if (posix_memalign(&p, 64, want) != 0)
            return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu bytes of scratch space", want);
    } else {
        LP_TRY(d->enter(r->devid, &saved));
        entered = 1;
        LP_TRY(d->mem_alloc(kind, want, &p));
    }
    r->area[i] = p;
    r->area_bytes[i] = want;
    r->area_kind[i] = kind;
    r->area_ops[i] = d;
    r->area_dev[i] = r->devid;
cleanup:
    if (entered) d->leave(saved);
    return rc;
}

int lp_req_slots(lp_req_t *r, size_t n) {
    if (n <= r->reqcap) return LP_OK;
    MPI_Request *q = realloc(r->reqs, n * sizeof *q);
    if (q) r->reqs = q;
    unsigned char *f = realloc(r->fin, n);
    if (f) r->fin = f;
    if (!q || !f) return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu MPI requests", n);
    r->reqcap = n;
    return LP_OK;
}

int lp_req_alloc_persistent(lp_req_t *r, size_t n, MPI_Request **out) {
    MPI_Request *p = calloc(n ? n : 1, sizeof *p);
    if (!p) return LP_FAIL(LP_ERR_NOMEM, "cannot allocate %zu persistent MPI requests", n);
    for (size_t i = 0; i < n; i++) p[i] = MPI_REQUEST_NULL;
    r->preq = p;
    r->npreq = n;
    *out = p;
    return LP_OK;
}

/* the MPI objects of a persistent request (made by its schedule's init) */
void lp_req_persistent_free(lp_req_t *r) {
    if (r->sched && r->sched->fini) r->sched->fini(r);
    for (size_t i = 0; i < r->npreq; i++)
        if (r->preq[i] != MPI_REQUEST_NULL && !r->finalized) MPI_Request_free(&r->preq[i]);
    free(r->preq);
    r->preq = NULL;
    r->npreq = 0;
}

void lp_req_areas_free(lp_req_t *r) {
    for (int i = 0; i < 3; i++) area_free(r, i);
}

void lp_req_finalize_one(lp_req_t *r) {
    lp_req_persistent_free(r);
    r->finalized = 1;
}
