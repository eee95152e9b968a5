/*
 * plan.h — choose a partition for every operator instance of a model.
 *
 * Candidates per instance: every partition of its operator, over every
 * way to bind the partition's axes to the mesh's axes. Each candidate is
 * scheduled alone (a one-instance model: its own phases, collectives,
 * shifts, memory) and costed; consecutive instances add the cost of
 * converting the producer's output layout into the consumer's input
 * layout (forward) and the consumer's input gradient into the producer's
 * output-gradient layout (backward). The total is the sum of instance
 * costs and edge costs, and the search is exact under it: a dynamic
 * program over the instances in order whose state is the candidate of
 * every producer still awaited by a later consumer (residual connections
 * keep their producer in the state until the add that ends the segment).
 * For a model whose layers repeat, the per-layer boundary-to-boundary
 * cost matrix is composed L times as a (min, +) matrix power in
 * log2(L) squarings. The memory limit is applied by dropping candidates
 * that alone exceed it and, when the cheapest plan does not fit, by a
 * Lagrangian penalty on persistent memory (not exact; reported).
 */
#ifndef PRIMEC_PLAN_H
#define PRIMEC_PLAN_H

#include <stdint.h>

#include "diag.h"
#include "ir.h"
#include "schedule.h"

typedef struct PlanCost {
    double time;         /* seconds per training step */
    long coll_bytes;     /* collective bytes, the busiest device */
    long p2p_bytes;      /* shift + redistribution bytes, the busiest device */
    long peak;           /* peak bytes of the schedule, the busiest device */
    long persistent;     /* weights, their gradients and stashed inputs, per device */
    double coll_time;    /* seconds of collectives on the slowest device (0 when not priced) */
    double fwd_time;     /* of time: the forward phases (0 when not priced) */
    double compute_time; /* of time: computing (the rest is exposed communication) */
    /* Set by the planner, busiest device each: weight elements held,
     * bytes of stashed activation inputs, and of those the bytes of the
     * model's input (its first reader only). */
    long weight_elems;
    long stash_bytes;
    long input_bytes;
    /* Per input: the all-reduce of its gradient's partial sums (time, and
     * bytes of the busiest device), 0 when the gradient is complete. */
    double reduce_time[IR_MAX_INPUTS];
    long reduce_bytes[IR_MAX_INPUTS];
} PlanCost;

/* How a schedule and a conversion are priced (the cost model). The
 * schedule lives in `scratch`, which is freed after the call. */
typedef PlanCost (*PlanCostFn)(const Schedule *s, Arena *scratch, void *ctx);
typedef double (*PlanMoveFn)(long bytes_per_device, void *ctx);

/* Data parallelism around the planned mesh: dp replicas of it, each on
 * 1/dp of the tokens; weight gradients are all-reduced over the dp
 * replicas (priced by dp_cost from the bytes of weight a device holds,
 * 4-byte elements as the schedule counts them; it returns seconds and
 * sets the bytes it moves per device, as the cost model reports them). */
typedef double (*PlanDpFn)(long weight_bytes_per_device, int dp, void *ctx,
                           long *collective_bytes_per_device);

