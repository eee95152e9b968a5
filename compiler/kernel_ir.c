/*
 * kernel_ir.c — building a compute phase's kernel IR (see kernel_ir.h).
 */
#include "kernel_ir.h"

#include <limits.h>
#include <string.h>

int kernel_operand(const PhaseSched *ph, Sym name) {
    for (int i = 0; i < ph->nin; ++i)
        if (ph->in[i].name == name)
            return i;
    ICE("no operand '%s'", name);
}

int kernel_dim(const Kernel *k, Sym name) {
    for (int d = 0; d < k->ndims; ++d)
        if (k->inst->op->dims[d] == name)
            return d;
    return -1;
}

static int is_operand_ref(const Kernel *k, const Expr *x) {
    return x->kind == EXPR_INDEX || (x->kind == EXPR_NAME && kernel_dim(k, x->name) < 0);
}

/* The operator dimensions x depends on (through its operands or an index
 * used as a value), as a bit mask; *operands gets the operands it reads. */
static unsigned expr_dims(const Kernel *k, const Expr *x, unsigned *operands) {
    if (!x)
        return 0;
    if (x->kind == EXPR_NAME && kernel_dim(k, x->name) >= 0)
        return 1u << kernel_dim(k, x->name);
    if (is_operand_ref(k, x)) {
        int i = kernel_operand(k->ph, x->name);
        *operands |= 1u << i;
        unsigned m = 0;
        for (int d = 0; d < k->ndims; ++d)
            if (k->stride[i][d])
                m |= 1u << d;
        return m;
    }
    if (x->kind == EXPR_CALL && strcmp(x->name, "size") == 0)
        return 0;
    unsigned m = expr_dims(k, x->lhs, operands) | expr_dims(k, x->rhs, operands);
    if (x->kind == EXPR_CALL || x->kind == EXPR_RADIX)
        for (int i = 0; i < x->args.count; ++i)
            m |= expr_dims(k, x->args.items[i], operands);
    return m;
}

unsigned kernel_expr_operands(const Kernel *k, const Expr *x) {
    unsigned ops = 0;
    (void)expr_dims(k, x, &ops);
    return ops;
}

static int uses_dim_value(const Kernel *k, const Expr *x) {
    if (!x)
        return 0;
    if (x->kind == EXPR_NAME)
        return kernel_dim(k, x->name) >= 0;
    if (x->kind == EXPR_CALL && strcmp(x->name, "size") == 0)
        return 0;
    int u = uses_dim_value(k, x->lhs) || uses_dim_value(k, x->rhs);
    for (int i = 0; i < x->args.count && (x->kind == EXPR_CALL || x->kind == EXPR_RADIX); ++i)
        u |= uses_dim_value(k, x->args.items[i]);
    return u;
}

/* Splits x into additive terms. Returns 0 when there are too many. */
static int split_terms(const Expr *x, int sign, KernelTerm *terms, int *n) {
    if (x->kind == EXPR_BINARY && (x->op == '+' || x->op == '-'))
        return split_terms(x->lhs, sign, terms, n) &&
               split_terms(x->rhs, x->op == '-' ? -sign : sign, terms, n);
    if (x->kind == EXPR_NEG)
        return split_terms(x->lhs, -sign, terms, n);
    if (*n == KERNEL_MAX_TERMS)
        return 0;
    terms[*n].sign = sign;
    terms[(*n)++].expr = x;
    return 1;
}

/* A term as a product: its operand factors (multiplied) and constant
 * factors. Returns 0 when some factor is neither. */
typedef struct Product {
    int sign;
    int noperands;
    int operand[2];
    int nfactors;
    KernelFactor factors[KERNEL_MAX_TERMS];
} Product;

static int split_product(const Kernel *k, const Expr *x, char op, Product *pr) {
    if (x->kind == EXPR_BINARY && (x->op == '*' || x->op == '/'))
        return split_product(k, x->lhs, op, pr) &&
               split_product(k, x->rhs, x->op == '/' ? (op == '*' ? '/' : '*') : op, pr);
    if (x->kind == EXPR_NEG) {
        pr->sign = -pr->sign;
        return split_product(k, x->lhs, op, pr);
    }
    if (is_operand_ref(k, x)) {
        if (op != '*' || pr->noperands == 2)
            return 0;
        pr->operand[pr->noperands++] = kernel_operand(k->ph, x->name);
        return 1;
    }
    unsigned ops = 0;
    if (expr_dims(k, x, &ops) || ops || uses_dim_value(k, x) || pr->nfactors == KERNEL_MAX_TERMS)
        return 0;
    pr->factors[pr->nfactors].op = op;
    pr->factors[pr->nfactors++].expr = x;
    return 1;
}

