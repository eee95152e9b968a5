/*
 * test_schedule.c — unit tests of the schedule pass on the stdlib's
 * matmul partitions.
 *
 * Each test writes a one-instance model to a temporary file, runs the
 * pipeline (pipeline.h) up to and including "schedule" with diagnostics
 * stored but not printed, and asserts on the Schedule IR: which phases
 * exist and in which order they sweep, every move's kind, every
 * collective, the boundary redistributions, the home layouts'
 * replication, and the predicted bytes per device against closed forms.
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
#include "explain.h"
#include "pipeline.h"
#include "plan.h"
#include "schedule.h"

/* ------------------------------------------------------------------ */
/* Fixture: one temporary directory for the model files. */

static char tmpdir[64];

static int group_setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/primec-test-schedule-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/model.prime", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

/* A compilation of one model file, run through "schedule". */
typedef struct Run {
    Compilation c;
    char path[128];
    int active; /* c is initialised and not yet freed */
    int ok;
    const Schedule *s; /* NULL when the pipeline failed */
} Run;

/* The test's compilation, freed by the per-test teardown even when an
 * assertion jumps out of the test (so LeakSanitizer stays quiet). */
static Run current;

static void run_source(Run *r, const char *source, const char *last) {
    snprintf(r->path, sizeof r->path, "%s/model.prime", tmpdir);
    FILE *f = fopen(r->path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(source, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    /* Diagnostics are stored in c.sink, not printed. */
    compilation_init(&r->c, r->path, NULL);
    r->active = 1;
    r->c.sink.out = NULL;
    r->ok = pipeline_run(&r->c, last);
    r->s = r->ok && r->c.schedules.count == 1 ? r->c.schedules.items[0] : NULL;
}

/* A model of `y = matmul(x, w) use PARTITION` on MESH with shape m, k, n. */
static void run_matmul(Run *r, const char *partition, const char *mesh, long m, long k, long n) {
    char source[1024];
    snprintf(source, sizeof source,
             "model t {\n"
             "    param m = %ld, k = %ld, n = %ld;\n"
             "    mesh(%s);\n"
             "    input x[m, k];\n"
             "    weight w[k, n];\n"
             "    y = matmul(x, w) use %s;\n"
             "}\n",
             m, k, n, mesh, partition);
    run_source(r, source, "schedule");
    if (!r->s) {
        for (int i = 0; i < r->c.sink.count; ++i)
            fprintf(stderr, "diagnostic: %s\n", r->c.sink.items[i].message);
        fail_msg("the pipeline failed on partition %s over mesh(%s)", partition, mesh);
    }
}

static void run_free(Run *r) {
    if (r->active)
        compilation_free(&r->c);
    r->active = 0;
}

static int test_teardown(void **state) {
    (void)state;
    run_free(&current);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Lookups in the Schedule IR. */

static int tensor_id(const Schedule *s, const char *name) {
    for (int t = 0; t < s->ntensors; ++t)
        if (strcmp(s->tensors[t].name, name) == 0)
            return t;
    fail_msg("no storage tensor named '%s'", name);
    return -1;
}

/* The one phase of a kind (the models here have one instance). */
static const PhaseSched *phase_of(const Schedule *s, PhaseKind kind) {
    const PhaseSched *found = NULL;
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        if (ph->kind == kind) {
            if (found)
                fail_msg("two %s phases in a one-instance model", phase_name(kind));
            found = ph;
        }
    }
    if (!found)
        fail_msg("no %s phase", phase_name(kind));
    return found;
}

static const PhaseKind compute_phases[] = {PHASE_FWD, PHASE_BWD, PHASE_GRAD};
#define NCOMPUTE ((int)(sizeof compute_phases / sizeof compute_phases[0]))

static int collective_count(const Schedule *s) {
    int n = 0;
    for (int p = 0; p < s->phases.count; ++p)
        n += ((const PhaseSched *)s->phases.items[p])->collectives.count;
    return n;
}

static int move_count(const Schedule *s) {
    int n = 0;
    for (int p = 0; p < s->phases.count; ++p)
        n += ((const PhaseSched *)s->phases.items[p])->moves.count;
    return n;
}

static void assert_no_boundary_moves(const Schedule *s) {
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        for (int i = 0; i < ph->boundary.count; ++i) {
            const Move *mv = ph->boundary.items[i];
            fail_msg("%s phase redistributes '%s' (%s, %ld bytes): %s", phase_name(ph->kind),
                     s->tensors[mv->tensor].name, move_kind_name(mv->kind), mv->bytes,
                     mv->reason ? mv->reason : "");
        }
    }
}

/* The phase has exactly one collective, of tensor `name`, over every device. */
static void assert_one_collective(const Schedule *s, PhaseKind kind, const char *name) {
    const PhaseSched *ph = phase_of(s, kind);
    assert_int_equal(ph->collectives.count, 1);
    const Collective *c = ph->collectives.items[0];
    assert_string_equal(s->tensors[c->tensor].name, name);
    assert_int_equal(c->gsize, s->model->mesh.ndev);
    for (int i = 0; i < c->gsize; ++i)
        assert_int_equal(c->group[i], i);
    /* No collective in any other phase. */
    assert_int_equal(collective_count(s), 1);
}

static int home_replication(const Schedule *s, const char *name) {
    int t = tensor_id(s, name);
    assert_int_equal(s->home[t].ndev, s->model->mesh.ndev);
    return layout_replication(&s->home[t], s->tensors[t].ntiles);
}

/* ------------------------------------------------------------------ */
/* square */

static void check_square(long p, long m, long k, long n) {
    char mesh[64];
    snprintf(mesh, sizeof mesh, "i: %ld, j: %ld", p, p);
    Run *r = &current;
    run_matmul(r, "square", mesh, m, k, n);
    const Schedule *s = r->s;
    int ndev = (int)(p * p);
    assert_int_equal(s->model->mesh.ndev, ndev);

    /* Every phase is there, forward sweeps forward, backward and gradient reversed. */
    phase_of(s, PHASE_INIT);
    phase_of(s, PHASE_DYIN);
    assert_int_equal(phase_of(s, PHASE_FWD)->reversed, 0);
    assert_int_equal(phase_of(s, PHASE_BWD)->reversed, 1);
    assert_int_equal(phase_of(s, PHASE_GRAD)->reversed, 1);

    /* No collective anywhere; every move between steps is a ring shift;
     * per phase two tensors move at each of the p - 1 step transitions. */
    assert_int_equal(collective_count(s), 0);
    for (int i = 0; i < NCOMPUTE; ++i) {
        const PhaseSched *ph = phase_of(s, compute_phases[i]);
        assert_int_equal(ph->collectives.count, 0);
        assert_int_equal(ph->moves.count, 2 * (p - 1));
        for (int j = 0; j < ph->moves.count; ++j) {
            const Move *mv = ph->moves.items[j];
            if (mv->kind != MOVE_SHIFT)
                fail_msg("%s phase moves '%s' by %s", phase_name(ph->kind),
                         s->tensors[mv->tensor].name, move_kind_name(mv->kind));
        }
    }
    assert_no_boundary_moves(s);

    /* Per phase, each device sends one x tile (or dx accumulator) and one
     * w tile (or dw accumulator) per step transition. */
    long x_tile = (m / p) * (k / p) * (long)sizeof(float);
    long w_tile = (k / p) * (n / p) * (long)sizeof(float);
    long per_device = NCOMPUTE * (p - 1) * (x_tile + w_tile);
    for (int d = 0; d < ndev; ++d) {
        assert_int_equal(s->pred_bytes[PRIME_BYTES_SHIFT][d], per_device);
        assert_int_equal(s->pred_bytes[PRIME_BYTES_COLLECTIVE][d], 0);
        assert_int_equal(s->pred_bytes[PRIME_BYTES_REDIST][d], 0);
    }

    /* Every tensor is stored once. */
    assert_int_equal(home_replication(s, "x"), 1);
    assert_int_equal(home_replication(s, "w"), 1);
    run_free(r);
}

static void test_square_2x2(void **state) {
    (void)state;
    check_square(2, 96, 64, 80);
}

static void test_square_4x4(void **state) {
    (void)state;
    check_square(4, 96, 64, 80);
}

/* ------------------------------------------------------------------ */
/* Megatron row and column, data parallel */

static void test_row_forward_all_reduce(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "row", "d: 4", 96, 64, 80);
    assert_one_collective(r->s, PHASE_FWD, "y");
    assert_int_equal(move_count(r->s), 0);
    assert_no_boundary_moves(r->s);
    run_free(r);
}

