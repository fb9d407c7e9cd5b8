/* kernels.cu: the reduction and AVG-scaling kernels on the device, for every (dtype, op)
 * pairing of the contract, float16 and bfloat16 included.
 *
 * The element-wise expressions are the host kernels' own (lp_ops.h: the same X-macro lists
 * expanded here with a device loop), so a device reduction computes exactly what reduce.c
 * computes: integers wrap through unsigned, logical ops give 0/1, floating MAX/MIN propagate
 * NaN, half types go through float32 and round to nearest even by bits (lp_half.h).  Built
 * with --fmad=false (no fused multiply-add, as on the host: complex PROD keeps its two
 * roundings) and IEEE division (AVG).
 *
 * One grid-stride kernel per pairing; a launcher per kernel is entered in a table
 * [dtype][op] filled at first use (AVG: the SUM kernel; complex SUM: the real SUM over 2n). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "lp_ops.h"
#include "lpmpi.h"

typedef void (*lp_launch_fn)(void *o, const void *a, const void *b, size_t n, cudaStream_t s);

static inline unsigned lp_grid(size_t n) {
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 4096 ? (g ? g : 1) : 4096);
}

#define LP_DKERNEL(nm, T, OP, EXPR)                                                         \
    __global__ void dk_##nm##_##OP(T *o, const T *a, const T *b, size_t n) {                \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;               \
             i += (size_t)gridDim.x * blockDim.x) {                                         \
            T x = a[i], y = b[i];                                                           \
            o[i] = (T)(EXPR);                                                               \
        }                                                                                   \
    }                                                                                       \
    static void dl_##nm##_##OP(void *o, const void *a, const void *b, size_t n, cudaStream_t s) { \
        dk_##nm##_##OP<<<lp_grid(n), 256, 0, s>>>((T *)o, (const T *)a, (const T *)b, n);   \
    }

#define DEF_INT(E, nm, T, W) OPS_INT(LP_DKERNEL, nm, T, W)
#define DEF_REAL(E, nm, T, CI, CO) OPS_REAL(LP_DKERNEL, nm, T, CI, CO)
#define DEF_CPLX(E, nm, F, re)                                                              \
    static void dl_##nm##_SUM(void *o, const void *a, const void *b, size_t n, cudaStream_t s) { \
        dl_##re##_SUM(o, a, b, 2 * n, s);                                                   \
    }                                                                                       \
    __global__ void dk_##nm##_PROD(F *o, const F *a, const F *b, size_t n) {                \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;               \
             i += (size_t)gridDim.x * blockDim.x) {                                         \
            F ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];           \
            o[2 * i] = ar * br - ai * bi;                                                   \
            o[2 * i + 1] = ar * bi + ai * br;                                               \
        }                                                                                   \
    }                                                                                       \
    static void dl_##nm##_PROD(void *o, const void *a, const void *b, size_t n, cudaStream_t s) { \
        dk_##nm##_PROD<<<lp_grid(n), 256, 0, s>>>((F *)o, (const F *)a, (const F *)b, n);   \
    }

OPS_BOOL(LP_DKERNEL, b8, uint8_t)
LP_INTS(DEF_INT)
LP_REALS(DEF_REAL)
LP_CPLX(DEF_CPLX)

/* ---- the table, filled once (C++ has no designated array initializers) ---- */
static lp_launch_fn table[LP_NDTYPES][LP_NOPS];
static int table_ready;

#define SET(nm, T, OP, EXPR) table[d][LP_##OP] = dl_##nm##_##OP;
#define ROW_INT(E, nm, T, W) { const int d = LP_##E; OPS_INT(SET, nm, T, W) }
#define ROW_REAL(E, nm, T, CI, CO) { const int d = LP_##E; OPS_REAL(SET, nm, T, CI, CO) table[d][LP_AVG] = dl_##nm##_SUM; }
#define ROW_CPLX(E, nm, F, re)                                                              \
    { const int d = LP_##E; table[d][LP_SUM] = table[d][LP_AVG] = dl_##nm##_SUM; table[d][LP_PROD] = dl_##nm##_PROD; }

static void table_init(void) {
    if (table_ready) return;
    { const int d = LP_BOOL; OPS_BOOL(SET, b8, uint8_t) }
    LP_INTS(ROW_INT)
    LP_REALS(ROW_REAL)
    LP_CPLX(ROW_CPLX)
    table_ready = 1;
}

/* ---- AVG: buf[i] /= d in the element type ---- */
#define DEF_SCALE(nm, T, F, CI, CO)                                                         \
    __global__ void ds_##nm(T *p, size_t n, F d) {                                          \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;               \
             i += (size_t)gridDim.x * blockDim.x)                                           \
            p[i] = CO(CI(p[i]) / d);                                                        \
    }
DEF_SCALE(f16, uint16_t, float, f16_to_f, f_to_f16)
DEF_SCALE(bf16, uint16_t, float, bf16_to_f, f_to_bf16)
DEF_SCALE(f32, float, float, LP_ID, LP_ID)
DEF_SCALE(f64, double, double, LP_ID, LP_ID)

extern "C" {

/* launch out = a op b on stream s; 0 when the pairing has no kernel */
int lp_cuda_launch_reduce(void *out, const void *a, const void *b, size_t n, lp_dtype_t dt, lp_op_t op,
                          cudaStream_t s) {
    table_init();
    if ((unsigned)dt >= LP_NDTYPES || (unsigned)op >= LP_NOPS || !table[dt][op]) return 0;
    if (n) table[dt][op](out, a, b, n, s);
    return 1;
}

void lp_cuda_launch_scale(void *buf, size_t n, lp_dtype_t dt, double d, cudaStream_t s) {
    if (!n) return;
    switch (dt) {
    case LP_FLOAT16: ds_f16<<<lp_grid(n), 256, 0, s>>>((uint16_t *)buf, n, (float)d); break;
    case LP_BFLOAT16: ds_bf16<<<lp_grid(n), 256, 0, s>>>((uint16_t *)buf, n, (float)d); break;
    case LP_FLOAT32: ds_f32<<<lp_grid(n), 256, 0, s>>>((float *)buf, n, (float)d); break;
    case LP_FLOAT64: ds_f64<<<lp_grid(n), 256, 0, s>>>((double *)buf, n, d); break;
    case LP_COMPLEX64: ds_f32<<<lp_grid(2 * n), 256, 0, s>>>((float *)buf, 2 * n, (float)d); break;
    case LP_COMPLEX128: ds_f64<<<lp_grid(2 * n), 256, 0, s>>>((double *)buf, 2 * n, d); break;
    default: break;
    }
}

}  /* extern "C" */
