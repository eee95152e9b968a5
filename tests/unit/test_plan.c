/*
 * test_plan.c — the planner is exact under its cost model: on every
 * model small enough to enumerate, the dynamic program's optimum equals
 * the best of all assignments; the layer matrix power gives the same
 * optimum as the linear program; a memory limit no plan meets is an
 * error naming the smallest peak; two plans of a model compare as the
 * same program exactly when they bind every instance alike on the same
 * mesh (plan_same_program).
 *
 * The cost used here is a deterministic function of the schedule's
 * predicted bytes and peak (no hardware profile), so the test checks
 * the search, not the prices.
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

#include "pipeline.h"
#include "plan.h"
#include "plan_fixture.h"

/* Plan options over mesh (d: n) or (i: n, j: n), priced by bytes. */
static PlanOptions bytes_options(long mesh_n, int square, long limit) {
    PlanOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.mesh.naxes = square ? 2 : 1;
    opt.mesh.names[0] = square ? "i" : "d";
    opt.mesh.names[1] = "j";
    opt.mesh.sizes[0] = mesh_n;
    opt.mesh.sizes[1] = mesh_n;
    opt.mesh.ndev = (int)(square ? mesh_n * mesh_n : mesh_n);
    opt.dp = 1;
    opt.memory_limit = limit;
    opt.cost = bytes_cost;
    opt.move = bytes_move;
    return opt;
}

static void plan_and_compare(const char *text, long mesh_n, int square, long limit, int expect_ok) {
    write_file(text);
    Compilation c;
    compilation_init(&c, path, NULL);
    c.sink.out = NULL;
    assert_int_equal(pipeline_run(&c, "resolve"), 1);
    const Model *m = c.module.models.items[0];
    PlanOptions opt = bytes_options(mesh_n, square, limit);
    Plan plan;
    int ok = plan_model(c.arena, &c.sink, &c.module, m, &opt, &plan);
    assert_int_equal(ok, expect_ok);
    if (ok) {
        int *best = calloc((size_t)m->ninstances, sizeof(int));
        double ex = plan_exhaustive(&plan, 2000000, best);
        assert_true(ex >= 0);
        assert_true(fabs(ex - plan.time) <= 1e-12 * fabs(ex) + 1e-15);
        assert_true(fabs(plan_assignment_time(&plan, plan.choice) - plan.time) <=
                    1e-12 * plan.time + 1e-15);
        if (plan.used_power)
            assert_true(fabs(plan.power_time - plan.time) <= 1e-12 * plan.time + 1e-15);
        free(best);
    } else {
        int found = 0;
        for (int i = 0; i < c.sink.count; ++i)
            found |= strstr(c.sink.items[i].message, "smallest found needs") != NULL;
        assert_true(found);
    }
    compilation_free(&c);
    unlink(path);
}

static const char *mlp = "model mlp {\n"
                         "    param t = 32, h = 16, f = 64;\n"
                         "    mesh(d: 4);\n"
                         "    input x[t, h];\n"
                         "    weight w1[h, f];\n"
                         "    weight w2[f, h];\n"
                         "    a = matmul(x, w1) use column;\n"
                         "    g = gelu(a) use cols;\n"
                         "    y = matmul(g, w2) use row;\n"
                         "}\n";

static const char *residual = "model res {\n"
                              "    param t = 32, h = 16;\n"
                              "    mesh(d: 4);\n"
                              "    input x[t, h];\n"
                              "    weight w1[h, h];\n"
                              "    a = matmul(x, w1) use column;\n"
                              "    g = relu(a) use cols;\n"
                              "    y = add(g, x) use cols;\n"
                              "}\n";

static const char *layers = "model deep {\n"
                            "    param t = 16, h = 16;\n"
                            "    mesh(d: 2);\n"
                            "    input x[t, h];\n"
                            "    layer(x -> y) repeat 4 {\n"
                            "        weight w[h, h];\n"
                            "        a = matmul(x, w) use column;\n"
                            "        y = add(a, x) use cols;\n"
                            "    }\n"
                            "}\n";

static void test_mlp_1d(void **state) {
    (void)state;
    plan_and_compare(mlp, 4, 0, 0, 1);
}

static void test_mlp_square(void **state) {
    (void)state;
    plan_and_compare(mlp, 2, 1, 0, 1);
}

static void test_residual_keeps_state(void **state) {
    (void)state;
    plan_and_compare(residual, 4, 0, 0, 1);
}

static void test_layer_power(void **state) {
    (void)state;
    plan_and_compare(layers, 2, 0, 0, 1);
}

/* Many layers, with instances before and after them: too many
 * assignments to enumerate, so the layer power's choices are checked
 * against their own cost and (inside plan_model) the linear program. */
