/*
 * sched_internal.h — what the files of the schedule pass share (private to
 * them; the pass's interface is schedule.h).
 *
 * The builder keeps a model of the machine: for every storage tensor and
 * device, the tiles the device holds and the slot of each. A phase is
 * simulated step by step, appending to every rank's action list what the
 * emitted program will do. Backward and gradient orders are chosen by a
 * dry run of both on a copy of the machine, which also yields each
 * phase's required initial residency. Accumulators remember which
 * reduction slices they received, which is how double counting and
 * missed slices are found.
 *
 * The files, in the order a phase uses them:
 *   sched_machine.c     stores, slots and the actions appended per rank
 *   sched_layout.c      tile ids and layouts (snapshots of the stores)
 *   sched_moves.c       sources of tiles, redistribution, conversion
 *   sched_accumulate.c  accumulators, coverage, all-reduces
 *   sched_simulate.c    one phase step by step
 *   sched_trials.c      residency trials, and their reuse
 *   sched_boundary.c    inputs, epilogue, landing, sweep order, freeing
 *   sched_sends.c       stage boundary sends posted where the value is made
 *   sched_predict.c     predicted bytes and peaks (from the lists, or folded
 *                       as the actions are made)
 *   sched_orbit.c       `check` from one replica's simulation, where a
 *                       replica axis is proven
 *   sched_transpose.c   a schedule with the axes of a square mesh swapped
 *   schedule.c          the driver: storage tensors, operands, the phase loop
 */
#ifndef PRIMEC_SCHED_INTERNAL_H
#define PRIMEC_SCHED_INTERNAL_H

#include "schedule.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 1024
/* Per tensor and device: one word of the ring the slots are handed out
 * from (sched_slot_alloc): the ring's size in the high half, the next slot
 * to try in the low half; then a bitmap of the slots in use (the ring word
 * first, so that a slot's allocation and its free, below slot 64, touch
 * one cache line of the device's words, not two). Copies, saves and
 * restores of the machine carry both. */
#define SLOT_BITMAP_WORDS (MAX_SLOTS / 64)
#define SLOT_WORDS (SLOT_BITMAP_WORDS + 1)

typedef struct Held {
    long tile;
    int slot;
} Held;

/* An index of the tiles in a list (a store's held tiles, a device's
 * retired accumulators): tile -> position, open addressing with linear
 * probing. `dup` is set when a tile was inserted twice; the index is then
 * not used (lookups scan the list, which returns the first position) until
 * the list is cleared. */
typedef struct TileIndexEntry {
    long tile; /* -1: empty */
    int pos;
} TileIndexEntry;

typedef struct TileIndex {
    TileIndexEntry *e;
    int cap; /* a power of two, or 0 */
    int n;
    int dup;
} TileIndex;

/* Lists shorter than this are scanned and carry no index. */
#define TILE_INDEX_MIN 12

void tile_index_clear(TileIndex *ix);
void tile_index_insert(Arena *arena, TileIndex *ix, long tile, int pos);
void tile_index_erase(TileIndex *ix, long tile);
void tile_index_move(TileIndex *ix, long tile, int pos);
int tile_index_find(const TileIndex *ix, long tile);

/* The tiles one device holds of one storage tensor. A store of the
 * machine also counts, per tile, how many devices hold it (holders, shared
 * by the tensor's stores); the copies a trial run saves do not. */
typedef struct Store {
    Held *items;
    int count;
    int cap;
    int indexed;  /* ix is kept (count reached TILE_INDEX_MIN) */
    TileIndex ix; /* tile -> position in items */
    int *holders; /* [tile]: devices holding it; NULL in copies */
    long nholders;
} Store;

typedef struct Acc {
    long tile;
    int slot;
    int dev;
    unsigned char *red; /* times each reduction slice was added */
    long *red_step;     /* the step that first added it */
    long *set;          /* the slices with red[r] > 0, nset of them (room for all) */
    long nset;
    long first_dup; /* first reduction slice added twice, or -1 */
    long dup_steps[2];
    long nred; /* the room of red, red_step and set */
} Acc;

