/*
 * partition.c — evaluate DSIs into slice tables (see partition.h).
 */
#include "partition.h"

#include <limits.h>
#include <string.h>

void mesh_coords(const Mesh *mesh, int rank, long *coords) {
    for (int a = mesh->naxes - 1; a >= 0; --a) {
        coords[a] = rank % mesh->sizes[a];
        rank = (int)(rank / mesh->sizes[a]);
    }
}

int mesh_rank(const Mesh *mesh, const long *coords) {
    long r = 0;
    for (int a = 0; a < mesh->naxes; ++a)
        r = r * mesh->sizes[a] + coords[a];
    return (int)r;
}

/* The value of a name inside a partition: an axis, the step, or a size
 * parameter. resolve guarantees it is one of them. */
static int lookup_name(const Instance *inst, Sym name, const long *axis_values, long t, long *out) {
    const Partition *p = inst->partition;
    for (int a = 0; a < p->naxes; ++a) {
        if (p->axes[a]->name.name == name) {
            *out = axis_values[a];
            return 1;
        }
    }
    if (p->steps && p->steps->name.name == name) {
        *out = t;
        return 1;
    }
    for (int i = 0; i < inst->nsize_params; ++i) {
        if (inst->size_param_names[i] == name) {
            *out = inst->size_param_values[i];
            return 1;
        }
    }
    ICE("unresolved name '%s' in partition '%s'", name, p->name);
}

/* Largest value of expr over all points (for mixed radix). */
static int expr_range(const Expr *expr, const Instance *inst, long *out);

static int eval(const Expr *e, const Instance *inst, const long *av, long t, long *out) {
    long a, b;
    switch (e->kind) {
    case EXPR_INT:
        *out = e->value;
        return 1;
    case EXPR_NAME:
        return lookup_name(inst, e->name, av, t, out);
    case EXPR_NEG:
        if (!eval(e->lhs, inst, av, t, &a))
            return 0;
        *out = -a;
        return 1;
    case EXPR_BINARY:
        if (!eval(e->lhs, inst, av, t, &a) || !eval(e->rhs, inst, av, t, &b))
            return 0;
        return ast_int_binary(e->op, a, b, out);
    case EXPR_RADIX: {
        long v = 0;
        for (int i = 0; i < e->args.count; ++i) {
            const Expr *part = e->args.items[i];
            long pv, range;
            if (!eval(part, inst, av, t, &pv))
                return 0;
            if (i > 0) {
                if (!expr_range(part, inst, &range))
                    return 0;
                v = v * (range + 1);
            }
            v += pv;
        }
        *out = v;
        return 1;
    }
    default:
        return 0;
    }
}

/* The partition's axis sizes as bound for this instance. */
static void part_axis_sizes(const Instance *inst, const Mesh *mesh, long *sizes) {
    for (int a = 0; a < inst->partition->naxes; ++a)
        sizes[a] = mesh->sizes[inst->axis_map[a]];
}

/* Mixed radix needs the range of each part; the mesh is not reachable
 * from inside eval, so the bound sizes travel through a file-scope pointer
 * set for the duration of one partition_eval call. */
static const Mesh *current_mesh;

static int expr_range(const Expr *expr, const Instance *inst, long *out) {
    ICE_ASSERT(current_mesh != NULL);
    const Partition *p = inst->partition;
    long sizes[IR_MAX_AXES];
    part_axis_sizes(inst, current_mesh, sizes);
    long npoints = 1;
    for (int a = 0; a < p->naxes; ++a)
        npoints *= sizes[a];
    long best = LONG_MIN;
    for (long t = 0; t < inst->steps; ++t) {
        for (long pt = 0; pt < npoints; ++pt) {
            long av[IR_MAX_AXES];
            long rest = pt;
            for (int a = p->naxes - 1; a >= 0; --a) {
                av[a] = rest % sizes[a];
                rest /= sizes[a];
            }
            long v;
            if (!eval(expr, inst, av, t, &v))
                return 0;
            if (v > best)
                best = v;
        }
    }
    *out = best;
    return 1;
}

