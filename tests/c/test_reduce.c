/* test_reduce.c: standalone test of src/core/reduce.c (element types, reduction kernels, lp_scale).
 *
 * Build and run:
 *   gcc -O2 -Wall -Wextra -Werror -I/opt/venv/include -Isrc src/core/reduce.c tests/c/test_reduce.c \
 *       -o /tmp/test_reduce -lm && /tmp/test_reduce
 *
 * Every (dtype, op) pairing: the validity table against the contract's rules, then for valid
 * pairings the kernel on several lengths, with out separate, out == a and out == b, on aligned and
 * one-element-offset buffers, against a scalar reference written independently here (a switch
 * per element; float16/bfloat16 decoded with ldexp and rounded with rint in double).  Inputs are
 * pseudo-random and deterministic, mixed with edge values.  Prints each failure (dtype, op,
 * index, got, expected) and ends with "N passed, M failed"; exits non-zero on any failure.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpmpi.h"

static long npass, nfail;

/* ---- deterministic generator ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; } /* [0, 1) */

/* ---- dtype classes ---- */

typedef enum { C_BOOL, C_SINT, C_UINT, C_F16, C_BF16, C_F32, C_F64, C_C64, C_C128 } cls_t;

static cls_t cls(int dt) {
    if (dt == LP_BOOL) return C_BOOL;
    if (dt <= LP_INT64) return C_SINT;
    if (dt <= LP_UINT64) return C_UINT;
    static const cls_t f[] = {C_F16, C_BF16, C_F32, C_F64, C_C64, C_C128};
    return f[dt - LP_FLOAT16];
}
static size_t esize(int dt) {
    static const size_t s[LP_NDTYPES] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
    return s[dt];
}
static int is_int(int dt) { return cls(dt) == C_SINT || cls(dt) == C_UINT; }
static int is_real(int dt) { return cls(dt) >= C_F16 && cls(dt) <= C_F64; }
static int is_cplx(int dt) { return cls(dt) == C_C64 || cls(dt) == C_C128; }

/* the contract's pairing rules, written out independently of reduce.c */
static int expect_valid(int dt, int op) {
    int b = dt == LP_BOOL;
    switch (op) {
    case LP_SUM:
    case LP_PROD: return is_int(dt) || is_real(dt) || is_cplx(dt);
    case LP_MAX:
    case LP_MIN: return b || is_int(dt) || is_real(dt);
    case LP_AVG: return is_real(dt) || is_cplx(dt);
    default: return b || is_int(dt); /* LAND LOR LXOR BAND BOR BXOR */
    }
}

/* ---- reference 16-bit float formats: p mantissa bits, bias, exponent field width ---- */

typedef struct { int p, bias, ebits; } fmt_t;
static const fmt_t F16 = {10, 15, 5}, BF16 = {7, 127, 8};

