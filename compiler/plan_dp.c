/*
 * plan_dp.c — the planner's dynamic program (plan_internal.h): instances
 * in order, states of the candidate classes still awaited by an edge, and
 * the layer power for repeated layers.
 */
#include "plan_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The dynamic program                                                 */

/* Producers awaited at position j (before instance j runs), in order. */
static int live_at(const Planner *p, int j, int *live) {
    int n = 0;
    for (int i = 0; i < j; ++i)
        if (p->last_use[i] >= j)
            live[n++] = i;
    return n;
}

typedef struct State {
    int *assign;        /* candidate per live producer */
    unsigned long hash; /* assign_hash of assign */
    double cost;
    int prev;   /* index in the previous step's states */
    int chosen; /* candidate chosen for the instance of this step */
} State;

typedef struct Layer {
    int nlive;
    int live[64];
    State *states;
    int count, cap;
    int *hash; /* open addressing: state index or -1 */
    int hash_cap;
    int grouped; /* filled by dp_step, which finds states by group: no hash */
} Layer;

/* FNV-1a over the candidates, then mixed (the finaliser of MurmurHash3)
 * so that the low bits, which the tables take, depend on every one. */
static unsigned long assign_hash(const int *assign, int n) {
    unsigned long h = 1469598103934665603ul;
    for (int i = 0; i < n; ++i)
        h = (h ^ (unsigned long)(unsigned)assign[i]) * 1099511628211ul;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdul;
    h ^= h >> 33;
    return h;
}

