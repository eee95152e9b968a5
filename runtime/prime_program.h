/*
 * prime_program.h — the driver of an emitted program.
 *
 * primec emits, per model, the tables of a PrimeProgram (tensors with
 * their tile shapes and layouts, phases with per-rank action lists,
 * compute kernels, a dense single-device reference, and the byte and
 * memory counts that the compiler predicted) and a main() that calls
 * prime_program_main. The driver runs every phase on one thread-device
 * per rank and, with --check, fills inputs with seeded random values,
 * compares every result tile on every device with the dense reference,
 * and compares the counted bytes and peak memory with the predictions.
 *
 * Options of an emitted program:
 *   --check         verify results and counters; exit 1 on a mismatch
 *   --seed N        seed of the random inputs (default 1)
 *   --trace FILE    write a Chrome trace-event timeline (of the last run)
 *   --json FILE     write the counters, the times (step_time, timing) and
 *                   the errors with --check as JSON
 *   --repeat N      run the training step N times (counters of the last,
 *                   times the median; docs/timing.md), with a progress
 *                   line when stdout is a terminal
 *   --timeout SECONDS
 *                   how long a device waits for a peer (default 60, 0 none);
 *                   a timeout ends the run with exit code 4
 *   --init fan-in|uniform
 *                   inputs and weights U(-1, 1), weights scaled to variance
 *                   1 / fan-in as real initialisations are (default), or
 *                   all U(-1, 1)
 *   --weights DIR   load the weights (and any input found) from DIR's
 *                   *.safetensors files (docs/weights.md)
 *   --weights-map FILE
 *                   lines `prime_name safetensors_name` naming them
 *   --save-grads DIR
 *                   write the gradients to DIR/grads.safetensors
 *   --list-weights  print the weights and inputs --weights reads (name,
 *                   safetensors name, shape) and exit
 */
#ifndef PRIME_PROGRAM_H
#define PRIME_PROGRAM_H

#include "prime_form.h"
#include "prime_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PRIME_MAX_DIMS 8

/* Which tiles of a tensor each rank holds, and in which slots. */
typedef struct PrimeLayout {
    const int *count;            /* per rank */
    const long *const *tiles;    /* per rank: tile ids */
    const int *const *slots;     /* per rank: slot of each tile */
    const PrimeLayoutForm *form; /* when set, the layout of every rank (the rest NULL) */
} PrimeLayout;

typedef struct PrimeTensorDesc {
    const char *name;
    int ndims;
    long shape[PRIME_MAX_DIMS];   /* whole tensor */
    long tile[PRIME_MAX_DIMS];    /* one tile */
    long nslices[PRIME_MAX_DIMS]; /* tiles per dimension */
    int max_slots;
    int fill_after; /* phase index after which the driver fills it, or -1 */
    int check;      /* compared with the reference at the end */
    int value;      /* the whole value it is a tiling of (reference index) */
    PrimeLayout fill_layout;
    PrimeLayout final_layout;
    /* In a PrimeTensorRun that repeats, `name` holds one "%ld": copy l
     * is named with name_base + l * name_step there, and is a tiling of
     * value + l * value_step (each tensor its own step: with
     * micro-batches, a later micro-batch's activations are fewer values
     * a copy apart than the first's weights and activations). */
    long name_base;
    long name_step;
    int value_step;
} PrimeTensorDesc;

/* A stretch of the tensors: tensors[first .. first + len) stand for
 * `repeat` copies (the tensors of a repeated layer). */
typedef struct PrimeTensorRun {
    int first;
    int len;
    long repeat;
} PrimeTensorRun;

/* Computes every checked value from the filled ones, whole, on one
 * device: values[v] points at value v's whole array. A tensor of the
 * program is one tiling of a value; several tensors may share one. */
typedef void (*PrimeReferenceFn)(float *const *values);
/* The same computation in fp64: what --check compares against. */
typedef void (*PrimeReference64Fn)(double *const *values);

/* A stretch of the schedule: phases[first .. first + len) run `repeat`
 * times; copy l shifts tensor indices by l * dtensor and tags by
 * l * dtag (the copies of a repeated layer). `orig` is the schedule's
 * index of its first phase (PrimeTensorDesc.fill_after counts those);
 * copy l, phase j has index orig + l * len + j. */
typedef struct PrimePhaseRun {
    int first;
    int len;
    long repeat;
    int dtensor;
    int dtag;
    int orig;
} PrimePhaseRun;

/* A stretch of the values: value_elems[first .. first + len) repeated
 * `repeat` times. */
typedef struct PrimeValueRun {
    int first;
    int len;
    long repeat;
} PrimeValueRun;

/* A model's `from "NAME" [transposed]` on an input or weight: the
 * safetensors name of the value declared `name` (in_layer: of each copy
 * name_L of a repeated layer, with `{layer}` in file_name standing for L),
 * and whether the file holds the 2-D value transposed. */
typedef struct PrimeWeightSource {
    const char *name;
    int in_layer;
    const char *file_name;
    int transposed;
} PrimeWeightSource;

typedef struct PrimeProgram {
    const char *name;
    int ndev;
    int ntensors;
    const PrimeTensorDesc *tensors;
    int nvalues;
    const long *value_elems; /* per value */
    int nphases;
    const PrimePhase *const *phases;
    PrimeReferenceFn reference;
    /* Predictions: bytes[rank * PRIME_BYTES_KIND_COUNT + kind], peak[rank]. */
    const long *predicted_bytes;
    const long *predicted_peak;
    /* --check passes a tensor when its error against the fp64 reference
     * is at most `tolerance` times the dense fp32 program's own error
     * (or times twice fp32's unit roundoff, when that is larger). */
    double tolerance;
    const PrimeMesh *mesh;
    /* 1: predicted_bytes and predicted_peak hold one rank's counts, the
     * same on every rank. */
    int predicted_uniform;
    /* The order phases run in; NULL: each of `phases` once, in order. */
    int nruns;
    const PrimePhaseRun *runs;
    /* When set, `tensors` holds the first copy of each run and ntensors
     * counts every copy. */
    int ntensor_runs;
    const PrimeTensorRun *tensor_runs;
    /* When set, value_elems holds each run once and nvalues counts every
     * copy. */
    int nvalue_runs;
    const PrimeValueRun *value_runs;
    /* Per entry of value_elems: the scale of the value's U(-1, 1) random
     * values under --init fan-in (1 for what is not a weight). */
    const double *value_scale;
    PrimeReference64Fn reference64;
    /* Per entry of value_elems: 1 for a weight (what --weights must
     * give), 0 for the rest; NULL: no weights. */
    const unsigned char *value_weight;
    /* The model's safetensors names (prime_weights.c); 0 and NULL: none. */
    int nweight_sources;
    const PrimeWeightSource *weight_sources;
} PrimeProgram;

int prime_program_main(const PrimeProgram *program, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
