/*
 * resolve_run.c — shapes and runs (docs/language.md, "Plans").
 *
 * A run is resolved by writing the model it names as an old-form model
 * declaration (its params with the shape's, the run's and the command
 * line's values; the plan's mesh at the run's sizes; on every instance
 * the `use` of the rule that chose it) and resolving that declaration
 * like any written model. So a run and the equivalent written model give
 * the same Model, and every later pass is the same code for both. The
 * plans it goes through are resolve_plan.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_internal.h"

/* ------------------------------------------------------------------ */
/* Runs: sizes, params, the written model                              */

typedef struct Sizes {
    int n;
    Sym names[PLAN_MAX_SIZES];
    Span spans[PLAN_MAX_SIZES]; /* first mention in the mesh */
    long values[PLAN_MAX_SIZES];
    int bound[PLAN_MAX_SIZES];
} Sizes;

static int size_index(const Sizes *sz, Sym name) {
    for (int i = 0; i < sz->n; ++i)
        if (sz->names[i] == name)
            return i;
    return -1;
}

static void collect_size_names(Sizes *sz, const Expr *e) {
    if (!e)
        return;
    if (e->kind == EXPR_NAME && size_index(sz, e->name) < 0 && sz->n < PLAN_MAX_SIZES) {
        sz->names[sz->n] = e->name;
        sz->spans[sz->n] = e->span;
        sz->n++;
    }
    collect_size_names(sz, e->lhs);
    collect_size_names(sz, e->rhs);
}

/* A size expression's value over the bound sizes; 0 (after reporting,
 * when report is set) on an unbound name or bad arithmetic. */
static int eval_size(Resolver *r, const Sizes *sz, const Expr *e, int report, long *out) {
    long a, b;
    switch (e->kind) {
    case EXPR_INT:
        *out = e->value;
        return 1;
    case EXPR_NAME: {
        int i = size_index(sz, e->name);
        if (i >= 0 && sz->bound[i]) {
            *out = sz->values[i];
            return 1;
        }
        if (report)
            diag_error(r->sink, e->span, "'%s' is not a bound mesh size here", e->name);
        return 0;
    }
    case EXPR_NEG:
        return eval_size(r, sz, e->lhs, report, &a) && ast_int_neg(a, out) == AST_INT_OK;
    case EXPR_BINARY:
        if (!eval_size(r, sz, e->lhs, report, &a) || !eval_size(r, sz, e->rhs, report, &b))
            return 0;
        if (ast_int_op(e->op, a, b, out) == AST_INT_OK)
            return 1;
        if (report)
            diag_error(r->sink, e->span,
                       "a mesh size's arithmetic fails here (division by zero "
                       "or overflow)");
        return 0;
    default:
        if (report)
            diag_error(r->sink, e->span, "a mesh size is an integer expression");
        return 0;
    }
}

/* The device count of the mesh at the bound sizes; 0 when a size is unbound. */
static long mesh_devices(Resolver *r, const PtrVec *mesh, const Sizes *sz) {
    long n = 1;
    for (int a = 0; a < mesh->count; ++a) {
        long v;
        if (!eval_size(r, sz, ((const AxisDecl *)mesh->items[a])->size, 0, &v) ||
            __builtin_mul_overflow(n, v, &n))
            return 0;
    }
    return n;
}

