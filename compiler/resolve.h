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

/* Resolves the programs into module; returns 1 if no error was reported. */
int resolve_programs(Arena *arena, DiagSink *sink, Program *const *programs, int nprograms,
                     Module *module);

/* Prints the module for --dump-after=resolve. */
void resolve_dump(const Module *module, FILE *out);

#endif
