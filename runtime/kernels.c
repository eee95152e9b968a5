/*
 * kernels.c — the dense kernels emitted programs call: GEMM through
 * OpenBLAS's cblas, elementwise add, box copies between row-major arrays,
 * deterministic random fill and the max-norm relative error.
 *
 * These functions return nothing, so a call they cannot perform safely
 * (bad leading dimension, a box outside its array) does nothing at all
 * rather than let the BLAS print an error or touch memory out of bounds.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include "prime_rt.h"

#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int max1(int x) {
    return x > 1 ? x : 1;
}

void prime_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0 || k < 0 || !c || ldc < max1(n))
        return;
    if (k == 0) {
        /* Nothing to multiply: C = beta * C, and beta 0 clears C. */
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                float *x = &c[(size_t)i * (size_t)ldc + (size_t)j];
                *x = beta == 0.0f ? 0.0f : beta * *x;
            }
        }
        return;
    }
    if (!a || !b || lda < max1(trans_a ? m : k) || ldb < max1(trans_b ? k : n))
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void prime_dgemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a,
                 int lda, const double *b, int ldb, double beta, double *c, int ldc) {
    if (m <= 0 || n <= 0 || k < 0 || !c || ldc < max1(n))
        return;
    if (k == 0) {
        /* Nothing to multiply: C = beta * C, and beta 0 clears C. */
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double *x = &c[(size_t)i * (size_t)ldc + (size_t)j];
                *x = beta == 0.0 ? 0.0 : beta * *x;
            }
        }
        return;
    }
    if (!a || !b || lda < max1(trans_a ? m : k) || ldb < max1(trans_b ? k : n))
        return;
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Whether batch b's rows of A and C follow batch b-1's, with B the same. */
static int folds_into_m(int trans_a, int batch, int m, int lda, long stride_a, long stride_b,
                        int ldc, long stride_c) {
    return batch > 1 && !trans_a && stride_b == 0 && stride_a == (long)m * lda &&
           stride_c == (long)m * ldc && (long)m * batch <= 0x7fffffffL;
}