/* `devices = N`: the one unbound size that makes the mesh N devices. */
static int solve_devices(Resolver *r, const RunDecl *run, const PlanDecl *mp, Sizes *sz,
                         long devices, Span at) {
    int free_size = -1, nfree = 0;
    for (int i = 0; i < sz->n; ++i) {
        if (!sz->bound[i]) {
            free_size = i;
            nfree++;
        }
    }
    if (nfree > 1) {
        diag_error(r->sink, at,
                   "'devices' sets one mesh size; the mesh of plan '%s' has %d sizes the run "
                   "does not give",
                   mp->name.name, nfree);
        diag_note(r->sink, mp->mesh_span, "mesh declared here");
        return 0;
    }
    if (nfree == 1) {
        sz->bound[free_size] = 1;
        for (long v = 1; v <= devices; ++v) {
            sz->values[free_size] = v;
            long n = mesh_devices(r, &mp->mesh, sz);
            if (n == devices)
                return 1;
            if (n > devices)
                break;
        }
        sz->values[free_size] = 1;
    }
    long least = mesh_devices(r, &mp->mesh, sz);
    if (least > devices || least == 0)
        diag_error(r->sink, at, "run '%s' gives %ld devices but the mesh of plan '%s' needs %ld",
                   run->name.name, devices, mp->name.name, least);
    else
        diag_error(r->sink, at,
                   "run '%s' gives %ld devices but no %s the mesh of plan '%s' %ld devices",
                   run->name.name, devices,
                   nfree ? arena_printf(r->arena, "value of '%s' makes", sz->names[free_size])
                         : "size makes",
                   mp->name.name, devices);
    diag_note(r->sink, mp->mesh_span, "mesh declared here");
    return 0;
}

/* Does the --param override apply to this model or run? */
static int selected(const Resolver *r, Sym name) {
    return !r->opt->model_name || strcmp(r->opt->model_name, name) == 0;
}

/* The values of the model's params: an Expr per param item (NULL: its own). */
typedef struct ParamSet {
    const ModelDecl *model;
    const Expr **values; /* per item of model->items */
} ParamSet;

static int set_param(ParamSet *ps, Sym name, const Expr *value) {
    int found = 0;
    for (int i = 0; i < ps->model->items.count; ++i) {
        const ModelItem *it = ps->model->items.items[i];
        if (it->kind == MITEM_PARAM && it->name.name == name) {
            ps->values[i] = value;
            found = 1;
        }
    }
    return found;
}

static int set_params(Resolver *r, ParamSet *ps, const PtrVec *items, int report) {
    int ok = 1;
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (set_param(ps, it->name.name, it->value))
            continue;
        ok = 0;
        if (report) {
            diag_error(r->sink, it->name.span, "model '%s' has no parameter '%s'",
                       ps->model->name.name, it->name.name);
            diag_note(r->sink, ps->model->name.span, "model '%s' is declared here",
                      ps->model->name.name);
        }
    }
    return ok;
}

/* A copy of items with params valued from ps and each instance's `use`
 * the rule's (uses may be NULL). With mesh, the params come first, then
 * the mesh, then the other items (the model's own mesh dropped). */
static PtrVec written_items(Resolver *r, const PtrVec *items, const ParamSet *ps,
                            const Instances *in, UseClause *const *uses, const ModelItem *mesh) {
    PtrVec out = {0};
    for (int i = 0; mesh && i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (it->kind != MITEM_PARAM)
            continue;
        ModelItem *copy = ARENA_NEW(r->arena, ModelItem);
        *copy = *it;
        if (ps->values[i])
            copy->value = (Expr *)ps->values[i];
        ptrvec_push(r->arena, &out, copy);
    }
    if (mesh)
        ptrvec_push(r->arena, &out, (void *)mesh);
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if (mesh && (it->kind == MITEM_PARAM || it->kind == MITEM_MESH ||
                     it->kind == MITEM_STAGES || it->kind == MITEM_MICRO))
            continue; /* the plan's mesh, stages and micro-batches replace the model's */
        ModelItem *copy = ARENA_NEW(r->arena, ModelItem);
        *copy = *it;
        if (it->kind == MITEM_PARAM && ps && ps->values[i])
            copy->value = (Expr *)ps->values[i];
        for (int k = 0; it->kind == MITEM_INSTANCE && uses && k < in->count; ++k)
            if (in->items[k].item == it && uses[k])
                copy->use = uses[k];
        if (it->kind == MITEM_LAYER)
            copy->items = written_items(r, &it->items, NULL, in, uses, NULL);
        ptrvec_push(r->arena, &out, copy);
    }
    return out;
}

