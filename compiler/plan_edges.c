/*
 * plan_edges.c — the planner's edges: what each pair of candidates of a
 * producer and a consumer costs to connect (a conversion, or a merge of
 * gradient all-reduces), and the classes of candidates whose futures
 * price alike (see plan_internal.h).
 */
#include "plan_internal.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Same tiling and same tiles on every device. */
static int same_tiles(const SchedTensor *ta, const Layout *la, const SchedTensor *tb,
                      const Layout *lb) {
    if (ta->ndims != tb->ndims || memcmp(ta->nslices, tb->nslices, sizeof ta->nslices) ||
        memcmp(ta->shape, tb->shape, sizeof ta->shape) || la->ndev != lb->ndev)
        return 0;
    if (la->count == lb->count && la->tiles == lb->tiles)
        return 1;
    for (int d = 0; d < la->ndev; ++d)
        if (la->count[d] != lb->count[d] ||
            memcmp(la->tiles[d], lb->tiles[d], sizeof(long) * (size_t)la->count[d]))
            return 0;
    return 1;
}

/* What an edge sees of a candidate: a value's tiling and layout (the
 * result for a = -1, else argument a) and its gradient's. */
typedef struct Side {
    const SchedTensor *t, *dt;
    const Layout *l, *dl;
    int has_grad;
    uint64_t reduce_sig; /* inputs: their gradient's all-reduce */
    double reduce_time;
} Side;

static Side side_of(const PlanCandidate *c, int a) {
    Side s;
    memset(&s, 0, sizeof s);
    if (a < 0) {
        s.t = &c->out_t, s.l = &c->out_l, s.dt = &c->dout_t, s.dl = &c->dout_l;
        s.has_grad = c->has_dout;
    } else {
        s.t = &c->in_t[a], s.l = &c->in_l[a], s.dt = &c->din_t[a], s.dl = &c->din_l[a];
        s.has_grad = c->has_din[a];
        s.reduce_sig = c->reduce_sig[a];
        s.reduce_time = c->cost.reduce_time[a];
    }
    return s;
}

static int same_side(const Side *x, const Side *y) {
    return x->has_grad == y->has_grad && x->reduce_sig == y->reduce_sig &&
           x->reduce_time == y->reduce_time && same_tiles(x->t, x->l, y->t, y->l) &&
           (!x->has_grad || same_tiles(x->dt, x->dl, y->dt, y->dl));
}

/* class[c]: the first candidate of instance i whose side a equals c's. */
static int *side_classes(Planner *p, int i, int a) {
    int n = ncand(p, i);
    int *cls = ARENA_ARRAY(p->arena, int, n + 1);
    for (int c = 0; c < n; ++c) {
        cls[c] = c;
        Side sc = side_of(cand(p, i, c), a);
        for (int k = 0; k < c; ++k) {
            if (cls[k] != k)
                continue;
            Side sk = side_of(cand(p, i, k), a);
            if (same_side(&sk, &sc)) {
                cls[c] = k;
                break;
            }
        }
    }
    return cls;
}

/* The first reader of model tensor t (instance and argument), or -1. */
static int first_reader(const Planner *p, int t, int *arg) {
    *arg = p->first_arg[t];
    return p->first_inst[t];
}