typedef struct PlanOptions {
    Mesh mesh;         /* the mesh to plan on (one data-parallel replica) */
    int dp;            /* data-parallel replicas; 1: none */
    long token_size;   /* the token dimension's size (first dim of the first input) */
    long memory_limit; /* bytes per device; 0: none */
    /* Bytes per element of the reported memory (0: 4, as the schedule
     * counts), and per weight parameter of optimizer state beyond the
     * weight and its gradient (mixed-precision Adam: 12, fp32 master
     * copy and two moments); both must match what `cost` reports as a
     * schedule's peak. */
    int elem_bytes;
    int state_bytes_per_param;
    PlanCostFn cost;
    PlanMoveFn move;
    PlanDpFn dp_cost;
    void *ctx;
    int pinned_only; /* candidates: only the partition each instance pins */
    /* Training: every token dimension (see token_size) has this size, b
     * sequences folded into it (0: token_size / dp). With seq_tokens > 0
     * (the tokens of one sequence), an instance with two token dimensions
     * (attention: queries and keys) is priced as tokens / seq_tokens
     * sequences of seq_tokens each, one after another, not as attention
     * over all the folded tokens; its layouts stay the folded ones. */
    long tokens;
    long seq_tokens;
    /* Training a batched model: mesh axis 0 is the data-parallel replica
     * axis, of size 1 while planning (one replica). A candidate of an
     * instance with token (batch) dimensions binds it to an axis of its
     * partition that is the whole DSI of every token dimension and nothing
     * else (the rule of plan_replica_axis); one of an instance without
     * them leaves it unbound. So the plan written with that axis as long
     * as the replicas runs them all. */
    int replica_axis0;
    /* Optional: an arena for temporaries that plan_model resets as it
     * likes (a caller planning many meshes passes the same one, so the
     * memory stays mapped); NULL: plan_model makes its own. */
    Arena *scratch;
    /* Optional: the one-sequence prices of attention over folded
     * sequences (seq_tokens), kept across plan_model calls (see
     * PlanSeqCache); NULL: each plan_model prices its own. */
    struct PlanSeqCache *seq_cache;
} PlanOptions;

/* The prices of instances scheduled at one sequence, shared by the
 * plan_model calls of one model with one cost function and context: a
 * layer planned at b sequences per micro-batch prices each attention
 * candidate at one sequence (seq_tokens), and that schedule is the same
 * at every b on a mesh, and is the candidate's own at b = 1. An entry is
 * keyed by the instance, the mesh and what the candidate's schedule
 * depends on (operator, shapes, arguments, the slices of every device
 * and step), so a hit is the price the schedule would give. */
typedef struct PlanSeqCache PlanSeqCache;
PlanSeqCache *plan_seq_cache_create(void);
void plan_seq_cache_destroy(PlanSeqCache *c);
/* Prices found in the cache, and prices scheduled into it. */
long plan_seq_cache_hits(const PlanSeqCache *c);
long plan_seq_cache_misses(const PlanSeqCache *c);

typedef struct PlanCandidate {
    const Partition *partition;
    int axis_map[IR_MAX_AXES];
    Instance inst; /* bound to the mesh */
    PlanCost cost;
    /* What the edges need of the candidate's schedule (kept after the
     * schedule itself is freed): each argument's input layout and its
     * gradient's final layout, the result's layout and its gradient's. */
    SchedTensor in_t[IR_MAX_INPUTS], din_t[IR_MAX_INPUTS], out_t, dout_t;
    Layout in_l[IR_MAX_INPUTS], din_l[IR_MAX_INPUTS], out_l, dout_l;
    int has_din[IR_MAX_INPUTS];
    int has_dout;
    /* Per input: what its gradient's all-reduce sums (groups, tiles and
     * sizes), 0 for none; two equal ones of consecutive readers of a
     * value are one all-reduce in a program. */
    uint64_t reduce_sig[IR_MAX_INPUTS];
} PlanCandidate;

typedef struct Plan {
    const Model *model;
    Mesh mesh;
    int ninst;
    PtrVec *cands; /* per instance: PlanCandidate* */
    int *choice;   /* per instance: index into cands */
    double time;   /* objective: instance costs + edge costs */
    double edge_time;
    long coll_bytes, p2p_bytes; /* summed over instances and edges, busiest device each */
    long memory;                /* sum of persistent + the largest transient peak */
    double power_time;          /* the layer-power evaluation of the optimum (must equal time) */
    int used_power;
    int penalised; /* the memory limit needed the Lagrangian penalty */
    long candidates;
    void *planner; /* the search's state, for plan_resolve (in the plan's arena) */
} Plan;

