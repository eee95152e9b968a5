/*
 * fuzz_model.h — the structure-aware fuzz target, shared by the libFuzzer
 * entry points (fuzz_libfuzzer.c) and the corpus replayer that any C
 * compiler builds (fuzz_replay.c).
 */
#ifndef PRIMEC_FUZZ_MODEL_H
#define PRIMEC_FUZZ_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Resolves the stdlib once (the generator's table) and opens the
 * temporary file programs are compiled from; prints statistics at exit. */
void fuzz_model_init(void);

/* Generates the program of `data` and runs parse .. schedule on it.
 * Returns 1 if the schedule pass was reached. */
int fuzz_model_run(const uint8_t *data, size_t size);

/* The program text of `data` (malloc'ed). */
char *fuzz_model_program(const uint8_t *data, size_t size, size_t *len);

#endif
