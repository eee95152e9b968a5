/*
 * phases_order.c — the 1F1B order of a micro-batched model's phases
 * (`microbatches b: M order 1f1b;`, docs/language.md, "Micro-batches").
 *
 * phases_derive lists GPipe's order: every forward, dy-in, then every
 * backward in reverse. Here the phases of one micro-batch m on one stage
 * k form a unit, F(m, k) (its forward phases, in instance order) or
 * B(m, k) (its backward and gradient phases, in GPipe's order), and stage
 * k runs its units as non-interleaved 1F1B does (Narayanan et al. 2021):
 * min(S - k, M) forwards, then one backward and one forward in turn until
 * the forwards are done, then the remaining backwards. So stage k holds
 * the activations of at most S - k micro-batches at once instead of M.
 *
 * A device runs the phases in the list's order, skipping the other
 * stages', and a move or collective of a phase runs at that phase on all
 * its devices; so the list is one order of every stage's units that
 * keeps the dependencies: F(m, k) after F(m, k - 1), B(m, k) after
 * B(m, k + 1), and the last stage's B(m) after its dy-in phase, which
 * here is one per micro-batch (Phase.micro) placed just before it. The
 * units are merged in rounds, one unit per stage a round where its
 * dependencies are met, the last stage first.
 */
#include <string.h>

#include "phases.h"

/* The micro-batch of instance i: the instances are in micro-batch order. */
int phases_instance_micro(const Model *m, int i) {
    if (m->nmicro <= 1 || i < 0)
        return 0;
    return i / (m->ninstances / m->nmicro);
}

/* The micro-batch of a model tensor: its producer's, or 0 (a weight, an
 * input). */
int phases_tensor_micro(const Model *m, int tensor) {
    for (int i = 0; i < m->ninstances; ++i)
        if (m->instances[i].result == tensor)
            return phases_instance_micro(m, i);
    return 0;
}

typedef struct Order {
    const PhaseList *src;
    int nstages, nmicro;
    Phase *out;
    int count;
    unsigned char *done; /* [dir][m][k]: the unit has been placed */
} Order;

static int unit_index(const Order *o, int backward, int micro, int stage) {
    return (backward * o->nmicro + micro) * o->nstages + stage;
}

/* Appends the phases of unit (backward, micro, stage) in the list's order;
 * a last stage's backward unit after the dy-in phase of its micro-batch. */
static void place_unit(Order *o, int backward, int micro, int stage) {
    const Model *m = o->src->model;
    if (backward && stage == o->nstages - 1) {
        for (int p = 0; p < o->src->count; ++p)
            if (o->src->items[p].kind == PHASE_DYIN) {
                o->out[o->count] = o->src->items[p];
                o->out[o->count++].micro = micro;
                break;
            }
    }
    for (int p = 0; p < o->src->count; ++p) {
        const Phase *ph = &o->src->items[p];
        if (ph->inst < 0 || (ph->kind != PHASE_FWD) == !backward)
            continue;
        const Instance *inst = &m->instances[ph->inst];
        if (phases_instance_micro(m, ph->inst) == micro && (m->nstages ? inst->stage : 0) == stage)
            o->out[o->count++] = *ph;
    }
    o->done[unit_index(o, backward, micro, stage)] = 1;
}

/* Stage k's j-th unit in 1F1B's order: its direction and micro-batch. */
static void stage_unit(const Order *o, int k, int j, int *backward, int *micro) {
    int warm = o->nstages - k < o->nmicro ? o->nstages - k : o->nmicro;
    if (j < warm) {
        *backward = 0;
        *micro = j;
        return;
    }
    int i = j - warm; /* B(0), F(warm), B(1), F(warm + 1), ..., then the B's left */
    int steady = 2 * (o->nmicro - warm);
    if (i < steady) {
        *backward = i % 2 == 0;
        *micro = *backward ? i / 2 : warm + i / 2;
    } else {
        *backward = 1;
        *micro = i - steady + (o->nmicro - warm);
    }
}

static int unit_ready(const Order *o, int backward, int micro, int k) {
    if (!backward)
        return k == 0 || o->done[unit_index(o, 0, micro, k - 1)];
    return k == o->nstages - 1 ? o->done[unit_index(o, 0, micro, k)]
                               : o->done[unit_index(o, 1, micro, k + 1)];
}

void phases_order_1f1b(Arena *arena, PhaseList *pl) {
    const Model *m = pl->model;
    Order o = {pl, m->nstages > 0 ? m->nstages : 1, m->nmicro, NULL, 0, NULL};
    o.out = ARENA_ARRAY(arena, Phase, pl->count + o.nmicro);
    o.done = ARENA_ARRAY(arena, unsigned char, 2 * o.nmicro * o.nstages);
    int *next = ARENA_ARRAY(arena, int, o.nstages);
    o.out[o.count++] = pl->items[0]; /* init */
    int left = 2 * o.nmicro * o.nstages;
    while (left > 0) {
        int placed = 0;
        for (int k = o.nstages - 1; k >= 0; --k) {
            if (next[k] == 2 * o.nmicro)
                continue;
            int backward, micro;
            stage_unit(&o, k, next[k], &backward, &micro);
            if (!unit_ready(&o, backward, micro, k))
                continue;
            place_unit(&o, backward, micro, k);
            ++next[k];
            ++placed;
        }
        left -= placed;
        if (!placed)
            break; /* cannot happen: 1F1B's order has no cycle */
    }
    pl->items = o.out;
    pl->count = o.count;
}
