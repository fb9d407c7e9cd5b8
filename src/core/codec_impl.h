/* codec_impl.h: the float32 kernels of codec.c, included once per instruction set (CZ_SFX:
 * the names' suffix, CZ_TGT: the target attribute), so that the compiler vectorizes the same
 * loops for SSE2, AVX2 and AVX-512 and every rank gets the same bits whatever its CPU: every
 * step is a float32 multiply or add (no FMA: codec.c turns contraction off), an integer
 * maximum, or rounding by the 1.5 * 2^23 trick ((v + M) - M rounds |v| < 2^22 to the nearest
 * integer, ties to even, as rint does).  Formats: codec.c. */
#define CZ_CAT2(a, b) a##b
#define CZ_CAT(a, b) CZ_CAT2(a, b)
#define CZ(name) CZ_CAT(name, CZ_SFX)

/* one block of int8 / int4 (m <= CZ_BLOCK elements): its scale, then the values */
CZ_TGT static inline __attribute__((always_inline)) void CZ(enc_q_body)(const float *restrict x, size_t m, uint8_t *restrict w, int bits) {
    uint32_t amax = 0;
    for (size_t i = 0; i < m; i++) {            /* |x| as bits: the same order as the floats */
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7FFFFFFFu;
        amax = u > amax ? u : amax;
    }
    const float qmax = bits == 8 ? 127.0f : 7.0f;
    float scale, inv, a;
    memcpy(&a, &amax, 4);
    if (amax >= 0x7F800000u) {                  /* NaN or Inf in the block: the block is NaN */
        uint32_t nan = 0x7FC00000u;
        memcpy(&scale, &nan, 4);
        inv = 0.0f;
    } else if (amax == 0) {                     /* zeros stay zeros */
        scale = 0.0f;
        inv = 0.0f;
    } else {
        scale = a / qmax;
        inv = 1.0f / scale;
    }
    memcpy(w, &scale, 4);
    w += 4;
    if (amax >= 0x7F800000u) {                  /* (the values of a NaN block: zeros) */
        memset(w, 0, bits == 8 ? m : (m + 1) / 2);
        return;
    }
    const float M = 12582912.0f;                /* 1.5 * 2^23 */
    /* |x * inv| <= amax * inv, within 3 units of float32's last place of qmax: it rounds to at
     * most qmax, no clamp needed (NaN / Inf blocks have inv = 0) */
    if (bits == 8) {
        int8_t q[256];
        for (size_t i = 0; i < m; i++) q[i] = (int8_t)(int)((x[i] * inv + M) - M);
        memcpy(w, q, m);
    } else {                                    /* int4: the values, then two to a byte */
        int8_t q[256];
        for (size_t i = 0; i < m; i++) q[i] = (int8_t)(int)((x[i] * inv + M) - M);
        if (m & 1) q[m] = 0;
        for (size_t i = 0; i < (m + 1) / 2; i++)
            w[i] = (uint8_t)((q[2 * i] & 0xF) | ((q[2 * i + 1] & 0xF) << 4));
    }
}

/* decode one block into y (acc: y += value, else y = value) */
CZ_TGT static inline __attribute__((always_inline)) void CZ(dec_q_body)(const uint8_t *restrict w, size_t m, float *restrict y, int bits, int acc) {
    float s;
    memcpy(&s, w, 4);
    w += 4;
    if (bits == 8) {
        int8_t q[256];
        memcpy(q, w, m);                        /* (a local copy: the loops below vectorize) */
        if (acc)
            for (size_t i = 0; i < m; i++) y[i] = y[i] + (float)q[i] * s;
        else
            for (size_t i = 0; i < m; i++) y[i] = (float)q[i] * s;
    } else {                                    /* int4: two values from each byte, then as int8 */
        int8_t q[256];
        for (size_t i = 0; i < (m + 1) / 2; i++) {
            q[2 * i] = (int8_t)(uint8_t)(w[i] << 4) >> 4;
            q[2 * i + 1] = (int8_t)w[i] >> 4;
        }
        if (acc)
            for (size_t i = 0; i < m; i++) y[i] = y[i] + (float)q[i] * s;
        else
            for (size_t i = 0; i < m; i++) y[i] = (float)q[i] * s;
    }
}

/* full blocks with constants the compiler unrolls and vectorizes whole; the last block generic */
CZ_TGT static void CZ(enc_q_block)(const float *restrict x, size_t m, uint8_t *restrict w, int bits) {
    if (m == 256 && bits == 8) CZ(enc_q_body)(x, 256, w, 8);
    else if (m == 256) CZ(enc_q_body)(x, 256, w, 4);
    else CZ(enc_q_body)(x, m, w, bits);
}
CZ_TGT static void CZ(dec_q_block)(const uint8_t *restrict w, size_t m, float *restrict y, int bits, int acc) {
    if (m == 256 && bits == 8 && acc) CZ(dec_q_body)(w, 256, y, 8, 1);
    else if (m == 256 && bits == 8) CZ(dec_q_body)(w, 256, y, 8, 0);
    else if (m == 256 && acc) CZ(dec_q_body)(w, 256, y, 4, 1);
    else if (m == 256) CZ(dec_q_body)(w, 256, y, 4, 0);
    else CZ(dec_q_body)(w, m, y, bits, acc);
}

CZ_TGT static void CZ(enc_bf16)(const float *restrict x, size_t n, uint16_t *restrict w) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
        w[i] = (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : r);
    }
}

CZ_TGT static void CZ(dec_bf16)(const uint16_t *restrict w, size_t n, float *restrict y, int acc) {
    if (acc)
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)w[i] << 16;
            float f;
            memcpy(&f, &u, 4);
            y[i] = y[i] + f;
        }
    else
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)w[i] << 16;
            memcpy(&y[i], &u, 4);
        }
}

static const lp_cz_kernels_t CZ(kernels) = {CZ(enc_q_block), CZ(dec_q_block), CZ(enc_bf16), CZ(dec_bf16)};

#undef CZ
#undef CZ_CAT
#undef CZ_CAT2
