/*
 * resolve_plan.c — shapes, plans and runs (docs/language.md, "Plans").
 *
 * A run is resolved by writing the model it names as an old-form model
 * declaration (its params with the shape's, the run's and the command
 * line's values; the plan's mesh at the run's sizes; on every instance
 * the `use` of the rule that chose it) and resolving that declaration
 * like any written model. So a run and the equivalent written model give
 * the same Model, and every later pass is the same code for both.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_internal.h"

/* The most plans one `extends` chain holds. */
#define PLAN_MAX_CHAIN 64
/* The most mesh sizes (names in a plan's mesh) of one plan. */
#define PLAN_MAX_SIZES (IR_MAX_AXES * 2)

/* ------------------------------------------------------------------ */
/* Finding declarations                                                */

static const Decl *find_decl(const Resolver *r, DeclKind kind, Sym name) {
    for (int f = 0; f < r->nprograms; ++f) {
        for (int i = 0; i < r->programs[f]->decls.count; ++i) {
            const Decl *d = r->programs[f]->decls.items[i];
            if (d->kind != kind)
                continue;
            Sym n = kind == DECL_SHAPE  ? d->shape->name.name
                    : kind == DECL_PLAN ? d->plan->name.name
                    : kind == DECL_RUN  ? d->run->name.name
                                        : d->model->name.name;
            if (n == name)
                return d;
        }
    }
    return NULL;
}

static const PlanDecl *find_plan(const Resolver *r, Sym name) {
    const Decl *d = find_decl(r, DECL_PLAN, name);
    return d ? d->plan : NULL;
}

/* "FILE:LINE" of a span. */
static const char *where_text(const Resolver *r, Span span) {
    const SourceFile *f = source_get(r->sink->sources, span.file);
    int line = 0, col = 0;
    source_line_col(f, span.lo, &line, &col);
    return arena_printf(r->arena, "%s:%d", f->name, line);
}

/* ------------------------------------------------------------------ */
/* Plans: the extends chain                                            */

typedef struct PlanChain {
    const PlanDecl *plans[PLAN_MAX_CHAIN]; /* root first */
    int n;
    const PlanDecl *mesh_plan; /* the nearest plan that declares the mesh */
    const ModelDecl *model;
} PlanChain;

/* The chain from the plan's root to the plan; 0 after reporting an
 * unknown base, a cycle or an unknown model (when report is set). */
