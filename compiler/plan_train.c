/*
 * plan_train.c — the training search (see plan_train.h).
 */
#include "plan_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double train_state_bytes(const TrainOptions *o, int replicas) {
    return (double)o->state_bytes_per_param / (o->shard_optimizer ? (double)replicas : 1.0);
}

int train_evaluate(const TrainOptions *o, const TrainLayer *layer, const int *choice, int stages,
                   int replicas, int recompute, TrainPlan *out) {
    memset(out, 0, sizeof *out);
    const long t = layer->plan->mesh.ndev, b = layer->micro_batch;
    if (stages < 1 || replicas < 1 || !pipeline_stage_layers(o->layers, stages, o->uneven_stages) ||
        t * stages * (long)replicas != o->devices || o->global_batch % (b * replicas))
        return 0;
    plan_sums(layer->plan, choice, &out->sums);
    const PlanSums *s = &out->sums;
    PipelineLayer l;
    memset(&l, 0, sizeof l);
    l.mesh_devices = (int)t;
    l.devices_per_node = o->devices_per_node;
    l.seq_tokens = layer->seq_tokens;
    l.hidden = layer->hidden;
    l.elem_bytes = o->elem_bytes;
    double fused_fwd = 0, fused_bwd = 0;
    if (o->fusion)
        o->fusion(layer, choice, o->fusion_ctx, &fused_fwd, &fused_bwd);
    l.fwd_us = (s->fwd_time - fused_fwd) * 1e6;
    l.bwd_us = (s->time - s->fwd_time - fused_bwd) * 1e6;
    l.params = (double)s->weight_elems;
    PipelineShape sh = {stages,          1,        replicas,  o->layers,          b,
                        o->global_batch, o->vocab, recompute, o->shard_optimizer, o->uneven_stages};
    char err[256];
    if (!pipeline_compose(&l, &sh, o->profile, &out->pipe, err, sizeof err))
        return 0;
    const PipelineCost *c = &out->pipe;
    out->stages = stages;
    out->replicas = replicas;
    out->recompute = recompute;
    out->micro_batch = b;
    out->micro_batches = c->micro_batches;
    out->time_s = c->iteration_us * 1e-6;
    const double m = (double)c->micro_batches,
                 n = (double)pipeline_stage_layers(o->layers, stages, o->uneven_stages);
    const double eb = o->elem_bytes, d = replicas;
    const double vocab_dev = o->vocab ? (double)((o->vocab + t - 1) / t) : 0;
    out->coll_time_s = m * n * s->coll_time + (c->allreduce_us + c->embedding_us) * 1e-6;
    out->coll_bytes = m * n * (double)s->coll_bytes;
    out->conv_time_s = m * n * s->conv_time;
    out->layer_comm_s = m * n * (s->time - s->conv_time - s->compute_time);
    if (replicas > 1)
        out->coll_bytes += 2 * (d - 1) / d * c->params_device * eb;
    if (stages > 1 && o->vocab)
        out->coll_bytes += vocab_dev * (double)layer->hidden * eb;
    out->p2p_bytes = m * n * (double)s->p2p_bytes;
    if (stages > 1)
        out->p2p_bytes += m * 2 * (double)(b * layer->seq_tokens * layer->hidden) * eb / (double)t;
    /* The first stage: min(p, m) micro-batches in flight. */
    const double in_flight = stages < m ? stages : m;
    out->mem_weights = c->params_device * eb;
    out->mem_grads = c->params_device * eb;
    out->mem_optimizer = c->params_device * train_state_bytes(o, replicas);
    out->mem_activations =
        (recompute ? in_flight * n * (double)s->input_bytes + (double)s->stash_bytes
                   : in_flight * n * (double)s->stash_bytes) +
        (double)s->transient;
    out->mem_total = out->mem_weights + out->mem_grads + out->mem_optimizer + out->mem_activations;
    return 1;
}

const char *train_memory_dominant(const TrainPlan *p) {
    const char *name = "weights";
    double v = p->mem_weights;
    if (p->mem_grads > v)
        name = "gradients", v = p->mem_grads;
    if (p->mem_optimizer > v)
        name = "optimizer state", v = p->mem_optimizer;
    if (p->mem_activations > v)
        name = "activations";
    return name;
}

