/*
 * resolve_op.c — operators: signatures (inputs, result, dimensions), body
 * statements that name known tensors, dimensions and intrinsics, stated
 * derivatives, and whether the body is a contraction or a maximum.
 */
#include <string.h>

#include "resolve_internal.h"

static const char *const intrinsics[] = {"exp",  "log",  "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
                                         "relu", "gelu", "silu", "max",   "min",  "abs", "step",
                                         "cos",  "sin",  "pow",  "eq",    NULL};

int resolve_op_dim(const Op *op, Sym name) {
    for (int d = 0; d < op->ndims; ++d)
        if (op->dims[d] == name)
            return d;
    return -1;
}

static int add_tensor(Resolver *r, Op *op, OpTensor *t, const TensorParam *tp) {
    t->name = tp->name.name;
    t->span = tp->span;
    t->ndims = 0;
    if (tp->dims.count > IR_MAX_DIMS) {
        diag_error(r->sink, tp->span, "tensor '%s' has %d dimensions; at most %d are supported",
                   tp->name.name, tp->dims.count, IR_MAX_DIMS);
        return 0;
    }
    for (int i = 0; i < tp->dims.count; ++i) {
        const Ident *dim = tp->dims.items[i];
        for (int j = 0; j < i; ++j) {
            const Ident *prev = tp->dims.items[j];
            if (prev->name == dim->name) {
                diag_error(r->sink, dim->span, "dimension '%s' appears twice in tensor '%s'",
                           dim->name, tp->name.name);
                diag_note(r->sink, prev->span, "first appearance");
                return 0;
            }
        }
        int d = resolve_op_dim(op, dim->name);
        if (d < 0) {
            if (op->ndims == IR_MAX_DIMS) {
                diag_error(r->sink, dim->span, "operator '%s' has more than %d dimensions",
                           op->name, IR_MAX_DIMS);
                return 0;
            }
            d = op->ndims++;
            op->dims[d] = dim->name;
            op->dim_spans[d] = dim->span;
        }
        t->dims[t->ndims++] = d;
    }
    return 1;
}

static const OpTensor *op_tensor(const Op *op, Sym name) {
    for (int i = 0; i < op->ninputs; ++i)
        if (op->inputs[i].name == name)
            return &op->inputs[i];
    if (op->output.name == name)
        return &op->output;
    return NULL;
}

