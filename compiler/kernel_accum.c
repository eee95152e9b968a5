/*
 * kernel_accum.c — a gradient contribution computed into the tile it is
 * added to (see kernel_accum.h).
 */
#include "kernel_accum.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_ir.h"
#include "sched_internal.h"

/* Rank r's actions in the one form this rewrite takes: STEP, ALLOC t2,
 * KERNEL into t2 (t2 none of its inputs), WAIT, ADD t1 += t2, FREE t2,
 * then anything that does not touch t2 (frees, a collective of t1). Sets
 * *add to the ADD's index and returns 1; returns 0 for any other list,
 * and -1 for a rank with no action on t2 at all. */
static int rank_form(const PhaseSched *ph, int r, int t2, int *add) {
    const PrimeAction *a = ph->actions[r];
    int n = ph->nactions[r], touches = 0;
    for (int i = 0; i < n; ++i)
        touches |= (prime_action_has_tensor(a[i].op) && a[i].tensor == t2) ||
                   ((a[i].op == PRIME_ACT_KERNEL || a[i].op == PRIME_ACT_ADD) && a[i].nin > 0 &&
                    a[i].in_tensor[0] == t2);
    if (!touches)
        return -1;
    if (n < 6 || a[0].op != PRIME_ACT_STEP || a[1].op != PRIME_ACT_ALLOC || a[1].tensor != t2 ||
        a[1].kind != PRIME_COMBINE_SUM || a[2].op != PRIME_ACT_KERNEL || a[2].tensor != t2 ||
        a[2].slot != a[1].slot || a[3].op != PRIME_ACT_WAIT || a[4].op != PRIME_ACT_ADD ||
        a[4].kind != PRIME_COMBINE_SUM || a[4].nin != 1 || a[4].in_tensor[0] != t2 ||
        a[4].in_slot[0] != a[1].slot || a[4].tensor == t2 || a[5].op != PRIME_ACT_FREE ||
        a[5].tensor != t2 || a[5].slot != a[1].slot)
        return 0;
    for (int k = 0; k < a[2].nin; ++k)
        if (a[2].in_tensor[k] == t2 ||
            (a[2].in_tensor[k] == a[4].tensor && a[2].in_slot[k] == a[4].slot))
            return 0;
    for (int i = 6; i < n; ++i)
        if ((prime_action_has_tensor(a[i].op) && a[i].tensor == t2) || a[i].op == PRIME_ACT_STEP ||
            ((a[i].op == PRIME_ACT_KERNEL || a[i].op == PRIME_ACT_ADD) && a[i].nin > 0 &&
             a[i].in_tensor[0] == t2))
            return 0;
    *add = 4;
    return 1;
}

/* Whether tiles of t1 and t2 have one shape, dimension by dimension (the
 * operators may name the dimensions differently), and t1's partial values
 * combine by sum. */
static int same_tiles(const Schedule *s, int t1, int t2) {
    const SchedTensor *a = &s->tensors[t1], *b = &s->tensors[t2];
    if (a->ndims != b->ndims || a->tile_elems != b->tile_elems || a->combine != PRIME_COMBINE_SUM)
        return 0;
    for (int x = 0; x < a->ndims; ++x)
        if (a->extent[x] != b->extent[x])
            return 0;
    return 1;
}

int kernel_accum_into(const PhaseSched *ph, int r, int *slot) {
    int add = 0;
    if (rank_form(ph, r, ph->out.tensor, &add) != 1)
        return -1;
    *slot = ph->actions[r][add].slot;
    return ph->actions[r][add].tensor;
}

int kernel_accum_tensor(const Schedule *s, const PhaseSched *ph) {
    if (ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD)
        return -1;
    if (ph->moves.count || ph->boundary.count || ph->nboxes)
        return -1;
    int t2 = ph->out.tensor, t1 = -1;
    for (int r = 0; r < s->model->mesh.ndev; ++r) {
        int add = 0, f = rank_form(ph, r, t2, &add);
        if (f == 0)
            return -1;
        if (f < 0)
            continue;
        int t = ph->actions[r][add].tensor;
        if (t1 >= 0 && t != t1)
            return -1;
        t1 = t;
    }
    return t1 >= 0 && same_tiles(s, t1, t2) ? t1 : -1;
}

/* t1 if phase ph can accumulate into it on every rank that acts on its
 * output, else -1. */
static int accum_target(const Schedule *s, const PhaseSched *ph, Kernel *k) {
    int t1 = kernel_accum_tensor(s, ph);
    if (t1 < 0)
        return -1;
    /* One node: its accumulating form adds its value to t1 once, as the
     * ADD added the overwriting form's value. */
    kernel_build(k, s, ph, 0);
    return k->nnodes == 1 ? t1 : -1;
}

AccumPlan *kernel_accum_plan(Arena *arena, const Schedule *s, const FusePlan *fusion) {
    int n = s->phases.count;
    AccumPlan *plan = ARENA_NEW(arena, AccumPlan);
    plan->phase = ARENA_ARRAY(arena, int, n + 1);
    plan->into = ARENA_ARRAY(arena, int, n + 1);
    if (s->folded)
        return plan;
    Kernel *k = malloc(sizeof *k);
    if (!k)
        ICE("out of memory");
    for (int p = 0; p < n; ++p) {
        if (fusion && fusion->member_of[p] >= 0)
            continue;
        int t1 = accum_target(s, s->phases.items[p], k);
        if (t1 < 0)
            continue;
        plan->phase[plan->count] = p;
        plan->into[plan->count++] = t1;
    }
    free(k);
    return plan;
}

void kernel_accum_apply(Schedule *s, AccumPlan *plan) {
    for (int e = 0; e < plan->count; ++e) {
        PhaseSched *ph = s->phases.items[plan->phase[e]];
        for (int r = 0; r < s->model->mesh.ndev; ++r) {
            int add = 0;
            if (rank_form(ph, r, ph->out.tensor, &add) != 1)
                continue;
            PrimeAction *a = ph->actions[r];
            /* STEP, KERNEL into t1's slot, WAIT, then what followed FREE t2. */
            PrimeAction kernel = a[2];
            kernel.tensor = a[add].tensor;
            kernel.slot = a[add].slot;
            a[1] = kernel;
            a[2] = a[3];
            int n = 3;
            for (int i = 6; i < ph->nactions[r]; ++i)
                a[n++] = a[i];
            ph->nactions[r] = n;
        }
    }
    plan->applied = 1;
}

void kernel_accum_dump(const Schedule *s, const AccumPlan *plan, FILE *out) {
    for (int e = 0; e < plan->count; ++e) {
        const PhaseSched *ph = s->phases.items[plan->phase[e]];
        fprintf(out, " accumulate phase %d, %s %s: into %s (no tile %s, no add)\n", plan->phase[e],
                phase_name(ph->kind), s->model->instances[ph->inst].name,
                s->tensors[plan->into[e]].name, s->tensors[ph->out.tensor].name);
    }
}
