/*
 * resolve_plan.c — plans (docs/language.md, "Plans"): the `extends`
 * chain, the instances a plan's rules name, the rule that chooses each
 * instance's partition, and the checks of every plan. The runs that use
 * them are resolve_run.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_internal.h"

/* ------------------------------------------------------------------ */
/* Finding declarations                                                */

const Decl *resolve_find_decl(const Resolver *r, DeclKind kind, Sym name) {
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

const PlanDecl *resolve_find_plan(const Resolver *r, Sym name) {
    const Decl *d = resolve_find_decl(r, DECL_PLAN, name);
    return d ? d->plan : NULL;
}

/* "FILE:LINE" of a span. */
const char *resolve_where_text(const Resolver *r, Span span) {
    const SourceFile *f = source_get(r->sink->sources, span.file);
    int line = 0, col = 0;
    source_line_col(f, span.lo, &line, &col);
    return arena_printf(r->arena, "%s:%d", f->name, line);
}

/* ------------------------------------------------------------------ */
/* Plans: the extends chain                                            */

/* The chain from the plan's root to the plan; 0 after reporting an
 * unknown base, a cycle or an unknown model (when report is set). */
int resolve_plan_chain(Resolver *r, const PlanDecl *plan, PlanChain *chain, int report) {
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
        const PlanDecl *base = resolve_find_plan(r, p->base.name);
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

void resolve_collect_instances(Resolver *r, const ModelDecl *model, Instances *in) {
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
int resolve_choose_rules(Resolver *r, const PlanChain *chain, const Instances *in,
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

int resolve_mesh_has_axis(const PlanDecl *mesh_plan, Sym name) {
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
        if (mesh_plan && !resolve_mesh_has_axis(mesh_plan, rule->stages->name.name)) {
            diag_error(r->sink, rule->stages->name.span,
                       "the stages run along mesh axis '%s', which the mesh of plan '%s' lacks",
                       rule->stages->name.name, plan->name.name);
            diag_note(r->sink, mesh_plan->mesh_span, "the mesh is declared here");
        }
    }
}

/* Checks every plan once: its chain, its mesh, its rules against its model. */
void resolve_check_plan(Resolver *r, const PlanDecl *plan) {
    PlanChain chain;
    if (!resolve_plan_chain(r, plan, &chain, 1))
        return;
    Instances in;
    resolve_collect_instances(r, chain.model, &in);
    const PlanRule **chosen = ARENA_ARRAY(r->arena, const PlanRule *, in.count + 1);
    const PlanDecl **chosen_plan = ARENA_ARRAY(r->arena, const PlanDecl *, in.count + 1);
    /* Report each plan's own rules only (a base's are its own errors). */
    resolve_choose_rules(r, &chain, &in, chosen, chosen_plan, NULL, chain.n - 1);
    check_stages(r, plan, chain.mesh_plan);
}
