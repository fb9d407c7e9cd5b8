# Declarations of the C engine (src/include/lpmpi.h) for Cython.
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from mpi4py.libmpi cimport MPI_Comm

cdef extern from "lpmpi.h" nogil:
    enum:
        LP_OK
        LP_ERR_MPI
        LP_ERR_NOMEM
        LP_ERR_ARG
        LP_ERR_MISMATCH
        LP_ERR_CUDA
        LP_ERR_UNSUPPORTED
        LP_ERR_INTERNAL
        LP_ERR_BUSY
        LP_ERR_TIMEOUT
        LP_ERR_PEER
        LP_NDTYPES
        LP_NOPS
        LP_NCOLLS
        LP_NMEMS
        LP_ALLREDUCE
        LP_REDUCE
        LP_BCAST
        LP_ALLGATHER
        LP_REDUCE_SCATTER
        LP_MEM_HOST
        LP_MEM_CUDA
        LP_BFLOAT16
        LP_FLOAT16
        LP_FLOAT32
        LP_FLOAT64
        LP_COMP_NONE
        LP_SUM
        LP_AVG
        LP_PROD
        LP_MAX
        LP_MIN
        LP_LAND
        LP_LOR
        LP_LXOR
        LP_BAND
        LP_BOR
        LP_BXOR
        LP_ALG_AUTO
        LP_SRC_OVERRIDE
        LP_SRC_TABLE
        LP_SRC_MODEL
        LP_SRC_REQUESTED
        LP_CHUNK_MIN
        LP_CHUNK_MAX
        LP_WINDOW_DEFAULT
        LP_WINDOW_MAX
        LP_STAGING_DEFAULT
        LP_STAGING_MAX

    ctypedef int lp_dtype_t
    ctypedef int lp_op_t
    ctypedef int lp_coll_t
    ctypedef int lp_mem_t

    size_t lp_dtype_size(lp_dtype_t dt)
    const char *lp_dtype_name(lp_dtype_t dt)
    const char *lp_op_name(lp_op_t op)
    int lp_op_valid(lp_dtype_t dt, lp_op_t op)
    int lp_widen(float *dst, const void *src, size_t n, lp_dtype_t dt) nogil

    ctypedef struct lp_req_t:
        pass
    enum:
        LP_REQ_BLOCKING
        LP_REQ_NONBLOCKING
        LP_REQ_PERSISTENT
    int lp_request(lp_req_t **req, int kind, lp_coll_t coll, MPI_Comm comm, const void *sbuf,
                   void *rbuf, size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg,
                   size_t chunk_bytes, lp_mem_t mem, void *acc, lp_dtype_t acc_dt)
    ctypedef struct lp_call_t:
        lp_coll_t coll
        MPI_Comm comm
        const void *sbuf
        void *rbuf
        size_t count
        lp_dtype_t dt
        lp_op_t op
        int root
        int alg
        size_t chunk_bytes
        lp_mem_t mem
        void *acc
        lp_dtype_t acc_dt
        const size_t *scounts
        const size_t *sdispls
        const size_t *rcounts
        const size_t *rdispls
        int comp
    int lp_call_request(lp_req_t **req, int kind, const lp_call_t *call) nogil
    int lp_start(lp_req_t *req)
    int lp_test(lp_req_t *req, int *done)
    int lp_wait(lp_req_t *req)
    int lp_waitall(int n, lp_req_t *const *reqs)
    int lp_req_active(const lp_req_t *req)
    int lp_req_choice(const lp_req_t *r, int *alg, size_t *chunk, int *transport)
    int lp_req_free(lp_req_t *req)
    int lp_progress()
    long lp_outstanding()
    int lp_progress_thread(int on)
    int lp_progress_thread_running()
    int lp_native_forms()
    void lp_test_fault(long after)
    void lp_test_shm_named(int on)
    const char *lp_errmsg()
    const char *lp_errwhere()
    const char *lp_coll_name(lp_coll_t coll)
    int lp_coll_traits(lp_coll_t coll, int *has_op, int *has_root, int *input, int *result,
                       int *sblocks, int *rblocks, int *shm, int *vcounts)
    const char *lp_coll_mpi_name(lp_coll_t coll)
    const char *lp_coll_via(lp_coll_t coll)
    const char *lp_mem_name(lp_mem_t mem)

    int lp_comm_prepare(MPI_Comm comm, int *first_mismatch)
    int lp_comm_ready(MPI_Comm comm)
    int lp_comm_known(MPI_Comm comm)
    void *lp_xla_handler(lp_coll_t coll, lp_mem_t mem)
    long lp_comm_contexts()

    void lp_configure(size_t max_msg_bytes, int window, int check)
    long long lp_set_timeout_ns(long long ns)
    int lp_fr_configure(long size, const char *dir, double abort_timeout_s)
    int lp_fr_dump(const char *reason, const char *dir, char *path, size_t pathn) nogil
    int lp_trace_configure(const char *dir, unsigned long long max_records)
    int lp_trace_close(char *path, size_t n) nogil
    int lp_window_get()
    int lp_algo_count()
    const char *lp_algo_name(int alg)
    int lp_algo_coll(int alg)
    int lp_algo_chunked(int alg)
    int lp_algo_node_local(int alg)
    int lp_algo_wire(int alg)
    int lp_cz_algo(int coll)
    const char *lp_cz_name(int comp)
    const char *lp_cz_isa()
    size_t lp_cz_bytes(int comp, size_t n) nogil
    size_t lp_cz_chunk_of(int comp, size_t esize, int P, int nodes, size_t nbytes) nogil
    void lp_cz_encode(int comp, lp_dtype_t dt, const void *x, size_t n, void *wire) nogil
    void lp_cz_decode_acc(int comp, int acc64, const void *wire, size_t n, void *y, int acc) nogil
    int lp_cz_decode(int comp, lp_dtype_t dt, const void *wire, size_t n, void *y) nogil
    void lp_set_test_cz_reencode(int on)
    void lp_set_test_cz_wavefront(int on)
    int lp_algo_find(lp_coll_t coll, const char *name)
    void lp_model_set(double alpha, double beta, double gamma)
    void lp_model_get(double *alpha, double *beta, double *gamma)
    void lp_model_set_net(double alpha_net, double beta_net)
    void lp_model_get_net(double *alpha_net, double *beta_net)
    double lp_algo_predict(int alg, int P, int nodes, double nbytes, double chunk_bytes)
    size_t lp_best_chunk(int alg, int P, int nodes, size_t nbytes)
    double lp_optimal_chunk(int alg, int P, int nodes, double nbytes)
    int lp_net_traffic(int alg, int P, const int *node, int root, double nbytes, double chunk_bytes,
                       double *bytes, double *msgs)
    void lp_block_layout(int P, int nodes, int *node)
    void lp_table_clear()
    void lp_table_set_hash(uint64_t hash)
    long lp_table_mismatches()
    int lp_comm_nodes(MPI_Comm comm, int *nnodes, int *node)
    int lp_comm_transport(MPI_Comm comm, int *why)
    const char *lp_shm_failure()
    int lp_comm_ring_transport(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int requested, int *which)
    void lp_node_transport_sizes(size_t *out)
    void lp_set_node_transport(int mode)
    long lp_set_shm_spin(long ns)
    unsigned long long lp_node_bytes(int reset)
    int lp_table_add(lp_coll_t coll, lp_mem_t mem, int P, double lo, double hi, int alg, size_t chunk,
                     int staging, int acc, int transport, int nodes, double learned)
    void lp_set_override(lp_coll_t coll, int alg, size_t chunk)
    int lp_set_transport_override(int tp)
    ctypedef struct lp_choice_t:
        int alg
        size_t chunk
        int staging
        int source
        int transport
        int transport_source
        int tables
    int lp_choose(MPI_Comm comm, lp_coll_t coll, size_t nbytes, lp_mem_t mem, int acc, int alg,
                  size_t chunk_bytes, lp_choice_t *out)
    ctypedef struct lp_key_t:
        lp_coll_t coll
        int P
        size_t nbytes
        lp_mem_t mem
        int acc
        int nodes
    ctypedef struct lp_decision_t:
        lp_choice_t choice
        lp_key_t key
        int ring_transport
    lp_key_t lp_decision_key(lp_coll_t coll, int P, int nodes, size_t count, lp_dtype_t dt,
                             lp_dtype_t acc_dt, lp_mem_t mem)
    int lp_request_decision(lp_decision_t *out, lp_coll_t coll, MPI_Comm comm, const void *sbuf,
                            void *rbuf, size_t count, lp_dtype_t dt, lp_op_t op, int root, int alg,
                            size_t chunk_bytes, lp_mem_t mem, void *acc, lp_dtype_t acc_dt)
    int lp_call_decision(lp_decision_t *out, const lp_call_t *call)
    int lp_check_local_error(MPI_Comm comm)

    int lp_autotune_set(int on)
    ctypedef struct lp_at_cand_t:
        int alg
        size_t chunk
        int transport
    ctypedef struct lp_at_info_t:
        int coll, cls, esize, mem, acc, P, nodes
        double lo, hi, nbytes
        int state, ncand, native, choice
        lp_at_cand_t cand[12]
        int alive[12]
        double median[12]
        long samples[12]
        double seconds, last_seconds
        long calls, explore_calls, settle_calls, settles, drifts_slower, drifts_faster
        long timed_calls
        double explore_seconds
        unsigned long gen
        int comm_live
    int lp_autotune_report(lp_at_info_t *out, int max)
    double lp_tune_median(const double *x, size_t n)
    int lp_tune_pruned(double t, double best, double factor)
    int lp_tune_decide(const double *t, int n, int prefer, double tie)
    int lp_comm_autotune(MPI_Comm comm, lp_coll_t coll, size_t nbytes, int esize, lp_mem_t mem, int acc,
                         lp_at_info_t *out, int *found)

    int lp_cuda_built()
    void lp_configure_device(int emulate, int cuda_aware, int staging_buffers)
    int lp_device_emulated()
    int lp_cuda_aware()
    int lp_staging_buffers()
    int lp_device_count(int *n)
    int lp_device_pointer(const void *p, int *device)
    int lp_device_stream_sync(uintptr_t stream)
    void lp_device_stats(long *not_ready, long *ops)
