/*
 * autodiff.c — symbolic derivatives (see autodiff.h).
 */
#include "autodiff.h"

#include <string.h>

static Expr *derive(Arena *arena, DiagSink *sink, const Expr *e, Sym wrt);

int ad_is_zero(const Expr *e) {
    return e && e->kind == EXPR_INT && e->value == 0;
}
static int is_one(const Expr *e) {
    return e && e->kind == EXPR_INT && e->value == 1;
}

static Expr *num(Arena *a, Span sp, long v) {
    return ast_new_int(a, sp, v);
}

static Expr *mul(Arena *a, Expr *x, Expr *y) {
    if (ad_is_zero(x) || ad_is_zero(y))
        return num(a, x->span, 0);
    if (is_one(x))
        return y;
    if (is_one(y))
        return x;
    return ast_new_binary(a, span_join(x->span, y->span), '*', x, y);
}

static Expr *add(Arena *a, Expr *x, Expr *y) {
    if (ad_is_zero(x))
        return y;
    if (ad_is_zero(y))
        return x;
    return ast_new_binary(a, span_join(x->span, y->span), '+', x, y);
}

static Expr *sub(Arena *a, Expr *x, Expr *y) {
    if (ad_is_zero(y))
        return x;
    if (ad_is_zero(x))
        return ast_new_neg(a, y->span, y);
    return ast_new_binary(a, span_join(x->span, y->span), '-', x, y);
}

static Expr *call1(Arena *a, Span sp, const char *name, Expr *arg) {
    Ident id = {arena_intern(a, name, strlen(name)), sp};
    PtrVec args = {0};
    ptrvec_push(a, &args, arg);
    return ast_new_call(a, sp, id, args);
}

/* The derivative of intrinsic f at u, times du. */
static Expr *chain(Arena *arena, DiagSink *sink, const Expr *call, Expr *u, Expr *du) {
    const char *f = call->name;
    Span sp = call->span;
    if (ad_is_zero(du))
        return du;
    if (call->args.count != 1) {
        diag_error(sink, call->name_span, "no derivative rule for '%s' with %d arguments", f,
                   call->args.count);
        return NULL;
    }
    Expr *d;
    if (!strcmp(f, "exp"))
        d = (Expr *)call; /* exp(u) itself, shared */
    else if (!strcmp(f, "log"))
        d = ast_new_binary(arena, sp, '/', num(arena, sp, 1), u);
    else if (!strcmp(f, "sqrt"))
        d = ast_new_binary(arena, sp, '/', num(arena, sp, 1),
                           mul(arena, num(arena, sp, 2), call1(arena, sp, "sqrt", u)));
    else if (!strcmp(f, "rsqrt"))
        d = call1(arena, sp, "rsqrt_grad", u);
    else if (!strcmp(f, "tanh"))
        d = call1(arena, sp, "tanh_grad", u);
    else if (!strcmp(f, "erf"))
        d = call1(arena, sp, "erf_grad", u);
    else if (!strcmp(f, "sigmoid"))
        d = call1(arena, sp, "sigmoid_grad", u);
    else if (!strcmp(f, "relu"))
        d = call1(arena, sp, "step", u);
    else if (!strcmp(f, "gelu"))
        d = call1(arena, sp, "gelu_grad", u);
    else if (!strcmp(f, "silu"))
        d = call1(arena, sp, "silu_grad", u);
    else if (!strcmp(f, "cos"))
        d = ast_new_neg(arena, sp, call1(arena, sp, "sin", u));
    else if (!strcmp(f, "sin"))
        d = call1(arena, sp, "cos", u);
    else if (!strcmp(f, "abs"))
        d = sub(arena, mul(arena, num(arena, sp, 2), call1(arena, sp, "step", u)),
                num(arena, sp, 1));
    else {
        diag_error(sink, call->name_span, "no derivative rule for intrinsic '%s'", f);
        return NULL;
    }
    return mul(arena, d, du);
}

static Expr *derive(Arena *arena, DiagSink *sink, const Expr *e, Sym wrt) {
    Expr *dl, *dr;
    switch (e->kind) {
    case EXPR_INT:
        return num(arena, e->span, 0);
    case EXPR_NAME:
    case EXPR_INDEX:
        return num(arena, e->span, e->name == wrt ? 1 : 0);
    case EXPR_NEG:
        dl = derive(arena, sink, e->lhs, wrt);
        if (!dl)
            return NULL;
        return ad_is_zero(dl) ? dl : ast_new_neg(arena, e->span, dl);
    case EXPR_BINARY:
        dl = derive(arena, sink, e->lhs, wrt);
        dr = derive(arena, sink, e->rhs, wrt);
        if (!dl || !dr)
            return NULL;
        switch (e->op) {
        case '+':
            return add(arena, dl, dr);
        case '-':
            return sub(arena, dl, dr);
        case '*':
            return add(arena, mul(arena, dl, e->rhs), mul(arena, e->lhs, dr));
        case '/': {
            /* (l/r)' = l'/r - l r' / r^2 */
            Expr *t1 = ad_is_zero(dl) ? dl : ast_new_binary(arena, e->span, '/', dl, e->rhs);
            Expr *t2 = ad_is_zero(dr) ? dr
                                      : ast_new_binary(arena, e->span, '/', mul(arena, e->lhs, dr),
                                                       mul(arena, e->rhs, e->rhs));
            return sub(arena, t1, t2);
        }
        default:
            diag_error(sink, e->span, "no derivative of operator '%c'", e->op);
            return NULL;
        }
    case EXPR_CALL: {
        /* size() is a constant, and eq() is piecewise constant: 0 almost
         * everywhere. */
        if (strcmp(e->name, "size") == 0 || strcmp(e->name, "eq") == 0)
            return num(arena, e->span, 0);
        /* Each argument is differentiated once: differentiating it again
         * for the chain rule would double the work at every level of
         * nested calls. */
        Expr *du = NULL;
        int constant = 1;
        for (int i = 0; i < e->args.count && constant; ++i) {
            Expr *da = derive(arena, sink, e->args.items[i], wrt);
            if (!da)
                return NULL;
            constant = ad_is_zero(da);
            du = da;
        }
        if (constant)
            return num(arena, e->span, 0);
        if (e->args.count != 1) {
            diag_error(sink, e->name_span, "no derivative rule for '%s' with %d arguments", e->name,
                       e->args.count);
            return NULL;
        }
        return chain(arena, sink, e, e->args.items[0], du);
    }
    default:
        diag_error(sink, e->span, "cannot differentiate this expression");
        return NULL;
    }
}

Expr *ad_derive(Arena *arena, DiagSink *sink, const Expr *e, Sym wrt) {
    Expr *d = derive(arena, sink, e, wrt);
    /* The derivative shares the body's subexpressions (a DAG whose size
     * is linear in the body's), but the passes after this one walk it as
     * a tree: bound the tree. */
    if (d && d->nodes > AD_MAX_NODES) {
        diag_error(sink, e->span,
                   "the derivative of this expression with respect to '%s' has %s%d operators and "
                   "operands; at most %d are supported",
                   wrt, d->nodes >= AST_COUNT_MAX ? "more than " : "", d->nodes, AD_MAX_NODES);
        return NULL;
    }
    return d;
}
