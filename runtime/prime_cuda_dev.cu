/*
 * prime_cuda_dev.cu — the CUDA calls of the CUDA runtime (see
 * prime_cuda_dev.h): streams, stream-ordered memory, the box copy and
 * combine kernels, events, and the kernels' timing.
 *
 * Memory comes from the device's default pool (cudaMallocAsync on the
 * compute stream), whose release threshold is raised so that a tile
 * freed in one step is reused in the next without a trip to the driver.
 */
#include "prime_cuda_dev.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCU_THREADS 256
#define PCU_MAX_BLOCKS 4096
#define PCU_MAX_RANK 8

struct PcuEvent {
    cudaEvent_t ev;
};

struct PcuDev {
    int gpu;
    cudaStream_t stream[2];
    cublasHandle_t blas;
    /* Timing events of the kernels of the current phase: pairs
     * (start, stop), created once and reused. */
    cudaEvent_t *marks;
    const char **names; /* per pair: its call's name */
    int nmarks;
    int cap_marks;
};

static int fail_cuda(char *err, size_t cap, const char *call, cudaError_t e) {
    snprintf(err, cap, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

#define PCU_TRY(call)                                                                              \
    do {                                                                                           \
        cudaError_t pcu_e = (call);                                                                \
        if (pcu_e != cudaSuccess)                                                                  \
            return fail_cuda(err, cap, #call, pcu_e);                                              \
    } while (0)

/* The calling thread's current GPU (a thread per virtual device). */
static int use_gpu(const PcuDev *d, char *err, size_t cap) {
    static __thread int current = -1;
    if (current == d->gpu)
        return 0;
    cudaError_t e = cudaSetDevice(d->gpu);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaSetDevice", e);
    current = d->gpu;
    return 0;
}

extern "C" int pcu_device_count(int *count, char *err, size_t cap) {
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) {
        *count = 0;
        return fail_cuda(err, cap, "cudaGetDeviceCount", e);
    }
    if (*count == 0) {
        snprintf(err, cap, "cudaGetDeviceCount: 0 devices");
        return 1;
    }
    return 0;
}

extern "C" void pcu_device_name(int gpu, char *name, size_t cap) {
    cudaDeviceProp prop;
    if (cap)
        name[0] = '\0';
    if (cudaGetDeviceProperties(&prop, gpu) == cudaSuccess)
        snprintf(name, cap, "%s", prop.name);
}

extern "C" int pcu_open(int gpu, PcuDev **out, char *err, size_t cap) {
    *out = NULL;
    PcuDev *d = (PcuDev *)calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    d->gpu = gpu;
    int rc = use_gpu(d, err, cap);
    cudaError_t e = cudaSuccess;
    if (!rc && (e = cudaStreamCreateWithFlags(&d->stream[PCU_COMPUTE], cudaStreamNonBlocking)) !=
                   cudaSuccess)
        rc = fail_cuda(err, cap, "cudaStreamCreateWithFlags", e);
    if (!rc &&
        (e = cudaStreamCreateWithFlags(&d->stream[PCU_COMM], cudaStreamNonBlocking)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaStreamCreateWithFlags", e);
    cublasStatus_t b = CUBLAS_STATUS_SUCCESS;
    if (!rc && (b = cublasCreate(&d->blas)) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, cap, "cublasCreate: %s (%s)", cublasGetStatusString(b),
                 cublasGetStatusName(b));
        d->blas = NULL;
        rc = 1;
    }
    cudaMemPool_t pool;
    if (!rc && (e = cudaDeviceGetDefaultMemPool(&pool, gpu)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaDeviceGetDefaultMemPool", e);
    uint64_t keep = UINT64_MAX;
    if (!rc &&
        (e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess)
        rc = fail_cuda(err, cap, "cudaMemPoolSetAttribute", e);
    if (rc) {
        pcu_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

extern "C" void *pcu_stream(PcuDev *d, int stream) {
    return (void *)d->stream[stream];
}

extern "C" void pcu_close(PcuDev *d) {
    if (!d)
        return;
    char err[8];
    use_gpu(d, err, sizeof err);
    for (int s = 0; s < 2; ++s)
        if (d->stream[s])
            cudaStreamSynchronize(d->stream[s]);
    for (int i = 0; i < d->cap_marks; ++i)
        cudaEventDestroy(d->marks[i]);
    free(d->marks);
    free(d->names);
    if (d->blas)
        cublasDestroy(d->blas);
    for (int s = 0; s < 2; ++s)
        if (d->stream[s])
            cudaStreamDestroy(d->stream[s]);
    free(d);
}

__global__ void pcu_fill_kernel(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)blockDim.x * gridDim.x)
        p[i] = v;
}

static unsigned blocks_for(size_t n) {
    size_t b = (n + PCU_THREADS - 1) / PCU_THREADS;
    return (unsigned)(b < 1 ? 1 : b > PCU_MAX_BLOCKS ? PCU_MAX_BLOCKS : b);
}

extern "C" int pcu_alloc(PcuDev *d, float **p, size_t n, int neg_inf, char *err, size_t cap) {
    *p = NULL;
    if (use_gpu(d, err, cap))
        return 1;
    cudaStream_t s = d->stream[PCU_COMPUTE];
    void *mem = NULL;
    PCU_TRY(cudaMallocAsync(&mem, (n ? n : 1) * sizeof(float), s));
    *p = (float *)mem;
    if (neg_inf) {
        pcu_fill_kernel<<<blocks_for(n), PCU_THREADS, 0, s>>>(*p, n, -INFINITY);
        PCU_TRY(cudaGetLastError());
    } else {
        PCU_TRY(cudaMemsetAsync(mem, 0, n * sizeof(float), s));
    }
    return 0;
}

extern "C" int pcu_free(PcuDev *d, float *p, char *err, size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    PCU_TRY(cudaFreeAsync(p, d->stream[PCU_COMPUTE]));
    return 0;
}

extern "C" int pcu_upload(PcuDev *d, float *dst, const float *src, size_t n, char *err,
                          size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    cudaStream_t s = d->stream[PCU_COMPUTE];
    PCU_TRY(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, s));
    PCU_TRY(cudaStreamSynchronize(s));
    return 0;
}

extern "C" int pcu_download(PcuDev *d, float *dst, const float *src, size_t n, char *err,
                            size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    cudaStream_t s = d->stream[PCU_COMPUTE];
    PCU_TRY(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    PCU_TRY(cudaStreamSynchronize(s));
    return 0;
}

/* A box copy's geometry, by value: element x of the box (row-major over
 * ext) goes from src[sum (src_off + i) * sstride] to dst likewise. */
typedef struct PcuBox {
    int rank;
    long ext[PCU_MAX_RANK];
    long sstride[PCU_MAX_RANK];
    long dstride[PCU_MAX_RANK];
    long sbase;
    long dbase;
} PcuBox;

__global__ void pcu_box_kernel(PcuBox b, long total, const float *src, float *dst) {
    for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
         e += (long)blockDim.x * gridDim.x) {
        long rest = e, si = b.sbase, di = b.dbase;
        for (int x = b.rank - 1; x >= 0; --x) {
            long i = rest % b.ext[x];
            rest /= b.ext[x];
            si += i * b.sstride[x];
            di += i * b.dstride[x];
        }
        dst[di] = src[si];
    }
}

extern "C" int pcu_copy_box(PcuDev *d, int stream, int rank, const long *ext, const float *src,
                            const long *src_shape, const long *src_off, float *dst,
                            const long *dst_shape, const long *dst_off, char *err, size_t cap) {
    if (rank < 1 || rank > PCU_MAX_RANK) {
        snprintf(err, cap, "copy_box: a box of %d dimensions (1 to %d)", rank, PCU_MAX_RANK);
        return 1;
    }
    if (use_gpu(d, err, cap))
        return 1;
    PcuBox b;
    memset(&b, 0, sizeof b);
    b.rank = rank;
    long total = 1, ss = 1, ds = 1;
    for (int x = rank - 1; x >= 0; --x) {
        b.ext[x] = ext[x];
        b.sstride[x] = ss;
        b.dstride[x] = ds;
        b.sbase += src_off[x] * ss;
        b.dbase += dst_off[x] * ds;
        ss *= src_shape[x];
        ds *= dst_shape[x];
        total *= ext[x];
    }
    if (total <= 0)
        return 0;
    pcu_box_kernel<<<blocks_for((size_t)total), PCU_THREADS, 0, d->stream[stream]>>>(b, total, src,
                                                                                     dst);
    PCU_TRY(cudaGetLastError());
    return 0;
}

extern "C" int pcu_copy(PcuDev *d, int stream, float *dst, const float *src, size_t n, char *err,
                        size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    if (n == 0)
        return 0;
    PCU_TRY(
        cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, d->stream[stream]));
    return 0;
}

__global__ void pcu_combine_kernel(float *dst, const float *src, size_t n, int max) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)blockDim.x * gridDim.x)
        dst[i] = max ? fmaxf(dst[i], src[i]) : dst[i] + src[i];
}

extern "C" int pcu_combine(PcuDev *d, int stream, float *dst, const float *src, size_t n, int max,
                           char *err, size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    if (n == 0)
        return 0;
    pcu_combine_kernel<<<blocks_for(n), PCU_THREADS, 0, d->stream[stream]>>>(dst, src, n, max);
    PCU_TRY(cudaGetLastError());
    return 0;
}

/* The next pair of timing events. */
static int next_marks(PcuDev *d, cudaEvent_t **pair, char *err, size_t cap) {
    if (d->nmarks + 2 > d->cap_marks) {
        int ncap = d->cap_marks ? 2 * d->cap_marks : 64;
        cudaEvent_t *m = (cudaEvent_t *)realloc(d->marks, sizeof *m * (size_t)ncap);
        if (m)
            d->marks = m;
        const char **n =
            m ? (const char **)realloc(d->names, sizeof *n * (size_t)(ncap / 2)) : NULL;
        if (!n) {
            snprintf(err, cap, "out of host memory");
            return 1;
        }
        d->names = n;
        for (int i = d->cap_marks; i < ncap; ++i) {
            cudaError_t e = cudaEventCreate(&d->marks[i]);
            if (e != cudaSuccess) {
                d->cap_marks = i;
                return fail_cuda(err, cap, "cudaEventCreate", e);
            }
        }
        d->cap_marks = ncap;
    }
    *pair = &d->marks[d->nmarks];
    d->nmarks += 2;
    return 0;
}

extern "C" int pcu_kernel(PcuDev *d, PcuPhaseFn fn, const PcuCall *call, char *err, size_t cap) {
    int index = call->index;
    if (use_gpu(d, err, cap))
        return 1;
    cudaStream_t s = d->stream[PCU_COMPUTE];
    cudaEvent_t *pair = NULL;
    if (next_marks(d, &pair, err, cap))
        return 1;
    d->names[d->nmarks / 2 - 1] = call->name;
    PCU_TRY(cudaEventRecord(pair[0], s));
    int st = fn(index, call->fused, d->blas, s, call->out, call->in, call->off);
    if (st == -1) {
        cudaError_t e = cudaPeekAtLastError();
        snprintf(err, cap, "a kernel of phase %d did not launch: %s (%s)", index,
                 cudaGetErrorString(e), cudaGetErrorName(e));
        return 1;
    }
    if (st == -2) {
        snprintf(err, cap, "phase %d has no CUDA %skernel", index, call->fused ? "fused " : "");
        return 1;
    }
    if (st != 0) {
        cublasStatus_t b = (cublasStatus_t)st;
        snprintf(err, cap, "cuBLAS in phase %d: %s (%s)", index, cublasGetStatusString(b),
                 cublasGetStatusName(b));
        return 1;
    }
    PCU_TRY(cudaEventRecord(pair[1], s));
    return 0;
}

extern "C" int pcu_mark(PcuDev *d, int stream, PcuEvent **ev, char *err, size_t cap) {
    *ev = NULL;
    if (use_gpu(d, err, cap))
        return 1;
    PcuEvent *e = (PcuEvent *)calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    cudaError_t c = cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming);
    if (c == cudaSuccess)
        c = cudaEventRecord(e->ev, d->stream[stream]);
    if (c != cudaSuccess) {
        pcu_event_free(e);
        return fail_cuda(err, cap, "cudaEventRecord", c);
    }
    *ev = e;
    return 0;
}