static void test_column_backward_all_reduce(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "column", "d: 4", 96, 64, 80);
    assert_one_collective(r->s, PHASE_BWD, "dx");
    assert_int_equal(move_count(r->s), 0);
    assert_no_boundary_moves(r->s);
    run_free(r);
}

static void test_data_gradient_all_reduce(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "data", "d: 4", 96, 64, 80);
    assert_one_collective(r->s, PHASE_GRAD, "dw");
    assert_int_equal(move_count(r->s), 0);
    assert_no_boundary_moves(r->s);
    /* Data parallel replicates the weight on every device. */
    assert_int_equal(home_replication(r->s, "w"), 4);
    assert_int_equal(home_replication(r->s, "x"), 1);
    run_free(r);
}

/* ------------------------------------------------------------------ */
/* ring */

static void test_ring_shifts_w(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "ring", "d: 4", 96, 64, 80);
    const Schedule *s = r->s;
    assert_int_equal(collective_count(s), 0);
    const PhaseSched *fwd = phase_of(s, PHASE_FWD);
    int w = tensor_id(s, "w");
    assert_int_equal(fwd->moves.count, 3);
    for (int j = 0; j < fwd->moves.count; ++j) {
        const Move *mv = fwd->moves.items[j];
        assert_int_equal(mv->tensor, w);
        assert_int_equal(mv->kind, MOVE_SHIFT);
        assert_int_equal(mv->is_acc, 0);
    }
    for (int i = 0; i < NCOMPUTE; ++i) {
        const PhaseSched *ph = phase_of(s, compute_phases[i]);
        for (int j = 0; j < ph->moves.count; ++j)
            assert_int_equal(((const Move *)ph->moves.items[j])->kind, MOVE_SHIFT);
    }
    assert_int_equal(home_replication(s, "x"), 1);
    assert_int_equal(home_replication(s, "w"), 1);
    run_free(r);
}

