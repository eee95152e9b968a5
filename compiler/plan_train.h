/*
 * plan_train.h — the training search: one layer's tensor plan, pipeline
 * stages, data-parallel replicas, micro-batch size and activation
 * recomputation, chosen jointly for a model of L identical layers.
 *
 * The caller plans the layer once per tensor-parallel mesh and micro-
 * batch size (plan_model with b sequences folded into the tokens): every
 * candidate is scheduled and priced once. For every pipeline depth p
 * dividing L, data-parallel degree d = N / (t p) and recomputation
 * choice, the iteration (cost_pipeline.h: 1F1B, stage sends, LM head,
 * gradient all-reduce, Adam) is an affine function of the layer plan's
 * sums: n (m + p - 1) (T + r F) + n W (all-reduce and Adam per
 * parameter) + constants, with n = L / p layers per stage, m = B / (b d)
 * micro-batches, T and F the layer's time and forward time, W its weight
 * elements. So each (p, d, recomputation) re-solves the layer's dynamic
 * program with candidates priced T + r F + c W (plan_resolve): the
 * optimum over every assignment for that shape. Stages are runs of
 * identical layers (each stage repeats the one layer plan).
 *
 * Memory per device is the first stage's (it holds the most micro-
 * batches in flight, min(p, m)): weights, gradients and optimizer state
 * of n layers and the embedding (the state divided by d when the
 * optimizer is sharded over the replicas, shard_optimizer: ZeRO-1), the stashed activations of the
 * micro- batches in flight (with recomputation only each layer's input and one layer's stash), and
 * the largest transient peak. A shape whose time- optimal tensor plan exceeds the limit is
 * re-solved for the least memory (weights and stash priced, time not): if that fits, the
 * fastest plan within the limit of those priced time + mu * memory (mu bisected) is taken,
 * which is not exact when memory binds.
 */
#ifndef PRIMEC_PLAN_TRAIN_H
#define PRIMEC_PLAN_TRAIN_H

#include "cost_pipeline.h"
#include "plan.h"
#include "profile.h"

enum { TRAIN_RECOMPUTE_OFF, TRAIN_RECOMPUTE_ON, TRAIN_RECOMPUTE_AUTO };

struct TrainLayer;

typedef struct TrainOptions {
    long devices;      /* N */
    long layers;       /* L */
    long global_batch; /* B, sequences */
    long vocab;        /* of the LM head; 0: none */
    int recompute;     /* TRAIN_RECOMPUTE_* */
    long memory_limit; /* bytes per device; 0: none */
    int elem_bytes;
    int state_bytes_per_param; /* optimizer state beyond weight and gradient */
    int shard_optimizer;       /* the state and the step split over the replicas (ZeRO-1) */
    int uneven_stages;         /* stages need not divide L (PipelineShape.uneven) */
    int devices_per_node;
    const Profile *profile;
    /* The time that kernels fused across instances (cost_kernel.h) save
     * on one micro-batch of layer plan `choice`, which the candidates,
     * priced instance by instance, cannot see: *fwd_s in the forward,
     * *bwd_s in the rest, seconds. NULL: none. */
    void (*fusion)(const struct TrainLayer *layer, const int *choice, void *ctx, double *fwd_s,
                   double *bwd_s);
    void *fusion_ctx;
} TrainOptions;

/* One tensor plan of the layer: on one mesh, at one micro-batch size. */
typedef struct TrainLayer {
    Plan *plan;
    long micro_batch; /* b: sequences folded into the plan's tokens */
    long seq_tokens;  /* tokens of one sequence */
    long hidden;      /* the layer input's last dimension */
} TrainLayer;

typedef struct TrainPlan {
    int layer; /* index into the TrainLayers searched */
    int stages, replicas, recompute;
    long micro_batch, micro_batches;
    int *choice;      /* the layer plan: a candidate per instance */
    int least_memory; /* the shape's time-optimal layer plan did not fit (memory binds) */
    PlanSums sums;
    PipelineCost pipe;
    double time_s;      /* iteration */
    double coll_time_s; /* collectives: the layers', the gradient and embedding all-reduces */
    /* Of the critical path's m n layer passes: exposed communication inside
     * the instances (collectives and shifts not hidden) and conversions. */
    double layer_comm_s, conv_time_s;
    double coll_bytes;  /* per device and iteration */
    double p2p_bytes;   /* conversions and stage sends, per device and iteration */
    double mem_weights; /* per device, first stage */
    double mem_grads;
    double mem_optimizer;
    double mem_activations; /* stashed micro-batches in flight and the transient peak */
    double mem_total;
} TrainPlan;

/* Optimizer-state bytes per parameter on a device of a shape with
 * `replicas` replicas: state_bytes_per_param, over d when sharded. */
double train_state_bytes(const TrainOptions *o, int replicas);

/* The iteration of layer plan `choice` of `layer` on shape (p, d,
 * recompute); 0 when the shape does not apply (p does not divide L, N is
 * not t p d, B is not whole micro-batches). */
int train_evaluate(const TrainOptions *o, const TrainLayer *layer, const int *choice, int stages,
                   int replicas, int recompute, TrainPlan *out);

/* The fastest plan within the memory limit over the layers and every
 * shape; 1 with *best (its choice in `arena`), or 0 with *smallest the
 * least memory any shape's least-memory plan needs (no plan fits, or no
 * shape applies: smallest->stages == 0). `shapes` counts the shapes
 * priced. Temporaries go to `scratch`. */
int train_search(const TrainOptions *o, const TrainLayer *layers, int nlayers, Arena *arena,
                 Arena *scratch, TrainPlan *best, TrainPlan *smallest, long *shapes);

/* The largest memory term of p: "weights", "gradients", "optimizer state"
 * or "activations". */
const char *train_memory_dominant(const TrainPlan *p);

#endif
