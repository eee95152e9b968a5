/*
 * prime_sched.h — the schedule executor: runs a phase's per-rank action
 * list on one device.
 *
 * primec lowers each training phase of an operator instance into, for
 * every rank, a list of actions: allocate or free a tile buffer, post a
 * send or a receive, wait, run a compute kernel, add a received partial
 * sum, run a collective. The lists are compile-time data in the emitted
 * program; the kernels are emitted C functions with compile-time tile
 * shapes. Within a step, the sends and receives that bring the next
 * step's tiles are posted before the step's kernel and waited after it,
 * so transfers overlap with compute. A send may also outlive its phase:
 * KEEP hands the sends posted since the last wait to the store, and a
 * later phase's WAIT_KEPT of the same tag completes them (a pipeline
 * stage posts a boundary send right after the phase that makes the
 * value, and completes it where the receiving phase runs).
 *
 * A PrimeStore holds one device's tiles: for every tensor, numbered slots
 * of one tile each. Slot numbers are assigned by the compiler.
 */
#ifndef PRIME_SCHED_H
#define PRIME_SCHED_H

#include "prime_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(op, "name") — the action kinds. */
#define PRIME_ACTION_LIST(X)                                                                       \
    X(PRIME_ACT_ALLOC, "alloc")         /* slot of tensor: new tile at kind's identity */          \
    X(PRIME_ACT_FREE, "free")           /* slot of tensor: release */                              \
    X(PRIME_ACT_SEND, "send")           /* slot to peer, tag, byte kind */                         \
    X(PRIME_ACT_RECV, "recv")           /* into slot from peer, tag */                             \
    X(PRIME_ACT_WAIT, "wait")           /* complete every posted send and receive */               \
    X(PRIME_ACT_KERNEL, "kernel")       /* kernel(slot, in slots, offsets[arg]) */                 \
    X(PRIME_ACT_ADD, "add")             /* slot += in_slot[0] (same tensor) */                     \
    X(PRIME_ACT_ALLREDUCE, "allreduce") /* groups[arg] sums slot, tag */                           \
    X(PRIME_ACT_STEP, "step")           /* marks the start of step arg */                          \
    X(PRIME_ACT_SEND_BOX, "send_box")   /* boxes[arg] of slot, packed, to peer */                  \
    X(PRIME_ACT_RECV_BOX, "recv_box")   /* into boxes[arg] of slot, at the wait */                 \
    X(PRIME_ACT_COPY_BOX, "copy_box")   /* boxes[arg]: in_slot[0] box -> slot box */               \
    X(PRIME_ACT_REDUCE_SCATTER, "reduce_scatter") /* groups[arg]: member p gets chunk p */         \
    X(PRIME_ACT_ALLGATHER, "allgather") /* groups[arg]: member p gives chunk p, gets all */        \
    X(PRIME_ACT_KEEP, "keep")           /* the sends posted since the wait: kept under tag */      \
    X(PRIME_ACT_WAIT_KEPT, "wait_kept") /* complete the sends kept under tag */

typedef enum PrimeActOp {
#define PRIME_X(op, name) op,
    PRIME_ACTION_LIST(PRIME_X)
#undef PRIME_X
        PRIME_ACT_COUNT
} PrimeActOp;

/* Whether an action of kind op names a tensor and slot (every kind but
 * the waits, the step marks and keep). */
static inline int prime_action_has_tensor(int op) {
    return op != PRIME_ACT_WAIT && op != PRIME_ACT_STEP && op != PRIME_ACT_KEEP &&
           op != PRIME_ACT_WAIT_KEPT;
}

/* Whether an action of kind op carries a message tag (a tag the copies of
 * a repeated layer shift). */
static inline int prime_action_has_tag(int op) {
    return op == PRIME_ACT_SEND || op == PRIME_ACT_RECV || op == PRIME_ACT_SEND_BOX ||
           op == PRIME_ACT_RECV_BOX || op == PRIME_ACT_ALLREDUCE ||
           op == PRIME_ACT_REDUCE_SCATTER || op == PRIME_ACT_ALLGATHER || op == PRIME_ACT_KEEP ||
           op == PRIME_ACT_WAIT_KEPT;
}

#define PRIME_MAX_KERNEL_INPUTS 4

/* How partial values of a tensor combine, in the kind field of ALLOC (the
 * tile starts at the identity: 0, or -inf for a maximum), ADD and the
 * collectives. */
typedef enum PrimeCombine { PRIME_COMBINE_SUM = 0, PRIME_COMBINE_MAX = 1 } PrimeCombine;

typedef struct PrimeAction {
    int op;     /* PrimeActOp */
    int tensor; /* the tensor of slot */
    int slot;
    int peer; /* SEND/RECV: the other rank */
    int tag;  /* SEND/RECV/ALLREDUCE */
    int arg;  /* KERNEL: kernel index; ALLREDUCE: group index; STEP: step */
    int kind; /* SEND: PrimeByteKind; ALLOC, ADD, ALLREDUCE, REDUCE_SCATTER: PrimeCombine */
    int nin;  /* KERNEL, ADD: number of inputs */
    int in_tensor[PRIME_MAX_KERNEL_INPUTS];
    int in_slot[PRIME_MAX_KERNEL_INPUTS];
} PrimeAction;

/* A compute kernel: out += f(in...) over one tile each; off gives, per
 * operator dimension, the global index of the tile's first element
 * (for bodies that use dimension indices, e.g. a causal mask). */
typedef void (*PrimeKernelFn)(float *out, const float *const *in, const long *off);

