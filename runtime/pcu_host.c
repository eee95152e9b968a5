/*
 * pcu_host.c — prime_cuda_dev.h on the host: the CUDA table of device
 * operations (prime_cuda.c) over host memory, for tests on machines
 * without a GPU (the library prime_rt_cuda_host).
 *
 * Every "stream" runs its work at once on the calling thread, so events
 * are already complete when recorded and a stream waiting for one has
 * nothing to wait for; a kernel is the phase's emitted C function. What
 * this runs of prime_cuda.c is everything but the CUDA calls: the
 * matching of sends and receives between virtual devices, the
 * collectives' meeting, chunking and reductions, the uploads and
 * downloads of the driver, and the counters. It says nothing about the
 * ordering of real streams, which only a GPU shows (tests/gpu/run.sh).
 *
 * PCU_HOST_GEMM=TYPE makes the kernels' bf16 and f16 GEMMs round to TYPE
 * instead (prime_cuda_gemm.h): a wrong result that --check must catch.
 *
 * PCU_HOST_FAIL=CALL:N (CALL alloc, kernel or copy; read once) makes the
 * N-th such call of the process (from 0) fail as a CUDA call would, so
 * tests see the runtime turn a device error into a message naming the
 * rank and the call, and every other device stop instead of waiting.
 */
#include "prime_cuda_dev.h"

#include "prime_cuda_gemm.h"
#include "prime_rt.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A kernel call's interval, for pcu_finish's spans. */
typedef struct HostSpan {
    const char *name;
    uint64_t begin_ns, end_ns;
} HostSpan;

struct PcuDev {
    int gpu;
    uint64_t kernel_ns; /* since the last pcu_finish */
    HostSpan *spans;    /* the calls since the last pcu_finish */
    size_t nspans, cap_spans;
};

struct PcuEvent {
    int recorded;
};

enum { FAIL_ALLOC, FAIL_KERNEL, FAIL_COPY, FAIL_KINDS };

/* Whether this call of `kind` is the one PCU_HOST_FAIL names; then err
 * says so as CUDA would. */
static int injected(int kind, const char *call, char *err, size_t cap) {
    static const char *const names[FAIL_KINDS] = {"alloc", "kernel", "copy"};
    static atomic_int calls[FAIL_KINDS];
    static atomic_int target_kind = -2; /* -2: not read yet, -1: none */
    static atomic_long target_n;
    if (atomic_load(&target_kind) == -2) {
        const char *env = getenv("PCU_HOST_FAIL");
        int k = -1;
        long n = 0;
        for (int i = 0; env && i < FAIL_KINDS; ++i) {
            size_t len = strlen(names[i]);
            if (strncmp(env, names[i], len) == 0 && env[len] == ':') {
                k = i;
                n = strtol(env + len + 1, NULL, 10);
            }
        }
        atomic_store(&target_n, n);
        atomic_store(&target_kind, k);
    }
    if (atomic_load(&target_kind) != kind || atomic_fetch_add(&calls[kind], 1) != target_n)
        return 0;
    snprintf(err, cap, "%s: an emulated failure (PCU_HOST_FAIL)", call);
    return 1;
}

/* PCU_HOST_GEMM=bf16|f16|f32 (read once): the type the kernels' bf16
 * and f16 GEMMs round their operands to instead of the program's, a
 * deliberately wrong device result for tests (the dense reference keeps
 * the program's type); -1 when unset. */
static int gemm_override(void) {
    static atomic_int type = -2;
    if (atomic_load(&type) == -2) {
        const char *env = getenv("PCU_HOST_GEMM");
        int t = !env                       ? -1
                : strcmp(env, "bf16") == 0 ? PRIME_DTYPE_BF16
                : strcmp(env, "f16") == 0  ? PRIME_DTYPE_F16
                : strcmp(env, "f32") == 0  ? PRIME_DTYPE_F32
                                           : -1;
        atomic_store(&type, t);
    }
    return atomic_load(&type);
}

int pcu_device_count(int *count, char *err, size_t cap) {
    (void)err;
    (void)cap;
    *count = 1;
    return 0;
}

void pcu_device_name(int gpu, char *name, size_t cap) {
    snprintf(name, cap, "host emulation %d", gpu);
}

int pcu_open(int gpu, PcuDev **out, char *err, size_t cap) {
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    (*out)->gpu = gpu;
    return 0;
}

void *pcu_stream(PcuDev *d, int stream) {
    (void)d, (void)stream;
    return NULL;
}

void pcu_close(PcuDev *d) {
    if (d)
        free(d->spans);
    free(d);
}

