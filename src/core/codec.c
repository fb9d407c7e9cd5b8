/* codec.c: the wire formats of compressed collectives (issue 49: compression=), encode,
 * decode and decode-and-accumulate.
 *
 * Formats (a run of n elements, independent of any other run: a segment of a collective):
 *   bf16  n 2-byte bfloat16 values, rounded to nearest even from float32 (float64 data: rounded
 *         to float32 by rounding to odd first, so that the one rounding to bfloat16 is exact);
 *         NaN stays NaN (quiet), overflow rounds to Inf.
 *   int8  blocks of CZ_BLOCK = 256 elements (the last one shorter): a float32 scale s = block
 *         max |x| / 127, then one int8 q = round(x / s) in [-127, 127] per element (nearest,
 *         ties to even; x / s computed as x * (1 / s) in float32); value q * s.  A block of zeros
 *         has s = 0 (exact zeros); a block holding a NaN or Inf has s = NaN and q = 0 (every
 *         value NaN).
 *   int4  the same with block max / 7 and q in [-7, 7], two per byte (the even element in the
 *         low nibble, two's complement).
 *   Bytes: bf16 2n; int8 n + 4 ceil(n / 256); int4 sum over blocks of ceil(m / 2) + 4.
 * Error per element of one encoding: bf16 <= 2^-8 |x|; int8 <= s / 2 = blockmax / 254 (int4:
 * blockmax / 14), plus float32's own rounding of x * (1 / s) (2^-22 relative).
 *
 * Data: float32 directly; float16 and bfloat16 widened to float32 first (exact); float64 with
 * float64 scales arithmetic (the scale itself a float32 on the wire).  Accumulation (decode-
 * and-accumulate): float32 (float64 for float64 data), element by element: y = y + q * s, a
 * multiply then an add (no FMA: the pragmas below), the same bits on every CPU.
 *
 * Run-time choice of the instruction set (codec_impl.h, compiled three times): AVX-512
 * (F, BW, VL, DQ), AVX2, or the baseline (SSE2), by __builtin_cpu_supports once;
 * LPMPI_CODEC_ISA=scalar|avx2|avx512 forces one (tests compare them bit for bit). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
#include "internal.h"
#include "lp_half.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    void (*enc_q)(const float *x, size_t m, uint8_t *w, int bits);
    void (*dec_q)(const uint8_t *w, size_t m, float *y, int bits, int acc);
    void (*enc_bf16)(const float *x, size_t n, uint16_t *w);
    void (*dec_bf16)(const uint16_t *w, size_t n, float *y, int acc);
} lp_cz_kernels_t;

enum { CZ_BLOCK = 256 };

#define CZ_SFX _base
#define CZ_TGT
#include "codec_impl.h"
#undef CZ_SFX
#undef CZ_TGT
#if defined(__x86_64__) && defined(__GNUC__)
#define CZ_SFX _avx2
#define CZ_TGT __attribute__((target("avx2")))
#include "codec_impl.h"
#undef CZ_SFX
#undef CZ_TGT
#define CZ_SFX _avx512
#define CZ_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#include "codec_impl.h"
#undef CZ_SFX
#undef CZ_TGT
#endif

static const lp_cz_kernels_t *K;
static const char *isa_name = "scalar";

static const lp_cz_kernels_t *kernels(void) {
    if (K) return K;
    const lp_cz_kernels_t *k = &kernels_base;
    const char *isa = "scalar", *force = getenv("LPMPI_CODEC_ISA");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    int has2 = __builtin_cpu_supports("avx2");
    if (force && strcmp(force, "scalar") == 0) has512 = has2 = 0;
    else if (force && strcmp(force, "avx2") == 0) has512 = 0;
    if (has512) { k = &kernels_avx512; isa = "avx512"; }
    else if (has2) { k = &kernels_avx2; isa = "avx2"; }
#else
    (void)force;
#endif
    isa_name = isa;
    K = k;
    return k;
}

const char *lp_cz_isa(void) {
    kernels();
    return isa_name;
}

const char *lp_cz_name(int comp) {
    static const char *const n[] = {"none", "bf16", "int8", "int4"};
    return comp >= 0 && comp < LP_NCOMPS ? n[comp] : "?";
}

size_t lp_cz_bytes(int comp, size_t n) {
    size_t nb = (n + CZ_BLOCK - 1) / CZ_BLOCK, full = n / CZ_BLOCK, tail = n % CZ_BLOCK;
    switch (comp) {
    case LP_COMP_BF16: return 2 * n;
    case LP_COMP_INT8: return n + 4 * nb;
    case LP_COMP_INT4: return full * (4 + CZ_BLOCK / 2) + (tail ? 4 + (tail + 1) / 2 : 0);
    default: return 0;
    }
}
static size_t block_bytes(int comp, size_t m) { return comp == LP_COMP_INT8 ? 4 + m : 4 + (m + 1) / 2; }

/* float32 views of n elements of x (dtype dt) in chunks of CZ_BLOCK through tmp */
static const float *as_f32(lp_dtype_t dt, const void *x, size_t i, size_t m, float *tmp) {
    if (dt == LP_FLOAT32) return (const float *)x + i;
    if (dt == LP_FLOAT16)
        for (size_t j = 0; j < m; j++) tmp[j] = f16_to_f(((const uint16_t *)x)[i + j]);
    else
        for (size_t j = 0; j < m; j++) tmp[j] = bf16_to_f(((const uint16_t *)x)[i + j]);
    return tmp;
}

