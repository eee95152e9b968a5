/*
 * prime_math.h — the intrinsics of the .prime language and their
 * derivatives, as inline float functions for emitted kernels (and fp64
 * ones, suffixed _d, for the dense reference).
 *
 * gelu is the exact (erf) form; each *_grad is the derivative of the
 * function of the same name; step is the derivative of relu (0 at 0);
 * eq(x, y) is 1 where x == y, else 0 (the derivative of a maximum selects
 * the elements equal to it).
 *
 * prime_expf and prime_logf are the fp32 kernels' exp and log: branch-free
 * (selects, no calls, no errno) so that a loop calling them vectorises,
 * and the same bits on every target (C11 contracts no FMA). Cephes's
 * polynomials after a Cody-Waite reduction; max error against glibc's
 * correctly rounded expf/logf: 1 ulp for exp (denormal results: 1 ulp
 * of the smallest denormal), 1 ulp for log, tested over a sweep in
 * tests/unit/test_prime_math.c. inf, -inf, 0, negative and NaN
 * arguments give what libm gives.
 */
#ifndef PRIME_MATH_H
#define PRIME_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t prime_f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float prime_u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The largest of acc and x[0..n) by v > m ? v : m, as a loop in order
 * computes it (a NaN never wins; only the sign of a zero maximum may
 * differ): with GCC's vector extensions (clang has them too) in 16 lanes,
 * lane j over the elements j mod 16, and then the lanes, so that it
 * vectorises (a compare-and-select in loop order does not without
 * -ffinite-math-only). The fp32 kernels' max= reductions fold each row of
 * terms with it. The 16 lanes are two vectors of 8 (32 bytes): GCC
 * splits a 64-byte vector on an AVX2 machine into scalar compares and
 * branches on the stack, where two 32-byte ones are a compare and a
 * blend each. */
static inline float prime_max_row(const float *restrict x, long n, float acc) {
    long whole = 0;
#if defined(__GNUC__)
    typedef float prime_v8f __attribute__((vector_size(32)));
    typedef int32_t prime_v8i __attribute__((vector_size(32)));
    whole = n / 16;
    prime_v8f lo = {0}, hi = {0};
    lo += acc;
    hi += acc;
    for (long b = 0; b < whole; ++b) {
        prime_v8f vl, vh;
        memcpy(&vl, x + 16 * b, sizeof vl);
        memcpy(&vh, x + 16 * b + 8, sizeof vh);
        prime_v8i gl = vl > lo, gh = vh > hi;
        lo = (prime_v8f)(((prime_v8i)vl & gl) | ((prime_v8i)lo & ~gl));
        hi = (prime_v8f)(((prime_v8i)vh & gh) | ((prime_v8i)hi & ~gh));
    }
    for (int j = 0; j < 8; ++j)
        acc = lo[j] > acc ? lo[j] : acc;
    for (int j = 0; j < 8; ++j)
        acc = hi[j] > acc ? hi[j] : acc;
    whole *= 16;
#endif
    for (long r = 0; r < n - whole; ++r)
        acc = x[whole + r] > acc ? x[whole + r] : acc;
    return acc;
}

/* exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2. x is
 * clamped to [-104, 89] (outside, the result is 0 or inf); 2^n is
 * applied as two factors 2^(n/2) 2^(n - n/2) so that results near
 * overflow and denormal results need no special case. */
static inline float prime_expf(float x) {
    /* Below -104 the result is 0: computed from 0 instead, since an
     * underflow through denormals costs a microcode assist per element
     * (a masked softmax has half its elements there). */
    int32_t zero = x < -104.0f;
    float xc = zero ? 0.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    const float shift = 12582912.0f; /* 1.5 * 2^23: t's low bits hold round(xc / ln 2) */
    float t = xc * 1.44269504088896341f + shift;
    float n = t - shift;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float z = r * r;
    float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) *
                   r +
               1.6666665459e-1f) *
                  r +
              5.0000001201e-1f;
    p = p * z + r + 1.0f;
    int32_t ni = (int32_t)(prime_f2u(t) - prime_f2u(shift));
    int32_t n1 = ni / 2, n2 = ni - n1;
    float s1 = prime_u2f((uint32_t)(n1 + 127) << 23);
    float s2 = prime_u2f((uint32_t)(n2 + 127) << 23);
    float y = zero ? 0.0f : p * s1 * s2;
    return x != x ? x : y;
}

