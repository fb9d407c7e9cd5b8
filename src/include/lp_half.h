/* lp_half.h: float16 / bfloat16 <-> float32 by bits, shared by the host kernels (reduce.c) and
 * the device kernels (cuda/kernels.cu), so both give the same bits.  See reduce.c's header
 * comment for the rounding and NaN rules.  Under nvcc the functions are __host__ __device__. */
#ifndef LP_HALF_H
#define LP_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define LP_HD static __host__ __device__ __forceinline__
#else
#define LP_HD static inline
#endif

LP_HD float lp_u2f(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

LP_HD uint32_t lp_f2u(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

LP_HD float bf16_to_f(uint16_t h) { return lp_u2f((uint32_t)h << 16); }

LP_HD uint16_t f_to_bf16(float f) {
    uint32_t u = lp_f2u(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7FC0u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* float16 by bits, without branches: the FP step of the subnormal case is merged with a mask
 * rather than a select, since gcc (-ftrapping-math) will not if-convert a select over an FP
 * operation and the loop would stay scalar.  No step makes a float denormal, so FTZ/DAZ set
 * by some other library in the process do not change the results. */
LP_HD float f16_to_f(uint16_t h) {
    uint32_t em = (uint32_t)(h & 0x7FFFu) << 13, e = em & 0x0F800000u, sub;
    float fs = (float)(h & 0x3FFu) * 0x1p-24f;          /* zero or subnormal: exact */
    sub = lp_f2u(fs);
    uint32_t is_sub = (uint32_t)0 - (uint32_t)(e == 0);
    uint32_t u = e == 0x0F800000u ? em + 0x70000000u    /* inf/NaN: exponent 31 -> 255 */
                                  : em + 0x38000000u;   /* normal: rebias 15 -> 127 */
    u = ((u & ~is_sub) | (sub & is_sub)) | (uint32_t)(h & 0x8000u) << 16;
    return lp_u2f(u);
}

LP_HD uint16_t f_to_f16(float f) {
    uint32_t u = lp_f2u(f), a, sub;
    a = u & 0x7FFFFFFFu;
    float m = lp_u2f(a);                                /* |f| + 0.5 rounds |f| to 2^-24 units */
    m += 0.5f;
    sub = lp_f2u(m);
    sub -= 0x3F000000u;                                 /* subnormal result (0x400: normal) */
    uint32_t is_sub = (uint32_t)0 - (uint32_t)(a < 0x38800000u);     /* |f| < 2^-14 */
    uint32_t r = (a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13; /* normal, may carry to inf */
    r = a >= 0x47800000u ? 0x7C00u : r;                 /* |f| >= 2^16: inf */
    r = a > 0x7F800000u ? 0x7E00u | ((a >> 13) & 0x3FFu) : r; /* NaN: quiet, payload kept */
    r = (r & ~is_sub) | (sub & is_sub);
    return (uint16_t)(r | ((u >> 16) & 0x8000u));
}

#endif
