/*
 * ast.c — AST constructors, the S-expression dump and the expression
 * printer.
 *
 * The dump (ast_dump_program) is the text of `--dump-after=parse` and of
 * the parser's golden tests: one declaration or item per line, indented
 * two spaces per level, expressions inline as (op lhs rhs). It prints
 * nodes in source order and no addresses or positions, so it is
 * deterministic. ast_print_expr prints source text with the fewest
 * parentheses that keep the tree's shape.
 */
#include "ast.h"

#include "diag.h"

#include <limits.h>
#include <string.h>

static const char *const expr_kind_names[] = {
#define X(kind, name) name,
#include "ast.def"
#undef X
};

const char *ast_expr_kind_name(ExprKind kind) {
    if ((int)kind < 0 || kind >= EXPR_KIND_COUNT)
        return "?";
    return expr_kind_names[kind];
}

/* ---- constructors ---------------------------------------------------- */

static Expr *new_expr(Arena *a, ExprKind kind, Span span) {
    Expr *e = ARENA_NEW(a, Expr);
    e->kind = kind;
    e->span = span;
    e->depth = 1;
    e->nodes = 1;
    return e;
}

static int count_add(int a, int b) {
    return a > AST_COUNT_MAX - b ? AST_COUNT_MAX : a + b;
}

/* Accounts for child as an operand of e. */
static void add_child(Expr *e, const Expr *child) {
    if (!child)
        return;
    if (child->depth >= e->depth)
        e->depth = count_add(child->depth, 1);
    e->nodes = count_add(e->nodes, child->nodes);
}

Expr *ast_new_int(Arena *a, Span span, long value) {
    Expr *e = new_expr(a, EXPR_INT, span);
    e->value = value;
    return e;
}

Expr *ast_new_name(Arena *a, Ident name) {
    Expr *e = new_expr(a, EXPR_NAME, name.span);
    e->name = name.name;
    e->name_span = name.span;
    return e;
}

Expr *ast_new_index(Arena *a, Span span, Ident name, PtrVec dims) {
    Expr *e = new_expr(a, EXPR_INDEX, span);
    e->name = name.name;
    e->name_span = name.span;
    e->args = dims;
    return e;
}

Expr *ast_new_binary(Arena *a, Span span, char op, Expr *lhs, Expr *rhs) {
    Expr *e = new_expr(a, EXPR_BINARY, span);
    e->op = op;
    e->lhs = lhs;
    e->rhs = rhs;
    add_child(e, lhs);
    add_child(e, rhs);
    return e;
}

Expr *ast_new_neg(Arena *a, Span span, Expr *operand) {
    Expr *e = new_expr(a, EXPR_NEG, span);
    e->lhs = operand;
    add_child(e, operand);
    return e;
}

Expr *ast_new_call(Arena *a, Span span, Ident name, PtrVec args) {
    Expr *e = new_expr(a, EXPR_CALL, span);
    e->name = name.name;
    e->name_span = name.span;
    e->args = args;
    for (int i = 0; i < args.count; i++)
        add_child(e, args.items[i]);
    return e;
}

Expr *ast_new_radix(Arena *a, Span span, PtrVec parts) {
    Expr *e = new_expr(a, EXPR_RADIX, span);
    e->args = parts;
    for (int i = 0; i < parts.count; i++)
        add_child(e, parts.items[i]);
    return e;
}

Ident *ast_new_ident(Arena *a, Ident ident) {
    Ident *id = ARENA_NEW(a, Ident);
    *id = ident;
    return id;
}

TensorParam *ast_new_tensor_param(Arena *a, Span span, Ident name, PtrVec dims) {
    TensorParam *t = ARENA_NEW(a, TensorParam);
    t->name = name;
    t->dims = dims;
    t->span = span;
    return t;
}