/* Spare accumulators of one reduction size (Builder.acc_spare). */
typedef struct AccSpare {
    long nred;
    PtrVec accs; /* Acc* */
} AccSpare;

typedef struct Machine {
    int ntensors;
    int ndev;
    Store **stores;       /* [tensor][dev]; room for Builder.tensor_cap tensors */
    uint64_t **slot_used; /* [tensor]: bitmap [dev * SLOT_WORDS + slot / 64], then the ring */
} Machine;

/* Moves of trial runs are discarded: their reasons are not written out. */
#define TRIAL_REASON "(trial run)"

/* A growable list of ints in the arena. */
typedef struct IntList {
    int *items;
    int count, cap;
} IntList;

static inline void intlist_push(Arena *arena, IntList *l, int v) {
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        int *items = ARENA_ARRAY_UNINIT(arena, int, cap);
        if (l->count)
            memcpy(items, l->items, sizeof(int) * (size_t)l->count);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = v;
}

/* The fold of one rank's actions into its predictions (sched_predict.c):
 * the bytes in use, the peak so far, the phase folded and its peak, and
 * the temporary buffers its transfers hold until the next wait. */
typedef struct PredictRank {
    long cur, peak, phase_peak, temps;
    int phase;
    PtrVec kept; /* long[2]: tag, bytes of the box sends kept past their phase */
    Arena *arena;
} PredictRank;

/* A replica axis of the mesh and what the proof found on it. */
/* The replica axes of a mesh and what the proof found on them
 * (sched_orbit.c). */
typedef struct SchedOrbit {
    int n;                  /* replica axes */
    int axes[IR_MAX_AXES];  /* mesh axes, ascending */
    int sizes[IR_MAX_AXES]; /* their sizes */
    unsigned all;           /* (1 << n) - 1 */
    int leading;            /* the axes are the mesh's first n */
    int R;                  /* replicas: the product of the sizes */
    int ndev, ndev_red;
    int *rho_of;  /* [device]: its replica (mixed radix over the axes) */
    int *rep_of;  /* [device]: its rank on the mesh without the axes */
    int *full_of; /* [rho * ndev_red + reduced rank]: the device */
    /* The replica axis (1 + its index k, 0: none) that splits
     * [model tensor * IR_MAX_DIMS + dim] and [instance * IR_MAX_DIMS + op
     * dim]; the axes that split some dimension of a model tensor (bit k). */
    unsigned char *tensor_dim_split, *dim_split, *tensor_split;
} SchedOrbit;