int pcu_alloc(PcuDev *d, float **p, size_t n, int neg_inf, char *err, size_t cap) {
    (void)d;
    *p = NULL;
    if (injected(FAIL_ALLOC, "cudaMallocAsync", err, cap))
        return 1;
    *p = calloc(n ? n : 1, sizeof(float));
    if (!*p) {
        snprintf(err, cap, "malloc: out of host memory (%zu floats)", n);
        return 1;
    }
    if (neg_inf)
        prime_fill_neg_inf(*p, n);
    return 0;
}

int pcu_free(PcuDev *d, float *p, char *err, size_t cap) {
    (void)d;
    (void)err;
    (void)cap;
    free(p);
    return 0;
}

int pcu_upload(PcuDev *d, float *dst, const float *src, size_t n, char *err, size_t cap) {
    (void)d;
    (void)err;
    (void)cap;
    memcpy(dst, src, n * sizeof(float));
    return 0;
}

int pcu_download(PcuDev *d, float *dst, const float *src, size_t n, char *err, size_t cap) {
    return pcu_upload(d, dst, src, n, err, cap);
}

int pcu_copy_box(PcuDev *d, int stream, int rank, const long *ext, const float *src,
                 const long *src_shape, const long *src_off, float *dst, const long *dst_shape,
                 const long *dst_off, char *err, size_t cap) {
    (void)d;
    (void)stream;
    if (rank < 1 || rank > 8) {
        snprintf(err, cap, "copy_box: a box of %d dimensions (1 to 8)", rank);
        return 1;
    }
    prime_copy_box(rank, ext, src, src_shape, src_off, dst, dst_shape, dst_off);
    return 0;
}

int pcu_copy(PcuDev *d, int stream, float *dst, const float *src, size_t n, char *err, size_t cap) {
    (void)stream;
    if (injected(FAIL_COPY, "cudaMemcpyAsync", err, cap))
        return 1;
    return pcu_upload(d, dst, src, n, err, cap);
}

int pcu_combine(PcuDev *d, int stream, float *dst, const float *src, size_t n, int max, char *err,
                size_t cap) {
    (void)d;
    (void)stream;
    (void)err;
    (void)cap;
    if (max)
        prime_max(dst, src, n);
    else
        prime_add(dst, src, n);
    return 0;
}

int pcu_kernel(PcuDev *d, PcuPhaseFn fn, const PcuCall *call, char *err, size_t cap) {
    (void)fn;
    if (injected(FAIL_KERNEL, "cublasSgemm", err, cap))
        return 1;
    if (call->fused ? !call->host_fused : !call->host_fn) {
        snprintf(err, cap, "phase %d has no %skernel", call->index, call->fused ? "fused " : "");
        return 1;
    }
    uint64_t t0 = prime_clock_ns();
    prime_gemm_narrow_override(gemm_override());
    if (call->fused)
        call->host_fused(call->out, call->in, call->off);
    else
        call->host_fn(call->out[0], call->in[0], call->off);
    prime_gemm_narrow_override(-1);
    uint64_t t1 = prime_clock_ns();
    d->kernel_ns += t1 - t0;
    if (d->nspans == d->cap_spans) {
        size_t ncap = d->cap_spans ? 2 * d->cap_spans : 64;
        HostSpan *s = realloc(d->spans, sizeof *s * ncap);
        if (!s) {
            snprintf(err, cap, "out of host memory");
            return 1;
        }
        d->spans = s;
        d->cap_spans = ncap;
    }
    d->spans[d->nspans++] = (HostSpan){call->name, t0, t1};
    return 0;
}

int pcu_mark(PcuDev *d, int stream, PcuEvent **ev, char *err, size_t cap) {
    (void)d;
    (void)stream;
    *ev = calloc(1, sizeof **ev);
    if (!*ev) {
        snprintf(err, cap, "out of host memory");
        return 1;
    }
    (*ev)->recorded = 1;
    return 0;
}

int pcu_after(PcuDev *d, int stream, const PcuEvent *ev, char *err, size_t cap) {
    (void)d;
    (void)stream;
    if (!ev || !ev->recorded) {
        snprintf(err, cap, "cudaStreamWaitEvent: an event never recorded");
        return 1;
    }
    return 0;
}

void pcu_event_free(PcuEvent *ev) {
    free(ev);
}

int pcu_finish(PcuDev *d, uint64_t *kernel_ns, PcuSpanFn span, void *ctx, char *err, size_t cap) {
    (void)err;
    (void)cap;
    *kernel_ns = d->kernel_ns;
    d->kernel_ns = 0;
    for (size_t i = 0; span && i < d->nspans; ++i)
        span(ctx, d->spans[i].name, d->spans[i].begin_ns, d->spans[i].end_ns);
    d->nspans = 0;
    return 0;
}
