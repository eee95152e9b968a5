/*
 * plan_train_cli.c — `primec plan --training` (see plan_train_cli.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "plan_train_cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cost.h"
#include "json_out.h"
#include "plan_fusion.h"
#include "plan_train.h"
#include "plan_write.h"

static double now_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A batched layer: its input is [b, s, h] (sequences, positions, hidden;
 * stdlib/transformer_batched.prime), the layer of a sequence [s, h]. */
static int batched_layer(const ModelTensor *x) {
    return x->ndims == 3;
}

/* The tensor-parallel meshes of at most tp_max devices that divide N:
 * (d: t) and, for a square t, (i: s, j: s); or the --mesh one. For a
 * batched layer each starts with the replica axis (r: 1), along which its
 * partitions split the batch (PlanOptions.replica_axis0). */
static int meshes_for(const PlanTrainArgs *a, long n, int batched, Mesh *out, int cap) {
    int k = 0;
    for (long t = 1; t <= n && t <= a->tp_max && k < cap; ++t) {
        if (n % t)
            continue;
        for (int shape = 0; shape < 2 && k < cap; ++shape) {
            long s = shape ? (long)llround(sqrt((double)t)) : t;
            if (shape && (s * s != t || s < 2))
                continue;
            if (a->mesh_naxes && (a->mesh_naxes != shape + 1 || a->mesh_side != s))
                continue;
            Mesh *m = &out[k++];
            memset(m, 0, sizeof *m);
            const int r = batched ? 1 : 0;
            m->naxes = shape + 1 + r;
            m->names[0] = "r";
            m->sizes[0] = 1;
            m->names[r] = shape ? "i" : "d";
            m->names[r + 1] = "j";
            m->sizes[r] = m->sizes[r + 1] = s;
            m->ndev = (int)t;
        }
    }
    return k;
}

/* TrainOptions.fusion: the layer program's saving per sequence
 * (plan_fusion.h) times the micro-batch's b sequences, as cost_pipeline
 * composes the layer. */
static void layer_fusion(const TrainLayer *layer, const int *choice, void *ctx, double *fwd_s,
                         double *bwd_s) {
    const double b = (double)layer->micro_batch;
    plan_fusion_saved(ctx, layer->plan, choice, fwd_s, bwd_s);
    *fwd_s *= b;
    *bwd_s *= b;
}

typedef struct Search {
    TrainLayer layers[256];
    Arena *arenas[256];
    int nlayers;
    int batched; /* batched_layer: the meshes start with the replica axis */
    TrainPlan best, smallest;
    int found;
    long shapes, candidates;
    double ms, cpu_ms; /* wall-clock and processor time */
} Search;

/* Plans the layer on every mesh and micro-batch size, then searches the
 * shapes. 0 when no layer plan exists at all (a diagnostic on the first
 * failure when `sink` is set). */