/* A group of dimensions as one dimension of operand x's view: its extent
 * and stride, and the group's dimensions of extent > 1 in x's order.
 * Returns 0 when they are not contiguous in x (a copy would be needed). */
static int group_view(const Kernel *k, int x, const int *group, int ngroup, long *extent,
                      long *stride, int *order, int *norder) {
    *extent = 1;
    *stride = 0;
    *norder = 0;
    const Operand *o = x == KERNEL_OUT ? &k->ph->out : &k->ph->in[x];
    long prev = -1;
    for (int y = 0; y < o->ndims; ++y) {
        int d = o->opdims[y], in = 0;
        for (int g = 0; g < ngroup; ++g)
            in |= group[g] == d;
        if (!in || k->extent[d] == 1)
            continue;
        if (prev >= 0 && k->stride[x][prev] != k->stride[x][d] * k->extent[d])
            return 0;
        order[(*norder)++] = d;
        *extent *= k->extent[d];
        *stride = k->stride[x][d];
        prev = d;
    }
    return 1;
}

static int same_order(const int *a, int na, const int *b, int nb) {
    return na == nb && memcmp(a, b, sizeof(int) * (size_t)na) == 0;
}

typedef struct View {
    long ext[3];    /* M, N, K */
    long str[3][3]; /* [operand A, B, C][M, N, K] */
} View;

/* The leading dimension of a row-major matrix stored rows x cols with
 * the given strides, or 0 when its columns are not contiguous. */
static long leading(long rows, long row_stride, long cols, long col_stride) {
    if (cols > 1 && col_stride != 1)
        return 0;
    long ld = rows > 1 ? row_stride : (cols > 1 ? cols : 1);
    return ld >= (cols > 1 ? cols : 1) ? ld : 0;
}

/* The batch dimensions of g in C's order, their strides, adjacent ones
 * collapsed where every operand allows. */
static void batch_loops(const Kernel *k, KernelGemm *g, const int *batch, int nbatch) {
    const int x3[3] = {g->a, g->b, KERNEL_OUT};
    const Operand *c = &k->ph->out;
    g->nbatch = 0;
    for (int y = 0; y < c->ndims; ++y) {
        int d = c->opdims[y], in = 0;
        for (int i = 0; i < nbatch; ++i)
            in |= batch[i] == d;
        if (!in || k->extent[d] == 1)
            continue;
        int j = g->nbatch, merge = j > 0;
        for (int r = 0; r < 3 && merge; ++r)
            merge = g->batch_stride[r][j - 1] == k->stride[x3[r]][d] * k->extent[d];
        if (merge) {
            g->batch_extent[j - 1] *= k->extent[d];
            for (int r = 0; r < 3; ++r)
                g->batch_stride[r][j - 1] = k->stride[x3[r]][d];
            continue;
        }
        g->batch_dim[j] = d;
        g->batch_extent[j] = k->extent[d];
        for (int r = 0; r < 3; ++r)
            g->batch_stride[r][j] = k->stride[x3[r]][d];
        ++g->nbatch;
    }
}

/* Lays g out as row-major BLAS views: picks which operand is A (C's
 * contiguous dimension must be N), the transposes and the leading
 * dimensions. Returns a reason when no view needs no copy. */