Stmt *ast_new_stmt(Arena *a, Span span, StmtKind kind, Ident target, int has_dims, PtrVec dims,
                   Expr *value) {
    Stmt *s = ARENA_NEW(a, Stmt);
    s->kind = kind;
    s->span = span;
    s->target = target;
    s->has_dims = has_dims;
    s->target_dims = dims;
    s->value = value;
    return s;
}

OpDecl *ast_new_op(Arena *a, Span span, Ident name, PtrVec params, TensorParam *result,
                   PtrVec body) {
    OpDecl *op = ARENA_NEW(a, OpDecl);
    op->name = name;
    op->span = span;
    op->params = params;
    op->result = result;
    op->body = body;
    return op;
}

OpDecl *ast_new_composite(Arena *a, Span span, Ident name, PtrVec params, TensorParam *result,
                          PtrVec parts) {
    OpDecl *op = ast_new_op(a, span, name, params, result, (PtrVec){0});
    op->is_composite = 1;
    op->parts = parts;
    return op;
}

AxisDecl *ast_new_axis(Arena *a, Span span, Ident name, Expr *size) {
    AxisDecl *ax = ARENA_NEW(a, AxisDecl);
    ax->name = name;
    ax->size = size;
    ax->span = span;
    return ax;
}

DsiAssign *ast_new_dsi(Arena *a, Span span, Ident dim, Expr *value) {
    DsiAssign *d = ARENA_NEW(a, DsiAssign);
    d->dim = dim;
    d->value = value;
    d->span = span;
    return d;
}

PartitionDecl *ast_new_partition(Arena *a, Span span, Ident name, PtrVec of_ops, PtrVec mesh,
                                 AxisDecl *steps, PtrVec dsis) {
    PartitionDecl *p = ARENA_NEW(a, PartitionDecl);
    p->name = name;
    p->span = span;
    p->of_ops = of_ops;
    if (of_ops.count)
        p->of_op = *(const Ident *)of_ops.items[0];
    p->mesh = mesh;
    p->steps = steps;
    p->dsis = dsis;
    return p;
}

static ModelItem *new_item(Arena *a, ModelItemKind kind, Span span) {
    ModelItem *it = ARENA_NEW(a, ModelItem);
    it->kind = kind;
    it->span = span;
    return it;
}

ModelItem *ast_new_param_item(Arena *a, Span span, Ident name, Expr *value) {
    ModelItem *it = new_item(a, MITEM_PARAM, span);
    it->name = name;
    it->value = value;
    return it;
}

ModelItem *ast_new_mesh_item(Arena *a, Span span, PtrVec axes) {
    ModelItem *it = new_item(a, MITEM_MESH, span);
    it->axes = axes;
    return it;
}

ModelItem *ast_new_tensor_item(Arena *a, Span span, ModelItemKind kind, Ident name, PtrVec dims) {
    ModelItem *it = new_item(a, kind, span);
    it->name = name;
    it->dims = dims;
    return it;
}

ModelItem *ast_set_tensor_source(ModelItem *it, const TensorSource *source) {
    if (source && source->name) {
        it->file_name = source->name;
        it->file_span = source->span;
        it->file_transposed = source->transposed;
    }
    return it;
}

ModelItem *ast_new_instance_item(Arena *a, Span span, Ident result, Ident op, PtrVec args,
                                 UseClause *use) {
    ModelItem *it = new_item(a, MITEM_INSTANCE, span);
    it->name = result;
    it->op = op;
    it->args = args;
    it->use = use;
    return it;
}

ModelItem *ast_new_strict_item(Arena *a, Span span) {
    return new_item(a, MITEM_STRICT, span);
}

ModelItem *ast_new_micro_item(Arena *a, Span span, Ident param, Expr *count, int order) {
    ModelItem *it = new_item(a, MITEM_MICRO, span);
    it->name = param;
    it->value = count;
    it->order = order;
    return it;
}

ModelItem *ast_set_micro_recompute(ModelItem *it, Span word) {
    if (it) {
        it->recompute = 1;
        it->recompute_span = word;
    }
    return it;
}