/* The gradient can sweep so that the travelling dw accumulators end where
 * w lives: no redistribution at any boundary. */
static void test_ring_needs_no_redistribution(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "ring", "d: 4", 96, 64, 80);
    assert_no_boundary_moves(r->s);
    for (int d = 0; d < 4; ++d)
        assert_int_equal(r->s->pred_bytes[PRIME_BYTES_REDIST][d], 0);
    run_free(r);
}

/* ------------------------------------------------------------------ */
/* replicate */

static void test_replicate_stores_everything_everywhere(void **state) {
    (void)state;
    Run *r = &current;
    run_matmul(r, "replicate", "d: 4", 96, 64, 80);
    const Schedule *s = r->s;
    assert_int_equal(home_replication(s, "x"), 4);
    assert_int_equal(home_replication(s, "w"), 4);
    assert_int_equal(phase_of(s, PHASE_FWD)->replication, 4);
    assert_int_equal(collective_count(s), 0);
    assert_int_equal(move_count(s), 0);
    assert_no_boundary_moves(s);
    for (int d = 0; d < 4; ++d)
        for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
            assert_int_equal(s->pred_bytes[kind][d], 0);
    run_free(r);
}

/* ------------------------------------------------------------------ */
/* coverage */

static void test_double_count_has_no_schedule(void **state) {
    (void)state;
    Run *r = &current;
    /* Two steps, no step in the DSI: each device adds its k slice twice. */
    run_source(r,
               "partition twice of matmul on mesh(d: P) steps(t: 2) {\n"
               "    k = d;\n"
               "}\n"
               "model t {\n"
               "    param m = 8, k = 8, n = 8;\n"
               "    mesh(d: 2);\n"
               "    input x[m, k];\n"
               "    weight w[k, n];\n"
               "    y = matmul(x, w) use twice;\n"
               "}\n",
               "partition");
    assert_int_equal(r->ok, 1);
    assert_int_equal(r->c.sink.error_count, 0);
    assert_int_equal(r->c.module.models.count, 1);
    const Model *model = r->c.module.models.items[0];
    assert_null(schedule_build(r->c.arena, &r->c.sink, model));
    assert_true(r->c.sink.error_count >= 1);
    int found = 0;
    for (int i = 0; i < r->c.sink.count; ++i)
        if (r->c.sink.items[i].level == DIAG_ERROR &&
            strstr(r->c.sink.items[i].message, "double counts"))
            found = 1;
    assert_true(found);
    run_free(r);

    /* Through the whole pipeline: it fails and keeps no schedule. */
    run_source(r,
               "partition twice of matmul on mesh(d: P) steps(t: 2) {\n"
               "    k = d;\n"
               "}\n"
               "model t {\n"
               "    param m = 8, k = 8, n = 8;\n"
               "    mesh(d: 2);\n"
               "    input x[m, k];\n"
               "    weight w[k, n];\n"
               "    y = matmul(x, w) use twice;\n"
               "}\n",
               "schedule");
    assert_int_equal(r->ok, 0);
    assert_int_equal(r->c.schedules.count, 0);
    assert_non_null(strstr(r->c.sink.items[0].message, "double counts"));
    run_free(r);
}