const ModelDecl *resolve_overrides(Resolver *r, const ModelDecl *decl) {
    if (!r->opt->noverrides || !selected(r, decl->name.name))
        return decl;
    ParamSet ps = {decl, ARENA_ARRAY(r->arena, const Expr *, decl->items.count + 1)};
    int ok = 1;
    for (int i = 0; i < r->opt->noverrides; ++i) {
        const ParamOverride *po = &r->opt->overrides[i];
        Sym name = arena_intern(r->arena, po->name, (size_t)po->len);
        if (!set_param(&ps, name, ast_new_int(r->arena, decl->name.span, po->value))) {
            diag_error(r->sink, decl->name.span,
                       "--param %.*s=%ld: model '%s' has no parameter '%s'", po->len, po->name,
                       po->value, decl->name.name, name);
            ok = 0;
        }
    }
    if (!ok)
        return NULL;
    ModelDecl *copy = ARENA_NEW(r->arena, ModelDecl);
    *copy = *decl;
    copy->items = written_items(r, &decl->items, &ps, NULL, NULL, NULL);
    return copy;
}

/* The run's plan sizes: its own, then --param's, then `devices`. */
static int run_sizes(Resolver *r, const RunDecl *run, const PlanChain *chain, Sizes *sz,
                     ParamSet *ps) {
    const PlanDecl *mp = chain->mesh_plan;
    memset(sz, 0, sizeof *sz);
    for (int a = 0; a < mp->mesh.count; ++a)
        collect_size_names(sz, ((const AxisDecl *)mp->mesh.items[a])->size);
    int ok = 1, have_devices = 0;
    long devices = 0;
    Span devices_at = run->name.span;
    Sym devices_sym = arena_intern(r->arena, "devices", 7);
    for (int i = 0; i < run->plan_args.count; ++i) {
        const ModelItem *it = run->plan_args.items[i];
        long v;
        if (!eval_size(r, sz, it->value, 1, &v)) {
            ok = 0;
            continue;
        }
        int s = size_index(sz, it->name.name);
        if (it->name.name == devices_sym) {
            have_devices = 1;
            devices = v;
            devices_at = it->span;
        } else if (s < 0) {
            diag_error(r->sink, it->name.span, "the mesh of plan '%s' has no size '%s'",
                       mp->name.name, it->name.name);
            diag_note(r->sink, mp->mesh_span, "mesh declared here");
            ok = 0;
        } else {
            sz->values[s] = v;
            sz->bound[s] = 1;
        }
    }
    if (selected(r, run->name.name)) {
        for (int i = 0; i < r->opt->noverrides; ++i) {
            const ParamOverride *po = &r->opt->overrides[i];
            Sym name = arena_intern(r->arena, po->name, (size_t)po->len);
            int s = size_index(sz, name);
            if (set_param(ps, name, ast_new_int(r->arena, run->name.span, po->value))) {
                continue;
            } else if (s >= 0) {
                sz->values[s] = po->value;
                sz->bound[s] = 1;
            } else if (name == devices_sym) {
                have_devices = 1;
                devices = po->value;
            } else {
                diag_error(r->sink, run->name.span,
                           "--param %.*s=%ld: run '%s' has no parameter or mesh size '%s'", po->len,
                           po->name, po->value, run->name.name, name);
                diag_note(r->sink, chain->model->name.span, "model '%s' is declared here",
                          chain->model->name.name);
                ok = 0;
            }
        }
    }
    if (!ok)
        return 0;
    if (have_devices)
        return solve_devices(r, run, mp, sz, devices, devices_at);
    for (int i = 0; i < sz->n; ++i) {
        if (!sz->bound[i]) {
            diag_error(r->sink, run->name.span, "run '%s' gives no value for the mesh size '%s'",
                       run->name.name, sz->names[i]);
            diag_note(r->sink, sz->spans[i], "'%s' is a size of the mesh of plan '%s'",
                      sz->names[i], mp->name.name);
            return 0;
        }
    }
    return 1;
}

