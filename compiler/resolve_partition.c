/*
 * resolve_partition.c — partitions: their axes and DSIs, the operators a
 * partition `of` a list or by role splits, and a partition by role
 * applied with its dimensions renamed (`use square(m = s, k = h)`).
 */
#include <string.h>

#include "compose.h"
#include "resolve_internal.h"

static int is_size_param(const Partition *p, Sym name) {
    for (int a = 0; a < p->naxes; ++a)
        if (p->axes[a]->size->kind == EXPR_NAME && p->axes[a]->size->name == name)
            return 1;
    return p->steps && p->steps->size->kind == EXPR_NAME && p->steps->size->name == name;
}

static int check_dsi_expr(Resolver *r, const Partition *p, const Expr *e) {
    switch (e->kind) {
    case EXPR_INT:
        return 1;
    case EXPR_NAME:
        for (int a = 0; a < p->naxes; ++a)
            if (p->axes[a]->name.name == e->name)
                return 1;
        if (p->steps && p->steps->name.name == e->name)
            return 1;
        if (is_size_param(p, e->name))
            return 1;
        {
            char axes[256];
            size_t n = 0;
            axes[0] = 0;
            for (int a = 0; a < p->naxes && n < sizeof axes - 64; ++a)
                n += (size_t)snprintf(axes + n, sizeof axes - n, "%s%s", a ? ", " : "",
                                      p->axes[a]->name.name);
            diag_error(r->sink, e->span, "unknown axis '%s' in the DSI of partition '%s'", e->name,
                       p->name);
            diag_note(r->sink, p->decl->name.span, "partition '%s' has mesh axes %s%s%s", p->name,
                      axes, p->steps ? " and step " : "", p->steps ? p->steps->name.name : "");
        }
        return 0;
    case EXPR_BINARY:
        return check_dsi_expr(r, p, e->lhs) & check_dsi_expr(r, p, e->rhs);
    case EXPR_NEG:
        return check_dsi_expr(r, p, e->lhs);
    case EXPR_RADIX: {
        int ok = 1;
        for (int i = 0; i < e->args.count; ++i)
            ok &= check_dsi_expr(r, p, e->args.items[i]);
        return ok;
    }
    case EXPR_INDEX:
    case EXPR_CALL:
        diag_error(r->sink, e->span,
                   "a DSI is an integer expression over axes; '%s' is not allowed here",
                   e->kind == EXPR_CALL ? "a call" : "a tensor");
        return 0;
    default:
        ICE("bad expression kind %d", e->kind);
    }
}

static int check_axis_size(Resolver *r, const AxisDecl *ax) {
    if (ax->size->kind == EXPR_NAME)
        return 1;
    if (ax->size->kind == EXPR_INT && ax->size->value >= 1)
        return 1;
    diag_error(r->sink, ax->size->span,
               "the size of axis '%s' must be a positive integer or a size parameter",
               ax->name.name);
    return 0;
}

/* Dimension renamings of a use: the partition's dimension from[i] is the
 * operator's to[i]. */
typedef struct DimRename {
    int n;
    Sym from[IR_MAX_DIMS];
    Sym to[IR_MAX_DIMS];
} DimRename;

static Sym renamed(const DimRename *rn, Sym name) {
    for (int i = 0; rn && i < rn->n; ++i)
        if (rn->from[i] == name)
            return rn->to[i];
    return name;
}

/* The partition `decl` of operator `op` (one of its `of` list, or, for a
 * partition by role, an operator with the dimensions it names, or, with
 * rn, the dimensions it names renamed); NULL after reporting. */
static Partition *build_partition(Resolver *r, const PartitionDecl *decl, const Op *op,
                                  const DimRename *rn) {
    Partition *p = ARENA_NEW(r->arena, Partition);
    p->name = decl->name.name;
    p->decl = decl;
    p->op = op;
    if (decl->mesh.count > IR_MAX_AXES) {
        diag_error(r->sink, decl->name.span, "partition '%s' has more than %d axes", p->name,
                   IR_MAX_AXES);
        return NULL;
    }
    int ok = 1;
    for (int a = 0; a < decl->mesh.count; ++a) {
        const AxisDecl *ax = decl->mesh.items[a];
        for (int b = 0; b < a; ++b) {
            if (p->axes[b]->name.name == ax->name.name) {
                diag_error(r->sink, ax->name.span, "axis '%s' declared twice", ax->name.name);
                diag_note(r->sink, p->axes[b]->name.span, "previous declaration");
                ok = 0;
            }
        }
        ok &= check_axis_size(r, ax);
        p->axes[p->naxes++] = ax;
    }
    if (decl->steps) {
        p->steps = decl->steps;
        ok &= check_axis_size(r, decl->steps);
        for (int a = 0; a < p->naxes; ++a) {
            if (p->axes[a]->name.name == decl->steps->name.name) {
                diag_error(r->sink, decl->steps->name.span,
                           "step axis '%s' has the name of a mesh axis", decl->steps->name.name);
                ok = 0;
            }
        }
    }
    for (int i = 0; i < decl->dsis.count; ++i) {
        const DsiAssign *dsi = decl->dsis.items[i];
        Sym dim = renamed(rn, dsi->dim.name);
        int d = resolve_op_dim(p->op, dim);
        if (d < 0) {
            diag_error(r->sink, dsi->dim.span, "'%s' is not a dimension of operator '%s'", dim,
                       p->op->name);
            diag_note(r->sink, p->op->decl->name.span, "operator '%s' is declared here",
                      p->op->name);
            ok = 0;
            continue;
        }
        if (p->dsi[d]) {
            diag_error(r->sink, dsi->span, "dimension '%s' is given two DSIs", dim);
            diag_note(r->sink, p->dsi[d]->span, "first DSI");
            ok = 0;
            continue;
        }
        if (!check_dsi_expr(r, p, dsi->value)) {
            ok = 0;
            continue;
        }
        p->dsi[d] = dsi;
    }
    return ok ? p : NULL;
}

