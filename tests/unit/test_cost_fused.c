/*
 * test_cost_fused.c — the cost model prices fused kernels as the program
 * runs them (compiler/cost_kernel.h).
 *
 * On a small OPT layer under Megatron-LM's partitions
 * (examples/opt_layer.prime, given as argv[1]):
 *   - every group the kernels pass fuses is priced at the bytes its
 *     kernel moves, counted independently from the members' kernel IR
 *     (each operand's tile from its extents and strides): what it reads
 *     from outside the group once, what it stores once, tiles it adds to
 *     read and written; and the softmax chain at the count its shapes give
 *     by hand;
 *   - the schedule straight from the schedule pass (what `primec cost`,
 *     `explain --svg` and the planner price) and the one the kernels pass
 *     rewrote (what `primec build` emits) get the same FLOPs in every
 *     phase but the copies the kernels pass drops (kernel_copy.h, which
 *     the first still prices), and step times apart by at most those
 *     copies' time; each kernel priced alone (--no-fuse) gives the same
 *     FLOPs and takes longer;
 *   - the planner's price of the schedule (plan_price_schedule) is the
 *     step time `primec cost` reports.
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
#include "cost_kernel.h"
#include "kernel_copy.h"
#include "kernel_fuse.h"
#include "kernel_ir.h"
#include "pipeline.h"
#include "plan_price.h"
#include "profile.h"
#include "schedule.h"

static const char *example; /* examples/opt_layer.prime */
static char dir[64], path[96];

/* The small layer's shape, P devices: the test's expectations use them. */
enum { S = 16, H = 64, A = 8, E = 8, F = 256, P = 2 };

static int group_setup(void **state) {
    (void)state;
    strcpy(dir, "/tmp/primec-test-cost-fused-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/model.prime", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "import \"%s\";\n"
            "shape t_shape of opt { param layers = 1, s = %d, h = %d, a = %d, e = %d, f = %d; }\n"
            "run t = megatron(P = %d) on t_shape;\n",
            example, S, H, A, E, F, P);
    return fclose(f) == 0 ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return unlink(path) == 0 && rmdir(dir) == 0 ? 0 : -1;
}

/* The model t, compiled up to pass `last`. */
static const Schedule *compile(Compilation *c, const char *last) {
    compilation_init(c, path, NULL);
    c->sink.out = NULL;
    c->model_name = "t";
    assert_int_equal(pipeline_run(c, last), 1);
    assert_int_equal(c->schedules.count, 1);
    return c->schedules.items[0];
}

static void load(Profile *p, const char *name) {
    char err[512];
    if (!profile_load(name, p, err, sizeof err))
        fail_msg("%s", err);
}

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12;
}

/* Elements of operand x's tile in kernel k (KERNEL_OUT: the output): the
 * extents of the dimensions it has (a stride; extent-1 ones count 1). */
static double ir_elems(const Kernel *k, int x) {
    double n = 1;
    for (int d = 0; d < k->ndims; ++d)
        if (k->stride[x][d] > 0)
            n *= (double)k->extent[d];
    return n;
}

/* What group g's kernel reads and writes, in elements, from the
 * members' kernel IR: operands from outside the group (by tensor, once),
 * stored outputs, and the tiles members add to (read and written). */
static double ir_group_elems(const Schedule *s, const FuseGroup *g) {
    Kernel *ks = kernel_fuse_members(s, g);
    int seen[KFUSE_MAX * SCHED_MAX_OPERANDS + KFUSE_MAX], nseen = 0;
    double n = 0;
    for (int j = 0; j < g->nmembers; ++j) {
        const Kernel *k = &ks[j];
        const KernelLoop *l = &k->nodes[0].loop;
        unsigned reads = 0;
        for (int t = 0; t < l->nterms; ++t)
            reads |= kernel_expr_operands(k, l->terms[t].expr);
        for (int i = 0; i < k->ph->nin; ++i) {
            int t = k->ph->in[i].tensor, dup = 0;
            for (int x = 0; x < nseen; ++x)
                dup |= seen[x] == t;
            if (!((reads >> i) & 1u) || g->from[j][i] >= 0 || dup)
                continue;
            seen[nseen++] = t;
            n += ir_elems(k, i);
        }
        if (g->into[j] >= 0) {
            int dup = 0;
            for (int x = 0; x < nseen; ++x)
                dup |= seen[x] == g->into[j];
            if (!dup) {
                seen[nseen++] = g->into[j];
                n += 2 * ir_elems(k, KERNEL_OUT); /* the tile added to has the member's shape */
            }
        } else if (g->stored[j]) {
            n += ir_elems(k, KERNEL_OUT);
        }
    }
    free(ks);
    return n;
}

