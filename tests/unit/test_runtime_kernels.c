/*
 * test_runtime_kernels.c — the dense kernels: GEMM in all four transpose
 * combinations with padded leading dimensions against a naive loop, the
 * k = 0 and bad-argument cases, elementwise add, box copies of rank 0 to 8
 * with offsets (and boxes outside their arrays, which copy nothing), the
 * splitmix64 random fill, and the max-norm relative error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "prime_rt.h"

#include <math.h>
#include <string.h>

/* op(X)[i][j] of a row-major X with row stride ld. */
static float at(const float *x, int ld, int trans, int i, int j) {
    return trans ? x[j * ld + i] : x[i * ld + j];
}

static void test_gemm_transposes(void **state) {
    (void)state;
    enum { M = 5, N = 4, K = 3, PAD = 2 };
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            /* Stored shapes: A is M x K (or K x M), B is K x N (or N x K). */
            int lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
            float a[(M > K ? M : K) * (M + K + PAD)], b[(N > K ? N : K) * (N + K + PAD)];
            float c[M * (N + PAD)], want[M * (N + PAD)];
            prime_fill_random(a, sizeof a / sizeof a[0], 1);
            prime_fill_random(b, sizeof b / sizeof b[0], 2);
            prime_fill_random(c, sizeof c / sizeof c[0], 3);
            memcpy(want, c, sizeof c);
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double sum = 0.0;
                    for (int l = 0; l < K; l++)
                        sum += (double)at(a, lda, ta, i, l) * at(b, ldb, tb, l, j);
                    want[i * ldc + j] = (float)(1.5 * sum + 0.5 * c[i * ldc + j]);
                }
            }
            prime_gemm(ta, tb, M, N, K, 1.5f, a, lda, b, ldb, 0.5f, c, ldc);
            assert_true(prime_max_rel_error(c, want, sizeof c / sizeof c[0]) < 1e-5);
            /* The padding columns of C are untouched. */
            for (int i = 0; i < M; i++)
                for (int j = N; j < ldc; j++)
                    assert_true(c[i * ldc + j] == want[i * ldc + j]);
        }
    }
}

static void test_gemm_edge_cases(void **state) {
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};
    float c[4] = {1, 2, 3, 4};
    /* k = 0: C = beta C. */
    prime_gemm(0, 0, 2, 2, 0, 1.0f, a, 1, b, 2, 2.0f, c, 2);
    assert_true(c[0] == 2 && c[1] == 4 && c[2] == 6 && c[3] == 8);
    prime_gemm(0, 0, 2, 2, 0, 1.0f, a, 1, b, 2, 0.0f, c, 2);
    assert_true(c[0] == 0 && c[3] == 0);
    /* A leading dimension too small does nothing (and prints nothing). */
    float keep[4] = {5, 6, 7, 8};
    memcpy(c, keep, sizeof c);
    prime_gemm(0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2);
    assert_memory_equal(c, keep, sizeof c);
    prime_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 1);
    assert_memory_equal(c, keep, sizeof c);
    /* Identity B: C = A. */
    prime_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    assert_memory_equal(c, a, sizeof c);
}

/* scores(Q[s, a, e], K[k, a, e]) -> S[a, s, k]: a batch over the heads a
 * reading Q and K in place (lda = a * e, batch stride e), K transposed;
 * then a batch that folds into M (B shared, rows contiguous): the same
 * as one GEMM per batch. */
