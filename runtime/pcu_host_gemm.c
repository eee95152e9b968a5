/*
 * pcu_host_gemm.c — the bf16 and f16 GEMMs on the host (see
 * prime_cuda_gemm.h): the semantics of the .cu's conversion kernels and
 * cublasGemmEx with fp32 accumulation, for the host emulation and the
 * dense reference of --check.
 */
#include "prime_cuda_gemm.h"

#include "prime_rt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int override_type = -1;

void prime_gemm_narrow_override(int type) {
    override_type = type;
}

/* Round to nearest even on the bit pattern, keeping the top 16 bits: a
 * carry out of the mantissa raises the exponent (to infinity past bf16's
 * largest value), as __float2bfloat16_rn does; a NaN stays a NaN. */
static float round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* IEEE binary16, round to nearest even: 11 significant bits down to
 * 2^-14, a fixed quantum of 2^-24 below (the subnormals), infinity from
 * 65520 (half-way between the largest half, 65504, and 2^16) up. Every
 * scaling is by a power of two, so exact; nearbyintf rounds half to even
 * in the default rounding mode. */
static float round_f16(float x) {
    if (isnan(x) || isinf(x))
        return x;
    float a = fabsf(x), r;
    if (a >= 65520.0f) {
        r = INFINITY;
    } else if (a < 0x1p-14f) {
        r = nearbyintf(a * 0x1p24f) * 0x1p-24f;
    } else {
        int e;
        (void)frexpf(a, &e); /* a = f 2^e, f in [0.5, 1): the quantum is 2^(e - 11) */
        r = ldexpf(nearbyintf(ldexpf(a, 11 - e)), e - 11);
    }
    return copysignf(r, x);
}

float prime_round_dtype(int type, float x) {
    return type == PRIME_DTYPE_BF16 ? round_bf16(x) : type == PRIME_DTYPE_F16 ? round_f16(x) : x;
}

/* A copy of the n floats from p, each rounded to the type; NULL when out
 * of memory. */
static float *rounded(int type, const float *p, size_t n) {
    float *q = malloc((n ? n : 1) * sizeof *q);
    for (size_t i = 0; q && i < n; ++i)
        q[i] = prime_round_dtype(type, p[i]);
    return q;
}

/* The elements a row-major operand of rows x cols at row stride ld spans
 * over `batch` copies `stride` apart. */
static size_t span(int rows, int cols, int ld, int batch, long stride) {
    if (rows <= 0 || cols <= 0)
        return 0;
    return (size_t)(rows - 1) * (size_t)ld + (size_t)cols + (size_t)(batch - 1) * (size_t)stride;
}

void prime_gemm_batched_narrow(int type, int trans_a, int trans_b, int batch, int m, int n, int k,
                               float alpha, const float *a, int lda, long stride_a, const float *b,
                               int ldb, long stride_b, float beta, float *c, int ldc,
                               long stride_c) {
    if (override_type >= 0)
        type = override_type;
    if (batch <= 0)
        return;
    size_t na = span(trans_a ? k : m, trans_a ? m : k, lda, batch, stride_a);
    size_t nb = span(trans_b ? n : k, trans_b ? k : n, ldb, batch, stride_b);
    float *ra = a && type != PRIME_DTYPE_F32 ? rounded(type, a, na) : NULL;
    float *rb = b && type != PRIME_DTYPE_F32 ? rounded(type, b, nb) : NULL;
    if (type != PRIME_DTYPE_F32 && ((a && !ra) || (b && !rb))) {
        /* A C kernel has no way to fail: say so and stop. */
        fprintf(stderr, "out of host memory for a GEMM's rounded operands\n");
        exit(3);
    }
    prime_gemm_batched(trans_a, trans_b, batch, m, n, k, alpha, ra ? ra : a, lda, stride_a,
                       rb ? rb : b, ldb, stride_b, beta, c, ldc, stride_c);
    free(ra);
    free(rb);
}

void prime_gemm_narrow(int type, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc) {
    prime_gemm_batched_narrow(type, trans_a, trans_b, 1, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta,
                              c, ldc, 0);
}
