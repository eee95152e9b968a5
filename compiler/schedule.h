/*
 * schedule.h — lower a model's partitioned operator instances into the
 * three training phases, per device and per step.
 *
 * The phases pass (phases.h) derives from the forward einsum
 * Y = sum X * W, per input, its gradient einsum (backward: activation
 * inputs; gradient: weights); this pass binds their operands to storage
 * tensors. All phases use the instance's (device, t) -> slice map (the
 * partition pass's slice tables); backward and
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
 * actions, so they are exact for the emitted program. For `check`, which
 * reads only the predictions, schedule_check_from interprets each action
 * as it is made and keeps no list.
 */
#ifndef PRIMEC_SCHEDULE_H
#define PRIMEC_SCHEDULE_H

#include "diag.h"
#include "ir.h"
#include "partition.h"
#include "phases.h" /* PhaseKind, phase_name, and the phase list bound here */
#include "prime_sched.h"

#define SCHED_MAX_OPERANDS PHASE_MAX_OPERANDS

/* A storage tensor: one model tensor (or its gradient) in one tiling.
 * A tensor that two instances tile differently has two storage tensors;
 * the schedule converts between them where needed. */
typedef struct SchedTensor {
    const char *name; /* "x", "dw"; "y.1" for a second tiling of y */
    int model_tensor; /* index into Model.tensors */
    int is_grad;
    int ndims;
    long shape[IR_MAX_DIMS];
    long nslices[IR_MAX_DIMS];
    long extent[IR_MAX_DIMS];
    long tile_elems;
    long ntiles;
    int is_weight;             /* a weight or the gradient of one */
    int max_slots;             /* slots any device uses at once, over the whole run */
    int fill_phase;            /* index of the phase after which the driver fills it, or -1 */
    int check;                 /* compared with the dense reference at the end */
    int combine;               /* PrimeCombine: how partial values of it combine (the value
                                * of a `max=` statement: by maximum, from -inf) */
    Sym dimnames[IR_MAX_DIMS]; /* operator dimension names, for reports */
} SchedTensor;

/* Which tiles of a tensor every device holds. */
typedef struct Layout {
    int ndev;
    int *count;   /* per device */
    long **tiles; /* per device, ascending tile ids */
    int **slots;  /* per device, the slot holding each tile */
    int *cap;     /* per device, the room of tiles[d] that sched_layout_add
                   * may fill in place; NULL: none (it copies first) */
} Layout;

typedef enum MoveKind {
    MOVE_SHIFT,
    MOVE_PERMUTATION,
    MOVE_EXCHANGE,
    MOVE_CONVERSION,
    MOVE_KIND_COUNT
} MoveKind;
const char *move_kind_name(MoveKind kind);

typedef struct Transfer {
    int src, dst;
    long tile;
} Transfer;

typedef struct Move {
    int tensor;
    long step; /* between step and step+1 of the phase; -1 at a boundary */
    MoveKind kind;
    long delta[IR_MAX_AXES]; /* MOVE_SHIFT: each device receives from coords + delta */
    int is_acc;              /* an accumulator (partial sum) travels */
    int ntransfers;
    Transfer *transfers;
    long bytes;         /* over all devices */
    const char *reason; /* boundaries: why the layouts differ */
    int from_tensor;    /* MOVE_CONVERSION: the storage tensor converted from */
    const char
        *pattern;      /* MOVE_CONVERSION: "local slice", "all-gather", "all-to-all", "exchange" */
    Layout have, need; /* boundaries: both layouts */
} Move;

typedef struct PhaseSched PhaseSched;

typedef struct Collective {
    int tensor;
    long tile;
    int gsize;
    int *group;               /* ranks */
    int *slots;               /* the slot of the tile on each member */
    int reduce_scatter;       /* member p ends with chunk p only (see prime_rt.h) */
    int allgather;            /* member p starts with chunk p only, ends with the tile */
    struct PhaseSched *phase; /* where it runs */
    int *action;              /* per member: index of its action in phase->actions */
    long elems;
    long bytes; /* over all members */
    /* The simulation of one replica (sched_orbit.c): the size of the group
     * on the whole mesh, whose members are the replicas' translates of
     * these (its scratch is priced by it; its bytes are added when the
     * schedule is expanded); 0: the group is this one. */
    int orbit_gsize;
    int orbit_join; /* the replica axes it is joined over (bit k: SchedOrbit.axes[k]) */
} Collective;

/* One operand of a phase: a storage tensor and, per dimension of it, the
 * operator dimension it is indexed by. */