/* The weights under which the layer's program is the iteration's: per
 * unit of layer time, the forward again when recomputing, and per weight
 * element its gradient all-reduce and Adam step, n of them for the
 * n (m + p - 1) layer passes of the critical path. */
static PlanWeights time_weights(const TrainOptions *o, long t, int stages, int replicas,
                                long micro_batch, int recompute) {
    const double n = (double)pipeline_stage_layers(o->layers, stages, o->uneven_stages);
    const double m = (double)(o->global_batch / (micro_batch * replicas));
    double per_elem_us = PIPELINE_ADAM_BYTES_PER_PARAM / (o->profile->mem_bandwidth_GBps * 1e3);
    if (o->shard_optimizer)
        per_elem_us /= (double)replicas;
    if (replicas > 1) {
        LinkClass link = pipeline_group_link(o->devices_per_node, t, replicas);
        const double big = 1e9;
        per_elem_us += (cost_collective_us(o->profile, COMM_ALLREDUCE, link, big, replicas) -
                        cost_collective_us(o->profile, COMM_ALLREDUCE, link, 0, replicas)) /
                       big * o->elem_bytes;
    }
    PlanWeights w = {1, recompute ? 1 : 0, 0, 0, 0};
    w.weight = n * per_elem_us * 1e-6 / (n * (m + stages - 1));
    return w;
}

/* The weights of the least-memory layer plan of a shape. */
static PlanWeights memory_weights(const TrainOptions *o, int stages, int replicas, long micro_batch,
                                  int recompute) {
    const double n = (double)pipeline_stage_layers(o->layers, stages, o->uneven_stages);
    const double m = (double)(o->global_batch / (micro_batch * replicas));
    const double in_flight = stages < m ? stages : m;
    PlanWeights w = {0, 0, 0, 0, 0};
    w.weight = n * (2.0 * o->elem_bytes + train_state_bytes(o, replicas));
    w.stash = recompute ? 1 : in_flight * n;
    w.input = recompute ? in_flight * n : 0;
    return w;
}

static void keep(Arena *arena, const TrainPlan *from, const int *choice, int n, TrainPlan *to) {
    *to = *from;
    to->choice = ARENA_ARRAY(arena, int, n + 1);
    memcpy(to->choice, choice, sizeof(int) * (size_t)n);
}

/* A shape of one layer plan and recomputation choice. */
typedef struct Shape {
    int stages, replicas;
    double lambda; /* price per weight element (time_weights) */
    int *choice;   /* the time-optimal layer plan */
} Shape;

/* The layer's program at every shape's lambda, shapes sorted by lambda,
 * [lo, hi] with lo and hi solved: an assignment is optimal on an interval
 * of lambda (its cost is affine in lambda), so when both ends chose the
 * same one, every shape between has it too; else split. */
static void solve_between(Plan *plan, Shape *sh, int lo, int hi, int rc, Arena *scratch,
                          Arena *keep_in) {
    if (hi - lo < 2)
        return;
    size_t bytes = sizeof(int) * (size_t)plan->ninst;
    if (!memcmp(sh[lo].choice, sh[hi].choice, bytes)) {
        for (int k = lo + 1; k < hi; ++k)
            sh[k].choice = sh[lo].choice;
        return;
    }
    int mid = (lo + hi) / 2;
    PlanWeights w = {1, rc ? 1 : 0, sh[mid].lambda, 0, 0};
    arena_reset(scratch);
    plan_resolve(plan, &w, scratch);
    sh[mid].choice = ARENA_ARRAY(keep_in, int, plan->ninst + 1);
    memcpy(sh[mid].choice, plan->choice, bytes);
    solve_between(plan, sh, lo, mid, rc, scratch, keep_in);
    solve_between(plan, sh, mid, hi, rc, scratch, keep_in);
}

static int by_lambda(const void *a, const void *b) {
    const Shape *x = a, *y = b;
    return x->lambda < y->lambda ? -1 : x->lambda > y->lambda ? 1 : 0;
}

/* The shapes of layer plan `layer` with recomputation rc, each with its
 * time-optimal layer plan. */
