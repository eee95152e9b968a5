/*
 * cost_kernel.c — the price of the kernels a program runs (see
 * cost_kernel.h).
 */
#include "cost_kernel.h"

#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "kernel_accum.h"
#include "kernel_ir.h"

/* Arithmetic operations per point of an expression. */
static int expr_ops(const Expr *x) {
    if (!x)
        return 0;
    switch (x->kind) {
    case EXPR_BINARY:
        return 1 + expr_ops(x->lhs) + expr_ops(x->rhs);
    case EXPR_NEG:
        return 1 + expr_ops(x->lhs);
    case EXPR_CALL: {
        if (strcmp(x->name, "size") == 0)
            return 0;
        int n = 1;
        for (int i = 0; i < x->args.count; ++i)
            n += expr_ops(x->args.items[i]);
        return n;
    }
    default:
        return 0;
    }
}

/* A loop node's FLOPs: its points times one flop per operator and
 * intrinsic, plus the accumulation; *reads gets the operands its terms
 * name. */
static double loop_flops(const Kernel *k, const KernelLoop *l, unsigned *reads) {
    double points = 1;
    for (int d = 0; d < l->nloops; ++d)
        points *= (double)k->extent[l->loop_dim[d]];
    int ops = 0;
    *reads = 0;
    for (int t = 0; t < l->nterms; ++t) {
        ops += expr_ops(l->terms[t].expr) + (t > 0);
        *reads |= kernel_expr_operands(k, l->terms[t].expr);
    }
    return points * (1 + ops);
}

static double tile_elems(const Schedule *s, int tensor) {
    return (double)s->tensors[tensor].tile_elems;
}

KernelCost cost_phase_kernel(const Schedule *s, const PhaseSched *ph, const Profile *p, int eb) {
    KernelCost kc = {0, 0, 0};
    if (ph->inst < 0 || !ph->expr)
        return kc;
    Kernel k;
    kernel_build(&k, s, ph, 0);
    const double out_elems = tile_elems(s, ph->out.tensor);
    for (int i = 0; i < k.nnodes; ++i) {
        const KernelNode *node = &k.nodes[i];
        if (node->kind == KNODE_GEMM) {
            const KernelGemm *g = &node->gemm;
            double batch = 1;
            for (int b = 0; b < g->nbatch; ++b)
                batch *= (double)g->batch_extent[b];
            kc.flops += 2.0 * (double)g->m * (double)g->n * (double)g->k * batch;
            if (p)
                kc.us += cost_gemm_us(p, (double)g->m, (double)g->n, (double)g->k, batch, eb);
            continue;
        }
        unsigned reads;
        double flops = loop_flops(&k, &node->loop, &reads);
        /* The output is read and written (it accumulates into the zero-
         * filled tile); each input it names once. */
        double bytes = 2.0 * out_elems;
        for (int o = 0; o < ph->nin; ++o) {
            int repeat = 0;
            for (int j = 0; j < o; ++j)
                repeat |= ph->in[j].tensor == ph->in[o].tensor;
            if ((reads >> o & 1u) && !repeat)
                bytes += tile_elems(s, ph->in[o].tensor);
        }
        kc.flops += flops;
        kc.bytes += bytes * eb;
        if (p)
            kc.us += cost_vector_us(p, flops, bytes * eb);
    }
    return kc;
}

/* Whether tensor t is among the first n of list. */
static int listed(const int *list, int n, int t) {
    for (int i = 0; i < n; ++i)
        if (list[i] == t)
            return 1;
    return 0;
}

KernelCost cost_fused_kernel(const Schedule *s, const FuseGroup *g, const Profile *p, int eb) {
    KernelCost kc = {0, 0, 0};
    Kernel *ks = kernel_fuse_members(s, g);
    /* Tensors read from outside the group and tiles added to: each once. */
    int read[KFUSE_MAX * SCHED_MAX_OPERANDS], into[KFUSE_MAX];
    int nread = 0, ninto = 0;
    double elems = 0;
    for (int j = 0; j < g->nmembers; ++j) {
        const PhaseSched *ph = s->phases.items[g->phase[j]];
        unsigned reads;
        kc.flops += loop_flops(&ks[j], &ks[j].nodes[0].loop, &reads);
        for (int i = 0; i < ph->nin; ++i) {
            int t = ph->in[i].tensor;
            if (!((reads >> i) & 1u) || g->from[j][i] >= 0 || listed(read, nread, t))
                continue;
            read[nread++] = t;
            elems += tile_elems(s, t);
        }
        if (g->into[j] >= 0) {
            if (!listed(into, ninto, g->into[j])) {
                into[ninto++] = g->into[j];
                elems += 2 * tile_elems(s, g->into[j]);
            }
        } else if (g->stored[j]) {
            elems += tile_elems(s, ph->out.tensor);
        }
    }
    free(ks);
    kc.bytes = elems * eb;
    if (p)
        kc.us = cost_vector_us(p, kc.flops, kc.bytes);
    return kc;
}

void cost_program(const Schedule *s, const Profile *p, int eb, int fuse, Arena *arena,
                  CostProgram *out) {
    const int n = s->phases.count;
    memset(out, 0, sizeof *out);
    out->kernel_us = ARENA_ARRAY(arena, double, n + 1);
    out->own_flops = ARENA_ARRAY(arena, double, n + 1);
    out->kernel_once = ARENA_ARRAY(arena, unsigned char, n + 1);
    out->no_alloc = ARENA_ARRAY(arena, unsigned char, n + 1);
    out->no_add = ARENA_ARRAY(arena, unsigned char, n + 1);
    for (int q = 0; q < n; ++q) {
        KernelCost kc = cost_phase_kernel(s, s->phases.items[q], p, eb);
        out->kernel_us[q] = kc.us;
        out->own_flops[q] = kc.flops;
    }
    /* A rewritten schedule is priced as rewritten, whatever `fuse` says:
     * its actions are the fused program's. */
    const FusePlan *f = s->fusion && s->fusion->applied ? s->fusion : NULL;
    if (!f && fuse) {
        FusePlan *plan = kernel_fuse_plan(arena, s, NULL);
        plan->accum = kernel_accum_plan(arena, s, plan);
        f = plan;
    }
    out->fusion = f;
    out->applied = f && f->applied;
    if (!f)
        return;
    for (int gi = 0; gi < f->ngroups; ++gi) {
        const FuseGroup *g = &f->groups[gi];
        out->kernel_us[g->phase[0]] = cost_fused_kernel(s, g, p, eb).us;
        for (int j = 1; j < g->nmembers; ++j)
            out->kernel_us[g->phase[j]] = 0;
        if (out->applied) {
            out->kernel_once[g->phase[0]] = 1;
            continue;
        }
        /* As kernel_fuse_apply will run it: rows and contributions to a
         * tile from outside have no tile of their own, and the group's
         * ADDs are in the kernel. */
        for (int j = 0; j < g->nmembers; ++j) {
            out->no_alloc[g->phase[j]] = !g->stored[j] || g->into[j] >= 0;
            out->no_add[g->phase[j]] = 1;
        }
    }
    const AccumPlan *a = f->accum;
    for (int e = 0; a && !a->applied && e < a->count; ++e)
        out->no_alloc[a->phase[e]] = out->no_add[a->phase[e]] = 1;
}
