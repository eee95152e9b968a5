/*
 * kernel_c.c — the kernel IR printed as C (see kernel_c.h).
 */
#include "kernel_c.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Printing one expression inside a loop nest: operand i is the pointer
 * x<i> (hoisted to the innermost loop's row), indexed by the innermost
 * loop variable only. */
typedef struct Ctx {
    Printer *p;
    const Kernel *k;
    int dbl;
    int inner;       /* the innermost loop's dimension, or -1 */
    unsigned looped; /* the dimensions that have a loop */
} Ctx;

static void print_ref(Ctx *c, int x) {
    long st = c->inner >= 0 ? c->k->stride[x][c->inner] : 0;
    if (!st)
        printer_printf(c->p, "0");
    else if (st == 1)
        printer_printf(c->p, "d%d", c->inner);
    else
        printer_printf(c->p, "d%d * %ldL", c->inner, st);
}

static void print_expr(Ctx *c, const Expr *x) {
    Printer *p = c->p;
    const Kernel *k = c->k;
    switch (x->kind) {
    case EXPR_INT:
        printer_printf(p, c->dbl ? "%ld.0" : "%ld.0f", x->value);
        break;
    case EXPR_NAME:
    case EXPR_INDEX: {
        int d = x->kind == EXPR_NAME ? kernel_dim(k, x->name) : -1;
        if (d >= 0) {
            /* A dimension used as a value: its global index. In fp32
             * through int, which vectorises (long to float does not
             * before AVX-512); an index is below 2^31. */
            if ((c->looped >> d) & 1u)
                printer_printf(
                    p, c->dbl ? "(double)(d%d + off[%d])" : "(float)(int)(d%d + off[%d])", d, d);
            else
                printer_printf(p, "(%s)off[%d]", c->dbl ? "double" : "float", d);
            return;
        }
        int i = kernel_operand(k->ph, x->name);
        printer_printf(p, "x%d[", i);
        print_ref(c, i);
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
            /* The whole dimension, whatever the tile. */
            int d = kernel_dim(k, ((const Expr *)x->args.items[0])->name);
            if (d < 0)
                ICE("size() of no dimension");
            printer_printf(p, c->dbl ? "%ld.0" : "%ld.0f", k->inst->dim_sizes[d]);
            break;
        }
        printer_printf(p, "%s(", kernel_intrinsic(x->name, c->dbl ? KLANG_C64 : KLANG_C32));
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

/* base + the offsets of the loop variables of dims[0..n) in operand x. */
static void print_offset(Printer *p, const char *base, const Kernel *k, int x, const int *dims,
                         int n) {
    int zero = strcmp(base, "0") == 0, any = 0;
    if (!zero)
        printer_printf(p, "%s", base);
    for (int j = 0; j < n; ++j)
        if (k->stride[x][dims[j]]) {
            printer_printf(p, "%sd%d * %ldL", zero && !any ? "" : " + ", dims[j],
                           k->stride[x][dims[j]]);
            any = 1;
        }
    if (zero && !any)
        printer_printf(p, "0");
}

/* set: C = alpha op(A) op(B), beta 0 (C is not read), else C += ... */
static void print_gemm(Printer *p, const Kernel *k, const KernelGemm *g, int dbl, int set) {
    const char *f = dbl ? "" : "f";
    int outer = g->nbatch > 0 ? g->nbatch - 1 : 0;
    for (int j = 0; j < outer; ++j) {
        printer_printf(p, "for (long b%d = 0; b%d < %ld; ++b%d) {\n", j, j, g->batch_extent[j], j);
        printer_indent(p, 1);
    }
    /* --dtype bf16 or f16 (the cuda target): the fp32 kernels' GEMMs round
     * their operands as the .cu's do (runtime/prime_cuda_gemm.h). */
    int narrow = !dbl && k->gemm_dtype != GEMM_DTYPE_F32;
    printer_printf(p, "%s%s%s(", dbl ? "prime_dgemm" : "prime_gemm", g->nbatch ? "_batched" : "",
                   narrow ? "_narrow" : "");
    if (narrow)
        printer_printf(p, "%s, ",
                       k->gemm_dtype == GEMM_DTYPE_BF16 ? "PRIME_DTYPE_BF16" : "PRIME_DTYPE_F16");
    printer_printf(p, "%d, %d, ", g->trans_a, g->trans_b);
    if (g->nbatch)
        printer_printf(p, "%ld, ", g->batch_extent[g->nbatch - 1]);
    printer_printf(p, "%ld, %ld, %ld, %s1.0%s", g->m, g->n, g->k, g->sign < 0 ? "-" : "", f);
    if (g->scale != 1)
        printer_printf(p, " * %ld.0%s", g->scale, f);
    Ctx c = {p, k, dbl, -1, 0};
    for (int i = 0; i < g->nfactors; ++i) {
        printer_printf(p, " %c ", g->factors[i].op);
        print_expr(&c, g->factors[i].expr);
    }
    const int x3[3] = {g->a, g->b, KERNEL_OUT};
    const long ld[3] = {g->lda, g->ldb, g->ldc};
    for (int r = 0; r < 3; ++r) {
        if (r == 2)
            printer_printf(p, ", %s%s, out", set ? "0.0" : "1.0", f);
        else
            printer_printf(p, ", in[%d]", x3[r]);
        for (int j = 0; j < outer; ++j)
            if (g->batch_stride[r][j])
                printer_printf(p, " + b%d * %ldL", j, g->batch_stride[r][j]);
        printer_printf(p, ", %ld", ld[r]);
        if (g->nbatch)
            printer_printf(p, ", %ldL", g->batch_stride[r][g->nbatch - 1]);
    }
    printer_printf(p, ");\n");
    for (int j = 0; j < outer; ++j) {
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
}

/* The terms, times the loop's scale when with_scale. */
static void print_terms(Ctx *c, const KernelLoop *l, int with_scale) {
    if (with_scale && l->scale != 1)
        printer_printf(c->p, c->dbl ? "%ld.0 * " : "%ld.0f * ", l->scale);
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

static void open_loop(Printer *p, const Kernel *k, int d, int brace) {
    printer_printf(p, "for (long d%d = 0; d%d < %ld; ++d%d)%s\n", d, d, k->extent[d], d,
                   brace ? " {" : "");
    printer_indent(p, 1);
}

static void close_loops(Printer *p, int n, int brace) {
    for (int j = 0; j < n; ++j) {
        printer_indent(p, -1);
        if (brace)
            printer_printf(p, "}\n");
    }
}

/* A sum whose innermost loop has a multiple of KERNEL_LANES iterations
 * (at least two rounds) accumulates into KERNEL_LANES double lanes, lane j
 * taking the iterations j mod KERNEL_LANES, added pairwise at the end:
 * each lane's sum is independent of the others, so the loop vectorises
 * without reordering any one sum (deterministic; no -ffast-math). fp32
 * kernels only; the fp64 reference sums in loop order. */
#define KERNEL_LANES 8 /* the pairwise sum below is printed for 8 */

static int loop_lanes(const Kernel *k, const KernelLoop *l, int dbl) {
    if (dbl || l->combiner != KCOMB_SUM || !l->nreduce)
        return 0;
    long e = k->extent[l->loop_dim[l->nloops - 1]];
    return e % KERNEL_LANES == 0 && e >= 2 * KERNEL_LANES;
}

/* The innermost loop of a reduction in lanes: d<inner> = q<inner> + j. */
static void print_lanes(Ctx *c, const KernelLoop *l) {
    Printer *p = c->p;
    int d = c->inner;
    printer_printf(p, "for (long q%d = 0; q%d < %ld; q%d += %d)\n", d, d, c->k->extent[d], d,
                   KERNEL_LANES);
    printer_indent(p, 1);
    printer_printf(p, "for (long j = 0; j < %d; ++j) {\n", KERNEL_LANES);
    printer_indent(p, 1);
    printer_printf(p, "const long d%d = q%d + j;\n", d, d);
    printer_printf(p, "acc[j] += ");
    print_terms(c, l, 0);
    printer_printf(p, ";\n");
    printer_indent(p, -1);
    printer_printf(p, "}\n");
    printer_indent(p, -1);
}

/* A sum accumulates in double; a maximum, exact in any precision, in the
 * kernel's own type. */
static void print_acc_decl(Printer *p, int lanes, const char *identity, const char *type) {
    if (!lanes) {
        printer_printf(p, "%s acc = %s;\n", type, identity);
        return;
    }
    printer_printf(p, "double acc[%d] = {", KERNEL_LANES);
    for (int j = 0; j < KERNEL_LANES; ++j)
        printer_printf(p, "%s0.0", j ? ", " : "");
    printer_printf(p, "};\n");
}

/* A row of outputs at a time: the largest row whose double accumulators
 * go on the stack. */
#define KERNEL_ROW_MAX 4096

/* The output dimension a sum over one strided dimension accumulates a row
 * of (its innermost output loop), or -1: in fp32, where the output and
 * every operand the terms read are contiguous in that dimension (or do
 * not hold it) and none is contiguous in the summed one, so that the sum
 * in loop order would read a column; a row of at most max elements. */
static int row_dim(const Kernel *k, const KernelLoop *l, unsigned ops, int dbl, long max) {
    int n = l->nloops, nout = n - l->nreduce;
    if (dbl || l->combiner != KCOMB_SUM || l->nreduce != 1 || nout < 1)
        return -1;
    int o = l->loop_dim[nout - 1], r = l->loop_dim[n - 1], contiguous = 0;
    if (k->stride[KERNEL_OUT][o] != 1 || k->extent[o] > max || k->extent[o] < 2)
        return -1;
    for (int i = 0; i < k->ph->nin; ++i) {
        if (!((ops >> i) & 1u))
            continue;
        if (k->stride[i][r] == 1 || k->stride[i][o] > 1)
            return -1;
        contiguous |= k->stride[i][o] == 1;
    }
    return contiguous ? o : -1;
}

int kernel_c_column_dim(const Kernel *k) {
    if (k->nnodes != 1 || k->nodes[0].kind != KNODE_LOOP)
        return -1;
    const KernelLoop *l = &k->nodes[0].loop;
    unsigned ops = 0;
    for (int t = 0; t < l->nterms; ++t)
        ops |= kernel_expr_operands(k, l->terms[t].expr);
    /* A fused group's column sums are bounded by the fuser (kernel_fuse.c:
     * their accumulators are on the kernel's stack too); each one sums in
     * the order of print_loop_rows, which is that of the loop in any
     * case. */
    return row_dim(k, l, ops, 0, LONG_MAX);
}

/* The sum over the summed dimension r outside the row of dimension o:
 * acc[o] += terms for each r, in r's order (one double accumulator per
 * output of the row, deterministic), then the row added to the output. */
static void print_loop_rows(Printer *p, const Kernel *k, const KernelLoop *l, unsigned ops,
                            unsigned looped, int o, int set) {
    const int *dims = l->loop_dim;
    int n = l->nloops, nout = n - 1, r = dims[n - 1];
    int at[IR_MAX_DIMS + 1];
    for (int j = 0; j < nout - 1; ++j) {
        open_loop(p, k, dims[j], 1);
        at[j] = dims[j];
    }
    at[nout - 1] = r;
    printer_printf(p, "double acc[%ld] = {0.0};\n", k->extent[o]);
    open_loop(p, k, r, 1);
    for (int i = 0; i < k->ph->nin; ++i) {
        if (!((ops >> i) & 1u))
            continue;
        char base[32];
        snprintf(base, sizeof base, "in[%d]", i);
        printer_printf(p, "const float *restrict x%d = ", i);
        print_offset(p, base, k, i, at, nout);
        printer_printf(p, ";\n");
    }
    Ctx c = {p, k, 0, o, looped};
    open_loop(p, k, o, 0);
    printer_printf(p, "acc[d%d] += ", o);
    print_terms(&c, l, 0);
    printer_printf(p, ";\n");
    close_loops(p, 1, 0);
    close_loops(p, 1, 1);
    printer_printf(p, "float *restrict y = ");
    print_offset(p, "out", k, KERNEL_OUT, dims, nout - 1);
    printer_printf(p, ";\n");
    open_loop(p, k, o, 0);
    printer_printf(p, "y[d%d] %s (float)(", o, set ? "=" : "+=");
    if (l->scale != 1)
        printer_printf(p, "%ld.0 * ", l->scale);
    printer_printf(p, "acc[d%d]);\n", o);
    close_loops(p, 1, 0);
    close_loops(p, nout - 1, 1);
}

/* set: the node writes every output element without reading it (a
 * maximum from its identity, -inf), else it folds into the output. */
/* A maximum in fp32 whose innermost loop has at least 16 iterations
 * (and at most KERNEL_ROW_MAX) computes that loop's terms into a row on
 * the stack, a loop that vectorises, and folds the row into acc with
 * prime_max_row (runtime/prime_math.h: 16 lanes of v > m ? v : m), where
 * the compare in loop order vectorises in no compiler without
 * -ffinite-math-only. The same maximum: a NaN term never wins either
 * way, only the sign of a zero maximum may differ. */
static long max_row(const Kernel *k, const KernelLoop *l, int dbl) {
    if (dbl || l->combiner != KCOMB_MAX || !l->nreduce)
        return 0;
    long e = k->extent[l->loop_dim[l->nloops - 1]];
    return e >= 16 && e <= KERNEL_ROW_MAX ? e : 0;
}

static void print_loop(Printer *p, const Kernel *k, const KernelLoop *l, int dbl, int set) {
    const char *type = dbl ? "double" : "float";
    const int *dims = l->loop_dim;
    int n = l->nloops, outer = n > 0 ? n - 1 : 0, nout = n - l->nreduce;
    unsigned looped = 0, ops = 0;
    for (int j = 0; j < n; ++j)
        looped |= 1u << dims[j];
    for (int t = 0; t < l->nterms; ++t)
        ops |= kernel_expr_operands(k, l->terms[t].expr);
    const int max = l->combiner == KCOMB_MAX;
    const char *identity = max ? "-INFINITY" : "0.0";
    const int lanes = loop_lanes(k, l, dbl), row = row_dim(k, l, ops, dbl, KERNEL_ROW_MAX);
    const long mrow = max_row(k, l, dbl);
    if (row >= 0) {
        print_loop_rows(p, k, l, ops, looped, row, set);
        return;
    }
    const char *acc_type = max ? type : "double";
    for (int j = 0; j < outer; ++j) {
        if (l->nreduce && j == nout)
            print_acc_decl(p, lanes, identity, acc_type);
        open_loop(p, k, dims[j], 1);
    }
    if (l->nreduce && outer == nout)
        print_acc_decl(p, lanes, identity, acc_type);
    if (!l->nreduce) {
        printer_printf(p, "%s *restrict o = ", type);
        print_offset(p, "out", k, KERNEL_OUT, dims, outer);
        printer_printf(p, ";\n");
    }
    for (int i = 0; i < k->ph->nin; ++i) {
        if (!((ops >> i) & 1u))
            continue;
        char base[32];
        snprintf(base, sizeof base, "in[%d]", i);
        printer_printf(p, "const %s *restrict x%d = ", type, i);
        print_offset(p, base, k, i, dims, outer);
        printer_printf(p, ";\n");
    }
    Ctx c = {p, k, dbl, n > 0 ? dims[n - 1] : -1, looped};
    if (mrow)
        printer_printf(p, "float row[%ld];\n", mrow);
    if (lanes) {
        print_lanes(&c, l);
    } else if (n > 0) {
        open_loop(p, k, dims[n - 1], 0);
    }
    if (l->nreduce) {
        if (mrow) {
            printer_printf(p, "row[d%d] = ", dims[n - 1]);
            print_terms(&c, l, 0);
            printer_printf(p, ";\n");
            close_loops(p, 1, 0);
            printer_printf(p, "acc = prime_max_row(row, %ld, acc);\n", mrow);
        } else if (!lanes && max) {
            /* v > acc ? v : acc: fmax's result (a NaN term leaves acc as
             * it is), inline, where fmax is a call per element. */
            printer_printf(p, "{\n");
            printer_indent(p, 1);
            printer_printf(p, "const %s v = ", type);
            print_terms(&c, l, 0);
            printer_printf(p, ";\n");
            printer_printf(p, "acc = v > acc ? v : acc;\n");
            printer_indent(p, -1);
            printer_printf(p, "}\n");
            close_loops(p, 1, 0);
        } else if (!lanes) {
            printer_printf(p, "acc += ");
            print_terms(&c, l, 0);
            printer_printf(p, ";\n");
            close_loops(p, 1, 0);
        }
        close_loops(p, l->nreduce - 1, 1);
        printer_printf(p, "out[");
        print_offset(p, "0", k, KERNEL_OUT, dims, nout);
        if (max && set) {
            /* acc is never NaN (a NaN term leaves it as it is), so it is
             * max(-inf, acc). */
            printer_printf(p, "] = (%s)acc;\n", type);
        } else if (max) {
            /* out = max(out, acc): the output holds the maximum so far. */
            printer_printf(p, "] = %s(out[", dbl ? "fmax" : "fmaxf");
            print_offset(p, "0", k, KERNEL_OUT, dims, nout);
            printer_printf(p, "], (%s)acc);\n", type);
        } else {
            printer_printf(p, "] %s (%s)(", set ? "=" : "+=", type);
            if (l->scale != 1)
                printer_printf(p, "%ld.0 * ", l->scale);
            if (lanes)
                printer_printf(p, "(((acc[0] + acc[1]) + (acc[2] + acc[3])) + "
                                  "((acc[4] + acc[5]) + (acc[6] + acc[7]))));\n");
            else
                printer_printf(p, "acc);\n");
        }
        close_loops(p, nout, 1);
        return;
    }
    printer_printf(p, "o[");
    print_ref(&c, KERNEL_OUT);
    if (max) {
        printer_printf(p, "] = %s(", dbl ? "fmax" : "fmaxf");
        if (set) {
            printer_printf(p, "-INFINITY");
        } else {
            printer_printf(p, "o[");
            print_ref(&c, KERNEL_OUT);
            printer_printf(p, "]");
        }
        printer_printf(p, ", ");
        print_terms(&c, l, 0);
        printer_printf(p, ");\n");
    } else {
        printer_printf(p, "] %s ", set ? "=" : "+=");
        print_terms(&c, l, 1);
        printer_printf(p, ";\n");
    }
    if (n > 0)
        close_loops(p, 1, 0);
    close_loops(p, outer, 1);
}

void kernel_c_body_mode(Printer *p, const Kernel *k, int dbl, int overwrite) {
    if (!k->uses_off)
        printer_printf(p, "(void)off;\n");
    /* A maximum over whole tensors (the reference) starts from the
     * combiner's identity; a tile starts there at its allocation. */
    if (k->whole && k->nnodes == 1 && k->nodes[0].kind == KNODE_LOOP &&
        k->nodes[0].loop.combiner == KCOMB_MAX) {
        long n = 1;
        for (int x = 0; x < k->ph->out.ndims; ++x)
            n *= k->extent[k->ph->out.opdims[x]];
        printer_printf(p, "for (long i = 0; i < %ldL; ++i)\n", n);
        printer_printf(p, "    out[i] = -INFINITY;\n");
    }
    for (int i = 0; i < k->nnodes; ++i) {
        char what[160];
        kernel_describe_node(k, i, what, sizeof what);
        printer_printf(p, "/* %s */\n", what);
        /* Every node writes each element of the output once: the first
         * one of an overwriting kernel sets it. */
        int set = overwrite && i == 0;
        if (k->nodes[i].kind == KNODE_GEMM)
            print_gemm(p, k, &k->nodes[i].gemm, dbl, set);
        else
            print_loop(p, k, &k->nodes[i].loop, dbl, set);
    }
}

void kernel_c_body(Printer *p, const Kernel *k, int dbl) {
    kernel_c_body_mode(p, k, dbl, 0);
}

/* base (an operand of member j, or the output) at the row: the offsets
 * of the outer loops, or the member's row on the stack. */
static void print_row_ptr(Printer *p, const Kernel *k, const FuseGroup *g, int j, int x,
                          const int *dims, int nouter) {
    int m = x == KERNEL_OUT ? j : g->from[j][x];
    if (m >= 0 && !g->stored[m]) {
        printer_printf(p, "t%d", m);
        return;
    }
    char base[48];
    if (x == KERNEL_OUT)
        snprintf(base, sizeof base, "out[%d]", j);
    else
        snprintf(base, sizeof base, "in[%d][%d]", j, x);
    print_offset(p, base, k, x, dims, nouter);
}

/* Opens member j's block for one row: a pointer x<i> to the row of each
 * operand its terms read (the outer loops dims[0..nouter)). */
static void open_member(Printer *p, const Kernel *k, const FuseGroup *g, int j, const int *dims,
                        int nouter) {
    const KernelLoop *l = &k->nodes[0].loop;
    unsigned ops = 0;
    for (int t = 0; t < l->nterms; ++t)
        ops |= kernel_expr_operands(k, l->terms[t].expr);
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    for (int i = 0; i < k->ph->nin; ++i) {
        if (!((ops >> i) & 1u))
            continue;
        printer_printf(p, "const float *restrict x%d = ", i);
        print_row_ptr(p, k, g, j, i, dims, nouter);
        printer_printf(p, ";\n");
    }
}

/* Member j's node for one row: the inner loop, the output row (or its
 * one element for a reduction) set. */
static void print_member_row(Printer *p, const Kernel *k, const FuseGroup *g, int j) {
    const KernelLoop *l = &k->nodes[0].loop;
    const int *dims = l->loop_dim;
    int nouter = l->nloops - 1, inner = dims[nouter];
    unsigned looped = 0;
    for (int x = 0; x < l->nloops; ++x)
        looped |= 1u << dims[x];
    open_member(p, k, g, j, dims, nouter);
    printer_printf(p, "float *restrict o = ");
    print_row_ptr(p, k, g, j, KERNEL_OUT, dims, nouter);
    printer_printf(p, ";\n");
    Ctx c = {p, k, 0, inner, looped};
    const long mrow = max_row(k, l, 0);
    const int lanes = loop_lanes(k, l, 0);
    if (!l->nreduce) {
        /* A contribution to a tile from outside the group adds to its row
         * (the ADD's rounding: the value in fp32, then the sum). */
        open_loop(p, k, inner, 0);
        printer_printf(p, "o[");
        print_ref(&c, KERNEL_OUT);
        printer_printf(p, "] %s ", g->into[j] >= 0 ? "+=" : "=");
        print_terms(&c, l, 1);
        printer_printf(p, ";\n");
        close_loops(p, 1, 0);
    } else if (mrow) {
        printer_printf(p, "float row[%ld];\n", mrow);
        open_loop(p, k, inner, 0);
        printer_printf(p, "row[d%d] = ", inner);
        print_terms(&c, l, 0);
        printer_printf(p, ";\n");
        close_loops(p, 1, 0);
        printer_printf(p, "o[0] = prime_max_row(row, %ld, -INFINITY);\n", mrow);
    } else if (l->combiner == KCOMB_MAX) {
        printer_printf(p, "float acc = -INFINITY;\n");
        open_loop(p, k, inner, 1);
        printer_printf(p, "const float v = ");
        print_terms(&c, l, 0);
        printer_printf(p, ";\nacc = v > acc ? v : acc;\n");
        close_loops(p, 1, 1);
        printer_printf(p, "o[0] = acc;\n");
    } else {
        print_acc_decl(p, lanes, "0.0", "double");
        if (lanes) {
            print_lanes(&c, l);
        } else {
            open_loop(p, k, inner, 0);
            printer_printf(p, "acc += ");
            print_terms(&c, l, 0);
            printer_printf(p, ";\n");
            close_loops(p, 1, 0);
        }
        printer_printf(p, "o[0] = (float)(");
        if (lanes)
            printer_printf(p, "((acc[0] + acc[1]) + (acc[2] + acc[3])) + "
                              "((acc[4] + acc[5]) + (acc[6] + acc[7]))");
        else
            printer_printf(p, "acc");
        printer_printf(p, ");\n");
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* Column sum j (kernel k) for one row of the group (row dimension
 * `row`): c<j>[d] += its terms, the order of print_loop_rows. What it
 * reads is a tile (from outside, or a member's stored output). */
static void print_column_row(Printer *p, const Kernel *k, const FuseGroup *g, int j, int row,
                             int inner) {
    const KernelLoop *l = &k->nodes[0].loop;
    unsigned looped = (1u << row) | (1u << inner);
    open_member(p, k, g, j, &row, 1);
    Ctx c = {p, k, 0, inner, looped};
    open_loop(p, k, inner, 0);
    printer_printf(p, "c%d[d%d] += ", j, inner);
    print_terms(&c, l, 0);
    printer_printf(p, ";\n");
    close_loops(p, 1, 0);
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

/* The ADD ad of the group after its member: a row into a row, or one
 * reduction's value for the row into another's. */
static void print_fused_add(Printer *p, const FuseGroup *g, const Kernel *ks, const FuseAdd *ad,
                            int nouter) {
    const int *dims = ks[ad->dst].nodes[0].loop.loop_dim;
    int inner = g->inner, scalar = ks[ad->dst].stride[KERNEL_OUT][inner] == 0;
    printer_printf(p, "{\n");
    printer_indent(p, 1);
    printer_printf(p, "float *restrict y = ");
    print_row_ptr(p, &ks[ad->dst], g, ad->dst, KERNEL_OUT, dims, nouter);
    printer_printf(p, ";\nconst float *restrict x = ");
    print_row_ptr(p, &ks[ad->src], g, ad->src, KERNEL_OUT, dims, nouter);
    printer_printf(p, ";\n");
    if (scalar) {
        printer_printf(p, "y[0] += x[0];\n");
    } else {
        open_loop(p, &ks[0], inner, 0);
        printer_printf(p, "y[d%d] += x[d%d];\n", inner, inner);
        close_loops(p, 1, 0);
    }
    printer_indent(p, -1);
    printer_printf(p, "}\n");
}

void kernel_c_fused(Printer *p, const FuseGroup *g, const Kernel *ks) {
    int uses_off = 0;
    for (int j = 0; j < g->nmembers; ++j)
        uses_off |= ks[j].uses_off;
    if (!uses_off)
        printer_printf(p, "(void)off;\n");
    const KernelLoop *l0 = &ks[0].nodes[0].loop;
    int nouter = l0->nloops - 1, inner = g->inner;
    long e = ks[0].extent[inner];
    /* The column sums' accumulators live across the rows. */
    for (int j = 0; j < g->nmembers; ++j)
        if (g->cols[j])
            printer_printf(p, "double c%d[%ld] = {0.0};\n", j, e);
    for (int x = 0; x < nouter; ++x)
        open_loop(p, &ks[0], l0->loop_dim[x], 1);
    for (int j = 0; j < g->nmembers; ++j)
        if (!g->stored[j])
            printer_printf(p, "float t%d[%ld];\n", j, ks[j].nodes[0].loop.nreduce ? 1L : e);
    for (int j = 0; j < g->nmembers; ++j) {
        char what[160];
        kernel_describe_node(&ks[j], 0, what, sizeof what);
        printer_printf(p, "/* %s */\n", what);
        if (g->cols[j])
            print_column_row(p, &ks[j], g, j, l0->loop_dim[0], inner);
        else
            print_member_row(p, &ks[j], g, j);
        for (int a = 0; a < g->nadds; ++a)
            if (g->adds[a].after == j)
                print_fused_add(p, g, ks, &g->adds[a], nouter);
    }
    close_loops(p, nouter, 1);
    for (int j = 0; j < g->nmembers; ++j) {
        if (!g->cols[j])
            continue;
        printer_printf(p, "{\n");
        printer_indent(p, 1);
        printer_printf(p, "float *restrict y = out[%d];\n", j);
        open_loop(p, &ks[0], inner, 0);
        printer_printf(p, "y[d%d] = (float)c%d[d%d];\n", inner, j, inner);
        close_loops(p, 1, 0);
        printer_indent(p, -1);
        printer_printf(p, "}\n");
    }
}