int partition_eval_expr(const Expr *expr, const Instance *inst, const long *axis_values, long t,
                        long *out) {
    return eval(expr, inst, axis_values, t, out);
}

/* The partition's axis values at a device. */
static void axis_values_at(const Mesh *mesh, const Instance *inst, int dev, long *av) {
    long coords[IR_MAX_AXES];
    mesh_coords(mesh, dev, coords);
    for (int a = 0; a < inst->partition->naxes; ++a)
        av[a] = coords[inst->axis_map[a]];
}

int partition_eval(Arena *arena, DiagSink *sink, const Model *model, const Instance *inst,
                   SliceTable *out) {
    const Mesh *mesh = &model->mesh;
    const Op *op = inst->op;
    const Partition *p = inst->partition;
    int ok = 1;

    memset(out, 0, sizeof *out);
    out->ndev = mesh->ndev;
    out->steps = inst->steps;
    out->ndims = op->ndims;
    out->naxes = mesh->naxes;
    for (int a = 0; a < mesh->naxes; ++a)
        out->axis_sizes[a] = mesh->sizes[a];
    out->slice = ARENA_ARRAY(arena, long, (size_t)op->ndims * mesh->ndev * inst->steps);
    current_mesh = mesh;

    for (int d = 0; d < op->ndims; ++d) {
        const DsiAssign *dsi = p ? p->dsi[d] : NULL;
        long maxv = 0;
        int dim_ok = 1;
        for (int dev = 0; dev < mesh->ndev && dim_ok; ++dev) {
            long av[IR_MAX_AXES];
            axis_values_at(mesh, inst, dev, av);
            for (long t = 0; t < inst->steps; ++t) {
                long v = 0;
                if (dsi) {
                    if (!eval(dsi->value, inst, av, t, &v)) {
                        diag_error(sink, dsi->value->span, "DSI of '%s' divides by zero",
                                   op->dims[d]);
                        diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
                        dim_ok = 0;
                        break;
                    }
                    if (v < 0) {
                        long coords[IR_MAX_AXES];
                        mesh_coords(mesh, dev, coords);
                        diag_error(sink, dsi->value->span,
                                   "DSI of '%s' is negative (%ld) on device %d at step %ld",
                                   op->dims[d], v, dev, t);
                        diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
                        dim_ok = 0;
                        break;
                    }
                }
                out->slice[((long)d * mesh->ndev + dev) * inst->steps + t] = v;
                if (v > maxv)
                    maxv = v;
            }
        }
        if (!dim_ok) {
            ok = 0;
            continue;
        }
        long count = maxv + 1;
        out->nslices[d] = count;
        /* Every slice of the dimension must be used somewhere. */
        unsigned char *used = arena_alloc(arena, (size_t)count);
        for (long x = 0; x < (long)mesh->ndev * inst->steps; ++x)
            used[out->slice[(long)d * mesh->ndev * inst->steps + x]] = 1;
        for (long s = 0; s < count; ++s) {
            if (!used[s]) {
                diag_error(sink, dsi->value->span,
                           "slice %ld of dimension '%s' is never computed (the DSI takes values up "
                           "to %ld but skips %ld)",
                           s, op->dims[d], maxv, s);
                diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
                ok = 0;
                dim_ok = 0;
                break;
            }
        }
        if (!dim_ok)
            continue;
        if (inst->dim_sizes[d] % count != 0) {
            diag_error(sink, dsi->value->span,
                       "%ld slices do not divide dimension '%s' of size %ld", count, op->dims[d],
                       inst->dim_sizes[d]);
            diag_note(sink, inst->span, "'%s' has size %ld in instance '%s'", op->dims[d],
                      inst->dim_sizes[d], inst->name);
            ok = 0;
            continue;
        }
        out->extent[d] = inst->dim_sizes[d] / count;
    }
    current_mesh = NULL;
    return ok;
}