/* The plan's mesh at the run's sizes, as a model's mesh item. */
static ModelItem *run_mesh(Resolver *r, const PlanDecl *mp, const Sizes *sz) {
    PtrVec axes = {0};
    for (int a = 0; a < mp->mesh.count; ++a) {
        const AxisDecl *ax = mp->mesh.items[a];
        long v = 0;
        eval_size(r, sz, ax->size, 0, &v); /* bound: checked by run_sizes */
        ptrvec_push(
            r->arena, &axes,
            ast_new_axis(r->arena, ax->span, ax->name, ast_new_int(r->arena, ax->size->span, v)));
    }
    return ast_new_mesh_item(r->arena, mp->mesh_span, axes);
}

/* The `use` each instance gets: the chosen rule's, marked with its origin. */
static UseClause **run_uses(Resolver *r, const Instances *in, const PlanRule **chosen,
                            const PlanDecl **chosen_plan) {
    UseClause **uses = ARENA_ARRAY(r->arena, UseClause *, in->count + 1);
    for (int k = 0; k < in->count; ++k) {
        if (!chosen[k])
            continue;
        UseClause *u = ARENA_NEW(r->arena, UseClause);
        *u = *chosen[k]->use;
        u->origin = arena_printf(r->arena, "plan %s, %s %s", chosen_plan[k]->name.name,
                                 chosen[k]->is_default ? "default at" : "rule at",
                                 resolve_where_text(r, chosen[k]->span));
        uses[k] = u;
    }
    return uses;
}

/* The instance of m of that name, or NULL. */
static Instance *model_instance(Model *m, Sym name) {
    for (int k = 0; k < m->ninstances; ++k)
        if (m->instances[k].name == name)
            return &m->instances[k];
    return NULL;
}

/* Rules naming one copy of a layer (`y_1`) rebind that copy, after the
 * rules that name the layer body's instances. Copy l of a body's
 * instance y is y_l, and the last copy of the layer's output keeps its
 * name (resolve.c). */
static int bind_copies(Resolver *r, Model *m, const PtrVec *copies) {
    for (int i = 0; i < copies->count; ++i) {
        const CopyRule *cr = copies->items[i];
        if (m->nmicro > 1) {
            diag_error(r->sink, cr->target->span,
                       "a rule naming one copy of a layer does not apply to a run with "
                       "micro-batches");
            diag_note(r->sink, m->micro_item->span, "the micro-batches are declared here");
            return 0;
        }
        long count = resolve_layer_count(r, m, cr->layer);
        if (cr->copy >= count) {
            const char *copies_text =
                count == 1
                    ? "1 time (copy 0)"
                    : arena_printf(r->arena, "%ld times (copies 0 to %ld)", count, count - 1);
            diag_error(r->sink, cr->target->span,
                       "run '%s' has no instance '%s': the layer of '%s' repeats %s", m->name,
                       cr->target->first.name, cr->base, copies_text);
            diag_note(r->sink, cr->layer->repeat->span, "the layer's repeat count");
            return 0;
        }
        Sym name = cr->base;
        if (cr->base != cr->layer->layer_out.name || cr->copy != count - 1) {
            const char *text = arena_printf(r->arena, "%s_%ld", cr->base, cr->copy);
            name = arena_intern(r->arena, text, strlen(text));
        }
        Instance *inst = model_instance(m, name);
        if (!inst)
            ICE("run '%s' has no instance '%s' for the rule naming '%s'", m->name, name,
                cr->target->first.name);
        UseClause *u = ARENA_NEW(r->arena, UseClause);
        *u = *cr->rule->use;
        u->origin = arena_printf(r->arena, "plan %s, rule at %s", cr->plan->name.name,
                                 resolve_where_text(r, cr->rule->span));
        inst->nsize_params = 0;
        if (!resolve_bind_partition(r, m, inst, u))
            return 0;
    }
    return 1;
}

