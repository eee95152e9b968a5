/*
 * prime_cuda.h — the entry point of a program built with
 * `primec build --target cuda` (the library prime_rt_cuda).
 *
 * Such a program is two files: M.c, the same tables, dense reference and
 * driver call as a cpu program, and M.cu, every phase's tile kernel as
 * CUDA (cuBLAS for its GEMMs) behind prime_cuda_run_phase. Its main calls
 * prime_cuda_main, which runs the schedule with every tile in GPU memory
 * (docs/cuda.md).
 *
 * Options, besides those of every program (prime_program.h):
 *   --local         every device of the mesh on one GPU: a compute and a
 *                   communication stream and the tiles per virtual
 *                   device, shifts as device-to-device copies on the
 *                   communication streams ordered by events, collectives
 *                   as reductions on the GPU
 *   --gpu N         the GPU to run on (default 0 with --local, else
 *                   LOCAL_RANK, else the rank modulo the GPUs)
 * Without --local, one process per GPU over NCCL (a runtime built with
 * NCCL): this process is rank --rank N (or RANK) of --world-size N (or
 * WORLD_SIZE) processes, the mesh's devices, and meets the others at
 * --master ADDR:PORT (or MASTER_ADDR, MASTER_PORT) or through
 * --nccl-id-file PATH (rendezvous.h, docs/cuda.md).
 * Bad options say so and exit with 2; without a CUDA device the program
 * says so ("no CUDA device: ...") and exits with 2, before any
 * rendezvous; a CUDA, cuBLAS or NCCL call that fails ends the run with
 * exit 3 and a message naming the rank and the call.
 */
#ifndef PRIME_CUDA_H
#define PRIME_CUDA_H

#include "prime_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs, on cuBLAS handle `cublas` and CUDA stream `stream`, the tile
 * kernel of schedule phase `index` (the schedule's numbering: copy l of a
 * repeated layer's phase j is orig + l * len + j, PrimePhaseRun) on
 * out[0] and in[0][i], or (fused) the fused kernel of the group whose
 * first member is phase `index` (PrimePhase.fused) on member j's out[j]
 * and in[j][i] (NULL: a row the kernel keeps). The tiles are device
 * pointers, the arrays and off host arrays. Returns 0, a cuBLAS status,
 * -1 for a kernel that did not launch, -2 for a phase without such a
 * CUDA kernel. Emitted in M.cu. */
int prime_cuda_run_phase(int index, int fused, void *cublas, void *stream, float *const *out,
                         const float *const *const *in, const long *off);

typedef int (*PrimeCudaRunPhaseFn)(int index, int fused, void *cublas, void *stream,
                                   float *const *out, const float *const *const *in,
                                   const long *off);

/* main() of a CUDA program: returns the exit code (prime_program.c's,
 * and 2 without a CUDA device or for a mode this runtime lacks). */
int prime_cuda_main(const PrimeProgram *program, PrimeCudaRunPhaseFn run_phase, int argc,
                    char **argv);
/* The same for a program built with --dtype bf16 or f16 (gemm_dtype
 * "bf16", "f16"; NULL: fp32): its GEMMs take rounded operands, and so
 * do its dense fp32 reference's, which --check names as its yardstick
 * (prime_cuda_gemm.h, docs/cuda.md). */
int prime_cuda_main_dtype(const PrimeProgram *program, PrimeCudaRunPhaseFn run_phase,
                          const char *gemm_dtype, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
