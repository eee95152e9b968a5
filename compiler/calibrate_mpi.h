/*
 * calibrate_mpi.h — `primec calibrate --backend mpi`: the sweeps of
 * calibrate_sweep.h on one MPI process per device.
 *
 * The sweeps run in a helper program, primec-calibrate-mpi (the same
 * sweep source linked against prime_rt_mpi), which primec finds in the
 * directory of its own binary and starts once per world size as
 *
 *   MPIEXEC [--oversubscribe] [--allow-run-as-root] -n G primec-calibrate-mpi
 *       --devices G --min-bytes B --max-bytes B --reps R
 *       [--compute --gemm-min D --gemm-max D --mem-floats N]
 *
 * (the two Open MPI flags only for Open MPI's mpiexec, found by its
 * `--version`; the second only when running as root). The helper's rank 0
 * prints the samples as text (calibrate_world_write), which primec reads
 * back; its standard error passes through.
 */
#ifndef PRIMEC_CALIBRATE_MPI_H
#define PRIMEC_CALIBRATE_MPI_H

#include <stddef.h>

#include "calibrate_sweep.h"

/* The helper's file name. */
#define CALIBRATE_MPI_HELPER "primec-calibrate-mpi"

/* Runs every world of opt (the largest with compute) under `mpiexec` (a
 * path, or a name looked up in PATH; NULL: "mpiexec") with the helper at
 * `helper` (NULL: next to the running primec binary), and fills
 * worlds[0 .. opt->nworlds). Returns 0 on success; otherwise a message in
 * err and 2 when mpiexec or the helper is not found, 3 when a run fails
 * or prints no samples. */
int calibrate_mpi_sweep(const CalibrateOptions *opt, const char *mpiexec, const char *helper,
                        CalibrateWorld *worlds, char *err, size_t errlen);

#endif