void prime_gemm_batched(int trans_a, int trans_b, int batch, int m, int n, int k, float alpha,
                        const float *a, int lda, long stride_a, const float *b, int ldb,
                        long stride_b, float beta, float *c, int ldc, long stride_c) {
    if (batch <= 0 || !a || !b || !c)
        return;
    if (folds_into_m(trans_a, batch, m, lda, stride_a, stride_b, ldc, stride_c)) {
        prime_gemm(trans_a, trans_b, m * batch, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    for (int i = 0; i < batch; i++)
        prime_gemm(trans_a, trans_b, m, n, k, alpha, a + (size_t)i * (size_t)stride_a, lda,
                   b + (size_t)i * (size_t)stride_b, ldb, beta, c + (size_t)i * (size_t)stride_c,
                   ldc);
}

void prime_dgemm_batched(int trans_a, int trans_b, int batch, int m, int n, int k, double alpha,
                         const double *a, int lda, long stride_a, const double *b, int ldb,
                         long stride_b, double beta, double *c, int ldc, long stride_c) {
    if (batch <= 0 || !a || !b || !c)
        return;
    if (folds_into_m(trans_a, batch, m, lda, stride_a, stride_b, ldc, stride_c)) {
        prime_dgemm(trans_a, trans_b, m * batch, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    for (int i = 0; i < batch; i++)
        prime_dgemm(trans_a, trans_b, m, n, k, alpha, a + (size_t)i * (size_t)stride_a, lda,
                    b + (size_t)i * (size_t)stride_b, ldb, beta, c + (size_t)i * (size_t)stride_c,
                    ldc);
}

void prime_add(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

void prime_max(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = fmaxf(dst[i], src[i]);
}

void prime_fill_neg_inf(float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = -INFINITY;
}

/* Boxes must lie inside their arrays and must not overlap each other.
 * Rank 0 copies the single element; ranks above PRIME_RT_MAX_RANK (8)
 * copy nothing. */
void prime_copy_box(int rank, const long *extent, const float *src, const long *src_shape,
                    const long *src_off, float *dst, const long *dst_shape, const long *dst_off) {
    if (!src || !dst || rank < 0 || rank > PRIME_RT_MAX_RANK)
        return;
    if (rank == 0) {
        dst[0] = src[0];
        return;
    }
    if (!extent || !src_shape || !src_off || !dst_shape || !dst_off)
        return;
    size_t sstride[PRIME_RT_MAX_RANK], dstride[PRIME_RT_MAX_RANK];
    size_t ss = 1, ds = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (extent[d] <= 0)
            return;
        if (src_off[d] < 0 || src_off[d] > src_shape[d] - extent[d])
            return;
        if (dst_off[d] < 0 || dst_off[d] > dst_shape[d] - extent[d])
            return;
        sstride[d] = ss;
        dstride[d] = ds;
        ss *= (size_t)src_shape[d];
        ds *= (size_t)dst_shape[d];
    }
    /* idx walks every dimension but the last, which is one memcpy. */
    long idx[PRIME_RT_MAX_RANK] = {0};
    size_t row = (size_t)extent[rank - 1] * sizeof(float);
    for (;;) {
        size_t so = 0, dof = 0;
        for (int d = 0; d < rank; d++) {
            so += (size_t)(src_off[d] + idx[d]) * sstride[d];
            dof += (size_t)(dst_off[d] + idx[d]) * dstride[d];
        }
        memcpy(dst + dof, src + so, row);
        int d = rank - 2;
        while (d >= 0) {
            if (++idx[d] < extent[d])
                break;
            idx[d] = 0;
            d--;
        }
        if (d < 0)
            return;
    }
}

/* Element i is k_i * 2^-23 - 1, exactly, where k_i is the top 24 bits of
 * the (i+1)-th output of splitmix64 started from state `seed`. */
float prime_random_at(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (float)(z >> 40) / 8388608.0f - 1.0f;
}

void prime_fill_random(float *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = prime_random_at(seed, i);
}

static double absd(double x) {
    return x < 0 ? -x : x;
}

/* tiny is 1e-30. A NaN in either input makes the result NaN, so that
 * `err <= bound` fails; n == 0 gives 0. */
double prime_max_rel_error(const float *a, const float *b, size_t n) {
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = absd((double)a[i] - (double)b[i]);
        double r = absd((double)b[i]);
        if (d != d || r != r)
            return (double)NAN;
        if (d > max_diff)
            max_diff = d;
        if (r > max_ref)
            max_ref = r;
    }
    return max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
}

void prime_set_blas_threads(int n) {
    openblas_set_num_threads(n < 1 ? 1 : n);
}

int prime_blas_threads(void) {
    int n = openblas_get_num_threads();
    return n < 1 ? 1 : n;
}

/* OpenBLAS's builds for many processors (Debian's) pick their kernels
 * from the processor's model number when the library loads; a model newer
 * than the library (or a virtual machine's generic name) gets the oldest
 * kernels, SSE3 ("Prescott"), 4-5x slower than the AVX-512 ones on the
 * same processor. The kernels can only be chosen before the library
 * loads, through OPENBLAS_CORETYPE: so a program whose processor has more
 * than its kernels use sets it and executes itself again, once. */
static int core_rank(const char *name) {
    static const char *const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids"};
    for (int i = 0; name && i < (int)(sizeof avx2 / sizeof *avx2); ++i)
        if (strcasecmp(name, avx2[i]) == 0)
            return i < 2 ? 1 : 2;
    return 0;
}

static const char *best_core(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

const char *prime_blas_core(void) {
    return openblas_get_corename();
}

const char *prime_blas_better_core(void) {
    const char *best = best_core();
    if (getenv("OPENBLAS_CORETYPE") || !best ||
        core_rank(openblas_get_corename()) >= core_rank(best))
        return NULL;
    return best;
}

void prime_blas_choose_core(char **argv) {
    const char *best = prime_blas_better_core();
    if (!best || !argv || !argv[0])
        return;
    if (setenv("OPENBLAS_CORETYPE", best, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* No /proc: go on with the library's own choice. */
    unsetenv("OPENBLAS_CORETYPE");
}

/* What OpenBLAS maps for each thread that runs a GEMM: BUFFER_SIZE
 * (32 << 22 bytes on x86_64 since 0.3.x) and one page, mapped on the
 * thread's first GEMM and kept until the process ends. Debian's 0.3.21
 * retries that allocation for ever when it fails. */
#define BLAS_BUFFER_BYTES (((size_t)32 << 22) + 4096)

size_t prime_blas_buffer_bytes(void) {
    return BLAS_BUFFER_BYTES;
}

static int limited(int resource, unsigned long long *bytes) {
    struct rlimit lim;
    if (getrlimit(resource, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return 0;
    if (*bytes == 0 || (unsigned long long)lim.rlim_cur < *bytes)
        *bytes = (unsigned long long)lim.rlim_cur;
    return 1;
}

int prime_blas_room(int callers, size_t extra_bytes, unsigned long long *limit_bytes) {
    unsigned long long lim = 0;
    int as = limited(RLIMIT_AS, &lim);
    int data = limited(RLIMIT_DATA, &lim);
    if (limit_bytes)
        *limit_bytes = lim;
    /* Without a limit the buffers cannot run into one. */
    if (!as && !data)
        return 1;
    if (callers < 1)
        callers = 1;
    int want = callers + (extra_bytes > 0);
    void **maps = calloc((size_t)want, sizeof *maps);
    if (!maps)
        return 0;
    /* The same mappings OpenBLAS would make, one per calling thread, and
     * one of extra_bytes, released again at once. */
    int got = 0;
    while (got < want) {
        size_t bytes = got < callers ? BLAS_BUFFER_BYTES : extra_bytes;
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        maps[got++] = p;
    }
    for (int i = 0; i < got; ++i)
        munmap(maps[i], i < callers ? BLAS_BUFFER_BYTES : extra_bytes);
    free(maps);
    return got == want;
}