ModelItem *ast_new_stages_item(Arena *a, Span span, Ident axis) {
    ModelItem *it = new_item(a, MITEM_STAGES, span);
    it->name = axis;
    return it;
}

ModelItem *ast_new_layer_item(Arena *a, Span span, Ident in, Ident out, Expr *repeat,
                              PtrVec items) {
    ModelItem *it = new_item(a, MITEM_LAYER, span);
    it->layer_in = in;
    it->layer_out = out;
    it->repeat = repeat;
    it->items = items;
    return it;
}

UseClause *ast_new_use(Arena *a, Span span, Ident partition, PtrVec bindings) {
    UseClause *u = ARENA_NEW(a, UseClause);
    u->partition = partition;
    u->bindings = bindings;
    u->span = span;
    return u;
}

AxisBinding *ast_new_binding(Arena *a, Span span, Ident part_axis, Ident mesh_axis) {
    AxisBinding *b = ARENA_NEW(a, AxisBinding);
    b->part_axis = part_axis;
    b->mesh_axis = mesh_axis;
    b->span = span;
    return b;
}

AxisBinding *ast_new_rename(Arena *a, Span span, Ident part_dim, Ident op_dim) {
    AxisBinding *b = ast_new_binding(a, span, part_dim, op_dim);
    b->is_rename = 1;
    return b;
}

ModelDecl *ast_new_model(Arena *a, Span span, Ident name, PtrVec items) {
    ModelDecl *m = ARENA_NEW(a, ModelDecl);
    m->name = name;
    m->span = span;
    m->items = items;
    return m;
}

Decl *ast_new_decl(Arena *a, DeclKind kind, Span span) {
    Decl *d = ARENA_NEW(a, Decl);
    d->kind = kind;
    d->span = span;
    return d;
}

Decl *ast_new_op_decl(Arena *a, OpDecl *op) {
    Decl *d = ast_new_decl(a, DECL_OP, op->span);
    d->op = op;
    return d;
}

Decl *ast_new_partition_decl(Arena *a, PartitionDecl *partition) {
    Decl *d = ast_new_decl(a, DECL_PARTITION, partition->span);
    d->partition = partition;
    return d;
}

Decl *ast_new_model_decl(Arena *a, ModelDecl *model) {
    Decl *d = ast_new_decl(a, DECL_MODEL, model->span);
    d->model = model;
    return d;
}

Decl *ast_new_import_decl(Arena *a, Span span, const char *path, Span path_span) {
    Decl *d = ast_new_decl(a, DECL_IMPORT, span);
    d->import = ARENA_NEW(a, ImportDecl);
    d->import->path = path;
    d->import->path_span = path_span;
    return d;
}

/* ---- S-expression dump ----------------------------------------------- */

static void indent(FILE *out, int level) {
    fputc('\n', out);
    for (int i = 0; i < level; i++)
        fputs("  ", out);
}

void ast_dump_expr(const Expr *e, FILE *out) {
    if (!e) {
        fputs("<null>", out);
        return;
    }
    switch (e->kind) {
    case EXPR_INT:
        fprintf(out, "%ld", e->value);
        return;
    case EXPR_NAME:
        fputs(e->name, out);
        return;
    case EXPR_INDEX:
        fprintf(out, "(%s %s", ast_expr_kind_name(e->kind), e->name);
        for (int i = 0; i < e->args.count; i++)
            fprintf(out, " %s", ((const Ident *)e->args.items[i])->name);
        fputc(')', out);
        return;
    case EXPR_BINARY:
        fprintf(out, "(%c ", e->op);
        ast_dump_expr(e->lhs, out);
        fputc(' ', out);
        ast_dump_expr(e->rhs, out);
        fputc(')', out);
        return;
    case EXPR_NEG:
        fprintf(out, "(%s ", ast_expr_kind_name(e->kind));
        ast_dump_expr(e->lhs, out);
        fputc(')', out);
        return;
    case EXPR_CALL:
    case EXPR_RADIX:
        fprintf(out, "(%s", ast_expr_kind_name(e->kind));
        if (e->kind == EXPR_CALL)
            fprintf(out, " %s", e->name);
        for (int i = 0; i < e->args.count; i++) {
            fputc(' ', out);
            ast_dump_expr(e->args.items[i], out);
        }
        fputc(')', out);
        return;
    case EXPR_KIND_COUNT:
        break;
    }
    fputs("<bad expr>", out);
}

