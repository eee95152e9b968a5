/*
 * emit_kernels.h — the compute kernels and reference bodies of an
 * emitted C program.
 *
 * Each compute phase's kernel IR (kernel_ir.h) printed as a C function
 * (kernel_c.h): over tiles for the program's kernels, over whole values
 * for the dense reference (in fp32 and fp64). Each distinct body is
 * printed once; phases that compute alike (the copies of a repeated
 * layer) call the same function.
 */
#ifndef PRIMEC_EMIT_KERNELS_H
#define PRIMEC_EMIT_KERNELS_H

#include "printer.h"
#include "schedule.h"

/* Prints the kernels (whole = 0) or references (whole = 1, in fp64 when
 * dbl) of every compute phase, each distinct body once: canon[k] names
 * the function phase k calls. A phase whose kernel key (all its body is
 * built from) equals an earlier one's calls that one's function without
 * its body being built again. */
void emit_c_kernels(Printer *out, const Schedule *s, int whole, int dbl, int *canon);

/* Prints the fused kernel of every group of s->fusion (kernel_fuse.h)
 * when its actions were rewritten, each distinct body once: fused_of[k]
 * names the function a group's first phase k runs (-1: none). */
void emit_c_fused(Printer *out, const Schedule *s, int *fused_of);

/* The distinct fused kernels of s->fusion (non-NULL), by their C
 * printing's text, for every printer of them: same_as[gi] (returned, to
 * free) is the first group whose body equals group gi's (gi itself when
 * none does). With bodies_out, *bodies_out[gi] is group gi's C body (each
 * and the array to free). */
int *emit_fused_distinct(const Schedule *s, char ***bodies_out);

#endif