static int layer_shapes(const TrainOptions *o, const TrainLayer *layer, int rc, Arena *scratch,
                        Arena *keep_in, Shape **out) {
    Plan *plan = layer->plan;
    const long t = plan->mesh.ndev, b = layer->micro_batch;
    int n = 0;
    for (long p = 1; p <= o->layers; ++p)
        n += pipeline_stage_layers(o->layers, p, o->uneven_stages) && o->devices % (t * p) == 0 &&
             o->global_batch % (b * (o->devices / (t * p))) == 0;
    Shape *sh = ARENA_ARRAY(keep_in, Shape, n + 1);
    n = 0;
    for (long p = 1; p <= o->layers; ++p) {
        if (!pipeline_stage_layers(o->layers, p, o->uneven_stages) || o->devices % (t * p))
            continue;
        const long d = o->devices / (t * p);
        if (o->global_batch % (b * d))
            continue;
        sh[n].stages = (int)p;
        sh[n].replicas = (int)d;
        sh[n++].lambda = time_weights(o, t, (int)p, (int)d, b, rc).weight;
    }
    qsort(sh, (size_t)n, sizeof *sh, by_lambda);
    size_t bytes = sizeof(int) * (size_t)plan->ninst;
    for (int k = 0; k<n; k += n - 1> k ? n - 1 - k : 1) {
        PlanWeights w = {1, rc ? 1 : 0, sh[k].lambda, 0, 0};
        arena_reset(scratch);
        plan_resolve(plan, &w, scratch);
        sh[k].choice = ARENA_ARRAY(keep_in, int, plan->ninst + 1);
        memcpy(sh[k].choice, plan->choice, bytes);
        if (k == n - 1)
            break;
    }
    if (n > 1)
        solve_between(plan, sh, 0, n - 1, rc, scratch, keep_in);
    *out = sh;
    return n;
}

/* Least-memory layer plans already solved for one layer plan and
 * recomputation choice, by their weights relative to the weight price
 * (programs with proportional prices have the same optimum). */
typedef struct MemoryCache {
    double stash[64], input[64];
    int *choice[64];
    int count;
} MemoryCache;

/* The least-memory layer plan of a shape, evaluated; its choice is
 * *choice (in keep_in). */
static void least_memory(const TrainOptions *o, const TrainLayer *layer, int li, const Shape *sh,
                         int rc, Arena *scratch, Arena *keep_in, MemoryCache *cache,
                         const int **choice, TrainPlan *tp) {
    PlanWeights w = memory_weights(o, sh->stages, sh->replicas, layer->micro_batch, rc);
    const double stash = w.stash / w.weight, input = w.input / w.weight;
    int hit = -1;
    for (int k = 0; k < cache->count && hit < 0; ++k)
        if (cache->stash[k] == stash && cache->input[k] == input)
            hit = k;
    if (hit < 0) {
        arena_reset(scratch);
        plan_resolve(layer->plan, &w, scratch);
        int *c = ARENA_ARRAY(keep_in, int, layer->plan->ninst + 1);
        memcpy(c, layer->plan->choice, sizeof(int) * (size_t)layer->plan->ninst);
        hit = cache->count < 64 ? cache->count++ : 63;
        cache->stash[hit] = stash;
        cache->input[hit] = input;
        cache->choice[hit] = c;
    }
    *choice = cache->choice[hit];
    train_evaluate(o, layer, *choice, sh->stages, sh->replicas, rc, tp);
    tp->layer = li;
    tp->least_memory = 1;
}

/* A shape whose time-optimal layer plan exceeds the memory limit and
 * whose least-memory one (*tp, *choice) fits: the layer's program priced
 * time + mu * memory (time_weights plus mu times memory_weights), mu
 * bisected on a log scale between the two, and the fastest plan that fits
 * kept in *tp and *choice. Not exact (a Lagrangian relaxation), but never
 * slower than the least-memory plan. */
