/*
 * prime_cuda_math.cuh — the intrinsics of the language as CUDA device
 * functions, for the kernels primec --target cuda prints (the fp32 side
 * of prime_math.h, the same formulas; rsqrtf for rsqrt on the device),
 * usable on the host too (a GEMM's alpha), and the offsets of a tile
 * passed to a kernel by value.
 */
#ifndef PRIME_CUDA_MATH_CUH
#define PRIME_CUDA_MATH_CUH

#include <math.h>

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

#endif
