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
 * here is one per micro-batch (Phase.micro) placed just before it.
 *
 * A boundary receive runs at its receiving phase (the send is posted at
 * the phase that makes the value, sched_sends.c), so the merge decides
 * where a stage waits: the units are placed in the order of their start
 * in a simulation where a unit takes as long as it has phases and starts
 * when its stage is free and its dependency has finished; of two
 * starting at once the forward goes first, and of two forwards the later
 * stage's, which receives what the earlier one has just sent.
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
    return phases_instance_micro(m, m->tensors[tensor].producer);
}

typedef struct Order {
    const PhaseList *src;
    int nstages, nmicro;
    Phase *out;
    int count;
    unsigned char *done; /* [dir][m][k]: the unit has been placed */
    long *finish;        /* [dir][m][k]: when the placed unit ends, in phases */
} Order;

static int unit_index(const Order *o, int backward, int micro, int stage) {
    return (backward * o->nmicro + micro) * o->nstages + stage;
}

/* Appends the phases of unit (backward, micro, stage) in the list's order;
 * a last stage's backward unit after the dy-in phase of its micro-batch.
 * Returns how many phases of instances it placed. */
static int place_unit(Order *o, int backward, int micro, int stage) {
    const Model *m = o->src->model;
    if (backward && stage == o->nstages - 1) {
        for (int p = 0; p < o->src->count; ++p)
            if (o->src->items[p].kind == PHASE_DYIN) {
                o->out[o->count] = o->src->items[p];
                o->out[o->count++].micro = micro;
                break;
            }
    }
    int n = 0;
    for (int p = 0; p < o->src->count; ++p) {
        const Phase *ph = &o->src->items[p];
        if (ph->inst < 0 || (ph->kind != PHASE_FWD) == !backward)
            continue;
        const Instance *inst = &m->instances[ph->inst];
        if (phases_instance_micro(m, ph->inst) == micro &&
            (m->nstages ? inst->stage : 0) == stage) {
            o->out[o->count++] = *ph;
            ++n;
        }
    }
    o->done[unit_index(o, backward, micro, stage)] = 1;
    return n;
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

/* The unit that (backward, micro, k) waits for on another stage, or -1. */
static int unit_dependency(const Order *o, int backward, int micro, int k) {
    if (!backward)
        return k == 0 ? -1 : unit_index(o, 0, micro, k - 1);
    return k == o->nstages - 1 ? -1 : unit_index(o, 1, micro, k + 1);
}

void phases_order_1f1b(Arena *arena, PhaseList *pl) {
    const Model *m = pl->model;
    Order o = {pl, m->nstages > 0 ? m->nstages : 1, m->nmicro, NULL, 0, NULL, NULL};
    int nunits = 2 * o.nmicro * o.nstages;
    o.out = ARENA_ARRAY(arena, Phase, pl->count + o.nmicro);
    o.done = ARENA_ARRAY(arena, unsigned char, nunits);
    o.finish = ARENA_ARRAY(arena, long, nunits);
    int *next = ARENA_ARRAY(arena, int, o.nstages);
    long *clock = ARENA_ARRAY(arena, long, o.nstages);
    o.out[o.count++] = pl->items[0]; /* init */
    for (int left = nunits; left > 0; --left) {
        /* The stage whose next unit starts first. */
        int best = -1, best_backward = 0, best_micro = 0;
        long best_start = 0;
        for (int k = 0; k < o.nstages; ++k) {
            if (next[k] == 2 * o.nmicro)
                continue;
            int backward, micro;
            stage_unit(&o, k, next[k], &backward, &micro);
            int dep = unit_dependency(&o, backward, micro, k);
            if (dep >= 0 && !o.done[dep])
                continue;
            long start = dep >= 0 && o.finish[dep] > clock[k] ? o.finish[dep] : clock[k];
            /* At the same start: a forward first, the later stage's of two
             * (it receives what the earlier one just sent); the earlier
             * stage's of two backwards. */
            if (best < 0 || start < best_start || (start == best_start && !backward)) {
                best = k;
                best_backward = backward;
                best_micro = micro;
                best_start = start;
            }
        }
        if (best < 0)
            break; /* cannot happen: 1F1B's order has no cycle */
        int n = place_unit(&o, best_backward, best_micro, best);
        clock[best] = best_start + (n > 0 ? n : 1);
        o.finish[unit_index(&o, best_backward, best_micro, best)] = clock[best];
        ++next[best];
    }
    pl->items = o.out;
    pl->count = o.count;
}