typedef struct Builder {
    int tensor_cap; /* storage tensors the per-tensor arrays have room for */
    Arena *arena;
    /* Memory that lives no longer than the phase being scheduled: a run's
     * step state and accumulator lists, the saves of the trial runs, the
     * coverage check's tables, the collectives of a trial run. Reset after
     * every phase (run_phases in schedule.c), so a phase's trials reuse the
     * same memory instead of leaving it behind in the arena. */
    Arena *scratch;
    DiagSink *sink;
    Schedule *s;
    const SliceTable *st;
    int ndev;
    int staged; /* Model.nstages is set: devices may sit out a phase (sched_idle) */
    long steps;
    int dry; /* a trial run: no diagnostics, actions discarded */
    /* The simulation of one replica (sched_orbit.c), or NULL; set when a
     * choice made could differ on the whole mesh. */
    const struct SchedOrbit *orbit;
    int orbit_broken;
    int failed;
    int out_of_slots; /* a device needed more than MAX_SLOTS live tiles of a tensor:
                       * reported once, and sticky through trial runs */
    int next_tag;
    PhaseSched *ph;
    const Instance *inst; /* of the current phase */
    int nsums;            /* storage tensors made for summing gradients (names) */
    /* Partial sums of a gradient that more contributions will be added
     * to are all-reduced once, after the last: sched_finish_accumulators puts
     * the phase's all-reduces in `deferred` instead of emitting them, and
     * pending[model tensor] holds those of the gradient summed so far. */
    int defer;
    PtrVec deferred;
    PtrVec *pending;
    /* The collectives that last produced each storage tensor's tiles and
     * the phase index they ran in (a conversion right after may turn an
     * all-reduce into a reduce-scatter). */
    PtrVec *reduced;
    int *reduced_phase;
    int phase_index; /* of the phase being built */
    /* The layout in which a forward phase first consumed each storage
     * tensor: where that value's gradient is wanted next (the producer's
     * backward phase reads it there in an aligned plan). */
    Layout *consumed;
    /* Liveness, from the bound phases (sched_liveness_init): the last
     * phase that reads each storage tensor (-1: none), and each value
     * (model tensor * 2 + is_grad) in any tiling; each value's storage
     * tensors in id order (value_first, then value_next). */
    int nlive; /* storage tensors when it was computed; later ones are never read */
    int *last_read;
    int *value_last_read;
    int *value_first, *value_end, *value_next;
    /* The last backward or gradient phase contributing to the gradient
     * of each model tensor, -1: none. */
    int *last_contribution;
    /* What sched_free_dead looks at after phase p: the storage tensors
     * last read there (read_last_at[p]), those that allocated a slot
     * since its last call (gained), and those it kept though no later
     * phase reads them directly (kept). A tensor outside these holds no
     * tile it could free. */
    IntList *read_last_at;
    IntList gained, kept;
    IntList look;               /* sched_free_dead's list of tensors to look at (scratch) */
    unsigned char *gained_flag; /* [storage tensor] */
    int *seen_at;               /* [storage tensor]: phase index + 1 of its last look */
    /* Accumulators of finished runs, reused by later runs (a phase is
     * simulated several times: residency and order trials): AccSpare*,
     * one per reduction size. */
    PtrVec acc_spare;
    /* The slice table of the current phase's instance ordered by step,
     * then device ([(dim * steps + t) * ndev + dev]: the simulation walks
     * the devices at one step), made when a phase enters whose table is
     * not the one made last (by_step_of: its slices; layer copies that
     * share a table share this one), in room kept for the next. */
    const long *slice_t;
    int slice_t_inst;
    long *by_step;
    size_t by_step_cap;
    const long *by_step_of;
    int by_step_dims;
    long by_step_steps;
    /* Mesh coordinates of every device ([dev * naxes + axis]). */
    long *coords;
    /* Room for the last-use tables of a run, per operand (see
     * sched_simulate.c), kept for the next run. */
    void *last_use_room[SCHED_MAX_OPERANDS];
    size_t last_use_cap[SCHED_MAX_OPERANDS];
    /* And per device, whether it uses every tile of the table once. */
    unsigned char *last_once_room[SCHED_MAX_OPERANDS];
    size_t last_once_cap[SCHED_MAX_OPERANDS];
    /* A schedule for `check` alone (Schedule.folded): per rank, the fold
     * of its actions so far, and its last action (in phase pending_ph),
     * folded at its next (sched_fold_act). */
    PredictRank *pred;
    PrimeAction *pending_act;
    PhaseSched **pending_ph;
    /* The residency trials' results kept for reuse (sched_learn_needs):
     * NeedMemo*, the latest per phase shape and sweep order. reuse_off
     * (PRIMEC_NO_TRIAL_REUSE set) runs every trial; need_memo_hits counts
     * the phases that took a memo (PRIMEC_TRIAL_REUSE_STATS prints it). */
    PtrVec need_memo;
    int reuse_off, need_memo_hits;
    /* Per storage tensor, initialised when its id is handed out (below
     * this point the Builder starts zeroed). */
    Machine m;
    /* Filled by a run: tiles a device needed that nobody held. */
    Layout *need;
    int *track_need;
    int need_late; /* a run needed such a tile after its first step */
    /* Per device: actions a trial run appended (discarded, counted so
     * that the real run's lists start with room for them). */
    int *dry_count;
} Builder;

