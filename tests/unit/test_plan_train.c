/*
 * test_plan_train.c — the training search is exact under its model: on a
 * small layer, the best of every assignment of the layer's candidates
 * over every mesh, micro-batch size, stage count, replica count and
 * recomputation choice, each evaluated by train_evaluate, equals what
 * train_search returns; attention over folded sequences is priced as
 * that many sequences; a memory limit no plan meets reports a real plan's
 * memory and its largest term; the fusion saving of a layer plan found in
 * the cache (plan_fusion.h) equals the program priced afresh, and so do
 * attention's prices per sequence shared across micro-batch sizes
 * (PlanSeqCache).
 *
 * Schedules are priced by a deterministic function of their predicted
 * bytes and peak (no measurement); the iteration is composed on the v100
 * profile.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pipeline.h"
#include "plan.h"
#include "plan_fixture.h"
#include "plan_fusion.h"
#include "plan_train.h"
#include "profile.h"

/* One layer: projections, attention scores over the sequence, and an
 * MLP with a residual; the sequence is 8 tokens, as many as the hidden
 * size (token dimensions are found by following the input's first axis,
 * not by their size). */
static const char *layer = "model small {\n"
                           "    param s = 8, h = 8, a = 2, e = 4, f = 16;\n"
                           "    input x[s, h];\n"
                           "    weight wq[h, a, e];\n"
                           "    weight wk[h, a, e];\n"
                           "    weight w1[h, f];\n"
                           "    weight w2[f, h];\n"
                           "    q = proj_heads(x, wq);\n"
                           "    k = proj_heads(x, wk);\n"
                           "    sc = scores(q, k);\n"
                           "    u = matmul(x, w1);\n"
                           "    g = relu(u);\n"
                           "    m = matmul(g, w2);\n"
                           "    y = add(m, x);\n"
                           "}\n";

/* Small enough to enumerate: projections and their scores. */
static const char *attention = "model small {\n"
                               "    param s = 8, h = 6, a = 2, e = 3;\n"
                               "    input x[s, h];\n"
                               "    weight wq[h, a, e];\n"
                               "    weight wk[h, a, e];\n"
                               "    q = proj_heads(x, wq);\n"
                               "    k = proj_heads(x, wk);\n"
                               "    sc = scores(q, k);\n"
                               "}\n";

/* A norm, an MLP and a residual add: chains the kernels pass fuses
 * across instances. */
static const char *fused = "model small {\n"
                           "    param s = 8, h = 8, f = 16;\n"
                           "    input x[s, h];\n"
                           "    weight g[h];\n"
                           "    weight b[h];\n"
                           "    weight w1[h, f];\n"
                           "    weight w2[f, h];\n"
                           "    m1 = norm_mean(x);\n"
                           "    v1 = norm_var(x, m1);\n"
                           "    n1 = norm_apply(x, m1, v1);\n"
                           "    l1 = scale_shift(n1, g, b);\n"
                           "    u = matmul(l1, w1);\n"
                           "    r = relu(u);\n"
                           "    o = matmul(r, w2);\n"
                           "    y = add(o, x);\n"
                           "}\n";

static Mesh mesh_of(long n, int square) {
    Mesh m;
    memset(&m, 0, sizeof m);
    m.naxes = square ? 2 : 1;
    m.names[0] = square ? "i" : "d";
    m.names[1] = "j";
    m.sizes[0] = m.sizes[1] = n;
    m.ndev = (int)(square ? n * n : n);
    return m;
}

typedef struct Fixture {
    Compilation c;
    const Model *model;
    Arena *arenas[16];
    TrainLayer layers[16];
    int nlayers;
    Profile prof;
} Fixture;

/* The layer planned on mesh k of the fixture's at b sequences, with the
 * one-sequence prices of `cache` (NULL: none). */
