/*
 * kernel_fuse.h — fusion across instances: chains of compute phases that
 * run on the same devices, one step each, with no communication between
 * them and tiles of one layout, computed by one kernel per group.
 *
 * A member is a phase whose kernel IR is one loop node over rows (its
 * outer loops) and one inner loop: elementwise over the inner dimension,
 * or a reduction over it. Every member of a group has the same row
 * dimensions (by name, with the same tile extents and the same tile
 * origins on every device) and the same inner dimension, so that each
 * member reads, for a row, only that row of the members before it: the
 * fused kernel runs the members' bodies one after the other for each row
 * while the row is in cache.
 *
 * Two more kinds of member, in a group of one row dimension: a column
 * sum (a sum over the rows, of inputs from outside the group, into an
 * output indexed by the inner dimension: a norm's gain and shift
 * gradients), whose double accumulators the row loop carries; and a
 * contribution added to a tile from outside the group (ALLOC t2, KERNEL
 * into t2, ADD t1 += t2, FREE t2, as kernel_accum.h folds it), which
 * accumulates into t1's row instead. Both add in the unfused order, so
 * the fused kernel's results are those of the unfused phases, bit for
 * bit.
 *
 * A phase that runs no kernel (a copy gone, kernel_copy.h: only steps,
 * waits and frees) between two members leaves the group open; its frees
 * run after the group's kernel, and it frees no member's output.
 *
 * The group runs at its first phase: the schedule's actions are
 * rewritten (kernel_fuse_apply) so that the first phase allocates every
 * stored output of the group and holds one KERNEL action per member
 * (run as one call, PrimePhase.fused), and the later phases keep only
 * their frees. A member's output that the group also frees (read by no
 * phase after it) is not stored: it is a row on the kernel's stack, and
 * an ADD of two such contributions is a sum of rows in the kernel. Rows
 * are of any length; where a group's rows would pass KFUSE_ROW_BYTES of
 * the C kernel's stack, members' rows are stored instead (the CUDA
 * printing holds a row longer than 4096 in a block, kernel_cuda.c). The
 * predictions are computed again from the rewritten actions.
 */
#ifndef PRIMEC_KERNEL_FUSE_H
#define PRIMEC_KERNEL_FUSE_H

#include "arena.h"
#include "kernel_ir.h"
#include "printer.h"
#include "schedule.h"
#include "source.h"

#define KFUSE_MAX 16 /* members of one group */
/* The bytes of rows a group's C kernel keeps on its stack, at most: an
 * eighth of the 8 MiB a thread's stack has by default (the runtime's
 * compute threads and a process's main thread). Past it, members' rows
 * are stored as tiles instead (kernel_fuse.c, fit_rows). */
#define KFUSE_ROW_BYTES (1024L * 1024L)

/* An ADD the group folds: after member `after`, member dst's output
 * row += member src's. */
typedef struct FuseAdd {
    int after, dst, src;
} FuseAdd;

typedef struct FuseGroup {
    int nmembers;
    int phase[KFUSE_MAX];  /* the members' phase indices, in execution order */
    int stored[KFUSE_MAX]; /* 1: the output is a tile; 0: a row of the kernel */
    /* from[j][i]: the member whose output is input i of member j, or -1. */
    int from[KFUSE_MAX][SCHED_MAX_OPERANDS];
    /* into[j]: the tensor, from outside the group, that member j's value
     * is added to (its ADD folded: the member accumulates into that
     * tile's row and has no tile of its own), or -1. */
    int into[KFUSE_MAX];
    /* cols[j]: member j sums over the group's rows (a column sum: its
     * output is indexed by the inner dimension only), in double
     * accumulators that the row loop carries, stored once after it. */
    int cols[KFUSE_MAX];
    int nadds;
    FuseAdd adds[KFUSE_MAX];
    int inner;                    /* the inner dimension (an operator dimension of every member) */
    const char *where[KFUSE_MAX]; /* each member's instance in the .prime source: FILE:LINE:COL */
} FuseGroup;

typedef struct FusePlan {
    int ngroups;
    FuseGroup *groups;
    int *group_of;  /* per phase: the group it is the first member of, or -1 */
    int *member_of; /* per phase: the group it belongs to, or -1 */
    int applied;    /* the schedule's actions were rewritten */
    /* The contributions computed into the tile they are added to
     * (kernel_accum.h), or NULL. */
    struct AccumPlan *accum;
    /* The copies gone before the groups were found (kernel_copy.h), or
     * NULL. */
    struct CopyPlan *copies;
} FusePlan;

/* The groups of a schedule (no change to it); sources name the members'
 * positions (may be NULL). */
FusePlan *kernel_fuse_plan(Arena *arena, const Schedule *s, const SourceMap *sources);

/* Rewrites the schedule's actions for plan's groups and predicts its
 * bytes and peaks again (those of the rewritten phases, and the peaks
 * after them moved by the bytes they no longer hold). */
void kernel_fuse_apply(Arena *arena, Schedule *s, FusePlan *plan);

/* The KERNEL action's kind in a fused phase: bit 0, the output is no
 * tile; bit 1 + i, input i is none. */
#define KFUSE_NO_OUT 1
#define KFUSE_NO_IN(i) (2 << (i))
/* ... and bit 30: the kernel adds to its output tile, which it reads
 * (runtime/prime_sched.h, PRIME_FUSED_ACCUM). */
#define KFUSE_ACCUM (1 << 30)

/* --dump-after=kernels: the groups. */
void kernel_fuse_dump(const Schedule *s, const FusePlan *plan, FILE *out);

/* The kernels of a group's members (kernel_build over their tiles), in
 * one malloc'ed array the caller frees. */
Kernel *kernel_fuse_members(const Schedule *s, const FuseGroup *g);

/* The group as a comment: its members, operators and positions. */
void kernel_fuse_comment(const Schedule *s, const FuseGroup *g, Printer *p);

#endif