/* Did the written model of that name resolve (with its own values)? */
static int model_resolved(const Resolver *r, Sym name) {
    for (int i = 0; i < r->module->models.count; ++i) {
        const Model *m = r->module->models.items[i];
        if (m->name == name && !m->run)
            return 1;
    }
    return 0;
}

/* The last `stages` (or `microbatches`) clause of the plan's chain (a
 * derived plan's wins), or NULL. */
static const ModelItem *plan_clause(const PlanChain *chain, int micro) {
    const ModelItem *last = NULL;
    for (int p = 0; p < chain->n; ++p)
        for (int i = 0; i < chain->plans[p]->rules.count; ++i) {
            const PlanRule *rule = chain->plans[p]->rules.items[i];
            if (micro ? rule->micro != NULL : rule->stages != NULL)
                last = micro ? rule->micro : rule->stages;
        }
    return last;
}

/* Puts item right after the mesh of decl, before the items it applies to. */
static void insert_after_mesh(Resolver *r, ModelDecl *decl, const ModelItem *item) {
    int at = 0;
    while (((const ModelItem *)decl->items.items[at])->kind != MITEM_MESH)
        ++at;
    ptrvec_push(r->arena, &decl->items, NULL);
    memmove(&decl->items.items[at + 2], &decl->items.items[at + 1],
            sizeof(void *) * (size_t)(decl->items.count - at - 2));
    decl->items.items[at + 1] = (void *)item;
}

static void resolve_run(Resolver *r, const RunDecl *run) {
    const PlanDecl *plan = resolve_find_plan(r, run->plan.name);
    if (!plan) {
        diag_error(r->sink, run->plan.span, "unknown plan '%s'", run->plan.name);
        return;
    }
    PlanChain chain;
    if (!resolve_plan_chain(r, plan, &chain, 0))
        return; /* reported at the plan */
    const ModelDecl *model = chain.model;
    if (!model_resolved(r, model->name.name))
        return; /* reported at the model: the run would repeat its errors */
    ParamSet ps = {model, ARENA_ARRAY(r->arena, const Expr *, model->items.count + 1)};
    if (run->shape.name && run->shape.name != model->name.name) {
        const Decl *sd = resolve_find_decl(r, DECL_SHAPE, run->shape.name);
        if (!sd) {
            diag_error(r->sink, run->shape.span, "unknown shape '%s'", run->shape.name);
            return;
        }
        if (sd->shape->of_model.name != model->name.name) {
            diag_error(r->sink, run->shape.span,
                       "shape '%s' is of model '%s' but plan '%s' is of model '%s'",
                       run->shape.name, sd->shape->of_model.name, plan->name.name,
                       model->name.name);
            diag_note(r->sink, sd->shape->name.span, "shape '%s' is declared here",
                      run->shape.name);
            return;
        }
        if (!set_params(r, &ps, &sd->shape->params, 0))
            return; /* reported at the shape */
    }
    if (!set_params(r, &ps, &run->shape_args, 1))
        return;
    Sizes sz;
    if (!run_sizes(r, run, &chain, &sz, &ps))
        return;
    Instances in;
    resolve_collect_instances(r, model, &in);
    const PlanRule **chosen = ARENA_ARRAY(r->arena, const PlanRule *, in.count + 1);
    const PlanDecl **chosen_plan = ARENA_ARRAY(r->arena, const PlanDecl *, in.count + 1);
    PtrVec copies = {0};
    if (!resolve_choose_rules(r, &chain, &in, chosen, chosen_plan, &copies, -1))
        return; /* reported at the plan */
    ModelDecl *decl = ARENA_NEW(r->arena, ModelDecl);
    decl->name = run->name;
    decl->span = run->span;
    decl->items = written_items(r, &model->items, &ps, &in, run_uses(r, &in, chosen, chosen_plan),
                                run_mesh(r, chain.mesh_plan, &sz));
    int errors = r->sink->error_count;
    const ModelItem *stages = plan_clause(&chain, 0), *micro = plan_clause(&chain, 1);
    if (stages && !resolve_mesh_has_axis(chain.mesh_plan, stages->name.name))
        return; /* reported at the plan */
    if (micro)
        insert_after_mesh(r, decl, micro);
    if (stages)
        insert_after_mesh(r, decl, stages);
    Model *m = resolve_model_decl(r, decl);
    if (!m) {
        if (r->sink->error_count > errors) /* they point into the model */
            diag_note(r->sink, run->name.span, "found while checking run '%s'", run->name.name);
        return;
    }
    if (!bind_copies(r, m, &copies))
        return;
    if (copies.count && !resolve_stages(r, m)) /* a rebound copy may bind the stage axis */
        return;
    m->source = model;
    m->run = run;
    ptrvec_push(r->arena, &r->module->models, m);
}