static Plan *plan_at(Fixture *f, int k, long b, PlanSeqCache *cache, Arena *a) {
    static const long sides[] = {1, 2, 4, 2};
    PlanOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.mesh = mesh_of(sides[k], k == 3);
    opt.dp = 1;
    opt.token_size = 8;
    opt.tokens = 8 * b;
    opt.seq_tokens = 8;
    opt.elem_bytes = 2;
    opt.state_bytes_per_param = 12;
    opt.cost = bytes_cost;
    opt.move = bytes_move;
    opt.seq_cache = cache;
    Plan *plan = ARENA_NEW(a, Plan);
    int ok = plan_model(a, &f->c.sink, &f->c.module, f->model, &opt, plan);
    for (int i = 0; i < f->c.sink.count && !ok; ++i)
        fprintf(stderr, "%s\n", f->c.sink.items[i].message);
    assert_int_equal(ok, 1);
    return plan;
}

/* The layer planned on (d: 1), (d: 2), (d: 4), (i: 2, j: 2) at micro-
 * batches of 1 and 2 sequences. */
static void fixture_init(Fixture *f, const char *text) {
    memset(f, 0, sizeof *f);
    write_file(text);
    compilation_init(&f->c, path, NULL);
    f->c.sink.out = NULL;
    assert_int_equal(pipeline_run(&f->c, "resolve"), 1);
    f->model = f->c.module.models.items[0];
    char err[256];
    assert_int_equal(profile_load("v100", &f->prof, err, sizeof err), 1);
    for (int k = 0; k < 4; ++k)
        for (long b = 1; b <= 2; ++b) {
            Arena *a = arena_create();
            Plan *plan = plan_at(f, k, b, NULL, a);
            TrainLayer *l = &f->layers[f->nlayers];
            l->plan = plan;
            l->micro_batch = b;
            l->seq_tokens = 8;
            l->hidden = f->model->tensors[0].sizes[1];
            f->arenas[f->nlayers++] = a;
        }
}

static void fixture_free(Fixture *f) {
    for (int k = 0; k < f->nlayers; ++k)
        arena_destroy(f->arenas[k]);
    compilation_free(&f->c);
    unlink(path);
}

static TrainOptions options(const Fixture *f, long limit) {
    TrainOptions o;
    memset(&o, 0, sizeof o);
    o.devices = 4;
    o.layers = 4;
    o.global_batch = 8;
    o.vocab = 64;
    o.recompute = TRAIN_RECOMPUTE_AUTO;
    o.memory_limit = limit;
    o.elem_bytes = 2;
    o.state_bytes_per_param = 12;
    o.devices_per_node = 4;
    o.profile = &f->prof;
    return o;
}

/* The best iteration over everything, by enumeration; the least memory too. */
static double brute_force(const Fixture *f, const TrainOptions *o, double *least_memory,
                          long *assignments) {
    double best = INFINITY;
    *least_memory = INFINITY;
    *assignments = 0;
    for (int li = 0; li < f->nlayers; ++li) {
        const Plan *plan = f->layers[li].plan;
        int n = plan->ninst;
        long total = 1;
        for (int i = 0; i < n; ++i)
            total *= plan->cands[i].count;
        assert_true(total <= 100000);
        int *choice = calloc((size_t)n + 1, sizeof(int));
        for (long k = 0; k < total; ++k) {
            long rest = k;
            for (int i = n - 1; i >= 0; --i) {
                choice[i] = (int)(rest % plan->cands[i].count);
                rest /= plan->cands[i].count;
            }
            for (int p = 1; p <= o->layers; ++p)
                for (int d = 1; d <= o->devices; ++d)
                    for (int rc = 0; rc < 2; ++rc) {
                        TrainPlan tp;
                        if (!train_evaluate(o, &f->layers[li], choice, p, d, rc, &tp))
                            continue;
                        ++*assignments;
                        if (tp.mem_total < *least_memory)
                            *least_memory = tp.mem_total;
                        if (o->memory_limit && tp.mem_total > (double)o->memory_limit)
                            continue;
                        if (tp.time_s < best)
                            best = tp.time_s;
                    }
        }
        free(choice);
    }
    return best;
}

