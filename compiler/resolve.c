/*
 * resolve.c — names, signatures and shapes (see resolve.h): the driver
 * over every declaration, and models (params, mesh, tensors, instances,
 * layers). Operators are resolve_op.c, partitions resolve_partition.c,
 * binding an instance's partition resolve_bind.c, composite operators
 * compose.c, stages and micro-batches resolve_stages.c, plans
 * resolve_plan.c, shapes and runs resolve_run.c.
 */
#include "resolve.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "compose.h"
#include "resolve_internal.h"

const Op *module_find_op(const Module *module, Sym name) {
    for (int i = 0; i < module->ops.count; ++i) {
        const Op *op = module->ops.items[i];
        if (op->name == name)
            return op;
    }
    return NULL;
}

const Partition *module_find_partition(const Module *module, Sym name, const Op *op) {
    const Partition *any = NULL;
    for (int i = 0; i < module->partitions.count; ++i) {
        const Partition *p = module->partitions.items[i];
        if (p->name == name && (!op || p->op == op))
            return p;
        if (p->name == name && !any)
            any = p;
    }
    return op ? NULL : any;
}

static const Model *find_model(const Module *module, Sym name) {
    for (int i = 0; i < module->models.count; ++i) {
        const Model *m = module->models.items[i];
        if (m->name == name)
            return m;
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Models                                                              */

typedef struct ParamVal {
    Sym name;
    long value;
    int failed; /* its expression had an error */
    Span span;
} ParamVal;

/* A parameter expression's value, in checked 64-bit arithmetic; reports
 * (at the subexpression) and returns 0 on an unknown name, a division by
 * zero or an overflow. */
static int eval_param_expr(Resolver *r, const Expr *e, const ParamVal *params, int nparams,
                           long *out) {
    long a, b;
    switch (e->kind) {
    case EXPR_INT:
        *out = e->value;
        return 1;
    case EXPR_NAME:
        for (int i = 0; i < nparams; ++i) {
            if (params[i].name == e->name) {
                *out = params[i].value;
                return !params[i].failed; /* reported where it is defined */
            }
        }
        diag_error(r->sink, e->span, "unknown parameter '%s'", e->name);
        return 0;
    case EXPR_NEG:
        if (!eval_param_expr(r, e->lhs, params, nparams, &a))
            return 0;
        if (ast_int_neg(a, out) != AST_INT_OK) {
            diag_error(r->sink, e->span, "integer overflow: -(%ld) does not fit in 64 bits", a);
            return 0;
        }
        return 1;
    case EXPR_BINARY:
        if (!eval_param_expr(r, e->lhs, params, nparams, &a) ||
            !eval_param_expr(r, e->rhs, params, nparams, &b))
            return 0;
        switch (ast_int_op(e->op, a, b, out)) {
        case AST_INT_OK:
            return 1;
        case AST_INT_DIV_ZERO:
            diag_error(r->sink, e->span, "division by zero");
            return 0;
        case AST_INT_OVERFLOW:
            diag_error(r->sink, e->span, "integer overflow: %ld %c %ld does not fit in 64 bits", a,
                       e->op, b);
            return 0;
        }
        ICE("bad integer status");
    default:
        diag_error(r->sink, e->span, "a parameter is an integer expression");
        return 0;
    }
}

/* The most devices of a mesh. The device count is an int in the IR, and
 * a schedule's tables grow with it. (Its natural home is ir.h.) */
#define MESH_MAX_DEVICES 4096

/* The largest size of a tensor dimension: the generated program passes
 * dimension sizes to BLAS, whose sizes are 32-bit ints. */
#define RESOLVE_MAX_DIM 2147483647L
/* The most elements of one tensor. Schedules count bytes (4 per element)
 * per device, step and phase and sum them over devices, instances and
 * phases in 64-bit integers; this leaves those sums 2^26 of headroom. */
#define RESOLVE_MAX_ELEMS (1L << 36)

/* Checks that tensor t (its sizes set) has a countable number of elements,
 * reporting at where. */
static int check_elements(Resolver *r, const ModelTensor *t, Span where) {
    long n = 1;
    for (int x = 0; x < t->ndims; ++x) {
        if (__builtin_mul_overflow(n, t->sizes[x], &n)) {
            diag_error(r->sink, where,
                       "the element count of tensor '%s' overflows 64-bit integers; a tensor has "
                       "at most %ld elements",
                       t->name, RESOLVE_MAX_ELEMS);
            return 0;
        }
    }
    if (n > RESOLVE_MAX_ELEMS) {
        diag_error(r->sink, where,
                   "tensor '%s' has %ld elements; a tensor has at most %ld (2^36) elements",
                   t->name, n, RESOLVE_MAX_ELEMS);
        return 0;
    }
    return 1;
}

/* The state of one model while its items are resolved. */
typedef struct ModelCtx {
    Model *m;
    ParamVal *params;
    int nparams, param_cap;
    int tensor_cap, instance_cap;
    int have_mesh, ok;
    const ModelItem *mesh_item;
    PtrVec failed; /* Sym: results of instances that had errors (no cascades) */
    int mesh_bad;  /* the mesh had an error: partitions are not bound to it */
    int skip;      /* parts of a composite use in error still to skip */
    int micro;     /* the micro-batch whose items are being resolved (Model.nmicro) */
    /* The model's tensors by name (open addressing over interned names,
     * at most half full): index + 1, 0 for an empty slot. */
    int *by_name;
    int by_name_cap;
} ModelCtx;

/* Names inside one copy of a repeated layer: names the block defines get
 * the suffix _l (the last layer's output keeps its name), and the block's
 * input is the previous layer's output. */
typedef struct Rename {
    const ModelItem *layer;
    long index, count;
    PtrVec locals; /* Sym: names the block defines */
} Rename;

static Sym suffixed(Resolver *r, Sym name, long l) {
    const char *s = arena_printf(r->arena, "%s_%ld", name, l);
    return arena_intern(r->arena, s, strlen(s));
}

static int is_local(const Rename *rn, Sym name) {
    for (int i = 0; i < rn->locals.count; ++i)
        if (rn->locals.items[i] == name)
            return 1;
    return 0;
}

/* An input's or weight's `from "NAME" [transposed]`: a template whose
 * only placeholder is `{layer}` (inside a layer block), and a transpose of
 * a 2-D tensor only. */
static int tensor_source(Resolver *r, const ModelItem *it, ModelTensor *t, int in_layer) {
    const char *s = it->file_name;
    if (!*s) {
        diag_error(r->sink, it->file_span, "an empty safetensors name");
        return 0;
    }
    for (const char *c = s; *c; ++c) {
        if (*c != '{' && *c != '}')
            continue;
        if (*c == '{' && strncmp(c, "{layer}", 7) == 0 && in_layer) {
            c += 6;
            continue;
        }
        if (*c == '{' && strncmp(c, "{layer}", 7) == 0)
            diag_error(r->sink, it->file_span,
                       "'{layer}' names the copy of a repeated layer; '%s' is not in a layer",
                       it->name.name);
        else
            diag_error(r->sink, it->file_span,
                       "'%c' in a safetensors name: the only placeholder is '{layer}'", *c);
        return 0;
    }
    if (it->file_transposed && t->ndims != 2) {
        diag_error(r->sink, it->file_span,
                   "'transposed' needs a 2-D tensor; '%s' has %d dimension%s", it->name.name,
                   t->ndims, t->ndims == 1 ? "" : "s");
        return 0;
    }
    t->file_name = s;
    t->file_transposed = it->file_transposed;
    t->in_layer = in_layer;
    t->base = it->name.name;
    return 1;
}

static Sym layer_def(Resolver *r, const Rename *rn, Sym name) {
    if (!rn)
        return name;
    if (name == rn->layer->layer_out.name && rn->index == rn->count - 1)
        return name;
    return suffixed(r, name, rn->index);
}

static Sym layer_use(Resolver *r, const Rename *rn, Sym name) {
    if (!rn)
        return name;
    if (name == rn->layer->layer_in.name && !is_local(rn, name))
        return rn->index == 0 ? name : suffixed(r, rn->layer->layer_out.name, rn->index - 1);
    if (is_local(rn, name))
        return suffixed(r, name, rn->index);
    return name;
}

static int find_tensor(const ModelCtx *mc, Sym name);

/* In micro-batch m > 0, every name but a weight's is NAME_mbM. */
static Sym micro_name(Resolver *r, const ModelCtx *mc, Sym name, int is_def) {
    if (mc->micro == 0)
        return name;
    int t = is_def ? -1 : find_tensor(mc, name);
    if (t >= 0 && mc->m->tensors[t].role == TENSOR_WEIGHT)
        return name;
    const char *s = arena_printf(r->arena, "%s_mb%d", name, mc->micro);
    return arena_intern(r->arena, s, strlen(s));
}

static Sym map_def(Resolver *r, const ModelCtx *mc, const Rename *rn, Sym name) {
    return micro_name(r, mc, layer_def(r, rn, name), 1);
}

static Sym map_use(Resolver *r, const ModelCtx *mc, const Rename *rn, Sym name) {
    return micro_name(r, mc, layer_use(r, rn, name), 0);
}

static size_t name_slot(Sym name, int cap) {
    return (size_t)(((uintptr_t)name >> 4) * 2654435761u) & (size_t)(cap - 1);
}

static int find_tensor(const ModelCtx *mc, Sym name) {
    if (!mc->by_name_cap)
        return -1;
    for (size_t k = name_slot(name, mc->by_name_cap); mc->by_name[k];
         k = (k + 1) & (size_t)(mc->by_name_cap - 1))
        if (mc->m->tensors[mc->by_name[k] - 1].name == name)
            return mc->by_name[k] - 1;
    return -1;
}

/* Indexes the model's newest tensor by its name. */
static void index_tensor(Resolver *r, ModelCtx *mc) {
    const Model *m = mc->m;
    if (2 * m->ntensors > mc->by_name_cap) {
        mc->by_name_cap = mc->by_name_cap ? mc->by_name_cap * 2 : 64;
        mc->by_name = ARENA_ARRAY(r->arena, int, mc->by_name_cap);
        for (int t = 0; t < m->ntensors - 1; ++t) {
            size_t k = name_slot(m->tensors[t].name, mc->by_name_cap);
            while (mc->by_name[k])
                k = (k + 1) & (size_t)(mc->by_name_cap - 1);
            mc->by_name[k] = t + 1;
        }
    }
    size_t k = name_slot(m->tensors[m->ntensors - 1].name, mc->by_name_cap);
    while (mc->by_name[k])
        k = (k + 1) & (size_t)(mc->by_name_cap - 1);
    mc->by_name[k] = m->ntensors;
}

static ModelTensor *model_new_tensor(Resolver *r, ModelCtx *mc) {
    Model *m = mc->m;
    if (m->ntensors == mc->tensor_cap) {
        int cap = mc->tensor_cap ? mc->tensor_cap * 2 : 16;
        ModelTensor *t = ARENA_ARRAY(r->arena, ModelTensor, cap);
        if (m->ntensors)
            memcpy(t, m->tensors, sizeof(ModelTensor) * (size_t)m->ntensors);
        m->tensors = t;
        mc->tensor_cap = cap;
    }
    memset(&m->tensors[m->ntensors], 0, sizeof(ModelTensor));
    return &m->tensors[m->ntensors];
}

static Instance *model_new_instance(Resolver *r, ModelCtx *mc) {
    Model *m = mc->m;
    if (m->ninstances == mc->instance_cap) {
        int cap = mc->instance_cap ? mc->instance_cap * 2 : 16;
        Instance *t = ARENA_ARRAY(r->arena, Instance, cap);
        if (m->ninstances)
            memcpy(t, m->instances, sizeof(Instance) * (size_t)m->ninstances);
        m->instances = t;
        mc->instance_cap = cap;
    }
    memset(&m->instances[m->ninstances], 0, sizeof(Instance));
    return &m->instances[m->ninstances];
}

static void model_items(Resolver *r, ModelCtx *mc, const PtrVec *items, const Rename *rn);

/* An item after `it` (in the model, or in the layer being expanded) that
 * defines `name`: using it now would make the graph cyclic. */
static const ModelItem *defined_later(const ModelCtx *mc, const Rename *rn, const ModelItem *it,
                                      Sym name) {
    const PtrVec *items = rn ? &rn->layer->items : &mc->m->decl->items;
    int seen = 0;
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *x = items->items[i];
        if (x == it) {
            seen = 1;
            continue;
        }
        if (seen &&
            (x->kind == MITEM_INSTANCE || x->kind == MITEM_WEIGHT || x->kind == MITEM_INPUT) &&
            x->name.name == name)
            return x;
    }
    return NULL;
}
static void model_layer(Resolver *r, ModelCtx *mc, const ModelItem *it);

/* Reports an argument that names no tensor (unless its definition
 * failed, which was reported there). */
static void missing_arg(Resolver *r, const ModelCtx *mc, const Rename *rn, const ModelItem *it,
                        const Ident *arg) {
    const ModelItem *later = defined_later(mc, rn, it, arg->name);
    for (int f = 0; f < mc->failed.count; ++f)
        if (mc->failed.items[f] == (void *)map_use(r, mc, rn, arg->name))
            return;
    if (later) {
        diag_error(r->sink, arg->span,
                   "'%s' is used before it is defined: a model is an acyclic graph "
                   "in definition order",
                   arg->name);
        diag_note(r->sink, later->name.span, "'%s' is defined here", arg->name);
    } else {
        diag_error(r->sink, arg->span, "unknown tensor '%s'", arg->name);
    }
}

/* A composite's use (compose.c): its arguments against the composite's
 * signature; on an error its parts are skipped. */
static void model_composite(Resolver *r, ModelCtx *mc, const ModelItem *it, const Rename *rn) {
    const ModelTensor **args = ARENA_ARRAY(r->arena, const ModelTensor *, it->args.count + 1);
    for (int a = 0; a < it->args.count; ++a) {
        const Ident *arg = it->args.items[a];
        int ti = find_tensor(mc, map_use(r, mc, rn, arg->name));
        if (ti < 0) {
            missing_arg(r, mc, rn, it, arg);
            mc->ok = 0;
            mc->skip = it->nparts;
            return;
        }
        args[a] = &mc->m->tensors[ti];
    }
    if (!compose_check_use(r, it, args)) {
        mc->ok = 0;
        mc->skip = it->nparts;
        ptrvec_push(r->arena, &mc->failed, (void *)map_def(r, mc, rn, it->name.name));
    }
}

/* `microbatches b: M;`: the count's value, and b's (resolve_stages.c
 * divides it and records the item). */
static void model_micro(Resolver *r, ModelCtx *mc, const ModelItem *it) {
    long count = 0;
    long *value = NULL;
    for (int j = 0; j < mc->nparams; ++j)
        if (mc->params[j].name == it->name.name)
            value = &mc->params[j].value;
    if (!eval_param_expr(r, it->value, mc->params, mc->nparams, &count))
        count = LONG_MIN; /* reported; resolve_micro_item records the failure */
    resolve_micro_item(r, mc->m, it, value, count);
}

/* A model's mesh: its axes, sizes and device count. */
static void model_mesh(Resolver *r, ModelCtx *mc, const ModelItem *it) {
    Model *m = mc->m;
    if (mc->have_mesh) {
        diag_error(r->sink, it->span, "model '%s' declares a second mesh", m->name);
        diag_note(r->sink, mc->mesh_item->span, "first mesh");
        mc->ok = 0;
        return;
    }
    mc->have_mesh = 1;
    mc->mesh_item = it;
    m->mesh.span = it->span;
    m->mesh.ndev = 1;
    if (it->axes.count > IR_MAX_AXES) {
        diag_error(r->sink, it->span, "a mesh has at most %d axes", IR_MAX_AXES);
        mc->ok = 0;
        return;
    }
    long ndev = 1;
    int overflow = 0;
    for (int a = 0; a < it->axes.count; ++a) {
        const AxisDecl *ax = it->axes.items[a];
        long v;
        if (!eval_param_expr(r, ax->size, mc->params, mc->nparams, &v)) {
            mc->mesh_bad = 1;
            mc->ok = 0;
            continue;
        }
        if (v < 1) {
            diag_error(r->sink, ax->size->span,
                       "mesh axis '%s' has size %ld; a mesh axis has at least one device",
                       ax->name.name, v);
            mc->mesh_bad = 1;
            mc->ok = 0;
            continue;
        }
        for (int b = 0; b < m->mesh.naxes; ++b) {
            if (m->mesh.names[b] == ax->name.name) {
                diag_error(r->sink, ax->name.span, "mesh axis '%s' declared twice", ax->name.name);
                mc->ok = 0;
            }
        }
        m->mesh.names[m->mesh.naxes] = ax->name.name;
        m->mesh.sizes[m->mesh.naxes] = v;
        m->mesh.spans[m->mesh.naxes] = ax->span;
        m->mesh.naxes++;
        if (!overflow && __builtin_mul_overflow(ndev, v, &ndev))
            overflow = 1;
    }
    /* The device count is an int from here on: it is checked
     * before it is narrowed. */
    if (overflow || ndev > MESH_MAX_DEVICES) {
        if (overflow)
            diag_error(r->sink, it->span,
                       "the mesh's device count overflows 64-bit integers; a mesh has at "
                       "most %d devices",
                       MESH_MAX_DEVICES);
        else
            diag_error(r->sink, it->span, "a mesh of %ld devices is larger than the supported %d",
                       ndev, MESH_MAX_DEVICES);
        mc->mesh_bad = 1;
        mc->ok = 0;
        ndev = 1;
    }
    m->mesh.ndev = (int)ndev;
}

/* Reports `name`, defined at `at`, if the model has it already; marks
 * the model failed then. */
static int defined_twice(Resolver *r, ModelCtx *mc, Sym name, Span at) {
    int prev = find_tensor(mc, name);
    if (prev < 0)
        return 0;
    diag_error(r->sink, at, "tensor '%s' defined twice", name);
    diag_note(r->sink, mc->m->tensors[prev].span, "previous definition");
    mc->ok = 0;
    return 1;
}

/* A model's input or weight declaration (renamed in a layer or a
 * micro-batch). */
static void model_tensor(Resolver *r, ModelCtx *mc, const ModelItem *it, const Rename *rn) {
    Model *m = mc->m;
    Sym defname = map_def(r, mc, rn, it->name.name);
    if (defined_twice(r, mc, defname, it->name.span))
        return;
    ModelTensor *t = model_new_tensor(r, mc);
    t->name = defname;
    t->span = it->name.span;
    t->role = it->kind == MITEM_INPUT ? TENSOR_INPUT : TENSOR_WEIGHT;
    t->producer = -1;
    if (it->dims.count > IR_MAX_DIMS) {
        diag_error(r->sink, it->span, "at most %d dimensions", IR_MAX_DIMS);
        mc->ok = 0;
        return;
    }
    int tok = 1;
    for (int x = 0; x < it->dims.count; ++x) {
        long v;
        if (!eval_param_expr(r, it->dims.items[x], mc->params, mc->nparams, &v)) {
            tok = 0;
            continue;
        }
        if (v < 1) {
            diag_error(r->sink, ((const Expr *)it->dims.items[x])->span,
                       "dimension size %ld is not positive", v);
            tok = 0;
            continue;
        }
        if (v > RESOLVE_MAX_DIM) {
            diag_error(r->sink, ((const Expr *)it->dims.items[x])->span,
                       "dimension size %ld is larger than the supported %ld (the "
                       "generated program passes sizes to BLAS as 32-bit integers)",
                       v, (long)RESOLVE_MAX_DIM);
            tok = 0;
            continue;
        }
        t->sizes[t->ndims++] = v;
    }
    if (tok && !check_elements(r, t, it->span))
        tok = 0;
    if (!tok) {
        mc->ok = 0;
        ptrvec_push(r->arena, &mc->failed, (void *)defname); /* no cascades */
        return;
    }
    if (it->file_name && it->kind == MITEM_INPUT && m->nmicro > 1 && mc->micro == 0) {
        diag_error(r->sink, it->file_span,
                   "an input loaded from a file is not split into micro-batches");
        diag_note(r->sink, m->micro_item->span, "the micro-batches are declared here");
        mc->ok = 0;
    }
    if (it->file_name && !tensor_source(r, it, t, rn != NULL))
        mc->ok = 0; /* the tensor stays defined: no cascade */
    m->ntensors++;
    index_tensor(r, mc);
}

/* `param NAME = EXPR;` */
static void model_param(Resolver *r, ModelCtx *mc, const ModelItem *it) {
    for (int j = 0; j < mc->nparams; ++j) {
        if (mc->params[j].name == it->name.name) {
            diag_error(r->sink, it->name.span, "parameter '%s' defined twice", it->name.name);
            diag_note(r->sink, mc->params[j].span, "previous definition");
            mc->ok = 0;
        }
    }
    long v = 0;
    int failed = !eval_param_expr(r, it->value, mc->params, mc->nparams, &v);
    if (failed)
        mc->ok = 0;
    /* A parameter in error is still known, so that its uses are
     * not reported again. */
    mc->params[mc->nparams].name = it->name.name;
    mc->params[mc->nparams].value = v;
    mc->params[mc->nparams].span = it->name.span;
    mc->params[mc->nparams].failed = failed;
    mc->nparams++;
}

/* Binds instance `inst`'s arguments to the model's tensors and its
 * operator's dimensions to their sizes; 0 after an error. */
static int bind_instance_args(Resolver *r, ModelCtx *mc, const ModelItem *it, const Rename *rn,
                              Instance *inst) {
    const Model *m = mc->m;
    const Op *op = inst->op;
    int bound_by[IR_MAX_DIMS];
    for (int d = 0; d < op->ndims; ++d) {
        inst->dim_sizes[d] = -1;
        bound_by[d] = -1;
    }
    for (int a = 0; a < it->args.count; ++a) {
        const Ident *arg = it->args.items[a];
        int ti = find_tensor(mc, map_use(r, mc, rn, arg->name));
        if (ti < 0) {
            missing_arg(r, mc, rn, it, arg);
            return 0;
        }
        inst->args[a] = ti;
        const ModelTensor *mt = &m->tensors[ti];
        const OpTensor *ot = &op->inputs[a];
        if (mt->ndims != ot->ndims) {
            diag_error(r->sink, arg->span, "'%s' has %d dimensions but input '%s' of '%s' has %d",
                       arg->name, mt->ndims, ot->name, op->name, ot->ndims);
            diag_note(r->sink, mt->span, "'%s' is defined here", arg->name);
            return 0;
        }
        for (int x = 0; x < ot->ndims; ++x) {
            int d = ot->dims[x];
            if (inst->dim_sizes[d] < 0) {
                inst->dim_sizes[d] = mt->sizes[x];
                bound_by[d] = a;
            } else if (inst->dim_sizes[d] != mt->sizes[x]) {
                const Ident *first = it->args.items[bound_by[d]];
                diag_error(r->sink, arg->span,
                           "shape mismatch: dimension '%s' of '%s' is %ld in '%s' but %ld in '%s'",
                           op->dims[d], op->name, mt->sizes[x], arg->name, inst->dim_sizes[d],
                           first->name);
                diag_note(r->sink, first->span, "'%s' gives '%s' = %ld here", first->name,
                          op->dims[d], inst->dim_sizes[d]);
                return 0;
            }
        }
    }
    return 1;
}

/* An operator instance `NAME = OP(ARGS) [use PARTITION];`. */
static void model_instance(Resolver *r, ModelCtx *mc, const ModelItem *it, const Rename *rn) {
    Model *m = mc->m;
    const Op *op = module_find_op(r->module, it->op.name);
    if (!op) {
        diag_error(r->sink, it->op.span, "unknown operator '%s'", it->op.name);
        mc->ok = 0;
        return;
    }
    Sym defname = map_def(r, mc, rn, it->name.name);
    if (defined_twice(r, mc, defname, it->name.span))
        return;
    if (it->args.count != op->ninputs) {
        diag_error(r->sink, it->span, "operator '%s' takes %d inputs, %d given", op->name,
                   op->ninputs, it->args.count);
        diag_note(r->sink, op->decl->name.span, "'%s' is declared here", op->name);
        mc->ok = 0;
        return;
    }
    Instance *inst = model_new_instance(r, mc);
    inst->name = defname;
    inst->span = it->site ? it->site->span : it->span; /* a part: its use */
    inst->op = op;
    int iok = bind_instance_args(r, mc, it, rn, inst);
    if (!iok) {
        mc->ok = 0;
        ptrvec_push(r->arena, &mc->failed, (void *)defname);
        return;
    }
    ModelTensor *t = model_new_tensor(r, mc);
    t->name = defname;
    t->span = it->name.span;
    t->role = TENSOR_ACTIVATION;
    t->producer = m->ninstances;
    t->ndims = op->output.ndims;
    for (int x = 0; x < op->output.ndims; ++x)
        t->sizes[x] = inst->dim_sizes[op->output.dims[x]];
    if (!check_elements(r, t, it->span)) {
        mc->ok = 0;
        ptrvec_push(r->arena, &mc->failed, (void *)defname);
        return;
    }
    inst->result = m->ntensors;
    if (it->use && mc->mesh_bad) {
        mc->ok = 0; /* reported at the mesh */
        return;
    }
    if (it->use) {
        if (!mc->have_mesh) {
            diag_error(r->sink, it->use->span, "'use' needs the model's mesh declared before it");
            mc->ok = 0;
            return;
        }
        if (!resolve_bind_partition(r, m, inst, it->use)) {
            mc->ok = 0;
            return;
        }
    }
    m->ntensors++;
    index_tensor(r, mc);
    m->ninstances++;
}

static void model_item(Resolver *r, ModelCtx *mc, const ModelItem *it, const Rename *rn) {
    if (rn && (it->kind == MITEM_PARAM || it->kind == MITEM_MESH || it->kind == MITEM_STRICT ||
               it->kind == MITEM_STAGES || it->kind == MITEM_MICRO || it->kind == MITEM_LAYER ||
               it->kind == MITEM_INPUT)) {
        if (rn->index == 0)
            diag_error(r->sink, it->span,
                       "only weights and operator instances may appear inside a layer");
        mc->ok = 0;
        return;
    }
    if (mc->micro > 0 && it->kind != MITEM_INPUT && it->kind != MITEM_INSTANCE &&
        it->kind != MITEM_COMPOSITE && it->kind != MITEM_LAYER)
        return; /* a later micro-batch: the params, mesh and weights are the first's */
    switch (it->kind) {
    case MITEM_PARAM:
        model_param(r, mc, it);
        break;
    case MITEM_MESH:
        model_mesh(r, mc, it);
        break;
    case MITEM_INPUT:
    case MITEM_WEIGHT:
        model_tensor(r, mc, it, rn);
        break;
    case MITEM_INSTANCE:
        model_instance(r, mc, it, rn);
        break;
    case MITEM_STRICT:
        mc->m->strict = 1;
        break;
    case MITEM_STAGES:
        resolve_stages_item(r, mc->m, it);
        break;
    case MITEM_MICRO:
        model_micro(r, mc, it);
        break;
    case MITEM_COMPOSITE:
        model_composite(r, mc, it, rn);
        break;
    case MITEM_LAYER:
        model_layer(r, mc, it);
        break;
    }
}

static void model_items(Resolver *r, ModelCtx *mc, const PtrVec *items, const Rename *rn) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (mc->skip && it->kind == MITEM_INSTANCE) { /* a part of a composite in error */
            mc->skip--;
            ptrvec_push(r->arena, &mc->failed, (void *)map_def(r, mc, rn, it->name.name));
            continue;
        }
        model_item(r, mc, it, rn);
    }
}