static int search(Compilation *c, const Model *m, long n, CostCtx *ctx, const PlanTrainArgs *a,
                  const TrainOptions *o, int pinned_only, PlanSeqCache *seq_cache, Arena *arena,
                  Search *s) {
    memset(s, 0, sizeof *s);
    double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    const ModelTensor *x = NULL;
    for (int t = 0; t < m->ntensors && !x; ++t)
        if (m->tensors[t].role == TENSOR_INPUT && m->tensors[t].ndims)
            x = &m->tensors[t];
    s->batched = batched_layer(x);
    long seq = x->sizes[s->batched ? 1 : 0], hidden = x->sizes[x->ndims - 1];
    Mesh meshes[64];
    int nm = meshes_for(a, n, s->batched, meshes, 64);
    static const long sizes[] = {1, 2, 4, 8};
    Arena *scratch = arena_create();
    for (int k = 0; k < nm; ++k) {
        for (size_t bi = 0; bi < sizeof sizes / sizeof sizes[0]; ++bi) {
            long b = a->micro_batch ? a->micro_batch : sizes[bi];
            if (a->micro_batch && bi > 0)
                break;
            if (o->global_batch % b || s->nlayers == 256)
                continue;
            PlanOptions opt;
            memset(&opt, 0, sizeof opt);
            opt.mesh = meshes[k];
            opt.dp = 1;
            /* Unbatched, b sequences fold into the tokens (attention
             * priced per sequence); batched, the batch is b. */
            opt.token_size = x->sizes[0];
            opt.tokens = s->batched ? b : b * seq;
            opt.seq_tokens = s->batched ? 0 : seq;
            opt.replica_axis0 = s->batched;
            opt.cost = plan_price_schedule;
            opt.move = plan_price_move;
            opt.elem_bytes = ctx->opt.elem_bytes;
            opt.state_bytes_per_param = COST_ADAM_STATE_BYTES;
            opt.ctx = ctx;
            opt.pinned_only = pinned_only;
            opt.scratch = scratch;
            opt.seq_cache = seq_cache;
            ctx->tp = meshes[k].ndev;
            Arena *pa = arena_create();
            Plan *plan = ARENA_NEW(pa, Plan);
            DiagSink mute;
            diag_init(&mute, &c->sources, pa, NULL);
            if (!plan_model(pa, &mute, &c->module, m, &opt, plan)) {
                arena_destroy(pa);
                continue;
            }
            TrainLayer *l = &s->layers[s->nlayers];
            l->plan = plan;
            l->micro_batch = b;
            l->seq_tokens = seq;
            l->hidden = hidden;
            s->arenas[s->nlayers++] = pa;
            s->candidates += plan->candidates;
        }
    }
    if (s->nlayers)
        s->found = train_search(o, s->layers, s->nlayers, arena, scratch, &s->best, &s->smallest,
                                &s->shapes);
    arena_destroy(scratch);
    s->ms = now_ms(CLOCK_MONOTONIC) - t0;
    s->cpu_ms = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return s->nlayers > 0;
}

static void search_free(Search *s) {
    for (int k = 0; k < s->nlayers; ++k)
        arena_destroy(s->arenas[k]);
}

/* The tensor-parallel mesh (without a batched layer's replica axis). */
static const char *mesh_text(Arena *arena, const Search *s, const Mesh *m) {
    const int r = s->batched;
    return m->naxes == 1 + r
               ? arena_printf(arena, "(d: %ld)", m->sizes[r])
               : arena_printf(arena, "(i: %ld, j: %ld)", m->sizes[r], m->sizes[r + 1]);
}

static json_t *plan_json(const Search *s, const Model *m, Arena *arena) {
    const TrainPlan *p = &s->best;
    Plan *plan = s->layers[p->layer].plan;
    memcpy(plan->choice, p->choice, sizeof(int) * (size_t)plan->ninst);
    json_t *uses = json_array();
    for (int i = 0; i < m->ninstances; ++i)
        json_array_append_new(uses, json_pack("{s:s, s:s}", "name", m->instances[i].name, "use",
                                              plan_use_text(arena, plan, i)));
    json_t *mem = json_pack("{s:f, s:f, s:f, s:f, s:f}", "weights", p->mem_weights, "gradients",
                            p->mem_grads, "optimizer", p->mem_optimizer, "activations",
                            p->mem_activations, "total", p->mem_total);
    json_t *o =
        json_pack("{s:s, s:i, s:i, s:i, s:I, s:I, s:b, s:b, s:f, s:f, s:f, s:f, s:f}", "mesh",
                  mesh_text(arena, s, &plan->mesh), "tensor_devices", plan->mesh.ndev, "stages",
                  p->stages, "replicas", p->replicas, "micro_batch", (json_int_t)p->micro_batch,
                  "micro_batches", (json_int_t)p->micro_batches, "recompute", p->recompute,
                  "least_memory", p->least_memory, "iteration_s", p->time_s, "sequences_per_s",
                  (double)p->pipe.shape.global_batch / p->time_s, "collective_time_s",
                  p->coll_time_s, "collective_bytes", p->coll_bytes, "p2p_bytes", p->p2p_bytes);
    json_object_set_new(o, "memory", mem);
    json_object_set_new(o, "layer_exposed_comm_s", json_real(p->layer_comm_s));
    json_object_set_new(o, "conversion_time_s", json_real(p->conv_time_s));
    json_object_set_new(o, "pipeline", cost_pipeline_json(&p->pipe));
    json_object_set_new(o, "optimizer_sharded",
                        json_boolean(p->pipe.shape.shard_optimizer && p->replicas > 1));
    json_object_set_new(
        o, "stage_layers",
        json_integer(pipeline_stage_layers(p->pipe.shape.layers, p->stages, p->pipe.shape.uneven)));
    json_object_set_new(o, "instances", uses);
    json_object_set_new(o, "layer_plans", json_integer(s->nlayers));
    json_object_set_new(o, "shapes", json_integer(s->shapes));
    json_object_set_new(o, "search_ms", json_real(round(s->ms * 1e3) / 1e3));
    json_object_set_new(o, "search_cpu_ms", json_real(round(s->cpu_ms * 1e3) / 1e3));
    return o;
}

