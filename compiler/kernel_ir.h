/*
 * kernel_ir.h — the kernel IR: what one compute phase's kernel does to its
 * tile (or, for the reference, to the whole tensors), built from the
 * phase's einsum and the tile extents the schedule gives it. Backends
 * print it (kernel_c.c prints C; a CUDA printer prints the same nodes).
 *
 * A phase computes out[o] += body, summed over every dimension of its
 * operator that the output lacks. The body is split into additive terms:
 *
 *   - a term that is a product of two operands and constants whose
 *     dimensions fall into batch (in both operands and the output), M
 *     (first operand and output), N (second operand and output) and K
 *     (both operands, summed) groups, each group contiguous in every
 *     operand holding it, becomes a GEMM node: a strided-batched
 *     C += alpha * op(A) op(B) over views of the tiles, no copy;
 *   - the other terms become one loop-nest node over the output's
 *     dimensions and the summed dimensions they use; the summed
 *     dimensions they do not use multiply them by their tile extent
 *     (what the loop over them would add), so that a bias folded into a
 *     contraction, b[n] / size(k), adds extent_k(tile) * b[n] / size(k).
 *
 * Row-major operands, dimensions in the operand's order: the stride of a
 * dimension is the product of the extents after it. Dimensions of extent
 * 1 are dropped from every view (their index is 0).
 */
#ifndef PRIMEC_KERNEL_IR_H
#define PRIMEC_KERNEL_IR_H

#include <stdio.h>

#include "schedule.h"

#define KERNEL_MAX_TERMS 16
#define KERNEL_OUT SCHED_MAX_OPERANDS /* the output's row in Kernel.stride */

typedef enum KernelNodeKind { KNODE_GEMM, KNODE_LOOP } KernelNodeKind;

/* How a loop nest folds its body into the output. */
typedef enum KernelCombiner {
    KCOMB_SUM, /* out += terms, summed over the reduced dimensions */
    KCOMB_MAX  /* out = max(out, expr) over them: the forward of `max=`, from -inf */
} KernelCombiner;

/* One additive term of the body: sign * expr. */
typedef struct KernelTerm {
    int sign; /* +1 or -1 */
    const Expr *expr;
} KernelTerm;

/* A constant factor of a GEMM's alpha: multiplied or divided by. */
typedef struct KernelFactor {
    char op; /* '*' or '/' */
    const Expr *expr;
} KernelFactor;

/* C[b] += alpha * op(A[b]) * op(B[b]) for every batch index b: row-major
 * views, op(X) = X or X^T. Batch dimensions are loops (outermost first);
 * the last one is the strided-batched call's own batch. */
typedef struct KernelGemm {
    int a, b;             /* operand indices of A and B */
    int trans_a, trans_b; /* A is stored K x M, B is stored N x K */
    long m, n, k;
    long lda, ldb, ldc;
    int nbatch;
    long batch_extent[IR_MAX_DIMS];
    long batch_stride[3][IR_MAX_DIMS]; /* A, B, C */
    int batch_dim[IR_MAX_DIMS];        /* the (first) operator dimension of each */
    int ngroup[3];                     /* M, N, K: how many operator dimensions */
    int group[3][IR_MAX_DIMS];         /* their operator dimensions, in A's/B's order */
    int sign;
    long scale; /* the tile extent of operator dimensions neither operand uses */
    int nfactors;
    KernelFactor factors[KERNEL_MAX_TERMS];
} KernelGemm;

/* out[o] (combiner)= scale * (sum of terms), over loops ordered so that
 * the innermost output loop is the output's last dimension (the
 * contiguous one). The summed dimensions the terms read are the innermost
 * nreduce loops: a reduction, folded by the combiner into an accumulator
 * (double, also in fp32 kernels) that is added to the output once per
 * output element. */
typedef struct KernelLoop {
    KernelCombiner combiner;
    int nloops;
    int loop_dim[IR_MAX_DIMS]; /* operator dimensions, outermost first */
    int nreduce;               /* the last nreduce loops are summed dimensions */
    long scale;                /* tile extent of the summed dimensions the terms do not use */
    int nterms;
    KernelTerm terms[KERNEL_MAX_TERMS];
    int whole_expr; /* the terms are the phase's whole expression, printed as it is */
} KernelLoop;

typedef struct KernelNode {
    KernelNodeKind kind;
    KernelGemm gemm;
    KernelLoop loop;
} KernelNode;

/* A phase's kernel. */
typedef struct Kernel {
    const PhaseSched *ph;
    const Instance *inst;
    int ndims;
    long extent[IR_MAX_DIMS];                 /* per operator dimension, tile or whole */
    long stride[KERNEL_OUT + 1][IR_MAX_DIMS]; /* per operand, the output at KERNEL_OUT; 0: absent */
    int uses_off;                             /* a dimension's index is used as a value */
    int whole;                                /* over the whole tensors (the reference) */
    int nnodes;
    KernelNode nodes[KERNEL_MAX_TERMS + 1];
    const char *no_gemm; /* why a product of two operands is no GEMM (NULL: none was tried) */
    int gemm_dtype;      /* the schedule's GEMM operand type (GEMM_DTYPE_*) */
} Kernel;

/* The kernel of a compute phase: whole = 0 over the tile the schedule
 * gives it, 1 over the whole tensors (the reference). */
void kernel_build(Kernel *kernel, const Schedule *s, const PhaseSched *ph, int whole);

/* --dump-after=kernels: every compute phase's kernel IR. */
void kernel_dump_schedule(const Schedule *s, FILE *out);

/* The one-line description of node i ("node 0: gemm m 8 n 6 k 4 ..."):
 * every printer of the IR writes it as a comment before the node's code,
 * so that printings can be compared node by node. */
void kernel_describe_node(const Kernel *k, int i, char *buf, size_t size);

/* How an intrinsic is printed: by the C printer in fp64 (the reference)
 * or fp32 (runtime/prime_math.h), by the CUDA printer in a kernel
 * (CUDA's math library, runtime/prime_cuda_math.cuh) or on the host. */
typedef enum KernelLang { KLANG_C64, KLANG_C32, KLANG_CUDA, KLANG_CUDA_HOST } KernelLang;

/* The function intrinsic `name` lowers to in `lang` (one table for every
 * printer); an intrinsic without a lowering is an internal error. */
const char *kernel_intrinsic(const char *name, KernelLang lang);

/* The operator dimension `name` is (its index in the operator's
 * dimensions), or -1 when it names no dimension. */
int kernel_dim(const Kernel *kernel, Sym name);

/* The index of the operand the body names `name`. */
int kernel_operand(const PhaseSched *ph, Sym name);

/* The operands x reads, as a bit mask of operand indices. */
unsigned kernel_expr_operands(const Kernel *kernel, const Expr *x);

#endif
