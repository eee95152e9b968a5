/*
 * cost_pipeline.h — a training iteration of a whole model from the cost
 * of its layer: pipeline stages (1F1B, optionally interleaved), micro-
 * batches, data-parallel replicas, activation recomputation, the
 * language-model head, the gradient all-reduce and the optimizer step.
 *
 * The layer is priced by the cost model (cost.h) as the program primec
 * would emit for one stage's tensor-parallel mesh; this file composes
 * that price into an iteration as a pipelined schedule would run it:
 *
 *   per micro-batch and stage   T = b * (L / p) * (t_fwd + t_bwd [+ t_fwd])
 *                               (b sequences, L / p layers, the recomputed
 *                               forward with --recompute)
 *   the last stage              T + the LM head (logits GEMM, forward and
 *                               backward, vocabulary split over the mesh)
 *   pipeline                    m * T_max + (p - 1) / v * T_mean
 *                               (m micro-batches per replica, v model chunks
 *                               per stage: the 1F1B bubble)
 *   stage boundaries            2 v sends per micro-batch (activation and its
 *                               gradient), b * s * h elements, split over
 *                               the mesh's devices, on the critical path
 *   data parallelism            an all-reduce of each device's gradients over
 *                               the d replicas, after the pipeline drains;
 *                               the tied embedding's all-reduce between the
 *                               first and the last stage
 *   optimizer                   mixed-precision Adam: 28 bytes moved per
 *                               parameter at the memory bandwidth; with
 *                               the optimizer sharded (ZeRO-1) each replica
 *                               updates 1/d of the parameters, and the
 *                               all-reduce becomes a reduce-scatter of the
 *                               gradients and an all-gather of the updated
 *                               weights: the same bytes, the same time
 *
 * Ranks are numbered as Megatron-LM numbers them: tensor-parallel fastest,
 * then data-parallel, then pipeline, so a replica group strides by the
 * mesh size and a stage boundary by mesh size * d.
 */
#ifndef PRIMEC_COST_PIPELINE_H
#define PRIMEC_COST_PIPELINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "cost.h"

/* Bytes Adam moves per parameter (see cost_pipeline.c). */
#define PIPELINE_ADAM_BYTES_PER_PARAM 28.0

/* The links of a group of `members` ranks r * stride (r < members). */
LinkClass pipeline_group_link(int devices_per_node, long stride, long members);

typedef struct PipelineShape {
    int stages;          /* pipeline stages p (1: none) */
    int chunks;          /* model chunks per stage v (interleaved 1F1B; 1: plain) */
    int replicas;        /* data-parallel degree d */
    long layers;         /* transformer layers of the whole model L */
    long micro_batch;    /* sequences per micro-batch b */
    long global_batch;   /* sequences per iteration B */
    long vocab;          /* vocabulary of the LM head; 0: no head */
    int recompute;       /* full activation recomputation */
    int shard_optimizer; /* optimizer state and step split over the d replicas (ZeRO-1) */
    /* Stages may hold different layer counts (p need not divide L; with
     * one model chunk only): the first L mod p stages hold one layer more,
     * and the busiest stage, ceil(L / p) layers, sets the pace. */
    int uneven;
} PipelineShape;

/* The layers of the busiest stage: L / p, or ceil(L / p) for uneven
 * stages; 0 when p stages cannot hold L layers that way. */
long pipeline_stage_layers(long layers, long stages, int uneven);

typedef struct PipelineCost {
    PipelineShape shape;
    int mesh_devices;     /* devices of one stage's mesh t */
    long devices;         /* t * p * d */
    long micro_batches;   /* m = B / (b d) */
    long seq_tokens;      /* tokens of one sequence (the layer's input rows) */
    long hidden;          /* the layer input's last dimension */
    double layer_fwd_us;  /* one layer, one sequence, forward */
    double layer_bwd_us;  /* one layer, one sequence, backward and gradients */
    double stage_us;      /* per micro-batch on a stage without the head */
    double head_us;       /* per micro-batch: the LM head on the last stage */
    double p2p_us;        /* per micro-batch and stage: boundary sends */
    double pipeline_us;   /* all micro-batches through the pipeline, bubble included */
    double bubble_us;     /* of which the fill and drain */
    double allreduce_us;  /* data-parallel gradient all-reduce */
    double embedding_us;  /* the tied embedding's all-reduce between the ends */
    double optimizer_us;  /* Adam on one device's parameters */
    double iteration_us;  /* everything */
    double params_device; /* parameters on the busiest device */
    double flops_device;  /* counted by the cost model, per device and iteration */
} PipelineCost;

/* One layer as the pipeline sees it: its mesh, its input's shape (one
 * sequence), and its price per micro-batch of b sequences. */
typedef struct PipelineLayer {
    int mesh_devices;     /* devices of one stage's mesh t */
    int devices_per_node; /* of the profile, or as the layer was priced */
    long seq_tokens;      /* tokens of one sequence */
    long hidden;          /* the layer input's last dimension */
    int elem_bytes;
    double fwd_us;               /* one layer, one micro-batch: forward */
    double bwd_us;               /* backward and gradients */
    double fwd_flops, bwd_flops; /* one layer, one micro-batch, per device */
    double params;               /* one layer's parameters on the busiest device */
} PipelineLayer;

/* Composes a layer into an iteration of shape sh (the formulas above).
 * Returns 1, or 0 with a message in err. */
int pipeline_compose(const PipelineLayer *layer, const PipelineShape *sh, const Profile *p,
                     PipelineCost *out, char *err, size_t errlen);

/* Composes the layer's cost report (a model of `layers_in_report` copies
 * of the layer, one sequence) into an iteration of shape sh. Returns 1,
 * or 0 with a message in err (a shape the layer cannot run). */
int cost_pipeline(const CostReport *layer, long layers_in_report, const PipelineShape *sh,
                  const Profile *p, PipelineCost *out, char *err, size_t errlen);

void cost_pipeline_print(const PipelineCost *c, FILE *out);
/* As JSON (`primec cost --json`: the "pipeline" member). */
json_t *cost_pipeline_json(const PipelineCost *c);

#endif
