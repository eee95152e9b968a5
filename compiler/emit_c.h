/*
 * emit_c.h — the C emitter for the `cpu` backend.
 *
 * Writes one rank-parametric SPMD program per model: the tile shapes as
 * compile-time constants, one compute kernel per phase (a cblas GEMM
 * where the einsum maps onto one, plain loops otherwise), the dense
 * single-device reference built from the same einsums over whole
 * tensors, every phase's per-rank action tables, the layouts the driver
 * fills and checks, and the compiler's predicted byte and memory counts.
 * The program includes only the runtime's public headers and calls
 * prime_program_main (runtime/prime_program.h). Output is deterministic:
 * everything is printed in tensor, phase and rank order.
 */
#ifndef PRIMEC_EMIT_C_H
#define PRIMEC_EMIT_C_H

#include "form.h"
#include "schedule.h"

#include "printer.h"

/* What a target other than cpu and mpi changes in the program: its main
 * (after the `program` table; NULL: prime_program_main's). The CUDA
 * target's (emit_cuda.h) calls prime_cuda_main with the kernels of the
 * .cu file. */
typedef struct EmitCHooks {
    void (*print_main)(Printer *p, const Schedule *s);
} EmitCHooks;

/* Returns the program text (malloc'ed, unformatted); hooks may be NULL. */
char *emit_c_program(Arena *arena, const Schedule *s, const ScheduleForm *form,
                     const char *source_name, const EmitCHooks *hooks, size_t *len);

#endif
