/*
 * kernel_c.h — prints the kernel IR (kernel_ir.h) as C: GEMM nodes as
 * calls of prime_gemm / prime_gemm_batched (runtime/prime_rt.h), loop
 * nests as restrict-pointer loops whose innermost loop indexes p[i].
 */
#ifndef PRIMEC_KERNEL_C_H
#define PRIMEC_KERNEL_C_H

#include "kernel_fuse.h"
#include "kernel_ir.h"
#include "printer.h"

/* The body of `void f(float *out, const float *const *in, const long
 * *off)` (double with dbl: the fp64 reference), at p's indentation. */
void kernel_c_body(Printer *p, const Kernel *k, int dbl);
/* The same, with overwrite: out = f(in...) instead of out += f(in...),
 * every element of the tile written and none read (its first node sets
 * the output, the others add to it), for a tile whose fill the runtime
 * skipped (PrimePhase.kernel_overwrites). */
void kernel_c_body_mode(Printer *p, const Kernel *k, int dbl, int overwrite);

/* The output dimension o of a kernel that is one fp32 sum over one
 * strided dimension, summed in the strided dimension's order into one
 * double accumulator per element of o (a column sum), or -1. Of any
 * length: the unfused kernel prints the accumulators as a row up to 4096
 * elements (one at a time past it, in the same order); a fused group's
 * are bounded by the fuser (kernel_fuse.c). */
int kernel_c_column_dim(const Kernel *k);

/* The body of `void f(float *const *out, const float *const *const *in,
 * const long *off)`: group g's fused kernel (kernel_fuse.h) over the
 * members' kernels ks, fp32. out[j] and in[j] are member j's tiles; the
 * outputs that are not stored are rows on the stack. For each row, every
 * member's node in turn (its node comment first), and the group's ADDs
 * after the member they follow. */
void kernel_c_fused(Printer *p, const FuseGroup *g, const Kernel *ks);

#endif
