/*
 * plan.c — the planner (see plan.h).
 */
#include "plan.h"
#include "plan_internal.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Candidates                                                          */

/* Binds partition sizes to the mesh without diagnostics. */
static int bind_silently(Instance *ci, const Partition *part, const Mesh *mesh) {
    ci->nsize_params = 0;
    for (int a = 0; a < part->naxes; ++a) {
        long v = mesh->sizes[ci->axis_map[a]];
        const Expr *size = part->axes[a]->size;
        if (size->kind == EXPR_INT) {
            if (size->value != v)
                return 0;
            continue;
        }
        int found = 0;
        for (int k = 0; k < ci->nsize_params; ++k) {
            if (ci->size_param_names[k] == size->name) {
                found = 1;
                if (ci->size_param_values[k] != v)
                    return 0;
            }
        }
        if (!found) {
            ci->size_param_names[ci->nsize_params] = size->name;
            ci->size_param_values[ci->nsize_params++] = v;
        }
    }
    ci->steps = 1;
    if (part->steps) {
        const Expr *size = part->steps->size;
        if (size->kind == EXPR_INT) {
            ci->steps = size->value;
        } else {
            int found = 0;
            for (int k = 0; k < ci->nsize_params; ++k)
                if (ci->size_param_names[k] == size->name) {
                    ci->steps = ci->size_param_values[k];
                    found = 1;
                }
            if (!found)
                return 0;
        }
    }
    return 1;
}

static Layout layout_copy(Arena *arena, const Layout *l) {
    Layout c;
    c.ndev = l->ndev;
    c.count = ARENA_ARRAY(arena, int, l->ndev);
    c.tiles = ARENA_ARRAY(arena, long *, l->ndev);
    c.slots = NULL;
    c.cap = NULL;
    for (int d = 0; d < l->ndev; ++d) {
        c.count[d] = l->count[d];
        c.tiles[d] = ARENA_ARRAY(arena, long, l->count[d] + 1);
        memcpy(c.tiles[d], l->tiles[d], sizeof(long) * (size_t)l->count[d]);
    }
    return c;
}

/* What a candidate's schedule depends on: the operator, its shapes and
 * arguments, and the slices its partition gives each device at each step
 * (partitions and axis bindings that slice alike, e.g. a replication
 * bound to either axis of a 2-D mesh, schedule alike). */
typedef struct CandKey {
    const Op *op;
    long dim_sizes[IR_MAX_DIMS];
    int same_as[IR_MAX_INPUTS]; /* the first argument that is the same tensor */
    int weight[IR_MAX_INPUTS];
    long steps;
    long nslices[IR_MAX_DIMS];
    long nslice;   /* entries of slice[] */
    uint64_t hash; /* of slice[] */
    const long *slice;
} CandKey;

typedef struct Memo {
    CandKey key;
    PlanCandidate *result; /* NULL: the candidate does not schedule */
} Memo;

static void cand_key(const Model *m, const Instance *inst, const SliceTable *st, CandKey *key) {
    memset(key, 0, sizeof *key);
    key->op = inst->op;
    memcpy(key->dim_sizes, inst->dim_sizes, sizeof key->dim_sizes);
    key->steps = st->steps;
    memcpy(key->nslices, st->nslices, sizeof key->nslices);
    key->nslice = (long)st->ndims * st->ndev * st->steps;
    key->slice = st->slice;
    uint64_t h = 14695981039346656037u;
    for (long k = 0; k < key->nslice; ++k)
        h = (h ^ (uint64_t)st->slice[k]) * 1099511628211u;
    key->hash = h;
    for (int a = 0; a < inst->op->ninputs; ++a) {
        key->same_as[a] = a;
        for (int b = a - 1; b >= 0; --b)
            if (inst->args[b] == inst->args[a])
                key->same_as[a] = b;
        key->weight[a] = m->tensors[inst->args[a]].role == TENSOR_WEIGHT;
    }
}

static const Memo *memo_find(const Planner *p, const CandKey *key) {
    for (int k = 0; k < p->memo.count; ++k) {
        const Memo *e = p->memo.items[k];
        if (e->key.op == key->op && e->key.hash == key->hash &&
            memcmp(&e->key, key, offsetof(CandKey, slice)) == 0 &&
            memcmp(e->key.slice, key->slice, sizeof(long) * (size_t)key->nslice) == 0)
            return e;
    }
    return NULL;
}

static Memo *memo_add(Planner *p, const CandKey *key) {
    Memo *e = ARENA_NEW(p->arena, Memo);
    e->key = *key;
    long *slice = ARENA_ARRAY(p->arena, long, key->nslice + 1);
    memcpy(slice, key->slice, sizeof(long) * (size_t)key->nslice);
    e->key.slice = slice;
    ptrvec_push(p->arena, &p->memo, e);
    return e;
}

/* ------------------------------------------------------------------ */
/* Prices at one sequence, across plan_model calls (PlanSeqCache)      */