extern "C" int pcu_after(PcuDev *d, int stream, const PcuEvent *ev, char *err, size_t cap) {
    if (use_gpu(d, err, cap))
        return 1;
    PCU_TRY(cudaStreamWaitEvent(d->stream[stream], ev->ev, 0));
    return 0;
}

extern "C" void pcu_event_free(PcuEvent *ev) {
    if (!ev)
        return;
    if (ev->ev)
        cudaEventDestroy(ev->ev);
    free(ev);
}

static uint64_t host_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

extern "C" int pcu_finish(PcuDev *d, uint64_t *kernel_ns, PcuSpanFn span, void *ctx, char *err,
                          size_t cap) {
    *kernel_ns = 0;
    if (use_gpu(d, err, cap))
        return 1;
    PCU_TRY(cudaStreamSynchronize(d->stream[PCU_COMM]));
    PCU_TRY(cudaStreamSynchronize(d->stream[PCU_COMPUTE]));
    /* The kernels' events on the host's clock: an anchor recorded on the
     * idle compute stream completes at once, so the host's time just
     * after it completes is its time; each event is that much earlier. */
    uint64_t anchor_ns = 0;
    cudaEvent_t anchor = NULL;
    if (span && d->nmarks) {
        PCU_TRY(cudaEventCreate(&anchor));
        cudaError_t e = cudaEventRecord(anchor, d->stream[PCU_COMPUTE]);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(anchor);
        anchor_ns = host_ns();
        if (e != cudaSuccess) {
            cudaEventDestroy(anchor);
            return fail_cuda(err, cap, "cudaEventSynchronize", e);
        }
    }
    double ms_total = 0;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i + 1 < d->nmarks && e == cudaSuccess; i += 2) {
        float ms = 0, to_anchor = 0;
        e = cudaEventElapsedTime(&ms, d->marks[i], d->marks[i + 1]);
        if (e == cudaSuccess && anchor)
            e = cudaEventElapsedTime(&to_anchor, d->marks[i], anchor);
        ms_total += ms;
        if (e == cudaSuccess && anchor) {
            uint64_t begin = anchor_ns - (uint64_t)((double)to_anchor * 1e6);
            span(ctx, d->names[i / 2], begin, begin + (uint64_t)((double)ms * 1e6));
        }
    }
    if (anchor)
        cudaEventDestroy(anchor);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaEventElapsedTime", e);
    d->nmarks = 0;
    *kernel_ns = (uint64_t)(ms_total * 1e6);
    return 0;
}
