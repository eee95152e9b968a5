/*
 * calibrate.h — measure the machine primec runs on and write a profile
 * (profile.h) for the cost model; and the `cost` command that prices a
 * model's schedule with a profile.
 *
 * `primec calibrate` runs the sweeps of calibrate_sweep.h — ring shifts,
 * all-reduces, reduce-scatters and all-gathers over a message-size sweep
 * on worlds of 2 and 4 devices, and square GEMMs, a memcpy and a vector
 * add with every device of the largest world computing at once — on one
 * of two backends:
 *
 *   cpu  the runtime's thread-devices (prime_rt), in this process;
 *   mpi  one MPI process per device (prime_rt_mpi): the helper program
 *        primec-calibrate-mpi, next to the primec binary, started with
 *        mpiexec once per world size (calibrate_mpi.h).
 *
 * It then fits, the same way for both,
 *   time = alpha + volume / beta          per communication kind,
 *   time = overhead + 2d^3 / (peak eff(d)),  eff(d) = d / (d + half_dim)
 * by least squares weighted by 1/time^2 (so small and large points count
 * alike in relative error). All devices are on this one machine, so the
 * inter-node rows repeat the intra-node ones.
 */
#ifndef PRIMEC_CALIBRATE_H
#define PRIMEC_CALIBRATE_H

#include <stddef.h>
#include <stdio.h>

#include "calibrate_sweep.h"
#include "profile.h"

#define CALIBRATE_MAX_SAMPLES (COMM_KIND_COUNT * CALIBRATE_MAX_WORLDS * CALIBRATE_MAX_SIZES)

typedef enum CalibrateBackend { CALIBRATE_CPU, CALIBRATE_MPI } CalibrateBackend;

typedef struct CalibrateResult {
    CalibrateBackend backend;
    Profile profile;
    int nsamples;
    CalibrateSample samples[CALIBRATE_MAX_SAMPLES];
    double fit_rel_rms[COMM_KIND_COUNT]; /* relative rms residual of each fit */
    /* The same fits on each world alone (0 where a fit failed), to show
     * how much the device count matters on this machine. */
    LinkCost world_fit[CALIBRATE_MAX_WORLDS][COMM_KIND_COUNT];
    CalibrateCompute compute; /* from the largest world */
    double gemm_rel_rms;
    double seconds; /* wall time of the whole calibration */
    /* Sweeps run (backend cpu): more than one when a sweep's timings fit
     * no positive bandwidth or peak (a loaded machine). */
    int attempts;
} CalibrateResult;

/* Runs the sweeps on thread-devices (backend cpu) and fits; sweeps again,
 * up to three times in all, while the timings fit no positive bandwidth
 * or peak. Returns 1, or 0 with a message in err. */
int calibrate_run(const CalibrateOptions *opt, CalibrateResult *out, char *err, size_t errlen);

/* The fits: from what each world of opt measured (worlds[i] for
 * opt->worlds[i]; the largest one with compute) fills *out, the profile
 * included. `seconds` is how long the sweeps took. Returns 1, or 0 with a
 * message in err. */
int calibrate_fit_worlds(const CalibrateOptions *opt, const CalibrateWorld *worlds,
                         CalibrateBackend backend, double seconds, CalibrateResult *out, char *err,
                         size_t errlen);

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
 * [--quick] [--mpiexec CMD]`. argv[0] is the command name ("calibrate");
 * options follow. Writes the profile to FILE (default: stdout) and a
 * summary of the fits to stderr. Returns the exit code: 0 ok, 2 usage or
 * I/O error (mpiexec or the MPI helper not found included), 3 the runtime
 * or an MPI run failed. */
int calibrate_main(int argc, char **argv);

#endif