typedef struct SeqEntry {
    const Model *model;
    PlanCostFn cost_fn;
    void *ctx;
    int elem_bytes, state_bytes;
    int inst;
    Mesh mesh;
    CandKey key; /* its slices copied into the cache */
    int ok;      /* the schedule was made */
    PlanCost cost;
} SeqEntry;

struct PlanSeqCache {
    Arena *arena;
    PtrVec entries; /* SeqEntry* */
    long hits, misses;
};

PlanSeqCache *plan_seq_cache_create(void) {
    Arena *a = arena_create();
    PlanSeqCache *c = ARENA_NEW(a, PlanSeqCache);
    c->arena = a;
    return c;
}

void plan_seq_cache_destroy(PlanSeqCache *c) {
    if (c)
        arena_destroy(c->arena);
}

long plan_seq_cache_hits(const PlanSeqCache *c) {
    return c ? c->hits : 0;
}

long plan_seq_cache_misses(const PlanSeqCache *c) {
    return c ? c->misses : 0;
}

static int same_mesh(const Mesh *a, const Mesh *b) {
    if (a->naxes != b->naxes || a->ndev != b->ndev)
        return 0;
    for (int k = 0; k < a->naxes; ++k)
        if (a->sizes[k] != b->sizes[k] || strcmp(a->names[k], b->names[k]))
            return 0;
    return 1;
}

static const SeqEntry *seq_find(const Planner *p, int i, const CandKey *key) {
    const PlanSeqCache *c = p->opt->seq_cache;
    for (int k = 0; k < c->entries.count; ++k) {
        const SeqEntry *e = c->entries.items[k];
        if (e->inst == i && e->key.hash == key->hash && e->model == p->model &&
            e->cost_fn == p->opt->cost && e->ctx == p->opt->ctx &&
            e->elem_bytes == p->opt->elem_bytes &&
            e->state_bytes == p->opt->state_bytes_per_param && same_mesh(&e->mesh, &p->opt->mesh) &&
            memcmp(&e->key, key, offsetof(CandKey, slice)) == 0 &&
            memcmp(e->key.slice, key->slice, sizeof(long) * (size_t)key->nslice) == 0)
            return e;
    }
    return NULL;
}

static void seq_add(const Planner *p, int i, const CandKey *key, int ok, const PlanCost *cost) {
    PlanSeqCache *c = p->opt->seq_cache;
    SeqEntry *e = ARENA_NEW(c->arena, SeqEntry);
    e->model = p->model;
    e->cost_fn = p->opt->cost;
    e->ctx = p->opt->ctx;
    e->elem_bytes = p->opt->elem_bytes;
    e->state_bytes = p->opt->state_bytes_per_param;
    e->inst = i;
    e->mesh = p->opt->mesh;
    e->key = *key;
    long *slice = ARENA_ARRAY(c->arena, long, key->nslice + 1);
    memcpy(slice, key->slice, sizeof(long) * (size_t)key->nslice);
    e->key.slice = slice;
    e->ok = ok;
    if (ok)
        e->cost = *cost;
    ptrvec_push(c->arena, &c->entries, e);
    ++c->misses;
}

static int schedule_alone(Planner *p, int i, PlanCandidate *pc, int transpose);
static int price_per_sequence(Planner *p, int i, PlanCandidate *pc, const Instance *bound,
                              unsigned tok, long fold);

/* The token count every token dimension is planned at; -1 when the
 * replicas do not split the tokens evenly. */
static long planned_tokens(const PlanOptions *o) {
    if (o->tokens > 0)
        return o->tokens;
    if (o->dp > 1)
        return o->token_size % o->dp ? -1 : o->token_size / o->dp;
    return o->token_size;
}

/* Every instance's token dimensions (as bits): operator dimensions of
 * the token size that index a token axis of an activation argument (the
 * first axis of a model input of the token size, and every output axis
 * such a dimension indexes, instance after instance) and no weight.
 * Following the axes, not the sizes, keeps a hidden size equal to the
 * token count out. */
static void find_token_dims(Planner *p) {
    const Model *m = p->model;
    const long token = p->opt->token_size;
    unsigned *axes = ARENA_ARRAY(p->arena, unsigned, m->ntensors + 1);
    p->token_dims = ARENA_ARRAY(p->arena, unsigned, p->n + 1);
    for (int t = 0; t < m->ntensors; ++t)
        if (m->tensors[t].role == TENSOR_INPUT && m->tensors[t].ndims &&
            m->tensors[t].sizes[0] == token && token > 0)
            axes[t] = 1;
    for (int i = 0; i < p->n; ++i) {
        const Instance *inst = &m->instances[i];
        const Op *op = inst->op;
        unsigned dims = 0, weight = 0;
        for (int a = 0; a < op->ninputs; ++a) {
            const ModelTensor *mt = &m->tensors[inst->args[a]];
            for (int x = 0; x < op->inputs[a].ndims; ++x) {
                if (mt->role == TENSOR_WEIGHT)
                    weight |= 1u << op->inputs[a].dims[x];
                else if (axes[inst->args[a]] & (1u << x))
                    dims |= 1u << op->inputs[a].dims[x];
            }
        }
        dims &= ~weight;
        for (int d = 0; d < op->ndims; ++d)
            if (inst->dim_sizes[d] != token)
                dims &= ~(1u << d);
        p->token_dims[i] = dims;
        for (int x = 0; x < op->output.ndims; ++x)
            if (dims & (1u << op->output.dims[x]))
                axes[inst->result] |= 1u << x;
    }
}