/* ------------------------------------------------------------------ */
/* transposition */

/* The schedule of a partition bound to the swapped axes of a square mesh
 * equals the schedule with the other binding, transposed: the same bytes
 * and peak memory on each device and the same step time. */
static void check_transposed(const char *use, const char *swapped, const char *mesh, long m, long k,
                             long n) {
    Run a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run_matmul(&a, use, mesh, m, k, n);
    run_matmul(&b, swapped, mesh, m, k, n);
    const Schedule *t = schedule_transpose(a.c.arena, a.s, b.s->model);
    int ndev = b.s->model->mesh.ndev;
    for (int kind = 0; kind < PRIME_BYTES_KIND_COUNT; ++kind)
        for (int d = 0; d < ndev; ++d)
            assert_int_equal(t->pred_bytes[kind][d], b.s->pred_bytes[kind][d]);
    for (int d = 0; d < ndev; ++d)
        assert_int_equal(t->pred_peak[d], b.s->pred_peak[d]);
    assert_int_equal(t->phases.count, b.s->phases.count);
    for (int p = 0; p < t->phases.count; ++p) {
        const PhaseSched *x = t->phases.items[p], *y = b.s->phases.items[p];
        for (int d = 0; d < ndev; ++d)
            assert_int_equal(x->nactions[d], y->nactions[d]);
    }
    Profile prof;
    char err[256];
    assert_true(profile_load("v100", &prof, err, sizeof err));
    CostOptions opt;
    cost_options_default(&opt);
    opt.devices_per_node = 2; /* rows of the mesh on different nodes */
    CostReport ra, rb, rt;
    cost_schedule(a.s, &prof, &opt, a.c.arena, &ra);
    cost_schedule(b.s, &prof, &opt, b.c.arena, &rb);
    cost_schedule(t, &prof, &opt, a.c.arena, &rt);
    assert_true(fabs(rt.step_us - rb.step_us) <= 1e-9 * rb.step_us);
    assert_int_equal(rt.collective_bytes, rb.collective_bytes);
    assert_int_equal(rt.p2p_bytes, rb.p2p_bytes);
    /* Not a tautology: the links differ between the two bindings. */
    printf("%s: %.3f us, swapped %s: %.3f us\n", use, ra.step_us, swapped, rb.step_us);
    run_free(&a);
    run_free(&b);
}

static void test_transpose(void **state) {
    (void)state;
    check_transposed("square(i: i, j: j)", "square(i: j, j: i)", "i: 2, j: 2", 96, 64, 80);
    check_transposed("square_skew(i: i, j: j)", "square_skew(i: j, j: i)", "i: 4, j: 4", 96, 64,
                     80);
    check_transposed("column(d: i)", "column(d: j)", "i: 2, j: 2", 96, 64, 80);
    check_transposed("row(d: j)", "row(d: i)", "i: 4, j: 4", 96, 64, 80);
    check_transposed("ring(d: i)", "ring(d: j)", "i: 4, j: 4", 96, 64, 80);
    check_transposed("data(d: i)", "data(d: j)", "i: 2, j: 2", 96, 64, 80);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_square_2x2, test_teardown),
        cmocka_unit_test_teardown(test_square_4x4, test_teardown),
        cmocka_unit_test_teardown(test_row_forward_all_reduce, test_teardown),
        cmocka_unit_test_teardown(test_column_backward_all_reduce, test_teardown),
        cmocka_unit_test_teardown(test_data_gradient_all_reduce, test_teardown),
        cmocka_unit_test_teardown(test_ring_shifts_w, test_teardown),
        cmocka_unit_test_teardown(test_ring_needs_no_redistribution, test_teardown),
        cmocka_unit_test_teardown(test_replicate_stores_everything_everywhere, test_teardown),
        cmocka_unit_test_teardown(test_double_count_has_no_schedule, test_teardown),
        cmocka_unit_test_teardown(test_transpose, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
