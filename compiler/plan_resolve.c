/*
 * plan_resolve.c — what the planner answers about a plan it built (see
 * plan.h): the objective of an assignment, the program solved again
 * under other prices, an assignment's sums, and the exhaustive check.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

/* Objective of an assignment under the planner's edges. */
double plan_objective(const Planner *p, const int *choice) {
    double t = 0;
    for (int i = 0; i < p->n; ++i)
        t += own_time(p, i, choice[i]);
    for (int e = 0; e < p->edges.count; ++e) {
        const Edge *ed = p->edges.items[e];
        t += edge_cost(p, ed->time[choice[ed->from] * ncand(p, ed->to) + choice[ed->to]]);
    }
    return t;
}

double plan_assignment_time(const Plan *plan, const int *choice) {
    const Planner *p = plan->planner;
    ICE_ASSERT(p && p->plan == plan);
    return plan_objective(p, choice);
}

double plan_resolve(Plan *plan, const PlanWeights *w, Arena *scratch) {
    Planner *p = plan->planner;
    ICE_ASSERT(p && p->plan == plan);
    Arena *keep = p->arena;
    p->arena = scratch;
    p->w = *w;
    p->lambda = 0;
    double best = plan_solve(p);
    p->arena = keep;
    return best;
}

void plan_sums(const Plan *plan, const int *choice, PlanSums *out) {
    const Planner *p = plan->planner;
    ICE_ASSERT(p && p->plan == plan);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < p->n; ++i) {
        const PlanCost *c = &cand(p, i, choice[i])->cost;
        out->time += c->time;
        out->fwd_time += c->fwd_time;
        out->coll_time += c->coll_time;
        out->compute_time += c->compute_time;
        out->coll_bytes += c->coll_bytes;
        out->p2p_bytes += c->p2p_bytes;
        out->weight_elems += c->weight_elems;
        out->stash_bytes += c->stash_bytes;
        out->input_bytes += c->input_bytes;
        if (c->peak - c->persistent > out->transient)
            out->transient = c->peak - c->persistent;
    }
    for (int e = 0; e < p->edges.count; ++e) {
        const Edge *ed = p->edges.items[e];
        int k = choice[ed->from] * ncand(p, ed->to) + choice[ed->to];
        out->time += ed->time[k];
        if (ed->merge) {
            out->coll_bytes += ed->bytes[k];
            out->coll_time += ed->time[k];
        } else {
            out->p2p_bytes += ed->bytes[k];
            out->conv_time += ed->time[k];
        }
    }
}

long plan_min_weight_elems(const Plan *plan) {
    const Planner *p = plan->planner;
    long sum = 0;
    for (int i = 0; i < p->n; ++i) {
        long least = -1;
        for (int c = 0; c < ncand(p, i); ++c)
            if (least < 0 || cand(p, i, c)->cost.weight_elems < least)
                least = cand(p, i, c)->cost.weight_elems;
        sum += least > 0 ? least : 0;
    }
    return sum;
}

double plan_exhaustive(const Plan *plan, long limit, int *best_choice) {
    const Planner *p = plan->planner;
    ICE_ASSERT(p && p->plan == plan);
    long total = 1;
    for (int i = 0; i < p->n; ++i) {
        total *= ncand(p, i);
        if (total > limit)
            return -1;
    }
    int *choice = calloc((size_t)p->n + 1, sizeof(int));
    double best = INFINITY;
    for (long k = 0; k < total; ++k) {
        long rest = k;
        for (int i = p->n - 1; i >= 0; --i) {
            choice[i] = (int)(rest % ncand(p, i));
            rest /= ncand(p, i);
        }
        double t = plan_objective(p, choice);
        if (t < best) {
            best = t;
            if (best_choice)
                memcpy(best_choice, choice, sizeof(int) * (size_t)p->n);
        }
    }
    free(choice);
    return best;
}
