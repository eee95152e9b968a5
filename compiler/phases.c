/*
 * phases.c — the phase list of a model and the einsums of its backward
 * and gradient phases (see phases.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "phases.h"

#include <string.h>

#include "autodiff.h"

const char *phase_name(PhaseKind kind) {
    static const char *const names[] = {"init", "forward", "dy-in", "backward", "gradient"};
    return kind < PHASE_KIND_COUNT ? names[kind] : "?";
}

static const Stmt *forward_stmt(const Op *op) {
    for (int i = 0; i < op->decl->body.count; ++i) {
        const Stmt *st = op->decl->body.items[i];
        if (st->kind != STMT_GRAD)
            return st;
    }
    ICE("operator '%s' has no forward statement", op->name);
}

static const Expr *body_value(const Op *op) {
    return forward_stmt(op)->value;
}

/* The derivative the operator states for input `name`, or NULL. */
static const Expr *stated_grad(const Op *op, Sym name) {
    for (int i = 0; i < op->decl->body.count; ++i) {
        const Stmt *st = op->decl->body.items[i];
        if (st->kind == STMT_GRAD && st->target.name == name)
            return st->value;
    }
    return NULL;
}

/* Whether name is dy_name. By its characters: dy_name is interned in the
 * phases' arena, which need not be the one of a stated derivative's
 * names (the planner derives the phases of one instance in an arena of
 * its own). */
static int is_dy(Sym name, Sym dy_name) {
    return name == dy_name || (name && dy_name && strcmp(name, dy_name) == 0);
}

/* Lists every tensor named in e (an input of op, or dY), once each, in
 * the order of first mention. */
static void collect_operands(Phase *ph, const Expr *e, const Op *op, Sym dy_name) {
    if (!e || (e->kind == EXPR_CALL && strcmp(e->name, "size") == 0))
        return;
    if (e->kind == EXPR_NAME && !is_dy(e->name, dy_name)) {
        int tensor_named = e->name == op->output.name;
        for (int i = 0; i < op->ninputs; ++i)
            tensor_named |= op->inputs[i].name == e->name;
        if (!tensor_named)
            return; /* a dimension index */
    }
    if (e->kind == EXPR_INDEX || e->kind == EXPR_NAME) {
        for (int i = 0; i < ph->nin; ++i)
            if (ph->in[i].name == e->name)
                return;
        const int none = PHASE_RESULT - 1;
        int input = none;
        if (is_dy(e->name, dy_name))
            input = PHASE_DY;
        else if (e->name == op->output.name)
            input = PHASE_RESULT;
        else
            for (int i = 0; i < op->ninputs; ++i)
                if (op->inputs[i].name == e->name)
                    input = i;
        if (input == none)
            ICE("tensor '%s' in the body of '%s' is not an input", e->name, op->name);
        if (ph->nin == PHASE_MAX_OPERANDS)
            ICE("too many operands");
        ph->in[ph->nin].name = e->name;
        ph->in[ph->nin].input = input;
        ph->nin++;
        return;
    }
    collect_operands(ph, e->lhs, op, dy_name);
    collect_operands(ph, e->rhs, op, dy_name);
    for (int i = 0; i < e->args.count; ++i)
        if (e->kind == EXPR_CALL || e->kind == EXPR_RADIX)
            collect_operands(ph, e->args.items[i], op, dy_name);
}

static Phase *add_phase(PhaseList *pl, PhaseKind kind, int inst) {
    Phase *ph = &pl->items[pl->count++];
    memset(ph, 0, sizeof *ph);
    ph->kind = kind;
    ph->inst = inst;
    ph->out_tensor = -1;
    ph->micro = -1;
    return ph;
}

static Sym grad_name(Arena *arena, Sym name) {
    return arena_intern(arena, arena_printf(arena, "d%s", name), strlen(name) + 1);
}