/* A kernel fused across instances (docs/kernels.md, "Fusion across
 * instances"): in a phase that has one, the consecutive KERNEL actions of
 * a step run as one call, out[j] and in[j][i] the output and inputs of
 * the j-th of them. A KERNEL action's kind says which of its operands
 * are no tile (the fused kernel keeps them in rows of its own; NULL is
 * passed): bit 0 the output, bit 1 + i input i. The fused kernel writes
 * every element of each output tile, none of which it reads first,
 * except where the action says it accumulates (PRIME_FUSED_ACCUM). */
typedef void (*PrimeFusedFn)(float *const *out, const float *const *const *in, const long *off);
#define PRIME_MAX_FUSED 16
/* A KERNEL action's kind in a fused phase, bit 30: the member adds to its
 * output tile (a contribution to a tile from before the group), which is
 * read, not written whole. */
#define PRIME_FUSED_ACCUM (1 << 30)

/* A box inside two tiles: ext elements per dimension, at src_off in a
 * tile of shape src_tile and at dst_off in a tile of shape dst_tile.
 * SEND_BOX packs the source part into a counted temporary buffer (freed
 * at the wait); RECV_BOX receives into one and unpacks it at the wait. */
typedef struct PrimeBox {
    int ndims;
    long ext[8];
    long src_tile[8];
    long src_off[8];
    long dst_tile[8];
    long dst_off[8];
} PrimeBox;

typedef struct PrimeGroup {
    int size;
    const int *ranks;
} PrimeGroup;

struct PrimePhaseForm;

typedef struct PrimePhase {
    const char *name;
    const PrimeAction *const *actions; /* per rank */
    const int *nactions;               /* per rank */
    const PrimeKernelFn *kernels;      /* one per phase: kernels[0] */
    const PrimeGroup *groups;
    const PrimeBox *boxes;
    const long (*offsets)[8]; /* KERNEL: offsets[arg], per operator dimension */
    /* When set, the actions of every rank in rank-parametric form
     * (prime_form.h); actions and nactions are then NULL. */
    const struct PrimePhaseForm *form;
    /* FLOPs of one KERNEL action, as the compiler's cost model counts
     * them (docs/timing.md); 0 for a phase without kernels. A fused
     * phase's: those of one fused call, every member's. */
    double kernel_flops;
    /* 1 when kernels[1] is kernels[0] writing out = f(in...) instead of
     * adding to out: every element of the tile, none of it read. The
     * executor runs it on a tile whose fill it skipped (PrimeTileFill). */
    int kernel_overwrites;
    /* The phase's fused kernel, or NULL. */
    PrimeFusedFn fused;
} PrimePhase;

typedef struct PrimeStore {
    int ntensors;
    size_t *tile_elems; /* per tensor */
    int *nslots;        /* per tensor */
    float ***slots;     /* slots[t][s]: NULL when free */
    /* owed[t][s]: 0, or 1 + the PrimeCombine whose identity the tile was
     * allocated without (PrimeTileFill): it gets it before a first use
     * that reads it. */
    unsigned char **owed;
    /* Sends a phase kept past its end (KEEP), completed by a later phase's
     * WAIT_KEPT of their tag: a pipeline stage's boundary sends, posted
     * where the value is made and completed where it used to be sent. */
    struct PrimeKept *kept;
    int nkept, kept_cap;
} PrimeStore;

/* Sets up an empty store; max_slots[t] slots for tensor t. */
PrimeStatus prime_store_init(PrimeStore *store, int ntensors, const size_t *tile_elems,
                             const int *max_slots);
/* Frees every live tile (through prime_free on dev) and the slot arrays;
 * dev may be NULL for a store that holds no tile. */
void prime_store_release(PrimeDev *dev, PrimeStore *store);

/* The tile in slot s of tensor t (NULL when free), filled with the
 * identity it is owed first, for a reader outside the executor (the
 * driver's checks). */
float *prime_store_tile(PrimeDev *dev, PrimeStore *store, int t, int s);
/* Says that slot s of tensor t was overwritten whole (the driver's fill
 * of inputs and weights), so it owes nothing. */
void prime_store_written(PrimeStore *store, int t, int s);

/* Runs the phase's actions for this device's rank. Returns the first
 * error; the store stays consistent for release. */
PrimeStatus prime_sched_run(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store);
/* The same for a copy of the phase in a repeated layer (tensor indices
 * and tags shifted; see prime_rank_phase_shifted). */
PrimeStatus prime_sched_run_shifted(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store,
                                    int dtensor, int dtag);

/* What one device spent in phases, added up by prime_sched_run_timed:
 * wall time in the phase, time inside kernels, time blocked on
 * communication (the waits for transfers, and whole collectives: the
 * part of communication not hidden under compute), and what ran. */
typedef struct PrimeSchedStats {
    uint64_t wall_ns;
    uint64_t kernel_ns;
    uint64_t comm_ns;
    long kernels;     /* KERNEL actions (a fused kernel's: one) */
    long sends;       /* SEND and SEND_BOX actions (counted transfers) */
    long recvs;       /* RECV and RECV_BOX actions */
    long collectives; /* ALLREDUCE, REDUCE_SCATTER and ALLGATHER actions */
    long steps;       /* STEP actions */
    /* New tiles filled with their identity (at allocation, or before a
     * first use that reads them), and those whose first writer wrote
     * every element instead (PrimeTileFill; box buffers included). */
    long tiles_filled;
    long tiles_unfilled;
} PrimeSchedStats;

/* prime_sched_run_shifted that adds what the run spent into *acc (when
 * not NULL). */
PrimeStatus prime_sched_run_timed(PrimeDev *dev, const PrimePhase *phase, PrimeStore *store,
                                  int dtensor, int dtag, PrimeSchedStats *acc);

const char *prime_action_name(int op);

#ifdef __cplusplus
}
#endif

#endif
