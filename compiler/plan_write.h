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

/* The path of `target` relative to the directory of the file `from`
 * (both as given on the command line), for an import. */
const char *plan_relative_path(Arena *arena, const char *target, const char *from);

#endif