/* Every model tensor's first reader, in one pass. */
void plan_find_first_readers(Planner *p) {
    const Model *m = p->model;
    p->first_inst = ARENA_ARRAY(p->arena, int, m->ntensors + 1);
    p->first_arg = ARENA_ARRAY(p->arena, int, m->ntensors + 1);
    for (int t = 0; t < m->ntensors; ++t)
        p->first_inst[t] = p->first_arg[t] = -1;
    for (int j = m->ninstances - 1; j >= 0; --j)
        for (int a = m->instances[j].op->ninputs - 1; a >= 0; --a) {
            p->first_inst[m->instances[j].args[a]] = j;
            p->first_arg[m->instances[j].args[a]] = a;
        }
    /* The reader before each (instance, argument) of the same value (the
     * first argument of an instance that reads it twice), or -1. */
    int *last_inst = ARENA_ARRAY(p->arena, int, m->ntensors + 1);
    int *last_arg = ARENA_ARRAY(p->arena, int, m->ntensors + 1);
    p->prev_inst = ARENA_ARRAY(p->arena, int, (size_t)m->ninstances *IR_MAX_INPUTS + 1);
    p->prev_arg = ARENA_ARRAY(p->arena, int, (size_t)m->ninstances *IR_MAX_INPUTS + 1);
    for (int t = 0; t < m->ntensors; ++t)
        last_inst[t] = -1;
    for (int j = 0; j < m->ninstances; ++j)
        for (int a = 0; a < m->instances[j].op->ninputs; ++a) {
            int t = m->instances[j].args[a], k = j * IR_MAX_INPUTS + a;
            p->prev_inst[k] = last_inst[t] == j ? -1 : last_inst[t];
            p->prev_arg[k] = last_arg[t];
            if (last_inst[t] != j) {
                last_inst[t] = j;
                last_arg[t] = a;
            }
        }
}

/* The instance one layer earlier with the same candidates, or -1. */
static int twin_of(const Planner *p, int i) {
    const Model *m = p->model;
    int t = i - m->layer_size;
    if (m->layer_count < 2 || t < m->layer_first ||
        i >= m->layer_first + m->layer_size * m->layer_count)
        return -1;
    return p->plan->cands[t].items == p->plan->cands[i].items ? t : -1;
}

/* An edge already built between the twins of e's ends, whose costs e's
 * are (same candidates on both ends, same arguments). */
static const Edge *twin_edge(const Planner *p, const Edge *e) {
    int tf = twin_of(p, e->from), tt = twin_of(p, e->to);
    if (tf < 0 || tt < 0)
        return NULL;
    for (int k = 0; k < p->in_edges[tt].count; ++k) {
        const Edge *x = p->in_edges[tt].items[k];
        if (x->from == tf && x->arg == e->arg && x->from_arg == e->from_arg && x->merge == e->merge)
            return x;
    }
    return NULL;
}

/* An edge from instance i (its result, or its argument from_arg) to
 * instance j's argument a, with its costs for every pair of candidates. */
static void add_edge(Planner *p, int i, int j, int a, int from_arg, int merge) {
    Edge *e = ARENA_NEW(p->arena, Edge);
    e->from = i;
    e->to = j;
    e->arg = a;
    e->from_arg = from_arg;
    e->merge = merge;
    const Edge *twin = twin_edge(p, e);
    if (twin) {
        e->time = twin->time;
        e->bytes = twin->bytes;
        ptrvec_push(p->arena, &p->edges, e);
        ptrvec_push(p->arena, &p->in_edges[j], e);
        return;
    }
    int ni = ncand(p, i), nj = ncand(p, j);
    e->time = ARENA_ARRAY(p->arena, double, ni *nj);
    e->bytes = ARENA_ARRAY(p->arena, long, ni *nj);
    /* Candidates that look the same from the edge share its costs. */
    int *from_cls = side_classes(p, i, from_arg), *to_cls = side_classes(p, j, a);
    for (int ci = 0; ci < ni; ++ci) {
        const PlanCandidate *A = cand(p, i, ci);
        for (int cj = 0; cj < nj; ++cj) {
            const PlanCandidate *B = cand(p, j, cj);
            int at = ci * nj + cj;
            if (from_cls[ci] != ci || to_cls[cj] != cj) {
                int k = from_cls[ci] * nj + to_cls[cj];
                e->time[at] = e->time[k];
                e->bytes[at] = e->bytes[k];
                continue;
            }
            Side sa = side_of(A, from_arg), sb = side_of(B, a);
            if (merge) {
                /* The program sums the two contributions where they land
                 * and all-reduces once: one all-reduce less. */
                int merged = sa.reduce_sig && sa.reduce_sig == sb.reduce_sig && sa.has_grad &&
                             sb.has_grad && same_tiles(sa.dt, sa.dl, sb.dt, sb.dl);
                e->time[at] = merged ? -B->cost.reduce_time[a] : 0;
                e->bytes[at] = merged ? -B->cost.reduce_bytes[a] : 0;
                continue;
            }
            long fmax = 0, bmax = 0;
            double t = 0;
            long fb = sched_conversion_bytes(sa.t, sa.l, sb.t, sb.l, &fmax);
            long bb = 0;
            if (sb.has_grad && sa.has_grad)
                bb = sched_conversion_bytes(sb.dt, sb.dl, sa.dt, sa.dl, &bmax);
            if (fb < 0 || bb < 0) {
                t = INFINITY;
            } else {
                if (fmax > 0)
                    t += p->opt->move(fmax, p->opt->ctx);
                if (bmax > 0)
                    t += p->opt->move(bmax, p->opt->ctx);
            }
            e->time[at] = t;
            e->bytes[at] = fmax + bmax;
        }
    }
    if (merge) {
        /* A merge that no pair of candidates makes is no edge (it would
         * only keep i in the DP state). */
        int any = 0;
        for (int k = 0; k < ni * nj && !any; ++k)
            any = e->time[k] != 0;
        if (!any)
            return;
    }
    ptrvec_push(p->arena, &p->edges, e);
    ptrvec_push(p->arena, &p->in_edges[j], e);
}

