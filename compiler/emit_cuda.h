/*
 * emit_cuda.h — the CUDA emitter for `primec build --target cuda`: one
 * .cu file per model holding every distinct compute kernel (the kernel IR
 * of each forward, backward and gradient phase printed by kernel_cuda.c,
 * deduplicated as the C emitter does) and a table of the host function of
 * every phase. The schedule runtime for CUDA (the device interface,
 * streams, NCCL) is not there yet, so the file has no main: it is
 * compiled to an object with nvcc (docs/cuda.md).
 */
#ifndef PRIMEC_EMIT_CUDA_H
#define PRIMEC_EMIT_CUDA_H

#include "emit_c.h"
#include "schedule.h"
#include "source.h"

/* Returns the .cu text (malloc'ed). sources (may be NULL) gives each
 * phase's `.prime` position in its comment. */
char *emit_cuda_program(const Schedule *s, const SourceMap *sources, const char *source_name,
                        size_t *len);

/* The C program's main for the CUDA target: prime_cuda_main with the
 * .cu's prime_cuda_run_phase (runtime/prime_cuda.h). */
extern const EmitCHooks emit_cuda_c_hooks;

/* The nvcc to compile with: cc when given, else nvcc on PATH, else
 * /usr/local/cuda/bin/nvcc; NULL when none exists. */
const char *cuda_find_nvcc(const char *cc);

/* nvcc -c SRC -o OBJ for sm_80 and sm_90, warnings as errors, the
 * runtime's headers on the include path. Returns 1 when it succeeded. */
int cuda_compile(const char *nvcc, const char *include_dir, const char *src, const char *obj);

#endif
