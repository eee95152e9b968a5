/*
 * parse.c — runs the generated lexer and parser over one file, then
 * checks the size limits of its expressions.
 *
 * The grammar (grammar/parser.y) and the lexer (grammar/lexer.re) share
 * a ParseCtx that lives on this function's stack; the Program they build
 * lives in the arena. A syntax error never stops the parse early unless
 * recovery runs into the end of the file.
 *
 * Every pass over an expression recurses on its tree. The constructors
 * record each node's depth and size (ast.h), so the limits are checked
 * here without recursing, at the root of every expression in the file.
 * An expression beyond them is an error, and the pipeline stops after
 * the parse when there are errors, so no later pass sees it.
 */
#include "parse.h"

#include "parser.h"

/* Reports e if it is beyond the limits; returns 1 if it is within them
 * (or absent). */
static int expr_ok(DiagSink *sink, const Expr *e) {
    if (!e)
        return 1;
    if (e->depth > AST_MAX_EXPR_DEPTH) {
        diag_error(sink, e->span,
                   "expression nested %s%d levels deep; at most %d levels are supported",
                   e->depth >= AST_COUNT_MAX ? "more than " : "", e->depth, AST_MAX_EXPR_DEPTH);
        return 0;
    }
    if (e->nodes > AST_MAX_EXPR_NODES) {
        diag_error(sink, e->span,
                   "expression of %s%d operators and operands; at most %d are supported",
                   e->nodes >= AST_COUNT_MAX ? "more than " : "", e->nodes, AST_MAX_EXPR_NODES);
        return 0;
    }
    return 1;
}

static int axes_ok(DiagSink *sink, const PtrVec *axes) {
    int ok = 1;
    for (int i = 0; i < axes->count; i++)
        ok &= expr_ok(sink, ((const AxisDecl *)axes->items[i])->size);
    return ok;
}

static void items_ok(DiagSink *sink, const PtrVec *items) {
    for (int i = 0; i < items->count; i++) {
        const ModelItem *it = items->items[i];
        expr_ok(sink, it->value);
        expr_ok(sink, it->repeat);
        axes_ok(sink, &it->axes);
        for (int x = 0; x < it->dims.count; x++)
            expr_ok(sink, it->dims.items[x]);
        if (it->kind == MITEM_LAYER) /* nesting bounded by the parser's stack */
            items_ok(sink, &it->items);
    }
}

/* Reports every expression of the program beyond the limits. */
static void check_limits(DiagSink *sink, const Program *program) {
    for (int i = 0; i < program->decls.count; i++) {
        const Decl *d = program->decls.items[i];
        if (d->kind == DECL_OP) {
            for (int s = 0; s < d->op->body.count; s++)
                expr_ok(sink, ((const Stmt *)d->op->body.items[s])->value);
        } else if (d->kind == DECL_PARTITION) {
            const PartitionDecl *p = d->partition;
            axes_ok(sink, &p->mesh);
            if (p->steps)
                expr_ok(sink, p->steps->size);
            for (int s = 0; s < p->dsis.count; s++)
                expr_ok(sink, ((const DsiAssign *)p->dsis.items[s])->value);
        } else if (d->kind == DECL_MODEL) {
            items_ok(sink, &d->model->items);
        }
    }
}

Program *parse_file(Arena *arena, const SourceMap *sources, uint32_t file, DiagSink *sink) {
    ParseCtx ctx;
    parse_ctx_init(&ctx, arena, sources, file, sink);
    /* The result needs no check: every error has been reported through
     * the sink, and the Program holds what was parsed. */
    (void)yyparse(&ctx);
    check_limits(sink, ctx.program);
    return ctx.program;
}
