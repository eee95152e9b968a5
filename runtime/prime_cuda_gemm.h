/*
 * prime_cuda_gemm.h — the GEMMs of a CUDA program built with --dtype bf16
 * or f16 (docs/cuda.md), on the host: the C kernels of such a program
 * (which the host emulation runs, prime_rt_cuda_host) and its dense fp32
 * reference (the yardstick of --check) call these in place of prime_gemm
 * and prime_gemm_batched (prime_rt.h, the same arguments after the type).
 *
 * The semantics are those of the .cu's GEMMs: A and B rounded to the
 * type (bf16: round to nearest even on the fp32 bit pattern, as
 * __float2bfloat16_rn; f16: IEEE binary16, round to nearest even, with
 * its subnormals and overflow to infinity, as __float2half_rn), then
 * cublasGemmEx / cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F: the
 * products of two rounded values are exact in fp32 and are summed in
 * fp32, into the fp32 output. Here the sums are OpenBLAS's sgemm over
 * fp32 copies of the rounded operands (its order of summation, not
 * cuBLAS's).
 */
#ifndef PRIME_CUDA_GEMM_H
#define PRIME_CUDA_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

/* The operand types (primec's --dtype; 0 is fp32, which calls prime_gemm). */
enum { PRIME_DTYPE_F32 = 0, PRIME_DTYPE_BF16 = 1, PRIME_DTYPE_F16 = 2 };

/* x rounded to the type (PRIME_DTYPE_F32: x itself), as an fp32 value. */
float prime_round_dtype(int type, float x);

void prime_gemm_narrow(int type, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc);
void prime_gemm_batched_narrow(int type, int trans_a, int trans_b, int batch, int m, int n, int k,
                               float alpha, const float *a, int lda, long stride_a, const float *b,
                               int ldb, long stride_b, float beta, float *c, int ldc,
                               long stride_c);

/* For tests of the host emulation (pcu_host.c, PCU_HOST_GEMM): the type
 * the calling thread's GEMMs round to instead of the one they are given
 * (-1: the given one). */
void prime_gemm_narrow_override(int type);

#ifdef __cplusplus
}
#endif

#endif
