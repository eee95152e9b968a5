/*
 * primec_calibrate_mpi.c — primec-calibrate-mpi, the program behind
 * `primec calibrate --backend mpi` (compiler/calibrate_mpi.h): the sweeps
 * of compiler/calibrate_sweep.c, linked against prime_rt_mpi, on one MPI
 * process per device. Rank 0 prints the samples on standard output in
 * the text form of calibrate_world_write; primec fits them.
 *
 *   mpiexec -n G primec-calibrate-mpi --devices G [--min-bytes B]
 *       [--max-bytes B] [--reps R] [--compute [--gemm-min D]
 *       [--gemm-max D] [--mem-floats N]]
 *
 * Unset values are those of the full sweep (calibrate_options_default).
 * Exit codes, the same on every process: 0 ok, 2 usage (or not G
 * processes), 3 the runtime failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_sweep.h"
#include "prime_rt.h"

static int usage(void) {
    fprintf(stderr,
            "usage: mpiexec -n G primec-calibrate-mpi --devices G [--min-bytes B] [--max-bytes B]\n"
            "           [--reps R] [--compute [--gemm-min D] [--gemm-max D] [--mem-floats N]]\n"
            "  the measurements of `primec calibrate --backend mpi`; rank 0 prints the samples\n");
    return 2;
}

/* A whole number in [lo, hi], or 0 (with *ok cleared). */
static long number(const char *s, long lo, long hi, int *ok) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        *ok = 0;
        return 0;
    }
    return v;
}

int main(int argc, char **argv) {
    CalibrateOptions opt;
    calibrate_options_default(&opt);
    int devices = 0, compute = 0, ok = 1;
    for (int i = 1; i < argc && ok; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--compute") == 0) {
            compute = 1;
        } else if (i + 1 < argc && strcmp(a, "--devices") == 0) {
            devices = (int)number(argv[++i], 1, CALIBRATE_MAX_DEVICES, &ok);
        } else if (i + 1 < argc && strcmp(a, "--min-bytes") == 0) {
            opt.min_bytes = number(argv[++i], 4, 1L << 30, &ok);
        } else if (i + 1 < argc && strcmp(a, "--max-bytes") == 0) {
            opt.max_bytes = number(argv[++i], 4, 1L << 30, &ok);
        } else if (i + 1 < argc && strcmp(a, "--reps") == 0) {
            opt.reps = (int)number(argv[++i], 1, 255, &ok);
        } else if (i + 1 < argc && strcmp(a, "--gemm-min") == 0) {
            opt.gemm_min = (int)number(argv[++i], 1, 8192, &ok);
        } else if (i + 1 < argc && strcmp(a, "--gemm-max") == 0) {
            opt.gemm_max = (int)number(argv[++i], 1, 8192, &ok);
        } else if (i + 1 < argc && strcmp(a, "--mem-floats") == 0) {
            opt.mem_floats = number(argv[++i], 1, 1L << 30, &ok);
        } else {
            ok = 0;
        }
    }
    char err[256];
    if (!ok || devices == 0)
        return usage();
    if (!calibrate_options_check(&opt, err, sizeof err)) {
        fprintf(stderr, "primec-calibrate-mpi: error: %s\n", err);
        return 2;
    }

    PrimeWorld *world = NULL;
    PrimeStatus st = prime_world_create(devices, &world);
    if (st != PRIME_OK) /* prime_world_create said why on rank 0 */
        return st == PRIME_ERR_ARG ? 2 : 3;
    static CalibrateWorld res; /* static: no allocation that one process alone could fail */
    int rc = 0;
    st = calibrate_sweep_world(world, &opt, compute, &res);
    if (st != PRIME_OK) {
        if (prime_world_is_root(world))
            fprintf(stderr,
                    "primec-calibrate-mpi: error: the runtime failed on %d MPI processes: %s\n",
                    devices, prime_status_name(st));
        rc = 3;
    } else if (prime_world_is_root(world)) {
        calibrate_world_write(&res, stdout);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "primec-calibrate-mpi: error: cannot write the samples\n");
            rc = 3;
        }
    }
    prime_world_destroy(world);
    return rc;
}