/* A candidate's price in a re-solved program: time * its time + fwd *
 * its forward time + weight * its weight elements + stash * its stashed
 * bytes + input * its model-input bytes; conversions between instances
 * cost time * their time. plan_model solves with {1, 0, 0, 0, 0}. */
typedef struct PlanWeights {
    double time, fwd, weight, stash, input;
} PlanWeights;

/* Solves plan's program again (the candidates and conversions plan_model
 * built) with candidates priced by w; fills plan->choice and returns the
 * objective. Temporaries go to `scratch` (the caller resets it). */
double plan_resolve(Plan *plan, const PlanWeights *w, Arena *scratch);

/* What an assignment adds up to: instance and conversion times
 * (conversions at weight 1), the forward, collective and compute time of
 * the instances, the conversions' time, collective and point-to-point bytes (busiest device each,
 * summed), weight elements, stashed and model-input bytes (summed), and
 * the largest transient peak (peak less persistent) of an instance. */
typedef struct PlanSums {
    double time, fwd_time, coll_time;
    double compute_time, conv_time; /* of time: instances computing; conversions */
    long coll_bytes, p2p_bytes;
    long weight_elems, stash_bytes, input_bytes, transient;
} PlanSums;
void plan_sums(const Plan *plan, const int *choice, PlanSums *out);
/* The fewest weight elements any assignment holds: the sum over the
 * instances of their candidates' least. */
long plan_min_weight_elems(const Plan *plan);

/* Plans the model; returns 0 after a diagnostic (no candidate for an
 * instance, no plan within the memory limit). */
int plan_model(Arena *arena, DiagSink *sink, const Module *module, const Model *model,
               const PlanOptions *opt, Plan *out);

/* The objective of an arbitrary assignment under the weights of the
 * plan's last solve (for exhaustive checks). */
double plan_assignment_time(const Plan *plan, const int *choice);

/* Enumerates every assignment (when there are at most `limit`); returns
 * the best objective, or -1 if there are more. */
double plan_exhaustive(const Plan *plan, long limit, int *best_choice);

/* inst as the model's instance orig bound as candidate pc binds it: its
 * partition, axis map, size parameters and steps (the shapes are
 * orig's). */
void plan_bind_candidate(Instance *inst, const Instance *orig, const PlanCandidate *pc);

/* Whether candidates a and b bind an instance alike: the same partition,
 * axis map, size parameters and steps (plan_bind_candidate makes the same
 * instance of them), and with `shapes` set the same dimension sizes too. */
int plan_candidate_same(const PlanCandidate *a, const PlanCandidate *b, int shapes);

/* Whether choice ca of plan a and cb of plan b are the same program: the
 * same mesh (axis names and sizes) and every instance's candidates alike
 * (plan_candidate_same, shapes included when `shapes` is set). */
int plan_same_program(const Plan *a, const int *ca, const Plan *b, const int *cb, int shapes);

/* The instance's candidate as `use` text: "square(i: i, j: j)". */
const char *plan_use_text(Arena *arena, const Plan *plan, int inst);

/* The mesh axis along which the chosen partitions split every token
 * dimension, and nothing else (each instance with tokens has a partition
 * axis that is the whole DSI of each of its token dimensions, whose size
 * nothing else in the partition uses, bound to this mesh axis; no
 * instance without tokens lies along it), or -1. Then D data-parallel
 * replicas of the plan are the same rules on the mesh with that axis D
 * times longer and the tokens whole (plan_replica.c). */
int plan_replica_axis(const Plan *plan);

/* The schedule of s with the two axes of its square mesh (i: n, j: n)
 * swapped: device (i, j) does what (j, i) did in s. Per-rank action
 * lists, peers, collective groups, slices, layouts, moves and
 * predictions move with their devices. `model` is s's model with every
 * partition bound to the swapped axes; on it this is a valid schedule
 * (not necessarily the one schedule_build would choose among equals). */
Schedule *schedule_transpose(Arena *arena, const Schedule *s, const Model *model);

#endif
