/*
 * gemm_bench.cu — cuBLAS alone at the shapes of a program's GEMM nodes,
 * for tests/gpu/run.sh: reads lines "m n k batch ta tb" (a row-major
 * C[m x n] += op(A) op(B), `batch` strided copies, ta/tb 0 or 1) from
 * stdin and prints, per line, the median time of 10 calls after 3
 * warm-ups and the TFLOP/s it makes, in the math mode the runtime uses
 * (cuBLAS's default, fp32).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gemm_bench: %s: %s\n", #call, cudaGetErrorString(e_));                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int bench(cublasHandle_t h, long m, long n, long k, long batch, int ta, int tb) {
    float *a = NULL, *b = NULL, *c = NULL;
    TRY(cudaMalloc(&a, sizeof(float) * (size_t)(m * k * batch)));
    TRY(cudaMalloc(&b, sizeof(float) * (size_t)(k * n * batch)));
    TRY(cudaMalloc(&c, sizeof(float) * (size_t)(m * n * batch)));
    TRY(cudaMemset(a, 0, sizeof(float) * (size_t)(m * k * batch)));
    TRY(cudaMemset(b, 0, sizeof(float) * (size_t)(k * n * batch)));
    TRY(cudaMemset(c, 0, sizeof(float) * (size_t)(m * n * batch)));
    const float alpha = 1.0f, beta = 1.0f;
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
    int lda = ta ? (int)m : (int)k, ldb = tb ? (int)k : (int)n;
    cudaEvent_t t0, t1;
    TRY(cudaEventCreate(&t0));
    TRY(cudaEventCreate(&t1));
    float ms[10];
    for (int it = 0; it < 13; ++it) {
        TRY(cudaEventRecord(t0));
        cublasStatus_t st = cublasSgemmStridedBatched(
            h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
            (int)k, &alpha, b, ldb, k * n, a, lda, m * k, &beta, c, (int)n, m * n, (int)batch);
        if (st != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "gemm_bench: cublasSgemmStridedBatched: %s\n",
                    cublasGetStatusString(st));
            return 1;
        }
        TRY(cudaEventRecord(t1));
        TRY(cudaEventSynchronize(t1));
        if (it >= 3)
            TRY(cudaEventElapsedTime(&ms[it - 3], t0, t1));
    }
    std::sort(ms, ms + 10);
    double med = 0.5 * (ms[4] + ms[5]);
    double tflops = 2.0 * (double)m * (double)n * (double)k * (double)batch / (med * 1e-3) / 1e12;
    printf("gemm m %ld n %ld k %ld batch %ld trans %d%d: %.4f ms, %.2f TFLOP/s\n", m, n, k, batch,
           ta, tb, med, tflops);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}

int main(void) {
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm_bench: cublasCreate failed (no CUDA device?)\n");
        return 2;
    }
    long m, n, k, batch;
    int ta, tb, rc = 0;
    while (rc == 0 && scanf("%ld %ld %ld %ld %d %d", &m, &n, &k, &batch, &ta, &tb) == 6)
        rc = bench(h, m, n, k, batch, ta, tb);
    cublasDestroy(h);
    return rc;
}
