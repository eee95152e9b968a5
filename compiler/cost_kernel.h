/*
 * cost_kernel.h — the price of the kernels a schedule's program runs, for
 * the cost model (cost.h).
 *
 * A phase's kernel alone is priced from its kernel IR (kernel_ir.h): each
 * GEMM node at the GEMM rate and efficiency of its shape, each loop node
 * as a vector kernel over its loops. A group of phases that the kernels
 * pass fuses (kernel_fuse.h) runs as one kernel and is priced as one
 * pass: one launch, the FLOPs of its members summed, and the bytes it
 * moves: every tile it reads from outside the group once, every output
 * it stores written once, and each tile from outside that members add to
 * read and written once (rows of members that are not stored stay in
 * the kernel). A contribution computed into the tile it is added to
 * (kernel_accum.h) has no tile, fill or ADD of its own.
 *
 * The groups are the kernels pass's own (kernel_fuse_plan and
 * kernel_accum_plan: the same decision, not a copy of its rules). A
 * schedule the kernels pass has rewritten is priced from its plan; one
 * straight from the schedule pass (what `primec cost`, `explain --svg`
 * and the planner price) is priced as that pass would rewrite it, so that
 * both give the same times.
 */
#ifndef PRIMEC_COST_KERNEL_H
#define PRIMEC_COST_KERNEL_H

#include "arena.h"
#include "kernel_fuse.h"
#include "profile.h"
#include "schedule.h"

typedef struct KernelCost {
    double us;    /* 0 without a profile */
    double flops; /* on one device */
    double bytes; /* read and written, at the element size; per vector node, GEMMs excluded */
} KernelCost;

/* One KERNEL action of phase ph (tile shapes are the same at every
 * device and step), eb bytes per element; p NULL: the FLOPs and bytes
 * only. */
KernelCost cost_phase_kernel(const Schedule *s, const PhaseSched *ph, const Profile *p, int eb);

/* The fused kernel of group g as one pass (p NULL: FLOPs and bytes). */
KernelCost cost_fused_kernel(const Schedule *s, const FuseGroup *g, const Profile *p, int eb);

/* How the program runs each phase's kernel-side actions. */
typedef struct CostProgram {
    const FusePlan *fusion; /* NULL: every kernel alone (--no-fuse) */
    int applied;            /* the schedule's actions were rewritten for it */
    double *kernel_us;      /* per phase: the price of its KERNEL action */
    double *own_flops;      /* per phase: the FLOPs of its own kernel, per device */
    /* Per phase: its KERNEL actions after the first on a rank are members
     * of the group whose price the first one paid (a rewritten group's
     * first phase). */
    unsigned char *kernel_once;
    unsigned char *no_alloc; /* its ALLOCs are not made by the program */
    unsigned char *no_add;   /* its ADDs are done in the kernel */
} CostProgram;

/* The program of s: fuse 0 prices every kernel alone (what a --no-fuse
 * build runs). */
void cost_program(const Schedule *s, const Profile *p, int eb, int fuse, Arena *arena,
                  CostProgram *out);

#endif
