/*
 * plan_fusion.h — what the kernels fused across instances save on a layer
 * plan, for the training search (TrainOptions.fusion).
 *
 * The search prices candidates instance by instance, which cannot see the
 * kernels the kernels pass fuses across instances (norm, softmax and
 * residual chains: cost_kernel.h). So a layer plan the search evaluates is
 * scheduled as one program, the layer at one sequence with the chosen
 * partitions bound on the plan's mesh, and priced twice by the cost model,
 * kernels fused and each alone: the difference, per sequence, is what
 * fusion saves, in the forward and in the rest.
 *
 * That program depends only on the mesh and on how each candidate binds
 * its instance (partition, axis map, size parameters, steps), not on the
 * micro-batch the plan was made for, so a cache keyed by the bound program
 * (plan_same_program) schedules each distinct program once: one entry
 * serves every micro-batch size of a mesh and both searches of `plan
 * --training` (the search over every partition and the pinned one, whose
 * candidates bind alike). The entries point at the plans they were first
 * found for; those must outlive the cache.
 */
#ifndef PRIMEC_PLAN_FUSION_H
#define PRIMEC_PLAN_FUSION_H

#include "cost.h"
#include "plan.h"
#include "profile.h"

typedef struct PlanFusionEntry {
    const Plan *plan;
    int *choice;
    double fwd_s, bwd_s; /* saved per sequence */
} PlanFusionEntry;

typedef struct PlanFusion {
    const SourceMap *sources; /* for the scheduler's (muted) diagnostics */
    const Model *model;       /* the layer at one sequence */
    const Profile *profile;
    CostOptions opt; /* no_fuse is set per pricing */
    Arena *arena;    /* the entries */
    Arena *scratch;  /* each program's schedule, reset between programs (pages stay mapped) */
    PlanFusionEntry *entries;
    int count, cap;
    long programs; /* programs scheduled */
    long hits;     /* savings found in the cache */
} PlanFusion;

/* An empty cache for layer `model` (at one sequence), entries in arena;
 * plan_fusion_free frees its scratch memory. */
void plan_fusion_init(PlanFusion *f, const SourceMap *sources, const Model *model,
                      const Profile *profile, const CostOptions *opt, Arena *arena);
void plan_fusion_free(PlanFusion *f);

/* Schedules and prices the program of choice `choice` of plan (not
 * cached): the seconds fused kernels save per sequence, forward in
 * *fwd_s, the rest in *bwd_s; 0 when the program does not schedule. */
void plan_fusion_program(PlanFusion *f, const Plan *plan, const int *choice, double *fwd_s,
                         double *bwd_s);

/* The same, found in the cache when a program alike was priced before. */
void plan_fusion_saved(PlanFusion *f, const Plan *plan, const int *choice, double *fwd_s,
                       double *bwd_s);

#endif
