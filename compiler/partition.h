/*
 * partition.h — evaluate a bound partition's DSIs into slice tables.
 *
 * For an instance whose partition is bound to the model's mesh, every
 * DSI expression is evaluated at every (device, step) point: the slice of
 * each operator dimension that the sub-operator at that point computes.
 * A dimension's slice count is one more than the largest value its DSI
 * takes (1 for a dimension without a DSI). The pass checks what can be
 * checked per dimension: values are non-negative, every slice in
 * 0..count-1 is used by some point, the count divides the dimension's
 * size, and the expression is well defined (no division by zero).
 * Coverage of whole sub-operators and reductions is checked per phase by
 * schedule, which sees how partial results combine.
 *
 * Evaluation is in checked 64-bit arithmetic: an overflow is reported at
 * the subexpression that overflows. A mixed-radix tuple's part ranges are
 * computed once per DSI, so evaluation is linear in the DSI's size and in
 * the number of points, whatever the nesting of tuples.
 */
#ifndef PRIMEC_PARTITION_H
#define PRIMEC_PARTITION_H

#include "diag.h"
#include "ir.h"

/* The most (device, step) points one instance's partition may have: its
 * slice tables hold one value per point and dimension. */
#define PARTITION_MAX_POINTS (1L << 22)

typedef struct SliceTable {
    int ndev;
    long steps;
    int ndims;
    long nslices[IR_MAX_DIMS]; /* slice count of each operator dimension */
    long extent[IR_MAX_DIMS];  /* elements per slice: size / nslices */
    long *slice;               /* [(d * ndev + dev) * steps + t] */
    int naxes;                 /* the model mesh's axes */
    long axis_sizes[IR_MAX_AXES];
} SliceTable;

static inline long slice_at(const SliceTable *st, int dim, int dev, long t) {
    return st->slice[((long)dim * st->ndev + dev) * st->steps + t];
}

/* Coordinates of a device (row-major over the mesh axes, first slowest). */
void mesh_coords(const Mesh *mesh, int rank, long *coords);
int mesh_rank(const Mesh *mesh, const long *coords);

/* Evaluates the instance's partition. Returns 0 and reports diagnostics
 * (at the DSI, with a note at the `use` site) on failure. */
int partition_eval(Arena *arena, DiagSink *sink, const Model *model, const Instance *inst,
                   SliceTable *out);

/* Whether partition_eval gives instances a and b of one model the same
 * slice table: the same operator, partition, axis map, dimension sizes,
 * size parameters and steps (the copies of a repeated layer are). */
int partition_same_points(const Instance *a, const Instance *b);

/* Evaluates one partition expression at one point. Returns 0 on a domain
 * error (division by zero, overflow) and for a mixed-radix tuple, whose
 * value needs the ranges partition_eval computes. */
int partition_eval_expr(const Expr *expr, const Instance *inst, const long *axis_values, long t,
                        long *out);

#endif
