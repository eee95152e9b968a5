/*
 * partition.c — evaluate DSIs into slice tables (see partition.h).
 */
#include "partition.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
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

/* One DSI's evaluation for one instance.
 *
 * A mixed-radix tuple (a, b, c) is a * (R(b) + 1) * (R(c) + 1) + b * (R(c)
 * + 1) + c, where R(x) is the largest value x takes over all points of
 * the partition. Each part's R is computed once per DSI, innermost tuples
 * first, and kept in a table by node (`ranges`), so nested tuples cost
 * one sweep over the points per part instead of a sweep per evaluation
 * (which was exponential in the nesting). */
typedef struct Eval {
    const Instance *inst;
    long sizes[IR_MAX_AXES]; /* the partition's axis sizes as bound */
    long npoints;            /* product of sizes */
    /* R of every radix part after the first, open addressing by node. */
    const Expr **range_keys;
    long *range_values;
    size_t range_cap; /* a power of two, or 0 */
    /* Where evaluation failed: the subexpression and why. */
    const Expr *failed;
    AstIntStatus why;
    long fa, fb; /* its operands */
} Eval;

static size_t range_slot(const Eval *ev, const Expr *e) {
    return (size_t)(((uintptr_t)e >> 4) * 2654435761u) & (ev->range_cap - 1);
}

static long *range_find(const Eval *ev, const Expr *e) {
    if (!ev->range_cap)
        return NULL;
    for (size_t k = range_slot(ev, e); ev->range_keys[k]; k = (k + 1) & (ev->range_cap - 1))
        if (ev->range_keys[k] == e)
            return &ev->range_values[k];
    return NULL;
}

static void range_put(Eval *ev, const Expr *e, long value) {
    size_t k = range_slot(ev, e);
    while (ev->range_keys[k] && ev->range_keys[k] != e)
        k = (k + 1) & (ev->range_cap - 1);
    ev->range_keys[k] = e;
    ev->range_values[k] = value;
}

static int fail(Eval *ev, const Expr *e, AstIntStatus why, long a, long b) {
    if (ev) {
        ev->failed = e;
        ev->why = why;
        ev->fa = a;
        ev->fb = b;
    }
    return 0;
}

/* The value of e at one point, in checked 64-bit arithmetic. ev may be
 * NULL outside partition_eval (then a tuple is a domain error: its ranges
 * are unknown). */
static int eval(Eval *ev, const Expr *e, const Instance *inst, const long *av, long t, long *out) {
    long a, b;
    AstIntStatus st;
    switch (e->kind) {
    case EXPR_INT:
        *out = e->value;
        return 1;
    case EXPR_NAME:
        return lookup_name(inst, e->name, av, t, out);
    case EXPR_NEG:
        if (!eval(ev, e->lhs, inst, av, t, &a))
            return 0;
        if ((st = ast_int_neg(a, out)) != AST_INT_OK)
            return fail(ev, e, st, a, 0);
        return 1;
    case EXPR_BINARY:
        if (!eval(ev, e->lhs, inst, av, t, &a) || !eval(ev, e->rhs, inst, av, t, &b))
            return 0;
        if ((st = ast_int_op(e->op, a, b, out)) != AST_INT_OK)
            return fail(ev, e, st, a, b);
        return 1;
    case EXPR_RADIX: {
        long v = 0;
        for (int i = 0; i < e->args.count; ++i) {
            const Expr *part = e->args.items[i];
            long pv;
            if (!eval(ev, part, inst, av, t, &pv))
                return 0;
            if (i > 0) {
                if (!ev)
                    return 0;
                const long *range = range_find(ev, part);
                if (!range)
                    ICE("mixed-radix part evaluated before its range");
                if (__builtin_add_overflow(*range, 1, &a) || __builtin_mul_overflow(v, a, &v))
                    return fail(ev, e, AST_INT_OVERFLOW, 0, 0);
            }
            if (__builtin_add_overflow(v, pv, &v))
                return fail(ev, e, AST_INT_OVERFLOW, 0, 0);
        }
        *out = v;
        return 1;
    }
    default:
        return 0;
    }
}

/* The number of radix parts after the first in e (the table's load). */
static size_t count_ranges(const Expr *e) {
    if (!e)
        return 0;
    size_t n = count_ranges(e->lhs) + count_ranges(e->rhs);
    if (e->kind == EXPR_RADIX || e->kind == EXPR_CALL)
        for (int i = 0; i < e->args.count; ++i)
            n += count_ranges(e->args.items[i]) + (e->kind == EXPR_RADIX && i > 0);
    return n;
}

/* The largest value of expr over all points (av, t) of the instance. */
static int expr_range(Eval *ev, const Expr *expr, long *out) {
    const Partition *p = ev->inst->partition;
    long best = LONG_MIN;
    for (long t = 0; t < ev->inst->steps; ++t) {
        for (long pt = 0; pt < ev->npoints; ++pt) {
            long av[IR_MAX_AXES];
            long rest = pt;
            for (int a = p->naxes - 1; a >= 0; --a) {
                av[a] = rest % ev->sizes[a];
                rest /= ev->sizes[a];
            }
            long v;
            if (!eval(ev, expr, ev->inst, av, t, &v))
                return 0;
            if (v > best)
                best = v;
        }
    }
    *out = best;
    return 1;
}

