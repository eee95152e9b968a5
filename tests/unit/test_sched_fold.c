/*
 * test_sched_fold.c — a schedule built for `check` alone
 * (schedule_check_from: every action folded into the predictions as it is
 * made, no action list kept) against the schedule with its action lists
 * (schedule_build_from, whose predictions interpret the kept lists).
 *
 * For every model of every file named on the command line (FILE, or
 * FILE@MODEL for one of its models: the examples and the golden check
 * inputs), and for a few models written here
 * (square, ring and all-reduce meshes larger than the examples'), the
 * pipeline runs through "schedule" twice, and the two schedules must
 * agree on every phase's action count, moves, redistributions and
 * collectives per rank, every phase's predicted peak per rank, and the
 * predicted bytes (per kind) and peak of every rank; the folded one keeps
 * no list. Some of the models' all-reduces become reduce-scatters after
 * the phase that made them (which the fold corrects in its bytes): the
 * test checks that it met some.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline.h"
#include "sched_test.h"
#include "schedule.h"

static int nfiles;
static char **files;

/* What the runs compared, over all files. */
static int nschedules, nreduce_scatter, nfolded_actions_checked;

static Compilation kept, folded;
static int kept_active, folded_active;

static void release(void) {
    if (kept_active)
        compilation_free(&kept);
    if (folded_active)
        compilation_free(&folded);
    kept_active = folded_active = 0;
}

/* The file names of the two compilations (they keep a pointer). */
static char kept_file[1024], folded_file[1024];

static void compare_schedules(const char *path, const Schedule *a, const Schedule *b) {
    const char *name = a->model->name;
    assert_string_equal(name, b->model->name);
    assert_int_equal(a->folded, 0);
    /* A staged model keeps its lists in check too (schedule_check_from). */
    assert_int_equal(b->folded, a->model->nstages < 2);
    int ndev = a->model->mesh.ndev;
    assert_int_equal(ndev, b->model->mesh.ndev);
    assert_int_equal(a->ntensors, b->ntensors);
    assert_int_equal(a->phases.count, b->phases.count);
    for (int p = 0; p < a->phases.count; ++p) {
        const PhaseSched *x = a->phases.items[p], *y = b->phases.items[p];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->reversed, y->reversed);
        assert_int_equal(x->moves.count, y->moves.count);
        assert_int_equal(x->boundary.count, y->boundary.count);
        assert_int_equal(x->collectives.count, y->collectives.count);
        for (int k = 0; k < x->collectives.count; ++k) {
            const Collective *cx = x->collectives.items[k], *cy = y->collectives.items[k];
            assert_int_equal(cx->reduce_scatter, cy->reduce_scatter);
            assert_int_equal(cx->bytes, cy->bytes);
            nreduce_scatter += cx->reduce_scatter;
        }
        for (int d = 0; d < ndev; ++d) {
            if (x->nactions[d] != y->nactions[d] || x->peak[d] != y->peak[d])
                fail_msg("%s: model %s, phase %d, rank %d: %d actions and peak %ld kept, %d "
                         "actions and peak %ld folded",
                         path, name, p, d, x->nactions[d], x->peak[d], y->nactions[d], y->peak[d]);
            if (b->folded) {
                assert_null(y->actions[d]);
                nfolded_actions_checked += y->nactions[d];
            }
        }
    }
    for (int d = 0; d < ndev; ++d) {
        for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
            if (a->pred_bytes[k][d] != b->pred_bytes[k][d])
                fail_msg("%s: model %s, rank %d: %ld bytes of kind %d kept, %ld folded", path, name,
                         d, a->pred_bytes[k][d], k, b->pred_bytes[k][d]);
        if (a->pred_peak[d] != b->pred_peak[d])
            fail_msg("%s: model %s, rank %d: peak %ld kept, %ld folded", path, name, d,
                     a->pred_peak[d], b->pred_peak[d]);
    }
    nschedules++;
}

static void compare_file(const char *path) {
    int ok_kept = sched_test_compile(&kept, kept_file, sizeof kept_file, path, 0);
    kept_active = 1;
    int ok_folded = sched_test_compile(&folded, folded_file, sizeof folded_file, path, 1);
    folded_active = 1;
    /* A file the schedule refuses is refused alike. */
    assert_int_equal(ok_kept, ok_folded);
    assert_int_equal(kept.sink.error_count, folded.sink.error_count);
    assert_int_equal(kept.schedules.count, folded.schedules.count);
    for (int i = 0; i < kept.schedules.count; ++i)
        compare_schedules(path, kept.schedules.items[i], folded.schedules.items[i]);
    release();
}

static void test_files(void **state) {
    (void)state;
    for (int i = 0; i < nfiles; ++i)
        compare_file(files[i]);
}

/* Meshes larger than the examples': the square grid on 8x8, a ring of 32,
 * the replicated all-reduce on 4x4, and a layer of the square plan. */
static const char *const WRITTEN[] = {
    "model sq { param m = 256, k = 256, n = 256; mesh(i: 8, j: 8);\n"
    "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use square; }\n",
    "model big { param m = 32, k = 64, n = 32; mesh(d: 32);\n"
    "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use ring; }\n",
    "model two { param m = 64, k = 64, n = 64, p = 64; mesh(i: 4, j: 4);\n"
    "    input x[m, k]; weight w[k, n]; weight v[n, p];\n"
    "    h = matmul(x, w) use square; y = matmul(h, v) use square; }\n",
};

static void test_written(void **state) {
    (void)state;
    char dir[] = "/tmp/primec-test-fold-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/model.prime", dir);
    for (size_t i = 0; i < sizeof WRITTEN / sizeof WRITTEN[0]; ++i) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_true(fputs(WRITTEN[i], f) >= 0);
        assert_int_equal(fclose(f), 0);
        int before = nschedules;
        compare_file(path);
        assert_int_equal(nschedules, before + 1);
    }
    unlink(path);
    rmdir(dir);
}

/* What the runs met: schedules, actions, and reduce-scatters. */
static void test_coverage(void **state) {
    (void)state;
    printf("compared %d schedules, %d actions, %d reduce-scatters\n", nschedules,
           nfolded_actions_checked, nreduce_scatter);
    assert_true(nschedules >= 20);
    assert_true(nreduce_scatter > 0);
}

static int teardown(void **state) {
    (void)state;
    release();
    return 0;
}

int main(int argc, char **argv) {
    /* The fold of every rank's actions; one replica's simulation, which
     * `check` uses where it can, is compared with it by schedule/orbit. */
    setenv("PRIMEC_FULL_SIMULATION", "1", 1);
    nfiles = argc - 1;
    files = argv + 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_files, teardown),
        cmocka_unit_test_teardown(test_written, teardown),
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
