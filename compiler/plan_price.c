/*
 * plan_price.c — how `primec plan` prices what the planner asks (see
 * plan_price.h): schedules by the cost model, conversions and the
 * data-parallel gradient all-reduce by the profile's links.
 */
#include "plan_price.h"

#include <string.h>

#include "phases.h"

PlanCost plan_price_schedule(const Schedule *s, Arena *scratch, void *ctx) {
    CostCtx *c = ctx;
    CostReport r;
    cost_schedule(s, c->profile, &c->opt, scratch, &r);
    PlanCost pc;
    memset(&pc, 0, sizeof pc);
    pc.time = r.step_us * 1e-6;
    long coll = 0, p2p = 0;
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        if (s->pred_bytes[PRIME_BYTES_COLLECTIVE][d] > coll)
            coll = s->pred_bytes[PRIME_BYTES_COLLECTIVE][d];
        long q = s->pred_bytes[PRIME_BYTES_SHIFT][d] + s->pred_bytes[PRIME_BYTES_REDIST][d];
        if (q > p2p)
            p2p = q;
    }
    /* The schedule counts 4-byte elements; report at the element size. */
    pc.coll_bytes = coll / 4 * c->opt.elem_bytes;
    pc.p2p_bytes = p2p / 4 * c->opt.elem_bytes;
    pc.peak = r.memory.max_total_bytes; /* with optimizer state */
    for (int k = 0; k < r.nphases; ++k) {
        pc.coll_time += r.phases[k].collective_us * 1e-6;
        pc.compute_time += r.phases[k].compute_us * 1e-6;
        if (r.phases[k].phase && r.phases[k].phase->kind == PHASE_FWD)
            pc.fwd_time += r.phases[k].time_us * 1e-6;
    }
    /* The all-reduces of each input's gradient (instance 0: a schedule
     * of one instance alone). */
    for (int k = 0; k < r.nphases; ++k) {
        const PhaseSched *ph = r.phases[k].phase;
        if (!ph || ph->inst != 0 || (ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD) ||
            ph->wrt < 0 || ph->wrt >= IR_MAX_INPUTS)
            continue;
        pc.reduce_time[ph->wrt] += r.phases[k].collective_us * 1e-6;
        pc.reduce_bytes[ph->wrt] += r.phases[k].collective_bytes / s->model->mesh.ndev;
    }
    return pc;
}

/* A conversion between instances: the most any device receives, over
 * the links of the mesh (inter-node when the mesh spans nodes, as most
 * of its pairs then do). */
double plan_price_move(long bytes, void *ctx) {
    CostCtx *c = ctx;
    int dpn = c->opt.devices_per_node > 0 ? c->opt.devices_per_node : c->profile->devices_per_node;
    LinkClass link = c->tp > dpn ? LINK_INTER : LINK_INTRA;
    return cost_p2p_us(c->profile, link, (double)bytes / 4 * c->opt.elem_bytes) * 1e-6;
}

/* The data-parallel gradient all-reduce: replica r's device k is rank
 * r * tp + k, so a group is {k, tp + k, 2 tp + k, ...}. */
double plan_price_dp(long weight_bytes, int dp, void *ctx, long *moved) {
    CostCtx *c = ctx;
    *moved = weight_bytes / 4 * c->opt.elem_bytes * 2 * (dp - 1) / dp;
    int dpn = c->opt.devices_per_node > 0 ? c->opt.devices_per_node : c->profile->devices_per_node;
    LinkClass link = (long)dp * c->tp > dpn ? LINK_INTER : LINK_INTRA;
    return cost_collective_us(c->profile, COMM_ALLREDUCE, link,
                              (double)weight_bytes / 4 * c->opt.elem_bytes, dp) *
           1e-6;
}