/* Checks names inside an operator body expression. */
static int check_body_expr(Resolver *r, const Op *op, const Expr *e) {
    switch (e->kind) {
    case EXPR_INT:
        return 1;
    case EXPR_NAME:
    case EXPR_INDEX: {
        const OpTensor *t = op_tensor(op, e->name);
        if (!t && r->grad_name && e->name == r->grad_name)
            t = &op->output; /* dY has the result's dimensions */
        else if (t == &op->output && !r->grad_name) {
            /* A stated derivative may read the forward result (that of a
             * maximum needs it); the forward statement computes it. */
            diag_error(r->sink, e->name_span,
                       "the statement computing '%s' cannot read it; a stated derivative can",
                       e->name);
            return 0;
        }
        if (!t && e->kind == EXPR_NAME && resolve_op_dim(op, e->name) >= 0)
            return 1; /* a dimension's global index, as a value */
        if (!t) {
            diag_error(r->sink, e->name_span, "unknown tensor '%s' in operator '%s'", e->name,
                       op->name);
            return 0;
        }
        if (e->kind == EXPR_INDEX) {
            if (e->args.count != t->ndims) {
                diag_error(r->sink, e->span, "'%s' has %d dimensions but is indexed with %d",
                           e->name, t->ndims, e->args.count);
                return 0;
            }
            for (int i = 0; i < e->args.count; ++i) {
                const Ident *id = e->args.items[i];
                if (op->dims[t->dims[i]] != id->name) {
                    diag_error(r->sink, id->span, "dimension %d of '%s' is '%s', not '%s'", i + 1,
                               e->name, op->dims[t->dims[i]], id->name);
                    diag_note(r->sink, t->span, "'%s' is declared here", e->name);
                    return 0;
                }
            }
        }
        return 1;
    }
    case EXPR_BINARY:
        if (e->op == '%' || e->op == '^') {
            diag_error(r->sink, e->span, "operator '%c' is not allowed in an operator body", e->op);
            return 0;
        }
        return check_body_expr(r, op, e->lhs) & check_body_expr(r, op, e->rhs);
    case EXPR_NEG:
        return check_body_expr(r, op, e->lhs);
    case EXPR_CALL: {
        if (strcmp(e->name, "size") == 0) {
            const Expr *arg = e->args.count == 1 ? e->args.items[0] : NULL;
            if (!arg || arg->kind != EXPR_NAME || resolve_op_dim(op, arg->name) < 0) {
                diag_error(r->sink, e->span, "size() takes one dimension of operator '%s'",
                           op->name);
                return 0;
            }
            return 1;
        }
        int known = 0;
        for (int i = 0; intrinsics[i]; ++i)
            known |= strcmp(intrinsics[i], e->name) == 0;
        if (!known) {
            diag_error(r->sink, e->name_span, "unknown intrinsic '%s'", e->name);
            diag_note_plain(r->sink,
                            "intrinsics: exp, log, sqrt, rsqrt, tanh, erf, sigmoid, relu, "
                            "gelu, silu, max, min, abs, step, cos, sin, pow, eq, size(dim)");
            return 0;
        }
        if (strcmp(e->name, "eq") == 0 && e->args.count != 2) {
            diag_error(r->sink, e->span,
                       "eq() takes two arguments (1 where they are equal, else 0)");
            return 0;
        }
        int ok = 1;
        for (int i = 0; i < e->args.count; ++i)
            ok &= check_body_expr(r, op, e->args.items[i]);
        return ok;
    }
    case EXPR_RADIX:
        diag_error(r->sink, e->span, "a mixed-radix tuple is not allowed in an operator body");
        return 0;
    default:
        ICE("bad expression kind %d", e->kind);
    }
}

/* `Y[...] += A[...] * B[...] ...` with every input once. */
static int is_product_of_inputs(const Op *op, const Expr *e, unsigned *seen) {
    if (e->kind == EXPR_BINARY && e->op == '*')
        return is_product_of_inputs(op, e->lhs, seen) && is_product_of_inputs(op, e->rhs, seen);
    if (e->kind != EXPR_INDEX)
        return 0;
    for (int i = 0; i < op->ninputs; ++i) {
        if (op->inputs[i].name == e->name) {
            if (*seen & (1u << i))
                return 0;
            *seen |= 1u << i;
            return 1;
        }
    }
    return 0;
}