void plan_build_edges(Planner *p) {
    const Model *m = p->model;
    for (int j = 0; j < p->n; ++j) {
        const Instance *inst = &m->instances[j];
        for (int a = 0; a < inst->op->ninputs; ++a) {
            int i = m->tensors[inst->args[a]].producer, from_arg = -1;
            if (i < 0) {
                i = first_reader(p, inst->args[a], &from_arg);
                if (i == j) /* read by its first reader only (maybe twice) */
                    continue;
            }
            add_edge(p, i, j, a, from_arg, 0);
        }
    }
    /* Consecutive readers of one value: their gradients' all-reduces. */
    for (int j = 0; j < p->n; ++j)
        for (int a = 0; a < m->instances[j].op->ninputs; ++a) {
            int k = j * IR_MAX_INPUTS + a;
            if (p->prev_inst[k] >= 0)
                add_edge(p, p->prev_inst[k], j, a, p->prev_arg[k], 1);
        }
}

/* future_cls of every instance, from the sides its leaving edges read. */
void plan_future_classes(Planner *p) {
    p->future_cls = ARENA_ARRAY(p->arena, int *, p->n);
    /* sides_of[i]: bit a + 1 when an edge leaves i from side a. */
    unsigned *sides_of = ARENA_ARRAY(p->arena, unsigned, p->n);
    for (int e = 0; e < p->edges.count; ++e) {
        const Edge *ed = p->edges.items[e];
        sides_of[ed->from] |= 1u << (ed->from_arg + 1);
    }
    for (int i = 0; i < p->n; ++i) {
        int t = twin_of(p, i);
        if (t >= 0 && sides_of[t] == sides_of[i]) {
            p->future_cls[i] = p->future_cls[t];
            continue;
        }
        int n = ncand(p, i), sides[IR_MAX_INPUTS + 1], nsides = 0;
        for (int a = -1; a < IR_MAX_INPUTS; ++a)
            if (sides_of[i] & (1u << (a + 1)))
                sides[nsides++] = a;
        int *cls = ARENA_ARRAY(p->arena, int, n + 1);
        for (int c = 0; c < n; ++c) {
            cls[c] = c;
            for (int k = 0; k < c && cls[c] == c; ++k) {
                if (cls[k] != k)
                    continue;
                int same = 1;
                for (int x = 0; x < nsides && same; ++x) {
                    Side sk = side_of(cand(p, i, k), sides[x]),
                         sc = side_of(cand(p, i, c), sides[x]);
                    same = same_side(&sk, &sc);
                }
                if (same)
                    cls[c] = k;
            }
        }
        p->future_cls[i] = cls;
    }
}
