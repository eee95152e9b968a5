/*
 * kernel_copy.c — copy propagation (see kernel_copy.h).
 */
#include "kernel_copy.h"

#include <stdlib.h>

#include "cost.h"
#include "kernel_ir.h"
#include "sched_internal.h"

/* The operand that x is, alone or times the integer 1, or -1. */
static int copied_operand(const Kernel *k, const Expr *x) {
    if (x->kind == EXPR_BINARY && x->op == '*') {
        if (x->rhs->kind == EXPR_INT && x->rhs->value == 1)
            return copied_operand(k, x->lhs);
        if (x->lhs->kind == EXPR_INT && x->lhs->value == 1)
            return copied_operand(k, x->rhs);
        return -1;
    }
    if (x->kind != EXPR_NAME && x->kind != EXPR_INDEX)
        return -1;
    if (x->kind == EXPR_NAME && kernel_dim(k, x->name) >= 0)
        return -1;
    return kernel_operand(k->ph, x->name);
}

/* Whether tensor t's tiles have elems elements and hold a temporary: no
 * weight, nothing the driver fills or checks. */
static int plain_tile(const Schedule *s, int t, long elems) {
    const SchedTensor *x = &s->tensors[t];
    return x->tile_elems == elems && !x->check && !x->is_weight && x->fill_phase < 0;
}

/* The operand whose tile phase ph copies whole into its output, or -1:
 * one step, no communication, one elementwise loop node out = x (* 1)
 * over every dimension of extent > 1, x strided as the output in each,
 * tiles of one size. */
static int copy_source(const Schedule *s, const PhaseSched *ph, Kernel *k) {
    if ((ph->kind != PHASE_FWD && ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD) ||
        ph->moves.count || ph->boundary.count || ph->collectives.count || ph->groups.count ||
        ph->nboxes)
        return -1;
    kernel_build(k, s, ph, 0);
    if (k->nnodes != 1 || k->nodes[0].kind != KNODE_LOOP)
        return -1;
    const KernelLoop *l = &k->nodes[0].loop;
    if (l->combiner != KCOMB_SUM || l->nreduce || l->scale != 1 || l->nterms != 1 ||
        l->terms[0].sign != 1)
        return -1;
    int i = copied_operand(k, l->terms[0].expr);
    if (i < 0)
        return -1;
    long elems = 1;
    for (int d = 0; d < k->ndims; ++d) {
        if (k->stride[i][d] != k->stride[KERNEL_OUT][d])
            return -1;
        if (k->stride[KERNEL_OUT][d])
            elems *= k->extent[d];
    }
    return plain_tile(s, ph->in[i].tensor, elems) && plain_tile(s, ph->out.tensor, elems) ? i : -1;
}

/* Where rank r's copy is: the index of its KERNEL (t2 <- t1) in phase
 * c's actions, or -1 when its actions are not STEP, ALLOC t2, KERNEL,
 * WAIT and frees. */
static int copy_kernel(const PhaseSched *ph, int r, int x) {
    int kernel = -1, alloc = -1, steps = 0;
    for (int i = 0; i < ph->nactions[r]; ++i) {
        const PrimeAction *a = &ph->actions[r][i];
        switch (a->op) {
        case PRIME_ACT_STEP:
            steps++;
            break;
        case PRIME_ACT_ALLOC:
            if (alloc >= 0 || kernel >= 0 || a->tensor != ph->out.tensor)
                return -1;
            alloc = i;
            break;
        case PRIME_ACT_KERNEL:
            if (kernel >= 0 || alloc < 0 || a->tensor != ph->actions[r][alloc].tensor ||
                a->slot != ph->actions[r][alloc].slot || a->nin <= x)
                return -1;
            kernel = i;
            break;
        case PRIME_ACT_WAIT:
        case PRIME_ACT_FREE:
            break;
        default:
            return -1;
        }
    }
    return steps == 1 ? kernel : -1;
}

/* A position in a rank's actions: phase p, action i. */
typedef struct Pos {
    int p, i;
} Pos;

/* Whether action a reads tile (t, slot) as an input. */
static int reads(const PrimeAction *a, int t, int slot) {
    if (a->op != PRIME_ACT_KERNEL && a->op != PRIME_ACT_ADD)
        return 0;
    for (int k = 0; k < a->nin && k < PRIME_MAX_KERNEL_INPUTS; ++k)
        if (a->in_tensor[k] == t && a->in_slot[k] == slot)
            return 1;
    return 0;
}