/* Whether live assignments a and b are equal (a few ints: no call). */
static int assign_equal(const int *a, const int *b, int n) {
    for (int i = 0; i < n; ++i)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* The state of L with assignment `assign` (hash h), or -1. */
static int state_find(const Layer *L, const int *assign, unsigned long h) {
    if (!L->hash_cap)
        return -1;
    int mask = L->hash_cap - 1; /* a power of two */
    int k = (int)(h & (unsigned long)mask);
    while (L->hash[k] >= 0) {
        const State *st = &L->states[L->hash[k]];
        if (st->hash == h && assign_equal(st->assign, assign, L->nlive))
            return L->hash[k];
        k = (k + 1) & mask;
    }
    return -1;
}

static void state_index(Planner *p, Layer *L, int s) {
    if (2 * (s + 1) > L->hash_cap) {
        L->hash_cap = L->hash_cap ? L->hash_cap * 2 : 64;
        L->hash = ARENA_ARRAY_UNINIT(p->arena, int, L->hash_cap);
        for (int i = 0; i < L->hash_cap; ++i)
            L->hash[i] = -1;
        for (int i = 0; i < s; ++i)
            state_index(p, L, i);
    }
    int mask = L->hash_cap - 1;
    int k = (int)(L->states[s].hash & (unsigned long)mask);
    while (L->hash[k] >= 0)
        k = (k + 1) & mask;
    L->hash[k] = s;
}

static int state_append(Planner *p, Layer *L, const int *assign, double cost, int prev, int chosen);

static void state_offer(Planner *p, Layer *L, const int *assign, double cost, int prev,
                        int chosen) {
    ICE_ASSERT(!L->grouped);
    const unsigned long h = assign_hash(assign, L->nlive);
    int s = state_find(L, assign, h);
    if (s >= 0) {
        if (cost < L->states[s].cost) {
            L->states[s].cost = cost;
            L->states[s].prev = prev;
            L->states[s].chosen = chosen;
        }
        return;
    }
    const int n = state_append(p, L, assign, cost, prev, chosen);
    L->states[n].hash = h;
    state_index(p, L, n);
}

/* A new state of L (no index: the caller knows it is new). */
static int state_append(Planner *p, Layer *L, const int *assign, double cost, int prev,
                        int chosen) {
    if (L->count == L->cap) {
        int cap = L->cap ? L->cap * 2 : 16;
        State *n = ARENA_ARRAY_UNINIT(p->arena, State, cap);
        if (L->count)
            memcpy(n, L->states, sizeof(State) * (size_t)L->count);
        L->states = n;
        L->cap = cap;
    }
    State *st = &L->states[L->count++];
    st->assign = ARENA_ARRAY_UNINIT(p->arena, int, L->nlive + 1);
    if (L->nlive)
        memcpy(st->assign, assign, sizeof(int) * (size_t)L->nlive);
    st->hash = 0;
    st->cost = cost;
    st->prev = prev;
    st->chosen = chosen;
    return L->count - 1;
}

/* The states after a step by group: the states before it that agree on
 * the producers still awaited after it lead to the same next states, one
 * per class of the instance's candidates. A group's slots hold those
 * next states (-1: none yet), so a step looks up each state before it
 * once (when some producer is no longer awaited; else each is its own
 * group) instead of every next state it offers. */
typedef struct Groups {
    int nkept;    /* producers awaited before and after the step */
    int kept[64]; /* their positions in the state before it */
    int merges;   /* some producer is no longer awaited: states before it merge */
    int ncls;
    int count;
    int *rep;            /* per group: its first state before the step */
    unsigned long *hash; /* per group: of its kept candidates */
    int **slots;         /* per group: the next state of each class, or -1 */
    int *table;          /* open addressing: group index or -1 */
    int mask;
} Groups;

static void groups_init(Planner *p, Groups *g, const Layer *in, const Layer *out,
                        const int *from_at, int ncls) {
    memset(g, 0, sizeof *g);
    for (int x = 0; x < out->nlive; ++x)
        if (from_at[x] >= 0)
            g->kept[g->nkept++] = from_at[x];
    g->merges = g->nkept < in->nlive;
    g->ncls = ncls;
    const int n = in->count + 1;
    g->rep = ARENA_ARRAY_UNINIT(p->arena, int, n);
    g->slots = ARENA_ARRAY(p->arena, int *, n);
    if (!g->merges)
        return;
    g->hash = ARENA_ARRAY_UNINIT(p->arena, unsigned long, n);
    int cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    g->table = ARENA_ARRAY_UNINIT(p->arena, int, cap);
    for (int i = 0; i < cap; ++i)
        g->table[i] = -1;
    g->mask = cap - 1;
}

/* The slots of state s's group (state s of `in`), made on first use. */
static int *group_slots(Planner *p, Groups *g, const Layer *in, int s) {
    int at;
    if (!g->merges) {
        at = s; /* every state is a group of its own */
    } else {
        const int *a = in->states[s].assign;
        int key[64];
        for (int i = 0; i < g->nkept; ++i)
            key[i] = a[g->kept[i]];
        const unsigned long h = assign_hash(key, g->nkept);
        int k = (int)(h & (unsigned long)g->mask);
        for (at = g->table[k]; at >= 0; at = g->table[k]) {
            if (g->hash[at] == h) {
                const int *r = in->states[g->rep[at]].assign;
                int same = 1;
                for (int i = 0; i < g->nkept && same; ++i)
                    same = r[g->kept[i]] == key[i];
                if (same)
                    break;
            }
            k = (k + 1) & g->mask;
        }
        if (at < 0) {
            at = g->count++;
            g->table[k] = at;
            g->hash[at] = h;
            g->rep[at] = s;
        }
    }
    if (!g->slots[at]) {
        g->slots[at] = ARENA_ARRAY_UNINIT(p->arena, int, g->ncls + 1);
        for (int k = 0; k < g->ncls; ++k)
            g->slots[at][k] = -1;
    }
    return g->slots[at];
}

/* One step: from the states before instance j to those after it. */
static void dp_step(Planner *p, int j, const Layer *in, Layer *out) {
    memset(out, 0, sizeof *out);
    out->nlive = live_at(p, j + 1, out->live);
    int assign[64];
    /* Where each incoming edge's producer and each live producer after j
     * sit in the state before j (-1: j itself). */
    int nedges = p->in_edges[j].count, nc = ncand(p, j);
    int edge_at[IR_MAX_INPUTS * 2 + 1], from_at[64];
    ICE_ASSERT(nedges <= IR_MAX_INPUTS * 2);
    for (int e = 0; e < nedges; ++e) {
        const Edge *ed = p->in_edges[j].items[e];
        edge_at[e] = -1;
        for (int x = 0; x < in->nlive; ++x)
            if (in->live[x] == ed->from)
                edge_at[e] = x;
        ICE_ASSERT(edge_at[e] >= 0);
    }
    for (int x = 0; x < out->nlive; ++x) {
        from_at[x] = -1;
        for (int y = 0; y < in->nlive; ++y)
            if (in->live[y] == out->live[x])
                from_at[x] = y;
        ICE_ASSERT(from_at[x] >= 0 || out->live[x] == j);
    }
    /* From one state, candidates of j in one future class (all of them
     * when j is not awaited later) lead to the same next state: only the
     * cheapest of each class is offered. Classes are numbered densely in
     * the order of their first candidate (future_cls), the order they
     * are offered in. */
    int j_live = 0;
    for (int x = 0; x < out->nlive; ++x)
        j_live |= from_at[x] < 0;
    int *dense = ARENA_ARRAY_UNINIT(p->arena, int, nc + 1);
    int *class_of = ARENA_ARRAY_UNINIT(p->arena, int, nc + 1);
    int *cls_id = ARENA_ARRAY_UNINIT(p->arena, int, nc + 1); /* dense class -> future_cls */
    for (int c = 0; c < nc; ++c)
        dense[c] = -1;
    for (int c = 0; c < nc; ++c)
        dense[j_live ? p->future_cls[j][c] : 0] = 0;
    int ncls = 0;
    for (int k = 0; k < nc; ++k)
        if (dense[k] == 0) {
            dense[k] = ncls;
            cls_id[ncls++] = k;
        } else {
            dense[k] = -1;
        }
    /* What does not depend on the state, found once per step. */
    double *own = ARENA_ARRAY_UNINIT(p->arena, double, nc + 1);
    const double *edge_time[IR_MAX_INPUTS * 2 + 1];
    for (int c = 0; c < nc; ++c) {
        own[c] = own_time(p, j, c);
        class_of[c] = dense[j_live ? p->future_cls[j][c] : 0];
    }
    for (int e = 0; e < nedges; ++e)
        edge_time[e] = ((const Edge *)p->in_edges[j].items[e])->time;
    double *best = ARENA_ARRAY(p->arena, double, ncls + 1);
    int *best_c = ARENA_ARRAY(p->arena, int, ncls + 1);
    /* At a positive weight, edge_cost(t) is w t, exactly (1 t is t, and
     * w inf is inf): the inner loop multiplies. */
    const double wt = p->w.time;
    const int scaled = wt > 0;
    Groups g;
    groups_init(p, &g, in, out, from_at, ncls);
    out->grouped = 1;
    for (int s = 0; s < in->count; ++s) {
        const State *st = &in->states[s];
        for (int k = 0; k < ncls; ++k)
            best[k] = INFINITY;
        /* Each edge's row for the producer's candidate in this state. */
        const double *row[IR_MAX_INPUTS * 2 + 1];
        for (int e = 0; e < nedges; ++e)
            row[e] = edge_time[e] + (long)st->assign[edge_at[e]] * nc;
        for (int c = 0; c < nc; ++c) {
            double cost = st->cost + own[c];
            if (scaled)
                for (int e = 0; e < nedges; ++e)
                    cost += wt * row[e][c];
            else
                for (int e = 0; e < nedges; ++e)
                    cost += edge_cost(p, row[e][c]);
            int k = class_of[c];
            if (cost < best[k]) {
                best[k] = cost;
                best_c[k] = c;
            }
        }
        int *slot = NULL;
        for (int k = 0; k < ncls; ++k) {
            if (isinf(best[k]))
                continue;
            if (!slot)
                slot = group_slots(p, &g, in, s);
            if (slot[k] >= 0) {
                State *o = &out->states[slot[k]];
                if (best[k] < o->cost) {
                    o->cost = best[k];
                    o->prev = s;
                    o->chosen = best_c[k];
                }
                continue;
            }
            for (int x = 0; x < out->nlive; ++x)
                assign[x] = from_at[x] < 0 ? cls_id[k] : st->assign[from_at[x]];
            slot[k] = state_append(p, out, assign, best[k], s, best_c[k]);
        }
    }
}

/* Runs instances [lo, hi): steps[0] holds the states before instance
 * lo; fills steps[1..hi-lo] (steps[j - lo] is the layer before j). */
static void dp_range(Planner *p, int lo, int hi, Layer *steps) {
    for (int j = lo; j < hi; ++j)
        dp_step(p, j, &steps[j - lo], &steps[j - lo + 1]);
}

/* The states before instance lo: the one state (no cost) in which the
 * instance awaited there, if any, chose candidate class `cls`. */
static Layer *dp_start(Planner *p, int lo, int hi, int cls) {
    Layer *steps = ARENA_ARRAY(p->arena, Layer, hi - lo + 1);
    steps[0].nlive = live_at(p, lo, steps[0].live);
    int assign[1] = {cls};
    state_offer(p, &steps[0], assign, 0, -1, -1);
    return steps;
}

/* Writes the choices of instances [lo, hi) + offset from state s of the
 * last step of a dp_range over [lo, hi). */
static void backtrack(Planner *p, const Layer *steps, int lo, int hi, int s, int offset) {
    for (int j = hi; j > lo; --j) {
        const State *st = &steps[j - lo].states[s];
        p->plan->choice[j - 1 + offset] = st->chosen;
        s = st->prev;
    }
}

/* The state of a one-live layer in which the awaited instance chose class b, or -1. */
static int state_with(const Layer *L, int b) {
    for (int s = 0; s < L->count; ++s)
        if (L->states[s].assign[0] == b)
            return s;
    return -1;
}

/* (min, +) product C = A B of k x k matrices, with the argmin. */
static void minplus(const double *A, const double *B, double *C, int *mid, int k) {
    for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b) {
            double best = INFINITY;
            int at = -1;
            for (int x = 0; x < k; ++x) {
                double v = A[a * k + x] + B[x * k + b];
                if (v < best) {
                    best = v;
                    at = x;
                }
            }
            C[a * k + b] = best;
            mid[a * k + b] = at;
        }
}

