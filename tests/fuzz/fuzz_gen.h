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
 * for them and the weights they need, shape-preserving layer blocks).
 * Rarely, a choice makes the program wrong on purpose: a wrong size, an
 * odd mesh, an unknown name, a huge parameter, a partition of the wrong
 * arity. When the bytes run out every further choice is 0, which always
 * means the simple, valid option; so a short input is a small valid
 * program, and libFuzzer's byte mutations become structural ones.
 *
 * Which operators and partitions exist is read from the resolved stdlib
 * (FuzzTable), so the generator follows the stdlib as it changes.
 */
#ifndef PRIMEC_FUZZ_GEN_H
#define PRIMEC_FUZZ_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* The stdlib's operators and their partitions (pointers into a resolved
 * Module that outlives the table). */
typedef struct FuzzTable {
    int nops;
    const Op **ops;
    int *npart;               /* per op */
    const Partition ***parts; /* per op */
} FuzzTable;

/* Builds the table from a module resolved from the stdlib alone. The
 * arrays are malloc'ed; fuzz_table_free releases them. */
void fuzz_table_build(FuzzTable *t, const Module *module);
void fuzz_table_free(FuzzTable *t);

/* Writes the program that `data` decodes to into a malloc'ed,
 * NUL-terminated string (*len without the NUL). Never fails. */
char *fuzz_gen_program(const FuzzTable *t, const uint8_t *data, size_t size, size_t *len);

#endif