/* float64 to float32 rounded to odd (then one more rounding, to bfloat16, is exact) */
static float f64_to_f32_odd(double d) {
    float f = (float)d;                 /* nearest */
    if (d != d || (double)f == d || f - f != 0.0f) return f;
    uint32_t u = lp_f2u(f);
    if (((double)f > d) == (f > 0.0f)) u -= 1;   /* rounded away from zero: back toward it */
    return lp_u2f(u | 1u);               /* sticky */
}

/* float64 blocks: the scale a float32, the arithmetic float64 */
static void enc_q_block_f64(const double *x, size_t m, uint8_t *w, int bits) {
    double amax = 0;
    int bad = 0;
    for (size_t i = 0; i < m; i++) {
        double a = x[i] < 0 ? -x[i] : x[i];
        bad |= !(a <= 1.7976931348623157e308);   /* NaN or Inf */
        amax = a > amax ? a : amax;
    }
    float scale = bad ? lp_u2f(0x7FC00000u) : (float)(amax / (bits == 8 ? 127.0 : 7.0));
    double inv = bad || scale == 0.0f ? 0.0 : 1.0 / (double)scale;
    if (scale - scale != 0.0f) inv = 0.0;      /* (a scale past float32's range: NaN block) */
    memcpy(w, &scale, 4);
    w += 4;
    if (inv == 0.0) {                            /* zeros, or a NaN block: zero values */
        memset(w, 0, bits == 8 ? m : (m + 1) / 2);
        return;
    }
    const double lim = bits == 8 ? 127.0 : 7.0, M = 6755399441055744.0;   /* 1.5 * 2^52 */
    if (bits == 8) {
        for (size_t i = 0; i < m; i++) {
            double v = (x[i] * inv + M) - M;
            v = v > lim ? lim : v < -lim ? -lim : v;
            ((int8_t *)w)[i] = (int8_t)(int)v;
        }
    } else {
        memset(w, 0, (m + 1) / 2);
        for (size_t i = 0; i < m; i++) {
            double v = (x[i] * inv + M) - M;
            v = v > lim ? lim : v < -lim ? -lim : v;
            w[i / 2] |= (uint8_t)(((int)v & 0xF) << ((i & 1) ? 4 : 0));
        }
    }
}

static void dec_q_block_f64(const uint8_t *w, size_t m, double *y, int bits, int acc) {
    float s;
    memcpy(&s, w, 4);
    w += 4;
    for (size_t i = 0; i < m; i++) {
        int v = bits == 8 ? ((const int8_t *)w)[i]
                          : (int)(int8_t)(uint8_t)(w[i / 2] << ((i & 1) ? 0 : 4)) >> 4;
        double d = (double)v * (double)s;
        y[i] = acc ? y[i] + d : d;
    }
}

void lp_cz_encode(int comp, lp_dtype_t dt, const void *x, size_t n, void *wire) {
    const lp_cz_kernels_t *k = kernels();
    uint8_t *w = wire;
    float tmp[CZ_BLOCK];
    if (comp == LP_COMP_BF16) {
        uint16_t *o = wire;
        if (dt == LP_FLOAT64)
            for (size_t i = 0; i < n; i++) o[i] = f_to_bf16(f64_to_f32_odd(((const double *)x)[i]));
        else if (dt == LP_FLOAT32) k->enc_bf16(x, n, o);
        else
            for (size_t i = 0; i < n; i += CZ_BLOCK) {
                size_t m = n - i < CZ_BLOCK ? n - i : CZ_BLOCK;
                k->enc_bf16(as_f32(dt, x, i, m, tmp), m, o + i);
            }
        return;
    }
    const int bits = comp == LP_COMP_INT8 ? 8 : 4;
    for (size_t i = 0; i < n; i += CZ_BLOCK) {
        size_t m = n - i < CZ_BLOCK ? n - i : CZ_BLOCK;
        if (dt == LP_FLOAT64) enc_q_block_f64((const double *)x + i, m, w, bits);
        else k->enc_q(as_f32(dt, x, i, m, tmp), m, w, bits);
        w += block_bytes(comp, m);
    }
}

