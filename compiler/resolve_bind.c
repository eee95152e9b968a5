/*
 * resolve_bind.c — binding an instance's `use` clause: the partition of
 * its operator (renamed where the use renames dimensions), its axes bound
 * to the mesh's in order or by name, and its size parameters to the
 * instance's dimensions and the mesh's sizes (see resolve_internal.h).
 */
#include "resolve.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "resolve_internal.h"

/* Binds a partition size (INT or size parameter) to a value. */
static int bind_size(Resolver *r, Instance *inst, const Expr *size, long value, Span where,
                     const char *what) {
    if (size->kind == EXPR_INT) {
        if (size->value != value) {
            diag_error(r->sink, where, "%s has size %ld but partition '%s' needs %ld", what, value,
                       inst->partition->name, size->value);
            diag_note(r->sink, size->span, "required here");
            return 0;
        }
        return 1;
    }
    for (int i = 0; i < inst->nsize_params; ++i) {
        if (inst->size_param_names[i] == size->name) {
            if (inst->size_param_values[i] != value) {
                diag_error(
                    r->sink, where,
                    "%s has size %ld but partition '%s' needs %s = %ld (bound by an earlier axis)",
                    what, value, inst->partition->name, size->name, inst->size_param_values[i]);
                diag_note(r->sink, size->span, "'%s' is used here", size->name);
                return 0;
            }
            return 1;
        }
    }
    inst->size_param_names[inst->nsize_params] = size->name;
    inst->size_param_values[inst->nsize_params] = value;
    inst->nsize_params++;
    return 1;
}

int resolve_bind_partition(Resolver *r, Model *m, Instance *inst, const UseClause *use) {
    int nrenames = resolve_use_renames(use);
    const Partition *p = NULL;
    if (nrenames && !(p = resolve_renamed_partition(r, inst->op, use)))
        return 0;
    if (!p)
        p = module_find_partition(r->module, use->partition.name, inst->op);
    if (!p)
        p = module_find_partition(r->module, use->partition.name, NULL);
    if (!p) {
        diag_error(r->sink, use->partition.span, "unknown partition '%s'", use->partition.name);
        return 0;
    }
    if (p->op != inst->op && !p->decl->of_ops.count) {
        /* A partition by role that this operator's dimensions do not fit. */
        const char *lacks = "?";
        for (int i = 0; i < p->decl->dsis.count; ++i) {
            const DsiAssign *dsi = p->decl->dsis.items[i];
            if (resolve_op_dim(inst->op, dsi->dim.name) < 0) {
                lacks = dsi->dim.name;
                break;
            }
        }
        diag_error(r->sink, use->partition.span,
                   "partition '%s' splits dimension '%s', which operator '%s' does not have",
                   p->name, lacks, inst->op->name);
        diag_note(r->sink, inst->op->decl->name.span, "operator '%s' is declared here",
                  inst->op->name);
        diag_note(r->sink, p->decl->name.span, "partition '%s' is declared here", p->name);
        return 0;
    }
    if (p->op != inst->op) {
        diag_error(r->sink, use->partition.span, "partition '%s' splits operator '%s', not '%s'",
                   p->name, p->op->name, inst->op->name);
        diag_note(r->sink, p->decl->name.span, "partition '%s' is declared here", p->name);
        return 0;
    }
    inst->partition = p;
    inst->use_span = use->span;
    inst->rule = use->origin;
    if (p->naxes > m->mesh.naxes) {
        diag_error(r->sink, use->span, "partition '%s' needs %d mesh ax%s; the mesh of '%s' has %d",
                   p->name, p->naxes, p->naxes == 1 ? "is" : "es", m->name, m->mesh.naxes);
        diag_note(r->sink, m->mesh.span, "mesh declared here");
        return 0;
    }
    int stage_axis = m->stages_item ? m->stage_axis : -1; /* bound by no partition */
    if (use->bindings.count <= nrenames && stage_axis >= 0 && p->naxes == m->mesh.naxes) {
        diag_error(r->sink, use->span,
                   "partition '%s' needs %d mesh ax%s besides '%s', the stages' axis; the mesh "
                   "of '%s' has %d other",
                   p->name, p->naxes, p->naxes == 1 ? "is" : "es", m->mesh.names[stage_axis],
                   m->name, m->mesh.naxes - 1);
        return 0;
    }
    for (int a = 0; a < p->naxes; ++a) /* in order, the stages' axis left out */
        inst->axis_map[a] = use->bindings.count > nrenames       ? -1
                            : stage_axis >= 0 && a >= stage_axis ? a + 1
                                                                 : a;
    for (int i = 0; i < use->bindings.count; ++i) {
        const AxisBinding *bnd = use->bindings.items[i];
        if (bnd->is_rename)
            continue;
        int pa = -1, ma = -1;
        for (int a = 0; a < p->naxes; ++a)
            if (p->axes[a]->name.name == bnd->part_axis.name)
                pa = a;
        for (int a = 0; a < m->mesh.naxes; ++a)
            if (m->mesh.names[a] == bnd->mesh_axis.name)
                ma = a;
        if (pa < 0) {
            diag_error(r->sink, bnd->part_axis.span, "partition '%s' has no axis '%s'", p->name,
                       bnd->part_axis.name);
            return 0;
        }
        if (ma < 0) {
            diag_error(r->sink, bnd->mesh_axis.span, "the mesh of '%s' has no axis '%s'", m->name,
                       bnd->mesh_axis.name);
            diag_note(r->sink, m->mesh.span, "mesh declared here");
            return 0;
        }
        if (inst->axis_map[pa] >= 0) {
            diag_error(r->sink, bnd->span, "axis '%s' is bound twice", bnd->part_axis.name);
            return 0;
        }
        inst->axis_map[pa] = ma;
    }
    for (int a = 0; a < p->naxes; ++a) {
        if (inst->axis_map[a] < 0) {
            diag_error(r->sink, use->span,
                       "axis '%s' of partition '%s' is not bound to a mesh axis",
                       p->axes[a]->name.name, p->name);
            return 0;
        }
        for (int b = 0; b < a; ++b) {
            if (inst->axis_map[b] == inst->axis_map[a]) {
                diag_error(r->sink, use->span, "axes '%s' and '%s' are bound to the same mesh axis",
                           p->axes[b]->name.name, p->axes[a]->name.name);
                return 0;
            }
        }
        const char *what =
            arena_printf(r->arena, "mesh axis '%s'", m->mesh.names[inst->axis_map[a]]);
        if (!bind_size(r, inst, p->axes[a]->size, m->mesh.sizes[inst->axis_map[a]], use->span,
                       what))
            return 0;
    }
    inst->steps = 1;
    if (p->steps) {
        const Expr *size = p->steps->size;
        if (size->kind == EXPR_INT) {
            inst->steps = size->value;
        } else {
            int found = 0;
            for (int i = 0; i < inst->nsize_params; ++i) {
                if (inst->size_param_names[i] == size->name) {
                    inst->steps = inst->size_param_values[i];
                    found = 1;
                }
            }
            if (!found) {
                diag_error(r->sink, size->span, "step count '%s' is not bound by any mesh axis",
                           size->name);
                diag_note(r->sink, use->span, "partition '%s' applied here", p->name);
                return 0;
            }
        }
    }
    return 1;
}