/* Whether device dev sits out the current phase: its instance runs on
 * another pipeline stage (Model.nstages). */
static inline int sched_idle(const Builder *b, int dev) {
    if (!b->staged)
        return 0;
    const Model *m = b->s->model;
    if (!b->ph || b->ph->inst < 0)
        return 0;
    return !instance_on_device(m, &m->instances[b->ph->inst],
                               b->coords + (long)dev * m->mesh.naxes);
}

/* Where a run puts what only the real run keeps (a move, the layout a
 * move records): a trial run's is dropped with the phase's scratch. */
static inline Arena *sched_run_arena(const Builder *b) {
    return b->dry ? b->scratch : b->arena;
}

static inline Store *store_of(Builder *b, int tensor, int dev) {
    return &b->m.stores[tensor][dev];
}

typedef struct AccState {
    Acc **active;   /* per device: the accumulator the device works on */
    Acc **incoming; /* per device: an accumulator arriving for the next step */
    int *incoming_slot;
    int *sent_slot;        /* per device: an accumulator being sent, freed at the next wait */
    PtrVec *retired;       /* per device: Acc* kept on the device */
    TileIndex *retired_ix; /* per device: tile -> position in retired, once it is long */
    long nred;
    int red_dims[IR_MAX_DIMS];
    int nred_dims;
    unsigned char *claimed; /* per device, while choosing travel sources */
    long *next_tile;        /* per device */
    long step;              /* the phase step being simulated */
    PtrVec pool;            /* Acc* merged into another: reused by sched_acc_new */
} AccState;

/* The last phase that reads storage tensor t, -1: none. */
static inline int last_read_of(const Builder *b, int t) {
    return t < b->nlive ? b->last_read[t] : -1;
}

/* Can device src serve tile `tile` of `tensor` to device dst? */
typedef int (*CandidateFn)(Builder *b, int tensor, int src, int dst, long tile, void *ctx);

/* Which devices sched_choose_sources looks at for a tile (all of them,
 * in ascending order, when NULL): `held`, when the candidate function
 * passes only devices whose store holds the tile (the scan ends after the
 * machine's holder count of them); or, where `first` is set, the list
 * first[tile], next[device], ... (ascending, -1 ends it) of every device
 * that may pass, tiles below ntiles. */
typedef struct SourceScan {
    int held;
    const int *first, *next;
    long ntiles;
} SourceScan;

/* Tile of an operand at device dev and operator step t (not phase step). */
static inline long tile_at(const Builder *b, const Operand *o, int dev, long t) {
    if (!b->slice_t || b->slice_t_inst != b->ph->inst)
        return sched_operand_tile(b->s, b->ph, o, dev, t);
    const SchedTensor *ts = &b->s->tensors[o->tensor];
    const long steps = b->st->steps, ndev = b->ndev;
    long id = 0;
    for (int x = 0; x < o->ndims; ++x)
        id = id * ts->nslices[x] + b->slice_t[((long)o->opdims[x] * steps + t) * ndev + dev];
    return id;
}

/* Slice index of operator dimension dim at (dev, t) of the current phase's
 * instance (slice_at on b->st). */
static inline long slice_fast(const Builder *b, int dim, int dev, long t) {
    if (!b->slice_t)
        return slice_at(b->st, dim, dev, t);
    return b->slice_t[((long)dim * b->st->steps + t) * b->ndev + dev];
}

static inline long op_step(const Builder *b, const PhaseSched *ph, long s) {
    return sched_op_step(b->s, ph, s);
}

/* The stores of a few storage tensors, saved around a trial run. */
typedef struct MachineSave {
    int n;
    int tensors[SCHED_MAX_OPERANDS + 1];
    Store *stores[SCHED_MAX_OPERANDS + 1];
    uint64_t *slot_used[SCHED_MAX_OPERANDS + 1];
} MachineSave;