static double h_decode(fmt_t f, uint16_t h) {
    int e = (h >> f.p) & ((1 << f.ebits) - 1);
    int m = h & ((1 << f.p) - 1);
    double v;
    if (e == (1 << f.ebits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, 1 - f.bias - f.p);
    else v = ldexp(m + (1 << f.p), e - f.bias - f.p);
    return (h >> 15) ? -v : v;
}

static int h_isnan(fmt_t f, uint16_t h) {
    uint16_t inf = (uint16_t)(((1 << f.ebits) - 1) << f.p);
    return (h & 0x7FFF) > inf;
}

/* round a double to the format, nearest even (exact for the ops tested: see reduce.c) */
static uint16_t h_encode(fmt_t f, double v) {
    uint16_t inf = (uint16_t)(((1 << f.ebits) - 1) << f.p);
    if (isnan(v)) return (uint16_t)(inf | (1 << (f.p - 1)));
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    v = fabs(v);
    if (isinf(v)) return sign | inf;
    int e, emin = 1 - f.bias;
    frexp(v, &e);
    int E = e - 1 < emin ? emin : e - 1;
    double q = rint(ldexp(v, f.p - E)); /* mantissa in units of the ulp at E */
    long bits = q < ldexp(1, f.p) ? (long)q : ((long)(E + f.bias) << f.p) + (long)q - (1L << f.p);
    if (bits >= inf) return sign | inf;
    return (uint16_t)(sign | bits);
}

/* ---- element access ---- */

static int width(int dt) { return (int)esize(dt) * 8; }
static uint64_t get_u(const void *buf, int dt, size_t i) { /* zero-extended bits */
    const unsigned char *p = (const unsigned char *)buf + i * esize(dt);
    switch (esize(dt)) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}
static int64_t sext(uint64_t u, int w) {
    if (w == 64) return (int64_t)u;
    uint64_t sb = 1ull << (w - 1);
    return (int64_t)((u ^ sb) - sb);
}
static void put_u(void *buf, int dt, size_t i, uint64_t v) {
    unsigned char *p = (unsigned char *)buf + i * esize(dt);
    switch (esize(dt)) {
    case 1: *p = (unsigned char)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8);
    }
}
static float get_f(const void *buf, size_t i) {
    float v;
    memcpy(&v, (const char *)buf + 4 * i, 4);
    return v;
}
static double get_d(const void *buf, size_t i) {
    double v;
    memcpy(&v, (const char *)buf + 8 * i, 8);
    return v;
}
static void put_f(void *buf, size_t i, float v) { memcpy((char *)buf + 4 * i, &v, 4); }
static void put_d(void *buf, size_t i, double v) { memcpy((char *)buf + 8 * i, &v, 8); }

/* ---- inputs ---- */

static float gen_f32(void) {
    static const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN,
                                 FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, -0x1p-149f, 0.1f, 3.0f};
    switch (rnd() % 4) {
    case 0: { uint32_t u = (uint32_t)rnd(); float f; memcpy(&f, &u, 4); return f; }
    case 1: return edge[rnd() % (sizeof edge / sizeof *edge)];
    default: return (float)((rnd_unit() - 0.5) * ldexp(1, (int)(rnd() % 40) - 20));
    }
}
static double gen_f64(void) {
    static const double edge[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, -NAN,
                                  DBL_MAX, -DBL_MAX, DBL_MIN, 0x1p-1074, -0x1p-1074, 0.1, 3.0};
    switch (rnd() % 4) {
    case 0: { uint64_t u = rnd(); double f; memcpy(&f, &u, 8); return f; }
    case 1: return edge[rnd() % (sizeof edge / sizeof *edge)];
    default: return (rnd_unit() - 0.5) * ldexp(1, (int)(rnd() % 80) - 40);
    }
}
static uint16_t gen_half(fmt_t f) {
    static const uint16_t e16[] = {0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0xFE00,
                                   0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7800, 0x7A00,
                                   0x5BF8 /* 255 */, 0x3555 /* ~1/3 */};
    static const uint16_t eb[] = {0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0,
                                  0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F00, 0x3F81};
    int b = f.ebits == 8;
    switch (rnd() % 3) {
    case 0: return (uint16_t)rnd();
    case 1: return b ? eb[rnd() % (sizeof eb / 2)] : e16[rnd() % (sizeof e16 / 2)];
    default: return h_encode(f, (rnd_unit() - 0.5) * ldexp(1, (int)(rnd() % 20) - 6));
    }
}
static uint64_t gen_int(int dt) {
    int w = width(dt);
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1, top = 1ull << (w - 1);
    switch (rnd() % 4) {
    case 0: { /* edges: 0, 1, -1/MAX, MIN/high bit, MAX, MIN+1, 2 */
        uint64_t e[] = {0, 1, mask, top, top - 1, top + 1, 2, mask - 1};
        return e[rnd() % 8];
    }
    case 1: return (uint64_t)((int64_t)(rnd() % 7) - 3) & mask; /* -3..3: many zeros */
    default: return rnd() & mask;
    }
}
static void gen(void *buf, int dt, size_t n) {
    for (size_t i = 0; i < n; i++) switch (cls(dt)) {
        case C_BOOL: put_u(buf, dt, i, rnd() & 1); break;
        case C_SINT:
        case C_UINT: put_u(buf, dt, i, gen_int(dt)); break;
        case C_F16: put_u(buf, dt, i, gen_half(F16)); break;
        case C_BF16: put_u(buf, dt, i, gen_half(BF16)); break;
        case C_F32: put_f(buf, i, gen_f32()); break;
        case C_F64: put_d(buf, i, gen_f64()); break;
        case C_C64: put_f(buf, 2 * i, gen_f32()); put_f(buf, 2 * i + 1, gen_f32()); break;
        case C_C128: put_d(buf, 2 * i, gen_f64()); put_d(buf, 2 * i + 1, gen_f64()); break;
        }
}

