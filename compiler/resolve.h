/*
 * resolve.h — names, signatures and shapes: the AST becomes a Module.
 *
 * Checks every declaration of every parsed file (the standard library
 * first, then the user's files): duplicate names; operator signatures
 * (dimensions, tensors, body statements that name known tensors,
 * dimensions and intrinsics); partitions (the operator they split, their
 * axes, DSIs that name only dimensions of that operator and only axes,
 * the step and size parameters of the partition); models (params, one
 * mesh of power-of-two axes, tensors, instances whose arguments exist
 * and whose shapes agree, `use` clauses whose partition splits that
 * operator and whose size parameters unify with the mesh).
 */
#ifndef PRIMEC_RESOLVE_H
#define PRIMEC_RESOLVE_H

#include "diag.h"
#include "ir.h"

/* `--param NAME=VALUE`: a value for a model's parameter or a plan's mesh
 * size, over the model's, the shape's and the run's own. */
typedef struct ParamOverride {
    const char *name; /* not NUL-terminated: len bytes */
    int len;
    long value;
} ParamOverride;

/* Parses `NAME=VALUE` (an identifier and a decimal integer) into out;
 * 0 when it is not of that form. */
int resolve_parse_override(const char *arg, ParamOverride *out);

typedef struct ResolveOptions {
    const char *model_name; /* the overrides apply to this model or run; NULL: every one */
    int noverrides;
    const ParamOverride *overrides;
} ResolveOptions;

/* Resolves the programs into module; returns 1 if no error was reported. */
int resolve_programs(Arena *arena, DiagSink *sink, Program *const *programs, int nprograms,
                     Module *module);
/* The same with --param overrides (opt may be NULL). */
int resolve_programs_with(Arena *arena, DiagSink *sink, Program *const *programs, int nprograms,
                          Module *module, const ResolveOptions *opt);

/* Prints the module for --dump-after=resolve. */
void resolve_dump(const Module *module, FILE *out);

#endif