/* sched_machine.c: the machine model (stores and slots) and the actions every rank runs. */
int sched_store_find(const Store *st, long tile);
void sched_store_add(Builder *b, Store *st, long tile, int slot);
void sched_store_remove(Store *st, int index);
void sched_store_clear(Store *st);
/* Whether some device holds `tile` of the tensor whose store st is. */
static inline int sched_store_held_anywhere(const Store *st, long tile) {
    return tile >= 0 && tile < st->nholders && st->holders[tile] > 0;
}
void sched_machine_init(Builder *b);
/* Room in m for Builder.tensor_cap tensors (contents unset). */
void sched_machine_room(Builder *b, Machine *m);
void sched_machine_copy(Builder *b, Machine *dst, const Machine *src);
void sched_machine_save(Builder *b, MachineSave *sv, const int *tensors, int n);
void sched_machine_restore(Builder *b, const MachineSave *sv);
#ifndef NDEBUG
void sched_machine_check_untouched(Builder *b, const Machine *whole, const int *touched, int n);
/* For the checks of a phase's trials: a copy of the whole machine in the
 * phase's scratch arena (Builder.scratch), when the machine has at most
 * SCHED_DEBUG_CHECK_TENSORS tensors (returns 1); else 0. */
int sched_machine_snapshot(Builder *b, Machine *whole);
/* Debug builds check each trial run against a copy of the whole machine,
 * and liveness against a scan of every tensor after each phase: both are
 * quadratic in the model's size (a chain of 1,000 instances took 12 GB
 * under ASan), so they run on machines of at most this many storage
 * tensors, which every example and test model is. */
#define SCHED_DEBUG_CHECK_TENSORS 512
#endif
PrimeAction *sched_act(Builder *b, int dev, int op);
int sched_slot_alloc(Builder *b, int tensor, int dev);
int sched_emit_alloc(Builder *b, int tensor, int dev);
void sched_emit_free(Builder *b, int tensor, int dev, int slot);
void sched_emit_send(Builder *b, int tensor, int dev, int slot, int peer, int tag, int kind);
void sched_emit_recv(Builder *b, int tensor, int dev, int slot, int peer, int tag);
void sched_emit_wait_all(Builder *b);

/* sched_layout.c: tiles and layouts. */
Layout sched_layout_of(Builder *b, int tensor);
Layout sched_layout_empty(Builder *b);
int sched_layout_has(const Layout *l, int dev, long tile);
void sched_layout_add(Builder *b, Layout *l, int dev, long tile);

/* sched_moves.c: where a tile comes from, redistribution and conversion between tilings. */
MoveKind sched_choose_sources(Builder *b, int tensor, int nrecv, const int *dst, const long *tile,
                              CandidateFn cand, void *ctx, int exclusive, const SourceScan *sc,
                              int *src, long *delta_out);
int sched_holds_tile(Builder *b, int tensor, int src, int dst, long tile, void *ctx);
Move *sched_new_move(Builder *b, int tensor, long step, MoveKind kind, const long *delta, int n,
                     const int *dst, const int *src, const long *tile);
long sched_redistribute(Builder *b, PhaseSched *ph, int tensor, const Layout *target, int drop,
                        const char *reason);
int sched_value_holder(Builder *b, int tensor);
int sched_holds_any(Builder *b, int tensor);
long sched_convert(Builder *b, PhaseSched *ph, int from, int to, const Layout *target,
                   const char *reason);
int sched_add_box(Builder *b, PhaseSched *ph, const PrimeBox *box);
/* The index of box in ph's boxes, added there if new (sched_add_box
 * outside a trial run; sched_sends.c for a box send it moves). */
int sched_phase_box(Arena *arena, PhaseSched *ph, const PrimeBox *box);

