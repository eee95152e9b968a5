/*
 * prime_cuda_nccl.h — the CUDA table of device operations in the NCCL
 * world (prime_cuda_nccl.c): one device per process, its tiles, kernels
 * and GEMMs as in cuda-local (prime_cuda.c), its transfers and
 * collectives NCCL's.
 */
#ifndef PRIME_CUDA_NCCL_H
#define PRIME_CUDA_NCCL_H

#include "prime_cuda.h"
#include "prime_devops.h"

/* What attach needs; the table's state is kept in `state`. */
typedef struct PrimeCudaNccl {
    const PrimeProgram *prog;
    PrimeCudaRunPhaseFn run_phase;
    void *state;
} PrimeCudaNccl;

/* PrimeProgramDevice's attach and detach (arg: a PrimeCudaNccl). */
PrimeStatus prime_cuda_nccl_attach(PrimeWorld *world, void *arg);
void prime_cuda_nccl_detach(PrimeWorld *world, void *arg);

#endif
