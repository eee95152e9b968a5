/*
 * prime_timing.h — the time report of an emitted program (see
 * docs/timing.md): what every device spent in every phase of every
 * repeat of the training step, reduced to medians over --repeat.
 *
 * Rows are the program's emitted phases: the copies of a phase in a
 * repeated layer add up in one row. For each repeat the driver lets each
 * device add its PrimeSchedStats into its own block of `cur` (rank-major,
 * so prime_world_share can complete it with MPI), then calls
 * prime_timing_collect, which keeps, per phase and for the whole step:
 *
 *   wall      the slowest device's time in the phase (whole step: in all
 *             phases)
 *   kernel    mean over devices of the time inside kernels
 *   exposed   mean over devices of the time blocked on communication
 *   overhead  mean over devices of wall - kernel - exposed, each device
 *             its own: time in the schedule executor itself
 *
 * and, for the whole step, the processor time this process's threads
 * spent in it (CLOCK_PROCESS_CPUTIME_ID), which a machine shared with
 * other work inflates far less than wall time.
 *
 * The report takes, per row, the repeat with the median wall time (the
 * lower of the middle two for an even count) and gives its four times,
 * which so stay consistent with one another; FLOPs are counted from the
 * kernels that ran (PrimePhase.kernel_flops each), and GFLOP/s is those
 * FLOPs over that wall time.
 */
#ifndef PRIME_TIMING_H
#define PRIME_TIMING_H

#include "prime_program.h"

#include <stdio.h>

typedef struct PrimeTiming {
    int ndev;
    int nphases; /* the program's emitted phases */
    int repeat;  /* repeats recorded so far */
    int cap;     /* repeats there is room for */
    const PrimeProgram *prog;
    /* [rank * nphases + phase]: the current repeat, then the last one. */
    PrimeSchedStats *cur;
    /* [repeat * (nphases + 1) + phase], row nphases the whole step. */
    double *wall, *kernel, *exposed, *overhead;
    /* [repeat]: the processor time of this process's threads in it (all
     * devices of a threads world, this rank's under MPI). */
    double *cpu;
    double cpu0; /* at prime_timing_start */
} PrimeTiming;

/* Room for `repeat` repeats; 0 when out of memory. */
int prime_timing_init(PrimeTiming *t, const PrimeProgram *prog, int repeat);
void prime_timing_free(PrimeTiming *t);
/* Zeroes `cur` for the next repeat. */
void prime_timing_start(PrimeTiming *t);
/* The stats device `rank` adds into for emitted phase `phase`. */
PrimeSchedStats *prime_timing_slot(PrimeTiming *t, int rank, int phase);
/* Records the repeat in `cur` (complete on this process). */
void prime_timing_collect(PrimeTiming *t);
/* The text report and the JSON fields (", \"step_time\": ..., \"timing\":
 * {...}", to go inside the program's object). */
void prime_timing_print(const PrimeTiming *t, FILE *out);
void prime_timing_json(const PrimeTiming *t, FILE *js);
/* Per rank of the last repeat: sends posted and collectives run. */
long prime_timing_rank_sends(const PrimeTiming *t, int rank);
long prime_timing_rank_collectives(const PrimeTiming *t, int rank);

#endif