typedef struct Operand {
    int tensor;
    Sym name; /* the name the phase's expression uses for it */
    int ndims;
    int opdims[IR_MAX_DIMS];
} Operand;

struct PhaseSched {
    PhaseKind kind;
    int inst; /* instance index; -1 for init and dy-in */
    int wrt;  /* backward/gradient: the operator input differentiated */
    int reversed;
    Operand out;
    int nin;
    Operand in[SCHED_MAX_OPERANDS];
    const Expr *expr;   /* out[...] += expr over the instance's dimensions */
    const Phase *phase; /* the phase of the phase list this binds */
    long replication;   /* how many complete copies of each output tile */
    PtrVec moves;       /* Move*: between steps */
    PtrVec boundary;    /* Move*: redistributions at the start/end */
    PtrVec collectives; /* Collective* */
    long nlocal_acc;    /* accumulators started */
    long ntravel_acc;   /* accumulator moves */
    /* Per rank action lists. */
    int *nactions;
    PrimeAction **actions;
    int *action_cap;
    int *action_hint; /* per rank: the most actions a trial run of the phase appended */
    PtrVec groups;    /* Collective* in group index order */
    int nboxes;
    PrimeBox *boxes;
    int box_cap;
    int *box_hash; /* open addressing over boxes once there are many (sched_phase_box), or NULL */
    int box_hash_cap;
    int noffsets; /* distinct kernel offset rows (global tile origins) */
    long (*offsets)[8];
    int offset_cap;
    int *offset_hash; /* open addressing over offsets */
    int offset_hash_cap;
    int *offset_dense; /* or, where the slice combinations are few: row of each */
    /* learn_needs' result per sweep order, from the order trials (the
     * machine is the same when the chosen order runs for real). */
    int need_cached[2];
    void *need_cache[2];
    long *peak;  /* predicted per rank, over this phase */
    long *start; /* predicted per rank: bytes in use as the phase starts (NULL when folded) */
};

typedef struct Schedule {
    const Model *model;
    SliceTable *slices; /* per instance */
    /* Storage tensors: room for a bound computed from the model, the first ntensors
     * initialised. */
    int ntensors;
    SchedTensor *tensors;
    PtrVec phases; /* PhaseSched*, in execution order */
    Layout *home;  /* where the driver fills a tensor */
    Layout *final; /* where a checked tensor ends */
    /* Predictions, per rank. */
    long *pred_bytes[PRIME_BYTES_KIND_COUNT];
    long *pred_peak;
    /* Built for `check` alone (schedule_check_from): every action was
     * folded into the predictions as it was made and no list is kept
     * (PhaseSched.actions[rank] NULL; nactions counts them), nor the
     * kernels' offset rows (noffsets 0), which only the program reads,
     * nor the transfers of the moves between steps (Move.transfers NULL;
     * ntransfers and bytes kept), which explain and the drawings read. */
    int folded;
    /* The kernels pass's fused groups (kernel_fuse.h), or NULL. */
    struct FusePlan *fusion;
    /* The element type of the GEMMs' A and B operands (--dtype, the cuda
     * target; GEMM_DTYPE_F32 elsewhere): bf16 and f16 take rounded
     * operands with fp32 accumulation and fp32 output (docs/cuda.md). */
    int gemm_dtype;
    /* How the analysis ran: 0, every rank was simulated; else one replica
     * of this many along the mesh axes orbit_axes (bit a: axis a) was, and
     * the rest expanded from it (sched_orbit.c; `check`, and `explain` on
     * more than SCHEDULE_SUMMARY_DEVICES devices). */
    int orbit_replicas;
    int orbit_axes;
    /* With orbit_replicas: [device] the row of its values in every phase's
     * per-rank arrays (PhaseSched.nactions, peak), which hold those of
     * one replica (its devices' ranks on the mesh without orbit_axes);
     * read them through sched_rank_row. NULL: the device's own row. */
    const int *orbit_rep;
    /* With orbit_replicas: the proof (sched_orbit.c) and the replica's
     * schedule. The layouts (home, final, a move's have and need) are the
     * replica's, on its devices (Layout.ndev the replica's device count);
     * read them through schedule_layout_tiles. */
    const struct SchedOrbit *orbit;
    const struct Schedule *orbit_red;
} Schedule;

/* The row of device d in the phases' per-rank arrays (PhaseSched.nactions,
 * peak): d, or its rank in the replica simulated (Schedule.orbit_rep). */
static inline int sched_rank_row(const Schedule *s, int d) {
    return s->orbit_rep ? s->orbit_rep[d] : d;
}

