/*
 * schedule.h — lower one partitioned operator instance into the three
 * training phases, per device and per step.
 *
 * From the forward einsum Y = sum X * W the pass derives, per input, its
 * gradient einsum (backward: activation inputs; gradient: weights). All
 * phases use the instance's (device, t) -> slice map; backward and
 * gradient may sweep t in forward or reversed order, and the pass picks
 * the order with the least redistribution at the phase boundaries.
 *
 * For each phase it simulates the machine: which tiles each device holds
 * (residency), which tile must arrive between steps and from where
 * (classified as a uniform ring shift along a mesh direction, a
 * permutation, or a general exchange), how partial sums combine (local
 * accumulation, an accumulator that travels, or an all-reduce over the
 * devices that hold partial sums), and whether every reduction slice is
 * summed exactly once into every output tile (coverage). At every phase
 * boundary it compares the layout a tensor has with the layout the next
 * phase needs (or that a gradient must land in: dX in X's layout, dW in
 * W's, and W back home after backward) and inserts a costed
 * redistribution where they differ (an error under `strict`).
 *
 * The result is both the analysis that explain prints and, for every
 * rank, the action list (prime_sched.h) that the emitted program runs;
 * predicted bytes and peak memory come from interpreting those same
 * actions, so they are exact for the emitted program.
 */
#ifndef PRIMEC_SCHEDULE_H
#define PRIMEC_SCHEDULE_H

#include "diag.h"
#include "ir.h"
#include "partition.h"
#include "prime_sched.h"

typedef enum PhaseKind { PHASE_INIT, PHASE_FWD, PHASE_DYIN, PHASE_BWD, PHASE_GRAD, PHASE_COUNT } PhaseKind;
const char *phase_name(PhaseKind kind);

#define SCHED_MAX_TENSORS (2 * (IR_MAX_INPUTS + 1))

typedef struct SchedTensor {
    const char *name; /* "x", "w", "y"; gradients "dx", "dw", "dy" */
    int ndims;
    int dims[IR_MAX_DIMS]; /* operator dimension indices */
    long nslices[IR_MAX_DIMS];
    long extent[IR_MAX_DIMS];
    long tile_elems;
    long ntiles;
    int grad_of;   /* primal tensor id for gradients, else -1 */
    int is_weight; /* a weight or the gradient of one */
    int max_slots; /* slots any device uses at once, over the whole run */
} SchedTensor;

/* Which tiles of a tensor every device holds. */
typedef struct Layout {
    int ndev;
    int *count;   /* per device */
    long **tiles; /* per device, ascending tile ids */
    int **slots;  /* per device, the slot holding each tile */
} Layout;

typedef enum MoveKind { MOVE_SHIFT, MOVE_PERMUTATION, MOVE_EXCHANGE, MOVE_KIND_COUNT } MoveKind;
const char *move_kind_name(MoveKind kind);

typedef struct Transfer {
    int src, dst;
    long tile;
} Transfer;

typedef struct Move {
    int tensor;
    long step;      /* between step and step+1 of the phase; -1 at a boundary */
    MoveKind kind;
    long delta[IR_MAX_AXES]; /* MOVE_SHIFT: each device receives from coords + delta */
    int is_acc;     /* an accumulator (partial sum) travels */
    int ntransfers;
    Transfer *transfers;
    long bytes;     /* over all devices */
    const char *reason; /* boundaries: why the layouts differ */
    Layout have, need;  /* boundaries: both layouts */
} Move;

typedef struct Collective {
    int tensor;
    long tile;
    int gsize;
    int *group; /* ranks */
    long elems;
    long bytes; /* over all members */
} Collective;

typedef struct PhaseSched {
    PhaseKind kind;
    int present;
    int reversed;
    int out;
    int nin;
    int in[IR_MAX_INPUTS];
    long replication; /* how many complete copies of each output tile */
    PtrVec moves;       /* Move*: between steps */
    PtrVec boundary;    /* Move*: redistributions at the start/end */
    PtrVec collectives; /* Collective* */
    long nlocal_acc;    /* tiles that only accumulated locally */
    long ntravel_acc;   /* accumulator moves */
    /* Per rank action lists. */
    int *nactions;
    PrimeAction **actions;
    int *action_cap;
    int ngroups;
    PtrVec groups; /* Collective* in group index order */
} PhaseSched;

typedef struct Prediction {
    long bytes[PRIME_BYTES_KIND_COUNT]; /* per rank, filled per device below */
} Prediction;

typedef struct Schedule {
    const Model *model;
    const Instance *inst;
    SliceTable slices;
    int ntensors;
    SchedTensor tensors[SCHED_MAX_TENSORS];
    int t_out;               /* forward output */
    int t_dout;              /* its gradient (input of backward) */
    int t_grad[IR_MAX_INPUTS]; /* gradient tensor of input i */
    PhaseSched phases[PHASE_COUNT];
    /* Layouts the check harness uses: inputs at start, dY as handed in,
     * results at the end. */
    Layout home[SCHED_MAX_TENSORS];  /* inputs and weights at init; dY at dyin */
    Layout final[SCHED_MAX_TENSORS]; /* after the last phase */
    /* Predictions, per rank. */
    long *pred_bytes[PRIME_BYTES_KIND_COUNT];
    long *pred_peak;
    long *phase_peak[PHASE_COUNT];
} Schedule;

/* Builds the schedule of one instance. Returns NULL after reporting
 * diagnostics. */
Schedule *schedule_build(Arena *arena, DiagSink *sink, const Model *model, const Instance *inst);

/* Slice index of tensor tensor_id's dimension x in a tile id. */
long sched_tile_coord(const SchedTensor *t, long tile, int x);
/* A tile id written as e.g. "(m=1, k=0)". */
const char *sched_tile_name(Arena *arena, const Schedule *s, int tensor, long tile);

#endif