/* ---- scalar reference: out[i] = a[i] op b[i] ---- */

static int pick_max(int op, double x, double y) { /* 1: take x; NaN wins, ties take y */
    if (isnan(x)) return 1;
    if (isnan(y)) return 0;
    return op == LP_MAX ? x > y : x < y;
}

static void ref(int dt, int op, const void *a, const void *b, void *out, size_t i) {
    if (op == LP_AVG) op = LP_SUM;
    cls_t c = cls(dt);
    if (c <= C_UINT) {
        int w = width(dt);
        uint64_t x = get_u(a, dt, i), y = get_u(b, dt, i), r = 0;
        int64_t sx = sext(x, w), sy = sext(y, w);
        switch (op) {
        case LP_SUM: r = x + y; break;
        case LP_PROD: r = x * y; break;
        case LP_MAX: r = (c == C_SINT ? sx > sy : x > y) ? x : y; break;
        case LP_MIN: r = (c == C_SINT ? sx < sy : x < y) ? x : y; break;
        case LP_LAND: r = x && y; break;
        case LP_LOR: r = x || y; break;
        case LP_LXOR: r = !x != !y; break;
        case LP_BAND: r = x & y; break;
        case LP_BOR: r = x | y; break;
        case LP_BXOR: r = x ^ y; break;
        }
        put_u(out, dt, i, r); /* truncates to the width: wraparound */
    } else if (c == C_F16 || c == C_BF16) {
        fmt_t f = c == C_F16 ? F16 : BF16;
        uint16_t hx = (uint16_t)get_u(a, dt, i), hy = (uint16_t)get_u(b, dt, i);
        double x = h_decode(f, hx), y = h_decode(f, hy);
        uint16_t r;
        if (op == LP_SUM) r = h_encode(f, x + y);
        else if (op == LP_PROD) r = h_encode(f, x * y);
        else r = pick_max(op, x, y) ? hx : hy;
        put_u(out, dt, i, r);
    } else if (c == C_F32) {
        float x = get_f(a, i), y = get_f(b, i);
        /* computed in double, rounded once to float: the correctly rounded result */
        if (op == LP_SUM) put_f(out, i, (float)((double)x + (double)y));
        else if (op == LP_PROD) put_f(out, i, (float)((double)x * (double)y));
        else put_f(out, i, pick_max(op, x, y) ? x : y);
    } else if (c == C_F64) {
        double x = get_d(a, i), y = get_d(b, i);
        if (op == LP_SUM) put_d(out, i, x + y);
        else if (op == LP_PROD) put_d(out, i, x * y);
        else put_d(out, i, pick_max(op, x, y) ? x : y);
    } else if (c == C_C64) {
        float ar = get_f(a, 2 * i), ai = get_f(a, 2 * i + 1);
        float br = get_f(b, 2 * i), bi = get_f(b, 2 * i + 1);
        if (op == LP_SUM) { put_f(out, 2 * i, ar + br); put_f(out, 2 * i + 1, ai + bi); return; }
        volatile float t1 = ar * br, t2 = ai * bi, t3 = ar * bi, t4 = ai * br; /* no contraction */
        put_f(out, 2 * i, t1 - t2);
        put_f(out, 2 * i + 1, t3 + t4);
    } else {
        double ar = get_d(a, 2 * i), ai = get_d(a, 2 * i + 1);
        double br = get_d(b, 2 * i), bi = get_d(b, 2 * i + 1);
        if (op == LP_SUM) { put_d(out, 2 * i, ar + br); put_d(out, 2 * i + 1, ai + bi); return; }
        volatile double t1 = ar * br, t2 = ai * bi, t3 = ar * bi, t4 = ai * br;
        put_d(out, 2 * i, t1 - t2);
        put_d(out, 2 * i + 1, t3 + t4);
    }
}

