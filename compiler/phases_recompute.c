/*
 * phases_recompute.c — activation recomputation (`microbatches b: M
 * [order O] recompute;`, docs/language.md, "Micro-batches").
 *
 * Under `recompute` each stage keeps, of every micro-batch in flight
 * between its forward and its backward, only what its backward reads
 * from other stages (the stage's input boundary activation; on the first
 * stage the layer's input) and the model's inputs: the backward phases of
 * the layer's instances read recomputed copies (NAME_rc, resolve_stages.c)
 * of the activations made on their stage, so the forward's own
 * activations die at their last forward reader. Right before the first
 * backward phase of micro-batch m on stage k the forward phases of (m, k)
 * whose results that backward reads, directly or through another of them,
 * run again, each writing its result's copy and reading the copies of
 * its operands made on the stage; the copies die after their last
 * backward reader, like any activation.
 */
#include <string.h>

#include "phases.h"

static int stage_of(const Model *m, int inst) {
    return m->nstages ? m->instances[inst].stage : 0;
}

int phases_operand_tensor(const Model *m, const Phase *ph, int t) {
    if (!ph->recompute || t < 0 || !m->tensors[t].rc)
        return t;
    int producer = m->tensors[t].producer;
    if (producer < 0 || ph->inst < 0 || stage_of(m, producer) != stage_of(m, ph->inst))
        return t;
    return m->tensors[t].rc;
}

/* The model tensor operand o of phase ph names (-1: dY). */
static int operand_tensor(const Model *m, const Phase *ph, const PhaseOperand *o) {
    const Instance *inst = &m->instances[ph->inst];
    if (o->input == PHASE_DY)
        return -1;
    return o->input == PHASE_RESULT ? inst->result : inst->args[o->input];
}

/* Marks the producer of every operand of ph that ph reads as a
 * recomputed copy. */
static void mark_producers(const Model *m, const Phase *ph, unsigned char *need) {
    for (int i = 0; i < ph->nin; ++i) {
        int t = operand_tensor(m, ph, &ph->in[i]);
        if (t >= 0 && phases_operand_tensor(m, ph, t) != t)
            need[m->tensors[t].producer] = 1;
    }
}

void phases_recompute(Arena *arena, PhaseList *pl) {
    const Model *m = pl->model;
    int nstages = m->nstages > 0 ? m->nstages : 1;
    int ngroups = (m->nmicro > 1 ? m->nmicro : 1) * nstages;
    unsigned char *need = ARENA_ARRAY(arena, unsigned char, m->ninstances + 1);
    unsigned char *placed = ARENA_ARRAY(arena, unsigned char, ngroups);
    const Phase **fwd = ARENA_ARRAY(arena, const Phase *, m->ninstances + 1);
    for (int p = 0; p < pl->count; ++p) {
        Phase *ph = &pl->items[p];
        if (ph->kind == PHASE_FWD)
            fwd[ph->inst] = ph;
        if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
            ph->recompute = 1;
            mark_producers(m, ph, need);
        }
    }
    /* A recomputed forward reads the copies made before it: their
     * producers (earlier instances) are recomputed too. */
    int nneed = 0;
    for (int i = m->ninstances - 1; i >= 0; --i) {
        if (!need[i] || !fwd[i])
            continue;
        Phase probe = *fwd[i];
        probe.recompute = 1;
        mark_producers(m, &probe, need);
        ++nneed;
    }
    Phase *out = ARENA_ARRAY(arena, Phase, pl->count + nneed);
    int count = 0;
    for (int p = 0; p < pl->count; ++p) {
        const Phase *ph = &pl->items[p];
        if (ph->kind == PHASE_BWD || ph->kind == PHASE_GRAD) {
            int micro = phases_instance_micro(m, ph->inst), stage = stage_of(m, ph->inst);
            int g = micro * nstages + stage;
            for (int i = 0; i < m->ninstances && !placed[g]; ++i) {
                if (!need[i] || !fwd[i] || phases_instance_micro(m, i) != micro ||
                    stage_of(m, i) != stage)
                    continue;
                Phase *rc = &out[count++];
                *rc = *fwd[i];
                rc->recompute = 1;
                rc->out_tensor = m->tensors[m->instances[i].result].rc;
            }
            placed[g] = 1;
        }
        out[count++] = *ph;
    }
    pl->items = out;
    pl->count = count;
}
