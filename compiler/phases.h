/*
 * phases.h — the training phases of a model, derived from its operators.
 *
 * A model trains in phases: init (inputs and weights filled), the forward
 * phase of every instance in program order, dy-in (the gradients of the
 * outputs arrive), then, for every instance in reverse order and every
 * input X of its operator, a backward phase (X an activation or an input)
 * or a gradient phase (X a weight):
 *     dX[dims of X] += dY[dims of Y] * (de / dX)
 * where the operator's body is Y[...] += e. de/dX comes from reverse-mode
 * differentiation of e (autodiff.h) unless the operator states the
 * derivative itself (`grad dX = ...`). The forward of `Y[..] max= e`
 * takes the maximum instead of the sum, and its derivative is
 *     dX[dims of X] += dY[dims of Y] * eq(e, Y) * (de / dX)
 * which reads the forward result Y: every element equal to the maximum
 * (each of several ties) receives the whole incoming gradient.
 *
 * This pass works on the model alone: its phases name operator tensors
 * and model tensors, not tilings. The schedule pass binds every operand
 * to a storage tensor in the tiling its instance's partition gives it.
 */
#ifndef PRIMEC_PHASES_H
#define PRIMEC_PHASES_H

#include <stdio.h>

#include "diag.h"
#include "ir.h"

typedef enum PhaseKind {
    PHASE_INIT,
    PHASE_FWD,
    PHASE_DYIN,
    PHASE_BWD,
    PHASE_GRAD,
    PHASE_KIND_COUNT
} PhaseKind;
const char *phase_name(PhaseKind kind);

/* Operands of one phase: the operator's inputs and dY. */
#define PHASE_MAX_OPERANDS (IR_MAX_INPUTS + 2)

#define PHASE_DY (-1)
#define PHASE_RESULT (-2)

/* An operand as the phase's expression names it. */
typedef struct PhaseOperand {
    Sym name;
    int input; /* index of the operator input it is; PHASE_DY for dY, PHASE_RESULT for the
                * forward result (read by the derivative of a maximum) */
} PhaseOperand;

typedef struct Phase {
    PhaseKind kind;
    int inst;         /* instance index; -1 for init and dy-in */
    int wrt;          /* backward/gradient: the operator input differentiated */
    const Expr *expr; /* out[...] += expr over the instance's dimensions */
    int max_reduce;   /* forward of `max=`: out[...] = max(out[...], expr), from -inf */
    Sym out_name;     /* "Y" (forward), "dX" (the gradient of input X) */
    const OpTensor *out;
    int out_tensor; /* the model tensor the output is (or is the gradient of) */
    int out_grad;
    Sym dy_name; /* backward/gradient: "dY" */
    int nin;     /* operands in the order the expression first names them */
    PhaseOperand in[PHASE_MAX_OPERANDS];
    int micro; /* dy-in: the micro-batch whose outputs' gradients arrive; -1 for every one */
    /* Activation recomputation (Model.recompute): a forward run again
     * before its stage's backward of the micro-batch (out_tensor is the
     * recomputed copy, ModelTensor.rc), or a backward or gradient phase
     * of such a model. Either reads the recomputed copy of an operand
     * made on its own stage where there is one (phases_operand_tensor). */
    int recompute;
} Phase;

/* Every phase of a model, in execution order. */
typedef struct PhaseList {
    const Model *model;
    int count;
    Phase *items;
} PhaseList;

/* Derives the phases of a model (every instance must have a partition and
 * a single forward statement). Returns NULL after reporting a derivative
 * that cannot be taken. */
PhaseList *phases_derive(Arena *arena, DiagSink *sink, const Model *model);

/* The 1F1B order (`microbatches b: M order 1f1b;`): rearranges the list
 * phases_derive made so that stage k runs min(S - k, M) forwards, then a
 * backward and a forward in turn, then the backwards left, with one dy-in
 * phase per micro-batch (phases_order.c). */
void phases_order_1f1b(Arena *arena, PhaseList *pl);
/* `recompute`: inserts, before the first backward or gradient phase of
 * each micro-batch on each stage, the forward phases of that stage and
 * micro-batch whose results its backward reads (directly, or through
 * another recomputed forward), writing the recomputed copies
 * (phases_recompute.c). */
void phases_recompute(Arena *arena, PhaseList *pl);
/* The model tensor a phase of instance inst reads for model tensor t: the
 * recomputed copy of t when the phase recomputes or differentiates under
 * `recompute` and t was made on the instance's stage, else t. */
int phases_operand_tensor(const Model *m, const Phase *ph, int t);

/* The micro-batch of instance i, and of a model tensor (its producer's;
 * 0 for an input or a weight). */
int phases_instance_micro(const Model *m, int i);
int phases_tensor_micro(const Model *m, int tensor);

/* Prints each phase with its einsum in the model's names, e.g.
 *     backward of y: dx[m, k] += dY[m, n] * W[k, n]  with dY = dy, W = w */
void phases_dump(const PhaseList *pl, FILE *out);

#endif