/* ---- comparison: bits equal, or both NaN ---- */

static int same(int dt, const void *g, const void *e, size_t i) {
    switch (cls(dt)) {
    case C_F16:
    case C_BF16: {
        fmt_t f = cls(dt) == C_F16 ? F16 : BF16;
        uint16_t x = (uint16_t)get_u(g, dt, i), y = (uint16_t)get_u(e, dt, i);
        return x == y || (h_isnan(f, x) && h_isnan(f, y));
    }
    case C_F32:
        return get_u(g, dt, i) == get_u(e, dt, i) || (isnan(get_f(g, i)) && isnan(get_f(e, i)));
    case C_F64:
        return get_u(g, dt, i) == get_u(e, dt, i) || (isnan(get_d(g, i)) && isnan(get_d(e, i)));
    case C_C64:
        for (size_t k = 2 * i; k < 2 * i + 2; k++) {
            float x = get_f(g, k), y = get_f(e, k);
            if (memcmp(&x, &y, 4) && !(isnan(x) && isnan(y))) return 0;
        }
        return 1;
    case C_C128:
        for (size_t k = 2 * i; k < 2 * i + 2; k++) {
            double x = get_d(g, k), y = get_d(e, k);
            if (memcmp(&x, &y, 8) && !(isnan(x) && isnan(y))) return 0;
        }
        return 1;
    default: return get_u(g, dt, i) == get_u(e, dt, i);
    }
}

static void show(char *s, size_t len, int dt, const void *buf, size_t i) {
    switch (cls(dt)) {
    case C_BOOL:
    case C_UINT: snprintf(s, len, "%llu", (unsigned long long)get_u(buf, dt, i)); break;
    case C_SINT: snprintf(s, len, "%lld", (long long)sext(get_u(buf, dt, i), width(dt))); break;
    case C_F16:
    case C_BF16: {
        uint16_t h = (uint16_t)get_u(buf, dt, i);
        snprintf(s, len, "0x%04x (%.9g)", h, h_decode(cls(dt) == C_F16 ? F16 : BF16, h));
        break;
    }
    case C_F32:
        snprintf(s, len, "%.9g (0x%08llx)", get_f(buf, i), (unsigned long long)get_u(buf, dt, i));
        break;
    case C_F64: snprintf(s, len, "%.17g", get_d(buf, i)); break;
    case C_C64: snprintf(s, len, "(%.9g, %.9g)", get_f(buf, 2 * i), get_f(buf, 2 * i + 1)); break;
    case C_C128:
        snprintf(s, len, "(%.17g, %.17g)", get_d(buf, 2 * i), get_d(buf, 2 * i + 1));
        break;
    }
}

/* compare n elements; one pass/fail per call, failures printed (at most 5 per call) */
static void compare(const char *what, int dt, int op, const void *got, const void *exp, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (same(dt, got, exp, i)) continue;
        if (bad++ < 5) {
            char g[96], e[96];
            show(g, sizeof g, dt, got, i);
            show(e, sizeof e, dt, exp, i);
            printf("FAIL %s dtype=%s op=%s n=%zu index=%zu got=%s expected=%s\n", what,
                   lp_dtype_name(dt), op >= 0 ? lp_op_name(op) : "-", n, i, g, e);
        }
    }
    if (bad) nfail++;
    else npass++;
}

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (cond) npass++;                                                                   \
        else {                                                                               \
            nfail++;                                                                         \
            printf("FAIL " __VA_ARGS__);                                                     \
            printf("\n");                                                                    \
        }                                                                                    \
    } while (0)

/* ---- the tests ---- */