static const char *gemm_views(KernelGemm *g, View *v) {
    /* C stored M x N: N contiguous, or swap the operands. */
    if (!leading(v->ext[0], v->str[2][0], v->ext[1], v->str[2][1])) {
        if (!leading(v->ext[1], v->str[2][1], v->ext[0], v->str[2][0]))
            return "the output has no contiguous M or N dimension";
        int t = g->a;
        g->a = g->b;
        g->b = t;
        long e = v->ext[0];
        v->ext[0] = v->ext[1];
        v->ext[1] = e;
        for (int r = 0; r < 3; ++r) {
            long s = v->str[r][0];
            v->str[r][0] = v->str[r][1];
            v->str[r][1] = s;
        }
        for (int r = 0; r < 3; ++r) {
            long s = v->str[0][r];
            v->str[0][r] = v->str[1][r];
            v->str[1][r] = s;
        }
        for (int j = 0; j < g->nbatch; ++j) {
            long s = g->batch_stride[0][j];
            g->batch_stride[0][j] = g->batch_stride[1][j];
            g->batch_stride[1][j] = s;
        }
        int tmp[IR_MAX_DIMS], n = g->ngroup[0];
        memcpy(tmp, g->group[0], sizeof tmp);
        memcpy(g->group[0], g->group[1], sizeof tmp);
        memcpy(g->group[1], tmp, sizeof tmp);
        g->ngroup[0] = g->ngroup[1];
        g->ngroup[1] = n;
    }
    g->m = v->ext[0];
    g->n = v->ext[1];
    g->k = v->ext[2];
    g->ldc = leading(g->m, v->str[2][0], g->n, v->str[2][1]);
    /* A is M x K, or K x M transposed. */
    g->trans_a = 0;
    g->lda = leading(g->m, v->str[0][0], g->k, v->str[0][2]);
    if (!g->lda) {
        g->trans_a = 1;
        g->lda = leading(g->k, v->str[0][2], g->m, v->str[0][0]);
    }
    /* B is K x N, or N x K transposed. */
    g->trans_b = 0;
    g->ldb = leading(g->k, v->str[1][2], g->n, v->str[1][1]);
    if (!g->ldb) {
        g->trans_b = 1;
        g->ldb = leading(g->n, v->str[1][1], g->k, v->str[1][2]);
    }
    if (!g->lda || !g->ldb)
        return "an operand has no contiguous M, N or K dimension";
    if (g->m > INT_MAX || g->n > INT_MAX || g->k > INT_MAX || g->lda > INT_MAX ||
        g->ldb > INT_MAX || g->ldc > INT_MAX)
        return "a GEMM dimension exceeds the BLAS's int";
    return NULL;
}

/* A term as a GEMM node. Returns 0 with *why set (or NULL when the term
 * is no product of two operands at all). */
static int term_gemm(const Kernel *k, const KernelTerm *t, KernelGemm *g, const char **why) {
    Product pr = {.sign = t->sign};
    *why = NULL;
    if (!split_product(k, t->expr, '*', &pr) || pr.noperands != 2)
        return 0;
    memset(g, 0, sizeof *g);
    g->a = pr.operand[0];
    g->b = pr.operand[1];
    g->sign = pr.sign;
    g->scale = 1;
    g->nfactors = pr.nfactors;
    memcpy(g->factors, pr.factors, sizeof pr.factors);
    int batch[IR_MAX_DIMS], nbatch = 0;
    for (int d = 0; d < k->ndims; ++d) {
        int inA = k->stride[g->a][d] != 0, inB = k->stride[g->b][d] != 0;
        int inC = k->stride[KERNEL_OUT][d] != 0;
        int grp = inA && inB && inC ? 3 : inA && inC ? 0 : inB && inC ? 1 : inA && inB ? 2 : -1;
        if (grp == 3)
            batch[nbatch++] = d;
        else if (grp >= 0)
            g->group[grp][g->ngroup[grp]++] = d;
        else if (!inA && !inB && !inC)
            g->scale *= k->extent[d];
        else {
            *why = "a dimension is in one operand only";
            return 0;
        }
    }
    if (!g->ngroup[2] || (!g->ngroup[0] && !g->ngroup[1])) {
        *why = "no summed or no free dimension: not a matrix product";
        return 0;
    }
    View v;
    int order[3][3][IR_MAX_DIMS], norder[3][3];
    const int x3[3] = {g->a, g->b, KERNEL_OUT};
    const int holds[3][2] = {{0, 2}, {1, 2}, {0, 1}}; /* M in A, C; N in B, C; K in A, B */
    for (int grp = 0; grp < 3; ++grp)
        for (int h = 0; h < 2; ++h) {
            int r = holds[grp][h];
            if (!group_view(k, x3[r], g->group[grp], g->ngroup[grp], &v.ext[grp], &v.str[r][grp],
                            order[r][grp], &norder[r][grp])) {
                *why = "a dimension group is not contiguous in an operand (a copy would be needed)";
                return 0;
            }
        }
    for (int grp = 0; grp < 3; ++grp) {
        int r0 = holds[grp][0], r1 = holds[grp][1];
        if (!same_order(order[r0][grp], norder[r0][grp], order[r1][grp], norder[r1][grp])) {
            *why = "a dimension group is in different orders in two operands (a copy would be "
                   "needed)";
            return 0;
        }
    }
    for (int r = 0; r < 3; ++r)
        for (int grp = 0; grp < 3; ++grp)
            if (r != holds[grp][0] && r != holds[grp][1])
                v.str[r][grp] = 0;
    batch_loops(k, g, batch, nbatch);
    *why = gemm_views(g, &v);
    return *why == NULL;
}