static void resolve_partition(Resolver *r, const PartitionDecl *decl, const Op *op) {
    Partition *p = build_partition(r, decl, op, NULL);
    if (p)
        ptrvec_push(r->arena, &r->module->partitions, p);
}

/* A partition with `of A, B, ...`: one Partition per operator named. */
void resolve_partition_of(Resolver *r, const PartitionDecl *decl) {
    for (int i = 0; i < decl->of_ops.count; ++i) {
        const Ident *of = decl->of_ops.items[i];
        const Op *op = module_find_op(r->module, of->name);
        if (!op && compose_is_composite(r, of->name)) {
            diag_error(r->sink, of->span,
                       "'%s' is a composite: a partition splits an operator; a plan rule or a "
                       "`use` for a composite's instance applies to each of its parts",
                       of->name);
            continue;
        }
        if (!op) {
            diag_error(r->sink, of->span, "unknown operator '%s'", of->name);
            continue;
        }
        int again = 0;
        for (int j = 0; j < i; ++j)
            again |= ((const Ident *)decl->of_ops.items[j])->name == of->name;
        const Partition *prev = module_find_partition(r->module, decl->name.name, op);
        if (again || prev) {
            diag_error(r->sink, again ? of->span : decl->name.span,
                       "partition '%s' of '%s' is defined twice", decl->name.name, of->name);
            if (prev)
                diag_note(r->sink, prev->decl->name.span, "previous definition");
            continue;
        }
        resolve_partition(r, decl, op);
    }
}

/* Does op have every dimension the partition's DSIs name? */
static int op_has_dims_of(const Op *op, const PartitionDecl *decl) {
    for (int i = 0; i < decl->dsis.count; ++i)
        if (resolve_op_dim(op, ((const DsiAssign *)decl->dsis.items[i])->dim.name) < 0)
            return 0;
    return 1;
}

static int use_renames(const UseClause *use, Sym name) {
    return use && use->partition.name == name && resolve_use_renames(use);
}

static int items_rename(const PtrVec *items, Sym name) {
    for (int i = 0; i < items->count; ++i) {
        const ModelItem *it = items->items[i];
        if ((it->kind == MITEM_INSTANCE && use_renames(it->use, name)) ||
            (it->kind == MITEM_LAYER && items_rename(&it->items, name)))
            return 1;
    }
    return 0;
}

/* Does a `use` of a model or a plan's rule apply the partition with a
 * renaming? (A partition by role written for renaming need fit no
 * operator by itself.) */
static int renamed_anywhere(const Resolver *r, Sym name) {
    for (int f = 0; f < r->nprograms; ++f) {
        for (int i = 0; i < r->programs[f]->decls.count; ++i) {
            const Decl *d = r->programs[f]->decls.items[i];
            if (d->kind == DECL_MODEL && items_rename(&d->model->items, name))
                return 1;
            for (int k = 0; d->kind == DECL_PLAN && k < d->plan->rules.count; ++k)
                if (use_renames(((const PlanRule *)d->plan->rules.items[k])->use, name))
                    return 1;
        }
    }
    return 0;
}

/* Partitions by role (no `of`): one Partition for every operator with the
 * dimensions the DSIs name and no partition of that name of its own (an
 * operator's own partition wins over the role). */
void resolve_partition_roles(Resolver *r, const PtrVec *roles) {
    for (int k = 0; k < roles->count; ++k) {
        const PartitionDecl *decl = roles->items[k];
        for (int j = 0; j < k; ++j) {
            const PartitionDecl *prev = roles->items[j];
            if (prev->name.name == decl->name.name) {
                diag_error(r->sink, decl->name.span, "partition '%s' is defined twice",
                           decl->name.name);
                diag_note(r->sink, prev->name.span, "previous definition");
                decl = NULL;
                break;
            }
        }
        if (!decl)
            continue;
        int applied = 0;
        for (int i = 0; i < r->module->ops.count; ++i) {
            const Op *op = r->module->ops.items[i];
            if (!op_has_dims_of(op, decl) || module_find_partition(r->module, decl->name.name, op))
                continue;
            int errors = r->sink->error_count;
            resolve_partition(r, decl, op);
            applied = 1;
            if (r->sink->error_count > errors)
                break; /* the same errors again for every other operator */
        }
        if (!applied && decl->dsis.count && !renamed_anywhere(r, decl->name.name)) {
            const DsiAssign *first = decl->dsis.items[0];
            diag_error(r->sink, first->dim.span,
                       "no operator has every dimension partition '%s' names", decl->name.name);
        }
    }
}