static void test_names(void) {
    static const char *dn[LP_NDTYPES] = {"bool", "int8", "int16", "int32", "int64", "uint8",
                                         "uint16", "uint32", "uint64", "float16", "bfloat16",
                                         "float32", "float64", "complex64", "complex128"};
    static const char *on[LP_NOPS] = {"sum", "prod", "max", "min", "avg", "land",
                                      "lor", "lxor", "band", "bor", "bxor"};
    for (int dt = 0; dt < LP_NDTYPES; dt++) {
        CHECK(!strcmp(lp_dtype_name(dt), dn[dt]), "lp_dtype_name(%d) = %s, expected %s", dt,
              lp_dtype_name(dt), dn[dt]);
        CHECK(lp_dtype_size(dt) == esize(dt), "lp_dtype_size(%s) = %zu, expected %zu", dn[dt],
              lp_dtype_size(dt), esize(dt));
    }
    for (int op = 0; op < LP_NOPS; op++)
        CHECK(!strcmp(lp_op_name(op), on[op]), "lp_op_name(%d) = %s, expected %s", op,
              lp_op_name(op), on[op]);
    CHECK(!strcmp(lp_dtype_name(LP_NDTYPES), "?") && !strcmp(lp_dtype_name((lp_dtype_t)-1), "?"),
          "lp_dtype_name out of range");
    CHECK(!strcmp(lp_op_name(LP_NOPS), "?") && !strcmp(lp_op_name((lp_op_t)-1), "?"),
          "lp_op_name out of range");
    CHECK(lp_dtype_size(LP_NDTYPES) == 0, "lp_dtype_size out of range");
    CHECK(!lp_reduce_kernel(LP_NDTYPES, LP_SUM) && !lp_reduce_kernel(LP_INT32, LP_NOPS) &&
              !lp_reduce_kernel((lp_dtype_t)-1, LP_SUM) &&
              !lp_reduce_kernel(LP_INT32, (lp_op_t)-1) && !lp_op_valid(LP_NDTYPES, LP_SUM) &&
              !lp_op_valid(LP_INT32, LP_NOPS),
          "out-of-range dtype/op must give no kernel");
}

enum { M_OUT, M_ALIAS_A, M_ALIAS_B };

static void run_case(int dt, int op, lp_reduce_fn k, size_t n, int mode, int off) {
    size_t sz = esize(dt), bytes = (n + (size_t)off) * sz;
    unsigned char *ba = malloc(bytes ? bytes : 1), *bb = malloc(bytes ? bytes : 1),
                  *bo = malloc(bytes ? bytes : 1), *be = malloc(n ? n * sz : 1);
    if (!ba || !bb || !bo || !be) { printf("out of memory\n"); exit(2); }
    unsigned char *a = ba + off * sz, *b = bb + off * sz, *o = bo + off * sz;
    gen(a, dt, n);
    gen(b, dt, n);
    for (size_t i = 0; i < n; i++) ref(dt, op, a, b, be, i);
    static const char *mname[] = {"out", "out==a", "out==b"};
    char what[64];
    snprintf(what, sizeof what, "kernel[%s,off=%d]", mname[mode], off);
    if (mode == M_OUT) {
        memset(bo, 0xA5, bytes);
        k(o, a, b, n);
        compare(what, dt, op, o, be, n);
        /* inputs untouched */
        unsigned char *a2 = malloc(n ? n * sz : 1), *b2 = malloc(n ? n * sz : 1);
        memcpy(a2, a, n * sz);
        memcpy(b2, b, n * sz);
        k(o, a, b, n);
        CHECK(!memcmp(a, a2, n * sz) && !memcmp(b, b2, n * sz), "kernel %s/%s n=%zu wrote an input",
              lp_dtype_name(dt), lp_op_name(op), n);
        free(a2);
        free(b2);
    } else if (mode == M_ALIAS_A) {
        k(a, a, b, n);
        compare(what, dt, op, a, be, n);
    } else {
        k(b, a, b, n);
        compare(what, dt, op, b, be, n);
    }
    free(ba);
    free(bb);
    free(bo);
    free(be);
}

