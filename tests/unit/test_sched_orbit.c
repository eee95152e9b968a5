/*
 * test_sched_orbit.c — `check` from one replica's simulation
 * (sched_orbit.c) against the simulation of every rank.
 *
 * For every model of every file named on the command line (FILE, or
 * FILE@MODEL), and for models written here (replicas on larger meshes,
 * replica axes that are not the first, a proof that must fail), the
 * pipeline runs through "schedule" for `check` twice: with
 * PRIMEC_FULL_SIMULATION set (every rank simulated) and without. The two
 * must agree on the diagnostics (count and text), the storage tensors,
 * every phase's kind, sweep order, replication and accumulator counts, its
 * moves and redistributions (kind, tensor, step, shift, bytes, transfer
 * count, reason) in order, its collectives as a set (tile, group, slots,
 * bytes, kind), every phase's action count and peak per rank, and every
 * rank's predicted bytes per kind and peak. The test requires that the
 * orbit was used where it must be (the models with replicas) and not where
 * its proof must fail.
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
static int nschedules, norbit, nranks;

static Compilation full, orbit;
static int full_active, orbit_active;

static void release(void) {
    if (full_active)
        compilation_free(&full);
    if (orbit_active)
        compilation_free(&orbit);
    full_active = orbit_active = 0;
}

static char full_file[1024], orbit_file[1024];

/* check's schedule of path (sched_test_compile), every rank simulated
 * (whole) or one replica where the replica axes are proven. */
static int run(Compilation *c, char *file, const char *path, int whole) {
    if (whole)
        setenv("PRIMEC_FULL_SIMULATION", "1", 1);
    else
        unsetenv("PRIMEC_FULL_SIMULATION");
    int ok = sched_test_compile(c, file, sizeof full_file, path, 1);
    unsetenv("PRIMEC_FULL_SIMULATION");
    return ok;
}

static void compare_moves(const char *what, const PtrVec *x, const PtrVec *y, int naxes) {
    assert_int_equal(x->count, y->count);
    for (int k = 0; k < x->count; ++k) {
        const Move *a = x->items[k], *b = y->items[k];
        if (a->tensor != b->tensor || a->step != b->step || a->kind != b->kind ||
            a->bytes != b->bytes || a->ntransfers != b->ntransfers || a->is_acc != b->is_acc ||
            a->from_tensor != b->from_tensor ||
            (a->kind == MOVE_SHIFT &&
             memcmp(a->delta, b->delta, sizeof(long) * (size_t)naxes) != 0))
            fail_msg("%s %d: tensor %d/%d step %ld/%ld kind %d/%d bytes %ld/%ld transfers %d/%d "
                     "shift (%ld, %ld, ...)/(%ld, %ld, ...)",
                     what, k, a->tensor, b->tensor, a->step, b->step, a->kind, b->kind, a->bytes,
                     b->bytes, a->ntransfers, b->ntransfers, a->delta[0], a->delta[1], b->delta[0],
                     b->delta[1]);
        if ((a->reason == NULL) != (b->reason == NULL) ||
            (a->reason && strcmp(a->reason, b->reason) != 0))
            fail_msg("%s %d: reason '%s' / '%s'", what, k, a->reason ? a->reason : "",
                     b->reason ? b->reason : "");
        if ((a->pattern == NULL) != (b->pattern == NULL) ||
            (a->pattern && strcmp(a->pattern, b->pattern) != 0))
            fail_msg("%s %d: pattern '%s' / '%s'", what, k, a->pattern ? a->pattern : "",
                     b->pattern ? b->pattern : "");
    }
}

static int cmp_collective(const void *x, const void *y) {
    const Collective *a = *(const Collective *const *)x, *b = *(const Collective *const *)y;
    if (a->tensor != b->tensor)
        return a->tensor < b->tensor ? -1 : 1;
    if (a->tile != b->tile)
        return a->tile < b->tile ? -1 : 1;
    if (a->gsize != b->gsize)
        return a->gsize < b->gsize ? -1 : 1;
    return memcmp(a->group, b->group, sizeof(int) * (size_t)a->gsize);
}

static void compare_collectives(const PtrVec *x, const PtrVec *y) {
    assert_int_equal(x->count, y->count);
    int n = x->count;
    if (n == 0)
        return;
    const Collective **a = malloc(sizeof *a * (size_t)(n + 1));
    const Collective **b = malloc(sizeof *b * (size_t)(n + 1));
    memcpy(a, x->items, sizeof *a * (size_t)n);
    memcpy(b, y->items, sizeof *b * (size_t)n);
    qsort(a, (size_t)n, sizeof *a, cmp_collective);
    qsort(b, (size_t)n, sizeof *b, cmp_collective);
    for (int k = 0; k < n; ++k) {
        if (cmp_collective(&a[k], &b[k]) != 0 || a[k]->elems != b[k]->elems ||
            a[k]->bytes != b[k]->bytes || a[k]->reduce_scatter != b[k]->reduce_scatter ||
            a[k]->allgather != b[k]->allgather ||
            memcmp(a[k]->slots, b[k]->slots, sizeof(int) * (size_t)a[k]->gsize) != 0)
            fail_msg("collective %d: tensor %d/%d tile %ld/%ld of %d/%d members, bytes %ld/%ld", k,
                     a[k]->tensor, b[k]->tensor, a[k]->tile, b[k]->tile, a[k]->gsize, b[k]->gsize,
                     a[k]->bytes, b[k]->bytes);
    }
    free(a);
    free(b);
}

