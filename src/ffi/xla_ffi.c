/* xla_ffi.c: lpmpi's collectives as XLA FFI handlers (lpmpi.jax's custom calls under jax.jit).
 *
 * One handler per collective and memory kind, in the engine (one state with the Python API:
 * contexts, private duplicates, the busy guard, LPMPI_TIMEOUT, LPMPI_CHECK).  A call frame
 * carries two arguments (the input buffer, the ordered effect's token) and two results (the
 * output buffer, the token), and the attributes lpmpi.jax lowers, all int64 scalars:
 *   acc    1: float16/bfloat16 SUM/AVG carried in float32 (acc_dtype="float32")
 *   alg    registry index or LP_ALG_AUTO          chunk  chunk bytes (0: choose)
 *   comm   the user's MPI_Comm handle (its value as an integer); it must have been prepared by
 *          lpmpi.jax (lp_comm_known: a lookup among live contexts, no MPI call on the handle)
 *   op     lp_op_t                                root   root rank (reduce, bcast)
 * Shapes (lpmpi.jax's abstract evaluation), from the collective's row (sendbuf's and recvbuf's
 * blocks): allreduce, reduce, bcast out = in; allgather out = P blocks of in; reduce_scatter
 * in = P blocks of out; alltoall in = out = P blocks; gather out = P blocks of in on the root,
 * one block elsewhere; scatter in = P blocks of out on the root, one block elsewhere (mpi4jax's
 * shapes: a side a rank neither reads nor writes is one block).  The collectives with per-rank
 * counts have no handler.  reduce, bcast and gather give every rank an output buffer; the ranks
 * that get no result leave it unwritten (lpmpi.jax returns the input there, as mpi4jax does).
 * A failure returns an XLA error (a Python exception from the jitted call) naming the
 * collective and the engine's message; nothing here calls back into Python. */
#include "internal.h"
#include "xla_ffi_abi.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lpx_error *fail(const lpx_frame *f, int errc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static lpx_error *fail(const lpx_frame *f, int errc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lpx_error_args a = {LPX_SIZE_UPTO(lpx_error_args, errc), NULL, msg, errc};
    return f->api->error_create(&a);
}

/* the metadata query XLA makes at registration: the FFI version these declarations follow */
static lpx_error *metadata(const lpx_frame *f) {
    lpx_metadata_ext *e = (lpx_metadata_ext *)f->extension_start;
    if (e->base.struct_size < LPX_SIZE_UPTO(lpx_metadata_ext, metadata) || !e->metadata ||
        e->metadata->struct_size < LPX_SIZE_UPTO(lpx_metadata, traits))
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi: XLA's FFI metadata structs are smaller than "
                    "version %d.%d's", LPX_API_MAJOR, LPX_API_MINOR);
    lpx_metadata *m = e->metadata;
    m->api_version = (lpx_version){LPX_SIZE_UPTO(lpx_version, minor_version), NULL, LPX_API_MAJOR,
                                   LPX_API_MINOR};
    m->traits = 0;
    if (m->struct_size >= LPX_SIZE_UPTO(lpx_metadata, state_type_id)) m->state_type_id = 0;
    return NULL;
}

static int lp_dtype_of(int x) {
    switch (x) {
    case LPX_PRED: return LP_BOOL;
    case LPX_S8: return LP_INT8;       case LPX_S16: return LP_INT16;
    case LPX_S32: return LP_INT32;     case LPX_S64: return LP_INT64;
    case LPX_U8: return LP_UINT8;      case LPX_U16: return LP_UINT16;
    case LPX_U32: return LP_UINT32;    case LPX_U64: return LP_UINT64;
    case LPX_F16: return LP_FLOAT16;   case LPX_BF16: return LP_BFLOAT16;
    case LPX_F32: return LP_FLOAT32;   case LPX_F64: return LP_FLOAT64;
    case LPX_C64: return LP_COMPLEX64; case LPX_C128: return LP_COMPLEX128;
    default: return -1;
    }
}

/* attribute `name` (an int64 scalar) into *v; 0 when absent or of another kind */
static int attr(const lpx_frame *f, const char *name, int64_t *v) {
    size_t n = strlen(name);
    for (int64_t i = 0; i < f->attrs.size; i++) {
        const lpx_bytes *b = f->attrs.names[i];
        if (b->len != n || memcmp(b->ptr, name, n) != 0) continue;
        const lpx_scalar *s = f->attrs.attrs[i];
        if (f->attrs.types[i] != LPX_ATTR_SCALAR || s->dtype != LPX_S64) return 0;
        memcpy(v, s->value, sizeof *v);
        return 1;
    }
    return 0;
}

static size_t elements(const lpx_buffer *b) {
    size_t n = 1;
    for (int64_t i = 0; i < b->rank; i++) n *= (size_t)b->dims[i];
    return n;
}

