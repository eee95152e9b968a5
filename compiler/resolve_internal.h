/*
 * resolve_internal.h — what the resolver's files share: the resolver's
 * state, the resolution of one model declaration, and the plans the
 * runs are resolved through.
 */
#ifndef PRIMEC_RESOLVE_INTERNAL_H
#define PRIMEC_RESOLVE_INTERNAL_H

#include "resolve.h"

typedef struct Resolver {
    Arena *arena;
    DiagSink *sink;
    Module *module;
    int errors_before;
    Sym grad_name; /* inside `grad X = ...`: the incoming gradient's name (dY) */
    const ResolveOptions *opt;
    Program *const *programs;
    int nprograms;
    PtrVec renamed;    /* Sym key, Partition*: partitions by role with renamed dimensions */
    PtrVec composites; /* Composite* (compose.c) */
    PtrVec composed;   /* const ModelDecl* pairs: a written model, its composites expanded */
} Resolver;

/* The index of dimension `name` of op, or -1. */
int resolve_op_dim(const Op *op, Sym name);

/* resolve_op.c: checks one (primitive) operator declaration and adds its
 * Op to the module. */
void resolve_op(Resolver *r, const OpDecl *decl);

/* resolve_partition.c: the partitions `of` a list of operators, and the
 * partitions by role (after the others, over every operator). */
void resolve_partition_of(Resolver *r, const PartitionDecl *decl);
void resolve_partition_roles(Resolver *r, const PtrVec *roles);
/* How many bindings of the use rename a dimension (`m = s`). */
int resolve_use_renames(const UseClause *use);
/* The partition by role the use names, applied to op with the use's
 * renamings; NULL after reporting. */
const Partition *resolve_renamed_partition(Resolver *r, const Op *op, const UseClause *use);

/* Resolves one model declaration (a written model, or the copy a run or a
 * --param override makes of one) into a Model, or NULL after reporting
 * its errors. A model without a mesh is a computation. */
Model *resolve_model_decl(Resolver *r, const ModelDecl *decl);

/* Pipeline stages (resolve_stages.c): a model's `stages` item, recorded
 * with its axis (an error in it is reported and makes resolve_stages
 * fail, after the model's other items); then, once its instances are
 * bound, each instance's stage, and the checks (0 after reporting). */
void resolve_stages_item(Resolver *r, Model *m, const ModelItem *it);
/* A model's `microbatches` item: count micro-batches (LONG_MIN: its
 * expression was reported) of the parameter whose value is *value (NULL: the model
 * has none); divides it. An error is reported and makes resolve_stages
 * fail. */
void resolve_micro_item(Resolver *r, Model *m, const ModelItem *it, long *value, long count);
int resolve_stages(Resolver *r, Model *m);
/* `recompute`: an error without stages; else the recomputed copies of the
 * layer's activations (ModelTensor.rc) appended to the model's tensors.
 * Returns 0 after reporting. */
int resolve_recompute(Resolver *r, Model *m);

/* Binds the `use` clause's partition to an instance of m (its size
 * parameters unset); 0 after reporting. */
int resolve_bind_partition(Resolver *r, Model *m, Instance *inst, const UseClause *use);

/* How many times a layer block of the declaration m was resolved from
 * repeats, at m's parameter values. */
long resolve_layer_count(Resolver *r, const Model *m, const ModelItem *layer);

/* The written model of that name, its composites expanded (compose.h), or NULL. */
const ModelDecl *resolve_find_model_decl(Resolver *r, Sym name);

/* resolve_run.c: the --param overrides applied to a written model
 * (reported at its name when one names no parameter of it); decl itself
 * when there are none. NULL after an error. */
const ModelDecl *resolve_overrides(Resolver *r, const ModelDecl *decl);
/* resolve_run.c: checks the shapes and plans of the programs and
 * resolves every run into a Model of module->models. */
void resolve_plans_and_runs(Resolver *r);

/* Plans (resolve_plan.c), shared with the runs (resolve_run.c). */
/* The most plans one `extends` chain holds. */
#define PLAN_MAX_CHAIN 64
/* The most mesh sizes (names in a plan's mesh) of one plan. */
#define PLAN_MAX_SIZES (IR_MAX_AXES * 2)

typedef struct PlanChain {
    const PlanDecl *plans[PLAN_MAX_CHAIN]; /* root first */
    int n;
    const PlanDecl *mesh_plan; /* the nearest plan that declares the mesh */
    const ModelDecl *model;
} PlanChain;

/* One instance as written: in the model's top level or a layer body. */
typedef struct WrittenInstance {
    const ModelItem *item;
    const PtrVec *block;    /* the items it is one of */
    const ModelItem *layer; /* the layer block it is in; NULL at the top level */
    int index;              /* its index in block */
} WrittenInstance;

typedef struct Instances {
    WrittenInstance *items;
    int count;
    const ModelDecl *model;
} Instances;

/* A rule naming one copy of a layer body's instance, applied by
 * bind_copies (resolve_run.c) to the resolved model. */
typedef struct CopyRule {
    const PlanTarget *target; /* as written: `y_1` */
    Sym base;                 /* the body's instance (or one part of it): `y`, `y_mu` */
    const ModelItem *layer;   /* its layer block */
    long copy;
    const PlanRule *rule;
    const PlanDecl *plan;
} CopyRule;

/* The declaration of that kind and name in any program, or NULL. */
const Decl *resolve_find_decl(const Resolver *r, DeclKind kind, Sym name);
const PlanDecl *resolve_find_plan(const Resolver *r, Sym name);
/* "FILE:LINE" of a span. */
const char *resolve_where_text(const Resolver *r, Span span);
/* The chain from the plan's root to the plan; 0 after reporting (when
 * report is set) an unknown base, a cycle or an unknown model. */
int resolve_plan_chain(Resolver *r, const PlanDecl *plan, PlanChain *chain, int report);
/* The instances of a model as written, the layer bodies' included. */
void resolve_collect_instances(Resolver *r, const ModelDecl *model, Instances *in);
/* The rule that chooses each instance's partition (resolve_plan.c says
 * which wins); 0 after an error (reported from report_from on). */
int resolve_choose_rules(Resolver *r, const PlanChain *chain, const Instances *in,
                         const PlanRule **chosen, const PlanDecl **chosen_plan, PtrVec *copies,
                         int report_from);
/* Does the mesh of mesh_plan have an axis of that name? */
int resolve_mesh_has_axis(const PlanDecl *mesh_plan, Sym name);
/* Checks a plan once: its chain, its mesh, its rules against its model. */
void resolve_check_plan(Resolver *r, const PlanDecl *plan);

#endif