/* The best plan of s; the search counts of `searched` (s, or the search
 * whose plan s's replaced). */
static void print_plan(const char *title, const Search *s, const Search *searched, const Model *m,
                       Arena *arena) {
    const TrainPlan *p = &s->best;
    Plan *plan = s->layers[p->layer].plan;
    memcpy(plan->choice, p->choice, sizeof(int) * (size_t)plan->ninst);
    const long layers = p->pipe.shape.layers;
    const char *uneven = p->stages > 0 && layers % p->stages
                             ? arena_printf(arena, " (%ld layers: %ld stages of %ld, %ld of %ld)",
                                            layers, layers % p->stages, layers / p->stages + 1,
                                            p->stages - layers % p->stages, layers / p->stages)
                             : "";
    printf("%s: mesh %s x %d stage%s%s x %d replica%s; micro-batch %ld (%ld per replica)%s%s\n",
           title, mesh_text(arena, s, &plan->mesh), p->stages, p->stages == 1 ? "" : "s", uneven,
           p->replicas, p->replicas == 1 ? "" : "s", p->micro_batch, p->micro_batches,
           p->recompute ? ", activations recomputed" : "",
           p->least_memory ? " (memory binds: the fastest layer plan found within the limit)" : "");
    const int sharded = p->pipe.shape.shard_optimizer && p->replicas > 1;
    printf("  iteration %.2f ms (%.2f sequences/s): pipeline %.2f ms (bubble %.2f ms), gradient "
           "%s %.2f ms, optimizer %.2f ms%s\n",
           p->time_s * 1e3, (double)p->pipe.shape.global_batch / p->time_s,
           p->pipe.pipeline_us / 1e3, p->pipe.bubble_us / 1e3,
           sharded ? "reduce-scatter and weight all-gather" : "all-reduce",
           p->pipe.allreduce_us / 1e3, p->pipe.optimizer_us / 1e3,
           sharded ? " (sharded over the replicas)" : "");
    printf("  per device: collectives %.2f ms, %.4g B; point-to-point %.4g B; memory %.4g B "
           "(weights %.4g, gradients %.4g, optimizer state %.4g, activations %.4g)\n",
           p->coll_time_s * 1e3, p->coll_bytes, p->p2p_bytes, p->mem_total, p->mem_weights,
           p->mem_grads, p->mem_optimizer, p->mem_activations);
    for (int i = 0; i < m->ninstances; ++i)
        printf("    %-14s %s\n", m->instances[i].name, plan_use_text(arena, plan, i));
    printf("  searched %d layer plans (%ld candidates), %ld shapes in %.1f ms (%.1f ms of "
           "processor time)\n",
           searched->nlayers, searched->candidates, searched->shapes, searched->ms,
           searched->cpu_ms);
}

