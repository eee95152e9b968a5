/*
 * kernel_cuda.c — the kernel IR printed as CUDA (see kernel_cuda.h).
 */
#include "kernel_cuda.h"

#include <stdio.h>
#include <string.h>

#define CUDA_THREADS 256 /* threads per block of a loop kernel */
#define CUDA_MAX_BLOCKS 4096L
/* The longest row a fused kernel's thread keeps whole (a thread per row,
 * its rows in local memory); a longer row is a block's (kernel_cuda_fused). */
#define CUDA_ROW_MAX 4096L

/* runtime/prime_cuda_math.cuh's PrimeCudaOff holds 8 offsets. */
_Static_assert(IR_MAX_DIMS == 8, "PrimeCudaOff must hold IR_MAX_DIMS offsets");

/* Printing one expression: in a kernel (looped != 0 or not host) operand
 * i is x<i> indexed by every loop variable, and the offsets are off.d[];
 * on the host (a GEMM's alpha) the offsets are off[] and no operand may
 * appear. */
typedef struct Ctx {
    Printer *p;
    const Kernel *k;
    int host;
    unsigned looped; /* the dimensions that have a loop variable d<i> */
    unsigned rowbuf; /* operands that are rows of a fused kernel, indexed by d<inner> only */
    int inner;
    /* The index of a row's element in a long row's kernel (its thread's
     * chunk q), or NULL: d<inner>. */
    const char *rowidx;
} Ctx;

/* The offset of operand x (KERNEL_OUT: the output) at the loop variables. */
static void print_ref(Printer *p, const Kernel *k, int x, unsigned looped) {
    int any = 0;
    for (int d = 0; d < k->ndims; ++d) {
        long st = k->stride[x][d];
        if (!((looped >> d) & 1u) || !st)
            continue;
        printer_printf(p, "%s", any ? " + " : "");
        if (st == 1)
            printer_printf(p, "d%d", d);
        else
            printer_printf(p, "d%d * %ldL", d, st);
        any = 1;
    }
    if (!any)
        printer_printf(p, "0");
}

static void print_expr(Ctx *c, const Expr *x) {
    Printer *p = c->p;
    const Kernel *k = c->k;
    switch (x->kind) {
    case EXPR_INT:
        printer_printf(p, "%ld.0f", x->value);
        break;
    case EXPR_NAME:
    case EXPR_INDEX: {
        int d = x->kind == EXPR_NAME ? kernel_dim(k, x->name) : -1;
        if (d >= 0) {
            const char *off = c->host ? "off[" : "off.d[";
            if ((c->looped >> d) & 1u)
                printer_printf(p, "(float)(d%d + %s%d])", d, off, d);
            else
                printer_printf(p, "(float)%s%d]", off, d);
            return;
        }
        if (c->host)
            ICE("an operand in a GEMM's alpha");
        int i = kernel_operand(k->ph, x->name);
        printer_printf(p, "x%d[", i);
        if (((c->rowbuf >> i) & 1u) && c->rowidx)
            printer_printf(p, "%s", k->stride[i][c->inner] ? c->rowidx : "0");
        else if ((c->rowbuf >> i) & 1u)
            printer_printf(p, k->stride[i][c->inner] ? "d%d" : "0", c->inner);
        else
            print_ref(p, k, i, c->looped);
        printer_printf(p, "]");
        break;
    }
    case EXPR_NEG:
        printer_printf(p, "(-");
        print_expr(c, x->lhs);
        printer_printf(p, ")");
        break;
    case EXPR_BINARY:
        printer_printf(p, "(");
        print_expr(c, x->lhs);
        printer_printf(p, " %c ", x->op);
        print_expr(c, x->rhs);
        printer_printf(p, ")");
        break;
    case EXPR_CALL:
        if (strcmp(x->name, "size") == 0) {
            int d = kernel_dim(k, ((const Expr *)x->args.items[0])->name);
            if (d < 0)
                ICE("size() of no dimension");
            printer_printf(p, "%ld.0f", k->inst->dim_sizes[d]);
            break;
        }
        printer_printf(p, "%s(", kernel_intrinsic(x->name, c->host ? KLANG_CUDA_HOST : KLANG_CUDA));
        for (int i = 0; i < x->args.count; ++i) {
            if (i)
                printer_printf(p, ", ");
            print_expr(c, x->args.items[i]);
        }
        printer_printf(p, ")");
        break;
    default:
        ICE("cannot lower expression kind %d", x->kind);
    }
}