/* A tensor of op with its own dimension names, for a derived einsum. */
static Expr *tensor_ref(Arena *arena, const Op *op, const OpTensor *t, Sym name) {
    Ident id = {name, t->span};
    PtrVec dims = {0};
    for (int x = 0; x < t->ndims; ++x) {
        Ident *dim = ARENA_NEW(arena, Ident);
        dim->name = op->dims[t->dims[x]];
        dim->span = t->span;
        ptrvec_push(arena, &dims, dim);
    }
    return ast_new_index(arena, t->span, id, dims);
}

/* The derivative of Y = max over the reduced dimensions of e: de/dX
 * where e equals the maximum, 0 elsewhere. */
static Expr *max_indicator(Arena *arena, const Op *op, const Expr *e, Expr *d) {
    Span sp = op->output.span;
    Ident eq = {arena_intern(arena, "eq", 2), sp};
    PtrVec args = {0};
    ptrvec_push(arena, &args, (Expr *)e);
    ptrvec_push(arena, &args, tensor_ref(arena, op, &op->output, op->output.name));
    Expr *ind = ast_new_call(arena, sp, eq, args);
    if (d->kind == EXPR_INT && d->value == 1)
        return ind;
    return ast_new_binary(arena, sp, '*', ind, d);
}

/* The derivatives taken so far, per operator and input: every instance
 * of an operator (the copies of a repeated layer) shares one expression,
 * so the emitter's kernel key (emit_kernels.c) finds them alike. */
typedef struct Derived {
    const Op *op;
    int input;
    const Expr *expr;
} Derived;

typedef struct DerivedSet {
    int count;
    Derived *items;
} DerivedSet;

static const Expr *derived_find(const DerivedSet *set, const Op *op, int a) {
    for (int i = 0; i < set->count; ++i)
        if (set->items[i].op == op && set->items[i].input == a)
            return set->items[i].expr;
    return NULL;
}

/* dX[...] += dY[...] * (de / dX), or the derivative the operator states.
 * Returns 0 after a diagnostic. */
static int derive_input(Arena *arena, DiagSink *sink, const Instance *inst, int a, Phase *ph,
                        DerivedSet *done) {
    const Op *op = inst->op;
    const Expr *stated = stated_grad(op, op->inputs[a].name);
    const Expr *known = stated ? NULL : derived_find(done, op, a);
    if (stated) {
        ph->expr = stated;
    } else if (known) {
        ph->expr = known;
    } else {
        const Stmt *st = forward_stmt(op);
        Expr *d = ad_derive(arena, sink, st->value, op->inputs[a].name);
        if (!d)
            return 0;
        if (st->kind == STMT_MAX && !ad_is_zero(d))
            d = max_indicator(arena, op, st->value, d);
        Expr *dyref = tensor_ref(arena, op, &op->output, ph->dy_name);
        ph->expr = ast_new_binary(arena, op->output.span, '*', dyref, d);
        done->items[done->count++] = (Derived){op, a, ph->expr};
    }
    ph->wrt = a;
    ph->out = &op->inputs[a];
    ph->out_name = grad_name(arena, op->inputs[a].name);
    ph->out_tensor = inst->args[a];
    ph->out_grad = 1;
    collect_operands(ph, ph->expr, op, ph->dy_name);
    return 1;
}