static void compare_schedules(const char *path, const Schedule *a, const Schedule *b) {
    const char *name = a->model->name;
    assert_string_equal(name, b->model->name);
    assert_int_equal(a->orbit_replicas, 0);
    int ndev = a->model->mesh.ndev;
    assert_int_equal(a->ntensors, b->ntensors);
    for (int t = 0; t < a->ntensors; ++t) {
        const SchedTensor *x = &a->tensors[t], *y = &b->tensors[t];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->ntiles, y->ntiles);
        assert_int_equal(x->tile_elems, y->tile_elems);
        assert_int_equal(x->max_slots, y->max_slots);
        assert_memory_equal(x->shape, y->shape, sizeof x->shape);
        assert_memory_equal(x->nslices, y->nslices, sizeof x->nslices);
    }
    assert_int_equal(a->phases.count, b->phases.count);
    for (int p = 0; p < a->phases.count; ++p) {
        const PhaseSched *x = a->phases.items[p], *y = b->phases.items[p];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->inst, y->inst);
        assert_int_equal(x->reversed, y->reversed);
        assert_int_equal(x->replication, y->replication);
        assert_int_equal(x->nlocal_acc, y->nlocal_acc);
        assert_int_equal(x->ntravel_acc, y->ntravel_acc);
        compare_moves("move", &x->moves, &y->moves, a->model->mesh.naxes);
        compare_moves("redistribution", &x->boundary, &y->boundary, a->model->mesh.naxes);
        compare_collectives(&x->collectives, &y->collectives);
        for (int d = 0; d < ndev; ++d) {
            int ra = sched_rank_row(a, d), rb = sched_rank_row(b, d);
            if (x->nactions[ra] != y->nactions[rb] || x->peak[ra] != y->peak[rb])
                fail_msg("%s: model %s, phase %d, rank %d: %d actions and peak %ld in full, %d "
                         "actions and peak %ld per orbit",
                         path, name, p, d, x->nactions[ra], x->peak[ra], y->nactions[rb],
                         y->peak[rb]);
        }
    }
    for (int d = 0; d < ndev; ++d) {
        for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k)
            if (a->pred_bytes[k][d] != b->pred_bytes[k][d])
                fail_msg("%s: model %s, rank %d: %ld bytes of kind %d in full, %ld per orbit", path,
                         name, d, a->pred_bytes[k][d], k, b->pred_bytes[k][d]);
        if (a->pred_peak[d] != b->pred_peak[d])
            fail_msg("%s: model %s, rank %d: peak %ld in full, %ld per orbit", path, name, d,
                     a->pred_peak[d], b->pred_peak[d]);
    }
    nschedules++;
    nranks += ndev;
    norbit += b->orbit_replicas > 0;
}

/* Returns how many of the file's schedules ran per orbit. */
static int compare_file(const char *path) {
    int before = norbit;
    int ok_full = run(&full, full_file, path, 1);
    full_active = 1;
    int ok_orbit = run(&orbit, orbit_file, path, 0);
    orbit_active = 1;
    assert_int_equal(ok_full, ok_orbit);
    assert_int_equal(full.sink.error_count, orbit.sink.error_count);
    assert_int_equal(full.sink.warning_count, orbit.sink.warning_count);
    assert_int_equal(full.sink.count, orbit.sink.count);
    for (int i = 0; i < full.sink.count; ++i)
        assert_string_equal(full.sink.items[i].message, orbit.sink.items[i].message);
    assert_int_equal(full.schedules.count, orbit.schedules.count);
    for (int i = 0; i < full.schedules.count; ++i)
        compare_schedules(path, full.schedules.items[i], orbit.schedules.items[i]);
    release();
    return norbit - before;
}

static void test_files(void **state) {
    (void)state;
    for (int i = 0; i < nfiles; ++i)
        compare_file(files[i]);
}