static void fill_candidate(Planner *p, const Instance *inst, const int *local_of, int result,
                           const Schedule *s, PlanCandidate *pc);
static void add_transposed(Planner *p, const Instance *inst, const Model *sm, const int *local_of,
                           int result, const Schedule *s, const PlanCandidate *pc);

static void try_candidate(Planner *p, int i, const Partition *part, const int *axis_map) {
    const Model *m = p->model;
    const Instance *inst = &m->instances[i];
    PlanCandidate *pc = ARENA_NEW(p->arena, PlanCandidate);
    pc->partition = part;
    memcpy(pc->axis_map, axis_map, sizeof pc->axis_map);
    pc->inst = *inst;
    pc->inst.partition = part;
    memcpy(pc->inst.axis_map, axis_map, sizeof pc->inst.axis_map);
    /* Data parallelism and folded micro-batches: every token dimension
     * has the planned token count (the same rule in every instance, so
     * producers and consumers agree on shapes). */
    long tokens = planned_tokens(p->opt);
    unsigned tok = p->token_dims[i];
    if (tok && tokens != p->opt->token_size) {
        if (tokens <= 0)
            return; /* the tokens do not split over the replicas */
        for (int d = 0; d < inst->op->ndims; ++d)
            if (tok & (1u << d))
                pc->inst.dim_sizes[d] = tokens;
    }
    /* Attention over folded sequences is priced per sequence. */
    long fold = p->opt->seq_tokens > 0 && tokens % p->opt->seq_tokens == 0
                    ? tokens / p->opt->seq_tokens
                    : 1;
    int per_sequence = fold > 1 && __builtin_popcount(tok) >= 2;
    if (!bind_silently(&pc->inst, part, &p->opt->mesh))
        return;
    /* Instances of one operator with the same shapes, argument pattern
     * and partition binding have the same schedule: scheduled once. */
    SliceTable st;
    arena_reset(p->scratch);
    DiagSink mute;
    diag_init(&mute, p->sink->sources, p->scratch, NULL);
    if (!partition_eval(p->scratch, &mute, &p->plan_model, &pc->inst, &st))
        return;
    CandKey key;
    cand_key(m, &pc->inst, &st, &key);
    const Memo *hit = memo_find(p, &key);
    if (!hit) {
        Memo *e = memo_add(p, &key); /* copies the key out of the scratch arena */
        Instance bound = pc->inst;
        e->result = schedule_alone(p, i, pc, !per_sequence) ? pc : NULL;
        if (e->result && per_sequence && !price_per_sequence(p, i, pc, &bound, tok, fold))
            e->result = NULL;
        /* At one sequence, attention's own price is its price per
         * sequence at every micro-batch size. */
        if (p->opt->seq_cache && p->opt->seq_tokens > 0 && tokens == p->opt->seq_tokens &&
            __builtin_popcount(tok) >= 2 && !seq_find(p, i, &e->key))
            seq_add(p, i, &e->key, e->result != NULL, &pc->cost);
        hit = e;
    }
    if (!hit->result)
        return;
    if (hit->result != pc) {
        PlanCandidate *from = hit->result;
        pc->cost = from->cost;
        memcpy(pc->in_t, from->in_t, sizeof pc->in_t);
        memcpy(pc->din_t, from->din_t, sizeof pc->din_t);
        memcpy(pc->in_l, from->in_l, sizeof pc->in_l);
        memcpy(pc->din_l, from->din_l, sizeof pc->din_l);
        memcpy(pc->has_din, from->has_din, sizeof pc->has_din);
        pc->out_t = from->out_t;
        pc->dout_t = from->dout_t;
        pc->out_l = from->out_l;
        pc->dout_l = from->dout_l;
        pc->has_dout = from->has_dout;
        memcpy(pc->reduce_sig, from->reduce_sig, sizeof pc->reduce_sig);
    }
    if (p->min_peak[i] < 0 || pc->cost.peak < p->min_peak[i]) {
        p->min_peak[i] = pc->cost.peak;
        p->min_peak_use[i] = part->name;
    }
    if (p->opt->memory_limit && pc->cost.peak > p->opt->memory_limit)
        return;
    ptrvec_push(p->arena, &p->plan->cands[i], pc);
}

/* Schedules candidate pc of instance i alone and prices it; 0 when the
 * partition does not schedule on its own (e.g. a residency it cannot
 * meet). */