/* log(x) = e ln 2 + log(m), sqrt(1/2) <= m < sqrt(2); denormal arguments
 * are scaled by 2^23 first. */
static inline float prime_logf(float x) {
    int32_t sub = x < 1.17549435e-38f;
    float xs = sub ? x * 8388608.0f : x;
    uint32_t u = prime_f2u(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (sub ? 23 : 0);
    float m = prime_u2f((u & 0x807fffffu) | 0x3f000000u); /* in [0.5, 1) */
    int32_t lo = m < 0.707106781186547524f;
    e -= lo;
    m = lo ? m + m - 1.0f : m - 1.0f;
    float fe = (float)e;
    float z = m * m;
    float y = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m -
                    1.2420140846e-1f) *
                       m +
                   1.4249322787e-1f) *
                      m -
                  1.6668057665e-1f) *
                     m +
                 2.0000714765e-1f) *
                    m -
                2.4999993993e-1f) *
                   m +
               3.3333331174e-1f) *
              m * z;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y + 0.693359375f * fe;
    r = x == INFINITY ? x : r;
    r = x == 0.0f ? -INFINITY : r;
    return x < 0.0f || x != x ? NAN : r;
}

static inline float prime_rsqrt(float x) {
    return 1.0f / sqrtf(x);
}
static inline float prime_rsqrt_grad(float x) {
    return -0.5f / (x * sqrtf(x));
}
static inline float prime_tanh_grad(float x) {
    float t = tanhf(x);
    return 1.0f - t * t;
}
static inline float prime_erf_grad(float x) {
    return 1.1283791670955126f * prime_expf(-x * x);
}
static inline float prime_sigmoid(float x) {
    return 1.0f / (1.0f + prime_expf(-x));
}
static inline float prime_sigmoid_grad(float x) {
    float s = prime_sigmoid(x);
    return s * (1.0f - s);
}
static inline float prime_relu(float x) {
    return x > 0.0f ? x : 0.0f;
}
static inline float prime_step(float x) {
    return x > 0.0f ? 1.0f : 0.0f;
}
static inline float prime_eq(float x, float y) {
    return x == y ? 1.0f : 0.0f;
}
static inline float prime_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
static inline float prime_gelu_grad(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
           x * 0.3989422804014327f * prime_expf(-0.5f * x * x);
}
static inline float prime_silu(float x) {
    return x * prime_sigmoid(x);
}
static inline float prime_silu_grad(float x) {
    float s = prime_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* The same in fp64, for the dense reference of --check. */
static inline double prime_rsqrt_d(double x) {
    return 1.0 / sqrt(x);
}
static inline double prime_rsqrt_grad_d(double x) {
    return -0.5 / (x * sqrt(x));
}
static inline double prime_tanh_grad_d(double x) {
    double t = tanh(x);
    return 1.0 - t * t;
}
static inline double prime_erf_grad_d(double x) {
    return 1.1283791670955126 * exp(-x * x);
}
static inline double prime_sigmoid_d(double x) {
    return 1.0 / (1.0 + exp(-x));
}
static inline double prime_sigmoid_grad_d(double x) {
    double s = prime_sigmoid_d(x);
    return s * (1.0 - s);
}
static inline double prime_relu_d(double x) {
    return x > 0.0 ? x : 0.0;
}
static inline double prime_step_d(double x) {
    return x > 0.0 ? 1.0 : 0.0;
}
static inline double prime_eq_d(double x, double y) {
    return x == y ? 1.0 : 0.0;
}
static inline double prime_gelu_d(double x) {
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
}
static inline double prime_gelu_grad_d(double x) {
    return 0.5 * (1.0 + erf(x * 0.70710678118654752)) + x * 0.3989422804014327 * exp(-0.5 * x * x);
}
static inline double prime_silu_d(double x) {
    return x * prime_sigmoid_d(x);
}
static inline double prime_silu_grad_d(double x) {
    double s = prime_sigmoid_d(x);
    return s * (1.0 + x * (1.0 - s));
}

#endif
