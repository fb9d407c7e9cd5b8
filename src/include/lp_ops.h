/* lp_ops.h: the contract's reductions as expressions, one list per dtype family, expanded by
 * the host kernels (reduce.c) and the device kernels (cuda/kernels.cu) alike, so that both
 * compute exactly the same thing.  See reduce.c's header comment for the rules (wrapping
 * integers, logical 0/1, NaN-propagating MAX/MIN, half types through float32). */
#ifndef LP_OPS_H
#define LP_OPS_H

#include "lp_half.h"

#define LP_ID(v) (v)

/* ---- op lists: X(nm, T, OP, expression of x and y) ---- */

#define OPS_ORDER(X, nm, T) X(nm, T, MAX, x > y ? x : y) X(nm, T, MIN, x < y ? x : y)
#define OPS_BITS(X, nm, T)                                                                 \
    X(nm, T, LAND, (x != 0) & (y != 0)) X(nm, T, LOR, (x != 0) | (y != 0))                 \
    X(nm, T, LXOR, (x != 0) ^ (y != 0)) X(nm, T, BAND, x & y) X(nm, T, BOR, x | y)         \
    X(nm, T, BXOR, x ^ y)
#define OPS_BOOL(X, nm, T) OPS_ORDER(X, nm, T) OPS_BITS(X, nm, T)
/* W: the unsigned type integer SUM/PROD wrap through */
#define OPS_INT(X, nm, T, W)                                                               \
    X(nm, T, SUM, (W)x + (W)y) X(nm, T, PROD, (W)x * (W)y) OPS_BOOL(X, nm, T)
/* CI: element -> computing type, CO: back (rounding) */
#define OPS_REAL(X, nm, T, CI, CO)                                                         \
    X(nm, T, SUM, CO(CI(x) + CI(y))) X(nm, T, PROD, CO(CI(x) * CI(y)))                     \
    X(nm, T, MAX, (CI(x) > CI(y) || CI(x) != CI(x)) ? x : y)                               \
    X(nm, T, MIN, (CI(x) < CI(y) || CI(x) != CI(x)) ? x : y)

/* ---- dtype families: X(ENUM, nm, T, ...) ---- */

#define LP_INTS(X)                                                                         \
    X(INT8, i8, int8_t, unsigned) X(INT16, i16, int16_t, unsigned)                         \
    X(INT32, i32, int32_t, unsigned) X(INT64, i64, int64_t, uint64_t)                      \
    X(UINT8, u8, uint8_t, unsigned) X(UINT16, u16, uint16_t, unsigned)                     \
    X(UINT32, u32, uint32_t, unsigned) X(UINT64, u64, uint64_t, uint64_t)
#define LP_REALS(X)                                                                        \
    X(FLOAT16, f16, uint16_t, f16_to_f, f_to_f16)                                          \
    X(BFLOAT16, bf16, uint16_t, bf16_to_f, f_to_bf16)                                      \
    X(FLOAT32, f32, float, LP_ID, LP_ID) X(FLOAT64, f64, double, LP_ID, LP_ID)
/* complex: interleaved pairs of F; re: the real family of F */
#define LP_CPLX(X) X(COMPLEX64, c64, float, f32) X(COMPLEX128, c128, double, f64)

#endif