static int schedule_alone(Planner *p, int i, PlanCandidate *pc, int transpose) {
    const Model *m = p->model;
    const Instance *inst = &m->instances[i];
    /* A model of this instance alone: activations become inputs. */
    Model *sm = ARENA_NEW(p->arena, Model);
    sm->name = m->name;
    sm->span = m->span;
    sm->name_span = m->name_span;
    sm->mesh = p->opt->mesh;
    sm->tensors = ARENA_ARRAY(p->arena, ModelTensor, inst->op->ninputs + 1);
    int local_of[IR_MAX_INPUTS];
    for (int a = 0; a < inst->op->ninputs; ++a) {
        local_of[a] = -1;
        for (int b = 0; b < a; ++b)
            if (inst->args[b] == inst->args[a])
                local_of[a] = local_of[b];
        if (local_of[a] >= 0)
            continue;
        ModelTensor *t = &sm->tensors[sm->ntensors];
        *t = m->tensors[inst->args[a]];
        for (int x = 0; x < inst->op->inputs[a].ndims; ++x)
            t->sizes[x] = pc->inst.dim_sizes[inst->op->inputs[a].dims[x]];
        if (t->role != TENSOR_WEIGHT)
            t->role = TENSOR_INPUT;
        t->producer = -1;
        local_of[a] = sm->ntensors++;
    }
    ModelTensor *res = &sm->tensors[sm->ntensors];
    *res = m->tensors[inst->result];
    for (int x = 0; x < inst->op->output.ndims; ++x)
        res->sizes[x] = pc->inst.dim_sizes[inst->op->output.dims[x]];
    res->producer = 0;
    int result = sm->ntensors++;
    for (int a = 0; a < inst->op->ninputs; ++a)
        pc->inst.args[a] = local_of[a];
    pc->inst.result = result;
    sm->ninstances = 1;
    sm->instances = &pc->inst;
    Arena *scratch = p->scratch;
    arena_reset(scratch);
    DiagSink mute;
    diag_init(&mute, p->sink->sources, scratch, NULL);
    Schedule *s = schedule_build(scratch, &mute, sm);
    if (!s)
        return 0;
    fill_candidate(p, inst, local_of, result, s, pc);
    const Mesh *mesh = &p->opt->mesh;
    if (transpose && mesh->naxes == 2 && mesh->sizes[0] == mesh->sizes[1])
        add_transposed(p, inst, sm, local_of, result, s, pc);
    return 1;
}

/* Candidate pc of instance i (bound: its instance before scheduling)
 * priced as `fold` sequences one after another: the same partition
 * scheduled with every token dimension at one sequence, its cost times
 * fold (the stashed inputs too; the transient peak once). pc keeps the
 * layouts of the folded schedule, which the edges compare. */
static int price_per_sequence(Planner *p, int i, PlanCandidate *pc, const Instance *bound,
                              unsigned tok, long fold) {
    PlanCandidate *one = ARENA_NEW(p->scratch, PlanCandidate);
    *one = *pc;
    one->inst = *bound;
    for (int d = 0; d < bound->op->ndims; ++d)
        if (tok & (1u << d))
            one->inst.dim_sizes[d] = bound->dim_sizes[d] / fold;
    if (!bind_silently(&one->inst, pc->partition, &p->opt->mesh))
        return 0;
    /* The one-sequence schedule's key, when prices are shared. */
    CandKey key;
    int keyed = 0;
    const SeqEntry *hit = NULL;
    if (p->opt->seq_cache) {
        DiagSink mute;
        diag_init(&mute, p->sink->sources, p->scratch, NULL);
        SliceTable st;
        keyed = partition_eval(p->scratch, &mute, &p->plan_model, &one->inst, &st);
        if (keyed) {
            cand_key(p->model, &one->inst, &st, &key);
            hit = seq_find(p, i, &key);
        }
    }
    int ok;
    if (hit) {
        ok = hit->ok;
        if (ok)
            one->cost = hit->cost;
        ++p->opt->seq_cache->hits;
    } else {
        Arena *keep = p->arena;
        p->arena = p->scratch; /* the one-sequence layouts are not kept */
        Arena *inner = arena_create();
        Arena *outer = p->scratch;
        p->scratch = inner;
        ok = schedule_alone(p, i, one, 0);
        p->scratch = outer;
        p->arena = keep;
        arena_destroy(inner);
        if (keyed)
            seq_add(p, i, &key, ok, &one->cost);
    }
    if (ok) {
        PlanCost c = one->cost;
        double f = (double)fold;
        long transient = c.peak - c.persistent;
        c.time *= f;
        c.fwd_time *= f;
        c.compute_time *= f;
        c.coll_time *= f;
        c.coll_bytes *= fold;
        c.p2p_bytes *= fold;
        c.persistent *= fold;
        c.stash_bytes *= fold;
        c.input_bytes *= fold;
        c.peak = c.persistent + transient;
        for (int a = 0; a < IR_MAX_INPUTS; ++a) {
            c.reduce_time[a] *= f;
            c.reduce_bytes[a] *= fold;
        }
        pc->cost = c;
    }
    return ok;
}