/* The terms, times the loop's scale when with_scale. */
static void print_terms(Ctx *c, const KernelLoop *l, int with_scale) {
    if (with_scale && l->scale != 1)
        printer_printf(c->p, "%ld.0f * ", l->scale);
    if (l->whole_expr || (l->nterms == 1 && l->terms[0].sign > 0)) {
        print_expr(c, l->terms[0].expr);
        return;
    }
    printer_printf(c->p, "(");
    for (int t = 0; t < l->nterms; ++t) {
        printer_printf(c->p, "%s", l->terms[t].sign < 0 ? (t ? " - " : "-") : (t ? " + " : ""));
        print_expr(c, l->terms[t].expr);
    }
    printer_printf(c->p, ")");
}

static unsigned loop_operands(const Kernel *k, const KernelLoop *l) {
    unsigned ops = 0;
    for (int t = 0; t < l->nterms; ++t)
        ops |= kernel_expr_operands(k, l->terms[t].expr);
    return ops;
}

/* The number of output points of a loop node: its grid-stride range. */
static long loop_points(const Kernel *k, const KernelLoop *l) {
    long n = 1;
    for (int j = 0; j < l->nloops - l->nreduce; ++j)
        n *= k->extent[l->loop_dim[j]];
    return n;
}

/* Whether some operand (or the output) moves with dimension d. */
static int dim_indexes(const Kernel *k, unsigned ops, int d) {
    if (k->stride[KERNEL_OUT][d])
        return 1;
    for (int i = 0; i < k->ph->nin; ++i)
        if (((ops >> i) & 1u) && k->stride[i][d])
            return 1;
    return 0;
}

/* One loop node as a __global__ kernel: thread i of the grid-stride loop
 * computes output point i, its indices decomposed innermost first. */