/* The stretch of rank r after the copy (phase c, its KERNEL at index
 * at): the FREE of t2's tile (*free2) and t1's FREE inside it, if any
 * (*free1, p -1 when none), when nothing in it writes either tile and
 * t2's tile is only read; 0 otherwise. With *takeover set, t2 may also
 * be added to (ADD t2 += ...) after t1's FREE, where t2 takes t1's tile
 * over; *takeover is then 2. */
static int stretch(const Schedule *s, int c, int r, int at, const PrimeAction *k, int x, Pos *free2,
                   Pos *free1, int *takeover) {
    int t1 = k->in_tensor[x], s1 = k->in_slot[x], t2 = k->tensor, s2 = k->slot;
    free1->p = -1;
    for (int p = c; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        for (int i = p == c ? at + 1 : 0; i < ph->nactions[r]; ++i) {
            const PrimeAction *a = &ph->actions[r][i];
            int has = prime_action_has_tensor(a->op);
            if (has && a->tensor == t2 && a->slot == s2) {
                if (a->op == PRIME_ACT_SEND)
                    continue; /* a read: it sends t1's tile instead */
                /* A contribution added to t2 once t1 is dead: t2 takes
                 * over t1's tile. */
                if (*takeover && a->op == PRIME_ACT_ADD && free1->p >= 0) {
                    *takeover = 2;
                    continue;
                }
                if (a->op != PRIME_ACT_FREE)
                    return 0;
                *free2 = (Pos){p, i};
                return 1;
            }
            if (has && a->tensor == t1 && a->slot == s1) {
                if (a->op == PRIME_ACT_SEND && free1->p < 0)
                    continue;
                if (a->op != PRIME_ACT_FREE || free1->p >= 0)
                    return 0;
                *free1 = (Pos){p, i};
                continue;
            }
            if (free1->p >= 0 && reads(a, t1, s1))
                return 0; /* after t1's FREE, its slot is no longer t1's value */
            if (a->op == PRIME_ACT_COPY_BOX && a->in_tensor[0] == t2 && a->in_slot[0] == s2)
                return 0;
        }
    }
    return 0; /* t2 lives to the end: kept, not a temporary */
}

/* Drops action i of rank r in phase ph. */
static void drop(PhaseSched *ph, int r, int i) {
    for (int j = i + 1; j < ph->nactions[r]; ++j)
        ph->actions[r][j - 1] = ph->actions[r][j];
    ph->nactions[r]--;
}

/* Rewrites rank r for the copy at phase c (KERNEL at index at): every
 * read of t2's tile in the stretch reads t1's, t1's FREE (if in it)
 * moves to t2's, which goes otherwise; the copy's ALLOC and KERNEL go. */
static void rewrite_rank(Schedule *s, int c, int r, int at, int x, Pos free2, Pos free1,
                         unsigned char *rewritten) {
    PhaseSched *cp = s->phases.items[c];
    const PrimeAction k = cp->actions[r][at];
    int t1 = k.in_tensor[x], s1 = k.in_slot[x], t2 = k.tensor, s2 = k.slot;
    for (int p = c; p <= free2.p; ++p) {
        PhaseSched *ph = s->phases.items[p];
        int end = p == free2.p ? free2.i : ph->nactions[r];
        for (int i = p == c ? at + 1 : 0; i < end; ++i) {
            PrimeAction *a = &ph->actions[r][i];
            if ((a->op == PRIME_ACT_SEND || a->op == PRIME_ACT_ADD) && a->tensor == t2 &&
                a->slot == s2) {
                a->tensor = t1;
                a->slot = s1;
            }
            if (a->op != PRIME_ACT_KERNEL && a->op != PRIME_ACT_ADD)
                continue;
            for (int j = 0; j < a->nin && j < PRIME_MAX_KERNEL_INPUTS; ++j)
                if (a->in_tensor[j] == t2 && a->in_slot[j] == s2) {
                    a->in_tensor[j] = t1;
                    a->in_slot[j] = s1;
                }
        }
    }
    PhaseSched *f2 = s->phases.items[free2.p];
    rewritten[free2.p] = 1;
    if (free1.p >= 0) {
        f2->actions[r][free2.i].tensor = t1;
        f2->actions[r][free2.i].slot = s1;
        drop(s->phases.items[free1.p], r, free1.i);
        rewritten[free1.p] = 1;
    } else {
        drop(f2, r, free2.i);
    }
    /* The copy's KERNEL and the ALLOC before it, last: the frees above
     * are after them (in its phase) or in later phases. */
    int alloc = -1;
    for (int i = 0; i < at; ++i)
        if (cp->actions[r][i].op == PRIME_ACT_ALLOC && cp->actions[r][i].tensor == t2)
            alloc = i;
    drop(cp, r, at);
    if (alloc >= 0)
        drop(cp, r, alloc);
    rewritten[c] = 1;
}