static void test_kernels(void) {
    static const size_t lens[] = {0, 1, 3, 17, 1000, 4099};
    for (int dt = 0; dt < LP_NDTYPES; dt++)
        for (int op = 0; op < LP_NOPS; op++) {
            lp_reduce_fn k = lp_reduce_kernel(dt, op);
            int want = expect_valid(dt, op);
            CHECK((k != NULL) == want && lp_op_valid(dt, op) == want,
                  "validity dtype=%s op=%s: kernel %s, lp_op_valid %d, expected %s",
                  lp_dtype_name(dt), lp_op_name(op), k ? "present" : "NULL", lp_op_valid(dt, op),
                  want ? "valid" : "invalid");
            if (op == LP_AVG && want)
                CHECK(k == lp_reduce_kernel(dt, LP_SUM), "AVG kernel of %s is not its SUM kernel",
                      lp_dtype_name(dt));
            if (!k || !want) continue;
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
                for (int mode = M_OUT; mode <= M_ALIAS_B; mode++)
                    for (int off = 0; off <= 1; off++) run_case(dt, op, k, lens[l], mode, off);
        }
}

/* hand-picked cases: (dtype, op, a, b, expected) as raw element bits */
static void test_edges(void) {
    static const struct { int dt, op; uint64_t a, b, r; } t[] = {
        {LP_INT8, LP_SUM, 127, 1, 0x80},                        /* 127 + 1 = -128 */
        {LP_INT8, LP_PROD, 0x80, 0xFF, 0x80},                   /* -128 * -1 = -128 */
        {LP_INT16, LP_PROD, 300, 300, (90000 & 0xFFFF)},
        {LP_INT32, LP_SUM, 0x7FFFFFFF, 1, 0x80000000},         /* INT_MAX + 1 = INT_MIN */
        {LP_INT32, LP_PROD, 0x80000000, 0xFFFFFFFF, 0x80000000},
        {LP_INT32, LP_MIN, 0x80000000, 0x7FFFFFFF, 0x80000000},
        {LP_INT64, LP_SUM, 0x7FFFFFFFFFFFFFFF, 1, 0x8000000000000000},
        {LP_INT64, LP_MAX, 0xFFFFFFFFFFFFFFFF, 0, 0},           /* max(-1, 0) = 0 */
        {LP_UINT8, LP_PROD, 200, 2, 144},
        {LP_UINT16, LP_PROD, 0xFFFF, 0xFFFF, 1},               /* no int promotion overflow */
        {LP_UINT32, LP_SUM, 0xFFFFFFFF, 2, 1},
        {LP_UINT64, LP_MAX, 0xFFFFFFFFFFFFFFFF, 0, 0xFFFFFFFFFFFFFFFF},
        {LP_INT32, LP_LAND, 2, 4, 1},
        {LP_INT32, LP_BAND, 2, 4, 0},
        {LP_INT8, LP_LXOR, 0x80, 5, 0},
        {LP_INT8, LP_LOR, 0, 0x80, 1},
        {LP_UINT64, LP_LXOR, 0, 0x8000000000000000, 1},
        {LP_BOOL, LP_MAX, 0, 1, 1},
        {LP_BOOL, LP_BXOR, 1, 1, 0},
        {LP_FLOAT16, LP_SUM, 0x7BFF, 0x7BFF, 0x7C00},          /* 65504 + 65504 = inf */
        {LP_FLOAT16, LP_SUM, 0x7BFF, 0x4800, 0x7BFF},          /* 65504 + 8 = 65504 */
        {LP_FLOAT16, LP_SUM, 0x7BFF, 0x4C00, 0x7C00},          /* 65504 + 16: tie, even is inf */
        {LP_FLOAT16, LP_PROD, 0x5BF8, 0x5BF8, 0x7BF0},         /* 255 * 255 = 65025 -> 65024 */
        {LP_FLOAT16, LP_PROD, 0x7A00, 0x4000, 0x7C00},         /* 49152 * 2: inf */
        {LP_FLOAT16, LP_PROD, 0x0001, 0x3800, 0x0000},         /* 2^-24 / 2: tie to even 0 */
        {LP_FLOAT16, LP_PROD, 0x0003, 0x3800, 0x0002},         /* 3*2^-25: tie to even 2 */
        {LP_FLOAT16, LP_SUM, 0x03FF, 0x0001, 0x0400},          /* subnormal -> normal */
        {LP_FLOAT16, LP_SUM, 0x3C00, 0x1000, 0x3C00},          /* 1 + 2^-11: tie to even 1 */
        {LP_FLOAT16, LP_SUM, 0x3C01, 0x1000, 0x3C02},          /* tie to even, up */
        {LP_FLOAT16, LP_SUM, 0x8000, 0x8000, 0x8000},          /* -0 + -0 = -0 */
        {LP_FLOAT16, LP_SUM, 0x8000, 0x0000, 0x0000},
        {LP_FLOAT16, LP_MAX, 0x7E00, 0x3C00, 0x7E00},          /* NaN wins */
        {LP_FLOAT16, LP_MIN, 0x3C00, 0x7E00, 0x7E00},
        {LP_FLOAT16, LP_MAX, 0xFC00, 0x7C00, 0x7C00},
        {LP_BFLOAT16, LP_SUM, 0x3F80, 0x3B80, 0x3F80},         /* 1 + 2^-8: tie to even 1 */
        {LP_BFLOAT16, LP_SUM, 0x3F81, 0x3B80, 0x3F82},
        {LP_BFLOAT16, LP_SUM, 0x7F7F, 0x7F7F, 0x7F80},         /* max + max = inf */
        {LP_BFLOAT16, LP_MAX, 0x3F80, 0xFFC0, 0xFFC0},
        {LP_BFLOAT16, LP_SUM, 0x0001, 0x0001, 0x0002},         /* subnormals */
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        unsigned char a[8], b[8], r[8], e[8];
        put_u(a, t[i].dt, 0, t[i].a);
        put_u(b, t[i].dt, 0, t[i].b);
        put_u(e, t[i].dt, 0, t[i].r);
        lp_reduce_fn k = lp_reduce_kernel(t[i].dt, t[i].op);
        if (!k) { CHECK(0, "edge case %zu: no kernel", i); continue; }
        k(r, a, b, 1);
        compare("edge", t[i].dt, t[i].op, r, e, 1);
    }
}

