/*
 * plan_price.h — the cost model as the planner's price functions
 * (PlanCostFn, PlanMoveFn, PlanDpFn of plan.h), for `primec plan` and its
 * training search.
 */
#ifndef PRIMEC_PLAN_PRICE_H
#define PRIMEC_PLAN_PRICE_H

#include "cost.h"
#include "plan.h"
#include "profile.h"

typedef struct CostCtx {
    const Profile *profile;
    CostOptions opt;
    Arena *arena;
    long tp; /* devices of the mesh being planned (one data-parallel replica) */
} CostCtx;

/* A schedule: step time, forward time, collective and point-to-point
 * bytes of the busiest device, peak with optimizer state, and the
 * all-reduces of each input's gradient. */
PlanCost plan_price_schedule(const Schedule *s, Arena *scratch, void *ctx);
/* A conversion of `bytes` (4-byte elements counted) per device. */
double plan_price_move(long bytes, void *ctx);
/* The data-parallel gradient all-reduce over dp replicas of ctx->tp devices. */
double plan_price_dp(long weight_bytes, int dp, void *ctx, long *moved);

#endif