/* On a square 2-D mesh, the candidate with the partition's axes bound the
 * other way round is the same work on transposed devices: its schedule
 * is s transposed (priced again: links differ), recorded for when the
 * search reaches that binding. */
static void add_transposed(Planner *p, const Instance *inst, const Model *sm, const int *local_of,
                           int result, const Schedule *s, const PlanCandidate *pc) {
    Arena *scratch = p->scratch;
    Instance *ti = ARENA_NEW(scratch, Instance);
    *ti = pc->inst;
    for (int a = 0; a < pc->partition->naxes; ++a)
        ti->axis_map[a] = 1 - pc->inst.axis_map[a];
    if (!bind_silently(ti, pc->partition, &p->opt->mesh))
        return;
    DiagSink mute;
    diag_init(&mute, p->sink->sources, scratch, NULL);
    SliceTable st;
    if (!partition_eval(scratch, &mute, &p->plan_model, ti, &st))
        return;
    CandKey key;
    cand_key(sm, ti, &st, &key);
    if (memo_find(p, &key))
        return;
    Model *tm = ARENA_NEW(scratch, Model);
    *tm = *sm;
    tm->instances = ti;
    PlanCandidate *tc = ARENA_NEW(p->arena, PlanCandidate);
    tc->partition = pc->partition;
    tc->inst = *ti;
    memcpy(tc->axis_map, ti->axis_map, sizeof tc->axis_map);
    fill_candidate(p, inst, local_of, result, schedule_transpose(scratch, s, tm), tc);
    memo_add(p, &key)->result = tc;
}

/* What the all-reduces of input a's gradient sum, as a hash (0: none). */
static uint64_t reduce_signature(const Schedule *s, int a) {
    uint64_t h = 0;
    for (int q = 0; q < s->phases.count; ++q) {
        const PhaseSched *ph = s->phases.items[q];
        if ((ph->kind != PHASE_BWD && ph->kind != PHASE_GRAD) || ph->inst != 0 || ph->wrt != a)
            continue;
        for (int g = 0; g < ph->groups.count; ++g) {
            const Collective *c = ph->groups.items[g];
            if (!h)
                h = 14695981039346656037u;
            h = (h ^ (uint64_t)c->tile) * 1099511628211u;
            h = (h ^ (uint64_t)c->elems) * 1099511628211u;
            h = (h ^ (uint64_t)(c->reduce_scatter + 2 * c->allgather)) * 1099511628211u;
            for (int m = 0; m < c->gsize; ++m)
                h = (h ^ (uint64_t)c->group[m]) * 1099511628211u;
        }
    }
    return h;
}

/* Prices schedule s of candidate pc (instance inst scheduled alone, its
 * arguments local_of[] and result `result` in the one-instance model)
 * and keeps what the edges need. */