static void test_float_specials(void) {
    /* NaN propagation both ways, infinities, signed zeros, for float32/float64 */
    const float fx[] = {NAN, 1.0f, -INFINITY, 0.0f, -0.0f, INFINITY};
    const float fy[] = {1.0f, NAN, INFINITY, -0.0f, 0.0f, NAN};
    for (int op = LP_MAX; op <= LP_MIN; op++) {
        float o[6];
        if (!lp_reduce_kernel(LP_FLOAT32, op) || !lp_reduce_kernel(LP_FLOAT64, op)) continue;
        lp_reduce_kernel(LP_FLOAT32, op)(o, fx, fy, 6);
        const char *nm = lp_op_name(op);
        CHECK(isnan(o[0]) && isnan(o[1]) && isnan(o[5]), "float32 %s: NaN not propagated", nm);
        CHECK(op == LP_MAX ? o[2] == INFINITY : o[2] == -INFINITY, "float32 %s of infinities", nm);
        CHECK(signbit(o[3]) && !signbit(o[4]), "float32 %s of signed zeros takes the second", nm);
        double dx[] = {NAN, 1.0, -INFINITY}, dy[] = {1.0, NAN, INFINITY}, d[3];
        lp_reduce_kernel(LP_FLOAT64, op)(d, dx, dy, 3);
        CHECK(isnan(d[0]) && isnan(d[1]) && (op == LP_MAX ? d[2] == INFINITY : d[2] == -INFINITY),
              "float64 %s specials", lp_op_name(op));
    }
    /* complex product: (1+2i)(3+4i) = -5+10i */
    if (!lp_reduce_kernel(LP_COMPLEX64, LP_PROD) || !lp_reduce_kernel(LP_COMPLEX128, LP_PROD))
        return;
    float ca[] = {1, 2}, cb[] = {3, 4}, co[2];
    lp_reduce_kernel(LP_COMPLEX64, LP_PROD)(co, ca, cb, 1);
    CHECK(co[0] == -5 && co[1] == 10, "complex64 prod (1+2i)(3+4i) = (%g, %g)", co[0], co[1]);
    double za[] = {1, 2}, zb[] = {3, 4}, zo[2];
    lp_reduce_kernel(LP_COMPLEX128, LP_PROD)(zo, za, zb, 1);
    CHECK(zo[0] == -5 && zo[1] == 10, "complex128 prod (1+2i)(3+4i) = (%g, %g)", zo[0], zo[1]);
}

