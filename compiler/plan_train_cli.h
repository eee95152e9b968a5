/*
 * plan_train_cli.h — `primec plan --training`: the training search of
 * plan_train.h for a model's layer on N devices, the search over every
 * partition beside the model's pinned partitions (e.g. Megatron-LM's)
 * searched the same way, as text or JSON.
 */
#ifndef PRIMEC_PLAN_TRAIN_CLI_H
#define PRIMEC_PLAN_TRAIN_CLI_H

#include "pipeline.h"
#include "plan_price.h"

typedef struct PlanTrainArgs {
    int on;              /* --training */
    long layers;         /* --layers L */
    long global_batch;   /* --global-batch B (sequences) */
    long micro_batch;    /* --micro-batch b; 0: 1, 2, 4 and 8 */
    long vocab;          /* --vocab V; 0: no LM head */
    int recompute;       /* --recompute off|on|auto (TRAIN_RECOMPUTE_*) */
    int shard_optimizer; /* --shard-optimizer: ZeRO-1 (both searches) */
    int uneven_stages;   /* --uneven-stages: stages need not divide the layers (both searches) */
    long memory_limit;   /* bytes per device; 0: none */
    long tp_max;         /* tensor-parallel devices at most */
    int mesh_naxes;      /* --mesh: 1 or 2 axes (0: any) */
    long mesh_side;
    int json;
    const char *out_path; /* -o: the plan written as .prime (plan_write.h), or NULL */
    const char *source;   /* the model's file as the written plan imports it */
} PlanTrainArgs;

/* Plans model m (one layer at one sequence, its input's first dimension
 * the sequence's tokens) for `devices` devices; prints the result.
 * Returns the exit code (1 after a diagnostic). */
int plan_training(Compilation *c, const Model *m, long devices, CostCtx *ctx,
                  const PlanTrainArgs *args);

#endif