/* sched_gather.c: a conversion that is an all-gather, as ring collectives;
 * 0 when it is not one (nothing emitted), else 1 with the bytes sent. */
int sched_convert_allgather(Builder *b, PhaseSched *ph, int from, int to, const Layout *target,
                            const char *reason, long *bytes);

/* sched_accumulate.c: partial sums, coverage and all-reduces. */
long sched_red_id(const Builder *b, const AccState *as, int dev, long t);
Acc *sched_acc_new(Builder *b, AccState *as, int dev, long tile, int slot);
void sched_acc_add(Acc *a, long r, long step);
void sched_acc_merge(Acc *into, Acc *from);
void sched_acc_release(Builder *b, AccState *as);
int sched_acc_available(Builder *b, int tensor, int src, int dst, long tile, void *ctx);
int sched_retired_find(const AccState *as, int dev, long tile);
void sched_retired_push(Builder *b, AccState *as, int dev, Acc *a);
Acc *sched_retired_take(AccState *as, int dev, int index);
void sched_emit_collective(Builder *b, PhaseSched *ph, Collective *col);
void sched_finish_accumulators(Builder *b, PhaseSched *ph, AccState *as);

/* sched_simulate.c: one phase, step by step. */
void sched_run_phase(Builder *b, PhaseSched *ph);
void sched_enter_phase(Builder *b, PhaseSched *ph);
int sched_phase_inputs(const PhaseSched *ph, int *tensors);
void sched_strict_check(Builder *b, PhaseSched *ph, int first_boundary);

/* sched_trials.c: the residency trials of a phase. */
void sched_learn_needs(Builder *b, PhaseSched *ph);

/* sched_boundary.c: phase boundaries, sweep order and freeing. */
long sched_phase_exec(Builder *b, PhaseSched *ph);
int sched_more_contributions(const Builder *b, int p, int mt);
void sched_choose_order(Builder *b, PhaseSched *ph, int p, const int *grad_storage);
void sched_liveness_init(Builder *b);
void sched_value_link(Builder *b, int tensor);
void sched_free_dead(Builder *b, int p);
long sched_phase_finish(Builder *b, PhaseSched *ph, int p, const int *grad_storage);

/* sched_sends.c: the boundary sends between pipeline stages moved to the
 * phase that makes their value (KEEP there, WAIT_KEPT where they were). */
void sched_post_sends_early(Schedule *s, Arena *arena);

/* sched_predict.c: bytes and peak memory from the action lists. */
void sched_predict(Schedule *s, Arena *arena);
/* The same after the actions of the phases p with rewritten[p] changed
 * (by the kernels pass), by folding those phases alone: the others' peaks
 * move by the difference in the bytes in use that the rewritten phases
 * leave. The rewrite must move no byte between ranks and keep no buffer
 * past a phase (no sends, collectives, KEEP or WAIT_KEPT in a rewritten
 * phase); otherwise, and for a folded schedule, it is sched_predict. */
void sched_predict_again(Schedule *s, Arena *arena, const unsigned char *rewritten);
/* The same fold on each action as sched_act appends it, keeping no list:
 * begin (before the first action), the action (sched_act's), end (after
 * the last). */
void sched_fold_begin(Builder *b);
PrimeAction *sched_fold_act(Builder *b, int dev, int op);
void sched_fold_end(Builder *b);
/* Makes the all-reduces of col reduce-scatters: their actions, or their
 * folded bytes. */
void sched_make_reduce_scatter(Builder *b, Collective *col);

/* schedule.c (the driver): storage tensors. */
int sched_storage_like(Builder *b, int like);
int sched_storage_for(Builder *b, int mt, int is_grad, int inst, const OpTensor *ot, int fresh);
/* The storage tensor sched_storage_for(..., fresh = 0) returns, without
 * making one: -1 when no phase reads or writes that tiling. */
int sched_storage_find(const Builder *b, int mt, int is_grad, int inst, const OpTensor *ot);

#endif
