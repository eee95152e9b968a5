/*
 * test_kernel_fuse_rows.c — the kernels pass fuses rows of any length
 * (compiler/kernel_fuse.h), on the bias, residual add and layer norm of
 * tests/golden/dump/kernels-norm-long.prime (argv[1]) at several hidden
 * sizes h (--param h=...):
 *   - at h = 4096, 5000 and 8192 (past the 4096 a CUDA thread keeps, and
 *     past the 4096 the pass took before) the same four groups form, of
 *     the same members, with inner extent h and the same rows kept;
 *   - at h = 200000 the column sums' accumulators pass half of
 *     KFUSE_ROW_BYTES (they are kernels of their own) and the rows the C
 *     kernel would keep (two rows of 800,000 bytes in the norm's
 *     backward) pass KFUSE_ROW_BYTES: the last such row is stored
 *     instead, the other one is still a row; every group's rows fit;
 *   - the cost model prices every group as one kernel at every size
 *     (cost_fused_kernel: one launch, the members' FLOPs).
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

#include "cost.h"
#include "cost_kernel.h"
#include "kernel_fuse.h"
#include "kernel_ir.h"
#include "pipeline.h"
#include "schedule.h"

static const char *case_file; /* tests/golden/dump/kernels-norm-long.prime */

/* The case's schedule at hidden size h, straight from the schedule pass. */
static const Schedule *compile(Compilation *c, ParamOverride *h_param, long h) {
    *h_param = (ParamOverride){"h", 1, h};
    compilation_init(c, case_file, NULL);
    c->sink.out = NULL;
    c->model_name = "m";
    c->nparams = 1;
    c->params = h_param;
    assert_int_equal(pipeline_run(c, "schedule"), 1);
    assert_int_equal(c->schedules.count, 1);
    return c->schedules.items[0];
}

/* The bytes of the rows group g's C kernel keeps, counted from the
 * members' kernel IR: a float per element of an elementwise row that is
 * not stored, one per reduction, a double per element of a column sum. */
static long kept_bytes(const Schedule *s, const FuseGroup *g) {
    Kernel *ks = kernel_fuse_members(s, g);
    long e = ks[0].extent[g->inner], n = 0;
    for (int j = 0; j < g->nmembers; ++j) {
        if (g->cols[j])
            n += 8 * e;
        else if (!g->stored[j])
            n += ks[j].nodes[0].loop.nreduce ? 4 : 4 * e;
    }
    free(ks);
    return n;
}

/* The groups of the case at h: members and stored flags, as a string
 * ("4:ssss|2:rs|..." one entry per group: member count, then s or r per
 * member), and the checks every size shares. */
static void groups_at(long h, char *out, size_t cap, long *max_kept) {
    Compilation c;
    ParamOverride param;
    const Schedule *s = compile(&c, &param, h);
    FusePlan *plan = kernel_fuse_plan(c.arena, s, NULL);
    assert_int_equal(plan->ngroups, 4);
    size_t n = 0;
    *max_kept = 0;
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        Kernel *ks = kernel_fuse_members(s, g);
        assert_int_equal(ks[0].extent[g->inner], h);
        free(ks);
        long kept = kept_bytes(s, g);
        assert_true(kept <= KFUSE_ROW_BYTES);
        if (kept > *max_kept)
            *max_kept = kept;
        /* One kernel: one launch, whatever the row length. */
        KernelCost kc = cost_fused_kernel(s, g, NULL, 4);
        double flops = 0;
        for (int j = 0; j < g->nmembers; ++j)
            flops += cost_kernel_flops(s, s->phases.items[g->phase[j]]);
        assert_true(kc.flops == flops);
        n += (size_t)snprintf(out + n, cap - n, "%s%d:", gi ? "|" : "", g->nmembers);
        for (int j = 0; j < g->nmembers; ++j)
            n += (size_t)snprintf(out + n, cap - n, "%c", g->stored[j] ? 's' : 'r');
        assert_true(n < cap);
    }
    compilation_free(&c);
}

static void test_long_rows_fuse(void **state) {
    (void)state;
    char at4096[128], at5000[128], at8192[128];
    long kept;
    groups_at(4096, at4096, sizeof at4096, &kept);
    groups_at(5000, at5000, sizeof at5000, &kept);
    groups_at(8192, at8192, sizeof at8192, &kept);
    /* The bias and the add (the biased row a row), the norm's forward
     * (every output stored: the backward reads them), its backward (dN,
     * the mean's and the variance's gradients and two contributions to dr
     * rows; the gain's and shift's gradients column sums, stored), the
     * residual's and the bias's backward with the loss gradient's copy. */
    assert_string_equal(at4096, "2:rs|4:ssss|9:rsssrrrrr|4:ssrs");
    assert_string_equal(at5000, at4096);
    assert_string_equal(at8192, at4096);
    /* The norm's backward keeps three rows of h floats, three values and
     * two column sums of h doubles. */
    assert_int_equal(kept, 3 * 4 * 8192 + 3 * 4 + 2 * 8 * 8192);
}

static void test_rows_past_the_stack_stored(void **state) {
    (void)state;
    char at200k[128];
    long kept;
    groups_at(200000, at200k, sizeof at200k, &kept);
    /* The column sums' 1.6 MB of accumulators each are past half of
     * KFUSE_ROW_BYTES: they are kernels of their own, and the norm's
     * backward starts after them. Its rows dr_2 and dr_3 (800,000 bytes
     * each) do not fit together: the last one is stored, the other one is
     * still a row. */
    assert_string_equal(at200k, "2:rs|4:ssss|6:srrrrs|3:ssr");
    assert_int_equal(kept, 4 * 200000 + 3 * 4);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_kernel_fuse_rows tests/golden/dump/kernels-norm-long.prime\n");
        return 2;
    }
    case_file = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_rows_fuse),
        cmocka_unit_test(test_rows_past_the_stack_stored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
