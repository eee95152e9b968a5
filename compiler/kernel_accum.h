/*
 * kernel_accum.h — a gradient contribution computed into the tile it is
 * added to.
 *
 * Where a gradient has several contributions (the q, k and v projections'
 * backwards into their common input), the schedule computes each later
 * one into a tile of its own and ADDs it to the first one's tile: on each
 * rank, ALLOC t2, KERNEL into t2, WAIT, ADD t1 += t2, FREE t2. When a
 * phase does exactly that, in one step with nothing else in flight, on
 * tiles of one shape, and its kernel is one node, the kernel can
 * accumulate into t1 instead (its accumulating form: a GEMM with beta =
 * 1, a loop's `+=`): the tile t2, its fill and the ADD's pass over it are
 * gone, and the sum is the same (t1 + the node's value, rounded once).
 *
 * kernel_accum_plan finds the phases; kernel_accum_apply rewrites their
 * actions.
 */
#ifndef PRIMEC_KERNEL_ACCUM_H
#define PRIMEC_KERNEL_ACCUM_H

#include <stdio.h>

#include "arena.h"
#include "kernel_fuse.h"
#include "schedule.h"

typedef struct AccumPlan {
    int count;
    int *phase; /* the phases whose kernels accumulate, in order */
    int *into;  /* per entry: the tensor (t1) it accumulates into */
    int applied;
} AccumPlan;

/* t1 if every rank of phase ph that acts on its output t2 does so in the
 * one form above (ALLOC t2, KERNEL into t2, ADD t1 += t2, FREE t2), with
 * the same t1 and tiles of t1's shape, else -1. */
int kernel_accum_tensor(const Schedule *s, const PhaseSched *ph);

/* Rank r's t1 in that form (and *slot its slot), or -1 where rank r's
 * actions do not have it. */
int kernel_accum_into(const PhaseSched *ph, int r, int *slot);

/* The phases of s, outside fusion's groups (fusion may be NULL), whose
 * contributions can accumulate into the tile they are added to. */
AccumPlan *kernel_accum_plan(Arena *arena, const Schedule *s, const FusePlan *fusion);

/* Rewrites the actions of plan's phases: the kernel writes into t1, and
 * t2's ALLOC, the ADD and t2's FREE are dropped. The bytes and peaks are
 * predicted again by kernel_fuse_apply, which runs next. */
void kernel_accum_apply(Schedule *s, AccumPlan *plan);

/* --dump-after=kernels: one line per phase. */
void kernel_accum_dump(const Schedule *s, const AccumPlan *plan, FILE *out);

#endif
