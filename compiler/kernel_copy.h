/*
 * kernel_copy.h — copy propagation: a phase whose kernel copies one tile
 * into another (t2 = t1, or t2 = t1 * 1: the residuals' backward, where a
 * gradient passes through unchanged) runs no kernel; its readers read t1.
 *
 * A copy phase is a compute phase of one step, without communication,
 * whose kernel is one elementwise loop node out = x * 1 (or out = x) over
 * tiles of one layout: every dimension strided alike in t1 and t2, and
 * tiles of one size. On every rank that computes it, its actions are
 * STEP, ALLOC t2, KERNEL t2 <- t1, WAIT and frees. The rewrite reads t1
 * for t2 when, on every such rank, from the copy to the FREE of t2's
 * tile (t2's lifetime after the copy), nothing writes either tile:
 *
 *   - t2's tile is only read (a KERNEL's or an ADD's input, a SEND)
 *     until its FREE;
 *   - t1's tile is only read (the same, a SEND before its FREE), or
 *     freed, in that stretch (no KERNEL, ADD, receive or collective
 *     into it, no ALLOC of its slot).
 *
 * Then the copy's ALLOC and KERNEL are dropped, every input (t2, slot)
 * in the stretch reads (t1, slot) and every SEND of it sends (t1, slot)
 * (the same values), and t2's FREE goes: where t1's tile
 * was freed inside the stretch, that FREE moves to t2's (t1 lives until
 * t2's last reader); otherwise t1 outlives t2 and nothing is freed
 * there. The phases' Operands (and so the kernels' IR and the dense
 * reference, which computes every tensor) are unchanged: the tiles hold
 * equal values.
 *
 * A copy into a tile that is added to later (a gradient that other
 * contributions are added to: ADD t2 += ...) goes too when, on every
 * rank, t1's tile is freed in the stretch before the first such ADD: t2
 * takes t1's tile over. Until t1's FREE the stretch is as above; after
 * it t2's tile is read or added to, and every ADD into (t2, slot) adds
 * into (t1, slot) (t1 holds t2's value from the copy on, and t1 is read
 * no more). t1 is the copy's own operand, not a tile an earlier copy's
 * readers read instead: a chain of such copies would carry one tile
 * across the layers of a repeated block, whose actions would then differ
 * from layer to layer. Otherwise the copy stays.
 *
 * Copies are taken in phase order, those without ADDs first, then those
 * that take a tile over (the first sweep makes the readers of a copy read
 * its source, so the source dies at its own last reader), so a copy of a
 * copy reads the first source. The bytes and peaks are predicted again
 * from the rewritten actions.
 */
#ifndef PRIMEC_KERNEL_COPY_H
#define PRIMEC_KERNEL_COPY_H

#include <stdio.h>

#include "arena.h"
#include "schedule.h"

typedef struct CopyPlan {
    int count;
    int *phase; /* the copy phases rewritten, in order */
    int *from;  /* per entry: the tensor read instead (t1) */
    /* per entry: 1 when t2 took over t1's tile, dead by then, and is
     * added to in it */
    int *over;
    /* per entry: the FLOPs its KERNEL actions counted (cost_kernel_flops
     * per rank that ran it), which the program no longer runs */
    double *flops;
} CopyPlan;

/* Finds the copy phases of s that can go and rewrites the actions for
 * them (in order), then predicts the bytes and peaks again. */
CopyPlan *kernel_copy_apply(Arena *arena, Schedule *s);

/* --dump-after=kernels: one line per copy gone, with the FLOPs it no
 * longer runs (a program counts the FLOPs of the kernels it runs, so its
 * count is `primec cost`'s, of the schedule before this pass, less
 * these). */
void kernel_copy_dump(const Schedule *s, const CopyPlan *plan, FILE *out);

#endif