static void model_layer(Resolver *r, ModelCtx *mc, const ModelItem *it) {
    long count;
    if (!eval_param_expr(r, it->repeat, mc->params, mc->nparams, &count)) {
        mc->ok = 0;
        return;
    }
    if (count < 1 || count > 1024) {
        diag_error(r->sink, it->repeat->span, "a layer repeats 1 to 1024 times, not %ld", count);
        mc->ok = 0;
        return;
    }
    Rename rn;
    memset(&rn, 0, sizeof rn);
    rn.layer = it;
    rn.count = count;
    int defines_out = 0;
    for (int i = 0; i < it->items.count; ++i) {
        const ModelItem *sub = it->items.items[i];
        if (sub->kind == MITEM_WEIGHT || sub->kind == MITEM_INSTANCE) {
            ptrvec_push(r->arena, &rn.locals, (void *)sub->name.name);
            defines_out |= sub->name.name == it->layer_out.name;
        }
    }
    if (!defines_out) {
        diag_error(r->sink, it->layer_out.span, "the layer never defines its output '%s'",
                   it->layer_out.name);
        mc->ok = 0;
        return;
    }
    int first = mc->m->ninstances;
    for (long l = 0; l < count && mc->ok; ++l) {
        rn.index = l;
        model_items(r, mc, &it->items, &rn);
    }
    /* A copy that failed (reported there) leaves the layer's output
     * undefined: its uses after the layer are no errors of their own. */
    if (!mc->ok)
        ptrvec_push(r->arena, &mc->failed, (void *)map_def(r, mc, NULL, it->layer_out.name));
    Model *m = mc->m;
    if (mc->micro > 0)
        return; /* the first micro-batch's block is the model's */
    m->nlayer_blocks++;
    m->layer_first = first;
    m->layer_count = (int)count;
    m->layer_size = (m->ninstances - first) / (int)count;
    if (m->nlayer_blocks > 1 || m->layer_size * (int)count != m->ninstances - first)
        m->layer_count = 0;
}

