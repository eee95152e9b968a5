/*
 * prime_math.h — the intrinsics of the .prime language and their
 * derivatives, as inline float functions for emitted kernels (and fp64
 * ones, suffixed _d, for the dense reference).
 *
 * gelu is the exact (erf) form; each *_grad is the derivative of the
 * function of the same name; step is the derivative of relu (0 at 0);
 * eq(x, y) is 1 where x == y, else 0 (the derivative of a maximum selects
 * the elements equal to it).
 */
#ifndef PRIME_MATH_H
#define PRIME_MATH_H

#include <math.h>

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
    return 1.1283791670955126f * expf(-x * x);
}
static inline float prime_sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
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
           x * 0.3989422804014327f * expf(-0.5f * x * x);
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