/* [a b c] from a PtrVec of Ident*. */
static void dump_idents(const PtrVec *v, FILE *out) {
    fputc('[', out);
    for (int i = 0; i < v->count; i++) {
        if (i)
            fputc(' ', out);
        fputs(((const Ident *)v->items[i])->name, out);
    }
    fputc(']', out);
}

static void dump_tensor(const char *head, const TensorParam *t, FILE *out) {
    fprintf(out, "(%s %s ", head, t->name.name);
    dump_idents(&t->dims, out);
    fputc(')', out);
}

static void dump_axis(const AxisDecl *ax, FILE *out) {
    fprintf(out, "(%s ", ax->name.name);
    ast_dump_expr(ax->size, out);
    fputc(')', out);
}

static void dump_axes(const char *head, const PtrVec *axes, FILE *out) {
    fprintf(out, "(%s", head);
    for (int i = 0; i < axes->count; i++) {
        fputc(' ', out);
        dump_axis(axes->items[i], out);
    }
    fputc(')', out);
}

static void dump_string(const char *s, FILE *out) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void dump_item(const ModelItem *it, FILE *out);

static void dump_op(const OpDecl *op, FILE *out, int level) {
    fprintf(out, "(%s %s", op->is_composite ? "composite" : "op", op->name.name);
    for (int i = 0; i < op->params.count; i++) {
        indent(out, level + 1);
        dump_tensor("in", op->params.items[i], out);
    }
    if (op->result) {
        indent(out, level + 1);
        dump_tensor("out", op->result, out);
    }
    for (int i = 0; i < op->body.count; i++) {
        const Stmt *s = op->body.items[i];
        indent(out, level + 1);
        fprintf(out, "(%s %s ",
                s->kind == STMT_ACCUM  ? "+="
                : s->kind == STMT_MAX  ? "max="
                : s->kind == STMT_GRAD ? "grad"
                                       : "=",
                s->target.name);
        if (s->has_dims) {
            dump_idents(&s->target_dims, out);
            fputc(' ', out);
        }
        ast_dump_expr(s->value, out);
        fputc(')', out);
    }
    for (int i = 0; i < op->parts.count; i++) {
        indent(out, level + 1);
        dump_item(op->parts.items[i], out);
    }
    fputc(')', out);
}

static void dump_partition(const PartitionDecl *p, FILE *out, int level) {
    fprintf(out, "(partition %s (of", p->name.name);
    for (int i = 0; i < p->of_ops.count; ++i)
        fprintf(out, " %s", ((const Ident *)p->of_ops.items[i])->name);
    fprintf(out, "%s)", p->of_ops.count ? "" : " *");
    indent(out, level + 1);
    dump_axes("mesh", &p->mesh, out);
    if (p->steps) {
        indent(out, level + 1);
        fputs("(steps ", out);
        dump_axis(p->steps, out);
        fputc(')', out);
    }
    for (int i = 0; i < p->dsis.count; i++) {
        const DsiAssign *d = p->dsis.items[i];
        indent(out, level + 1);
        fprintf(out, "(dsi %s ", d->dim.name);
        ast_dump_expr(d->value, out);
        fputc(')', out);
    }
    fputc(')', out);
}