PhaseList *phases_derive(Arena *arena, DiagSink *sink, const Model *model) {
    PhaseList *pl = ARENA_NEW(arena, PhaseList);
    pl->model = model;
    int n = 2;
    for (int i = 0; i < model->ninstances; ++i)
        n += 1 + model->instances[i].op->ninputs;
    pl->items = ARENA_ARRAY(arena, Phase, n);
    /* Forward in order, dY of the outputs, then backward and gradient of
     * every input of every instance in reverse order. */
    add_phase(pl, PHASE_INIT, -1);
    for (int i = 0; i < model->ninstances; ++i) {
        const Instance *inst = &model->instances[i];
        Phase *ph = add_phase(pl, PHASE_FWD, i);
        ph->expr = body_value(inst->op);
        ph->max_reduce = forward_stmt(inst->op)->kind == STMT_MAX;
        ph->out = &inst->op->output;
        ph->out_name = inst->op->output.name;
        ph->out_tensor = inst->result;
        collect_operands(ph, ph->expr, inst->op, NULL);
    }
    add_phase(pl, PHASE_DYIN, -1);
    /* has_grad[t]: t's gradient gets a contribution: dy-in's for the
     * outputs (activations nothing reads), a phase's for the others. */
    unsigned char *has_grad = ARENA_ARRAY(arena, unsigned char, model->ntensors + 1);
    memset(has_grad, 0, (size_t)model->ntensors + 1);
    for (int t = 0; t < model->ntensors; ++t)
        has_grad[t] = model->tensors[t].role == TENSOR_ACTIVATION;
    for (int i = 0; i < model->ninstances; ++i)
        for (int a = 0; a < model->instances[i].op->ninputs; ++a)
            has_grad[model->instances[i].args[a]] = 0;
    DerivedSet done = {0, ARENA_ARRAY(arena, Derived, n)};
    for (int i = model->ninstances - 1; i >= 0; --i) {
        const Instance *inst = &model->instances[i];
        Sym dy_name = grad_name(arena, inst->op->output.name);
        /* No gradient arrives at the result: every one of its inputs' is 0. */
        if (!has_grad[inst->result])
            continue;
        for (int a = 0; a < inst->op->ninputs; ++a) {
            /* A stated `grad X = 0;` stops the gradient: no phase. */
            const Expr *stated = stated_grad(inst->op, inst->op->inputs[a].name);
            if (stated && ad_is_zero(stated))
                continue;
            const ModelTensor *mt = &model->tensors[inst->args[a]];
            Phase *ph = add_phase(pl, mt->role == TENSOR_WEIGHT ? PHASE_GRAD : PHASE_BWD, i);
            ph->dy_name = dy_name;
            if (!derive_input(arena, sink, inst, a, ph, &done))
                return NULL;
            has_grad[inst->args[a]] = 1;
        }
    }
    if (model->nmicro > 1 && model->micro_order == MICRO_1F1B)
        phases_order_1f1b(arena, pl);
    if (model->recompute)
        phases_recompute(arena, pl);
    return pl;
}

/* The model's name for an operand of a phase. */
static const char *operand_model_name(const PhaseList *pl, const Phase *ph, const PhaseOperand *o) {
    const Instance *inst = &pl->model->instances[ph->inst];
    if (o->input == PHASE_DY)
        return NULL;
    int t = o->input == PHASE_RESULT ? inst->result : inst->args[o->input];
    return pl->model->tensors[phases_operand_tensor(pl->model, ph, t)].name;
}

void phases_dump(const PhaseList *pl, FILE *out) {
    const Model *model = pl->model;
    fprintf(out, "phases %s\n", model->name);
    for (int p = 0; p < pl->count; ++p) {
        const Phase *ph = &pl->items[p];
        if (ph->inst < 0) {
            fprintf(out, " %s", phase_name(ph->kind));
            if (ph->micro >= 0)
                fprintf(out, " of micro-batch %d", ph->micro);
            fprintf(out, "\n");
            continue;
        }
        const Instance *inst = &model->instances[ph->inst];
        const char *yname = model->tensors[inst->result].name;
        fprintf(out, " %s%s of %s: %s%s[",
                ph->kind == PHASE_FWD && ph->recompute ? "recomputed " : "", phase_name(ph->kind),
                inst->name, ph->out_grad ? "d" : "", model->tensors[ph->out_tensor].name);
        for (int x = 0; x < ph->out->ndims; ++x)
            fprintf(out, "%s%s", x ? ", " : "", inst->op->dims[ph->out->dims[x]]);
        fprintf(out, "] %s ", ph->max_reduce ? "max=" : "+=");
        ast_print_expr(ph->expr, out);
        for (int i = 0; i < ph->nin; ++i) {
            const char *name = operand_model_name(pl, ph, &ph->in[i]);
            fprintf(out, "%s %s = %s%s", i ? "," : "  with", ph->in[i].name, name ? "" : "d",
                    name ? name : yname);
        }
        fprintf(out, "\n");
    }
}
