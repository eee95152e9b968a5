/*
 * prime_cuda_ops.h — the device operations both CUDA tables share
 * (cuda-local, prime_cuda.c; one process per GPU, prime_cuda_nccl.c):
 * stream-ordered memory, uploads and downloads, box copies, combines and
 * kernel launches on a device's compute stream (prime_cuda_dev.h), and
 * the schedule's numbering of the program's phases that the CUDA kernels
 * of M.cu go by.
 *
 * Each table's per-device state begins with a PcuOps, so that its state
 * (prime_dev_ops_state) is a PcuOps too. What the tables do differently
 * is in two hooks: what a failure does to the world (cuda-local aborts
 * it; the NCCL world is broken, which aborts its communicators) and what
 * runs before a kernel is enqueued (NCCL's batching point, so that the
 * shifts posted before a step's kernels run under them). Transfers,
 * collectives, finish and (cuda-local: deferred once the world aborted)
 * free stay each table's own.
 */
#ifndef PRIME_CUDA_OPS_H
#define PRIME_CUDA_OPS_H

#include "prime_cuda.h"
#include "prime_cuda_dev.h"
#include "prime_devops.h"

/* The capacity of an error message of these tables. */
#define PCU_OPS_ERR_CAP 400

typedef struct PcuOps {
    PcuDev *pcu;
    const PrimeProgram *prog;
    PrimeCudaRunPhaseFn run_phase;
    const int *sched_index; /* per entry of prog->phases: the schedule's phase index */
    /* The last kernel's phase and its index. */
    const PrimePhase *last_phase;
    int last_index;
    /* After a device failed: what becomes of the world. */
    void (*fail_world)(PrimeWorld *world);
    /* Before a kernel is enqueued; NULL for nothing. */
    PrimeStatus (*before_kernel)(PrimeDev *dev);
} PcuOps;

/* The device's PcuOps (the start of its table's state). */
PcuOps *pcu_ops(PrimeDev *dev);
/* The device fails with err (the call and CUDA's word for why), and the
 * world with it (fail_world); returns the device's status. */
PrimeStatus pcu_ops_fail(PrimeDev *dev, const char *err);

/* PrimeDevOps's operations, on the device's compute stream. */
float *pcu_ops_alloc(PrimeDev *dev, size_t n, int combine);
void pcu_ops_free(PrimeDev *dev, float *p, size_t n);
PrimeStatus pcu_ops_upload(PrimeDev *dev, float *dst, const float *host, size_t n);
PrimeStatus pcu_ops_download(PrimeDev *dev, float *host, const float *src, size_t n);
PrimeStatus pcu_ops_copy_box(PrimeDev *dev, int rank, const long *extent, const float *src,
                             const long *src_shape, const long *src_off, float *dst,
                             const long *dst_shape, const long *dst_off);
PrimeStatus pcu_ops_combine(PrimeDev *dev, float *dst, const float *src, size_t n, int combine);
PrimeStatus pcu_ops_kernel(PrimeDev *dev, const PrimePhase *phase, float *out,
                           const float *const *in, const long *off);
PrimeStatus pcu_ops_kernel_fused(PrimeDev *dev, const PrimePhase *phase, float *const *out,
                                 const float *const *const *in, const long *off);
/* Waits for the device's streams (pcu_finish): *kernel_ns, the device
 * time of the kernels since the last call, each of them recorded on the
 * trace's device row (PRIME_TRACE_DEVICE) when tracing. */
PrimeStatus pcu_ops_finish(PrimeDev *dev, uint64_t *kernel_ns);

/* The schedule's index of every entry of prog->phases: the first copy of
 * run r's phase j is runs[r].orig + j. NULL when out of memory. */
int *prime_cuda_schedule_indices(const PrimeProgram *prog);

#endif