static void test_exhaustive(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, attention);
    TrainOptions o = options(f, 0);
    Arena *arena = arena_create(), *scratch = arena_create();
    TrainPlan best, smallest;
    long shapes = 0;
    assert_int_equal(
        train_search(&o, f->layers, f->nlayers, arena, scratch, &best, &smallest, &shapes), 1);
    double least = 0;
    long assignments = 0;
    double brute = brute_force(f, &o, &least, &assignments);
    printf("search %.9g s, enumeration of %ld plans %.9g s (%ld shapes)\n", best.time_s,
           assignments, brute, shapes);
    assert_true(assignments > 1000);
    assert_true(fabs(best.time_s - brute) <= 1e-12 * brute);
    /* The plan returned costs what the search says it costs. */
    TrainPlan again;
    assert_int_equal(train_evaluate(&o, &f->layers[best.layer], best.choice, best.stages,
                                    best.replicas, best.recompute, &again),
                     1);
    assert_true(again.time_s == best.time_s);
    /* Recomputation off, and on only: each the best of its own space. */
    for (int rc = TRAIN_RECOMPUTE_OFF; rc <= TRAIN_RECOMPUTE_ON; ++rc) {
        TrainOptions r = o;
        r.recompute = rc;
        TrainPlan b2;
        assert_int_equal(
            train_search(&r, f->layers, f->nlayers, arena, scratch, &b2, &smallest, &shapes), 1);
        assert_int_equal(b2.recompute, rc == TRAIN_RECOMPUTE_ON);
        assert_true(b2.time_s >= best.time_s);
    }
    arena_destroy(arena);
    arena_destroy(scratch);
    fixture_free(f);
    free(f);
}

/* With the optimizer sharded over the replicas (ZeRO-1) the search is
 * still exact against the enumeration; a shape with d replicas holds 1/d
 * of the state and steps 1/d of the parameters, and the best iteration is
 * no slower than unsharded. */
static void test_exhaustive_sharded(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, attention);
    TrainOptions plain = options(f, 0), o = plain;
    o.shard_optimizer = 1;
    Arena *arena = arena_create(), *scratch = arena_create();
    TrainPlan best, unsharded, smallest;
    long shapes = 0;
    assert_int_equal(
        train_search(&o, f->layers, f->nlayers, arena, scratch, &best, &smallest, &shapes), 1);
    assert_int_equal(
        train_search(&plain, f->layers, f->nlayers, arena, scratch, &unsharded, &smallest, &shapes),
        1);
    double least = 0;
    long assignments = 0;
    double brute = brute_force(f, &o, &least, &assignments);
    printf("sharded: search %.9g s, enumeration of %ld plans %.9g s; unsharded %.9g s\n",
           best.time_s, assignments, brute, unsharded.time_s);
    assert_true(assignments > 1000);
    assert_true(fabs(best.time_s - brute) <= 1e-12 * brute);
    assert_true(best.time_s <= unsharded.time_s);
    /* One layer plan on 1 stage x 4 replicas (a 1-device mesh), both ways. */
    int checked = 0;
    for (int li = 0; li < f->nlayers && !checked; ++li) {
        if (f->layers[li].plan->mesh.ndev != 1)
            continue;
        int *choice = calloc((size_t)f->layers[li].plan->ninst + 1, sizeof(int));
        TrainPlan a, b;
        if (train_evaluate(&plain, &f->layers[li], choice, 1, 4, 0, &a) &&
            train_evaluate(&o, &f->layers[li], choice, 1, 4, 0, &b)) {
            assert_true(fabs(b.mem_optimizer - a.mem_optimizer / 4) <= 1e-9 * a.mem_optimizer);
            assert_true(b.mem_weights == a.mem_weights && b.mem_grads == a.mem_grads);
            assert_true(fabs(b.pipe.optimizer_us - a.pipe.optimizer_us / 4) <=
                        1e-9 * a.pipe.optimizer_us);
            assert_true(b.pipe.allreduce_us == a.pipe.allreduce_us);
            assert_true(b.coll_bytes == a.coll_bytes);
            checked = 1;
        }
        free(choice);
    }
    assert_true(checked);
    arena_destroy(arena);
    arena_destroy(scratch);
    fixture_free(f);
    free(f);
}

/* Uneven stages: 5 layers on 4 devices, where only 1 and 5 stages divide
 * the layers, also take 2 stages (3 + 2 layers) and 4 (2 + 1 + 1 + 1).
 * The search is exact against the enumeration over that larger space, no
 * slower than with even stages only, and the busiest stage of an uneven
 * split sets its time and holds its weights. */