static int plan_chain(Resolver *r, const PlanDecl *plan, PlanChain *chain, int report) {
    const PlanDecl *rev[PLAN_MAX_CHAIN];
    int n = 0;
    for (const PlanDecl *p = plan; p;) {
        for (int i = 0; i < n; ++i) {
            if (rev[i] != p)
                continue;
            /* A cycle: reported once, by its first plan in the source,
             * at its `extends`. */
            int first = p == plan;
            for (int j = i; j < n && first; ++j)
                if (rev[j]->span.file < plan->span.file ||
                    (rev[j]->span.file == plan->span.file && rev[j]->span.lo < plan->span.lo))
                    first = 0;
            if (report && first) {
                const char *path = plan->name.name;
                for (int j = 1; j < n; ++j)
                    path = arena_printf(r->arena, "%s -> %s", path, rev[j]->name.name);
                diag_error(r->sink, plan->base.span,
                           "plan '%s' extends itself: %s -> %s is a cycle of 'extends'",
                           plan->name.name, path, plan->name.name);
            }
            return 0;
        }
        if (n == PLAN_MAX_CHAIN) {
            if (report)
                diag_error(r->sink, plan->name.span,
                           "plan '%s' extends more than %d plans in a chain", plan->name.name,
                           PLAN_MAX_CHAIN);
            return 0;
        }
        rev[n++] = p;
        if (!p->base.name)
            break;
        const PlanDecl *base = find_plan(r, p->base.name);
        if (!base) {
            if (report)
                diag_error(r->sink, p->base.span, "unknown plan '%s'", p->base.name);
            return 0;
        }
        p = base;
    }
    chain->n = n;
    chain->mesh_plan = NULL;
    for (int i = 0; i < n; ++i) {
        chain->plans[i] = rev[n - 1 - i];
        if (!chain->mesh_plan && rev[i]->has_mesh)
            chain->mesh_plan = rev[i];
    }
    const PlanDecl *root = chain->plans[0];
    chain->model = resolve_find_model_decl(r, root->of_model.name);
    if (!chain->model) {
        if (report)
            diag_error(r->sink, root->of_model.span, "plan '%s' is of an unknown model '%s'",
                       root->name.name, root->of_model.name);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Instances of a model and the rules that choose their partitions     */

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

static void collect_block(Instances *in, const PtrVec *block, const ModelItem *layer, int cap) {
    for (int i = 0; i < block->count; ++i) {
        const ModelItem *it = block->items[i];
        if (it->kind == MITEM_INSTANCE && in->count < cap)
            in->items[in->count++] = (WrittenInstance){it, block, layer, i};
        else if (it->kind == MITEM_LAYER)
            collect_block(in, &it->items, it, cap);
    }
}

static int count_instances(const PtrVec *block) {
    int n = 0;
    for (int i = 0; i < block->count; ++i) {
        const ModelItem *it = block->items[i];
        n += it->kind == MITEM_INSTANCE;
        if (it->kind == MITEM_LAYER)
            n += count_instances(&it->items);
    }
    return n;
}

static void collect_instances(Resolver *r, const ModelDecl *model, Instances *in) {
    int cap = count_instances(&model->items);
    in->items = ARENA_ARRAY(r->arena, WrittenInstance, cap + 1);
    in->count = 0;
    in->model = model;
    collect_block(in, &model->items, NULL, cap);
}

/* The instance of that name (or, for the part computing a composite's
 * result, of its alias USE_RESULT), or -1. */
static int find_instance(const Instances *in, Sym name) {
    for (int k = 0; k < in->count; ++k)
        if (in->items[k].item->name.name == name || in->items[k].item->alias == name)
            return k;
    return -1;
}

/* The parts [*lo, *hi] of the composite instance of that name (compose.h:
 * they are consecutive in one block); 0 when no composite use has it. */
static int find_group(const Instances *in, Sym name, int *lo, int *hi) {
    *lo = -1;
    for (int k = 0; k < in->count; ++k) {
        const PtrVec *g = &in->items[k].item->groups;
        for (int i = 0; i < g->count; ++i) {
            if (g->items[i] == name) {
                if (*lo < 0)
                    *lo = k;
                *hi = k;
            }
        }
    }
    return *lo >= 0;
}

/* The first (end 0) or last (end 1) instance a range's end names: a
 * composite instance's first or last part; -1 when none. */
static int range_end(const Instances *in, Sym name, int end) {
    int lo, hi;
    if (find_group(in, name, &lo, &hi))
        return end ? hi : lo;
    return find_instance(in, name);
}

/* A tensor (not an instance) of that name in the model, for a better message. */
static const ModelItem *find_tensor_item(const PtrVec *block, Sym name) {
    for (int i = 0; i < block->count; ++i) {
        const ModelItem *it = block->items[i];
        if ((it->kind == MITEM_INPUT || it->kind == MITEM_WEIGHT) && it->name.name == name)
            return it;
        if (it->kind == MITEM_LAYER) {
            const ModelItem *x = find_tensor_item(&it->items, name);
            if (x)
                return x;
        }
    }
    return NULL;
}

/* `y_1`: one copy of the layer body's instance y, or of the parts of the
 * composite instance y: [*lo, *hi] in in and the copy's index (LONG_MAX
 * when it does not fit); 0 when the name is not of that form. */
static int copy_target(Resolver *r, const Instances *in, Sym name, int *lo, int *hi, long *copy) {
    const char *us = strrchr(name, '_');
    if (!us || !us[1] || strspn(us + 1, "0123456789") != strlen(us + 1))
        return 0;
    Sym base = arena_intern(r->arena, name, (size_t)(us - name));
    if (!find_group(in, base, lo, hi)) {
        *lo = *hi = find_instance(in, base);
        if (*lo < 0)
            return 0;
    }
    errno = 0;
    *copy = strtol(us + 1, NULL, 10);
    if (errno)
        *copy = LONG_MAX;
    return in->items[*lo].layer != NULL;
}

/* Where a written instance is declared: the use of the composite it is
 * a part of, or the instance itself. */
static Span written_span(const WrittenInstance *wi) {
    return wi->item->site ? wi->item->site->name.span : wi->item->name.span;
}

/* A target that names both an instance (`a_1`) and one copy of a layer
 * body's instance (copy 1 of `a`): reported at the target. */
static void report_ambiguous(Resolver *r, const Instances *in, const PlanTarget *t, int k, int lo,
                             long copy) {
    const WrittenInstance *named = &in->items[k], *base = &in->items[lo];
    const char *us = strrchr(t->first.name, '_');
    const char *base_name =
        arena_printf(r->arena, "%.*s", (int)(us - t->first.name), t->first.name);
    diag_error(r->sink, t->first.span,
               "'%s' is ambiguous: it names the instance '%s' and copy %ld of the layer body's "
               "instance '%s'; rename one of them",
               t->first.name, t->first.name, copy, base_name);
    diag_note(r->sink, written_span(named), "instance '%s' is defined here", t->first.name);
    diag_note(r->sink, written_span(base),
              "'%s' is defined here, in a layer body whose copies are '%s_0', '%s_1', ...",
              base_name, base_name, base_name);
}

/* The instances [*lo, *hi] a target names (indices into in): 1, or 2 for
 * one copy of a layer body's instance (`y_1`, copy *copy); 0 after
 * reporting (when report is set). */
static int target_range(Resolver *r, const Instances *in, const PlanTarget *t, int report, int *lo,
                        int *hi, long *copy) {
    const Ident *ends[2] = {&t->first, &t->last};
    int k[2];
    if (!t->is_range && copy_target(r, in, t->first.name, lo, hi, copy)) {
        int named = range_end(in, t->first.name, 0);
        if (named < 0)
            return 2;
        if (report)
            report_ambiguous(r, in, t, named, *lo, *copy);
        return 0;
    }
    for (int e = 0; e < 2; ++e) {
        k[e] = range_end(in, ends[e]->name, e);
        if (k[e] < 0) {
            if (report) {
                const ModelItem *tensor = find_tensor_item(&in->model->items, ends[e]->name);
                if (tensor)
                    diag_error(r->sink, ends[e]->span,
                               "'%s' is %s of model '%s', not an operator instance", ends[e]->name,
                               tensor->kind == MITEM_INPUT ? "an input" : "a weight",
                               in->model->name.name);
                else
                    diag_error(r->sink, ends[e]->span, "model '%s' has no instance '%s'",
                               in->model->name.name, ends[e]->name);
                diag_note(r->sink, in->model->name.span, "model '%s' is declared here",
                          in->model->name.name);
            }
            return 0;
        }
    }
    const WrittenInstance *a = &in->items[k[0]], *b = &in->items[k[1]];
    if (a->block != b->block) {
        if (report) {
            diag_error(r->sink, t->span,
                       "a range names instances of one block: '%s' and '%s' are not both in the "
                       "same layer body or both outside it",
                       t->first.name, t->last.name);
            diag_note(r->sink, b->item->name.span, "'%s' is defined here", t->last.name);
        }
        return 0;
    }
    if (a->index > b->index) {
        if (report) {
            diag_error(r->sink, t->span,
                       "the range '%s .. %s' is empty: '%s' is defined before '%s'", t->first.name,
                       t->last.name, t->last.name, t->first.name);
            diag_note(r->sink, b->item->name.span, "'%s' is defined here", t->last.name);
        }
        return 0;
    }
    *lo = k[0];
    *hi = k[1];
    return 1;
}

/* Does the instance's operator have the rule's partition? Reports at the
 * rule's target (or the default rule) when not. Unknown operators are
 * reported when the model is resolved. */
static int has_partition(Resolver *r, const WrittenInstance *wi, const PlanRule *rule, Span at,
                         int report) {
    const Op *op = module_find_op(r->module, wi->item->op.name);
    /* A renaming use is checked where it is bound. */
    if (!op || resolve_use_renames(rule->use) ||
        module_find_partition(r->module, rule->use->partition.name, op))
        return 1;
    if (report) {
        diag_error(r->sink, at, "operator '%s' of instance '%s' has no partition '%s'", op->name,
                   wi->item->name.name, rule->use->partition.name);
        diag_note(r->sink, wi->item->span, "'%s' is an instance of '%s' here", wi->item->name.name,
                  op->name);
        if (wi->item->site)
            diag_note(r->sink, wi->item->site->span, "'%s' is a part of composite '%s' used here",
                      wi->item->name.name, wi->item->site->op.name);
        diag_note(r->sink, op->decl->name.span, "operator '%s' is declared here", op->name);
    }
    return 0;
}

/* A rule naming one copy of a layer body's instance, applied by
 * bind_copies to the resolved model. */
typedef struct CopyRule {
    const PlanTarget *target; /* as written: `y_1` */
    Sym base;                 /* the body's instance (or one part of it): `y`, `y_mu` */
    const ModelItem *layer;   /* its layer block */
    long copy;
    const PlanRule *rule;
    const PlanDecl *plan;
} CopyRule;

/* A rule naming copy `copy` of a layer body's instance, or of its parts
 * [lo, hi]: a CopyRule per instance (`y`, `y_mu`) in copies. */
static int rule_copies(Resolver *r, const Instances *in, const PlanTarget *tg, const PlanRule *rule,
                       const PlanDecl *plan, int lo, int hi, long copy, PtrVec *copies,
                       int report) {
    for (int k = lo; k <= hi; ++k) {
        if (!has_partition(r, &in->items[k], rule, tg->span, report))
            return 0;
        if (!copies)
            continue;
        CopyRule *cr = ARENA_NEW(r->arena, CopyRule);
        *cr = (CopyRule){tg, in->items[k].item->name.name, in->items[k].layer, copy, rule, plan};
        ptrvec_push(r->arena, copies, cr);
    }
    return 1;
}

/* The rule that chooses each instance's partition (NULL: the inline
 * `use`, or none), the last rule naming an instance winning and the last
 * default applying where no rule does (a plan of a model that has inline
 * `use` clauses replaces them where its rules or its default apply). 0 after an
 * error (reported when report is set). */
static int choose_rules(Resolver *r, const PlanChain *chain, const Instances *in,
                        const PlanRule **chosen, const PlanDecl **chosen_plan, PtrVec *copies,
                        int report_from) {
    int ok = 1;
    const PlanRule *dflt = NULL;
    const PlanDecl *dflt_plan = NULL;
    for (int k = 0; k < in->count; ++k) {
        chosen[k] = NULL;
        chosen_plan[k] = NULL;
    }
    int report = 0, dflt_report = 0;
    for (int p = 0; p < chain->n; ++p) {
        const PlanDecl *plan = chain->plans[p];
        report = report_from >= 0 && p >= report_from;
        for (int i = 0; i < plan->rules.count; ++i) {
            const PlanRule *rule = plan->rules.items[i];
            if (rule->is_default) {
                dflt = rule;
                dflt_plan = plan;
                dflt_report = report;
                continue;
            }
            for (int t = 0; t < rule->targets.count; ++t) {
                const PlanTarget *tg = rule->targets.items[t];
                int lo, hi;
                long copy = 0;
                int kind = target_range(r, in, tg, report, &lo, &hi, &copy);
                if (!kind) {
                    ok = 0;
                    continue;
                }
                if (kind == 2) { /* one copy: applied to the resolved model */
                    ok &= rule_copies(r, in, tg, rule, plan, lo, hi, copy, copies, report);
                    continue;
                }
                const PtrVec *block = in->items[lo].block;
                for (int k = lo; k <= hi; ++k) {
                    if (in->items[k].block != block)
                        continue; /* a layer body nested between them */
                    if (!has_partition(r, &in->items[k], rule, tg->span, report)) {
                        ok = 0;
                        break; /* one error per target */
                    }
                    chosen[k] = rule;
                    chosen_plan[k] = plan;
                }
            }
        }
    }
    if (!dflt)
        return ok;
    int reported = 0;
    for (int k = 0; k < in->count; ++k) {
        if (chosen[k])
            continue;
        if (!has_partition(r, &in->items[k], dflt, dflt->span, dflt_report && !reported)) {
            ok = 0;
            reported = 1;
            continue;
        }
        chosen[k] = dflt;
        chosen_plan[k] = dflt_plan;
    }
    return ok;
}

static int mesh_has_axis(const PlanDecl *mesh_plan, Sym name) {
    for (int a = 0; a < mesh_plan->mesh.count; ++a)
        if (((const AxisDecl *)mesh_plan->mesh.items[a])->name.name == name)
            return 1;
    return 0;
}

/* A plan's own `stages` clause: one, along an axis of its mesh; and one
 * `microbatches` clause (a run reports the rest: the layer's copies, the
 * partitions, the parameter). */
static void check_stages(Resolver *r, const PlanDecl *plan, const PlanDecl *mesh_plan) {
    const PlanRule *first = NULL, *first_micro = NULL;
    for (int i = 0; i < plan->rules.count; ++i) {
        const PlanRule *rule = plan->rules.items[i];
        if (rule->micro && first_micro) {
            diag_error(r->sink, rule->span, "plan '%s' declares its micro-batches twice",
                       plan->name.name);
            diag_note(r->sink, first_micro->span, "first declared here");
        } else if (rule->micro) {
            first_micro = rule;
        }
        if (!rule->stages)
            continue;
        if (first) {
            diag_error(r->sink, rule->span, "plan '%s' declares its stages twice", plan->name.name);
            diag_note(r->sink, first->span, "first declared here");
            continue;
        }
        first = rule;
        if (mesh_plan && !mesh_has_axis(mesh_plan, rule->stages->name.name)) {
            diag_error(r->sink, rule->stages->name.span,
                       "the stages run along mesh axis '%s', which the mesh of plan '%s' lacks",
                       rule->stages->name.name, plan->name.name);
            diag_note(r->sink, mesh_plan->mesh_span, "the mesh is declared here");
        }
    }
}

/* Checks every plan once: its chain, its mesh, its rules against its model. */
static void check_plan(Resolver *r, const PlanDecl *plan) {
    PlanChain chain;
    if (!plan_chain(r, plan, &chain, 1))
        return;
    Instances in;
    collect_instances(r, chain.model, &in);
    const PlanRule **chosen = ARENA_ARRAY(r->arena, const PlanRule *, in.count + 1);
    const PlanDecl **chosen_plan = ARENA_ARRAY(r->arena, const PlanDecl *, in.count + 1);
    /* Report each plan's own rules only (a base's are its own errors). */
    choose_rules(r, &chain, &in, chosen, chosen_plan, NULL, chain.n - 1);
    check_stages(r, plan, chain.mesh_plan);
}

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
                                 where_text(r, chosen[k]->span));
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
                                 where_text(r, cr->rule->span));
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
    const PlanDecl *plan = find_plan(r, run->plan.name);
    if (!plan) {
        diag_error(r->sink, run->plan.span, "unknown plan '%s'", run->plan.name);
        return;
    }
    PlanChain chain;
    if (!plan_chain(r, plan, &chain, 0))
        return; /* reported at the plan */
    const ModelDecl *model = chain.model;
    if (!model_resolved(r, model->name.name))
        return; /* reported at the model: the run would repeat its errors */
    ParamSet ps = {model, ARENA_ARRAY(r->arena, const Expr *, model->items.count + 1)};
    if (run->shape.name && run->shape.name != model->name.name) {
        const Decl *sd = find_decl(r, DECL_SHAPE, run->shape.name);
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
    collect_instances(r, model, &in);
    const PlanRule **chosen = ARENA_ARRAY(r->arena, const PlanRule *, in.count + 1);
    const PlanDecl **chosen_plan = ARENA_ARRAY(r->arena, const PlanDecl *, in.count + 1);
    PtrVec copies = {0};
    if (!choose_rules(r, &chain, &in, chosen, chosen_plan, &copies, -1))
        return; /* reported at the plan */
    ModelDecl *decl = ARENA_NEW(r->arena, ModelDecl);
    decl->name = run->name;
    decl->span = run->span;
    decl->items = written_items(r, &model->items, &ps, &in, run_uses(r, &in, chosen, chosen_plan),
                                run_mesh(r, chain.mesh_plan, &sz));
    int errors = r->sink->error_count;
    const ModelItem *stages = plan_clause(&chain, 0), *micro = plan_clause(&chain, 1);
    if (stages && !mesh_has_axis(chain.mesh_plan, stages->name.name))
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
    const Decl *first = find_decl(r, d->kind,
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
                    check_plan(r, d->plan);
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