int resolve_use_renames(const UseClause *use) {
    int n = 0;
    for (int i = 0; i < use->bindings.count; ++i)
        n += ((const AxisBinding *)use->bindings.items[i])->is_rename;
    return n;
}

/* The partition declaration by role of that name, or NULL. */
static const PartitionDecl *find_role(const Resolver *r, Sym name) {
    for (int f = 0; f < r->nprograms; ++f) {
        for (int i = 0; i < r->programs[f]->decls.count; ++i) {
            const Decl *d = r->programs[f]->decls.items[i];
            if (d->kind == DECL_PARTITION && !d->partition->of_ops.count &&
                d->partition->name.name == name)
                return d->partition;
        }
    }
    return NULL;
}

/* The renamings of a use, checked against the partition and the operator. */
static int collect_renames(Resolver *r, const PartitionDecl *decl, const Op *op,
                           const UseClause *use, DimRename *rn) {
    rn->n = 0;
    for (int i = 0; i < use->bindings.count; ++i) {
        const AxisBinding *b = use->bindings.items[i];
        if (!b->is_rename)
            continue;
        int named = 0;
        for (int k = 0; k < decl->dsis.count; ++k)
            named |= ((const DsiAssign *)decl->dsis.items[k])->dim.name == b->part_axis.name;
        if (!named) {
            diag_error(r->sink, b->part_axis.span, "partition '%s' names no dimension '%s'",
                       decl->name.name, b->part_axis.name);
            diag_note(r->sink, decl->name.span, "partition '%s' is declared here", decl->name.name);
            return 0;
        }
        if (resolve_op_dim(op, b->mesh_axis.name) < 0) {
            diag_error(r->sink, b->mesh_axis.span, "operator '%s' has no dimension '%s'", op->name,
                       b->mesh_axis.name);
            diag_note(r->sink, op->decl->name.span, "operator '%s' is declared here", op->name);
            return 0;
        }
        for (int k = 0; k < rn->n; ++k) {
            if (rn->from[k] == b->part_axis.name || rn->to[k] == b->mesh_axis.name) {
                if (rn->from[k] == b->part_axis.name)
                    diag_error(r->sink, b->span, "dimension '%s' is renamed twice",
                               b->part_axis.name);
                else
                    diag_error(r->sink, b->span,
                               "two dimensions of partition '%s' are renamed to '%s'",
                               decl->name.name, b->mesh_axis.name);
                return 0;
            }
        }
        rn->from[rn->n] = b->part_axis.name;
        rn->to[rn->n] = b->mesh_axis.name;
        rn->n++;
    }
    return 1;
}

const Partition *resolve_renamed_partition(Resolver *r, const Op *op, const UseClause *use) {
    Sym name = use->partition.name;
    const PartitionDecl *decl = find_role(r, name);
    if (!decl) {
        const Partition *any = module_find_partition(r->module, name, NULL);
        if (!any) {
            diag_error(r->sink, use->partition.span, "unknown partition '%s'", name);
            return NULL;
        }
        diag_error(r->sink, use->partition.span,
                   "partition '%s' is not a partition by role: only one without `of` can rename "
                   "dimensions",
                   name);
        diag_note(r->sink, any->decl->name.span, "partition '%s' is declared here", name);
        return NULL;
    }
    DimRename rn;
    if (!collect_renames(r, decl, op, use, &rn))
        return NULL;
    /* One Partition per operator and renaming: the copies of a layer share it. */
    const char *key = arena_printf(r->arena, "%s/%s", name, op->name);
    for (int i = 0; i < rn.n; ++i)
        key = arena_printf(r->arena, "%s/%s=%s", key, rn.from[i], rn.to[i]);
    Sym k = arena_intern(r->arena, key, strlen(key));
    for (int i = 0; i + 1 < r->renamed.count; i += 2)
        if (r->renamed.items[i] == k)
            return r->renamed.items[i + 1];
    int errors = r->sink->error_count;
    Partition *p = build_partition(r, decl, op, &rn);
    if (!p) {
        if (r->sink->error_count > errors)
            diag_note(r->sink, use->span, "partition '%s' applied to '%s' here", name, op->name);
        return NULL;
    }
    ptrvec_push(r->arena, &r->renamed, (void *)k);
    ptrvec_push(r->arena, &r->renamed, p);
    return p;
}