/* Computes R of every radix part in e, innermost first. */
static int compute_ranges(Eval *ev, const Expr *e) {
    if (!e)
        return 1;
    if (!compute_ranges(ev, e->lhs) || !compute_ranges(ev, e->rhs))
        return 0;
    if (e->kind != EXPR_RADIX && e->kind != EXPR_CALL)
        return 1;
    for (int i = 0; i < e->args.count; ++i) {
        const Expr *part = e->args.items[i];
        if (!compute_ranges(ev, part))
            return 0;
        long range;
        if (e->kind == EXPR_RADIX && i > 0 && !range_find(ev, part)) {
            if (!expr_range(ev, part, &range))
                return 0;
            range_put(ev, part, range);
        }
    }
    return 1;
}

/* Prepares the evaluation of one DSI for inst on mesh. */
static void eval_init(Arena *arena, Eval *ev, const Instance *inst, const Mesh *mesh,
                      const Expr *dsi) {
    memset(ev, 0, sizeof *ev);
    ev->inst = inst;
    ev->npoints = 1;
    for (int a = 0; a < inst->partition->naxes; ++a) {
        ev->sizes[a] = mesh->sizes[inst->axis_map[a]];
        ev->npoints *= ev->sizes[a]; /* at most the mesh's devices */
    }
    size_t n = count_ranges(dsi);
    if (n) {
        ev->range_cap = 16;
        while (ev->range_cap < 2 * n)
            ev->range_cap *= 2;
        ev->range_keys = ARENA_ARRAY(arena, const Expr *, ev->range_cap);
        ev->range_values = ARENA_ARRAY(arena, long, ev->range_cap);
    }
}

int partition_eval_expr(const Expr *expr, const Instance *inst, const long *axis_values, long t,
                        long *out) {
    return eval(NULL, expr, inst, axis_values, t, out);
}