/* The smallest stride dimension d has in the operands ops read. */
static long min_stride(const Kernel *k, unsigned ops, int d) {
    long best = 0;
    for (int i = 0; i < k->ph->nin; ++i)
        if (((ops >> i) & 1u) && k->stride[i][d] && (!best || k->stride[i][d] < best))
            best = k->stride[i][d];
    return best;
}

/* Output dimensions outermost, in the output's order; then the summed
 * dimensions the terms read, the one with the smallest stride innermost;
 * the summed dimensions they do not read become the scale. */
static void build_loop(Kernel *k, KernelLoop *l, KernelCombiner combiner) {
    unsigned used = 0, ops = 0;
    for (int i = 0; i < l->nterms; ++i)
        used |= expr_dims(k, l->terms[i].expr, &ops);
    l->combiner = combiner;
    l->scale = 1;
    l->nloops = 0;
    const Operand *o = &k->ph->out;
    for (int y = 0; y < o->ndims; ++y)
        if (k->extent[o->opdims[y]] > 1)
            l->loop_dim[l->nloops++] = o->opdims[y];
    int first = l->nloops;
    for (int d = 0; d < k->ndims; ++d) {
        if (k->stride[KERNEL_OUT][d])
            continue;
        if (!((used >> d) & 1u)) {
            /* A sum over a dimension the terms do not read multiplies
             * them by its extent; a maximum over it changes nothing. */
            if (combiner == KCOMB_SUM)
                l->scale *= k->extent[d];
        } else if (k->extent[d] > 1) {
            int j = l->nloops++;
            for (; j > first && min_stride(k, ops, l->loop_dim[j - 1]) < min_stride(k, ops, d); --j)
                l->loop_dim[j] = l->loop_dim[j - 1];
            l->loop_dim[j] = d;
        }
    }
    l->nreduce = l->nloops - first;
}

/* name, fp64 C, fp32 C, CUDA (a kernel; on the host CUDA takes the fp32
 * C column: rsqrtf is a device function only). */
static const char *const intrinsics[][4] = {
    {"exp", "exp", "prime_expf", "expf"},
    {"log", "log", "prime_logf", "logf"},
    {"sqrt", "sqrt", "sqrtf", "sqrtf"},
    {"rsqrt", "prime_rsqrt_d", "prime_rsqrt", "rsqrtf"},
    {"tanh", "tanh", "tanhf", "tanhf"},
    {"erf", "erf", "erff", "erff"},
    {"sigmoid", "prime_sigmoid_d", "prime_sigmoid", "prime_sigmoid"},
    {"relu", "prime_relu_d", "prime_relu", "prime_relu"},
    {"gelu", "prime_gelu_d", "prime_gelu", "prime_gelu"},
    {"silu", "prime_silu_d", "prime_silu", "prime_silu"},
    {"abs", "fabs", "fabsf", "fabsf"},
    {"step", "prime_step_d", "prime_step", "prime_step"},
    {"eq", "prime_eq_d", "prime_eq", "prime_eq"},
    {"max", "fmax", "fmaxf", "fmaxf"},
    {"min", "fmin", "fminf", "fminf"},
    {"cos", "cos", "cosf", "cosf"},
    {"sin", "sin", "sinf", "sinf"},
    {"pow", "pow", "powf", "powf"},
    {"rsqrt_grad", "prime_rsqrt_grad_d", "prime_rsqrt_grad", "prime_rsqrt_grad"},
    {"tanh_grad", "prime_tanh_grad_d", "prime_tanh_grad", "prime_tanh_grad"},
    {"erf_grad", "prime_erf_grad_d", "prime_erf_grad", "prime_erf_grad"},
    {"sigmoid_grad", "prime_sigmoid_grad_d", "prime_sigmoid_grad", "prime_sigmoid_grad"},
    {"gelu_grad", "prime_gelu_grad_d", "prime_gelu_grad", "prime_gelu_grad"},
    {"silu_grad", "prime_silu_grad_d", "prime_silu_grad", "prime_silu_grad"},
};