static void test_gemm_batched(void **state) {
    (void)state;
    enum { S = 4, A = 3, E = 2, KK = 5 };
    float q[S * A * E], k[KK * A * E], c[A * S * KK], want[A * S * KK];
    prime_fill_random(q, S * A * E, 4);
    prime_fill_random(k, KK * A * E, 5);
    prime_fill_random(c, A * S * KK, 6);
    for (int a = 0; a < A; a++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < KK; j++) {
                double sum = 0.0;
                for (int e = 0; e < E; e++)
                    sum += (double)q[(i * A + a) * E + e] * k[(j * A + a) * E + e];
                want[(a * S + i) * KK + j] = (float)(0.5 * sum + c[(a * S + i) * KK + j]);
            }
    prime_gemm_batched(0, 1, A, S, KK, E, 0.5f, q, A * E, E, k, A * E, E, 1.0f, c, KK, S * KK);
    assert_true(prime_max_rel_error(c, want, A * S * KK) < 1e-5);

    float x[A * S * E], w[E * KK], y[A * S * KK], y1[A * S * KK];
    prime_fill_random(x, A * S * E, 7);
    prime_fill_random(w, E * KK, 8);
    memset(y, 0, sizeof y);
    memset(y1, 0, sizeof y1);
    prime_gemm_batched(0, 0, A, S, KK, E, 1.0f, x, E, S * E, w, KK, 0, 0.0f, y, KK, S * KK);
    for (int a = 0; a < A; a++)
        prime_gemm(0, 0, S, KK, E, 1.0f, x + a * S * E, E, w, KK, 0.0f, y1 + a * S * KK, KK);
    assert_true(prime_max_rel_error(y, y1, A * S * KK) < 1e-6);
    /* fp64 */
    double qd[S * A * E], kd[KK * A * E], cd[A * S * KK];
    for (int i = 0; i < S * A * E; i++)
        qd[i] = q[i];
    for (int i = 0; i < KK * A * E; i++)
        kd[i] = k[i];
    memset(cd, 0, sizeof cd);
    prime_dgemm_batched(0, 1, A, S, KK, E, 1.0, qd, A * E, E, kd, A * E, E, 0.0, cd, KK, S * KK);
    double d = cd[(2 * S + 3) * KK + 4], ref = 0.0;
    for (int e = 0; e < E; e++)
        ref += qd[(3 * A + 2) * E + e] * kd[(4 * A + 2) * E + e];
    assert_true(d == ref || (d - ref < 1e-12 && ref - d < 1e-12));
}

static void test_add(void **state) {
    (void)state;
    float d[5] = {1, 2, 3, 4, 5}, s[5] = {10, 20, 30, 40, 50};
    prime_add(d, s, 5);
    assert_true(d[0] == 11 && d[2] == 33 && d[4] == 55);
    prime_add(d, s, 0);
    assert_true(d[0] == 11);
}

/* Fills x with its own flat indices. */
static void iota(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i;
}

static void test_copy_box_1d(void **state) {
    (void)state;
    float src[10], dst[8];
    iota(src, 10);
    for (int i = 0; i < 8; i++)
        dst[i] = -1;
    long ext[1] = {4}, ss[1] = {10}, so[1] = {5}, ds[1] = {8}, dof[1] = {2};
    prime_copy_box(1, ext, src, ss, so, dst, ds, dof);
    float want[8] = {-1, -1, 5, 6, 7, 8, -1, -1};
    assert_memory_equal(dst, want, sizeof want);
}

static void test_copy_box_2d(void **state) {
    (void)state;
    float src[4 * 6], dst[5 * 5];
    iota(src, 24);
    for (int i = 0; i < 25; i++)
        dst[i] = -1;
    long ext[2] = {2, 3}, ss[2] = {4, 6}, so[2] = {1, 2}, ds[2] = {5, 5}, dof[2] = {3, 1};
    prime_copy_box(2, ext, src, ss, so, dst, ds, dof);
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            int inside = i >= 3 && i < 5 && j >= 1 && j < 4;
            float want = inside ? (float)((i - 3 + 1) * 6 + (j - 1 + 2)) : -1.0f;
            assert_true(dst[i * 5 + j] == want);
        }
    }
}

static void test_copy_box_3d(void **state) {
    (void)state;
    enum { S0 = 3, S1 = 4, S2 = 5, D0 = 2, D1 = 3, D2 = 6 };
    float src[S0 * S1 * S2], dst[D0 * D1 * D2];
    iota(src, S0 * S1 * S2);
    for (int i = 0; i < D0 * D1 * D2; i++)
        dst[i] = -1;
    long ext[3] = {2, 2, 3}, ss[3] = {S0, S1, S2}, so[3] = {1, 2, 1};
    long ds[3] = {D0, D1, D2}, dof[3] = {0, 1, 3};
    prime_copy_box(3, ext, src, ss, so, dst, ds, dof);
    for (int i = 0; i < D0; i++) {
        for (int j = 0; j < D1; j++) {
            for (int k = 0; k < D2; k++) {
                int inside = j >= 1 && j < 3 && k >= 3 && k < 6;
                float want = -1.0f;
                if (inside)
                    want = (float)(((i + 1) * S1 + (j - 1 + 2)) * S2 + (k - 3 + 1));
                assert_true(dst[(i * D1 + j) * D2 + k] == want);
            }
        }
    }
}

