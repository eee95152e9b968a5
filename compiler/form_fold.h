/*
 * form_fold.h — the copies of a repeated layer, folded back.
 *
 * A `layer ... repeat L` block is expanded by resolve and scheduled copy
 * by copy, and the program numbers each copy's storage tensors in one
 * block (ScheduleForm.tensor_number), so that copy l's tensors are copy
 * 0's plus l blocks. This pass finds what repeats with that stride and
 * describes it once: runs of actions inside one phase (the allocations
 * of every copy's weights at the start, say) as a loop whose tensors
 * move by a block per iteration (PrimeActionForm.dstep_tensor), runs of
 * phases (PrimePhaseRun), and runs of tensor descriptors
 * (PrimeTensorRun). Each is checked before it is kept: a phase's loops
 * expand, on every rank, to exactly the actions of the form they
 * replace; a run of phases or tensors equals its first copy shifted,
 * field by field.
 */
#ifndef PRIMEC_FORM_FOLD_H
#define PRIMEC_FORM_FOLD_H

#include "form.h"

/* Folds, in every phase in form of a model with a repeated layer, the
 * runs of top-level actions (outside step loops) that repeat with their
 * tensors shifted by a constant in the program's numbering and their
 * tags by a constant, into loops (dstep_tensor, in that numbering).
 * Called by form_build once the tensors are numbered. */
void form_fold_layer_actions(Arena *arena, const Schedule *s, ScheduleForm *sf);

/* The form as the program holds it: a copy of f with every tensor field
 * in the program's numbering (sf->tensor_number), which dstep_tensor
 * counts in (the pieces it chains to, PrimePhaseForm.next, too). */
PrimePhaseForm form_numbered(Arena *arena, const ScheduleForm *sf, const PrimePhaseForm *f);

/* The operands of a compute phase that the dense reference names by
 * value: its output, then its inputs. */
#define FORM_RUN_OPERANDS (1 + SCHED_MAX_OPERANDS)

/* A stretch of the schedule's phases, [first, first + len), that runs
 * `repeat` times: copy l is the first copy with every tensor index
 * shifted by l * dtensor, every tag by l * dtag and, in the dense
 * reference, the value of phase first + j's operand x (0: the output,
 * 1 + i: input i) by l * dvalue[j * FORM_RUN_OPERANDS + x] (the copies
 * of a repeated layer; with micro-batches a later micro-batch's
 * activations move by fewer values a copy than the weights they share
 * with the first's). dvalue is NULL when the run does not repeat. */
typedef struct PhaseRun {
    int first;
    int len;
    long repeat;
    int dtensor;
    int dtag;
    int *dvalue;
} PhaseRun;

typedef struct PhaseRuns {
    int nruns;
    PhaseRun *runs;
    int nemitted; /* phases emitted: the sum of the runs' len */
} PhaseRuns;

/* Stretches of the storage tensors in program order (tensor_at): the
 * tensors numbered [first, first + len) stand for `repeat` copies, copy
 * l having the same tiling, slots and layouts, the value of tensor
 * first + j shifted by l * dvalue[j] and its name by l * name_step[j]
 * in the number it carries. */
typedef struct TensorRun {
    int first;
    int len;
    long repeat;
    int *dvalue;              /* per tensor of the run, when repeat > 1 */
    const char **name_format; /* per tensor of the run ("q_%ld"), when repeat > 1 */
    long *name_base;
    long *name_step;
} TensorRun;

typedef struct TensorRuns {
    int nruns;
    TensorRun *runs;
    int nemitted;
} TensorRuns;

TensorRuns *form_fold_tensors(Arena *arena, const Schedule *s, const ScheduleForm *sf);

/* Folds the copies of repeated layers: consecutive stretches of phases
 * in form that equal the stretch before them shifted by one layer's
 * tensors, tags and values. kernel[k] and reference[k] name phase k's
 * kernel functions (phases with equal ones compute alike). */
PhaseRuns *form_fold_layers(Arena *arena, const Schedule *s, const ScheduleForm *sf,
                            const int *kernel, const int *reference);

#endif