/* the calling thread's float32 copy for acc_dtype calls (grow-only, as the Python path's) */
static _Thread_local float *acc_buf;
static _Thread_local size_t acc_cap;
static float *acc_scratch(size_t n) {
    if (n > acc_cap) {
        float *p = realloc(acc_buf, (n ? n : 1) * sizeof(float));
        if (!p) return NULL;
        acc_buf = p;
        acc_cap = n;
    }
    return acc_buf;
}

static int errc_of(int rc) {
    switch (rc) {
    case LP_ERR_ARG: case LP_ERR_MISMATCH: return LPX_INVALID_ARGUMENT;
    case LP_ERR_NOMEM: return LPX_RESOURCE_EXHAUSTED;
    case LP_ERR_UNSUPPORTED: return LPX_UNIMPLEMENTED;
    case LP_ERR_TIMEOUT: return LPX_DEADLINE_EXCEEDED;
    case LP_ERR_PEER: return LPX_UNAVAILABLE;
    case LP_ERR_BUSY: return LPX_FAILED_PRECONDITION;
    default: return LPX_INTERNAL;
    }
}

static const char *status_name(int rc) {
    switch (rc) {
    case LP_ERR_MISMATCH: return "MismatchError";
    case LP_ERR_ARG: return "ValueError";
    default: return "LPError";
    }
}

static lpx_error *run(lpx_frame *f, lp_coll_t coll, lp_mem_t mem) {
    const char *what = lp_coll_name(coll);
    if (f->struct_size < LPX_SIZE_UPTO(lpx_frame, attrs))
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi: XLA's call frame is smaller than FFI "
                    "version %d.%d's", LPX_API_MAJOR, LPX_API_MINOR);
    if (f->extension_start && f->extension_start->type == LPX_EXT_METADATA) return metadata(f);
    if (f->stage != LPX_STAGE_EXECUTE)
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: called at XLA stage %d (only execute)",
                    what, f->stage);
    if (f->args.size < 1 || f->rets.size < 1 || f->args.types[0] != 1 || f->rets.types[0] != 1)
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: expected one input and one output buffer "
                    "(and the ordered effect's tokens)", what);
    const lpx_buffer *in = f->args.items[0];
    const lpx_buffer *out = f->rets.items[0];
    int64_t acc = 0, alg = LP_ALG_AUTO, chunk = 0, comm_v = 0, op = LP_SUM, root = 0;
    if (!attr(f, "comm", &comm_v) || !attr(f, "op", &op) || !attr(f, "root", &root) ||
        !attr(f, "alg", &alg) || !attr(f, "chunk", &chunk) || !attr(f, "acc", &acc))
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: the custom call lacks one of its int64 "
                    "attributes acc, alg, chunk, comm, op, root (lowered by another lpmpi?)", what);
    int64_t comp = LP_COMP_NONE;        /* optional: lowered only for compressed calls */
    attr(f, "comp", &comp);
    if (comp != LP_COMP_NONE && mem != LP_MEM_HOST)
        return fail(f, LPX_UNIMPLEMENTED, "lpmpi %s: compression takes host memory (device "
                    "arrays: not until the device path has codecs)", what);
    int dt = lp_dtype_of(in->dtype);
    if (dt < 0 || in->dtype != out->dtype)
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: XLA element type %d (output %d) is not "
                    "one lpmpi takes", what, in->dtype, out->dtype);
    MPI_Comm comm = (MPI_Comm)(intptr_t)comm_v;
    if (!lp_comm_known(comm))
        return fail(f, LPX_FAILED_PRECONDITION, "lpmpi %s: the communicator (handle %lld) was not "
                    "prepared by lpmpi.jax or has been freed since the function was traced",
                    what, (long long)comm_v);
    int P = 0;
    MPI_Comm_size(comm, &P);
    const lp_coll_traits_t *T = lp_traits(coll);
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    /* a side this rank neither reads nor writes (scatter's input off the root, gather's result
     * off the root) is one block, as mpi4jax shapes it: the block's size from the other side */
    const int reads = lp_on(T->input, rank, (int)root), gets = lp_on(T->result, rank, (int)root);
    size_t nin = elements(in), nout = elements(out);
    size_t count = reads ? (T->sblocks ? nin : nin / (size_t)P) : (T->rblocks ? nout : nout / (size_t)P);
    size_t want_in = reads ? lp_buf_bytes(coll, count, 1, P, 0) : count,
           want_out = gets ? lp_buf_bytes(coll, count, 1, P, 1) : count;
    if (nin != want_in || nout != want_out)
        return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: %zu input and %zu output elements do not "
                    "fit P = %d", what, nin, nout, P);
    /* buffers as the engine takes them: reduce's result only on the root; bcast's buffer is the
     * input on the root (only read there) and the output elsewhere */
    const void *sbuf = in->data;
    void *rbuf = out->data;
    if (!gets && T->input == LP_ON_ALL) rbuf = NULL;                    /* reduce, gather */
    if (!reads && T->result == LP_ON_ALL) sbuf = NULL;                  /* scatter */
    if (T->input == LP_ON_ROOT && T->result == LP_ON_NONROOT)               /* bcast: one buffer */
        sbuf = rbuf = rank == root ? (void *)in->data : out->data;
    if (mem == LP_MEM_CUDA) {
        lpx_stream_args s = {LPX_SIZE_UPTO(lpx_stream_args, stream), NULL, f->ctx, NULL};
        if (f->api->struct_size < LPX_SIZE_UPTO(lpx_api, stream_get))
            return fail(f, LPX_INTERNAL, "lpmpi %s: XLA's API has no stream query", what);
        lpx_error *e = f->api->stream_get(&s);
        if (e) return e;
        int rc = lp_device_stream_sync((uintptr_t)s.stream);
        if (rc != LP_OK)
            return fail(f, errc_of(rc), "lpmpi %s: %s: %s", what, status_name(rc), lp_errmsg());
    }
    void *acc_out = NULL;
    int edt = dt;
    if (acc) {
        if (mem != LP_MEM_HOST || (dt != LP_FLOAT16 && dt != LP_BFLOAT16))
            return fail(f, LPX_INVALID_ARGUMENT, "lpmpi %s: acc_dtype='float32' takes float16 or "
                        "bfloat16 host data", what);
        /* the engine runs in place on a float32 copy of the input and rounds the result once
         * into the 16-bit output (as lpmpi's Python calls do) */
        float *w = acc_scratch(nin);
        if (!w) return fail(f, LPX_RESOURCE_EXHAUSTED, "lpmpi %s: no memory for the float32 "
                            "copy of %zu elements", what, nin);
        lp_widen(w, in->data, nin, (lp_dtype_t)dt);
        acc_out = rbuf;
        sbuf = w;
        if (rbuf) rbuf = w;
        edt = LP_FLOAT32;
    }
    const lp_call_t k = {.coll = coll, .comm = comm, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                         .dt = (lp_dtype_t)edt, .op = (lp_op_t)op, .root = (int)root,
                         .alg = (int)alg, .chunk_bytes = (size_t)chunk, .mem = mem, .acc = acc_out,
                         .acc_dt = (lp_dtype_t)dt, .comp = (int)comp};
    int rc = lp_call_request(NULL, LP_REQ_BLOCKING, &k);
    if (rc != LP_OK)
        return fail(f, errc_of(rc), "lpmpi %s: %s: %s", what, status_name(rc), lp_errmsg());
    return NULL;
}