static void test_exhaustive_uneven(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, attention);
    TrainOptions even = options(f, 0), o = even;
    even.layers = o.layers = 5;
    o.uneven_stages = 1;
    Arena *arena = arena_create(), *scratch = arena_create();
    TrainPlan best, best_even, smallest;
    long shapes = 0, shapes_even = 0;
    assert_int_equal(
        train_search(&o, f->layers, f->nlayers, arena, scratch, &best, &smallest, &shapes), 1);
    assert_int_equal(train_search(&even, f->layers, f->nlayers, arena, scratch, &best_even,
                                  &smallest, &shapes_even),
                     1);
    double least = 0;
    long assignments = 0;
    double brute = brute_force(f, &o, &least, &assignments);
    printf("uneven: search %.9g s (%d stages), enumeration of %ld plans %.9g s; even only %.9g "
           "s (%ld shapes against %ld)\n",
           best.time_s, best.stages, assignments, brute, best_even.time_s, shapes, shapes_even);
    assert_true(assignments > 1000);
    assert_true(fabs(best.time_s - brute) <= 1e-12 * brute);
    assert_true(best.time_s <= best_even.time_s);
    assert_true(shapes > shapes_even);
    /* One layer plan on a 1-device mesh: 2 stages of 3 and 2 layers exist
     * only as uneven stages, and cost like 3 layers per stage where the
     * time and the weights are concerned. */
    int checked = 0;
    for (int li = 0; li < f->nlayers && !checked; ++li) {
        if (f->layers[li].plan->mesh.ndev != 1)
            continue;
        int *choice = calloc((size_t)f->layers[li].plan->ninst + 1, sizeof(int));
        TrainPlan two, three;
        assert_int_equal(train_evaluate(&even, &f->layers[li], choice, 2, 2, 0, &two), 0);
        assert_int_equal(train_evaluate(&o, &f->layers[li], choice, 2, 2, 0, &two), 1);
        TrainOptions six = o;
        six.layers = 6; /* 2 even stages of 3 layers */
        assert_int_equal(train_evaluate(&six, &f->layers[li], choice, 2, 2, 0, &three), 1);
        assert_true(two.mem_weights == three.mem_weights);
        assert_true(two.pipe.stage_us == three.pipe.stage_us);
        assert_true(two.pipe.bubble_us < three.pipe.bubble_us);
        assert_true(two.time_s <= three.time_s);
        checked = 1;
        free(choice);
    }
    assert_true(checked);
    arena_destroy(arena);
    arena_destroy(scratch);
    fixture_free(f);
    free(f);
}

/* Attention over b folded sequences costs b times one sequence's; the
 * projections (one token dimension) are scheduled at the folded size. */
static void test_attention_per_sequence(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, layer);
    int sc = -1;
    for (int i = 0; i < f->model->ninstances; ++i)
        if (!strcmp(f->model->instances[i].name, "sc"))
            sc = i;
    assert_true(sc >= 0);
    int compared = 0;
    for (int k = 0; k < f->nlayers; k += 2) {
        const Plan *one = f->layers[k].plan, *two = f->layers[k + 1].plan;
        assert_int_equal(f->layers[k + 1].micro_batch, 2);
        assert_int_equal(one->cands[sc].count, two->cands[sc].count);
        for (int c = 0; c < one->cands[sc].count; ++c) {
            const PlanCandidate *a = one->cands[sc].items[c], *b = two->cands[sc].items[c];
            assert_ptr_equal(a->partition, b->partition);
            assert_true(fabs(b->cost.time - 2 * a->cost.time) <= 1e-12 * a->cost.time);
            assert_int_equal(b->cost.stash_bytes, 2 * a->cost.stash_bytes);
            /* The layouts are the folded ones: twice the queries. */
            assert_int_equal(b->in_t[0].shape[0], 2 * a->in_t[0].shape[0]);
            ++compared;
        }
    }
    assert_true(compared > 4);
    fixture_free(f);
    free(f);
}