enum { GEMM_DTYPE_F32 = 0, GEMM_DTYPE_BF16 = 1, GEMM_DTYPE_F16 = 2 };

/* Builds the schedule of a model. Returns NULL after reporting
 * diagnostics. Evaluates the partitions and derives the phases itself;
 * schedule_build_from takes them from the passes that made them. */
Schedule *schedule_build(Arena *arena, DiagSink *sink, const Model *model);

/* Builds the schedule of a model from the slice table of every instance
 * (slices[i] for instance i, from partition_eval) and its phase list
 * (phases_derive). Returns NULL after reporting diagnostics. */
Schedule *schedule_build_from(Arena *arena, DiagSink *sink, const Model *model,
                              const SliceTable *const *slices, const PhaseList *phases);

/* The same schedule and predictions without the action lists, which
 * nothing but the predictions would read (`primec check`): each action is
 * folded into the predicted bytes and peaks as it is made (Schedule.folded),
 * so memory does not grow with the actions. A model of several pipeline
 * stages keeps its lists (its boundary sends are moved once they are
 * made, sched_sends.c): the schedule_build_from schedule. */
Schedule *schedule_check_from(Arena *arena, DiagSink *sink, const Model *model,
                              const SliceTable *const *slices, const PhaseList *phases);

/* Bytes that must move to build layout `need` of tiling `tt` from layout
 * `have` of tiling `tf` (same value, same device count): every piece a
 * device lacks locally. -1 when some piece is held nowhere. The largest
 * amount one device receives goes to *max_per_device. */
long sched_conversion_bytes(const SchedTensor *tf, const Layout *have, const SchedTensor *tt,
                            const Layout *need, long *max_per_device);

/* The mesh axes (bit a: axis a) along which `check` of s's model
 * simulates one replica (sched_orbit.c: every DSI invariant or a
 * replica-major block split over each), with the replicas' count in
 * *replicas; 0 (and 0) when none is proven. For explain, which simulates
 * every rank. */
int schedule_replica_axes(Arena *arena, const Schedule *s, int *replicas);
/* The same schedule and predictions for `explain`: from one replica's
 * simulation where the replica axes are proven (schedule_check_from's
 * orbit) and the mesh has more than SCHEDULE_SUMMARY_DEVICES devices;
 * else every rank simulated with its lists (schedule_build_from). */
enum { SCHEDULE_SUMMARY_DEVICES = 64 };
Schedule *schedule_summary_from(Arena *arena, DiagSink *sink, const Model *model,
                                const SliceTable *const *slices, const PhaseList *phases);
/* The tiles device d holds in layout l of storage tensor t of s,
 * ascending, their count in *n: l's own, or, for a schedule expanded from
 * one replica (Schedule.orbit), the replica's layout translated to d. */
const long *schedule_layout_tiles(Arena *arena, const Schedule *s, int t, const Layout *l, int d,
                                  int *n);
/* Replication factor of a layout: the most devices holding one tile. */
int layout_replication(const Layout *l, long ntiles);
/* The most devices holding one tile of layout l of storage tensor t:
 * layout_replication's, times the replicas that hold copies
 * for a schedule expanded from one replica. */
int schedule_layout_replication(const Schedule *s, int t, const Layout *l);
/* The names of the mesh axes in mask, quoted: "'r', 'd'". */
const char *schedule_axis_names(Arena *arena, const Mesh *mesh, int mask);

/* Slice index of a tensor's dimension x in a tile id. */
long sched_tile_coord(const SchedTensor *t, long tile, int x);
/* What member pos of a collective action (ALLREDUCE, REDUCE_SCATTER or
 * ALLGATHER) over gsize members sends, in bytes (runtime/abi.c). */
uint64_t sched_collective_bytes(int op, long elems, int gsize, int pos);
/* "all-reduce", "reduce-scatter" or "all-gather". */
const char *sched_collective_kind(const Collective *c);
/* A tile id written as e.g. "(m=1, k=0)" (with the op dims of operand). */
const char *sched_tile_name(Arena *arena, const Schedule *s, int tensor, long tile);
/* The tile of an operand at a device and operator step. */
long sched_operand_tile(const Schedule *s, const PhaseSched *ph, const Operand *o, int dev, long t);
/* Whether device dev computes in a phase (0: its instance runs on another
 * pipeline stage; init and dy-in involve every device). */
int sched_device_computes(const Schedule *s, const PhaseSched *ph, int dev);
/* The operator step a phase runs at its step `step`. */
long sched_op_step(const Schedule *s, const PhaseSched *ph, long step);

#endif