static void fill_candidate(Planner *p, const Instance *inst, const int *local_of, int result,
                           const Schedule *s, PlanCandidate *pc) {
    Arena *scratch = p->scratch;
    const int i = (int)(inst - p->model->instances);
    int in_tensor[IR_MAX_INPUTS], din_tensor[IR_MAX_INPUTS], out_tensor = -1, dout_tensor = -1;
    for (int a = 0; a < inst->op->ninputs; ++a)
        in_tensor[a] = din_tensor[a] = -1;
    for (int t = 0; t < s->ntensors; ++t) {
        const SchedTensor *ts = &s->tensors[t];
        for (int a = 0; a < inst->op->ninputs; ++a) {
            if (ts->model_tensor != local_of[a])
                continue;
            if (!ts->is_grad && ts->fill_phase >= 0)
                in_tensor[a] = t;
            if (ts->is_grad && ts->check)
                din_tensor[a] = t;
        }
        if (ts->model_tensor == result && !ts->is_grad && ts->check)
            out_tensor = t;
        if (ts->model_tensor == result && ts->is_grad && ts->fill_phase >= 0)
            dout_tensor = t;
    }
    pc->cost = p->opt->cost(s, scratch, p->opt->ctx);
    /* Persistent: weights, their gradients and optimizer state, and
     * stashed inputs; data-parallel gradient all-reduce of the weights a
     * device holds. */
    long persistent = 0, wbytes = 0, stash = 0, input = 0;
    long eb = p->opt->elem_bytes > 0 ? p->opt->elem_bytes : (long)sizeof(float);
    for (int d = 0; d < s->model->mesh.ndev; ++d) {
        long mine = 0, w = 0, st = 0, in = 0;
        for (int a = 0; a < inst->op->ninputs; ++a) {
            int t = in_tensor[a];
            if (t < 0)
                continue;
            long elems = (long)s->home[t].count[d] * s->tensors[t].tile_elems;
            mine += s->tensors[t].is_weight ? elems * (2 * eb + p->opt->state_bytes_per_param)
                                            : elems * eb;
            w += s->tensors[t].is_weight ? elems * (long)sizeof(float) : 0;
            st += s->tensors[t].is_weight ? 0 : elems * eb;
            int mt = inst->args[a];
            if (p->model->tensors[mt].role == TENSOR_INPUT && p->first_inst[mt] == i &&
                p->first_arg[mt] == a)
                in += elems * eb;
        }
        persistent = mine > persistent ? mine : persistent;
        wbytes = w > wbytes ? w : wbytes;
        stash = st > stash ? st : stash;
        input = in > input ? in : input;
    }
    pc->cost.persistent = persistent;
    pc->cost.weight_elems = wbytes / (long)sizeof(float);
    pc->cost.stash_bytes = stash;
    pc->cost.input_bytes = input;
    if (p->opt->dp > 1 && p->opt->dp_cost) {
        long moved = 0;
        pc->cost.time += p->opt->dp_cost(wbytes, p->opt->dp, p->opt->ctx, &moved);
        pc->cost.coll_bytes += moved;
    }
    /* Keep what the edges need; the schedule goes with the scratch arena. */
    for (int a = 0; a < inst->op->ninputs; ++a) {
        ICE_ASSERT(in_tensor[a] >= 0);
        pc->in_t[a] = s->tensors[in_tensor[a]];
        pc->in_l[a] = layout_copy(p->arena, &s->home[in_tensor[a]]);
        pc->has_din[a] = din_tensor[a] >= 0;
        if (pc->has_din[a]) {
            pc->din_t[a] = s->tensors[din_tensor[a]];
            pc->din_l[a] = layout_copy(p->arena, &s->final[din_tensor[a]]);
        }
    }
    ICE_ASSERT(out_tensor >= 0);
    pc->out_t = s->tensors[out_tensor];
    pc->out_l = layout_copy(p->arena, &s->final[out_tensor]);
    pc->has_dout = dout_tensor >= 0;
    if (pc->has_dout) {
        pc->dout_t = s->tensors[dout_tensor];
        pc->dout_l = layout_copy(p->arena, &s->home[dout_tensor]);
    }
    for (int a = 0; a < inst->op->ninputs; ++a)
        pc->reduce_sig[a] = reduce_signature(s, a);
}

/* With PlanOptions.replica_axis0: whether the binding puts the batch,
 * and only the batch, along mesh axis 0 (none of it for an instance
 * without token dimensions). */
static int replica_bound(const Planner *p, int i, const Partition *part, const int *axis_map) {
    const unsigned tok = p->token_dims[i];
    for (int k = 0; k < part->naxes; ++k)
        if (axis_map[k] == 0)
            return tok && plan_is_replica_axis(part, k, tok, p->model->instances[i].op->ndims);
    return !tok;
}

static void bind_axes(Planner *p, int i, const Partition *part, int *axis_map, int a,
                      unsigned used) {
    if (a == part->naxes) {
        if (p->opt->replica_axis0 && !replica_bound(p, i, part, axis_map))
            return;
        try_candidate(p, i, part, axis_map);
        return;
    }
    for (int x = 0; x < p->opt->mesh.naxes; ++x) {
        if (used & (1u << x))
            continue;
        axis_map[a] = x;
        bind_axes(p, i, part, axis_map, a + 1, used | (1u << x));
    }
}

/* ------------------------------------------------------------------ */

static void summarise(Planner *p) {
    Plan *plan = p->plan;
    plan->time = 0;
    plan->edge_time = 0;
    plan->coll_bytes = plan->p2p_bytes = 0;
    long persistent = 0, transient = 0;
    for (int i = 0; i < p->n; ++i) {
        const PlanCandidate *pc = cand(p, i, plan->choice[i]);
        plan->time += pc->cost.time;
        plan->coll_bytes += pc->cost.coll_bytes;
        plan->p2p_bytes += pc->cost.p2p_bytes;
        persistent += pc->cost.persistent;
        if (pc->cost.peak - pc->cost.persistent > transient)
            transient = pc->cost.peak - pc->cost.persistent;
    }
    for (int e = 0; e < p->edges.count; ++e) {
        const Edge *ed = p->edges.items[e];
        int k = plan->choice[ed->from] * ncand(p, ed->to) + plan->choice[ed->to];
        plan->edge_time += ed->time[k];
        if (ed->merge)
            plan->coll_bytes += ed->bytes[k];
        else
            plan->p2p_bytes += ed->bytes[k];
    }
    plan->time += plan->edge_time;
    plan->memory = persistent + transient;
}

void plan_bind_candidate(Instance *inst, const Instance *orig, const PlanCandidate *pc) {
    *inst = *orig;
    inst->partition = pc->partition;
    memcpy(inst->axis_map, pc->inst.axis_map, sizeof inst->axis_map);
    inst->nsize_params = pc->inst.nsize_params;
    memcpy(inst->size_param_names, pc->inst.size_param_names, sizeof inst->size_param_names);
    memcpy(inst->size_param_values, pc->inst.size_param_values, sizeof inst->size_param_values);
    inst->steps = pc->inst.steps;
}