/* Written models: whether each must run per orbit. */
static const struct {
    const char *text;
    int orbit;
} WRITTEN[] = {
    /* Data parallelism on 16 replicas of a 2x2 square grid. */
    {"partition dpsq of matmul on mesh(r: R, i: P, j: P) steps(t: P) {\n"
     "    m = (r, i); k = (i + j + t) % P; n = j; }\n"
     "model sqdp { param m = 512, k = 64, n = 64; mesh(r: 16, i: 2, j: 2);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use dpsq; }\n",
     1},
    /* The replica axis last: rank i * R + r. */
    {"partition dplast of matmul on mesh(d: D, r: R) { m = (r, d); }\n"
     "model last { param m = 64, k = 32, n = 32; mesh(d: 4, r: 4);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use dplast; }\n",
     1},
    /* Two products, the batch split over 8 replicas of a ring of 4. */
    {"partition dpring of matmul on mesh(r: R, d: D) steps(t: D) {\n"
     "    m = (r, d); k = (d + t) % D; }\n"
     "partition dpcol of matmul on mesh(r: R, d: D) { m = r; n = d; }\n"
     "model two { param m = 256, k = 64, n = 64, p = 64; mesh(r: 8, d: 4);\n"
     "    input x[m, k]; weight w[k, n]; weight v[n, p];\n"
     "    h = matmul(x, w) use dpring; y = matmul(h, v) use dpcol; }\n",
     1},
    /* The reduction split over r with the output: a tile of replica r
     * gets only its block; the proof fails, the full simulation reports. */
    {"partition diag of matmul on mesh(r: R) { m = r; k = r; }\n"
     "model bad { param m = 8, k = 8, n = 8; mesh(r: 2);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use diag; }\n",
     0},
    /* m = (d, r): not a block split over r, but one over d (block d of
     * R slices), which is the replica axis. */
    {"partition minor of matmul on mesh(r: R, d: D) { m = (d, r); }\n"
     "model minor { param m = 64, k = 32, n = 32; mesh(r: 2, d: 4);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use minor; }\n",
     1},
    /* Two replica axes, the second and the third (rank (a * R + r) * D +
     * d): the batch over r, the columns over d, a ring over a. */
    {"partition three of matmul on mesh(a: A, r: R, d: D) steps(t: A) {\n"
     "    m = (r, a); n = d; k = (a + t) % A; }\n"
     "model three { param m = 64, k = 32, n = 32; mesh(a: 2, r: 2, d: 2);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use three; }\n",
     1},
    /* A ring (n = (d + t) % D): no replica axis. */
    {"model ring { param m = 64, k = 32, n = 64; mesh(d: 4);\n"
     "    input x[m, k]; weight w[k, n]; y = matmul(x, w) use ring; }\n",
     0},
};

static void test_written(void **state) {
    (void)state;
    char dir[] = "/tmp/primec-test-orbit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/model.prime", dir);
    for (size_t i = 0; i < sizeof WRITTEN / sizeof WRITTEN[0]; ++i) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_true(fputs(WRITTEN[i].text, f) >= 0);
        assert_int_equal(fclose(f), 0);
        int before = nschedules;
        int used = compare_file(path);
        if (used != WRITTEN[i].orbit)
            fail_msg("written model %zu: %s per orbit", i, used ? "ran" : "did not run");
        (void)before;
    }
    unlink(path);
    rmdir(dir);
}

/* Every matmul partition of the stdlib on 1-D meshes of 1 to 16 devices
 * and on 2x2 and 4x4: data, column and row split a dimension in blocks of
 * d (row's reduction too: its all-reduce joins every device), replicate
 * splits none, ring and the square grids rotate theirs. */
static void test_stdlib_partitions(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int orbit;
    } parts[] = {{"replicate", 0}, {"data", 1},   {"column", 1},     {"row", 1},
                 {"ring", 0},      {"square", 0}, {"square_skew", 0}};
    static const char *const meshes[] = {"d: 1",  "d: 2",       "d: 4",      "d: 8",
                                         "d: 16", "i: 2, j: 2", "i: 4, j: 4"};
    char dir[] = "/tmp/primec-test-orbit-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64], src[512];
    snprintf(path, sizeof path, "%s/model.prime", dir);
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; ++p) {
        int square = strncmp(parts[p].name, "square", 6) == 0;
        for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; ++m) {
            if (square != (meshes[m][0] == 'i'))
                continue;
            snprintf(src, sizeof src,
                     "model mm {\n    param m = 96, k = 48, n = 144;\n    mesh(%s);\n"
                     "    input x[m, k];\n    weight w[k, n];\n    y = matmul(x, w) use %s;\n}\n",
                     meshes[m], parts[p].name);
            FILE *f = fopen(path, "w");
            assert_non_null(f);
            assert_true(fputs(src, f) >= 0);
            assert_int_equal(fclose(f), 0);
            int want = parts[p].orbit && strcmp(meshes[m], "d: 1") != 0;
            int used = compare_file(path);
            if (used != want)
                fail_msg("%s on mesh(%s): %s per orbit", parts[p].name, meshes[m],
                         used ? "ran" : "did not run");
        }
    }
    unlink(path);
    rmdir(dir);
}

static void test_coverage(void **state) {
    (void)state;
    printf("compared %d schedules (%d ranks), %d per orbit\n", nschedules, nranks, norbit);
    assert_true(nschedules >= 20);
    assert_true(norbit >= 20);
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
        cmocka_unit_test_teardown(test_written, teardown),
        cmocka_unit_test_teardown(test_stdlib_partitions, teardown),
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