/* No plan within the limit: the least memory any plan needs, and its
 * largest term. */
static void report_unmet(Compilation *c, const Model *m, const PlanTrainArgs *a, const Search *s) {
    if (!s->smallest.stages) {
        diag_error(&c->sink, m->name_span,
                   "no training plan of '%s': no mesh, stage count and replica count split the "
                   "devices, layers and global batch",
                   m->name);
        return;
    }
    const TrainPlan *p = &s->smallest;
    const Plan *plan = s->layers[p->layer].plan;
    const char *dom = train_memory_dominant(p);
    double part = !strcmp(dom, "weights")       ? p->mem_weights
                  : !strcmp(dom, "gradients")   ? p->mem_grads
                  : !strcmp(dom, "activations") ? p->mem_activations
                                                : p->mem_optimizer;
    diag_error(
        &c->sink, m->name_span,
        "no training plan of '%s' fits in %ld bytes per device: the smallest peak any plan "
        "reaches is %.0f bytes (%d-device mesh x %d stages x %d replicas, micro-batch %ld%s), "
        "dominated by %s (%.0f bytes)",
        m->name, a->memory_limit, p->mem_total, plan->mesh.ndev, p->stages, p->replicas,
        p->micro_batch, p->recompute ? ", recomputed" : "", dom, part);
}

/* -o: the chosen plan as a plan block and a run (plan_write_spec), or a
 * diagnostic when the program cannot express it. Returns the exit code. */
static int write_training_plan(Compilation *c, const Model *m, const PlanTrainArgs *a,
                               const Search *s, Arena *arena) {
    const TrainPlan *p = &s->best;
    Plan *plan = s->layers[p->layer].plan;
    memcpy(plan->choice, p->choice, sizeof(int) * (size_t)plan->ninst);
    const char *why = NULL;
    if (a->layers % p->stages)
        why = arena_printf(arena, "%d stages do not divide the %ld layers (uneven stages)",
                           p->stages, a->layers);
    else if (p->recompute && p->stages < 2)
        why = "it recomputes activations on one pipeline stage ('recompute' needs stages)";
    else if (s->batched && p->replicas > 1 && plan_replica_axis(plan) != 0)
        why = "its layer plan does not split the batch along the replica axis r";
    if (why) {
        diag_error(&c->sink, m->name_span,
                   "the training plan chosen for '%s' cannot be written as a program: %s, which "
                   "the language does not express",
                   m->name, why);
        return 1;
    }
    const char **uses = ARENA_ARRAY(arena, const char *, m->ninstances + 1);
    for (int i = 0; i < m->ninstances; ++i)
        uses[i] = plan_use_text(arena, plan, i);
    FILE *f = fopen(a->out_path, "w");
    if (!f) {
        fprintf(stderr, "primec: error: cannot write '%s'\n", a->out_path);
        return 2;
    }
    PlanWriteSpec w = {0};
    w.dp = p->replicas;
    w.stages = p->stages;
    w.layers = a->layers;
    w.micro_batches = p->micro_batches;
    w.recompute = p->recompute != 0;
    if (s->batched) {
        /* The replica axis r as long as the replicas, each micro-batch of
         * b sequences per replica split over it: the whole global batch. */
        w.replica_axis = 0;
        w.batch = 1;
        w.micro_tokens = p->micro_batch * p->replicas;
    } else {
        w.replica_axis = -1; /* the layer plan has no replica axis: one replica */
        w.micro_tokens = p->micro_batch * s->layers[p->layer].seq_tokens;
    }
    w.vocab = a->vocab;
    int ok = plan_write_spec(f, m, uses, &plan->mesh, &w, a->source, arena);
    if (fclose(f) != 0) {
        fprintf(stderr, "primec: error: cannot write '%s'\n", a->out_path);
        return 2;
    }
    if (!ok) {
        remove(a->out_path);
        diag_error(&c->sink, m->name_span,
                   "the training plan of '%s' cannot be written as a program: the model needs a "
                   "layer block repeated by a parameter and an input whose first dimension is a "
                   "parameter (the tokens the micro-batches split)",
                   m->name);
        return 1;
    }
    return 0;
}

