/*
 * ast_plan.c — the AST of shapes, plans and runs: constructors for the
 * grammar and the S-expression dump (see ast.h).
 */
#include "ast.h"

ShapeDecl *ast_new_shape(Arena *a, Span span, Ident name, Ident of_model, PtrVec params) {
    ShapeDecl *s = ARENA_NEW(a, ShapeDecl);
    s->name = name;
    s->span = span;
    s->of_model = of_model;
    s->params = params;
    return s;
}

PlanTarget *ast_new_plan_target(Arena *a, Span span, Ident first, Ident last, int is_range) {
    PlanTarget *t = ARENA_NEW(a, PlanTarget);
    t->span = span;
    t->first = first;
    t->last = last;
    t->is_range = is_range;
    return t;
}

PlanRule *ast_new_plan_rule(Arena *a, Span span, int is_default, PtrVec targets, UseClause *use) {
    PlanRule *r = ARENA_NEW(a, PlanRule);
    r->span = span;
    r->is_default = is_default;
    r->targets = targets;
    r->use = use;
    return r;
}

PlanRule *ast_new_plan_stages(Arena *a, Span span, Ident axis) {
    PlanRule *r = ARENA_NEW(a, PlanRule);
    r->span = span;
    r->stages = ast_new_stages_item(a, span, axis);
    return r;
}

PlanRule *ast_new_plan_micro(Arena *a, Span span, Ident param, Expr *count, int order) {
    PlanRule *r = ARENA_NEW(a, PlanRule);
    r->span = span;
    r->micro = ast_new_micro_item(a, span, param, count, order);
    return r;
}

PlanDecl *ast_new_plan(Arena *a, Span span, Ident name, Ident of_model, Ident base, int has_mesh,
                       Span mesh_span, PtrVec mesh, PtrVec rules) {
    PlanDecl *p = ARENA_NEW(a, PlanDecl);
    p->name = name;
    p->span = span;
    p->of_model = of_model;
    p->base = base;
    p->has_mesh = has_mesh;
    p->mesh_span = mesh_span;
    p->mesh = mesh;
    p->rules = rules;
    return p;
}

RunDecl *ast_new_run(Arena *a, Span span, Ident name, Ident plan, PtrVec plan_args, Ident shape,
                     PtrVec shape_args) {
    RunDecl *r = ARENA_NEW(a, RunDecl);
    r->name = name;
    r->span = span;
    r->plan = plan;
    r->plan_args = plan_args;
    r->shape = shape;
    r->shape_args = shape_args;
    return r;
}

Decl *ast_new_shape_decl(Arena *a, ShapeDecl *shape) {
    Decl *d = ast_new_decl(a, DECL_SHAPE, shape->span);
    d->shape = shape;
    return d;
}

Decl *ast_new_plan_decl(Arena *a, PlanDecl *plan) {
    Decl *d = ast_new_decl(a, DECL_PLAN, plan->span);
    d->plan = plan;
    return d;
}

Decl *ast_new_run_decl(Arena *a, RunDecl *run) {
    Decl *d = ast_new_decl(a, DECL_RUN, run->span);
    d->run = run;
    return d;
}

static void indent(FILE *out, int level) {
    fputc('\n', out);
    for (int i = 0; i < level; i++)
        fputs("  ", out);
}

static void dump_params(const char *head, const PtrVec *params, FILE *out) {
    fprintf(out, "(%s", head);
    for (int i = 0; i < params->count; i++) {
        const ModelItem *it = params->items[i];
        fprintf(out, " (%s ", it->name.name);
        ast_dump_expr(it->value, out);
        fputc(')', out);
    }
    fputc(')', out);
}

static void dump_rule(const PlanRule *r, FILE *out) {
    if (r->stages) {
        fprintf(out, "(stages %s)", r->stages->name.name);
        return;
    }
    if (r->micro) {
        fprintf(out, "(microbatches %s ", r->micro->name.name);
        ast_dump_expr(r->micro->value, out);
        fputs(r->micro->order == MICRO_1F1B ? " 1f1b" : "", out);
        fputs(r->micro->recompute ? " recompute)" : ")", out);
        return;
    }
    fputs(r->is_default ? "(default" : "(rule", out);
    for (int i = 0; i < r->targets.count; i++) {
        const PlanTarget *t = r->targets.items[i];
        if (t->is_range)
            fprintf(out, " (%s .. %s)", t->first.name, t->last.name);
        else
            fprintf(out, " %s", t->first.name);
    }
    fprintf(out, " (use %s", r->use->partition.name);
    for (int i = 0; i < r->use->bindings.count; i++) {
        const AxisBinding *b = r->use->bindings.items[i];
        fprintf(out, " (%s %s)", b->part_axis.name, b->mesh_axis.name);
    }
    fputs("))", out);
}

void ast_dump_plan_decl(const Decl *d, FILE *out, int level) {
    switch (d->kind) {
    case DECL_SHAPE:
        fprintf(out, "(shape %s of %s ", d->shape->name.name, d->shape->of_model.name);
        dump_params("params", &d->shape->params, out);
        fputc(')', out);
        return;
    case DECL_PLAN: {
        const PlanDecl *p = d->plan;
        fprintf(out, "(plan %s", p->name.name);
        if (p->of_model.name)
            fprintf(out, " of %s", p->of_model.name);
        if (p->base.name)
            fprintf(out, " extends %s", p->base.name);
        if (p->has_mesh) {
            fputs(" (mesh", out);
            for (int i = 0; i < p->mesh.count; i++) {
                const AxisDecl *ax = p->mesh.items[i];
                fprintf(out, " (%s ", ax->name.name);
                ast_dump_expr(ax->size, out);
                fputc(')', out);
            }
            fputc(')', out);
        }
        for (int i = 0; i < p->rules.count; i++) {
            indent(out, level + 1);
            dump_rule(p->rules.items[i], out);
        }
        fputc(')', out);
        return;
    }
    case DECL_RUN: {
        const RunDecl *r = d->run;
        fprintf(out, "(run %s %s ", r->name.name, r->plan.name);
        dump_params("sizes", &r->plan_args, out);
        if (r->shape.name) {
            fprintf(out, " on %s ", r->shape.name);
            dump_params("params", &r->shape_args, out);
        }
        fputc(')', out);
        return;
    }
    default:
        fputs("<bad declaration>", out);
        return;
    }
}
