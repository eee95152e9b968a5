/*
 * test_runtime_dtype.c — the host side of --dtype bf16 and f16
 * (runtime/pcu_host_gemm.c, prime_cuda_gemm.h): the rounding of fp32 to
 * bf16 and to IEEE half against independent references over a strided
 * sweep of every fp32 bit pattern (f16: the compiler's _Float16
 * conversion; bf16: rounding the magnitude to 8 significant bits in
 * fp64), their ties, overflow and subnormals; and the narrow GEMMs
 * (plain, batched, every transpose) against fp64 sums of the rounded
 * operands, which differ from those of the unrounded ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_cuda_gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The compiler's IEEE half (GCC and Clang on x86-64 and arm64). */
__extension__ typedef _Float16 half;

static float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to `bits` significant bits, nearest even, in fp64 (exact for
 * fp32 inputs), with the smallest exponent emin (below: a fixed quantum
 * of 2^(emin - bits + 1)) and infinity at and past `inf_from`. */
static double ref_round(double x, int bits, int emin, double inf_from) {
    double a = fabs(x);
    if (isnan(x) || isinf(x) || a == 0)
        return x;
    int e;
    (void)frexp(a, &e); /* a = f 2^e, f in [0.5, 1) */
    int ex = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, ex - bits + 1);
    double r = nearbyint(a / q) * q;
    if (r >= inf_from)
        r = INFINITY;
    return copysign(r, x);
}

static int same(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void test_round_sweep(void **state) {
    (void)state;
    /* bf16: 8 significant bits, fp32's exponents; infinity from the
     * midpoint of its largest value (2 - 2^-7) 2^127 and 2^128. */
    const double bf16_inf = ldexp(2.0 - ldexp(1.0, -8), 127);
    long bad16 = 0, badbf = 0;
    for (uint64_t i = 0; i <= 0xffffffffu; i += 257) {
        float x = u2f((uint32_t)i);
        if (!same(prime_round_dtype(PRIME_DTYPE_F16, x), (float)(half)x))
            ++bad16;
        if (!same(prime_round_dtype(PRIME_DTYPE_BF16, x), (float)ref_round(x, 8, -126, bf16_inf)))
            ++badbf;
        if (!same(prime_round_dtype(PRIME_DTYPE_F16, x), (float)ref_round(x, 11, -14, 65520.0)))
            ++bad16;
    }
    assert_int_equal(bad16, 0);
    assert_int_equal(badbf, 0);
    assert_true(same(prime_round_dtype(PRIME_DTYPE_F32, 0.1f), 0.1f));
}

static void test_round_cases(void **state) {
    (void)state;
    /* Ties go to the even neighbour. */
    assert_true(prime_round_dtype(PRIME_DTYPE_BF16, 1.0f + 0x1p-8f) == 1.0f);
    assert_true(prime_round_dtype(PRIME_DTYPE_BF16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, 1.0f + 0x1p-11f) == 1.0f);
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    /* f16's largest value, the overflow at 65520, its subnormals. */
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, 65504.0f) == 65504.0f);
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, 65519.0f) == 65504.0f);
    assert_true(isinf(prime_round_dtype(PRIME_DTYPE_F16, 65520.0f)));
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, -0x1.8p-24f) == -0x1p-23f);
    assert_true(prime_round_dtype(PRIME_DTYPE_F16, 0x1p-26f) == 0.0f);
    assert_true(isinf(prime_round_dtype(PRIME_DTYPE_BF16, 3.4e38f)));
    assert_true(isnan(prime_round_dtype(PRIME_DTYPE_BF16, NAN)));
}

/* Row-major op(A) (m x k) op(B) (k x n) summed in fp64 from the rounded
 * operands, batch copies; the result and the largest sum of |a||b|. */
static double gemm_ref(int type, int ta, int tb, int batch, int m, int n, int k, const float *a,
                       int lda, long sa, const float *b, int ldb, long sb, double *c, int ldc,
                       long sc) {
    double worst = 0;
    for (int q = 0; q < batch; ++q)
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                double s = 0, mag = 0;
                for (int p = 0; p < k; ++p) {
                    float x = a[q * sa + (ta ? (long)p * lda + i : (long)i * lda + p)];
                    float y = b[q * sb + (tb ? (long)j * ldb + p : (long)p * ldb + j)];
                    double rx = prime_round_dtype(type, x), ry = prime_round_dtype(type, y);
                    s += rx * ry;
                    mag += fabs(rx * ry);
                }
                c[q * sc + (long)i * ldc + j] = s;
                worst = mag > worst ? mag : worst;
            }
    return worst;
}

static void test_gemm(void **state) {
    (void)state;
    enum { M = 5, N = 7, K = 33, B = 3 };
    static float a[B * K * M], b[B * K * N], c[B * M * N];
    static double ref[B * M * N], plain[B * M * N];
    srand(7);
    for (int i = 0; i < B * K * M; ++i)
        a[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int i = 0; i < B * K * N; ++i)
        b[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int type = PRIME_DTYPE_BF16; type <= PRIME_DTYPE_F16; ++type)
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb) {
                int lda = ta ? M : K, ldb = tb ? K : N;
                memset(c, 0, sizeof c);
                prime_gemm_batched_narrow(type, ta, tb, B, M, N, K, 1.0f, a, lda, (long)K * M, b,
                                          ldb, (long)K * N, 0.0f, c, N, (long)M * N);
                double mag = gemm_ref(type, ta, tb, B, M, N, K, a, lda, (long)K * M, b, ldb,
                                      (long)K * N, ref, N, (long)M * N);
                gemm_ref(PRIME_DTYPE_F32, ta, tb, B, M, N, K, a, lda, (long)K * M, b, ldb,
                         (long)K * N, plain, N, (long)M * N);
                /* fp32 sums of exact products: within K fp32 roundings of
                 * the sum of magnitudes; the unrounded operands' sums are
                 * far further (the operands' rounding, ~u of the type). */
                double err = 0, off = 0;
                for (int i = 0; i < B * M * N; ++i) {
                    err = fmax(err, fabs(c[i] - ref[i]));
                    off = fmax(off, fabs(c[i] - plain[i]));
                }
                assert_true(err <= K * 0x1p-24 * mag);
                assert_true(off > 10 * K * 0x1p-24 * mag);
                /* The plain GEMM is the batch of one. */
                float one[M * N] = {0};
                prime_gemm_narrow(type, ta, tb, M, N, K, 2.0f, a, lda, b, ldb, 0.0f, one, N);
                for (int i = 0; i < M * N; ++i)
                    assert_true(one[i] == 2.0f * c[i]);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_sweep),
        cmocka_unit_test(test_round_cases),
        cmocka_unit_test(test_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