const char *kernel_intrinsic(const char *name, KernelLang lang) {
    static const int column[] = {
        [KLANG_C64] = 1, [KLANG_C32] = 2, [KLANG_CUDA] = 3, [KLANG_CUDA_HOST] = 2};
    for (size_t i = 0; i < sizeof intrinsics / sizeof intrinsics[0]; ++i)
        if (strcmp(intrinsics[i][0], name) == 0)
            return intrinsics[i][column[lang]];
    ICE("no lowering for intrinsic '%s'", name);
}

void kernel_build(Kernel *k, const Schedule *s, const PhaseSched *ph, int whole) {
    memset(k, 0, sizeof *k);
    k->ph = ph;
    k->inst = &s->model->instances[ph->inst];
    k->gemm_dtype = s->gemm_dtype;
    k->ndims = k->inst->op->ndims;
    for (int d = 0; d < k->ndims; ++d)
        k->extent[d] = whole ? k->inst->dim_sizes[d] : s->slices[ph->inst].extent[d];
    for (int i = 0; i <= ph->nin; ++i) {
        const Operand *o = i == ph->nin ? &ph->out : &ph->in[i];
        long *st = k->stride[i == ph->nin ? KERNEL_OUT : i];
        long stride = 1;
        for (int y = o->ndims - 1; y >= 0; --y) {
            st[o->opdims[y]] = stride;
            stride *= k->extent[o->opdims[y]];
        }
    }
    k->uses_off = uses_dim_value(k, ph->expr);
    k->whole = whole;
    /* A maximum is one loop nest over the whole expression: its terms
     * do not split (max(a + b) is no sum of maxima) and it is no GEMM. */
    const KernelCombiner combiner = ph->phase->max_reduce ? KCOMB_MAX : KCOMB_SUM;
    KernelTerm terms[KERNEL_MAX_TERMS];
    int nterms = 0;
    KernelLoop rest = {.nterms = 0};
    if (combiner == KCOMB_SUM && split_terms(ph->expr, 1, terms, &nterms)) {
        for (int i = 0; i < nterms; ++i) {
            KernelNode *n = &k->nodes[k->nnodes];
            const char *why;
            if (term_gemm(k, &terms[i], &n->gemm, &why)) {
                n->kind = KNODE_GEMM;
                ++k->nnodes;
            } else {
                if (why && !k->no_gemm)
                    k->no_gemm = why;
                rest.terms[rest.nterms++] = terms[i];
            }
        }
    }
    if (k->nnodes == 0) {
        rest.nterms = 1;
        rest.terms[0] = (KernelTerm){1, ph->expr};
        rest.whole_expr = 1;
    }
    if (rest.nterms) {
        KernelNode *n = &k->nodes[k->nnodes++];
        n->kind = KNODE_LOOP;
        n->loop = rest;
        build_loop(k, &n->loop, combiner);
    }
}

static void dump_dims(const Kernel *k, const int *dims, int n, FILE *out) {
    fprintf(out, "(");
    for (int i = 0; i < n; ++i)
        fprintf(out, "%s%s", i ? " " : "", k->inst->op->dims[dims[i]]);
    fprintf(out, ")");
}

static void dump_gemm(const Kernel *k, const KernelGemm *g, FILE *out) {
    const PhaseSched *ph = k->ph;
    fprintf(out, "  gemm");
    for (int j = 0; j < g->nbatch; ++j)
        fprintf(out, " batch %ld (%s) strides %ld %ld %ld%s", g->batch_extent[j],
                k->inst->op->dims[g->batch_dim[j]], g->batch_stride[0][j], g->batch_stride[1][j],
                g->batch_stride[2][j], j + 1 < g->nbatch ? " loop," : ",");
    static const char *const name[3] = {"m", "n", "k"};
    const long ext[3] = {g->m, g->n, g->k};
    for (int grp = 0; grp < 3; ++grp) {
        fprintf(out, " %s %ld ", name[grp], ext[grp]);
        dump_dims(k, g->group[grp], g->ngroup[grp], out);
    }
    fprintf(out, "\n   C += %s", g->sign < 0 ? "-" : "");
    if (g->scale != 1)
        fprintf(out, "%ld * ", g->scale);
    for (int f = 0; f < g->nfactors; ++f) {
        fprintf(out, "%s",
                f ? (g->factors[f].op == '*' ? " * " : " / ")
                  : (g->factors[f].op == '*' ? "" : "1 / "));
        ast_print_expr(g->factors[f].expr, out);
        fprintf(out, " * ");
    }
    fprintf(out, "%s%s (ld %ld) * %s%s (ld %ld), ldc %ld\n", ph->in[g->a].name,
            g->trans_a ? "^T" : "", g->lda, ph->in[g->b].name, g->trans_b ? "^T" : "", g->ldb,
            g->ldc);
}