/* Scratch of kernel_copy_apply: per rank, the copy's KERNEL and the
 * stretch's frees. */
typedef struct CopyScratch {
    Kernel *k;
    int *at;
    Pos *f2, *f1;
} CopyScratch;

/* Takes the copy at phase c when it can go (takeover: t2 may be added to
 * once t1's tile is freed); 1 if it went. */
static int take_copy(Schedule *s, CopyPlan *plan, int c, int takeover, CopyScratch *w,
                     unsigned char *rewritten) {
    int ndev = s->model->mesh.ndev;
    PhaseSched *ph = s->phases.items[c];
    int x = copy_source(s, ph, w->k), any = 0, ok = x >= 0, from = -1, over = 0;
    for (int r = 0; r < ndev && ok; ++r) {
        int added = takeover;
        w->at[r] = -1;
        if (!sched_device_computes(s, ph, r)) {
            ok = !ph->nactions[r];
            continue;
        }
        w->at[r] = copy_kernel(ph, r, x);
        /* The tile read: the operand's, or the one an earlier copy's
         * readers read instead; a copy that takes a tile over takes the
         * operand's own (one tile through a chain of such copies would
         * carry a gradient across the layers: each layer's actions would
         * name another layer's tensor, and repeated layers would no
         * longer be alike). */
        const PrimeAction *a = w->at[r] >= 0 ? &ph->actions[r][w->at[r]] : NULL;
        ok = a && a->in_tensor[x] != a->tensor &&
             plain_tile(s, a->in_tensor[x], s->tensors[a->tensor].tile_elems) &&
             (from < 0 || from == a->in_tensor[x]) &&
             (!takeover || a->in_tensor[x] == ph->in[x].tensor) &&
             stretch(s, c, r, w->at[r], a, x, &w->f2[r], &w->f1[r], &added);
        from = a ? a->in_tensor[x] : from;
        over |= added == 2;
        any = 1;
    }
    if (!ok || !any)
        return 0;
    double flops = cost_kernel_flops(s, ph);
    int e = plan->count++;
    plan->phase[e] = c;
    plan->from[e] = from;
    plan->over[e] = over;
    for (int r = 0; r < ndev; ++r)
        if (w->at[r] >= 0) {
            rewrite_rank(s, c, r, w->at[r], x, w->f2[r], w->f1[r], rewritten);
            plan->flops[e] += flops;
        }
    return 1;
}

CopyPlan *kernel_copy_apply(Arena *arena, Schedule *s) {
    int n = s->phases.count, ndev = s->model->mesh.ndev;
    CopyPlan *plan = ARENA_NEW(arena, CopyPlan);
    plan->phase = ARENA_ARRAY(arena, int, n + 1);
    plan->from = ARENA_ARRAY(arena, int, n + 1);
    plan->over = ARENA_ARRAY(arena, int, n + 1);
    plan->flops = ARENA_ARRAY(arena, double, n + 1);
    if (s->folded)
        return plan;
    unsigned char *rewritten = ARENA_ARRAY(arena, unsigned char, n + 1);
    CopyScratch w = {malloc(sizeof(Kernel)), malloc(sizeof(int) * ((size_t)ndev + 1)),
                     malloc(sizeof(Pos) * ((size_t)ndev + 1)),
                     malloc(sizeof(Pos) * ((size_t)ndev + 1))};
    if (!w.k || !w.at || !w.f2 || !w.f1)
        ICE("out of memory");
    /* The copies whose tiles are only read first, then those into a tile
     * written later, which take over their source's tile where it is
     * dead by then: a copy taken first lets the source die sooner (its
     * readers read it, not the copy). */
    for (int takeover = 0; takeover < 2; ++takeover)
        for (int c = 0; c < n; ++c)
            take_copy(s, plan, c, takeover, &w, rewritten);
    free(w.k);
    free(w.at);
    free(w.f2);
    free(w.f1);
    if (plan->count)
        sched_predict_again(s, arena, rewritten);
    return plan;
}

void kernel_copy_dump(const Schedule *s, const CopyPlan *plan, FILE *out) {
    for (int e = 0; e < plan->count; ++e) {
        const PhaseSched *ph = s->phases.items[plan->phase[e]];
        fprintf(out, " copy phase %d, %s %s: %s read as %s%s (no tile, no kernel, %.17g FLOPs)\n",
                plan->phase[e], phase_name(ph->kind), s->model->instances[ph->inst].name,
                s->tensors[ph->out.tensor].name, s->tensors[plan->from[e]].name,
                plan->over[e] ? ", then added to in its tile" : "", plan->flops[e]);
    }
}