/* The boundary classes of the layers, found by the layer power. */
typedef struct Power {
    int k;
    int levels;
    double **B; /* B[t] = M^(2^t) */
    int **Bmid; /* t >= 1: the boundary in the middle of B[t]'s path */
    int *path;  /* boundary class after each layer */
    int npath;
} Power;

static void expand_B(Power *w, int a, int b, int t) {
    if (t == 0) {
        w->path[w->npath++] = b;
        return;
    }
    int m = w->Bmid[t][a * w->k + b];
    expand_B(w, a, m, t - 1);
    expand_B(w, m, b, t - 1);
}

/* The optimum through the layer power, with the choices: the prefix (up
 * to the end of the first layer) and the suffix (after the last) by the
 * dynamic program, the L - 1 interior layers as the (min, +) power of one
 * layer's transfer matrix between boundary classes, in log2(L - 1)
 * squarings; each interior layer's choices are read back from the one-
 * layer program of its two boundary classes. Returns -1 when the
 * structure does not allow it (fewer than 3 layers, or something other
 * than the previous layer's last instance awaited at a boundary). */
static double power_solve(Planner *p) {
    const Model *m = p->model;
    int first = m->layer_first, size = m->layer_size, L = m->layer_count;
    if (L < 3 || size < 1)
        return -1;
    for (int l = 1; l <= L; ++l) {
        int live[64];
        int at = first + l * size;
        int n = live_at(p, at, live);
        if (l == L && at == p->n && n == 0)
            break; /* the model ends with the layers */
        if (n != 1 || live[0] != at - 1)
            return -1;
    }
    int b0 = first + size - 1; /* last instance of layer 0 */
    int k = ncand(p, b0);
    for (int l = 1; l < L; ++l)
        if (ncand(p, first + l * size + size - 1) != k)
            return -1;
    const int *rep = p->future_cls[b0];
    /* Prefix: from nothing to the end of layer 0. */
    int pre_hi = first + size;
    Layer *pre = ARENA_ARRAY(p->arena, Layer, pre_hi + 1);
    int none[1] = {0};
    state_offer(p, &pre[0], none, 0, -1, -1);
    dp_range(p, 0, pre_hi, pre);
    const Layer *pre_last = &pre[pre_hi];
    /* Transfer matrix of one interior layer (layer 1), from each class. */
    int lo = first + size, hi = first + 2 * size;
    Layer **one = ARENA_ARRAY(p->arena, Layer *, k);
    double *M = ARENA_ARRAY(p->arena, double, k *k);
    for (int a = 0; a < k * k; ++a)
        M[a] = INFINITY;
    for (int a = 0; a < k; ++a) {
        if (rep[a] != a)
            continue;
        one[a] = dp_start(p, lo, hi, a);
        dp_range(p, lo, hi, one[a]);
        const Layer *last = &one[a][hi - lo];
        for (int s = 0; s < last->count; ++s)
            M[a * k + last->states[s].assign[0]] = last->states[s].cost;
    }
    /* B[t] = M^(2^t), and R = M^(L-1) from the bits of L - 1. */
    Power w;
    memset(&w, 0, sizeof w);
    w.k = k;
    int e = L - 1;
    while ((1 << w.levels) <= e)
        w.levels++;
    w.B = ARENA_ARRAY(p->arena, double *, w.levels);
    w.Bmid = ARENA_ARRAY(p->arena, int *, w.levels);
    w.B[0] = M;
    for (int t = 1; t < w.levels; ++t) {
        w.B[t] = ARENA_ARRAY(p->arena, double, k *k);
        w.Bmid[t] = ARENA_ARRAY(p->arena, int, k *k);
        minplus(w.B[t - 1], w.B[t - 1], w.B[t], w.Bmid[t], k);
    }
    /* R_c = R_{c-1} B[t_c] over the set bits t_c of L - 1; R_0 = identity. */
    int nbits = 0, bits[32];
    for (int t = 0; t < w.levels; ++t)
        if (e & (1 << t))
            bits[nbits++] = t;
    double **R = ARENA_ARRAY(p->arena, double *, nbits + 1);
    int **Rmid = ARENA_ARRAY(p->arena, int *, nbits + 1);
    R[0] = ARENA_ARRAY(p->arena, double, k *k);
    for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b)
            R[0][a * k + b] = a == b ? 0 : INFINITY;
    for (int c = 1; c <= nbits; ++c) {
        R[c] = ARENA_ARRAY(p->arena, double, k *k);
        Rmid[c] = ARENA_ARRAY(p->arena, int, k *k);
        minplus(R[c - 1], w.B[bits[c - 1]], R[c], Rmid[c], k);
    }
    /* Suffix from each boundary class; the best total. */
    int end = first + L * size;
    double best = INFINITY;
    int best_a = -1, best_b = -1;
    Layer *best_suffix = NULL;
    for (int b = 0; b < k; ++b) {
        if (rep[b] != b)
            continue;
        double mid = INFINITY;
        int mid_a = -1;
        for (int s = 0; s < pre_last->count; ++s) {
            int a = pre_last->states[s].assign[0];
            double v = pre_last->states[s].cost + R[nbits][a * k + b];
            if (v < mid) {
                mid = v;
                mid_a = a;
            }
        }
        if (isinf(mid))
            continue;
        Layer *suffix = dp_start(p, end, p->n, b);
        dp_range(p, end, p->n, suffix);
        const Layer *fin = &suffix[p->n - end];
        for (int s = 0; s < fin->count; ++s)
            if (mid + fin->states[s].cost < best) {
                best = mid + fin->states[s].cost;
                best_a = mid_a;
                best_b = b;
                best_suffix = suffix;
            }
    }
    if (best_a < 0)
        return INFINITY;
    /* Choices: the boundary classes layer by layer, then each part. */
    w.path = ARENA_ARRAY(p->arena, int, L + 1);
    w.path[w.npath++] = best_a;
    int *ends = ARENA_ARRAY(p->arena, int, nbits + 1); /* R_c's right boundary */
    ends[nbits] = best_b;
    for (int c = nbits; c >= 1; --c)
        ends[c - 1] = Rmid[c][best_a * k + ends[c]];
    for (int c = 1; c <= nbits; ++c)
        expand_B(&w, ends[c - 1], ends[c], bits[c - 1]);
    ICE_ASSERT(w.npath == L && w.path[L - 1] == best_b);
    backtrack(p, pre, 0, pre_hi, state_with(pre_last, best_a), 0);
    for (int l = 1; l < L; ++l) {
        const Layer *layer = one[w.path[l - 1]];
        int s = state_with(&layer[hi - lo], w.path[l]);
        ICE_ASSERT(s >= 0);
        backtrack(p, layer, lo, hi, s, (l - 1) * size);
    }
    const Layer *fin = &best_suffix[p->n - end];
    int s_fin = 0;
    for (int s = 1; s < fin->count; ++s)
        if (fin->states[s].cost < fin->states[s_fin].cost)
            s_fin = s;
    backtrack(p, best_suffix, end, p->n, s_fin, 0);
    return best;
}

/* The linear dynamic program over all instances; fills plan->choice. */
double plan_linear_solve(Planner *p) {
    Layer *steps = ARENA_ARRAY(p->arena, Layer, p->n + 1);
    steps[0].nlive = 0;
    int none[1] = {0};
    state_offer(p, &steps[0], none, 0, -1, -1);
    dp_range(p, 0, p->n, steps);
    if (steps[p->n].count == 0)
        return INFINITY;
    ICE_ASSERT(steps[p->n].count == 1 && steps[p->n].nlive == 0);
    backtrack(p, steps, 0, p->n, 0, 0);
    return steps[p->n].states[0].cost;
}

/* The optimum and its choices: through the layer power when the layers
 * repeat, else linearly. */
double plan_solve(Planner *p) {
    double pw = power_solve(p);
    p->plan->used_power = pw >= 0;
    return pw >= 0 ? pw : plan_linear_solve(p);
}