static void test_memory_unmet(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, attention);
    TrainOptions o = options(f, 0);
    double least = 0;
    long assignments = 0;
    brute_force(f, &o, &least, &assignments);
    o.memory_limit = (long)(least / 2);
    Arena *arena = arena_create(), *scratch = arena_create();
    TrainPlan best, smallest;
    long shapes = 0;
    assert_int_equal(
        train_search(&o, f->layers, f->nlayers, arena, scratch, &best, &smallest, &shapes), 0);
    assert_true(smallest.stages > 0);
    assert_true(smallest.mem_total >= least);
    TrainPlan again;
    assert_int_equal(train_evaluate(&o, &f->layers[smallest.layer], smallest.choice,
                                    smallest.stages, smallest.replicas, smallest.recompute, &again),
                     1);
    assert_true(again.mem_total == smallest.mem_total);
    const char *dom = train_memory_dominant(&smallest);
    double part = !strcmp(dom, "weights")       ? smallest.mem_weights
                  : !strcmp(dom, "gradients")   ? smallest.mem_grads
                  : !strcmp(dom, "activations") ? smallest.mem_activations
                                                : smallest.mem_optimizer;
    assert_true(part >= smallest.mem_weights && part >= smallest.mem_grads &&
                part >= smallest.mem_optimizer && part >= smallest.mem_activations);
    arena_destroy(arena);
    arena_destroy(scratch);
    fixture_free(f);
    free(f);
}

/* Memory limits between the least memory any plan needs and the
 * unconstrained optimum's: the search's plan fits, is no faster than the
 * enumeration's best that fits (the search is a relaxation there, not
 * exact), and is found by trading time for memory within a shape
 * (fastest_fitting), so it is within 10% of that best. */
static void test_memory_binds(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, attention);
    TrainOptions o = options(f, 0);
    double least = 0;
    long assignments = 0;
    brute_force(f, &o, &least, &assignments);
    Arena *arena = arena_create(), *scratch = arena_create();
    TrainPlan free_best, best, smallest;
    long shapes = 0;
    assert_int_equal(
        train_search(&o, f->layers, f->nlayers, arena, scratch, &free_best, &smallest, &shapes), 1);
    int exact = 0;
    for (int k = 1; k <= 4; ++k) {
        o.memory_limit = (long)(least + (free_best.mem_total - least) * k / 5);
        double brute = brute_force(f, &o, &least, &assignments);
        assert_int_equal(
            train_search(&o, f->layers, f->nlayers, arena, scratch, &best, &smallest, &shapes), 1);
        printf("limit %ld: search %.9g s, enumeration %.9g s\n", o.memory_limit, best.time_s,
               brute);
        assert_true(best.mem_total <= (double)o.memory_limit);
        assert_true(best.time_s >= brute * (1 - 1e-12));
        assert_true(best.time_s <= 1.1 * brute);
        exact += best.time_s <= brute * (1 + 1e-12);
    }
    printf("%d of 4 limits: the enumeration's optimum\n", exact);
    arena_destroy(arena);
    arena_destroy(scratch);
    fixture_free(f);
    free(f);
}

/* Assignment k of `total` of plan's candidates, in mixed radix. */
static void assignment(const Plan *plan, long k, int *choice) {
    for (int i = plan->ninst - 1; i >= 0; --i) {
        choice[i] = (int)(k % plan->cands[i].count);
        k /= plan->cands[i].count;
    }
}

/* The cache returns what pricing the program afresh returns, bit for bit,
 * on up to 24 assignments of every layer plan (4 meshes x micro-batches
 * of 1 and 2); a program at 2 sequences per micro-batch is the one at 1,
 * so the cache schedules fewer programs, and fusion saves time on some. */