#define LPX_HANDLER(name, coll, mem) \
    static lpx_error *name(lpx_frame *f) { return run(f, coll, mem); }
#define LPX_HANDLERS(c) LPX_HANDLER(h_host_##c, c, LP_MEM_HOST) LPX_HANDLER(h_cuda_##c, c, LP_MEM_CUDA)
/* BEGIN GENERATED by tools/gen_colls.py from lpmpi/_colls.py: do not edit */
LPX_HANDLERS(LP_ALLREDUCE)
LPX_HANDLERS(LP_REDUCE)
LPX_HANDLERS(LP_BCAST)
LPX_HANDLERS(LP_ALLGATHER)
LPX_HANDLERS(LP_REDUCE_SCATTER)
LPX_HANDLERS(LP_ALLTOALL)
LPX_HANDLERS(LP_GATHER)
LPX_HANDLERS(LP_SCATTER)
LPX_HANDLERS(LP_SCAN)
/* the handlers of each collective, host and CUDA (NULL: none) */
static lpx_handler *const handlers[LP_NCOLLS][2] = {
    [LP_ALLREDUCE] = {h_host_LP_ALLREDUCE, h_cuda_LP_ALLREDUCE},
    [LP_REDUCE] = {h_host_LP_REDUCE, h_cuda_LP_REDUCE},
    [LP_BCAST] = {h_host_LP_BCAST, h_cuda_LP_BCAST},
    [LP_ALLGATHER] = {h_host_LP_ALLGATHER, h_cuda_LP_ALLGATHER},
    [LP_REDUCE_SCATTER] = {h_host_LP_REDUCE_SCATTER, h_cuda_LP_REDUCE_SCATTER},
    [LP_ALLTOALL] = {h_host_LP_ALLTOALL, h_cuda_LP_ALLTOALL},
    [LP_GATHER] = {h_host_LP_GATHER, h_cuda_LP_GATHER},
    [LP_SCATTER] = {h_host_LP_SCATTER, h_cuda_LP_SCATTER},
    [LP_SCAN] = {h_host_LP_SCAN, h_cuda_LP_SCAN},
};
/* END GENERATED */

/* every collective whose buffers' sizes follow from the call's shapes (none with per-rank counts) */
void *lp_xla_handler(lp_coll_t coll, lp_mem_t mem) {
    if ((unsigned)coll >= LP_NCOLLS || !handlers[coll][0]) return NULL;   /* none: per-rank counts */
    if (mem == LP_MEM_HOST) return (void *)handlers[coll][0];
    if (mem == LP_MEM_CUDA && lp_cuda_built()) return (void *)handlers[coll][1];
    return NULL;
}