static const char *long_stack = "model long_stack {\n"
                                "    param t = 16, h = 16;\n"
                                "    mesh(d: 2);\n"
                                "    input x0[t, h];\n"
                                "    x = relu(x0) use cols;\n"
                                "    layer(x -> y) repeat 7 {\n"
                                "        weight w[h, h];\n"
                                "        a = matmul(x, w) use column;\n"
                                "        g = relu(a) use cols;\n"
                                "        y = add(g, x) use cols;\n"
                                "    }\n"
                                "    l = sumsq(y) use replicate;\n"
                                "}\n";

static void test_layer_power_long(void **state) {
    (void)state;
    write_file(long_stack);
    Compilation c;
    compilation_init(&c, path, NULL);
    c.sink.out = NULL;
    assert_int_equal(pipeline_run(&c, "resolve"), 1);
    const Model *m = c.module.models.items[0];
    assert_int_equal(m->layer_count, 7);
    for (int square = 0; square < 2; ++square) {
        PlanOptions opt = bytes_options(2, square, 0);
        Plan plan;
        assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &opt, &plan), 1);
        assert_int_equal(plan.used_power, 1);
        assert_true(fabs(plan.power_time - plan.time) <= 1e-12 * plan.time + 1e-15);
        assert_true(fabs(plan_assignment_time(&plan, plan.choice) - plan.time) <=
                    1e-12 * plan.time + 1e-15);
    }
    compilation_free(&c);
    unlink(path);
}

static void test_memory_limit_unmet(void **state) {
    (void)state;
    /* Every candidate needs more than 64 bytes. */
    plan_and_compare(mlp, 4, 0, 64, 0);
}

/* The mlp planned twice on (d: 4), with pinned candidates only once:
 * every choice of the one is the same program as itself in the other,
 * and as the pinned plan's one choice exactly when it binds every
 * instance as the pins do; no choice is the same program on (d: 2); a
 * shape compared too tells token counts apart. */
static void test_same_program(void **state) {
    (void)state;
    write_file(mlp);
    Compilation c;
    compilation_init(&c, path, NULL);
    c.sink.out = NULL;
    assert_int_equal(pipeline_run(&c, "resolve"), 1);
    const Model *m = c.module.models.items[0];
    PlanOptions opt = bytes_options(4, 0, 0);
    Plan a, b, pinned, other, folded;
    assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &opt, &a), 1);
    assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &opt, &b), 1);
    opt.pinned_only = 1;
    assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &opt, &pinned), 1);
    opt.pinned_only = 0;
    opt.token_size = 32;
    opt.tokens = 64; /* two sequences of 32 folded: other shapes, the same bindings */
    assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &opt, &folded), 1);
    PlanOptions two = bytes_options(2, 0, 0);
    assert_int_equal(plan_model(c.arena, &c.sink, &c.module, m, &two, &other), 1);
    const int n = m->ninstances;
    long total = 1;
    for (int i = 0; i < n; ++i)
        total *= a.cands[i].count;
    int choice[8], pin[8] = {0}, same_as_pinned = 0, differ = 0;
    assert_true(n <= 8);
    for (long k = 0; k < total; ++k) {
        long rest = k;
        for (int i = n - 1; i >= 0; --i) {
            choice[i] = (int)(rest % a.cands[i].count);
            rest /= a.cands[i].count;
        }
        assert_true(plan_same_program(&a, choice, &b, choice, 1));
        int pins = 1;
        for (int i = 0; i < n; ++i)
            pins &= ((const PlanCandidate *)a.cands[i].items[choice[i]])->partition ==
                    m->instances[i].partition;
        /* The pinned partitions bound along d, the only axis: one way. */
        assert_int_equal(plan_same_program(&a, choice, &pinned, pin, 1), pins);
        same_as_pinned += pins;
        differ += !pins;
        int zero[8] = {0};
        assert_false(plan_same_program(&a, choice, &other, zero, 0));
    }
    assert_int_equal(same_as_pinned, 1);
    assert_true(differ > 0);
    /* Folded tokens: bound alike, shaped differently. */
    assert_int_equal(a.cands[0].count, folded.cands[0].count);
    assert_true(plan_same_program(&a, pin, &folded, pin, 0));
    assert_false(plan_same_program(&a, pin, &folded, pin, 1));
    compilation_free(&c);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_1d),
        cmocka_unit_test(test_mlp_square),
        cmocka_unit_test(test_residual_keeps_state),
        cmocka_unit_test(test_layer_power),
        cmocka_unit_test(test_layer_power_long),
        cmocka_unit_test(test_memory_limit_unmet),
        cmocka_unit_test(test_same_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