int plan_candidate_same(const PlanCandidate *a, const PlanCandidate *b, int shapes) {
    const Instance *x = &a->inst, *y = &b->inst;
    if (a->partition != b->partition || x->nsize_params != y->nsize_params || x->steps != y->steps)
        return 0;
    for (int k = 0; k < a->partition->naxes; ++k)
        if (a->axis_map[k] != b->axis_map[k] || x->axis_map[k] != y->axis_map[k])
            return 0;
    for (int k = 0; k < x->nsize_params; ++k)
        if (x->size_param_names[k] != y->size_param_names[k] ||
            x->size_param_values[k] != y->size_param_values[k])
            return 0;
    return !shapes || !memcmp(x->dim_sizes, y->dim_sizes, sizeof x->dim_sizes);
}

int plan_same_program(const Plan *a, const int *ca, const Plan *b, const int *cb, int shapes) {
    const Mesh *x = &a->mesh, *y = &b->mesh;
    if (a->ninst != b->ninst || x->naxes != y->naxes)
        return 0;
    for (int k = 0; k < x->naxes; ++k)
        if (x->sizes[k] != y->sizes[k] || strcmp(x->names[k], y->names[k]))
            return 0;
    for (int i = 0; i < a->ninst; ++i)
        if (!plan_candidate_same(a->cands[i].items[ca[i]], b->cands[i].items[cb[i]], shapes))
            return 0;
    return 1;
}

const char *plan_use_text(Arena *arena, const Plan *plan, int inst) {
    const PlanCandidate *pc = plan->cands[inst].items[plan->choice[inst]];
    const Mesh *mesh = &plan->mesh;
    char buf[256];
    size_t n = (size_t)snprintf(buf, sizeof buf, "%s(", pc->partition->name);
    for (int a = 0; a < pc->partition->naxes && n < sizeof buf - 40; ++a)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s: %s", a ? ", " : "",
                              pc->partition->axes[a]->name.name, mesh->names[pc->axis_map[a]]);
    snprintf(buf + n, sizeof buf - n, ")");
    return arena_strdup(arena, buf);
}

/* Every instance's candidates (0 with a diagnostic when one has none). */
static int collect_candidates(Planner *p) {
    const Model *model = p->model;
    const Module *module = p->module;
    const PlanOptions *opt = p->opt;
    Plan *out = p->plan;
    DiagSink *sink = p->sink;
    for (int i = 0; i < p->n; ++i) {
        const Instance *inst = &model->instances[i];
        int twin = -1;
        if (model->layer_count > 1 && i >= model->layer_first + model->layer_size &&
            i < model->layer_first + model->layer_size * model->layer_count)
            twin = i - model->layer_size;
        if (twin >= 0) {
            out->cands[i] = out->cands[twin];
            continue;
        }
        for (int k = 0; k < module->partitions.count; ++k) {
            const Partition *part = module->partitions.items[k];
            if (part->op != inst->op || part->naxes > opt->mesh.naxes)
                continue;
            if (opt->pinned_only && part != inst->partition)
                continue;
            int axis_map[IR_MAX_AXES] = {0};
            bind_axes(p, i, part, axis_map, 0, 0);
        }
        out->candidates += out->cands[i].count;
        if (out->cands[i].count == 0 && p->min_peak[i] >= 0) {
            diag_error(sink, model->name_span,
                       "no plan of '%s' fits in %ld bytes per device: the smallest found needs %ld",
                       model->name, opt->memory_limit, p->min_peak[i]);
            diag_note(sink, inst->span,
                      "'%s' alone needs at least %ld bytes per device (partition '%s')", inst->name,
                      p->min_peak[i], p->min_peak_use[i]);
            return 0;
        }
        if (out->cands[i].count == 0) {
            diag_error(sink, inst->span, "no partition of '%s' applies to '%s' on this mesh",
                       inst->op->name, inst->name);
            return 0;
        }
    }
    return 1;
}