static void test_fusion_cache(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, fused);
    CostOptions opt;
    cost_options_default(&opt);
    opt.elem_bytes = 2;
    Arena *arena = arena_create();
    PlanFusion cached, fresh;
    plan_fusion_init(&cached, &f->c.sources, f->model, &f->prof, &opt, arena);
    plan_fusion_init(&fresh, &f->c.sources, f->model, &f->prof, &opt, arena);
    long asked = 0;
    int saves = 0;
    for (int li = 0; li < f->nlayers; ++li) {
        const Plan *plan = f->layers[li].plan;
        long total = 1;
        for (int i = 0; i < plan->ninst; ++i)
            total *= plan->cands[i].count;
        const long stride = total / 24 + 1;
        int *choice = calloc((size_t)plan->ninst + 1, sizeof(int));
        for (long k = 0; k < total; k += stride) {
            assignment(plan, k, choice);
            double cf, cb, ff, fb;
            plan_fusion_saved(&cached, plan, choice, &cf, &cb);
            plan_fusion_program(&fresh, plan, choice, &ff, &fb);
            assert_true(cf == ff);
            assert_true(cb == fb);
            saves |= ff > 0 || fb > 0;
            /* Asked again: from the cache, the same. */
            plan_fusion_saved(&cached, plan, choice, &cf, &cb);
            assert_true(cf == ff);
            assert_true(cb == fb);
            ++asked;
        }
        free(choice);
    }
    printf("%ld assignments: %ld programs scheduled with the cache, %ld without\n", asked,
           cached.programs, fresh.programs);
    assert_true(saves);
    assert_int_equal(fresh.programs, asked);
    assert_int_equal(cached.programs + cached.hits, 2 * asked);
    assert_true(cached.programs < asked);
    plan_fusion_free(&cached);
    plan_fusion_free(&fresh);
    arena_destroy(arena);
    fixture_free(f);
    free(f);
}

static void assert_same_cost(const PlanCost *x, const PlanCost *y) {
    assert_true(x->time == y->time && x->fwd_time == y->fwd_time);
    assert_true(x->compute_time == y->compute_time && x->coll_time == y->coll_time);
    assert_int_equal(x->coll_bytes, y->coll_bytes);
    assert_int_equal(x->p2p_bytes, y->p2p_bytes);
    assert_int_equal(x->peak, y->peak);
    assert_int_equal(x->persistent, y->persistent);
    assert_int_equal(x->weight_elems, y->weight_elems);
    assert_int_equal(x->stash_bytes, y->stash_bytes);
    assert_int_equal(x->input_bytes, y->input_bytes);
    for (int a = 0; a < IR_MAX_INPUTS; ++a) {
        assert_true(x->reduce_time[a] == y->reduce_time[a]);
        assert_int_equal(x->reduce_bytes[a], y->reduce_bytes[a]);
    }
}

/* The layer with attention (scores over the sequence) planned at 1, 2
 * and 4 sequences per micro-batch on every mesh, sharing one-sequence
 * prices, has every candidate priced as when each plan prices its own;
 * and the shared prices were used. */
static void test_sequence_cache(void **state) {
    (void)state;
    Fixture *f = malloc(sizeof *f);
    fixture_init(f, layer);
    PlanSeqCache *cache = plan_seq_cache_create();
    Arena *a = arena_create();
    long compared = 0;
    for (int k = 0; k < 4; ++k)
        for (long b = 1; b <= 4; b *= 2) {
            const Plan *shared = plan_at(f, k, b, cache, a), *own = plan_at(f, k, b, NULL, a);
            for (int i = 0; i < own->ninst; ++i) {
                assert_int_equal(shared->cands[i].count, own->cands[i].count);
                for (int c = 0; c < own->cands[i].count; ++c) {
                    const PlanCandidate *x = shared->cands[i].items[c], *y = own->cands[i].items[c];
                    assert_ptr_equal(x->partition, y->partition);
                    assert_same_cost(&x->cost, &y->cost);
                    ++compared;
                }
            }
            assert_true(shared->time == own->time);
        }
    printf("%ld candidates compared; one-sequence prices: %ld scheduled, %ld reused\n", compared,
           plan_seq_cache_misses(cache), plan_seq_cache_hits(cache));
    assert_true(plan_seq_cache_hits(cache) > 0);
    arena_destroy(a);
    plan_seq_cache_destroy(cache);
    fixture_free(f);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exhaustive),        cmocka_unit_test(test_exhaustive_sharded),
        cmocka_unit_test(test_exhaustive_uneven), cmocka_unit_test(test_attention_per_sequence),
        cmocka_unit_test(test_memory_unmet),      cmocka_unit_test(test_memory_binds),
        cmocka_unit_test(test_fusion_cache),      cmocka_unit_test(test_sequence_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
