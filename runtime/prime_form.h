/*
 * prime_form.h — rank-parametric schedules: one action list per phase
 * for every rank, with the fields that differ between ranks written as
 * functions of the rank's mesh coordinates.
 *
 * In a regular partition (affine, modular DSIs) every rank runs the same
 * sequence of actions; only peers, tile origins and collective groups
 * depend on where the rank sits in the mesh. primec emits such a phase
 * once, as a list of PrimeActionForm, and every rank expands it into its
 * own concrete action list at run time (prime_phase_expand). The
 * compiler expands the same forms with the same function for every rank
 * and compares the result with its per-rank schedule before it emits
 * them, so the two are equal by construction; a phase whose ranks do not
 * fit the forms is emitted as per-rank tables instead.
 *
 * Coordinates are row-major: rank = ((c0 * size1) + c1) * size2 + ...
 */
#ifndef PRIME_FORM_H
#define PRIME_FORM_H

#include "prime_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PRIME_MAX_AXES 8

typedef struct PrimeMesh {
    int naxes;
    long size[PRIME_MAX_AXES];
} PrimeMesh;

/* An integer of the rank's coordinates c and, inside a step loop, of
 * the iteration it: (base + sum_a coef[a] * c[a] + tcoef * it) mod
 * modulus, in [0, modulus). */
typedef struct PrimeAffine {
    long base;
    long modulus;
    long coef[PRIME_MAX_AXES];
    long tcoef;
} PrimeAffine;

/* How a field of a PrimeActionForm is found on a rank. */
typedef enum PrimeFieldForm {
    PRIME_FORM_CONST = 0, /* the field of `a`, on every rank */
    PRIME_FORM_SHIFT,     /* peer: the rank at (c + delta) mod size */
    PRIME_FORM_AFFINE,    /* KERNEL arg: offsets from offset_forms[index] */
    PRIME_FORM_GROUP,     /* collective arg: the group of group_forms[index] */
    PRIME_FORM_TABLE,     /* the field is table[rank] */
} PrimeFieldForm;

typedef struct PrimeActionForm {
    PrimeAction a; /* the fields every rank shares */
    int peer_form; /* CONST, SHIFT or TABLE */
    int arg_form;  /* CONST, AFFINE, GROUP or TABLE */
    int delta[PRIME_MAX_AXES];
    int index;             /* AFFINE: offset form; GROUP: group form */
    const int *peer_table; /* TABLE: per rank */
    const int *arg_table;  /* TABLE: per rank, an index into the phase's tables */
    /* When set, slot and in_slot[k] are slots[0](c) and slots[1 + k](c)
     * (a rank holding several tiles of a tensor uses them in an order
     * that rotates with its coordinates). */
    const PrimeAffine *slots;
    /* A loop: on a form with repeat > 1, this form and the next body - 1
     * run repeat times, for it = 0, 1, ...; at iteration it an action's
     * arg (STEP: the step), tag and tensors (its own and its inputs')
     * grow by it * dstep_arg, it * dstep_tag and it * dstep_tensor, and
     * its affine fields take it (PrimeAffine.tcoef). A loop over steps
     * keeps its tensors; a loop over the copies of a repeated layer
     * (the allocations of every copy's weights, say) moves by one
     * layer's tensors per iteration. Loops do not nest. */
    long repeat;
    int body;
    int dstep_arg;
    int dstep_tag;
    int dstep_tensor;
    /* Inside a loop's body: the iterations that skip this action
     * (PrimeSkip bits), so that one body covers a whole phase of steps:
     * the first step allocates what the others find, the last sends
     * nothing on. 0: every iteration. */
    int skip;
} PrimeActionForm;

/* PrimeActionForm.skip: the first iteration (it = 0), the last
 * (it = repeat - 1) and those between. */
enum { PRIME_SKIP_FIRST = 1, PRIME_SKIP_LAST = 2, PRIME_SKIP_MIDDLE = 4 };

/* Whether a form with skip bits `skip` runs at iteration it of reps. */
static inline int prime_form_runs(int skip, long it, long reps) {
    int cls = it == 0 ? PRIME_SKIP_FIRST : it == reps - 1 ? PRIME_SKIP_LAST : PRIME_SKIP_MIDDLE;
    return !(skip & cls);
}

