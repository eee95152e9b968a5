/*
 * kernel_cuda.h — prints the kernel IR (kernel_ir.h) as CUDA: each loop
 * node as a __global__ kernel (a grid-stride loop over the output points,
 * one thread per output element, the reduced dimensions summed (or
 * maxed) in a double accumulator, as the C kernels do), each GEMM node as
 * a cuBLAS call (cublasSgemm, or cublasSgemmStridedBatched over the last
 * batch dimension), inside a host function that launches them in the
 * IR's order on one stream. Row-major tiles are seen by cuBLAS as their
 * column-major transposes, so C = op(A) op(B) is called as
 * C^T = op(B)^T op(A)^T: B first, m and n swapped.
 */
#ifndef PRIMEC_KERNEL_CUDA_H
#define PRIMEC_KERNEL_CUDA_H

#include "kernel_fuse.h"
#include "kernel_ir.h"
#include "printer.h"

/* The __global__ kernels of k's loop nodes (named NAME_OP_nodeK, OP the
 * phase's operator) and the host
 * function
 *
 *   int NAME(cublasHandle_t h, cudaStream_t s, float *out,
 *            const float *const *in, const long *off)
 *
 * out and in[i] are device pointers to the tiles, in and off host arrays
 * (off: the tile's global offset per operator dimension). It returns 0,
 * a cuBLAS status, or -1 for a failed launch. */
void kernel_cuda_phase(Printer *p, const Kernel *k, const char *name);

/* Group g's fused kernel (kernel_fuse.h; ks its members' kernels): one
 * __global__ kernel NAME_rows, a thread per row running every member's
 * node over the row in turn (the outputs that are not stored in local
 * rows, the group's ADDs after their members) — for rows longer than
 * 4096, a block per row, each thread running the members over its chunk
 * of the row and the block's threads combining each reduction
 * (prime_cuda_block_sum, runtime/prime_cuda_math.cuh) — then the column
 * sums' kernel NAME_cols if the group has any, and the host function
 *
 *   int NAME(cublasHandle_t h, cudaStream_t s, float *const *out,
 *            const float *const *const *in, const long *off)
 *
 * with every member's node comment, which launches it. */
void kernel_cuda_fused(Printer *p, const FuseGroup *g, const Kernel *ks, const char *name);

#endif
