/*
 * plan_internal.h — what the planner's files share: its edges, its state
 * and its dynamic program (plan_dp.c). plan.c builds the candidates and
 * drives the search, plan_edges.c prices the edges between them; plan.h
 * is the interface.
 */
#ifndef PRIMEC_PLAN_INTERNAL_H
#define PRIMEC_PLAN_INTERNAL_H

#include <math.h>

#include "plan.h"

/* Between instance `from` and consumer `to`'s argument `arg`: from's
 * result (from_arg -1), or, for a model input or weight that several
 * instances read, the layout its first reader `from` reads it in
 * (argument from_arg): the whole program stores it there, converts it
 * for later readers and sums their gradient contributions there. */
typedef struct Edge {
    int from, to, arg; /* source instance, consumer instance, consumer argument */
    int from_arg;
    /* A merge edge between consecutive readers of one value (from reads it
     * as from_arg, to as arg): when both gradients' partial sums are
     * all-reduced alike, a program adds them first and all-reduces once,
     * so the edge gives back one all-reduce (a negative cost). */
    int merge;
    double *time; /* [ci * ncand(to) + cj] */
    long *bytes;  /* busiest device, forward + backward */
} Edge;

typedef struct Planner {
    Arena *arena;
    DiagSink *sink;
    const Module *module;
    const Model *model;
    const PlanOptions *opt;
    Plan *plan;
    int n;
    int *last_use;    /* per instance: the last instance an edge leads to from it, or -1 */
    PtrVec edges;     /* Edge* */
    PtrVec *in_edges; /* per consumer instance: Edge* */
    /* Per instance: future_cls[i][c] is the first candidate that every
     * edge leaving i prices like c. A DP state records these classes,
     * not candidates: states that only differ within a class have the
     * same future and are merged (keeping the cheaper past). */
    int **future_cls;
    double lambda;               /* memory penalty per byte of persistent memory */
    PlanWeights w;               /* how candidates are priced (plan_resolve) */
    long *min_peak;              /* per instance: the smallest candidate peak, kept or dropped */
    const char **min_peak_use;   /* per instance: which partition gives it */
    Arena *scratch;              /* one candidate's schedule; reset after each */
    Model plan_model;            /* the model on the planned mesh (for slice tables) */
    int *first_inst, *first_arg; /* per model tensor: its first reader and argument, or -1 */
    unsigned *token_dims;        /* per instance: its token dimensions, as bits */
    int *prev_inst,
        *prev_arg; /* per [instance * IR_MAX_INPUTS + argument]: see find_first_readers */
    PtrVec memo;   /* Memo*: candidates already scheduled */
} Planner;

/* Whether axis k of part splits exactly the token dimensions `tok` (as
 * bits; plan_replica.c): its size is a name nothing else uses, each token
 * dimension's DSI is the axis, no other DSI mentions it. */
int plan_is_replica_axis(const Partition *part, int k, unsigned tok, int ndims);

static inline int ncand(const Planner *p, int i) {
    return p->plan->cands[i].count;
}
static inline PlanCandidate *cand(const Planner *p, int i, int c) {
    return p->plan->cands[i].items[c];
}

static inline double own_time(const Planner *p, int i, int c) {
    const PlanCandidate *pc = cand(p, i, c);
    const PlanWeights *w = &p->w;
    return w->time * pc->cost.time + w->fwd * pc->cost.fwd_time +
           w->weight * (double)pc->cost.weight_elems + w->stash * (double)pc->cost.stash_bytes +
           w->input * (double)pc->cost.input_bytes + p->lambda * (double)pc->cost.persistent;
}

/* A conversion's time t at the program's weight (an impossible one stays
 * impossible). */
static inline double edge_cost(const Planner *p, double t) {
    return p->w.time == 1 ? t : isinf(t) ? t : p->w.time * t;
}

/* Every model tensor's first reader (p->first_inst, first_arg, prev_inst,
 * prev_arg), in one pass (plan_edges.c). */
void plan_find_first_readers(Planner *p);
/* The edges between every producer's and consumer's candidates. */
void plan_build_edges(Planner *p);
/* p->future_cls: the classes of candidates every edge leaving an
 * instance prices alike. */
void plan_future_classes(Planner *p);

/* The objective of an assignment under the planner's prices and edges. */
double plan_objective(const Planner *p, const int *choice);

/* The optimum of the objective, with plan->choice filled: through the
 * layer power when the layers repeat (plan->used_power), else linearly. */
double plan_solve(Planner *p);
/* The linear dynamic program over all instances; fills plan->choice. */
double plan_linear_solve(Planner *p);

#endif