/* A kernel's global tile origin per operator dimension:
 * offsets[x] = scale[x] * dim[x](c). */
typedef struct PrimeOffsetForm {
    int ndims;
    long scale[8];
    PrimeAffine dim[8];
} PrimeOffsetForm;

/* A collective group, in ascending rank order: with count 0, every rank
 * whose coordinates equal this rank's on the axes outside `axes` (a bit
 * mask); otherwise the line through this rank along `step`: the ranks
 * at (c + k * step) mod size for k = 0 .. count-1 (a diagonal of a
 * skewed partition, say). */
typedef struct PrimeGroupForm {
    unsigned axes;
    long count;
    int step[PRIME_MAX_AXES];
} PrimeGroupForm;

/* A phase in rank-parametric form (PrimePhase.form). */
typedef struct PrimePhaseForm {
    const PrimeMesh *mesh;
    int nforms;
    const PrimeActionForm *forms;
    const PrimeOffsetForm *offset_forms;
    const PrimeGroupForm *group_forms;
    /* When `sliced`: only the ranks whose coordinate along slice_axis is
     * slice_coord (a pipeline stage's) run the forms; every other rank
     * runs nothing in the phase. */
    int sliced;
    int slice_axis;
    long slice_coord;
    /* A sliced form's chain: the form of the ranks outside its slice
     * (the next slice's: a phase in which every pipeline stage runs its
     * own list, as each allocates its own weights). A rank runs the first
     * form of the chain whose slice holds it; NULL ends the chain, and a
     * rank in none of its slices runs nothing. */
    const struct PrimePhaseForm *next;
} PrimePhaseForm;

/* One rank's concrete view of a phase: what prime_sched_run executes. */
typedef struct PrimeRankPhase {
    const char *name;
    int nactions;
    const PrimeAction *actions;
    const PrimeKernelFn *kernels;
    const PrimeGroup *groups;
    const PrimeBox *boxes;
    const long (*offsets)[8];
    /* Owned by the view when it was expanded from a form. */
    PrimeAction *own_actions;
    PrimeGroup *own_groups;
    int *own_ranks;
    long (*own_offsets)[8];
} PrimeRankPhase;

void prime_mesh_coords(const PrimeMesh *mesh, int rank, long *coords);
int prime_mesh_rank(const PrimeMesh *mesh, const long *coords);
long prime_affine_eval(const PrimeAffine *f, const PrimeMesh *mesh, const long *coords, long it);

/* The members of group form g on the rank at coords, ascending; returns
 * their number. */
int prime_group_members(const PrimeMesh *mesh, const long *coords, const PrimeGroupForm *g,
                        int *out);

/* The view of `phase` on `rank`: its per-rank list, or its form expanded.
 * Release it with prime_rank_phase_release. */
PrimeStatus prime_rank_phase(const PrimePhase *phase, int rank, PrimeRankPhase *out);

/* The same for a copy of the phase in a repeated layer: every tensor
 * index of its actions grows by dtensor and every message tag by dtag. */
PrimeStatus prime_rank_phase_shifted(const PrimePhase *phase, int rank, int dtensor, int dtag,
                                     PrimeRankPhase *out);
void prime_rank_phase_release(PrimeRankPhase *view);

/* A layout in rank-parametric form (PrimeLayout.forms): every rank holds
 * `count` tiles; tile i sits in slot[i] and has, per tensor dimension x,
 * the slice index coord[i * ndims + x](c). */
typedef struct PrimeLayoutForm {
    int count;
    int ndims;
    const long *nslices; /* per dimension: tile id = row-major over these */
    const int *slot;
    const PrimeAffine *coord;
    /* When `sliced`: only the ranks whose coordinate along slice_axis is
     * slice_coord (a pipeline stage's) hold the tiles; every other rank
     * holds none. */
    int sliced;
    int slice_axis;
    long slice_coord;
} PrimeLayoutForm;

/* How many tiles a layout form gives a rank. */
int prime_layout_form_count(const PrimeLayoutForm *f, const PrimeMesh *mesh, int rank);
/* Tile id and slot of the i-th tile of a layout form on a rank. */
void prime_layout_form_tile(const PrimeLayoutForm *f, const PrimeMesh *mesh, int rank, int i,
                            long *tile, int *slot);

#ifdef __cplusplus
}
#endif

#endif
