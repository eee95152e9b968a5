/*
 * prime_weights.h — real weights for an emitted program (docs/weights.md).
 *
 *   --weights DIR        every *.safetensors file in DIR gives the values
 *                        the program fills: each weight must be there (its
 *                        own name, or the one --weights-map gives it), an
 *                        input may be (otherwise it stays random); F32, F16
 *                        and BF16 are converted to fp32
 *   --weights-map FILE   lines `prime_name safetensors_name`
 *   --list-weights       prints what --weights reads, and exits
 *   --save-grads DIR     after the step, DIR/grads.safetensors holds the
 *                        dense gradient of every filled value the program
 *                        differentiates (weights and inputs), gathered from
 *                        the devices' tiles, under the value's safetensors
 *                        name
 *
 * The driver (prime_program.c) holds the whole values of everything it
 * fills, for the dense reference and to cut each device's tiles from; the
 * loaded weights land there, so the sharded run and the --check reference
 * see the same numbers. Errors are printed with the file they concern;
 * the functions return the driver's exit code (0, 2 for bad input, or 3
 * out of memory, which the caller reports).
 */
#ifndef PRIME_WEIGHTS_H
#define PRIME_WEIGHTS_H

#include "prime_program.h"

#include <stddef.h>

/* The layouts of prime_program.c, shared with the gradient gather. */
int prime_layout_count(const PrimeProgram *prog, const PrimeLayout *l, int rank);
void prime_layout_tile(const PrimeProgram *prog, const PrimeLayout *l, int rank, int i, long *tile,
                       int *slot);
void prime_tile_offset(const PrimeTensorDesc *t, long id, long *off);

/* Per value: the safetensors name it is loaded from and saved under (NULL
 * for a value the program does not fill): the program's own name, or the
 * model's `from "NAME"` (prog->weight_sources), or the map file's. */
typedef struct PrimeWeightNames {
    int nvalues;
    char **name;
    /* Per value: 1 when the file holds the 2-D value transposed (the
     * model's `from "NAME" transposed`). */
    unsigned char *transposed;
} PrimeWeightNames;

int prime_weight_names(const PrimeProgram *prog, const char *map_file, PrimeWeightNames *out);
void prime_weight_names_free(PrimeWeightNames *n);

/* Prints `weight|input NAME FILE_NAME [shape]` per filled value. */
void prime_weights_list(const PrimeProgram *prog, const PrimeWeightNames *names);

/* Fills whole[v] of every value found in DIR's files; a weight that is
 * missing, of another shape, or a bad file is an error. */
int prime_weights_load(const PrimeProgram *prog, const PrimeWeightNames *names, const char *dir,
                       float *const *whole);

/* DIR's files, mapped and matched with the values (the same checks and
 * messages as prime_weights_load), for reading boxes of them: a device
 * reads its own tiles only, and only the pages of the mapping they touch
 * are read from disk. */
typedef struct PrimeWeightFiles PrimeWeightFiles;
int prime_weights_open(const PrimeProgram *prog, const PrimeWeightNames *names, const char *dir,
                       PrimeWeightFiles **out);
/* Is value v in the files? */
int prime_weights_has(const PrimeWeightFiles *w, int v);
/* The box [off, off + box) of value v (tensor d of it) into dst, row-major
 * over box, converted to fp32 (and transposed where the file holds the
 * transpose). Returns 0, or 3 when out of memory. Any thread. */
int prime_weights_read_box(const PrimeWeightFiles *w, int v, const PrimeTensorDesc *d,
                           const long *off, const long *box, float *dst);
void prime_weights_close(PrimeWeightFiles *w);

/* The gradients --save-grads writes: per saved one, the value it is the
 * gradient of and the checked tensor holding it; buf holds one block of
 * `total` floats per rank, where each rank's device copies its tiles. */
typedef struct PrimeGrads {
    int n;
    int *value;
    int *tensor;
    size_t *off;
    size_t total;
    float *buf;
} PrimeGrads;

int prime_grads_init(PrimeGrads *g, const PrimeProgram *prog, const PrimeWeightNames *names);
void prime_grads_free(PrimeGrads *g);
/* On the device's own thread, at the end of the step: its gradient tiles
 * into its block, downloaded first where the device's table has a
 * download (CUDA); a failed download is the returned status. */
PrimeStatus prime_grads_collect(PrimeGrads *g, const PrimeProgram *prog, PrimeDev *dev,
                                PrimeStore *st);
/* On the root, after every block was shared: DIR/grads.safetensors. */
int prime_grads_write(const PrimeGrads *g, const PrimeProgram *prog, const PrimeWeightNames *names,
                      const char *dir);

#endif