static void dump_item(const ModelItem *it, FILE *out) {
    switch (it->kind) {
    case MITEM_PARAM:
        fprintf(out, "(param %s ", it->name.name);
        ast_dump_expr(it->value, out);
        fputc(')', out);
        return;
    case MITEM_MESH:
        dump_axes("mesh", &it->axes, out);
        return;
    case MITEM_INPUT:
    case MITEM_WEIGHT:
        fprintf(out, "(%s %s [", it->kind == MITEM_INPUT ? "input" : "weight", it->name.name);
        for (int i = 0; i < it->dims.count; i++) {
            if (i)
                fputc(' ', out);
            ast_dump_expr(it->dims.items[i], out);
        }
        fputc(']', out);
        if (it->file_name)
            fprintf(out, " (from \"%s\"%s)", it->file_name,
                    it->file_transposed ? " transposed" : "");
        fputc(')', out);
        return;
    case MITEM_INSTANCE:
        fprintf(out, "(instance %s (%s", it->name.name, it->op.name);
        for (int i = 0; i < it->args.count; i++)
            fprintf(out, " %s", ((const Ident *)it->args.items[i])->name);
        fputc(')', out);
        if (it->use) {
            fprintf(out, " (use %s", it->use->partition.name);
            for (int i = 0; i < it->use->bindings.count; i++) {
                const AxisBinding *b = it->use->bindings.items[i];
                fprintf(out, b->is_rename ? " (rename %s %s)" : " (%s %s)", b->part_axis.name,
                        b->mesh_axis.name);
            }
            fputc(')', out);
        }
        fputc(')', out);
        return;
    case MITEM_STRICT:
        fputs("(strict)", out);
        return;
    case MITEM_STAGES:
        fprintf(out, "(stages %s)", it->name.name);
        return;
    case MITEM_MICRO:
        fprintf(out, "(microbatches %s ", it->name.name);
        ast_dump_expr(it->value, out);
        fputs(it->order == MICRO_1F1B ? " 1f1b" : "", out);
        fputs(it->recompute ? " recompute)" : ")", out);
        return;
    case MITEM_LAYER:
        fprintf(out, "(layer %s -> %s (repeat ", it->layer_in.name, it->layer_out.name);
        ast_dump_expr(it->repeat, out);
        fputc(')', out);
        for (int i = 0; i < it->items.count; i++) {
            fputc(' ', out);
            dump_item(it->items.items[i], out);
        }
        fputc(')', out);
        return;
    case MITEM_COMPOSITE:
        fprintf(out, "(composite %s)", it->name.name);
        return;
    }
    fputs("<bad item>", out);
}

static void dump_model(const ModelDecl *m, FILE *out, int level) {
    fprintf(out, "(model %s", m->name.name);
    for (int i = 0; i < m->items.count; i++) {
        indent(out, level + 1);
        dump_item(m->items.items[i], out);
    }
    fputc(')', out);
}

void ast_dump_program(const Program *program, FILE *out) {
    fputs("(program", out);
    for (int i = 0; i < program->decls.count; i++) {
        const Decl *d = program->decls.items[i];
        indent(out, 1);
        switch (d->kind) {
        case DECL_OP:
            dump_op(d->op, out, 1);
            break;
        case DECL_PARTITION:
            dump_partition(d->partition, out, 1);
            break;
        case DECL_MODEL:
            dump_model(d->model, out, 1);
            break;
        case DECL_IMPORT:
            fputs("(import ", out);
            dump_string(d->import->path, out);
            fputc(')', out);
            break;
        case DECL_SHAPE:
        case DECL_PLAN:
        case DECL_RUN:
            ast_dump_plan_decl(d, out, 1);
            break;
        }
    }
    fputs(")\n", out);
}

/* ---- source-like printing -------------------------------------------- */

enum { PREC_XOR = 1, PREC_ADD = 2, PREC_MUL = 3, PREC_UNARY = 4, PREC_PRIMARY = 5 };

static int binary_prec(char op) {
    switch (op) {
    case '^':
        return PREC_XOR;
    case '+':
    case '-':
        return PREC_ADD;
    default:
        return PREC_MUL; /* * / % */
    }
}

