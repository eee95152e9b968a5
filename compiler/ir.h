/*
 * ir.h — the compiler's intermediate representation after parsing.
 *
 * resolve turns the AST into these records: operators as einsums over
 * named dimensions, partitions with their DSI expressions, and models as
 * graphs of operator instances over concrete shapes on a concrete mesh.
 * partition evaluates an instance's DSIs into slice tables; phases
 * derives the backward and gradient einsums; schedule (schedule.h) turns
 * each phase into per-device steps, moves, reductions and buffers.
 *
 * Everything lives in the compilation's arena.
 */
#ifndef PRIMEC_IR_H
#define PRIMEC_IR_H

#include "ast.h"

#define IR_MAX_DIMS 8   /* dimensions of one operator */
#define IR_MAX_AXES 8   /* axes of one mesh */
#define IR_MAX_INPUTS 4 /* inputs of one operator */

/* One tensor of an operator's signature: which operator dimensions it has. */
typedef struct OpTensor {
    Sym name;
    Span span;
    int ndims;
    int dims[IR_MAX_DIMS]; /* indices into Op.dims */
} OpTensor;

/* An operator: Y = sum over the dimensions absent from Y of the product
 * of its inputs (the only body form issue 2 lowers; elementwise bodies
 * are parsed and resolved but not yet lowered). */
typedef struct Op {
    Sym name;
    const OpDecl *decl;
    int ndims;
    Sym dims[IR_MAX_DIMS];
    Span dim_spans[IR_MAX_DIMS]; /* first mention */
    int ninputs;
    OpTensor inputs[IR_MAX_INPUTS];
    OpTensor output;
    int is_contraction; /* body is `Y[...] += A[...] * B[...] ...` */
    int max_reduce;     /* body is `Y[...] max= e`: the maximum over the other dimensions */
} Op;

typedef struct Partition {
    Sym name;
    const PartitionDecl *decl;
    const Op *op;
    int naxes;
    const AxisDecl *axes[IR_MAX_AXES];
    const AxisDecl *steps; /* NULL: one step */
    /* DSI per op dimension, NULL where the dimension is whole. */
    const DsiAssign *dsi[IR_MAX_DIMS];
} Partition;

typedef struct Mesh {
    int naxes;
    Sym names[IR_MAX_AXES];
    long sizes[IR_MAX_AXES];
    Span spans[IR_MAX_AXES];
    int ndev;
    Span span;
} Mesh;

typedef enum TensorRole { TENSOR_INPUT, TENSOR_WEIGHT, TENSOR_ACTIVATION } TensorRole;

/* A tensor of a model: an input, a weight, or an instance's result. */
typedef struct ModelTensor {
    Sym name;
    Span span;
    TensorRole role;
    int ndims;
    long sizes[IR_MAX_DIMS];
    int producer; /* instance index, -1 for inputs and weights */
    /* An input's or weight's `from "NAME" [transposed]`: the safetensors
     * name template (NULL: none; `{layer}` stands for the layer copy), and
     * the declared name, `base`; a copy l of a repeated layer is named
     * base_l, and in_layer is 1 there. */
    const char *file_name;
    int file_transposed;
    int in_layer;
    Sym base;
    /* Activation recomputation (Model.recompute): the index of this
     * activation's recomputed copy NAME_rc (0: none), and whether this is
     * such a copy (its producer is the instance of the original). */
    int rc;
    int is_rc;
} ModelTensor;

/* An operator applied in a model, with its partition bound to the mesh. */
typedef struct Instance {
    Sym name; /* the result tensor's name */
    Span span;
    const Op *op;
    int args[IR_MAX_INPUTS]; /* model tensor indices */
    int result;
    long dim_sizes[IR_MAX_DIMS];
    const Partition *partition;
    Span use_span;
    /* The partition's axis a runs over mesh axis axis_map[a]. */
    int axis_map[IR_MAX_AXES];
    /* Values of the partition's size parameters, by name. */
    int nsize_params;
    Sym size_param_names[IR_MAX_AXES * 2];
    long size_param_values[IR_MAX_AXES * 2];
    long steps; /* 1 when the partition has no steps() */
    /* Where the partition came from, for explain: "plan P, FILE:LINE"
     * for a plan's rule; NULL for an inline `use`. */
    const char *rule;
    /* With pipeline stages (Model.nstages > 0): the stage it runs on, the
     * devices whose coordinate on Model.stage_axis is this. */
    int stage;
} Instance;

typedef struct Model {
    Sym name;
    Span span;
    Span name_span;
    const ModelDecl *decl;
    Mesh mesh;
    int strict;
    int ntensors;
    ModelTensor *tensors;
    int ninstances;
    Instance *instances;
    /* The repeated layer block, if exactly one: instances
     * [layer_first, layer_first + layer_size * layer_count) are
     * layer_count identical copies. layer_count = 0 otherwise. */
    int layer_first, layer_size, layer_count;
    int nlayer_blocks;
    /* Pipeline stages (`stages s;`, docs/language.md): 0 without; else the
     * layer's copies in nstages runs of layer_count / nstages, run k on
     * the devices with coordinate k on mesh axis stage_axis (the
     * instances before the layer on stage 0, after it on the last). */
    int nstages;
    int stage_axis;
    int stage_copies; /* layer copies per stage */
    const ModelItem *stages_item;
    /* Micro-batches (`microbatches b: M;`): 0 without; else the model's
     * items resolved nmicro times with param b divided by nmicro, micro-batch
     * m's inputs and activations named NAME_mbM (m > 0), the weights shared;
     * instances in micro-batch order (layer_count is then 0: the layer's
     * copies per micro-batch are micro_layer_copies, which the form pass
     * folds, form_layer_copies). */
    int nmicro;
    int micro_layer_copies;
    const ModelItem *micro_item;
    /* The order of their phases (MicroOrder): GPipe's, or 1F1B's
     * (phases_order_1f1b). */
    int micro_order;
    /* `recompute` in the micro-batch clause: the backward of each stage's
     * micro-batch reads recomputed copies (ModelTensor.rc) of the layer's
     * activations, made by its forward run again just before it
     * (phases_recompute); 0 without. */
    int recompute;
    /* The model as written: decl itself for a model, the model a run's
     * plan names for a run (decl is then the run's resolved copy). */
    const ModelDecl *source;
    const RunDecl *run; /* NULL unless the model is a run */
    /* A model with no mesh and no `use`: a computation that runs through
     * its plans; not checked or built by itself (mesh.ndev is 0). */
    int computation;
    /* Its parameters' final values, in definition order. */
    int nparams;
    Sym *param_names;
    long *param_values;
} Model;

/* Everything resolve found. */
typedef struct Module {
    PtrVec ops;        /* Op* */
    PtrVec partitions; /* Partition* */
    PtrVec models;     /* Model* */
} Module;

/* Whether device `dev` (mesh coordinates coords) computes instance inst. */
static inline int instance_on_device(const Model *m, const Instance *inst, const long *coords) {
    return m->nstages == 0 || coords[m->stage_axis] == inst->stage;
}

const Op *module_find_op(const Module *module, Sym name);
/* The partition `name` of operator op; with op NULL, any partition of
 * that name. */
const Partition *module_find_partition(const Module *module, Sym name, const Op *op);

#endif