void resolve_op(Resolver *r, const OpDecl *decl) {
    Op *op = ARENA_NEW(r->arena, Op);
    op->name = decl->name.name;
    op->decl = decl;
    int ok = 1;
    if (decl->params.count > IR_MAX_INPUTS) {
        diag_error(r->sink, decl->name.span,
                   "operator '%s' has %d inputs; at most %d are supported", op->name,
                   decl->params.count, IR_MAX_INPUTS);
        return;
    }
    for (int i = 0; i < decl->params.count && ok; ++i) {
        const TensorParam *tp = decl->params.items[i];
        for (int j = 0; j < i; ++j) {
            const TensorParam *prev = decl->params.items[j];
            if (prev->name.name == tp->name.name) {
                diag_error(r->sink, tp->name.span, "tensor '%s' declared twice", tp->name.name);
                diag_note(r->sink, prev->name.span, "previous declaration");
                ok = 0;
            }
        }
        ok = ok && add_tensor(r, op, &op->inputs[op->ninputs++], tp);
    }
    if (!ok)
        return;
    for (int i = 0; i < op->ninputs; ++i) {
        if (op->inputs[i].name == decl->result->name.name) {
            diag_error(r->sink, decl->result->name.span, "result '%s' has the name of an input",
                       decl->result->name.name);
            return;
        }
    }
    int before = op->ndims;
    if (!add_tensor(r, op, &op->output, decl->result))
        return;
    if (op->ndims != before) {
        diag_error(r->sink, op->dim_spans[before],
                   "dimension '%s' of result '%s' appears in no input", op->dims[before],
                   op->output.name);
        return;
    }
    if (decl->body.count == 0) {
        diag_error(r->sink, decl->name.span, "operator '%s' has an empty body", op->name);
        return;
    }
    int nforward = 0;
    const Stmt *grads[IR_MAX_INPUTS] = {0};
    for (int i = 0; i < decl->body.count; ++i) {
        const Stmt *st = decl->body.items[i];
        if (st->kind == STMT_GRAD) {
            int which = -1;
            for (int a = 0; a < op->ninputs; ++a)
                if (op->inputs[a].name == st->target.name)
                    which = a;
            if (which < 0) {
                diag_error(r->sink, st->target.span,
                           "'grad %s': '%s' is not an input of operator '%s'", st->target.name,
                           st->target.name, op->name);
                ok = 0;
                continue;
            }
            if (grads[which]) {
                diag_error(r->sink, st->span, "the derivative of '%s' is stated twice",
                           st->target.name);
                diag_note(r->sink, grads[which]->span, "first statement");
                ok = 0;
                continue;
            }
            grads[which] = st;
            r->grad_name = arena_intern(r->arena, arena_printf(r->arena, "d%s", op->output.name),
                                        strlen(op->output.name) + 1);
            ok &= check_body_expr(r, op, st->value);
            r->grad_name = NULL;
            continue;
        }
        nforward++;
        if (st->target.name != op->output.name) {
            diag_error(r->sink, st->target.span,
                       "statement assigns '%s'; operator '%s' can only assign its result '%s'",
                       st->target.name, op->name, op->output.name);
            ok = 0;
            continue;
        }
        if (st->has_dims) {
            int match = st->target_dims.count == op->output.ndims;
            for (int x = 0; match && x < st->target_dims.count; ++x)
                match =
                    ((const Ident *)st->target_dims.items[x])->name == op->dims[op->output.dims[x]];
            if (!match) {
                diag_error(r->sink, st->span,
                           "the dimensions of '%s' here differ from its declaration",
                           st->target.name);
                diag_note(r->sink, decl->result->span, "declared here");
                ok = 0;
                continue;
            }
        }
        if (st->kind == STMT_MAX && op->output.ndims == op->ndims) {
            diag_error(r->sink, st->span,
                       "'max=' reduces no dimension: '%s' has every dimension of operator '%s'",
                       st->target.name, op->name);
            diag_note_plain(r->sink, "a maximum is taken over the dimensions absent from the "
                                     "result; write '=' for an elementwise statement");
            ok = 0;
            continue;
        }
        ok &= check_body_expr(r, op, st->value);
    }
    if (!ok)
        return;
    if (nforward == 0) {
        diag_error(r->sink, decl->name.span,
                   "operator '%s' states derivatives but computes nothing", op->name);
        return;
    }
    for (int i = 0; i < decl->body.count; ++i) {
        const Stmt *st = decl->body.items[i];
        if (st->kind != STMT_GRAD) {
            op->max_reduce = st->kind == STMT_MAX;
            break;
        }
    }
    if (nforward == 1 && decl->body.count >= 1) {
        const Stmt *st = decl->body.items[0];
        unsigned seen = 0;
        op->is_contraction = st->kind == STMT_ACCUM && is_product_of_inputs(op, st->value, &seen) &&
                             seen == (1u << op->ninputs) - 1;
    }
    ptrvec_push(r->arena, &r->module->ops, op);
}