static int expr_prec(const Expr *e) {
    if (!e)
        return PREC_PRIMARY;
    if (e->kind == EXPR_BINARY)
        return binary_prec(e->op);
    if (e->kind == EXPR_NEG)
        return PREC_UNARY;
    return PREC_PRIMARY;
}

static void print_expr(const Expr *e, FILE *out);

static void print_operand(const Expr *e, int min_prec, FILE *out) {
    if (expr_prec(e) < min_prec) {
        fputc('(', out);
        print_expr(e, out);
        fputc(')', out);
    } else {
        print_expr(e, out);
    }
}

static void print_expr(const Expr *e, FILE *out) {
    if (!e) {
        fputs("<null>", out);
        return;
    }
    switch (e->kind) {
    case EXPR_INT:
        fprintf(out, "%ld", e->value);
        return;
    case EXPR_NAME:
        fputs(e->name, out);
        return;
    case EXPR_INDEX:
        fprintf(out, "%s[", e->name);
        for (int i = 0; i < e->args.count; i++)
            fprintf(out, "%s%s", i ? ", " : "", ((const Ident *)e->args.items[i])->name);
        fputc(']', out);
        return;
    case EXPR_BINARY: {
        int p = binary_prec(e->op);
        /* All binary operators associate to the left: a right operand of
         * the same precedence needs parentheses to keep its shape. */
        print_operand(e->lhs, p, out);
        fprintf(out, " %c ", e->op);
        print_operand(e->rhs, p + 1, out);
        return;
    }
    case EXPR_NEG:
        fputc('-', out);
        /* -(-x) rather than --x, which reads like a decrement. */
        print_operand(e->lhs, e->lhs && e->lhs->kind == EXPR_NEG ? PREC_PRIMARY : PREC_UNARY, out);
        return;
    case EXPR_CALL:
    case EXPR_RADIX:
        if (e->kind == EXPR_CALL)
            fputs(e->name, out);
        fputc('(', out);
        for (int i = 0; i < e->args.count; i++) {
            if (i)
                fputs(", ", out);
            print_expr(e->args.items[i], out);
        }
        fputc(')', out);
        return;
    case EXPR_KIND_COUNT:
        break;
    }
    fputs("<bad expr>", out);
}

void ast_print_expr(const Expr *expr, FILE *out) {
    print_expr(expr, out);
}

AstIntStatus ast_int_op(char op, long a, long b, long *out) {
    long r;
    switch (op) {
    case '+':
        if (__builtin_add_overflow(a, b, &r))
            return AST_INT_OVERFLOW;
        break;
    case '-':
        if (__builtin_sub_overflow(a, b, &r))
            return AST_INT_OVERFLOW;
        break;
    case '*':
        if (__builtin_mul_overflow(a, b, &r))
            return AST_INT_OVERFLOW;
        break;
    case '^':
        r = a ^ b;
        break;
    case '/':
        if (b == 0)
            return AST_INT_DIV_ZERO;
        if (a == LONG_MIN && b == -1)
            return AST_INT_OVERFLOW;
        r = a / b;
        break;
    case '%':
        if (b == 0)
            return AST_INT_DIV_ZERO;
        /* The mathematical modulo, in [0, |b|): with |b| = 2^63 (b the
         * most negative integer) every a but that one is its own
         * remainder, and negative ones need 2^63 added, which fits. */
        if (b == LONG_MIN) {
            r = a == LONG_MIN ? 0 : a >= 0 ? a : a + LONG_MAX + 1;
        } else {
            long m = b < 0 ? -b : b;
            r = a % m; /* never LONG_MIN % -1: m > 0 */
            if (r < 0)
                r += m;
        }
        break;
    default:
        ICE("bad binary operator '%c'", op);
    }
    *out = r;
    return AST_INT_OK;
}

AstIntStatus ast_int_neg(long a, long *out) {
    if (a == LONG_MIN)
        return AST_INT_OVERFLOW;
    *out = -a;
    return AST_INT_OK;
}
