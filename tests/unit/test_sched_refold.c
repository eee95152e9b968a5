/*
 * test_sched_refold.c — the predictions after fusion across instances.
 *
 * The kernels pass rewrites the actions of the fused groups' phases and
 * predicts again by folding those phases alone (sched_predict_again):
 * the phases after them keep their peaks, moved by the bytes in use the
 * rewritten phases no longer hold. For every model of every file named
 * on the command line (FILE, or FILE@MODEL), the pipeline runs through
 * "kernels", and the predictions it left must equal those of
 * sched_predict over the rewritten lists: every phase's peak and bytes
 * in use at its start per rank, and every rank's predicted bytes per kind
 * and peak. The test checks that it met fused groups.
 *
 * It also checks what the emitter's kernel key relies on
 * (emit_kernels.c): the backward and gradient phases of every instance of
 * an operator, for the same input, share one derived expression, so that
 * the copies of a repeated layer share their kernels' keys.
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

#include "kernel_fuse.h"
#include "pipeline.h"
#include "sched_internal.h"

static int nfiles;
static char **files;

/* What the runs compared, over all files. */
static int nschedules, ngroups, nshared;

static Compilation comp;
static int active;
static char file_name[1024];

static void release(void) {
    if (active)
        compilation_free(&comp);
    active = 0;
}

/* The predictions of s, copied: per phase and rank the peak and the
 * start, then per kind and rank the bytes, then per rank the peak. */
static long *predictions(const Schedule *s) {
    int ndev = s->model->mesh.ndev, n = s->phases.count;
    long *v = malloc(sizeof(long) * (size_t)ndev * ((size_t)2 * n + PRIME_BYTES_KIND_COUNT + 1));
    assert_non_null(v);
    long *w = v;
    for (int p = 0; p < n; ++p) {
        const PhaseSched *ph = s->phases.items[p];
        assert_non_null(ph->start);
        for (int d = 0; d < ndev; ++d) {
            *w++ = ph->peak[d];
            *w++ = ph->start[d];
        }
    }
    for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
        for (int d = 0; d < ndev; ++d)
            *w++ = s->pred_bytes[k][d];
    for (int d = 0; d < ndev; ++d)
        *w++ = s->pred_peak[d];
    return v;
}

static void compare_predictions(const char *path, Schedule *s) {
    int ndev = s->model->mesh.ndev, n = s->phases.count;
    long *again = predictions(s);
    sched_predict(s, comp.arena);
    long *whole = predictions(s);
    size_t count = (size_t)ndev * ((size_t)2 * n + PRIME_BYTES_KIND_COUNT + 1);
    for (size_t i = 0; i < count; ++i)
        if (again[i] != whole[i])
            fail_msg("%s: model %s: prediction %zu (of %zu) is %ld after fusion, %ld predicted "
                     "anew",
                     path, s->model->name, i, count, again[i], whole[i]);
    free(again);
    free(whole);
}

/* Phases of two instances of one operator, for one input, share their
 * expression. */
static void check_shared_exprs(const Schedule *s) {
    for (int p = 0; p < s->phases.count; ++p) {
        const PhaseSched *x = s->phases.items[p];
        if (x->kind != PHASE_BWD && x->kind != PHASE_GRAD)
            continue;
        for (int q = p + 1; q < s->phases.count; ++q) {
            const PhaseSched *y = s->phases.items[q];
            if ((y->kind != PHASE_BWD && y->kind != PHASE_GRAD) || y->inst == x->inst ||
                s->model->instances[y->inst].op != s->model->instances[x->inst].op ||
                y->wrt != x->wrt)
                continue;
            assert_ptr_equal(x->expr, y->expr);
            nshared++;
        }
    }
}

static void check_file(const char *path) {
    const char *at = strchr(path, '@');
    size_t len = at ? (size_t)(at - path) : strlen(path);
    assert_true(len < sizeof file_name);
    memcpy(file_name, path, len);
    file_name[len] = 0;
    compilation_init(&comp, file_name, NULL);
    active = 1;
    comp.model_name = at ? at + 1 : NULL;
    comp.sink.out = NULL; /* diagnostics stored, not printed */
    assert_true(pipeline_run(&comp, "kernels"));
    for (int i = 0; i < comp.schedules.count; ++i) {
        Schedule *s = comp.schedules.items[i];
        assert_non_null(s->fusion);
        assert_true(s->fusion->applied);
        ngroups += s->fusion->ngroups;
        check_shared_exprs(s);
        compare_predictions(path, s);
        nschedules++;
    }
    release();
}

static void test_files(void **state) {
    (void)state;
    for (int i = 0; i < nfiles; ++i)
        check_file(files[i]);
}

/* What the runs met: schedules, fused groups and shared expressions. */
static void test_coverage(void **state) {
    (void)state;
    printf("compared %d schedules with %d fused groups; %d pairs of phases share their "
           "expression\n",
           nschedules, ngroups, nshared);
    assert_true(nschedules >= 10);
    assert_true(ngroups >= 10);
    assert_true(nshared >= 10);
}

static int teardown(void **state) {
    (void)state;
    release();
    return 0;
}

int main(int argc, char **argv) {
    nfiles = argc - 1;
    files = argv + 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_files, teardown),
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