static const char *member_name(const Schedule *s, const FuseGroup *g, int j) {
    const PhaseSched *ph = s->phases.items[g->phase[j]];
    return s->model->instances[ph->inst].name;
}

static void test_fused_bytes_match_kernels(void **state) {
    (void)state;
    Compilation c;
    const Schedule *s = compile(&c, "schedule");
    FusePlan *plan = kernel_fuse_plan(c.arena, s, NULL);
    assert_true(plan->ngroups >= 4); /* two norms, the softmax, residual adds */
    int softmax = 0;
    for (int gi = 0; gi < plan->ngroups; ++gi) {
        const FuseGroup *g = &plan->groups[gi];
        for (int eb = 2; eb <= 4; eb += 2) {
            KernelCost kc = cost_fused_kernel(s, g, NULL, eb);
            assert_true(close_to(kc.bytes, ir_group_elems(s, g) * eb));
            /* FLOPs: the members', each priced alone. */
            double flops = 0;
            for (int j = 0; j < g->nmembers; ++j)
                flops += cost_kernel_flops(s, s->phases.items[g->phase[j]]);
            assert_true(close_to(kc.flops, flops));
        }
        /* The causal softmax: the bound (a row), the shifted exponent, its
         * row sum and the quotient (stored: the backward reads them), the
         * scores read once. A/P heads per device, S x S scores each. */
        if (strcmp(member_name(s, g, 0), "sb_0") == 0) {
            softmax = 1;
            assert_int_equal(g->nmembers, 4);
            const double heads = A / P, scores = heads * S * S;
            assert_true(close_to(cost_fused_kernel(s, g, NULL, 4).bytes,
                                 4 * (scores /* sc read */ + scores /* ex */ + heads * S /* z */ +
                                      scores /* pr */)));
        }
    }
    assert_true(softmax);
    compilation_free(&c);
}

static double total_flops(const CostReport *r) {
    double f = 0;
    for (int q = 0; q < r->nphases; ++q)
        f += r->phases[q].flops;
    return f;
}

static void test_fused_schedule_agrees(void **state) {
    (void)state;
    Profile p;
    load(&p, "a100");
    CostOptions opt;
    cost_options_default(&opt);
    opt.elem_bytes = 2;
    Compilation a, b;
    const Schedule *unfused = compile(&a, "schedule"), *rewritten = compile(&b, "kernels");
    assert_non_null(rewritten->fusion);
    assert_true(rewritten->fusion->applied && rewritten->fusion->ngroups > 0);
    CostReport ra, rb, rn;
    cost_schedule(unfused, &p, &opt, a.arena, &ra);
    cost_schedule(rewritten, &p, &opt, b.arena, &rb);
    /* The kernels pass also drops copies (kernel_copy.h), which the
     * price of a schedule from the schedule pass still counts: the copy
     * phases lose their FLOPs and at most their time, every other phase
     * keeps its FLOPs. */
    const CopyPlan *copies = rewritten->fusion->copies;
    assert_non_null(copies);
    assert_int_equal(ra.nphases, rb.nphases);
    double copies_us = 0;
    for (int q = 0; q < ra.nphases; ++q) {
        int e = 0;
        while (e < copies->count && copies->phase[e] != q)
            ++e;
        if (e < copies->count) {
            assert_true(close_to(ra.phases[q].flops, copies->flops[e]));
            assert_true(rb.phases[q].flops == 0);
            copies_us += ra.phases[q].time_us;
        } else {
            assert_true(close_to(ra.phases[q].flops, rb.phases[q].flops));
        }
    }
    assert_true(rb.step_us <= ra.step_us * (1 + 1e-9));
    assert_true(ra.step_us - rb.step_us <= copies_us * (1 + 1e-9));
    assert_true(rb.compute_us <= ra.compute_us * (1 + 1e-9));
    /* Each kernel alone: the same FLOPs, more time. */
    opt.no_fuse = 1;
    cost_schedule(unfused, &p, &opt, a.arena, &rn);
    assert_true(close_to(total_flops(&rn), total_flops(&ra)));
    assert_true(rn.step_us > ra.step_us);
    /* The planner prices a schedule as `cost` does. */
    CostCtx ctx = {&p, {2, 0, 0, 0}, a.arena, P};
    PlanCost pc = plan_price_schedule(unfused, a.arena, &ctx);
    assert_true(close_to(pc.time, ra.step_us * 1e-6));
    compilation_free(&a);
    compilation_free(&b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cost_fused examples/opt_layer.prime\n");
        return 2;
    }
    example = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_bytes_match_kernels),
        cmocka_unit_test(test_fused_schedule_agrees),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
