/*
 * fuzz_gen.h — decode fuzz bytes into a .prime program that is mostly
 * valid, so that fuzzing reaches the analysis passes and not only the
 * parser.
 *
 * The bytes are read as choices in a small grammar of programs: a few
 * user operators (signatures copied from the stdlib, bodies drawn from a
 * small expression grammar) and user partitions (DSIs drawn from common
 * templates or from a DSI expression grammar), then one or two models
 * (params, a mesh of 1-3 axes with power-of-two sizes, an input, a chain
 * of instances of stdlib and user operators with partitions that exist
 * for them and the weights they need, shape-preserving layer blocks), and
 * the newer features: the stdlib's composites as instances, user
 * composites over stdlib operators, partitions by role renamed at the use
 * (`use p(m = s)`), weight sources (`from "NAME" [transposed]`, with
 * `{layer}` in layer blocks) and plans of a model whose rules name
 * instances and the parts of composite instances.
 * Rarely, a choice makes the program wrong on purpose: a wrong size, an
 * odd mesh, an unknown name, a huge parameter, a partition of the wrong
 * arity, a composite that uses itself, a renaming the partition or the
 * operator cannot take, `{layer}` outside a layer. When the bytes run out every further choice is
 * 0, which always means the simple, valid option; so a short input is a small valid program, and
 * libFuzzer's byte mutations become structural ones.
 *
 * Which operators, partitions and composites exist is read from the
 * resolved stdlib (FuzzTable), so the generator follows the stdlib as it
 * changes.
 */
#ifndef PRIMEC_FUZZ_GEN_H
#define PRIMEC_FUZZ_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "ast.h"
#include "ir.h"

#define FUZZ_MAX_INPUTS 8      /* inputs of a composite (attention has 7) */
#define FUZZ_MAX_PARTITIONS 32 /* partitions the generator knows per operator */
#define FUZZ_MAX_PIECES 16     /* parts of one composite */

/* A signature, of an operator or a composite: dims are indices into
 * FuzzSig.dims. */
typedef struct FuzzTensor {
    const char *name;
    int ndims;
    int dims[IR_MAX_DIMS];
} FuzzTensor;

typedef struct FuzzSig {
    const char *name;
    int ndims;
    const char *dims[IR_MAX_DIMS];
    int ninputs;
    FuzzTensor inputs[FUZZ_MAX_INPUTS];
    FuzzTensor output;
} FuzzSig;

/* A partition as a use sees it: its name and mesh axes. */
typedef struct FuzzPartition {
    const char *name;
    int naxes;
    const char *axis[IR_MAX_AXES];
} FuzzPartition;

/* One part of a composite: `name = op(...)`; op indexes FuzzTable.ops, or
 * is -1 for a part that is itself a composite. */
typedef struct FuzzPiece {
    const char *name;
    int op;
} FuzzPiece;

/* A composite of the stdlib: its signature, the partitions every one of
 * its operators has (what a `use` on it may name), and its parts. */
typedef struct FuzzComposite {
    FuzzSig sig;
    int npart;
    FuzzPartition part[FUZZ_MAX_PARTITIONS];
    int npieces;
    FuzzPiece pieces[FUZZ_MAX_PIECES];
    int ninst; /* the operator instances one use expands into */
} FuzzComposite;

/* The stdlib's operators and their partitions (pointers into a resolved
 * Module that outlives the table), and its composites (from the parsed
 * programs of the same compilation). */
typedef struct FuzzTable {
    int nops;
    const Op **ops;
    int *npart;               /* per op */
    const Partition ***parts; /* per op */
    int ncomps;
    FuzzComposite *comps;
} FuzzTable;

/* Builds the table from a module resolved from the stdlib alone and the
 * programs it was resolved from (the composites; NULL: none). The arrays
 * are malloc'ed; fuzz_table_free releases them. */
void fuzz_table_build(FuzzTable *t, const Module *module, const PtrVec *programs);
void fuzz_table_free(FuzzTable *t);

/* Writes the program that `data` decodes to into a malloc'ed,
 * NUL-terminated string (*len without the NUL). Never fails. */
char *fuzz_gen_program(const FuzzTable *t, const uint8_t *data, size_t size, size_t *len);

#endif
