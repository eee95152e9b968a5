/*
 * test_prime_math.c — the fp32 kernels' branch-free exp and log
 * (runtime/prime_math.h) against fp64 libm rounded to fp32: at most 1 ulp
 * over a strided sweep of every fp32 bit pattern (normal, denormal,
 * negative, huge), what libm gives at the special arguments, and the
 * masked softmax's -1e18 giving exactly 0; and prime_max_row (the max=
 * reductions' rows) against the compare in loop order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_math.h"

#include <float.h>

/* The distance in ulps between a and b: 0 when both are NaN, huge when
 * only one is. */
static long ulps(float a, float b) {
    if (a == b || (a != a && b != b))
        return 0;
    if (a != a || b != b)
        return 1L << 40;
    int32_t ia = (int32_t)prime_f2u(a), ib = (int32_t)prime_f2u(b);
    /* Signed magnitude to a monotonic integer line. */
    long la = ia < 0 ? -(long)(ia & 0x7fffffff) : ia;
    long lb = ib < 0 ? -(long)(ib & 0x7fffffff) : ib;
    return la > lb ? la - lb : lb - la;
}

/* Every stride-th bit pattern, the stride odd so that every exponent and
 * both signs are visited. */
static void sweep(float (*f)(float), double (*ref)(double), long *worst, float *at) {
    *worst = 0;
    for (uint64_t i = 0; i <= 0xffffffffu; i += 4099) {
        float x = prime_u2f((uint32_t)i);
        long e = ulps(f(x), (float)ref((double)x));
        if (e > *worst) {
            *worst = e;
            *at = x;
        }
    }
}

static void test_expf_sweep(void **state) {
    (void)state;
    long worst;
    float at = 0.0f;
    sweep(prime_expf, exp, &worst, &at);
    if (worst > 1)
        print_error("prime_expf: %ld ulps at %a\n", worst, (double)at);
    assert_true(worst <= 1);
    /* Dense around 0, where the softmax's arguments live. */
    for (float x = -20.0f; x < 20.0f; x += 0.001953125f)
        assert_true(ulps(prime_expf(x), (float)exp((double)x)) <= 1);
}

static void test_logf_sweep(void **state) {
    (void)state;
    long worst;
    float at = 0.0f;
    sweep(prime_logf, log, &worst, &at);
    if (worst > 1)
        print_error("prime_logf: %ld ulps at %a\n", worst, (double)at);
    assert_true(worst <= 1);
    for (float x = 0.001f; x < 10.0f; x += 0.0009765625f)
        assert_true(ulps(prime_logf(x), (float)log((double)x)) <= 1);
}

static void test_special(void **state) {
    (void)state;
    const float args[] = {0.0f,    -0.0f,   1.0f,    -1.0f,  INFINITY, -INFINITY,
                          NAN,     FLT_MAX, FLT_MIN, 1e-45f, 88.72f,   88.73f,
                          -87.33f, -103.9f, -104.1f, -1e18f, 1e18f,    -FLT_MAX};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; ++i) {
        float x = args[i];
        assert_true(ulps(prime_expf(x), (float)exp((double)x)) <= 1);
        assert_true(ulps(prime_logf(x), (float)log((double)x)) <= 1);
    }
    assert_true(prime_expf(-1e18f) == 0.0f);
    assert_true(prime_expf(0.0f) == 1.0f);
    assert_true(prime_expf(1e18f) == INFINITY);
    assert_true(prime_logf(1.0f) == 0.0f);
    assert_true(prime_logf(0.0f) == -INFINITY);
    assert_true(prime_logf(-1.0f) != prime_logf(-1.0f));
}

/* prime_max_row against v > acc ? v : acc in loop order, over rows of
 * every length up to 70 (whole lanes and remainders), from several
 * starting values, with NaNs, infinities, ties and the masked scores'
 * -1e18: the same value, NaN never winning. */
static void test_max_row(void **state) {
    (void)state;
    float x[70];
    unsigned seed = 12345;
    const float starts[] = {-INFINITY, 0.0f, 3.0f, -1e18f};
    for (int round = 0; round < 200; ++round) {
        for (int i = 0; i < 70; ++i) {
            seed = seed * 1103515245u + 12345u;
            int pick = (int)((seed >> 16) % 16);
            x[i] = pick == 0   ? NAN
                   : pick == 1 ? -INFINITY
                   : pick == 2 ? -1e18f
                   : pick == 3 ? 2.5f
                               : (float)((int)((seed >> 8) % 2001) - 1000) / 7.0f;
        }
        if (round % 7 == 0)
            x[round % 70] = INFINITY;
        for (long n = 0; n <= 70; ++n)
            for (int s = 0; s < 4; ++s) {
                float want = starts[s];
                for (long i = 0; i < n; ++i)
                    want = x[i] > want ? x[i] : want;
                float got = prime_max_row(x, n, starts[s]);
                assert_false(isnan(got));
                assert_true(got == want);
            }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf_sweep),
        cmocka_unit_test(test_logf_sweep),
        cmocka_unit_test(test_special),
        cmocka_unit_test(test_max_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