static void scale_ref(int dt, void *buf, size_t i, double d) {
    uint16_t h = esize(dt) == 2 ? (uint16_t)get_u(buf, dt, i) : 0;
    switch (cls(dt)) {
    case C_F16: put_u(buf, dt, i, h_encode(F16, h_decode(F16, h) / d)); break;
    case C_BF16: put_u(buf, dt, i, h_encode(BF16, h_decode(BF16, h) / d)); break;
    case C_F32: put_f(buf, i, (float)((double)get_f(buf, i) / (double)(float)d)); break;
    case C_F64: put_d(buf, i, get_d(buf, i) / d); break;
    case C_C64:
        for (size_t k = 2 * i; k < 2 * i + 2; k++)
            put_f(buf, k, (float)((double)get_f(buf, k) / (double)(float)d));
        break;
    case C_C128:
        for (size_t k = 2 * i; k < 2 * i + 2; k++) put_d(buf, k, get_d(buf, k) / d);
        break;
    default: break; /* integer types: untouched */
    }
}

static void test_scale(void) {
    static const size_t lens[] = {0, 1, 3, 17, 1000, 4099};
    static const double divs[] = {1.0, 2.0, 3.0, 7.0, 12.0};
    for (int dt = 0; dt < LP_NDTYPES; dt++)
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
            for (size_t v = 0; v < sizeof divs / sizeof *divs; v++) {
                size_t n = lens[l], sz = esize(dt);
                unsigned char *x = malloc(n ? n * sz : 1), *e = malloc(n ? n * sz : 1);
                gen(x, dt, n);
                memcpy(e, x, n * sz);
                for (size_t i = 0; i < n; i++) scale_ref(dt, e, i, divs[v]);
                lp_scale(x, n, dt, divs[v]);
                char what[48];
                snprintf(what, sizeof what, "lp_scale[/%g]", divs[v]);
                compare(what, dt, -1, x, e, n);
                free(x);
                free(e);
            }
    /* AVG = SUM then scale: (1 + 2) / 3 = 1 in every floating type */
    for (int dt = LP_FLOAT16; dt < LP_NDTYPES; dt++) {
        unsigned char a[16], b[16], o[16], one[16];
        memset(a, 0, sizeof a); memset(b, 0, sizeof b); memset(one, 0, sizeof one);
        uint16_t h1 = cls(dt) == C_F16 ? 0x3C00 : 0x3F80; /* 1.0; 2.0 is 0x4000 in both */
        switch (cls(dt)) {
        case C_F16:
        case C_BF16: put_u(a, dt, 0, h1); put_u(b, dt, 0, 0x4000); put_u(one, dt, 0, h1); break;
        case C_F32:
        case C_C64: put_f(a, 0, 1); put_f(b, 0, 2); put_f(one, 0, 1); break;
        default: put_d(a, 0, 1); put_d(b, 0, 2); put_d(one, 0, 1); break;
        }
        lp_reduce_fn k = lp_reduce_kernel(dt, LP_AVG);
        if (!k) { CHECK(0, "no AVG kernel for %s", lp_dtype_name(dt)); continue; }
        k(o, a, b, 1);
        lp_scale(o, 1, dt, 3.0);
        compare("avg", dt, LP_AVG, o, one, 1);
    }
}

int main(void) {
    test_names();
    test_kernels();
    test_edges();
    test_float_specials();
    test_scale();
    printf("%ld passed, %ld failed\n", npass, nfail);
    return nfail != 0;
}