/* Reports a failed evaluation of dsi (for dimension d of inst). */
static void report_failure(DiagSink *sink, const Eval *ev, const DsiAssign *dsi, const Op *op,
                           int d, const Instance *inst) {
    const Expr *at = ev->failed ? ev->failed : dsi->value;
    if (ev->why == AST_INT_DIV_ZERO)
        diag_error(sink, at->span, "DSI of '%s' divides by zero", op->dims[d]);
    else if (at->kind == EXPR_BINARY)
        diag_error(sink, at->span,
                   "DSI of '%s' overflows 64-bit integers: %ld %c %ld does not fit in 64 bits",
                   op->dims[d], ev->fa, at->op, ev->fb);
    else if (at->kind == EXPR_NEG)
        diag_error(sink, at->span,
                   "DSI of '%s' overflows 64-bit integers: -(%ld) does not fit in 64 bits",
                   op->dims[d], ev->fa);
    else
        diag_error(sink, at->span,
                   "DSI of '%s' overflows 64-bit integers: the mixed-radix value does not fit in "
                   "64 bits",
                   op->dims[d]);
    diag_note(sink, inst->use_span, "partition '%s' applied here", inst->partition->name);
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The smallest value in [0, maxv] that none of the n values (each in
 * [0, maxv]) takes, or -1. A table of the values where maxv is not far
 * more than the points, else a sort. */
static long first_unused(Arena *arena, const long *values, long n, long maxv) {
    if (maxv < 4 * n + 64) {
        unsigned char *taken = arena_alloc(arena, (size_t)maxv + 1);
        for (long i = 0; i < n; ++i)
            taken[values[i]] = 1;
        for (long v = 0; v <= maxv; ++v)
            if (!taken[v])
                return v;
        return -1;
    }
    long *sorted = ARENA_ARRAY(arena, long, (size_t)n);
    memcpy(sorted, values, sizeof(long) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(long), cmp_long);
    long next = 0;
    for (long i = 0; i < n && next <= maxv; ++i) {
        if (sorted[i] > next)
            return next;
        if (sorted[i] == next)
            next++;
    }
    return next <= maxv ? next : -1;
}

/* The partition's axis values at a device. */
static void axis_values_at(const Mesh *mesh, const Instance *inst, int dev, long *av) {
    long coords[IR_MAX_AXES];
    mesh_coords(mesh, dev, coords);
    for (int a = 0; a < inst->partition->naxes; ++a)
        av[a] = coords[inst->axis_map[a]];
}

/* The first XOR in a DSI, or NULL. */
static const Expr *find_xor(const Expr *e) {
    if (!e)
        return NULL;
    if (e->kind == EXPR_BINARY && e->op == '^')
        return e;
    const Expr *x = find_xor(e->lhs);
    if (!x)
        x = find_xor(e->rhs);
    for (int i = 0; !x && e->kind == EXPR_RADIX && i < e->args.count; ++i)
        x = find_xor(e->args.items[i]);
    return x;
}

/* XOR keeps the values of [0, P) in range only when P is a power of
 * two: a DSI that uses it is reported when its partition runs over an
 * axis (or steps) of another size. */
static int check_xor(DiagSink *sink, const Mesh *mesh, const Instance *inst) {
    const Partition *p = inst->partition;
    for (int d = 0; p && d < inst->op->ndims; ++d) {
        const Expr *x = p->dsi[d] ? find_xor(p->dsi[d]->value) : NULL;
        if (!x)
            continue;
        for (int a = 0; a <= p->naxes; ++a) {
            long size = a < p->naxes ? mesh->sizes[inst->axis_map[a]] : inst->steps;
            if (size & (size - 1)) {
                diag_error(sink, x->span,
                           "DSI of '%s' uses XOR, which stays within 0..P-1 only for a "
                           "power-of-two P; %s has size %ld",
                           inst->op->dims[d],
                           a < p->naxes ? "the mesh axis it runs over" : "the step axis", size);
                diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
                return 0;
            }
        }
    }
    return 1;
}

int partition_eval(Arena *arena, DiagSink *sink, const Model *model, const Instance *inst,
                   SliceTable *out) {
    const Mesh *mesh = &model->mesh;
    const Op *op = inst->op;
    const Partition *p = inst->partition;
    int ok = 1;

    memset(out, 0, sizeof *out);
    if (!check_xor(sink, mesh, inst))
        return 0;
    out->ndev = mesh->ndev;
    out->steps = inst->steps;
    out->ndims = op->ndims;
    out->naxes = mesh->naxes;
    for (int a = 0; a < mesh->naxes; ++a)
        out->axis_sizes[a] = mesh->sizes[a];
    /* Every DSI is evaluated at every (device, step) point. */
    long npoints;
    if (__builtin_mul_overflow((long)mesh->ndev, inst->steps, &npoints) ||
        npoints > PARTITION_MAX_POINTS) {
        const AxisDecl *steps = p ? p->steps : NULL;
        diag_error(sink, steps ? steps->size->span : inst->use_span,
                   "%ld steps on %d devices are more than the %ld (device, step) points a "
                   "partition may have",
                   inst->steps, mesh->ndev, (long)PARTITION_MAX_POINTS);
        if (steps)
            diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
        return 0;
    }
    out->slice = ARENA_ARRAY(arena, long, (size_t)op->ndims *(size_t)npoints);

    for (int d = 0; d < op->ndims; ++d) {
        const DsiAssign *dsi = p ? p->dsi[d] : NULL;
        long maxv = 0;
        int dim_ok = 1;
        Eval ev;
        if (dsi) {
            eval_init(arena, &ev, inst, mesh, dsi->value);
            if (!compute_ranges(&ev, dsi->value)) {
                report_failure(sink, &ev, dsi, op, d, inst);
                ok = 0;
                continue;
            }
        }
        for (int dev = 0; dev < mesh->ndev && dim_ok; ++dev) {
            long av[IR_MAX_AXES];
            axis_values_at(mesh, inst, dev, av);
            for (long t = 0; t < inst->steps; ++t) {
                long v = 0;
                if (dsi) {
                    if (!eval(&ev, dsi->value, inst, av, t, &v)) {
                        report_failure(sink, &ev, dsi, op, d, inst);
                        dim_ok = 0;
                        break;
                    }
                    if (v < 0) {
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
        /* Every slice of the dimension must be used somewhere. maxv may
         * be far more than the points (and LONG_MAX): no table by slice. */
        long skipped = first_unused(arena, &out->slice[(long)d * npoints], npoints, maxv);
        if (skipped >= 0) {
            diag_error(sink, dsi->value->span,
                       "slice %ld of dimension '%s' is never computed (the DSI takes values up "
                       "to %ld but skips %ld)",
                       skipped, op->dims[d], maxv, skipped);
            diag_note(sink, inst->use_span, "partition '%s' applied here", p->name);
            ok = 0;
            continue;
        }
        long count = maxv + 1; /* maxv < npoints: every value up to it is taken */
        out->nslices[d] = count;
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
    return ok;
}

int partition_same_points(const Instance *a, const Instance *b) {
    if (a->op != b->op || a->partition != b->partition || a->steps != b->steps ||
        a->nsize_params != b->nsize_params)
        return 0;
    for (int x = 0; x < a->op->ndims; ++x)
        if (a->dim_sizes[x] != b->dim_sizes[x])
            return 0;
    for (int x = 0; x < a->partition->naxes; ++x)
        if (a->axis_map[x] != b->axis_map[x])
            return 0;
    for (int x = 0; x < a->nsize_params; ++x)
        if (a->size_param_names[x] != b->size_param_names[x] ||
            a->size_param_values[x] != b->size_param_values[x])
            return 0;
    return 1;
}