Model *resolve_model_decl(Resolver *r, const ModelDecl *decl) {
    Model *m = ARENA_NEW(r->arena, Model);
    m->name = decl->name.name;
    m->span = decl->span;
    m->name_span = decl->name.span;
    m->decl = decl;
    m->source = decl;
    ModelCtx ctx, *mc = &ctx;
    memset(mc, 0, sizeof ctx);
    mc->m = m;
    mc->ok = 1;
    mc->params = ARENA_ARRAY(r->arena, ParamVal, decl->items.count + 1);
    model_items(r, mc, &decl->items, NULL);
    for (mc->micro = 1; mc->ok && mc->micro < m->nmicro; ++mc->micro)
        model_items(r, mc, &decl->items, NULL);
    if (!mc->ok)
        return NULL;
    if (!resolve_stages(r, m) || !resolve_recompute(r, m))
        return NULL;
    /* No mesh: a computation (a `use` without a mesh was reported). */
    m->computation = !mc->have_mesh;
    m->nparams = mc->nparams;
    m->param_names = ARENA_ARRAY(r->arena, Sym, mc->nparams + 1);
    m->param_values = ARENA_ARRAY(r->arena, long, mc->nparams + 1);
    for (int i = 0; i < mc->nparams; ++i) {
        m->param_names[i] = mc->params[i].name;
        m->param_values[i] = mc->params[i].value;
    }
    return m;
}