static void fastest_fitting(const TrainOptions *o, const TrainLayer *layer, int li, const Shape *sh,
                            int rc, Arena *scratch, Arena *keep_in, const int **choice,
                            TrainPlan *tp) {
    const long t = layer->plan->mesh.ndev, b = layer->micro_batch;
    const PlanWeights wt = time_weights(o, t, sh->stages, sh->replicas, b, rc);
    const PlanWeights wm = memory_weights(o, sh->stages, sh->replicas, b, rc);
    const int ninst = layer->plan->ninst;
    int *c = ARENA_ARRAY(keep_in, int, ninst + 1);
    double lo = -20, hi = 0; /* log10 of mu, seconds per byte */
    for (int step = 0; step < 16; ++step) {
        const double mid = (lo + hi) / 2, mu = pow(10, mid);
        PlanWeights w = wt;
        w.weight += mu * wm.weight;
        w.stash += mu * wm.stash;
        w.input += mu * wm.input;
        arena_reset(scratch);
        plan_resolve(layer->plan, &w, scratch);
        TrainPlan q;
        if (!train_evaluate(o, layer, layer->plan->choice, sh->stages, sh->replicas, rc, &q))
            return;
        if (q.mem_total > (double)o->memory_limit) {
            lo = mid;
            continue;
        }
        hi = mid;
        if (q.time_s < tp->time_s) {
            memcpy(c, layer->plan->choice, sizeof(int) * (size_t)ninst);
            *tp = q;
            tp->layer = li;
            tp->least_memory = 1;
            *choice = c;
        }
    }
}

int train_search(const TrainOptions *o, const TrainLayer *layers, int nlayers, Arena *arena,
                 Arena *scratch, TrainPlan *best, TrainPlan *smallest, long *shapes) {
    int have = 0, have_small = 0;
    *shapes = 0;
    memset(best, 0, sizeof *best);
    memset(smallest, 0, sizeof *smallest);
    const double limit = (double)o->memory_limit;
    Arena *keep_in = arena_create();
    /* Shapes over the limit, for a second pass: (layer, rc, shape). */
    for (int pass = 0; pass < 2; ++pass) {
        for (int li = 0; li < nlayers; ++li) {
            const TrainLayer *layer = &layers[li];
            const int ninst = layer->plan->ninst;
            const double vocab_dev =
                o->vocab
                    ? (double)((o->vocab + layer->plan->mesh.ndev - 1) / layer->plan->mesh.ndev)
                    : 0;
            const double min_w = (double)plan_min_weight_elems(layer->plan);
            for (int rc = 0; rc < 2; ++rc) {
                if ((o->recompute == TRAIN_RECOMPUTE_OFF && rc) ||
                    (o->recompute == TRAIN_RECOMPUTE_ON && !rc))
                    continue;
                arena_reset(keep_in);
                MemoryCache cache;
                cache.count = 0;
                Shape *sh;
                int n = layer_shapes(o, layer, rc, scratch, keep_in, &sh);
                for (int k = 0; k < n; ++k) {
                    *shapes += pass == 0;
                    TrainPlan tp;
                    if (!train_evaluate(o, layer, sh[k].choice, sh[k].stages, sh[k].replicas, rc,
                                        &tp))
                        continue;
                    tp.layer = li;
                    const int *choice = sh[k].choice;
                    if (o->memory_limit && tp.mem_total > limit) {
                        /* No assignment holds fewer weights than min_w. */
                        double floor = ((double)pipeline_stage_layers(o->layers, sh[k].stages,
                                                                      o->uneven_stages) *
                                            min_w +
                                        vocab_dev * (double)layer->hidden) *
                                       (2.0 * o->elem_bytes + train_state_bytes(o, sh[k].replicas));
                        if (pass == 0 && floor > limit)
                            continue;
                        const double unconstrained = tp.time_s;
                        least_memory(o, layer, li, &sh[k], rc, scratch, keep_in, &cache, &choice,
                                     &tp);
                        if (pass == 0 && tp.mem_total <= limit &&
                            (!have || unconstrained < best->time_s))
                            fastest_fitting(o, layer, li, &sh[k], rc, scratch, keep_in, &choice,
                                            &tp);
                        if (!have_small || tp.mem_total < smallest->mem_total) {
                            keep(arena, &tp, choice, ninst, smallest);
                            have_small = 1;
                        }
                        if (tp.mem_total > limit)
                            continue;
                    }
                    if (pass == 0 && (!have || tp.time_s < best->time_s)) {
                        keep(arena, &tp, choice, ninst, best);
                        have = 1;
                    }
                }
            }
        }
        /* A second pass only when nothing fits: every shape's least memory. */
        if (have || !o->memory_limit)
            break;
    }
    arena_destroy(keep_in);
    return have;
}