static void print_loop_kernel(Printer *p, const Kernel *k, const KernelLoop *l, const char *name,
                              int node) {
    const int *dims = l->loop_dim;
    int nout = l->nloops - l->nreduce, max = l->combiner == KCOMB_MAX;
    unsigned ops = loop_operands(k, l), looped = 0;
    for (int j = 0; j < l->nloops; ++j)
        looped |= 1u << dims[j];
    printer_printf(p, "__global__ void %s_node%d(float *__restrict__ out", name, node);
    for (int i = 0; i < k->ph->nin; ++i)
        if ((ops >> i) & 1u)
            printer_printf(p, ", const float *__restrict__ x%d", i);
    printer_printf(p, "%s)\n{\n", k->uses_off ? ", PrimeCudaOff off" : "");
    printer_indent(p, 1);
    printer_printf(p,
                   "for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < %ldL;\n"
                   "     i += (long)gridDim.x * blockDim.x) {\n",
                   loop_points(k, l));
    printer_indent(p, 1);
    if (nout > 0)
        printer_printf(p, "long r = i;\n");
    else
        printer_printf(p, "(void)i;\n");
    for (int j = nout - 1; j >= 0; --j) {
        int d = dims[j];
        if (j == 0)
            printer_printf(p, "const long d%d = r;\n", d);
        else
            printer_printf(p, "const long d%d = r %% %ldL;\nr /= %ldL;\n", d, k->extent[d],
                           k->extent[d]);
        if (!dim_indexes(k, ops, d))
            printer_printf(p, "(void)d%d;\n", d);
    }
    Ctx c = {p, k, 0, looped, 0, 0, NULL};
    if (l->nreduce) {
        printer_printf(p, "double acc = %s;\n", max ? "-INFINITY" : "0.0");
        for (int j = nout; j < l->nloops; ++j) {
            printer_printf(p, "for (long d%d = 0; d%d < %ldL; ++d%d)\n", dims[j], dims[j],
                           k->extent[dims[j]], dims[j]);
            printer_indent(p, 1);
        }
        printer_printf(p, max ? "acc = fmax(acc, (double)" : "acc += (double)");
        print_terms(&c, l, 0);
        printer_printf(p, max ? ");\n" : ";\n");
        printer_indent(p, -l->nreduce);
        printer_printf(p, "out[");
        print_ref(p, k, KERNEL_OUT, looped);
        if (max) {
            printer_printf(p, "] = fmaxf(out[");
            print_ref(p, k, KERNEL_OUT, looped);
            printer_printf(p, "], (float)acc);\n");
        } else {
            printer_printf(p, "] += (float)(");
            if (l->scale != 1)
                printer_printf(p, "%ld.0 * ", l->scale);
            printer_printf(p, "acc);\n");
        }
    } else {
        printer_printf(p, "out[");
        print_ref(p, k, KERNEL_OUT, looped);
        if (max) {
            printer_printf(p, "] = fmaxf(out[");
            print_ref(p, k, KERNEL_OUT, looped);
            printer_printf(p, "], ");
            print_terms(&c, l, 0);
            printer_printf(p, ");\n");
        } else {
            printer_printf(p, "] += ");
            print_terms(&c, l, 1);
            printer_printf(p, ";\n");
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

/* alpha (sign, scale, factors on the host) and beta of a GEMM node. */
static void print_alpha_beta(Printer *p, const Kernel *k, const KernelGemm *g) {
    printer_printf(p, "const float alpha = %s1.0f", g->sign < 0 ? "-" : "");
    if (g->scale != 1)
        printer_printf(p, " * %ld.0f", g->scale);
    Ctx c = {p, k, 1, 0, 0, 0, NULL};
    for (int i = 0; i < g->nfactors; ++i) {
        printer_printf(p, " %c ", g->factors[i].op);
        print_expr(&c, g->factors[i].expr);
    }
    printer_printf(p, ";\nconst float beta = 1.0f;\n");
}

/* The operands of a cuBLAS call (B, A, then C) with the outer batch
 * offsets: ptr[r] names operand r (0 A, 1 B, 2 C), type[r] its cuBLAS
 * type or NULL (the fp32 calls have none). */
static void print_gemm_operands(Printer *p, const KernelGemm *g, const char *const *ptr,
                                const char *const *type) {
    int outer = g->nbatch > 0 ? g->nbatch - 1 : 0;
    const int rows[3] = {1, 0, 2};
    const long ld[3] = {g->lda, g->ldb, g->ldc};
    for (int q = 0; q < 3; ++q) {
        int r = rows[q];
        printer_printf(p, ",\n    %s%s", r == 2 ? "&beta, " : "", ptr[r]);
        for (int j = 0; j < outer; ++j)
            if (g->batch_stride[r][j])
                printer_printf(p, " + b%d * %ldL", j, g->batch_stride[r][j]);
        if (type)
            printer_printf(p, ", %s", type[r]);
        printer_printf(p, ", %ld", ld[r]);
        if (g->nbatch)
            printer_printf(p, ", %ldLL", g->batch_stride[r][g->nbatch - 1]);
    }
    if (g->nbatch)
        printer_printf(p, ", %ld", g->batch_extent[g->nbatch - 1]);
}

/* A GEMM node as cuBLAS calls: row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, so B comes first and m, n swap; the outer batch
 * dimensions are host loops, the last one the strided batch. */
static void print_gemm_call(Printer *p, const Kernel *k, const KernelGemm *g) {
    int outer = g->nbatch > 0 ? g->nbatch - 1 : 0;
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    print_alpha_beta(p, k, g);
    for (int j = 0; j < outer; ++j) {
        printer_printf(p, "for (long b%d = 0; b%d < %ldL; ++b%d) {\n", j, j, g->batch_extent[j], j);
        printer_indent(p, 1);
    }
    printer_printf(p, "cublasStatus_t st = %s(\n    h, %s, %s, %ld, %ld, %ld, &alpha",
                   g->nbatch ? "cublasSgemmStridedBatched" : "cublasSgemm",
                   g->trans_b ? "CUBLAS_OP_T" : "CUBLAS_OP_N",
                   g->trans_a ? "CUBLAS_OP_T" : "CUBLAS_OP_N", g->n, g->m, g->k);
    char a[16], b[16];
    snprintf(a, sizeof a, "in[%d]", g->a);
    snprintf(b, sizeof b, "in[%d]", g->b);
    const char *ptr[3] = {a, b, "out"};
    print_gemm_operands(p, g, ptr, NULL);
    printer_printf(p, ");\nif (st != CUBLAS_STATUS_SUCCESS)\n    return (int)st;\n");
    for (int j = 0; j < outer; ++j) {
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* The elements a GEMM reads of operand r (0 A, 1 B) from its pointer:
 * one past the largest offset, row-major, over every batch. */
static long gemm_span(const KernelGemm *g, int r) {
    long rows = r == 0 ? (g->trans_a ? g->k : g->m) : (g->trans_b ? g->n : g->k);
    long cols = r == 0 ? (g->trans_a ? g->m : g->k) : (g->trans_b ? g->k : g->n);
    long span = (rows - 1) * (r == 0 ? g->lda : g->ldb) + cols;
    for (int j = 0; j < g->nbatch; ++j)
        span += (g->batch_extent[j] - 1) * g->batch_stride[r][j];
    return span;
}

/* A GEMM node with bf16 or f16 operands (--dtype): A and B converted
 * into blocks of the stream-ordered pool (prime_cuda_narrow,
 * prime_cuda_math.cuh), then cublasGemmEx or cublasGemmStridedBatchedEx
 * with fp32 accumulation (CUBLAS_COMPUTE_32F) into the fp32 output. */
static void print_gemm_narrow(Printer *p, const Kernel *k, const KernelGemm *g) {
    int outer = g->nbatch > 0 ? g->nbatch - 1 : 0, bf16 = k->gemm_dtype == GEMM_DTYPE_BF16;
    const char *type = bf16 ? "CUDA_R_16BF" : "CUDA_R_16F";
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    print_alpha_beta(p, k, g);
    printer_printf(p, "%s *na = NULL, *nb = NULL;\n", bf16 ? "__nv_bfloat16" : "__half");
    printer_printf(p,
                   "if (prime_cuda_narrow(s, in[%d], %ldL, &na) ||\n"
                   "    prime_cuda_narrow(s, in[%d], %ldL, &nb)) {\n"
                   "    prime_cuda_narrow_free(s, na, nb);\n    return -1;\n}\n",
                   g->a, gemm_span(g, 0), g->b, gemm_span(g, 1));
    if (outer)
        printer_printf(p, "cublasStatus_t st = CUBLAS_STATUS_SUCCESS;\n");
    for (int j = 0; j < outer; ++j) {
        printer_printf(p,
                       "for (long b%d = 0; b%d < %ldL && st == CUBLAS_STATUS_SUCCESS; ++b%d) {\n",
                       j, j, g->batch_extent[j], j);
        printer_indent(p, 1);
    }
    printer_printf(p, "%sst = %s(\n    h, %s, %s, %ld, %ld, %ld, &alpha",
                   outer ? "" : "cublasStatus_t ",
                   g->nbatch ? "cublasGemmStridedBatchedEx" : "cublasGemmEx",
                   g->trans_b ? "CUBLAS_OP_T" : "CUBLAS_OP_N",
                   g->trans_a ? "CUBLAS_OP_T" : "CUBLAS_OP_N", g->n, g->m, g->k);
    const char *ptr[3] = {"na", "nb", "out"};
    const char *types[3] = {type, type, "CUDA_R_32F"};
    print_gemm_operands(p, g, ptr, types);
    printer_printf(p, ",\n    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);\n");
    for (int j = 0; j < outer; ++j) {
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
    printer_printf(p, "prime_cuda_narrow_free(s, na, nb);\n"
                      "if (st != CUBLAS_STATUS_SUCCESS)\n    return (int)st;\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

static void print_launch(Printer *p, const Kernel *k, const KernelLoop *l, const char *name,
                         int node) {
    long points = loop_points(k, l);
    long blocks = (points + CUDA_THREADS - 1) / CUDA_THREADS;
    if (blocks > CUDA_MAX_BLOCKS)
        blocks = CUDA_MAX_BLOCKS;
    printer_printf(p, "%s_node%d<<<%ld, %d, 0, s>>>(out", name, node, blocks, CUDA_THREADS);
    unsigned ops = loop_operands(k, l);
    for (int i = 0; i < k->ph->nin; ++i)
        if ((ops >> i) & 1u)
            printer_printf(p, ", in[%d]", i);
    printer_printf(p, "%s);\n", k->uses_off ? ", o" : "");
    printer_printf(p, "if (cudaGetLastError() != cudaSuccess)\n    return -1;\n");
}

void kernel_cuda_phase(Printer *p, const Kernel *k, const char *name) {
    /* The __global__ kernels are named after the host function and the
     * operator: phase3_matmul_node1. */
    char kname[160];
    snprintf(kname, sizeof kname, "%s_%s", name, k->inst->op->name);
    int gemms = 0, loops = 0;
    for (int i = 0; i < k->nnodes; ++i) {
        if (k->nodes[i].kind == KNODE_GEMM) {
            ++gemms;
            continue;
        }
        ++loops;
        print_loop_kernel(p, k, &k->nodes[i].loop, kname, i);
    }
    printer_printf(p,
                   "int %s(cublasHandle_t h, cudaStream_t s, float *out, const float *const *in,\n"
                   "    const long *off)\n{\n",
                   name);
    printer_indent(p, 1);
    if (!k->uses_off)
        printer_printf(p, "(void)off;\n");
    if (!gemms && !loops)
        printer_printf(p, "(void)s;\n(void)out;\n(void)in;\n");
    if (gemms)
        printer_printf(p, "if (cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)\n    return -1;\n");
    else
        printer_printf(p, "(void)h;\n");
    if (loops && k->uses_off) {
        printer_printf(p, "PrimeCudaOff o;\n");
        printer_printf(p, "for (int d = 0; d < %d; ++d)\n    o.d[d] = d < %d ? off[d] : 0;\n",
                       IR_MAX_DIMS, k->ndims);
    }
    for (int i = 0; i < k->nnodes; ++i) {
        char what[160];
        kernel_describe_node(k, i, what, sizeof what);
        printer_printf(p, "/* %s */\n", what);
        if (k->nodes[i].kind == KNODE_GEMM && k->gemm_dtype != GEMM_DTYPE_F32)
            print_gemm_narrow(p, k, &k->nodes[i].gemm);
        else if (k->nodes[i].kind == KNODE_GEMM)
            print_gemm_call(p, k, &k->nodes[i].gemm);
        else
            print_launch(p, k, &k->nodes[i].loop, kname, i);
    }
    printer_printf(p, "return 0;\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

/* Member j of a fused group for one row, in the fused __global__ kernel:
 * its inputs are the kernel's parameters x<j>_<i>, the stored outputs
 * o<m> of earlier members, or their rows t<m>; its output o<j> or t<j>.
 * print_member_inputs prints the pointers x<i> and returns the operands
 * that are rows t<m>. */
static unsigned print_member_inputs(Printer *p, const Kernel *k, const FuseGroup *g, int j) {
    unsigned ops = loop_operands(k, &k->nodes[0].loop), rowbuf = 0;
    for (int i = 0; i < k->ph->nin; ++i) {
        if (!((ops >> i) & 1u))
            continue;
        int m = g->from[j][i];
        if (m >= 0 && !g->stored[m]) {
            printer_printf(p, "const float *x%d = t%d;\n", i, m);
            rowbuf |= 1u << i;
        } else if (m >= 0) {
            printer_printf(p, "const float *x%d = o%d;\n", i, m);
        } else {
            printer_printf(p, "const float *x%d = x%d_%d;\n", i, j, i);
        }
    }
    return rowbuf;
}

/* The dimensions member kernel k loops over. */
static unsigned member_looped(const Kernel *k) {
    const KernelLoop *l = &k->nodes[0].loop;
    unsigned looped = 0;
    for (int x = 0; x < l->nloops; ++x)
        looped |= 1u << l->loop_dim[x];
    return looped;
}

/* A member's block: its inputs, the printing context (rowidx: a long
 * row's chunk index, or NULL) and its reduction's accumulator. */
static Ctx open_member(Printer *p, const Kernel *k, const FuseGroup *g, int j, const char *rowidx) {
    const KernelLoop *l = &k->nodes[0].loop;
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    unsigned rowbuf = print_member_inputs(p, k, g, j);
    Ctx c = {p, k, 0, member_looped(k), rowbuf, g->inner, rowidx};
    if (l->nreduce)
        printer_printf(p, "double acc = %s;\n", l->combiner == KCOMB_MAX ? "-INFINITY" : "0.0");
    return c;
}

static void print_cuda_member(Printer *p, const Kernel *k, const FuseGroup *g, int j) {
    const KernelLoop *l = &k->nodes[0].loop;
    int inner = g->inner, max = l->combiner == KCOMB_MAX;
    Ctx c = open_member(p, k, g, j, NULL);
    long e = k->extent[inner];
    printer_printf(p, "for (long d%d = 0; d%d < %ldL; ++d%d)\n", inner, inner, e, inner);
    printer_indent(p, 1);
    if (l->nreduce) {
        printer_printf(p, max ? "acc = fmax(acc, (double)" : "acc += (double)");
        print_terms(&c, l, 0);
        printer_printf(p, max ? ");\n" : ";\n");
        printer_indent(p, -1);
    }
    if (g->stored[j]) {
        printer_printf(p, "o%d[", j);
        print_ref(p, k, KERNEL_OUT, c.looped);
    } else {
        printer_printf(p, "t%d[%s", j, l->nreduce ? "0" : "");
        if (!l->nreduce)
            printer_printf(p, "d%d", inner);
    }
    if (l->nreduce) {
        printer_printf(p, "] = (float)acc;\n");
    } else {
        /* A contribution to a tile from outside the group adds to it. */
        printer_printf(p, "] %s ", g->into[j] >= 0 ? "+=" : "=");
        print_terms(&c, l, 1);
        printer_printf(p, ";\n");
        printer_indent(p, -1);
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* The row of member m's output at the row's loop variables (rowidx:
 * a long row's chunk index, or NULL). */
static void print_cuda_row(Printer *p, const Kernel *k, const FuseGroup *g, int m, int inner,
                           const char *rowidx) {
    if (!g->stored[m]) {
        if (k->nodes[0].loop.nreduce)
            printer_printf(p, "t%d[0]", m);
        else if (rowidx)
            printer_printf(p, "t%d[%s]", m, rowidx);
        else
            printer_printf(p, "t%d[d%d]", m, inner);
        return;
    }
    unsigned looped = 0;
    const KernelLoop *l = &k->nodes[0].loop;
    for (int x = 0; x < l->nloops; ++x)
        looped |= 1u << l->loop_dim[x];
    printer_printf(p, "o%d[", m);
    print_ref(p, k, KERNEL_OUT, looped);
    printer_printf(p, "]");
}

/* The parameters of the fused kernel: each stored output, then each
 * input that no member computes. */
static void print_fused_params(Printer *p, const FuseGroup *g, const Kernel *ks, int uses_off,
                               int decl) {
    int any = 0;
    for (int j = 0; j < g->nmembers; ++j)
        if (g->stored[j]) {
            /* The contributions added to one tile from outside share it:
             * no __restrict__ on theirs. */
            const char *q = g->into[j] >= 0 ? "" : "__restrict__ ";
            if (decl)
                printer_printf(p, "%sfloat *%so%d", any ? ", " : "", q, j);
            else
                printer_printf(p, "%sout[%d]", any ? ", " : "", j);
            any = 1;
        }
    for (int j = 0; j < g->nmembers; ++j) {
        unsigned ops = loop_operands(&ks[j], &ks[j].nodes[0].loop);
        for (int i = 0; i < ks[j].ph->nin; ++i) {
            if (!((ops >> i) & 1u) || g->from[j][i] >= 0)
                continue;
            if (decl)
                printer_printf(p, "%sconst float *__restrict__ x%d_%d", any ? ", " : "", j, i);
            else
                printer_printf(p, "%sin[%d][%d]", any ? ", " : "", j, i);
            any = 1;
        }
    }
    if (uses_off)
        printer_printf(p, decl ? "%sPrimeCudaOff off" : "%so", any ? ", " : "");
}

/* The group's column sums (FuseGroup.cols) as one __global__ kernel,
 * NAME_cols, a thread per element of the inner dimension summing over the
 * group's one row dimension in order; 0 when the group has none. */
static int print_cuda_columns(Printer *p, const FuseGroup *g, const Kernel *ks, const char *name,
                              int uses_off) {
    int any = 0;
    for (int j = 0; j < g->nmembers; ++j)
        any |= g->cols[j];
    if (!any)
        return 0;
    const KernelLoop *l0 = &ks[0].nodes[0].loop;
    int row = l0->loop_dim[0], inner = g->inner;
    printer_printf(p, "__global__ void %s_cols(", name);
    print_fused_params(p, g, ks, uses_off, 1);
    printer_printf(p, ")\n{\n");
    printer_indent(p, 1);
    printer_printf(p, "const long d%d = blockIdx.x * (long)blockDim.x + threadIdx.x;\n", inner);
    printer_printf(p, "if (d%d >= %ldL)\n    return;\n", inner, ks[0].extent[inner]);
    for (int j = 0; j < g->nmembers; ++j) {
        if (!g->cols[j])
            continue;
        const Kernel *k = &ks[j];
        const KernelLoop *l = &k->nodes[0].loop;
        unsigned looped = (1u << row) | (1u << inner), ops = loop_operands(k, l);
        printer_printf(p, "{\n");
        printer_indent(p, 1);
        for (int i = 0; i < k->ph->nin; ++i) {
            if (!((ops >> i) & 1u))
                continue;
            if (g->from[j][i] >= 0)
                printer_printf(p, "const float *x%d = o%d;\n", i, g->from[j][i]);
            else
                printer_printf(p, "const float *x%d = x%d_%d;\n", i, j, i);
        }
        Ctx c = {p, k, 0, looped, 0, inner, NULL};
        printer_printf(p, "double acc = 0.0;\n");
        printer_printf(p, "for (long d%d = 0; d%d < %ldL; ++d%d)\n", row, row, k->extent[row], row);
        printer_indent(p, 1);
        printer_printf(p, "acc += (double)");
        print_terms(&c, l, 0);
        printer_printf(p, ";\n");
        printer_indent(p, -1);
        printer_printf(p, "o%d[d%d] = (float)acc;\n", j, inner);
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
    return 1;
}

/* The loop over thread threadIdx.x's chunk of a long row (e elements):
 * element d<inner> = q * CUDA_THREADS + threadIdx.x of each chunk q. */
static void open_chunks(Printer *p, int inner, long e) {
    long nq = (e + CUDA_THREADS - 1) / CUDA_THREADS;
    printer_printf(p, "for (int q = 0; q < %ld; ++q) {\n", nq);
    printer_indent(p, 1);
    printer_printf(p, "const long d%d = q * %dL + threadIdx.x;\n", inner, CUDA_THREADS);
    printer_printf(p, "if (d%d < %ldL) ", inner, e);
}

static void close_chunks(Printer *p) {
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* Member j of a long row's group, in the block of the row: each thread
 * computes its chunk's elements (into its chunk of a row t<j>, or the
 * stored tile), a reduction sums (or takes the maximum of) its chunk's
 * terms in double and the block's threads combine theirs
 * (prime_cuda_block_sum, prime_cuda_block_max); every thread then holds
 * the row's value, and thread 0 stores it, before a barrier that makes it
 * visible to the block. */
static void print_block_member(Printer *p, const Kernel *k, const FuseGroup *g, int j) {
    const KernelLoop *l = &k->nodes[0].loop;
    int inner = g->inner, max = l->combiner == KCOMB_MAX;
    Ctx c = open_member(p, k, g, j, "q");
    open_chunks(p, inner, k->extent[inner]);
    if (l->nreduce) {
        printer_printf(p, max ? "acc = fmax(acc, (double)" : "acc += (double)");
        print_terms(&c, l, 0);
        printer_printf(p, max ? ");\n" : ";\n");
    } else {
        print_cuda_row(p, k, g, j, inner, "q");
        /* A contribution to a tile from outside the group adds to it. */
        printer_printf(p, " %s ", g->into[j] >= 0 ? "+=" : "=");
        print_terms(&c, l, 1);
        printer_printf(p, ";\n");
    }
    close_chunks(p);
    if (l->nreduce) {
        printer_printf(p, "acc = %s(acc, red);\n",
                       max ? "prime_cuda_block_max" : "prime_cuda_block_sum");
        if (g->stored[j]) {
            printer_printf(p, "if (threadIdx.x == 0)\n    ");
            print_cuda_row(p, k, g, j, inner, "q");
            printer_printf(p, " = (float)acc;\n__syncthreads();\n");
        } else {
            printer_printf(p, "t%d[0] = (float)acc;\n", j);
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* The ADD ad of a long row's group: each thread's chunk of the row, or a
 * reduction's value (every thread's copy, or the stored one by thread 0,
 * then a barrier). */
static void print_block_add(Printer *p, const FuseGroup *g, const Kernel *ks, const FuseAdd *ad) {
    int inner = g->inner, scalar = ks[ad->dst].nodes[0].loop.nreduce != 0;
    if (!scalar)
        open_chunks(p, inner, ks[0].extent[inner]);
    else if (g->stored[ad->dst])
        printer_printf(p, "if (threadIdx.x == 0)\n    ");
    print_cuda_row(p, &ks[ad->dst], g, ad->dst, inner, "q");
    printer_printf(p, " += ");
    print_cuda_row(p, &ks[ad->src], g, ad->src, inner, "q");
    printer_printf(p, ";\n");
    if (!scalar)
        close_chunks(p);
    else if (g->stored[ad->dst])
        printer_printf(p, "__syncthreads();\n");
}

/* The outer loops' variables of row i (innermost first). */
static void print_row_index(Printer *p, const Kernel *k0, int nouter) {
    const KernelLoop *l0 = &k0->nodes[0].loop;
    printer_printf(p, nouter ? "long r = i;\n" : "(void)i;\n");
    for (int x = nouter - 1; x >= 0; --x) {
        int d = l0->loop_dim[x];
        if (x == 0)
            printer_printf(p, "const long d%d = r;\n", d);
        else
            printer_printf(p, "const long d%d = r %% %ldL;\nr /= %ldL;\n", d, k0->extent[d],
                           k0->extent[d]);
    }
}

/* NAME_rows for rows longer than CUDA_ROW_MAX: a block of CUDA_THREADS
 * threads per row (grid-stride over the rows), each thread holding
 * ceil(E / CUDA_THREADS) elements of every row t<j> the group keeps. */
static void print_block_rows(Printer *p, const FuseGroup *g, const Kernel *ks, const char *name,
                             int uses_off, long rows) {
    const KernelLoop *l0 = &ks[0].nodes[0].loop;
    int nouter = l0->nloops - 1, reduces = 0;
    long e = ks[0].extent[g->inner], nq = (e + CUDA_THREADS - 1) / CUDA_THREADS;
    for (int j = 0; j < g->nmembers; ++j)
        reduces |= !g->cols[j] && ks[j].nodes[0].loop.nreduce;
    printer_printf(p, "__global__ void %s_rows(", name);
    print_fused_params(p, g, ks, uses_off, 1);
    printer_printf(p, ")\n{\n");
    printer_indent(p, 1);
    if (reduces)
        printer_printf(p, "__shared__ double red[%d];\n", CUDA_THREADS / 32);
    printer_printf(p, "for (long i = blockIdx.x; i < %ldL; i += gridDim.x) {\n", rows);
    printer_indent(p, 1);
    print_row_index(p, &ks[0], nouter);
    for (int j = 0; j < g->nmembers; ++j)
        if (!g->stored[j])
            printer_printf(p, "float t%d[%ld];\n", j, ks[j].nodes[0].loop.nreduce ? 1L : nq);
    for (int j = 0; j < g->nmembers; ++j) {
        if (!g->cols[j])
            print_block_member(p, &ks[j], g, j);
        for (int a = 0; a < g->nadds; ++a)
            if (g->adds[a].after == j)
                print_block_add(p, g, ks, &g->adds[a]);
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

/* NAME_rows for rows of at most CUDA_ROW_MAX: a thread per row. */
static void print_thread_rows(Printer *p, const FuseGroup *g, const Kernel *ks, const char *name,
                              int uses_off, long rows) {
    const KernelLoop *l0 = &ks[0].nodes[0].loop;
    int nouter = l0->nloops - 1, inner = g->inner;
    printer_printf(p, "__global__ void %s_rows(", name);
    print_fused_params(p, g, ks, uses_off, 1);
    printer_printf(p, ")\n{\n");
    printer_indent(p, 1);
    printer_printf(p,
                   "for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < %ldL;\n"
                   "     i += (long)gridDim.x * blockDim.x) {\n",
                   rows);
    printer_indent(p, 1);
    print_row_index(p, &ks[0], nouter);
    for (int j = 0; j < g->nmembers; ++j)
        if (!g->stored[j])
            printer_printf(p, "float t%d[%ld];\n", j,
                           ks[j].nodes[0].loop.nreduce ? 1L : ks[0].extent[inner]);
    for (int j = 0; j < g->nmembers; ++j) {
        if (!g->cols[j])
            print_cuda_member(p, &ks[j], g, j);
        for (int a = 0; a < g->nadds; ++a) {
            const FuseAdd *ad = &g->adds[a];
            if (ad->after != j)
                continue;
            if (!ks[ad->dst].nodes[0].loop.nreduce)
                printer_printf(p, "for (long d%d = 0; d%d < %ldL; ++d%d)\n    ", inner, inner,
                               ks[0].extent[inner], inner);
            print_cuda_row(p, &ks[ad->dst], g, ad->dst, inner, NULL);
            printer_printf(p, " += ");
            print_cuda_row(p, &ks[ad->src], g, ad->src, inner, NULL);
            printer_printf(p, ";\n");
        }
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}

void kernel_cuda_fused(Printer *p, const FuseGroup *g, const Kernel *ks, const char *name) {
    const KernelLoop *l0 = &ks[0].nodes[0].loop;
    int nouter = l0->nloops - 1, inner = g->inner, uses_off = 0;
    for (int j = 0; j < g->nmembers; ++j)
        uses_off |= ks[j].uses_off;
    long rows = 1;
    for (int x = 0; x < nouter; ++x)
        rows *= ks[0].extent[l0->loop_dim[x]];
    int block = ks[0].extent[inner] > CUDA_ROW_MAX;
    if (block)
        print_block_rows(p, g, ks, name, uses_off, rows);
    else
        print_thread_rows(p, g, ks, name, uses_off, rows);
    int cols = print_cuda_columns(p, g, ks, name, uses_off);
    printer_printf(p,
                   "int %s(cublasHandle_t h, cudaStream_t s, float *const *out,\n"
                   "    const float *const *const *in, const long *off)\n{\n",
                   name);
    printer_indent(p, 1);
    printer_printf(p, "(void)h;\n");
    if (!uses_off)
        printer_printf(p, "(void)off;\n");
    else
        printer_printf(p,
                       "PrimeCudaOff o;\nfor (int d = 0; d < %d; ++d)\n    o.d[d] = d < %d ? "
                       "off[d] : 0;\n",
                       IR_MAX_DIMS, ks[0].ndims);
    for (int j = 0; j < g->nmembers; ++j) {
        char what[160];
        kernel_describe_node(&ks[j], 0, what, sizeof what);
        printer_printf(p, "/* %s */\n", what);
    }
    long blocks = block ? rows : (rows + CUDA_THREADS - 1) / CUDA_THREADS;
    if (blocks > CUDA_MAX_BLOCKS)
        blocks = CUDA_MAX_BLOCKS;
    printer_printf(p, "%s_rows<<<%ld, %d, 0, s>>>(", name, blocks, CUDA_THREADS);
    print_fused_params(p, g, ks, uses_off, 0);
    printer_printf(p, ");\n");
    if (cols) {
        /* After every row: the column sums read tiles from outside only,
         * in the rows' order. */
        long e = ks[0].extent[inner], cb = (e + CUDA_THREADS - 1) / CUDA_THREADS;
        printer_printf(p, "%s_cols<<<%ld, %d, 0, s>>>(", name, cb, CUDA_THREADS);
        print_fused_params(p, g, ks, uses_off, 0);
        printer_printf(p, ");\n");
    }
    printer_printf(p, "if (cudaGetLastError() != cudaSuccess)\n    return -1;\nreturn 0;\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n\n");
}
