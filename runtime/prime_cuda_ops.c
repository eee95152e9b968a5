/*
 * prime_cuda_ops.c — the device operations both CUDA tables share
 * (prime_cuda_ops.h).
 */
#include "prime_cuda_ops.h"

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

PcuOps *pcu_ops(PrimeDev *dev) {
    return prime_dev_ops_state(dev);
}

PrimeStatus pcu_ops_fail(PrimeDev *dev, const char *err) {
    PrimeStatus st = prime_dev_fail_text(dev, PRIME_ERR_DEVICE, "%s", err);
    pcu_ops(dev)->fail_world(dev->world);
    return st;
}

float *pcu_ops_alloc(PrimeDev *dev, size_t n, int combine) {
    char err[PCU_OPS_ERR_CAP];
    float *p = NULL;
    if (pcu_alloc(pcu_ops(dev)->pcu, &p, n, combine == PRIME_COMBINE_MAX, err, sizeof err)) {
        pcu_ops_fail(dev, err);
        return NULL;
    }
    prime_dev_count_alloc(dev, n);
    return p;
}

void pcu_ops_free(PrimeDev *dev, float *p, size_t n) {
    char err[PCU_OPS_ERR_CAP];
    if (!p)
        return;
    if (pcu_free(pcu_ops(dev)->pcu, p, err, sizeof err))
        pcu_ops_fail(dev, err);
    prime_dev_count_free(dev, n);
}

PrimeStatus pcu_ops_upload(PrimeDev *dev, float *dst, const float *host, size_t n) {
    char err[PCU_OPS_ERR_CAP];
    if (pcu_upload(pcu_ops(dev)->pcu, dst, host, n, err, sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

PrimeStatus pcu_ops_download(PrimeDev *dev, float *host, const float *src, size_t n) {
    char err[PCU_OPS_ERR_CAP];
    if (pcu_download(pcu_ops(dev)->pcu, host, src, n, err, sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

PrimeStatus pcu_ops_copy_box(PrimeDev *dev, int rank, const long *extent, const float *src,
                             const long *src_shape, const long *src_off, float *dst,
                             const long *dst_shape, const long *dst_off) {
    char err[PCU_OPS_ERR_CAP];
    if (pcu_copy_box(pcu_ops(dev)->pcu, PCU_COMPUTE, rank, extent, src, src_shape, src_off, dst,
                     dst_shape, dst_off, err, sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

PrimeStatus pcu_ops_combine(PrimeDev *dev, float *dst, const float *src, size_t n, int combine) {
    char err[PCU_OPS_ERR_CAP];
    if (pcu_combine(pcu_ops(dev)->pcu, PCU_COMPUTE, dst, src, n, combine == PRIME_COMBINE_MAX, err,
                    sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

/* The schedule's index of a phase of the program (the CUDA kernels are
 * numbered by it); -1 when the phase is not the program's. */
static int phase_index(PcuOps *o, const PrimePhase *phase) {
    if (phase == o->last_phase)
        return o->last_index;
    for (int q = 0; q < o->prog->nphases; ++q)
        if (o->prog->phases[q] == phase) {
            o->last_phase = phase;
            o->last_index = o->sched_index[q];
            return o->last_index;
        }
    return -1;
}

/* The phase's kernel, or its fused group's (call->fused), on the compute
 * stream after before_kernel: call's index is found here. */
static PrimeStatus launch(PrimeDev *dev, const PrimePhase *phase, PcuCall *call) {
    PcuOps *o = pcu_ops(dev);
    PrimeStatus st = o->before_kernel ? o->before_kernel(dev) : PRIME_OK;
    if (st != PRIME_OK)
        return st;
    char err[PCU_OPS_ERR_CAP];
    call->index = phase_index(o, phase);
    if (call->index < 0) {
        snprintf(err, sizeof err, "phase '%s' is not one of the program's", phase->name);
        return pcu_ops_fail(dev, err);
    }
    if (pcu_kernel(o->pcu, (PcuPhaseFn)o->run_phase, call, err, sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}

PrimeStatus pcu_ops_kernel(PrimeDev *dev, const PrimePhase *phase, float *out,
                           const float *const *in, const long *off) {
    const float *const *ins[1] = {in};
    PcuCall call = {0, 0, phase->name, phase->kernels[0], NULL, &out, ins, off};
    return launch(dev, phase, &call);
}

/* A fused group (PrimePhase.fused) as one call of its fused kernel. */
PrimeStatus pcu_ops_kernel_fused(PrimeDev *dev, const PrimePhase *phase, float *const *out,
                                 const float *const *const *in, const long *off) {
    PcuCall call = {0, 1, phase->name, NULL, phase->fused, out, in, off};
    return launch(dev, phase, &call);
}

int *prime_cuda_schedule_indices(const PrimeProgram *prog) {
    int *index = malloc(sizeof(int) * (size_t)(prog->nphases + 1));
    if (!index)
        return NULL;
    for (int q = 0; q < prog->nphases; ++q)
        index[q] = q;
    for (int r = 0; prog->runs && r < prog->nruns; ++r)
        for (int j = 0; j < prog->runs[r].len; ++j)
            if (prog->runs[r].first + j < prog->nphases)
                index[prog->runs[r].first + j] = prog->runs[r].orig + j;
    return index;
}

/* A kernel's interval on the device, on the device's trace row. */
static void device_span(void *ctx, const char *name, uint64_t begin_ns, uint64_t end_ns) {
    prime_trace_span(ctx, name, PRIME_TRACE_DEVICE, begin_ns, end_ns);
}

PrimeStatus pcu_ops_finish(PrimeDev *dev, uint64_t *kernel_ns) {
    char err[PCU_OPS_ERR_CAP];
    if (pcu_finish(pcu_ops(dev)->pcu, kernel_ns, device_span, dev, err, sizeof err))
        return pcu_ops_fail(dev, err);
    return PRIME_OK;
}