int plan_model(Arena *arena, DiagSink *sink, const Module *module, const Model *model,
               const PlanOptions *opt, Plan *out) {
    Planner *p = ARENA_NEW(arena, Planner);
    memset(out, 0, sizeof *out);
    out->planner = p;
    p->w.time = 1;
    p->arena = arena;
    p->sink = sink;
    p->module = module;
    p->model = model;
    p->opt = opt;
    p->plan = out;
    p->n = model->ninstances;
    p->plan_model = *model;
    p->plan_model.mesh = opt->mesh;
    out->model = model;
    out->mesh = opt->mesh;
    out->ninst = p->n;
    out->cands = ARENA_ARRAY(arena, PtrVec, p->n);
    out->choice = ARENA_ARRAY(arena, int, p->n);
    p->in_edges = ARENA_ARRAY(arena, PtrVec, p->n);
    p->last_use = ARENA_ARRAY(arena, int, p->n);
    p->min_peak = ARENA_ARRAY(arena, long, p->n);
    p->min_peak_use = ARENA_ARRAY(arena, const char *, p->n);
    for (int i = 0; i < p->n; ++i)
        p->min_peak[i] = -1;
    for (int i = 0; i < p->n; ++i)
        p->last_use[i] = -1;
    plan_find_first_readers(p);
    find_token_dims(p);
    /* Candidates; identical instances of repeated layers share them. */
    p->scratch = opt->scratch ? opt->scratch : arena_create();
    int ok = collect_candidates(p);
    if (!opt->scratch)
        arena_destroy(p->scratch);
    p->scratch = NULL;
    if (!ok)
        return 0;
    plan_build_edges(p);
    /* An instance stays in the DP state while an edge leads from it to a
     * later instance (a reader of its result, a later reader of an input
     * it read first, the next reader of a value it reads). */
    for (int e = 0; e < p->edges.count; ++e) {
        const Edge *ed = p->edges.items[e];
        if (ed->to > p->last_use[ed->from])
            p->last_use[ed->from] = ed->to;
    }
    plan_future_classes(p);
    double best = plan_solve(p);
    if (isinf(best)) {
        diag_error(sink, model->name_span, "no plan for '%s' connects its instances", model->name);
        return 0;
    }
    summarise(p);
    if (opt->memory_limit && out->memory > opt->memory_limit) {
        /* No plan needs less than every instance's smallest persistent
         * memory plus the largest of the smallest transient peaks. */
        long lb_persistent = 0, lb_transient = 0, worst_persistent = -1;
        int worst = 0;
        for (int i = 0; i < p->n; ++i) {
            long mp = -1, mt = -1;
            for (int c = 0; c < ncand(p, i); ++c) {
                const PlanCost *pc = &cand(p, i, c)->cost;
                if (mp < 0 || pc->persistent < mp)
                    mp = pc->persistent;
                if (mt < 0 || pc->peak - pc->persistent < mt)
                    mt = pc->peak - pc->persistent;
            }
            lb_persistent += mp;
            if (mt > lb_transient)
                lb_transient = mt;
            if (mp > worst_persistent) {
                worst_persistent = mp;
                worst = i;
            }
        }
        if (lb_persistent + lb_transient > opt->memory_limit) {
            diag_error(
                sink, model->name_span,
                "no plan of '%s' fits in %ld bytes per device: every plan needs at least %ld",
                model->name, opt->memory_limit, lb_persistent + lb_transient);
            diag_note(sink, model->instances[worst].span,
                      "the largest part is '%s' (at least %ld bytes of weights, their gradients "
                      "and optimizer state, and stashed inputs per device)",
                      model->instances[worst].name, worst_persistent);
            return 0;
        }
        /* Penalise persistent memory until the plan fits. */
        double scale = out->time / (double)(out->memory > 0 ? out->memory : 1);
        long smallest = out->memory;
        for (int k = 0; k < 40 && out->memory > opt->memory_limit; ++k) {
            p->lambda = scale * ldexp(1.0, k - 4);
            plan_solve(p);
            summarise(p);
            if (out->memory < smallest)
                smallest = out->memory;
        }
        p->lambda = 0;
        if (out->memory > opt->memory_limit) {
            int worst = 0;
            for (int i = 0; i < p->n; ++i)
                if (cand(p, i, out->choice[i])->cost.persistent >
                    cand(p, worst, out->choice[worst])->cost.persistent)
                    worst = i;
            diag_error(sink, model->name_span,
                       "no plan of '%s' fits in %ld bytes per device: the smallest found needs %ld",
                       model->name, opt->memory_limit, smallest);
            diag_note(sink, model->instances[worst].span,
                      "the largest part is '%s' (%ld bytes of weights, gradients and stashed "
                      "inputs per device)",
                      model->instances[worst].name,
                      cand(p, worst, out->choice[worst])->cost.persistent);
            return 0;
        }
        out->penalised = 1;
        best = out->time;
    }
    if (out->used_power && !out->penalised) {
        /* The choices read back from the layer power cost what it found;
         * on models small enough, the linear program agrees. */
        out->power_time = best;
        double found = plan_objective(p, out->choice);
        if (fabs(found - best) > 1e-9 * (fabs(best) + 1e-30))
            ICE("the layer power's choices cost %.17g, not its optimum %.17g", found, best);
        if (p->n <= 512) {
            int *kept = ARENA_ARRAY(p->arena, int, p->n);
            memcpy(kept, out->choice, sizeof(int) * (size_t)p->n);
            double lin = plan_linear_solve(p);
            if (fabs(lin - best) > 1e-9 * (fabs(best) + 1e-30))
                ICE("layer power optimum %.17g differs from the linear optimum %.17g", best, lin);
            memcpy(out->choice, kept, sizeof(int) * (size_t)p->n);
        }
    }
    return 1;
}
