/*
 * plan_write.h — `primec plan -o`: a chosen plan as a plan block and a
 * run of the model it came from (docs/planner.md).
 */
#ifndef PRIMEC_PLAN_WRITE_H
#define PRIMEC_PLAN_WRITE_H

#include <stdio.h>

#include "ir.h"

/* Writes `import "SOURCE"; plan M_planned of MODEL on mesh(...) {rules}
 * run M_planned = M_planned on MODEL(params);` for model m (a written
 * model or a run), whose instance i gets the `use` text uses[i], on mesh
 * with dp data-parallel replicas: with replica_axis >= 0 (see
 * plan_replica_axis) as the whole program, that mesh axis dp times
 * longer and the tokens whole; otherwise as one replica (the token
 * parameter divided by dp). The rules name the written instances (one
 * rule covers every copy of a layer), so the text does not grow with the
 * layer count. */
void plan_write_prime(FILE *f, const Model *m, const char *const *uses, const Mesh *mesh, int dp,
                      int replica_axis, const char *source, Arena *arena);

/* What plan_write_spec writes beyond the rules: the data-parallel
 * replicas as for plan_write_prime, and for a training plan (stages > 0)
 * its pipeline stages along a new first mesh axis (`stages`), `layers`
 * copies of the layer (the model's repeat parameter), and the batch of
 * one replica as micro_batches micro-batches of micro_tokens tokens each
 * (`microbatches TOKENS: M order 1f1b;` where M > 1, the token parameter
 * set to their product; `... order 1f1b recompute;` with recompute, for
 * any M). A batched model's (batch) written with its
 * replica axis (replica_axis) has micro-batches of micro_tokens sequences
 * over all the replicas. */
typedef struct PlanWriteSpec {
    int dp, replica_axis;
    int stages; /* 0: no stages written (plan_write_prime) */
    long layers;
    long micro_batches, micro_tokens;
    int recompute; /* `recompute` in the micro-batch clause (stages > 1) */
    int batch;     /* the token parameter counts sequences (a batched model's b) */
    long vocab;    /* of the LM head the cost has and the program lacks; 0: none */
} PlanWriteSpec;

/* The plan with spec w; 0 (nothing written) when a training plan's model
 * has no token parameter (its first input's first dimension) or no layer
 * block repeated by a parameter. */
int plan_write_spec(FILE *f, const Model *m, const char *const *uses, const Mesh *mesh,
                    const PlanWriteSpec *w, const char *source, Arena *arena);

/* The path of `target` relative to the directory of the file `from`
 * (both as given on the command line), for an import. */
const char *plan_relative_path(Arena *arena, const char *target, const char *from);

#endif
