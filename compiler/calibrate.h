/*
 * calibrate.h — measure the machine primec runs on and write a profile
 * (profile.h) for the cost model; and the `cost` command that prices a
 * model's schedule with a profile.
 *
 * `primec calibrate` runs, with the runtime's thread-devices
 * (prime_rt.h), a message-size sweep of ring shifts, all-reduces,
 * reduce-scatters and all-gathers on worlds of 2 and 4 devices (median of
 * several repetitions; the time of a repetition is its slowest device),
 * a square GEMM sweep and a memory sweep with every device of the largest
 * world computing at once (as they do in an emitted program), and fits
 *   time = alpha + volume / beta          per communication kind,
 *   time = overhead + 2d^3 / (peak eff(d)),  eff(d) = d / (d + half_dim)
 * by least squares weighted by 1/time^2 (so small and large points count
 * alike in relative error). Thread-devices share one process, so the
 * inter-node rows repeat the intra-node ones.
 */
#ifndef PRIMEC_CALIBRATE_H
#define PRIMEC_CALIBRATE_H

#include <stddef.h>
#include <stdio.h>

#include "profile.h"

#define CALIBRATE_MAX_WORLDS 4
#define CALIBRATE_MAX_SIZES 24
#define CALIBRATE_MAX_GEMMS 16
#define CALIBRATE_MAX_SAMPLES (COMM_KIND_COUNT * CALIBRATE_MAX_WORLDS * CALIBRATE_MAX_SIZES)

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

typedef struct CalibrateSample {
    CommKind kind;
    int gsize;
    double bytes;  /* buffer (p2p: message) size */
    double volume; /* what one device sends: the x of the fit */
    double us;     /* median time */
} CalibrateSample;

typedef struct CalibrateResult {
    Profile profile;
    int nsamples;
    CalibrateSample samples[CALIBRATE_MAX_SAMPLES];
    double fit_rel_rms[COMM_KIND_COUNT]; /* relative rms residual of each fit */
    /* The same fits on each world alone (0 where a fit failed), to show
     * how much the device count matters on this machine. */
    LinkCost world_fit[CALIBRATE_MAX_WORLDS][COMM_KIND_COUNT];
    int ngemm;
    double gemm_dim[CALIBRATE_MAX_GEMMS];
    double gemm_us[CALIBRATE_MAX_GEMMS]; /* one GEMM, one device, all computing */
    double gemm_rel_rms;
    double seconds; /* wall time of the whole calibration */
} CalibrateResult;

/* Runs the sweeps and fits. Returns 1, or 0 with a message in err. */
int calibrate_run(const CalibrateOptions *opt, CalibrateResult *out, char *err, size_t errlen);

/* Weighted (1/us^2) least squares us = alpha + x / (beta * 1e3), x in
 * bytes, beta in GB/s; ordinary least squares when the weighted slope is
 * not positive. A negative intercept is clamped to 0 and the slope
 * refitted. Returns 0 when the points give no positive bandwidth (fewer
 * than two distinct x, or a non-positive slope). */
int calibrate_fit_alpha_beta(const double *x, const double *us, int n, double *alpha_us,
                             double *beta_GBps);

/* Weighted least squares of us = o + c1 d^3 + c2 d^2, i.e. overhead o,
 * peak 2 / c1 flops per µs and half_dim c2 / c1 (coefficients that come
 * out negative are dropped and the rest refitted). Returns 0 when no
 * positive peak fits. */
int calibrate_fit_gemm(const double *dim, const double *us, int n, double *overhead_us,
                       double *peak_tflops, double *half_dim);

/* Writes the calibrated profile with comments on how it was measured. */
void calibrate_write_profile(const CalibrateResult *res, const CalibrateOptions *opt, FILE *out);

/* `primec calibrate [--backend cpu|mpi] [-o FILE] [--worlds N,N...]
 * [--quick]`. argv[0]
 * is the command name ("calibrate"); options follow. Writes the profile
 * to FILE (default: stdout) and a summary of the fits to stderr. Returns
 * the exit code: 0 ok, 2 usage or I/O error, 3 the runtime failed. */
int calibrate_main(int argc, char **argv);

/* `primec cost FILE [--model NAME] [--profile NAME|PATH] [--elem-bytes N]
 * [--devices-per-node N] [--json]`: the cost report (cost.h) of every
 * model in FILE (default profile v100). argv[0] is the command name.
 * Returns the exit code (0, 1 input errors, 2 usage or I/O). */
int cost_command_main(int argc, char **argv);

#endif