/* ------------------------------------------------------------------ */

static Span decl_name(const Decl *d) {
    return d->kind == DECL_SHAPE  ? d->shape->name.span
           : d->kind == DECL_PLAN ? d->plan->name.span
           : d->kind == DECL_RUN  ? d->run->name.span
                                  : d->model->name.span;
}

/* Shapes, plans and runs each have one namespace; runs share the models'. */
static int check_unique(Resolver *r, const Decl *d) {
    const Decl *first = resolve_find_decl(r, d->kind,
                                          d->kind == DECL_SHAPE  ? d->shape->name.name
                                          : d->kind == DECL_PLAN ? d->plan->name.name
                                                                 : d->run->name.name);
    const char *what = d->kind == DECL_SHAPE ? "shape" : d->kind == DECL_PLAN ? "plan" : "run";
    if (first != d) {
        diag_error(r->sink, decl_name(d), "%s '%s' is defined twice", what,
                   d->kind == DECL_SHAPE  ? d->shape->name.name
                   : d->kind == DECL_PLAN ? d->plan->name.name
                                          : d->run->name.name);
        diag_note(r->sink, decl_name(first), "previous definition");
        return 0;
    }
    if (d->kind == DECL_RUN) {
        const ModelDecl *m = resolve_find_model_decl(r, d->run->name.name);
        if (m) {
            diag_error(r->sink, d->run->name.span, "run '%s' has the name of a model",
                       d->run->name.name);
            diag_note(r->sink, m->name.span, "model '%s' is declared here", m->name.name);
            return 0;
        }
    }
    if (d->kind == DECL_SHAPE && !resolve_find_model_decl(r, d->shape->of_model.name)) {
        diag_error(r->sink, d->shape->of_model.span, "shape '%s' is of an unknown model '%s'",
                   d->shape->name.name, d->shape->of_model.name);
        return 0;
    }
    return 1;
}

void resolve_plans_and_runs(Resolver *r) {
    for (int kind = DECL_SHAPE; kind <= DECL_RUN; ++kind) {
        for (int f = 0; f < r->nprograms; ++f) {
            for (int i = 0; i < r->programs[f]->decls.count; ++i) {
                const Decl *d = r->programs[f]->decls.items[i];
                if ((int)d->kind != kind || !check_unique(r, d))
                    continue;
                if (kind == DECL_SHAPE) {
                    ParamSet ps = {resolve_find_model_decl(r, d->shape->of_model.name), NULL};
                    ps.values = ARENA_ARRAY(r->arena, const Expr *, ps.model->items.count + 1);
                    set_params(r, &ps, &d->shape->params, 1);
                } else if (kind == DECL_PLAN) {
                    resolve_check_plan(r, d->plan);
                } else {
                    resolve_run(r, d->run);
                }
            }
        }
    }
}

int resolve_parse_override(const char *arg, ParamOverride *out) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !(isalpha((unsigned char)arg[0]) || arg[0] == '_'))
        return 0;
    for (const char *p = arg; p < eq; ++p)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(eq + 1, &end, 10);
    if (!eq[1] || *end || errno)
        return 0;
    out->name = arg;
    out->len = (int)(eq - arg);
    out->value = v;
    return 1;
}
