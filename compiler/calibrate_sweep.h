/*
 * calibrate_sweep.h — the measurements behind `primec calibrate`, on
 * whichever runtime backend the code is linked with.
 *
 * calibrate_sweep.c is compiled once per backend: into primec_core
 * against prime_rt (thread-devices; `calibrate --backend cpu` runs the
 * sweep in its own process) and into the primec-calibrate-mpi helper
 * against prime_rt_mpi (one device per MPI process; `calibrate --backend
 * mpi` starts it with mpiexec once per world size and reads the samples
 * it prints). Both therefore time the same operations in the same way:
 *
 *   - communication: for each kind (ring shift, all-reduce,
 *     reduce-scatter, all-gather) and each message size (x4 steps), one
 *     warm-up and `reps` repetitions, each starting at a barrier; every
 *     device records when it started and ended (CLOCK_MONOTONIC, which
 *     all processes of one node share), and a repetition's time is the
 *     span from the first start to the last end;
 *   - compute (on request, with every device computing at once): square
 *     prime_gemm, a memcpy, prime_add on a buffer in cache.
 *
 * A point is the median over repetitions. The fits (calibrate.h) take
 * a CalibrateWorld per world size and know nothing of the backend.
 */
#ifndef PRIMEC_CALIBRATE_SWEEP_H
#define PRIMEC_CALIBRATE_SWEEP_H

#include <stddef.h>
#include <stdio.h>

#include "prime_rt.h"
#include "profile.h"

#define CALIBRATE_MAX_WORLDS 4
#define CALIBRATE_MAX_SIZES 24
#define CALIBRATE_MAX_GEMMS 16
#define CALIBRATE_MAX_DEVICES 64

typedef struct CalibrateOptions {
    int nworlds;
    int worlds[CALIBRATE_MAX_WORLDS]; /* devices per world: {2, 4} */
    long min_bytes, max_bytes;        /* message sweep, in steps of x4 */
    int reps;                         /* repetitions per point; the median counts */
    int gemm_min, gemm_max;           /* square GEMM sweep, in steps of x2 */
    long mem_floats;                  /* buffer of the memory-bandwidth sweep */
} CalibrateOptions;

/* The full sweep: worlds {2, 4}, 1 KiB .. 16 MiB, 15 repetitions, GEMMs
 * 16 .. 512; about 5 s on a small machine. */
void calibrate_options_default(CalibrateOptions *opt);
/* A sweep of well under a second, for tests. */
void calibrate_options_quick(CalibrateOptions *opt);
/* Returns 1 when the sweep settings (not the worlds) are usable, else 0
 * with a message in err. */
int calibrate_options_check(const CalibrateOptions *opt, char *err, size_t errlen);

typedef struct CalibrateSample {
    CommKind kind;
    int gsize;
    double bytes;  /* buffer (p2p: message) size */
    double volume; /* what one device sends: the x of the fit */
    double us;     /* median time */
} CalibrateSample;

/* The compute sweep, every device computing at once. */
typedef struct CalibrateCompute {
    int ngemm; /* 0: not measured */
    double gemm_dim[CALIBRATE_MAX_GEMMS];
    double gemm_us[CALIBRATE_MAX_GEMMS]; /* one square GEMM on one device */
    double mem_floats, mem_us;           /* one memcpy of mem_floats floats */
    double vec_floats, vec_us;           /* one prime_add of vec_floats floats, in cache */
} CalibrateCompute;

/* What one world measured. */
typedef struct CalibrateWorld {
    int ndev;
    int nsamples;
    CalibrateSample samples[COMM_KIND_COUNT * CALIBRATE_MAX_SIZES];
    CalibrateCompute compute; /* when it was asked for */
} CalibrateWorld;

/* Volume one device sends in a collective of `kind` on a buffer of
 * `bytes` in a group of g: bytes (p2p), 2(g-1)/g bytes (all-reduce),
 * (g-1)/g bytes (reduce-scatter, all-gather). */
double calibrate_volume(CommKind kind, double bytes, int g);

/* Runs the sweeps on every device of `world` (with MPI: every process
 * calls it; each ends with the whole result) and fills *out; `compute`
 * adds the GEMM, memory and vector sweeps. Returns the runtime's status
 * (the same on every process). */
PrimeStatus calibrate_sweep_world(PrimeWorld *world, const CalibrateOptions *opt, int compute,
                                  CalibrateWorld *out);

/* The samples as text, one a line (what primec-calibrate-mpi prints):
 *   primec-calibrate-samples 1 devices G
 *   comm KIND BYTES US          per kind and size
 *   gemm D US                   per GEMM size, when compute was measured
 *   mem FLOATS US
 *   vec FLOATS US
 *   end
 */
void calibrate_world_write(const CalibrateWorld *w, FILE *out);
/* Parses that text (other lines before the header are ignored). Returns
 * 1, or 0 with "line N: message" in err. */
int calibrate_world_parse(const char *text, CalibrateWorld *out, char *err, size_t errlen);

#endif