/* decode n elements into y: float32 (acc64 0) or float64 (acc64 1), y = value or y += value */
void lp_cz_decode_acc(int comp, int acc64, const void *wire, size_t n, void *y, int acc) {
    const lp_cz_kernels_t *k = kernels();
    const uint8_t *w = wire;
    if (comp == LP_COMP_BF16) {
        if (!acc64) {
            k->dec_bf16(wire, n, y, acc);
            return;
        }
        double *o = y;
        for (size_t i = 0; i < n; i++) {
            double d = (double)bf16_to_f(((const uint16_t *)wire)[i]);
            o[i] = acc ? o[i] + d : d;
        }
        return;
    }
    const int bits = comp == LP_COMP_INT8 ? 8 : 4;
    for (size_t i = 0; i < n; i += CZ_BLOCK) {
        size_t m = n - i < CZ_BLOCK ? n - i : CZ_BLOCK;
        if (acc64) dec_q_block_f64(w, m, (double *)y + i, bits, acc);
        else k->dec_q(w, m, (float *)y + i, bits, acc);
        w += block_bytes(comp, m);
    }
}

/* y (dtype dt) = the decoded values of n elements (16-bit types: rounded from float32 once);
 * stream: float32 results written with streaming stores (a result of the call larger than the
 * caches: lp_stream_min; the same values, only the stores differ) */
int lp_cz_decode_to(int comp, lp_dtype_t dt, const void *wire, size_t n, void *y, int stream) {
    if (dt == LP_FLOAT64 || (dt == LP_FLOAT32 && !stream)) {
        lp_cz_decode_acc(comp, dt == LP_FLOAT64, wire, n, y, 0);
        return LP_OK;
    }
    /* block by block through a float32 buffer in L1, then rounded to the 16-bit type, or out
     * with streaming stores (not first reading the lines they write) */
    float tmp[CZ_BLOCK] __attribute__((aligned(64)));
    const uint8_t *w = wire;
    for (size_t i = 0; i < n; i += CZ_BLOCK) {
        size_t m = n - i < CZ_BLOCK ? n - i : CZ_BLOCK;
        lp_cz_decode_acc(comp, 0, w, m, tmp, 0);
        if (dt == LP_FLOAT32) lp_copy_out((char *)y + i * 4, (const char *)tmp, m * 4, 1);
        else {
            int rc = lp_narrow((char *)y + i * 2, tmp, m, dt);
            if (rc != LP_OK) return rc;
        }
        w += comp == LP_COMP_BF16 ? 2 * m : block_bytes(comp, m);
    }
    lp_fence_nt(dt == LP_FLOAT32);
    return LP_OK;
}

/* the same, streaming where the result is at least lp_stream_min bytes */
int lp_cz_decode(int comp, lp_dtype_t dt, const void *wire, size_t n, void *y) {
    return lp_cz_decode_to(comp, dt, wire, n, y, n * lp_dtype_size(dt) >= lp_stream_min);
}

/* acc (float32, or float64 for float64 data) = x (dtype dt) exactly, or acc += x */
void lp_cz_widen(lp_dtype_t dt, const void *x, size_t n, void *acc, int add) {
    if (dt == LP_FLOAT64) {
        double *o = acc;
        const double *s = x;
        if (add)
            for (size_t i = 0; i < n; i++) o[i] = o[i] + s[i];
        else memcpy(o, s, n * 8);
        return;
    }
    float tmp[CZ_BLOCK], *o = acc;
    for (size_t i = 0; i < n; i += CZ_BLOCK) {
        size_t m = n - i < CZ_BLOCK ? n - i : CZ_BLOCK;
        const float *f = as_f32(dt, x, i, m, tmp);
        if (add)
            for (size_t j = 0; j < m; j++) o[i + j] = o[i + j] + f[j];
        else memcpy(o + i, f, m * 4);
    }
}

/* y (dtype dt) = acc (float32 / float64), 16-bit types rounded once; AVG: acc / P first */
int lp_cz_narrow(lp_dtype_t dt, const void *acc, size_t n, void *y) {
    if (dt == LP_FLOAT64 || dt == LP_FLOAT32) {
        if (y != acc) memcpy(y, acc, n * lp_dtype_size(dt));
        return LP_OK;
    }
    return lp_narrow(y, acc, n, dt);
}