static void resolve_model(Resolver *r, const ModelDecl *written) {
    /* Composites expanded: plan_write and explain see the parts. */
    const ModelDecl *decl = compose_model(r, written);
    const ModelDecl *with = resolve_overrides(r, decl);
    Model *m = with ? resolve_model_decl(r, with) : NULL;
    if (m) {
        m->source = decl;
        ptrvec_push(r->arena, &r->module->models, m);
    }
}

long resolve_layer_count(Resolver *r, const Model *m, const ModelItem *layer) {
    ParamVal *params = ARENA_ARRAY(r->arena, ParamVal, m->nparams + 1);
    for (int i = 0; i < m->nparams; ++i)
        params[i] = (ParamVal){.name = m->param_names[i], .value = m->param_values[i]};
    long count;
    if (!eval_param_expr(r, layer->repeat, params, m->nparams, &count))
        ICE("the repeat count of a layer of the resolved model '%s' does not evaluate", m->name);
    return count;
}

const ModelDecl *resolve_find_model_decl(Resolver *r, Sym name) {
    for (int f = 0; f < r->nprograms; ++f) {
        for (int i = 0; i < r->programs[f]->decls.count; ++i) {
            const Decl *d = r->programs[f]->decls.items[i];
            if (d->kind == DECL_MODEL && d->model->name.name == name)
                return compose_model(r, d->model);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ */

static Span decl_name_span(const Decl *d) {
    switch (d->kind) {
    case DECL_OP:
        return d->op->name.span;
    case DECL_PARTITION:
        return d->partition->name.span;
    case DECL_MODEL:
        return d->model->name.span;
    default:
        return d->span;
    }
}

int resolve_programs(Arena *arena, DiagSink *sink, Program *const *programs, int nprograms,
                     Module *module) {
    return resolve_programs_with(arena, sink, programs, nprograms, module, NULL);
}

int resolve_programs_with(Arena *arena, DiagSink *sink, Program *const *programs, int nprograms,
                          Module *module, const ResolveOptions *opt) {
    static const ResolveOptions none = {0};
    Resolver r = {.arena = arena,
                  .sink = sink,
                  .module = module,
                  .errors_before = sink->error_count,
                  .opt = opt ? opt : &none,
                  .programs = programs,
                  .nprograms = nprograms};
    memset(module, 0, sizeof *module);
    PtrVec roles = {0}; /* PartitionDecl* without `of`: expanded after the others */
    /* Operators first (partitions refer to them), in file order. */
    for (int kind = DECL_OP; kind <= DECL_MODEL; ++kind) {
        if (kind == DECL_PARTITION)
            compose_declare(&r);
        if (kind == DECL_MODEL)
            resolve_partition_roles(&r, &roles);
        for (int f = 0; f < nprograms; ++f) {
            for (int i = 0; i < programs[f]->decls.count; ++i) {
                const Decl *d = programs[f]->decls.items[i];
                if ((int)d->kind != kind)
                    continue;
                if (kind == DECL_OP && d->op->is_composite)
                    continue; /* compose_declare */
                if (kind == DECL_PARTITION) {
                    if (d->partition->of_ops.count)
                        resolve_partition_of(&r, d->partition);
                    else
                        ptrvec_push(r.arena, &roles, (void *)d->partition);
                    continue;
                }
                Sym name = kind == DECL_OP          ? d->op->name.name
                           : kind == DECL_PARTITION ? d->partition->name.name
                                                    : d->model->name.name;
                const void *prev = kind == DECL_OP ? (const void *)module_find_op(module, name)
                                                   : (const void *)find_model(module, name);
                if (prev) {
                    Span prev_span = kind == DECL_OP ? ((const Op *)prev)->decl->name.span
                                                     : ((const Model *)prev)->decl->name.span;
                    diag_error(sink, decl_name_span(d), "%s '%s' is defined twice",
                               kind == DECL_OP ? "operator" : "model", name);
                    diag_note(sink, prev_span, "previous definition");
                    continue;
                }
                if (kind == DECL_OP)
                    resolve_op(&r, d->op);
                else
                    resolve_model(&r, d->model);
            }
        }
    }
    resolve_plans_and_runs(&r);
    return sink->error_count == r.errors_before;
}

void resolve_dump(const Module *module, FILE *out) {
    for (int i = 0; i < module->ops.count; ++i) {
        const Op *op = module->ops.items[i];
        fprintf(out, "op %s dims(", op->name);
        for (int d = 0; d < op->ndims; ++d)
            fprintf(out, "%s%s", d ? " " : "", op->dims[d]);
        fprintf(out, ") %s\n",
                op->is_contraction ? "contraction"
                : op->max_reduce   ? "maximum"
                                   : "elementwise");
    }
    for (int i = 0; i < module->partitions.count; ++i) {
        const Partition *p = module->partitions.items[i];
        fprintf(out, "partition %s of %s axes(", p->name, p->op->name);
        for (int a = 0; a < p->naxes; ++a)
            fprintf(out, "%s%s", a ? " " : "", p->axes[a]->name.name);
        fprintf(out, ")%s%s", p->steps ? " steps " : "", p->steps ? p->steps->name.name : "");
        for (int d = 0; d < p->op->ndims; ++d) {
            if (!p->dsi[d])
                continue;
            fprintf(out, " %s=", p->op->dims[d]);
            ast_print_expr(p->dsi[d]->value, out);
        }
        fprintf(out, "\n");
    }
    for (int i = 0; i < module->models.count; ++i) {
        const Model *m = module->models.items[i];
        fprintf(out, "model %s mesh(", m->name);
        for (int a = 0; a < m->mesh.naxes; ++a)
            fprintf(out, "%s%s:%ld", a ? " " : "", m->mesh.names[a], m->mesh.sizes[a]);
        fprintf(out, ") devices %d%s%s", m->mesh.ndev, m->strict ? " strict" : "",
                m->computation ? " computation" : "");
        if (m->nstages)
            fprintf(out, " stages %s:%d", m->mesh.names[m->stage_axis], m->nstages);
        if (m->nmicro)
            fprintf(out, " microbatches %s:%d%s", m->micro_item->name.name, m->nmicro,
                    m->micro_order == MICRO_1F1B ? " 1f1b" : "");
        if (m->recompute)
            fprintf(out, " recompute");
        fprintf(out, "\n");
        for (int t = 0; t < m->ntensors; ++t) {
            const ModelTensor *mt = &m->tensors[t];
            fprintf(out, "  tensor %s %s [", mt->name,
                    mt->role == TENSOR_INPUT    ? "input"
                    : mt->role == TENSOR_WEIGHT ? "weight"
                                                : "activation");
            for (int x = 0; x < mt->ndims; ++x)
                fprintf(out, "%s%ld", x ? ", " : "", mt->sizes[x]);
            fprintf(out, mt->is_rc ? "] recomputed\n" : "]\n");
        }
        for (int k = 0; k < m->ninstances; ++k) {
            const Instance *inst = &m->instances[k];
            fprintf(out, "  instance %s = %s(", inst->name, inst->op->name);
            for (int a = 0; a < inst->op->ninputs; ++a)
                fprintf(out, "%s%s", a ? ", " : "", m->tensors[inst->args[a]].name);
            fprintf(out, ") use %s steps %ld", inst->partition ? inst->partition->name : "(none)",
                    inst->steps);
            fprintf(out, m->nstages ? " stage %d\n" : "\n", inst->stage);
        }
    }
}