int plan_training(Compilation *c, const Model *m, long devices, CostCtx *ctx,
                  const PlanTrainArgs *a) {
    const ModelTensor *x = NULL;
    for (int t = 0; t < m->ntensors && !x; ++t)
        if (m->tensors[t].role == TENSOR_INPUT && m->tensors[t].ndims)
            x = &m->tensors[t];
    if (!x) {
        diag_error(&c->sink, m->name_span,
                   "model '%s' has no input: the training plan needs the layer's input", m->name);
        return 1;
    }
    if (m->layer_count > 1) {
        diag_error(&c->sink, m->name_span,
                   "--training plans one layer of a model: '%s' repeats its layer %d times "
                   "(give it one layer, e.g. --param layers=1, and the model's layer count as "
                   "--layers)",
                   m->name, m->layer_count);
        return 1;
    }
    TrainOptions o;
    memset(&o, 0, sizeof o);
    o.devices = devices;
    o.layers = a->layers;
    o.global_batch = a->global_batch;
    o.vocab = a->vocab;
    o.recompute = a->recompute;
    o.memory_limit = a->memory_limit;
    o.elem_bytes = ctx->opt.elem_bytes;
    o.state_bytes_per_param = COST_ADAM_STATE_BYTES;
    o.shard_optimizer = a->shard_optimizer;
    o.uneven_stages = a->uneven_stages;
    o.devices_per_node =
        ctx->opt.devices_per_node > 0 ? ctx->opt.devices_per_node : ctx->profile->devices_per_node;
    o.profile = ctx->profile;
    /* The candidates are priced with each kernel alone, and the layer
     * plan's program adds what its fused kernels save (layer_fusion):
     * fusion within an instance and across instances, counted once. */
    const int no_fuse = ctx->opt.no_fuse;
    Arena *arena = arena_create();
    PlanFusion fusion;
    plan_fusion_init(&fusion, &c->sources, m, ctx->profile, &ctx->opt, arena);
    if (!no_fuse) {
        ctx->opt.no_fuse = 1;
        o.fusion = layer_fusion;
        o.fusion_ctx = &fusion;
    }
    int pinned = m->ninstances > 0;
    for (int i = 0; i < m->ninstances; ++i)
        pinned &= m->instances[i].partition != NULL;
    Search *s = ARENA_NEW(arena, Search), *base = ARENA_NEW(arena, Search);
    int rc = 0;
    /* Attention's price per sequence, shared by every micro-batch size,
     * mesh by mesh, and by both searches. */
    PlanSeqCache *seq = plan_seq_cache_create();
    if (!search(c, m, devices, ctx, a, &o, 0, seq, arena, s)) {
        diag_error(&c->sink, m->name_span, "no plan of '%s's layer on any mesh of %ld devices",
                   m->name, devices);
        rc = 1;
    } else if (!s->found) {
        report_unmet(c, m, a, s);
        rc = 1;
    }
    int searched_base = rc == 0 && pinned && search(c, m, devices, ctx, a, &o, 1, seq, arena, base);
    int have_base = searched_base && base->found;
    /* The search solves for layer plans priced instance by instance, which
     * cannot see the kernels fused across instances (their saving is
     * added to each plan it prices, after): when the pinned partitions run
     * faster so, they are kept as the choice, as `primec plan` keeps them
     * when they run faster as one program. */
    const int keep_pinned = have_base && base->best.time_s < s->best.time_s;
    Search *chosen = keep_pinned ? base : s;
    if (rc == 0 && a->json) {
        json_t *r = json_pack("{s:s, s:I, s:s, s:I, s:I, s:I, s:I}", "model", m->name, "devices",
                              (json_int_t)devices, "profile", ctx->profile->name, "layers",
                              (json_int_t)a->layers, "global_batch", (json_int_t)a->global_batch,
                              "seq_tokens", (json_int_t)x->sizes[batched_layer(x) ? 1 : 0], "vocab",
                              (json_int_t)a->vocab);
        json_t *sj = plan_json(chosen, m, arena);
        json_object_set_new(sj, "kept_pinned", json_boolean(keep_pinned));
        /* What the search did, whichever plan it keeps. */
        json_object_set_new(sj, "layer_plans", json_integer(s->nlayers));
        json_object_set_new(sj, "shapes", json_integer(s->shapes));
        json_object_set_new(sj, "search_ms", json_real(round(s->ms * 1e3) / 1e3));
        json_object_set_new(sj, "search_cpu_ms", json_real(round(s->cpu_ms * 1e3) / 1e3));
        json_object_set_new(r, "search", sj);
        json_t *pj = json_null();
        if (have_base)
            pj = plan_json(base, m, arena);
        else if (searched_base && base->smallest.stages)
            pj = json_pack("{s:s, s:f, s:s}", "error", "no plan fits the memory limit",
                           "smallest_memory", base->smallest.mem_total, "dominant",
                           train_memory_dominant(&base->smallest));
        json_object_set_new(r, "pinned", pj);
        json_object_set_new(r, "search_ms", json_real(round(s->ms * 1e3) / 1e3));
        /* Layer programs scheduled for the fusion saving, both searches. */
        json_object_set_new(r, "fusion_programs", json_integer(fusion.programs));
        json_object_set_new(r, "fusion_cache_hits", json_integer(fusion.hits));
        /* Attention priced at one sequence: schedules made, and reused. */
        json_object_set_new(r, "sequence_prices", json_integer(plan_seq_cache_misses(seq)));
        json_object_set_new(r, "sequence_prices_reused", json_integer(plan_seq_cache_hits(seq)));
        json_out(stdout, r, JSON_REAL_PRECISION(9));
    } else if (rc == 0) {
        printf("training plan for %s on %ld devices (profile %s): %ld layers, global batch %ld "
               "sequences of %ld tokens\n",
               m->name, devices, ctx->profile->name, a->layers, a->global_batch,
               x->sizes[batched_layer(x) ? 1 : 0]);
        print_plan(keep_pinned ? "search (the pinned partitions kept: faster with the kernels "
                                 "fused across instances)"
                               : "search",
                   chosen, s, m, arena);
        if (have_base) {
            print_plan("pinned partitions", base, base, m, arena);
            const TrainPlan *p = &chosen->best, *q = &base->best;
            printf("search vs pinned: throughput %.2fx, collective time %.2f, collective bytes "
                   "%.2f, memory %.2f\n",
                   q->time_s / p->time_s, q->coll_time_s > 0 ? p->coll_time_s / q->coll_time_s : 0,
                   q->coll_bytes > 0 ? p->coll_bytes / q->coll_bytes : 0,
                   p->mem_total / q->mem_total);
        } else if (searched_base && base->smallest.stages) {
            printf("pinned partitions: no plan fits in %ld bytes per device (the smallest needs "
                   "%.0f, dominated by %s)\n",
                   a->memory_limit, base->smallest.mem_total,
                   train_memory_dominant(&base->smallest));
        }
    }
    if (rc == 0 && a->out_path)
        rc = write_training_plan(c, m, a, chosen, arena);
    search_free(s);
    search_free(base);
    plan_fusion_free(&fusion);
    plan_seq_cache_destroy(seq);
    arena_destroy(arena);
    ctx->opt.no_fuse = no_fuse;
    return rc;
}
