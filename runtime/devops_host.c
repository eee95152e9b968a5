/*
 * devops_host.c — the host table of device operations (prime_devops.h)
 * and the helpers every table counts and fails with.
 *
 * The host table calls what the executor called before there was a
 * table, so the threads and MPI backends behave as they did: the same
 * allocations, kernels, transfers and counters.
 */
#include "prime_devops.h"

#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static float *host_alloc(PrimeDev *dev, size_t n, int combine) {
    float *p = prime_alloc(dev, n);
    if (p && combine == PRIME_COMBINE_MAX)
        prime_fill_neg_inf(p, n);
    return p;
}

static PrimeStatus host_fill(PrimeDev *dev, float *p, size_t n, int combine) {
    (void)dev;
    if (combine == PRIME_COMBINE_MAX)
        prime_fill_neg_inf(p, n);
    else
        memset(p, 0, (n ? n : 1) * sizeof(float));
    return PRIME_OK;
}

static float *host_alloc_lazy(PrimeDev *dev, size_t n, int combine, int *filled) {
    *filled = prime_dev_tile_fill(dev) == PRIME_TILE_FILL_EAGER;
    return *filled ? host_alloc(dev, n, combine) : prime_alloc_uninit(dev, n);
}

static void host_free(PrimeDev *dev, float *p, size_t n) {
    prime_free(dev, p, n);
}

static PrimeStatus host_copy_box(PrimeDev *dev, int rank, const long *extent, const float *src,
                                 const long *src_shape, const long *src_off, float *dst,
                                 const long *dst_shape, const long *dst_off) {
    (void)dev;
    prime_copy_box(rank, extent, src, src_shape, src_off, dst, dst_shape, dst_off);
    return PRIME_OK;
}

static PrimeStatus host_kernel(PrimeDev *dev, const PrimePhase *phase, float *out,
                               const float *const *in, const long *off) {
    (void)dev;
    phase->kernels[0](out, in, off);
    return PRIME_OK;
}

static PrimeStatus host_kernel_set(PrimeDev *dev, const PrimePhase *phase, float *out,
                                   const float *const *in, const long *off) {
    (void)dev;
    phase->kernels[1](out, in, off);
    return PRIME_OK;
}

static PrimeStatus host_kernel_fused(PrimeDev *dev, const PrimePhase *phase, float *const *out,
                                     const float *const *const *in, const long *off) {
    (void)dev;
    phase->fused(out, in, off);
    return PRIME_OK;
}

static PrimeStatus host_combine(PrimeDev *dev, float *dst, const float *src, size_t n,
                                int combine) {
    (void)dev;
    if (combine == PRIME_COMBINE_MAX)
        prime_max(dst, src, n);
    else
        prime_add(dst, src, n);
    return PRIME_OK;
}

static PrimeStatus host_collective(PrimeDev *dev, int which, int combine, const int *group,
                                   int gsize, float *buf, size_t n, int tag) {
    int max = combine == PRIME_COMBINE_MAX;
    if (which == PRIME_COLL_ALLGATHER)
        return prime_allgather(dev, group, gsize, buf, n, tag);
    if (which == PRIME_COLL_REDUCE_SCATTER)
        return (max ? prime_reduce_scatter_max : prime_reduce_scatter_sum)(dev, group, gsize, buf,
                                                                           n, tag);
    return (max ? prime_allreduce_max : prime_allreduce_sum)(dev, group, gsize, buf, n, tag);
}

const PrimeDevOps prime_host_ops = {
    .name = "host",
    .alloc = host_alloc,
    .free = host_free,
    .alloc_lazy = host_alloc_lazy,
    .fill = host_fill,
    .upload = NULL,
    .download = NULL,
    .copy_box = host_copy_box,
    .kernel = host_kernel,
    .kernel_set = host_kernel_set,
    .kernel_fused = host_kernel_fused,
    .combine = host_combine,
    .isend = prime_isend,
    .irecv = prime_irecv,
    .wait = prime_wait,
    .collective = host_collective,
    .finish = NULL,
};

const PrimeDevOps *prime_dev_ops(const PrimeDev *dev) {
    return dev && dev->ops ? dev->ops : &prime_host_ops;
}

void prime_dev_set_ops(PrimeDev *dev, const PrimeDevOps *ops, void *state) {
    if (!dev)
        return;
    dev->ops = ops;
    dev->ops_state = state;
}

void *prime_dev_ops_state(const PrimeDev *dev) {
    return dev ? dev->ops_state : NULL;
}

void prime_dev_count_alloc(PrimeDev *dev, size_t n) {
    dev->cur_bytes += (uint64_t)n * sizeof(float);
    if (dev->cur_bytes > dev->peak_bytes)
        dev->peak_bytes = dev->cur_bytes;
}

void prime_dev_count_free(PrimeDev *dev, size_t n) {
    uint64_t bytes = (uint64_t)n * sizeof(float);
    if (bytes > dev->cur_bytes) {
        prime_rt_fail(dev, PRIME_ERR_ARG);
        dev->cur_bytes = 0;
        return;
    }
    dev->cur_bytes -= bytes;
}

void prime_dev_count_sent(PrimeDev *dev, size_t n, PrimeByteKind kind) {
    dev->bytes_sent[kind] += (uint64_t)n * sizeof(float);
}

PrimeStatus prime_dev_fail_text(PrimeDev *dev, PrimeStatus status, const char *fmt, ...) {
    if (!dev->failure[0]) {
        int len = snprintf(dev->failure, sizeof dev->failure, "rank %d: ", dev->rank);
        if (len > 0 && (size_t)len < sizeof dev->failure) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(dev->failure + len, sizeof dev->failure - (size_t)len, fmt, ap);
            va_end(ap);
        }
    }
    return prime_rt_fail(dev, status);
}
