/*
 * prime_cuda_dev.h — the CUDA calls of the CUDA runtime, behind a C
 * interface (prime_cuda_dev.cu, compiled by nvcc), so that the rest of
 * the runtime (prime_cuda.c) stays C and needs no CUDA header.
 *
 * A PcuDev is one virtual device: a GPU, a compute stream, a
 * communication stream, a cuBLAS handle bound to the compute stream by
 * each kernel, and a pool of timing events for the kernels of the
 * current phase. Streams are named by PCU_COMPUTE and PCU_COMM.
 *
 * Every function returns 0, or non-zero after writing into err (cap
 * bytes) the call that failed and CUDA's or cuBLAS's word for why:
 * "cudaMallocAsync: out of memory (cudaErrorMemoryAllocation)".
 * Functions that enqueue work return once it is enqueued; only
 * pcu_upload, pcu_download and pcu_finish wait for the device.
 *
 * pcu_host.c implements the same interface on the host (memory from
 * malloc, every "stream" in order on the calling thread), so that the
 * CUDA table's matching, collectives and counters run in tests on
 * machines without a GPU (the library prime_rt_cuda_host).
 */
#ifndef PRIME_CUDA_DEV_H
#define PRIME_CUDA_DEV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PCU_COMPUTE = 0, PCU_COMM = 1 };

typedef struct PcuDev PcuDev;
typedef struct PcuEvent PcuEvent;

/* The tile kernels of M.cu (prime_cuda_run_phase, prime_cuda.h). */
typedef int (*PcuPhaseFn)(int index, int fused, void *cublas, void *stream, float *const *out,
                          const float *const *const *in, const long *off);

/* The number of CUDA devices; non-zero (with err) when there is none or
 * the driver cannot say. */
int pcu_device_count(int *count, char *err, size_t cap);
/* The name of GPU `gpu` ("NVIDIA H200"), "" when unknown. */
void pcu_device_name(int gpu, char *name, size_t cap);

int pcu_open(int gpu, PcuDev **out, char *err, size_t cap);
void pcu_close(PcuDev *d);
/* The cudaStream_t of `stream` of d (for the NCCL calls,
 * prime_cuda_nccl_dev.cu); NULL in the host emulation. */
void *pcu_stream(PcuDev *d, int stream);

/* n floats on the compute stream, zero or (neg_inf) -inf; freed on the
 * compute stream. */
int pcu_alloc(PcuDev *d, float **p, size_t n, int neg_inf, char *err, size_t cap);
int pcu_free(PcuDev *d, float *p, char *err, size_t cap);
/* n floats between the host and the device, on the compute stream,
 * waited for. */
int pcu_upload(PcuDev *d, float *dst, const float *src, size_t n, char *err, size_t cap);
int pcu_download(PcuDev *d, float *dst, const float *src, size_t n, char *err, size_t cap);

/* A box between two device arrays (prime_copy_box's arguments), at most
 * 8 dimensions, on `stream`. */
int pcu_copy_box(PcuDev *d, int stream, int rank, const long *ext, const float *src,
                 const long *src_shape, const long *src_off, float *dst, const long *dst_shape,
                 const long *dst_off, char *err, size_t cap);
/* dst = src (n floats, device to device) on `stream`. */
int pcu_copy(PcuDev *d, int stream, float *dst, const float *src, size_t n, char *err, size_t cap);
/* dst[i] += src[i], or the maximum, on `stream`. */
int pcu_combine(PcuDev *d, int stream, float *dst, const float *src, size_t n, int max, char *err,
                size_t cap);
/* The emitted C kernels of a phase (PrimeKernelFn) and of a fused group
 * (PrimeFusedFn). */
typedef void (*PcuHostFn)(float *out, const float *const *in, const long *off);
typedef void (*PcuFusedHostFn)(float *const *out, const float *const *const *in, const long *off);

/* One kernel call: phase `index`'s own kernel on out[0] and in[0]
 * (fused 0), or the fused kernel of the group first at phase `index` on
 * each member's out[j] and in[j] (fused 1); host_fn or host_fused is its
 * C function, which the host emulation runs. */
typedef struct PcuCall {
    int index, fused;
    const char *name; /* the phase's, for the trace (pcu_finish) */
    PcuHostFn host_fn;
    PcuFusedHostFn host_fused;
    float *const *out;
    const float *const *const *in;
    const long *off;
} PcuCall;

/* Runs fn(call's index, fused, ...) on the compute stream between two
 * timing events; a non-zero return of fn is reported as a cuBLAS status
 * or a failed launch. The host emulation (pcu_host.c) runs the call's C
 * function instead. */
int pcu_kernel(PcuDev *d, PcuPhaseFn fn, const PcuCall *call, char *err, size_t cap);

/* A new event recorded on `stream` of d. */
int pcu_mark(PcuDev *d, int stream, PcuEvent **ev, char *err, size_t cap);
/* `stream` of d waits for ev (which any device recorded). */
int pcu_after(PcuDev *d, int stream, const PcuEvent *ev, char *err, size_t cap);
void pcu_event_free(PcuEvent *ev);

/* One kernel call's interval on the device: its PcuCall name, begin and
 * end on the host's monotonic clock (CLOCK_MONOTONIC, prime_clock_ns). */
typedef void (*PcuSpanFn)(void *ctx, const char *name, uint64_t begin_ns, uint64_t end_ns);

/* Waits for both streams; *kernel_ns: the device time of the kernels
 * run since the last pcu_finish; span (unless NULL) is called for each
 * of them, in the order they ran, with ctx. */
int pcu_finish(PcuDev *d, uint64_t *kernel_ns, PcuSpanFn span, void *ctx, char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