static void dump_loop(const Kernel *k, const KernelLoop *l, FILE *out) {
    int nout = l->nloops - l->nreduce;
    fprintf(out, "  loop");
    for (int i = 0; i < nout; ++i)
        fprintf(out, " %s:%ld", k->inst->op->dims[l->loop_dim[i]], k->extent[l->loop_dim[i]]);
    if (!nout)
        fprintf(out, " (none)");
    if (l->nreduce) {
        fprintf(out, ", reduce");
        for (int i = nout; i < l->nloops; ++i)
            fprintf(out, " %s:%ld", k->inst->op->dims[l->loop_dim[i]], k->extent[l->loop_dim[i]]);
        fprintf(out,
                l->combiner == KCOMB_MAX ? " into an accumulator" : " into a double accumulator");
    }
    if (l->combiner == KCOMB_MAX)
        fprintf(out, ", combiner max%s: out = max(out,", k->whole ? ", from -inf" : "");
    else
        fprintf(out, ", combiner sum, scale %ld: out +=", l->scale);
    for (int i = 0; i < l->nterms; ++i) {
        fprintf(out, " %s", l->terms[i].sign < 0 ? "- " : i ? "+ " : "");
        ast_print_expr(l->terms[i].expr, out);
    }
    fprintf(out, "%s\n", l->combiner == KCOMB_MAX ? ")" : "");
}

void kernel_dump_schedule(const Schedule *s, FILE *out) {
    fprintf(out, "kernels %s\n", s->model->name);
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        if (ph->kind != PHASE_FWD && ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD)
            continue;
        Kernel k;
        kernel_build(&k, s, ph, 0);
        fprintf(out, " phase %d %s of %s: %s[", p, phase_name(ph->kind), k.inst->name,
                s->tensors[ph->out.tensor].name);
        for (int x = 0; x < ph->out.ndims; ++x)
            fprintf(out, "%s%s", x ? ", " : "", k.inst->op->dims[ph->out.opdims[x]]);
        fprintf(out, "] += ");
        ast_print_expr(ph->expr, out);
        fprintf(out, "\n  tile");
        for (int d = 0; d < k.ndims; ++d)
            fprintf(out, " %s:%ld", k.inst->op->dims[d], k.extent[d]);
        fprintf(out, "\n");
        for (int n = 0; n < k.nnodes; ++n) {
            if (k.nodes[n].kind == KNODE_GEMM)
                dump_gemm(&k, &k.nodes[n].gemm, out);
            else
                dump_loop(&k, &k.nodes[n].loop, out);
        }
        if (k.no_gemm)
            fprintf(out, "  no gemm: %s\n", k.no_gemm);
    }
}

void kernel_describe_node(const Kernel *k, int i, char *buf, size_t size) {
    const KernelNode *nd = &k->nodes[i];
    if (nd->kind == KNODE_GEMM) {
        const KernelGemm *g = &nd->gemm;
        long batch = 1;
        for (int j = 0; j < g->nbatch; ++j)
            batch *= g->batch_extent[j];
        snprintf(buf, size, "node %d: gemm m %ld n %ld k %ld batch %ld trans %d%d", i, g->m, g->n,
                 g->k, batch, g->trans_a, g->trans_b);
        return;
    }
    const KernelLoop *l = &nd->loop;
    long points = 1;
    for (int j = 0; j < l->nloops - l->nreduce; ++j)
        points *= k->extent[l->loop_dim[j]];
    snprintf(buf, size, "node %d: loop %s points %ld loops %d reduce %d terms %d", i,
             l->combiner == KCOMB_MAX ? "max" : "sum", points, l->nloops, l->nreduce, l->nterms);
}