static void test_copy_box_rank0_and_rank8(void **state) {
    (void)state;
    float one = 7, out = 0;
    prime_copy_box(0, NULL, &one, NULL, NULL, &out, NULL, NULL);
    assert_true(out == 7);

    /* Rank 8: 2^8 elements, copy the upper half-box (offset 1) of every
     * dimension whose extent is 1, into a zero-offset box. */
    float src[256], dst[256];
    iota(src, 256);
    for (int i = 0; i < 256; i++)
        dst[i] = -1;
    long ext[8], shape[8], so[8], dof[8];
    for (int d = 0; d < 8; d++) {
        shape[d] = 2;
        ext[d] = d % 2 ? 2 : 1;
        so[d] = d % 2 ? 0 : 1;
        dof[d] = 0;
    }
    prime_copy_box(8, ext, src, shape, so, dst, shape, dof);
    int copied = 0;
    for (int flat = 0; flat < 256; flat++) {
        int inside = 1, from = 0;
        for (int d = 0; d < 8; d++) {
            int x = (flat >> (7 - d)) & 1;
            if (x >= ext[d])
                inside = 0;
            from = from * 2 + x + (int)so[d];
        }
        assert_true(dst[flat] == (inside ? (float)from : -1.0f));
        copied += inside;
    }
    assert_int_equal(copied, 16);
}

static void test_copy_box_out_of_bounds(void **state) {
    (void)state;
    float src[4] = {1, 2, 3, 4}, dst[4] = {0};
    long ext[1] = {3}, s[1] = {4}, off_bad[1] = {2}, off_ok[1] = {0}, neg[1] = {-1};
    prime_copy_box(1, ext, src, s, off_bad, dst, s, off_ok);
    prime_copy_box(1, ext, src, s, off_ok, dst, s, off_bad);
    prime_copy_box(1, ext, src, s, neg, dst, s, off_ok);
    prime_copy_box(9, ext, src, s, off_ok, dst, s, off_ok);
    for (int i = 0; i < 4; i++)
        assert_true(dst[i] == 0);
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void test_fill_random(void **state) {
    (void)state;
    enum { N = 10000 };
    static float a[N], b[N], c[N];
    prime_fill_random(a, N, 1234);
    prime_fill_random(b, N, 1234);
    prime_fill_random(c, N, 1235);
    assert_memory_equal(a, b, sizeof a);
    assert_true(memcmp(a, c, sizeof a) != 0);
    double mean = 0.0;
    float lo = 1, hi = -1;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= -1.0f && a[i] < 1.0f);
        mean += a[i];
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
    }
    mean /= N;
    assert_true(mean > -0.05 && mean < 0.05);
    assert_true(lo < -0.99f && hi > 0.99f);
    /* The documented formula, element by element. */
    uint64_t s = 1234;
    for (int i = 0; i < 100; i++) {
        float want = (float)((double)(splitmix64(&s) >> 40) / 8388608.0 - 1.0);
        assert_true(a[i] == want);
    }
    /* A prefix of a longer fill is the shorter fill. */
    prime_fill_random(b, 10, 1234);
    assert_memory_equal(a, b, 10 * sizeof(float));
}

static void test_max_rel_error(void **state) {
    (void)state;
    float a[3] = {1, 2, 3}, b[3] = {1, 2, 3}, c[3] = {1, 2, 4}, z[3] = {0, 0, 0};
    assert_true(prime_max_rel_error(a, b, 3) == 0.0);
    /* max |a - c| = 1, max |c| = 4. */
    assert_true(prime_max_rel_error(a, c, 3) == 0.25);
    assert_true(prime_max_rel_error(c, a, 3) == 1.0 / 3.0);
    assert_true(prime_max_rel_error(a, b, 0) == 0.0);
    /* A zero reference divides by tiny, not by zero. */
    double e = prime_max_rel_error(a, z, 3);
    assert_true(isfinite(e) && e > 1e20);
    float n[3] = {1, NAN, 3};
    assert_true(isnan(prime_max_rel_error(n, b, 3)));
    assert_true(isnan(prime_max_rel_error(b, n, 3)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_transposes),
        cmocka_unit_test(test_gemm_edge_cases),
        cmocka_unit_test(test_gemm_batched),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_copy_box_1d),
        cmocka_unit_test(test_copy_box_2d),
        cmocka_unit_test(test_copy_box_3d),
        cmocka_unit_test(test_copy_box_rank0_and_rank8),
        cmocka_unit_test(test_copy_box_out_of_bounds),
        cmocka_unit_test(test_fill_random),
        cmocka_unit_test(test_max_rel_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
