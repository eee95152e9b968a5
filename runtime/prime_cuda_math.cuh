/*
 * prime_cuda_math.cuh — the intrinsics of the language as CUDA device
 * functions, for the kernels primec --target cuda prints (the fp32 side
 * of prime_math.h, the same formulas; rsqrtf for rsqrt on the device),
 * usable on the host too (a GEMM's alpha), the offsets of a tile
 * passed to a kernel by value, and the conversion of a GEMM's operands to
 * bf16 or f16 (--dtype).
 */
#ifndef PRIME_CUDA_MATH_CUH
#define PRIME_CUDA_MATH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

/* fp32 to the narrow GEMM operand types, rounding to nearest even (as
 * runtime/pcu_host_gemm.c rounds in the host emulation). */
__device__ __forceinline__ void prime_cuda_round(__nv_bfloat16 *d, float x) {
    *d = __float2bfloat16_rn(x);
}
__device__ __forceinline__ void prime_cuda_round(__half *d, float x) {
    *d = __float2half_rn(x);
}

template <typename T>
__global__ void prime_cuda_narrow_kernel(T *__restrict__ dst, const float *__restrict__ src, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        prime_cuda_round(&dst[i], src[i]);
}

/* *dst: n elements of src rounded to T (__nv_bfloat16 or __half), in a
 * block of the device's stream-ordered pool allocated and written on
 * stream s; 0, or -1 when the allocation or the launch failed (then *dst
 * is what prime_cuda_narrow_free frees). */
template <typename T> inline int prime_cuda_narrow(cudaStream_t s, const float *src, long n, T **dst) {
    *dst = NULL;
    if (cudaMallocAsync((void **)dst, (size_t)(n > 0 ? n : 1) * sizeof(T), s) != cudaSuccess) {
        *dst = NULL;
        return -1;
    }
    long blocks = (n + 255) / 256;
    blocks = blocks < 1 ? 1 : blocks > 4096 ? 4096 : blocks;
    prime_cuda_narrow_kernel<T><<<(unsigned)blocks, 256, 0, s>>>(*dst, src, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* Frees both operands' blocks on s, after the work queued there. */
template <typename T> inline void prime_cuda_narrow_free(cudaStream_t s, T *a, T *b) {
    if (a)
        (void)cudaFreeAsync(a, s);
    if (b)
        (void)cudaFreeAsync(b, s);
}

/* A tile's global offset per operator dimension (off[] of the C kernels),
 * passed by value: 8 is IR_MAX_DIMS. */
typedef struct PrimeCudaOff {
    long d[8];
} PrimeCudaOff;

__host__ __device__ __forceinline__ float prime_rsqrt(float x) {
#ifdef __CUDA_ARCH__
    return rsqrtf(x);
#else
    return 1.0f / sqrtf(x);
#endif
}
__host__ __device__ __forceinline__ float prime_rsqrt_grad(float x) {
    return -0.5f / (x * sqrtf(x));
}
__host__ __device__ __forceinline__ float prime_tanh_grad(float x) {
    float t = tanhf(x);
    return 1.0f - t * t;
}
__host__ __device__ __forceinline__ float prime_erf_grad(float x) {
    return 1.1283791670955126f * expf(-x * x);
}
__host__ __device__ __forceinline__ float prime_sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}
__host__ __device__ __forceinline__ float prime_sigmoid_grad(float x) {
    float s = prime_sigmoid(x);
    return s * (1.0f - s);
}
__host__ __device__ __forceinline__ float prime_relu(float x) {
    return x > 0.0f ? x : 0.0f;
}
__host__ __device__ __forceinline__ float prime_step(float x) {
    return x > 0.0f ? 1.0f : 0.0f;
}
__host__ __device__ __forceinline__ float prime_eq(float x, float y) {
    return x == y ? 1.0f : 0.0f;
}
__host__ __device__ __forceinline__ float prime_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
__host__ __device__ __forceinline__ float prime_gelu_grad(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
           x * 0.3989422804014327f * expf(-0.5f * x * x);
}
__host__ __device__ __forceinline__ float prime_silu(float x) {
    return x * prime_sigmoid(x);
}
__host__ __device__ __forceinline__ float prime_silu_grad(float x) {
    float s = prime_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* The sum (prime_cuda_block_sum) or the maximum (prime_cuda_block_max)
 * of v over the threads of a block of a multiple of 32 threads, at most
 * 1024, in a fixed order (each warp's by shuffles, then warp 0 over the
 * warps'), so that a row's value does not depend on timing; every thread
 * returns it. red: __shared__ room for blockDim.x / 32 doubles; every
 * thread of the block calls it (it has barriers), and red may be used
 * again as soon as it returns. The fused kernels of rows longer than a
 * thread keeps (kernel_cuda.c) reduce with these. */
template <int MAX>
__device__ __forceinline__ double prime_cuda_block_reduce(double v, double *red) {
    for (int o = 16; o > 0; o >>= 1) {
        double w = __shfl_down_sync(0xffffffffu, v, o);
        v = MAX ? fmax(v, w) : v + w;
    }
    const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if ((threadIdx.x & 31) == 0)
        red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (int)threadIdx.x < nwarps ? red[threadIdx.x] : (MAX ? -INFINITY : 0.0);
        for (int o = 16; o > 0; o >>= 1) {
            double w = __shfl_down_sync(0xffffffffu, v, o);
            v = MAX ? fmax(v, w) : v + w;
        }
        if (threadIdx.x == 0)
            red[0] = v;
    }
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}
__device__ __forceinline__ double prime_cuda_block_sum(double v, double *red) {
    return prime_cuda_block_reduce<0>(v, red);
}
__device__ __forceinline__ double prime_cuda_block_max(double v, double *red) {
    return prime_cuda_block_reduce<1>(v, red);
}

#endif
