/*
 * test_cost.c — unit tests of hardware profiles (profile.h), the cost
 * model (cost.h) and calibration (calibrate.h).
 *
 * Profiles: a good file parses into the right fields; every kind of
 * malformed line is refused with its exact message and line number; the
 * shipped profiles load by name; writing and re-reading round-trips.
 * Fits: least squares recovers alpha/beta and the GEMM curve from
 * synthetic points. Cost: schedules built by the pipeline from small
 * models (a temporary .prime file) are priced: a square grid's temporal
 * phase overlaps its shifts with compute, a row split's all-reduce costs
 * exactly the alpha-beta formula in the right link class, the bytes
 * equal the schedule's own predictions, memory scales with the element
 * size. Calibration: a very small sweep gives positive, finite numbers;
 * the samples' text form (what primec-calibrate-mpi prints) round-trips,
 * fits like the sweep it came from, and malformed text is refused with
 * the line at fault.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "cost.h"
#include "cost_pipeline.h"
#include "pipeline.h"
#include "profile.h"
#include "schedule.h"

/* ------------------------------------------------------------------ */
/* Fixture                                                             */

static char tmpdir[64];

static int group_setup(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/primec-test-cost-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    const char *names[] = {"model.prime", "out.profile"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    return rmdir(tmpdir);
}

/* ------------------------------------------------------------------ */
/* Profiles                                                            */

/* A complete profile, one line each (line numbers = index + 1). */
static const char *const good_lines[] = {
    "# a test profile",                                          /* 1 */
    "name test-gpu",                                             /* 2 */
    "description A test device  # with a comment",               /* 3 */
    "devices_per_node 4",                                        /* 4 */
    "peak_tflops 100",                                           /* 5 */
    "vector_tflops 25",                                          /* 6 */
    "mem_bandwidth_GBps 1000",                                   /* 7 */
    "mem_capacity_GB 32",                                        /* 8 */
    "gemm_eff_max 0.8",                                          /* 9 */
    "gemm_half_dim 128",                                         /* 10 */
    "kernel_overhead_us 5",                                      /* 11 */
    "",                                                          /* 12 */
    "link intra shift alpha_us 8 beta_GBps 45",                  /* 13 */
    "link intra allreduce alpha_us 12 beta_GBps 130",            /* 14 */
    "link intra reduce_scatter alpha_us 10 beta_GBps 120",       /* 15 */
    "link intra allgather alpha_us 10 beta_GBps 110",            /* 16 */
    "link inter p2p alpha_us 10 beta_GBps 11",                   /* 17 */
    "link inter allreduce alpha_us 30 beta_GBps 10",             /* 18 */
    "link inter reduce_scatter alpha_us 20 beta_GBps 9",         /* 19 */
    "\tlink   inter allgather alpha_us 20 beta_GBps 8   # tabs", /* 20 */
};
enum { NGOOD = sizeof good_lines / sizeof good_lines[0] };

/* The good profile with line `line` (1-based) replaced by `with` (NULL:
 * removed; line 0: `with` appended). */
static char *profile_text(int line, const char *with) {
    static char buf[4096];
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < NGOOD; ++i) {
        const char *l = i + 1 == line ? with : good_lines[i];
        if (l)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\n", l);
    }
    if (line == 0 && with)
        snprintf(buf + n, sizeof buf - n, "%s\n", with);
    return buf;
}

static void test_profile_parse_good(void **state) {
    (void)state;
    Profile p;
    char err[512] = "";
    assert_int_equal(profile_parse(profile_text(-1, NULL), "t.profile", &p, err, sizeof err), 1);
    assert_string_equal(p.name, "test-gpu");
    assert_string_equal(p.description, "A test device");
    /* Free text after `description` may have any number of words. */
    const char *long_desc =
        "description one two three four five six seven eight nine ten eleven twelve "
        "thirteen fourteen fifteen sixteen seventeen";
    assert_int_equal(profile_parse(profile_text(3, long_desc), "t.profile", &p, err, sizeof err),
                     1);
    assert_string_equal(p.description, long_desc + 12);
    assert_int_equal(p.devices_per_node, 4);
    assert_true(p.peak_tflops == 100 && p.vector_tflops == 25);
    assert_true(p.mem_bandwidth_GBps == 1000 && p.mem_capacity_GB == 32);
    assert_true(p.gemm_eff_max == 0.8 && p.gemm_half_dim == 128 && p.kernel_overhead_us == 5);
    assert_true(p.link[COMM_P2P][LINK_INTRA].alpha_us == 8 &&
                p.link[COMM_P2P][LINK_INTRA].beta_GBps == 45);
    assert_true(p.link[COMM_ALLREDUCE][LINK_INTRA].beta_GBps == 130);
    assert_true(p.link[COMM_REDUCE_SCATTER][LINK_INTRA].beta_GBps == 120);
    assert_true(p.link[COMM_ALLGATHER][LINK_INTRA].beta_GBps == 110);
    assert_true(p.link[COMM_P2P][LINK_INTER].beta_GBps == 11);
    assert_true(p.link[COMM_ALLREDUCE][LINK_INTER].alpha_us == 30);
    assert_true(p.link[COMM_REDUCE_SCATTER][LINK_INTER].beta_GBps == 9);
    assert_true(p.link[COMM_ALLGATHER][LINK_INTER].beta_GBps == 8);
    /* eff(d) saturates at gemm_eff_max; half of it at gemm_half_dim. */
    assert_true(fabs(profile_gemm_efficiency(&p, 128) - 0.4) < 1e-12);
    assert_true(profile_gemm_efficiency(&p, 1e9) < 0.8 &&
                profile_gemm_efficiency(&p, 1e9) > 0.7999);
}

typedef struct BadCase {
    int line;          /* replaced line (0: appended) */
    const char *with;  /* NULL: the line is removed */
    const char *error; /* the whole message */
} BadCase;

static void test_profile_parse_errors(void **state) {
    (void)state;
    static const BadCase cases[] = {
        {5, "peak 100", "t.profile:5: error: unknown key 'peak'"},
        {0, "peak_tflops 90", "t.profile:21: error: 'peak_tflops' given twice (first on line 5)"},
        {6, "vector_tflops fast", "t.profile:6: error: vector_tflops expects a number, got 'fast'"},
        {6, "vector_tflops 25x", "t.profile:6: error: vector_tflops expects a number, got '25x'"},
        {7, "mem_bandwidth_GBps -1",
         "t.profile:7: error: 'mem_bandwidth_GBps' must be positive, got -1"},
        {7, "mem_bandwidth_GBps 0",
         "t.profile:7: error: 'mem_bandwidth_GBps' must be positive, got 0"},
        {9, "gemm_eff_max 1.5", "t.profile:9: error: 'gemm_eff_max' must be in (0, 1], got 1.5"},
        {10, "gemm_half_dim -3",
         "t.profile:10: error: 'gemm_half_dim' must not be negative, got -3"},
        {4, "devices_per_node 2.5",
         "t.profile:4: error: 'devices_per_node' must be a whole number of at least 1, got 2.5"},
        {4, "devices_per_node 0",
         "t.profile:4: error: 'devices_per_node' must be a whole number of at least 1, got 0"},
        {8, "mem_capacity_GB 32 GB",
         "t.profile:8: error: 'mem_capacity_GB' takes one value, got 2"},
        {11, "kernel_overhead_us",
         "t.profile:11: error: 'kernel_overhead_us' takes one value, got 0"},
        {0, "name other", "t.profile:21: error: 'name' given twice (first on line 2)"},
        {2, "name", "t.profile:2: error: 'name' needs a value"},
        {0, "description again",
         "t.profile:21: error: 'description' given twice (first on line 3)"},
        {6, "vector_tflops 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16",
         "t.profile:6: error: too many words on one line (at most 16)"},
        {13, "link intranode p2p alpha_us 8 beta_GBps 45",
         "t.profile:13: error: unknown link class 'intranode' (expected intra or inter)"},
        {13, "link intra broadcast alpha_us 8 beta_GBps 45",
         "t.profile:13: error: unknown communication kind 'broadcast' (expected p2p, allreduce, "
         "reduce_scatter or allgather)"},
        {14, "link intra allreduce alpha_us 12",
         "t.profile:14: error: expected 'link intra allreduce alpha_us A beta_GBps B'"},
        {14, "link intra allreduce beta_GBps 130 alpha_us 12",
         "t.profile:14: error: expected 'link intra allreduce alpha_us A beta_GBps B'"},
        {14, "link intra",
         "t.profile:14: error: expected 'link CLASS KIND alpha_us A beta_GBps B'"},
        {0, "link intra p2p alpha_us 1 beta_GBps 2",
         "t.profile:21: error: 'link intra p2p' given twice (first on line 13)"},
        {17, "link inter p2p alpha_us 10 beta_GBps 0",
         "t.profile:17: error: beta_GBps must be positive, got 0"},
        {17, "link inter p2p alpha_us -1 beta_GBps 5",
         "t.profile:17: error: alpha_us must not be negative, got -1"},
        {17, "link inter p2p alpha_us ten beta_GBps 5",
         "t.profile:17: error: alpha_us expects a number, got 'ten'"},
        {7, NULL, "t.profile: error: missing key 'mem_bandwidth_GBps'"},
        {2, NULL, "t.profile: error: missing key 'name'"},
        {20, NULL, "t.profile: error: missing row 'link inter allgather alpha_us A beta_GBps B'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        Profile p;
        char err[512] = "";
        int ok = profile_parse(profile_text(cases[i].line, cases[i].with), "t.profile", &p, err,
                               sizeof err);
        if (ok || strcmp(err, cases[i].error) != 0)
            fail_msg("case %zu (%s): got %s '%s', want '%s'", i,
                     cases[i].with ? cases[i].with : "(removed)", ok ? "success" : "error", err,
                     cases[i].error);
    }
}

static void test_profile_load_shipped(void **state) {
    (void)state;
    static const char *const names[] = {"v100-nvlink-ib", "a100-nvswitch", "h100-nvswitch",
                                        "h200-nvswitch"};
    static const int per_node[] = {4, 8, 8, 8};
    for (int i = 0; i < 4; ++i) {
        Profile p;
        char err[512] = "";
        if (!profile_load(names[i], &p, err, sizeof err))
            fail_msg("%s: %s", names[i], err);
        assert_string_equal(p.name, names[i]);
        assert_int_equal(p.devices_per_node, per_node[i]);
        /* Inside a node is faster than across nodes. */
        for (int k = 0; k < COMM_KIND_COUNT; ++k)
            assert_true(p.link[k][LINK_INTRA].beta_GBps > p.link[k][LINK_INTER].beta_GBps);
    }
    Profile p;
    char err[512] = "";
    assert_int_equal(profile_load("v100", &p, err, sizeof err), 1);
    assert_string_equal(p.name, "v100-nvlink-ib");
    assert_true(p.peak_tflops == 125 && p.mem_bandwidth_GBps == 900);
    assert_int_equal(profile_load("h", &p, err, sizeof err), 0);
    assert_string_equal(err, "profile name 'h' is ambiguous: h100-nvswitch, h200-nvswitch");
    assert_int_equal(profile_load("tpu", &p, err, sizeof err), 0);
    assert_non_null(strstr(err, "no profile 'tpu' in "));
    assert_non_null(strstr(err, "a100-nvswitch, h100-nvswitch, h200-nvswitch, v100-nvlink-ib"));
    assert_int_equal(profile_load("/nonexistent/x.profile", &p, err, sizeof err), 0);
    assert_string_equal(err,
                        "cannot read profile '/nonexistent/x.profile': No such file or directory");
}

static void test_profile_write_roundtrip(void **state) {
    (void)state;
    Profile a, b;
    char err[512] = "", path[128];
    assert_int_equal(profile_load("a100", &a, err, sizeof err), 1);
    snprintf(path, sizeof path, "%s/out.profile", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    profile_write(&a, "written by a test\n\nsecond paragraph", f);
    assert_int_equal(fclose(f), 0);
    if (!profile_load(path, &b, err, sizeof err))
        fail_msg("%s", err);
    assert_string_equal(a.name, b.name);
    assert_string_equal(a.description, b.description);
    assert_int_equal(a.devices_per_node, b.devices_per_node);
    assert_true(a.peak_tflops == b.peak_tflops && a.vector_tflops == b.vector_tflops);
    assert_true(a.mem_bandwidth_GBps == b.mem_bandwidth_GBps &&
                a.mem_capacity_GB == b.mem_capacity_GB);
    assert_true(a.gemm_eff_max == b.gemm_eff_max && a.gemm_half_dim == b.gemm_half_dim);
    assert_true(a.kernel_overhead_us == b.kernel_overhead_us);
    assert_memory_equal(a.link, b.link, sizeof a.link);
}

/* ------------------------------------------------------------------ */
/* Fits                                                                */

static void test_fit_alpha_beta(void **state) {
    (void)state;
    double x[8], y[8], alpha, beta;
    /* Exact points of alpha 12 µs, beta 50 GB/s. */
    for (int i = 0; i < 8; ++i) {
        x[i] = 1024.0 * (1 << (2 * i));
        y[i] = 12 + x[i] / 50e3;
    }
    assert_int_equal(calibrate_fit_alpha_beta(x, y, 8, &alpha, &beta), 1);
    assert_true(fabs(alpha - 12) < 1e-6 && fabs(beta - 50) < 1e-6);
    /* +-5% alternating noise: still within 10%. */
    for (int i = 0; i < 8; ++i)
        y[i] *= i % 2 ? 1.05 : 0.95;
    assert_int_equal(calibrate_fit_alpha_beta(x, y, 8, &alpha, &beta), 1);
    assert_true(fabs(alpha - 12) < 1.2 && fabs(beta - 50) < 5);
    /* Pure bandwidth: the intercept comes out ~0, never negative. */
    for (int i = 0; i < 8; ++i)
        y[i] = x[i] / 10e3 * (i % 2 ? 1.01 : 0.99);
    assert_int_equal(calibrate_fit_alpha_beta(x, y, 8, &alpha, &beta), 1);
    assert_true(alpha >= 0 && alpha < 1 && fabs(beta - 10) < 0.5);
    /* No bandwidth to fit. */
    assert_int_equal(calibrate_fit_alpha_beta(x, y, 1, &alpha, &beta), 0);
    double same_x[3] = {100, 100, 100}, ys[3] = {1, 2, 3};
    assert_int_equal(calibrate_fit_alpha_beta(same_x, ys, 3, &alpha, &beta), 0);
    double down[3] = {3, 2, 1};
    assert_int_equal(calibrate_fit_alpha_beta(x, down, 3, &alpha, &beta), 0);
}

static void test_fit_gemm(void **state) {
    (void)state;
    /* overhead 2 µs, peak 0.05 TFLOP/s (5e4 flops per µs), half_dim 40. */
    double d[6], us[6], o, peak, half;
    for (int i = 0; i < 6; ++i) {
        d[i] = 16 << i;
        us[i] = 2 + 2 * d[i] * d[i] * d[i] * (d[i] + 40) / d[i] / 5e4;
    }
    assert_int_equal(calibrate_fit_gemm(d, us, 6, &o, &peak, &half), 1);
    assert_true(fabs(o - 2) < 1e-6 && fabs(peak - 0.05) < 1e-9 && fabs(half - 40) < 1e-6);
    assert_int_equal(calibrate_fit_gemm(d, us, 1, &o, &peak, &half), 0);
}

/* ------------------------------------------------------------------ */
/* Cost of schedules                                                   */

typedef struct Run {
    Compilation c;
    char path[128];
    const Schedule *s;
} Run;

static void run_matmul(Run *r, const char *partition, const char *mesh, long m, long k, long n) {
    snprintf(r->path, sizeof r->path, "%s/model.prime", tmpdir);
    FILE *f = fopen(r->path, "w");
    assert_non_null(f);
    fprintf(f,
            "model t {\n"
            "    param m = %ld, k = %ld, n = %ld;\n"
            "    mesh(%s);\n"
            "    input x[m, k];\n"
            "    weight w[k, n];\n"
            "    y = matmul(x, w) use %s;\n"
            "}\n",
            m, k, n, mesh, partition);
    assert_int_equal(fclose(f), 0);
    compilation_init(&r->c, r->path, NULL);
    r->c.sink.out = NULL;
    int ok = pipeline_run(&r->c, "schedule");
    assert_int_equal(ok, 1);
    assert_int_equal(r->c.schedules.count, 1);
    r->s = r->c.schedules.items[0];
}

static void load(Profile *p, const char *name) {
    char err[512];
    if (!profile_load(name, p, err, sizeof err))
        fail_msg("%s", err);
}

static const PhaseCost *phase_of(const CostReport *r, PhaseKind kind) {
    for (int i = 0; i < r->nphases; ++i)
        if (r->phases[i].phase->kind == kind)
            return &r->phases[i];
    fail_msg("no %s phase", phase_name(kind));
    return NULL;
}

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12;
}

static void test_cost_formulas(void **state) {
    (void)state;
    Profile p;
    load(&p, "v100");
    assert_int_equal(cost_link_between(4, 0, 3), LINK_INTRA);
    assert_int_equal(cost_link_between(4, 3, 4), LINK_INTER);
    int in_node[] = {4, 5, 6, 7}, spans[] = {2, 3, 4, 5};
    assert_int_equal(cost_link_of_group(4, in_node, 4), LINK_INTRA);
    assert_int_equal(cost_link_of_group(4, spans, 4), LINK_INTER);
    double n = 1 << 20;
    assert_true(close_to(cost_p2p_us(&p, LINK_INTRA, n), 8 + n / 45e3));
    assert_true(
        close_to(cost_collective_us(&p, COMM_ALLREDUCE, LINK_INTRA, n, 4), 12 + 1.5 * n / 130e3));
    assert_true(
        close_to(cost_collective_us(&p, COMM_ALLREDUCE, LINK_INTER, n, 8), 30 + 1.75 * n / 10e3));
    assert_true(close_to(cost_collective_us(&p, COMM_REDUCE_SCATTER, LINK_INTRA, n, 4),
                         10 + 0.75 * n / 130e3));
    assert_true(
        close_to(cost_collective_us(&p, COMM_ALLGATHER, LINK_INTER, n, 2), 20 + 0.5 * n / 10e3));
    assert_true(cost_collective_us(&p, COMM_ALLREDUCE, LINK_INTRA, n, 1) == 0);
    /* A big GEMM is compute-bound at eff(d), a thin one memory-bound. */
    double big = cost_gemm_us(&p, 4096, 4096, 4096, 1, 2);
    double flops_us = 2.0 * 4096 * 4096 * 4096 / (125e6 * profile_gemm_efficiency(&p, 4096));
    assert_true(close_to(big, 5 + flops_us));
    double thin = cost_gemm_us(&p, 1 << 20, 1, 1, 1, 2);
    assert_true(close_to(thin, 5 + (1.0 * (1 << 20) + 1 + 2.0 * (1 << 20)) * 2 / 900e3));
}

/* Σ over devices of the schedule's predicted bytes of one kind. */
static long pred_sum(const Schedule *s, int kind) {
    long n = 0;
    for (int d = 0; d < s->model->mesh.ndev; ++d)
        n += s->pred_bytes[kind][d];
    return n;
}

static void test_cost_square_overlaps(void **state) {
    (void)state;
    Run r;
    run_matmul(&r, "square", "i: 2, j: 2", 512, 256, 384);
    Profile p;
    load(&p, "v100");
    CostReport rep;
    cost_schedule(r.s, &p, NULL, r.c.arena, &rep);
    const PhaseCost *fwd = phase_of(&rep, PHASE_FWD);
    assert_int_equal(fwd->nsteps, 2);
    assert_true(fwd->shift_us > 0 && fwd->compute_us > 0);
    assert_true(fwd->collective_us == 0 && fwd->redist_us == 0);
    /* Overlap: less than compute and shifts back to back. */
    assert_true(fwd->time_us < fwd->compute_us + fwd->shift_us);
    assert_true(fwd->time_us >= fwd->compute_us);
    /* The steps (and the prologue) add up to the phase, the phases to the step. */
    double sum = fwd->prologue_us;
    for (int st = 0; st < fwd->nsteps; ++st)
        sum += fwd->steps[st].time_us;
    assert_true(close_to(sum, fwd->time_us));
    double total = 0;
    for (int q = 0; q < rep.nphases; ++q)
        total += rep.phases[q].time_us;
    assert_true(close_to(total, rep.step_us));
    assert_true(rep.exposed_comm_us >= 0 && rep.step_us >= rep.compute_us);
    /* No collective anywhere; bytes are the schedule's. */
    assert_int_equal(rep.collective_bytes, 0);
    assert_int_equal(rep.shift_bytes, pred_sum(r.s, PRIME_BYTES_SHIFT));
    assert_int_equal(rep.p2p_bytes,
                     pred_sum(r.s, PRIME_BYTES_SHIFT) + pred_sum(r.s, PRIME_BYTES_REDIST));
    /* Per device: 2 * 256 * 384 / 4 flops per GEMM... every phase is
     * one GEMM of the whole problem split over 4 devices: 3 * 2mnk. */
    assert_true(close_to(rep.flops, 3 * 2.0 * 512 * 256 * 384));
    compilation_free(&r.c);
}

static void test_cost_row_allreduce(void **state) {
    (void)state;
    Run r;
    const long m = 96, k = 64, n = 80;
    run_matmul(&r, "row", "d: 4", m, k, n);
    Profile p;
    load(&p, "v100");
    CostReport rep;
    cost_schedule(r.s, &p, NULL, r.c.arena, &rep);
    const PhaseCost *fwd = phase_of(&rep, PHASE_FWD);
    /* y (m x n, whole on every device) is all-reduced over 4 devices of
     * one node: alpha + 2(g-1)/g n / beta, 4-byte elements. */
    double bytes = (double)(m * n) * 4;
    double want = 12 + 2.0 * 3 / 4 * bytes / 130e3;
    assert_true(close_to(fwd->collective_us, want));
    assert_true(
        close_to(fwd->collective_us, cost_collective_us(&p, COMM_ALLREDUCE, LINK_INTRA, bytes, 4)));
    assert_true(fwd->time_us >= fwd->compute_us + want - 1e-9);
    assert_int_equal(rep.collective_bytes, pred_sum(r.s, PRIME_BYTES_COLLECTIVE));
    assert_int_equal(rep.shift_bytes, 0);

    /* Two devices per node: the group spans nodes, inter-node class. */
    CostOptions opt;
    cost_options_default(&opt);
    opt.devices_per_node = 2;
    cost_schedule(r.s, &p, &opt, r.c.arena, &rep);
    fwd = phase_of(&rep, PHASE_FWD);
    assert_true(close_to(fwd->collective_us, 30 + 2.0 * 3 / 4 * bytes / 10e3));

    /* Half-precision elements: half the bytes and the peak memory. */
    cost_options_default(&opt);
    opt.elem_bytes = 2;
    cost_schedule(r.s, &p, &opt, r.c.arena, &rep);
    fwd = phase_of(&rep, PHASE_FWD);
    assert_true(close_to(fwd->collective_us, 12 + 2.0 * 3 / 4 * bytes / 2 / 130e3));
    assert_int_equal(rep.collective_bytes * 2, pred_sum(r.s, PRIME_BYTES_COLLECTIVE));
    for (int d = 0; d < 4; ++d)
        assert_int_equal(rep.peak_bytes[d] * 2, r.s->pred_peak[d]);
    compilation_free(&r.c);
}

/* Σ over rank r's recorded stretches of one kind in phase q. */
static double event_sum(const CostReport *rep, int r, int q, CostEventKind kind) {
    double sum = 0;
    for (int i = 0; i < rep->nevents; ++i) {
        const CostEvent *e = &rep->events[i];
        if (e->rank == r && e->phase == q && e->kind == kind)
            sum += e->end_us - e->start_us;
    }
    return sum;
}

/* The recorded stretches (for timelines) are the simulation's own time:
 * per phase, the slowest rank's compute and collective stretches add up
 * to the phase's figures; a rank's stretches of one kind never overlap;
 * recording changes no figure. */
static void test_cost_events(void **state) {
    (void)state;
    static const char *const parts[][2] = {
        {"square", "i: 2, j: 2"}, {"row", "d: 4"}, {"ring", "d: 4"}};
    Profile p;
    load(&p, "v100");
    for (size_t c = 0; c < sizeof parts / sizeof parts[0]; ++c) {
        Run r;
        run_matmul(&r, parts[c][0], parts[c][1], 96, 64, 80);
        CostOptions opt;
        cost_options_default(&opt);
        CostReport plain, rec;
        cost_schedule(r.s, &p, &opt, r.c.arena, &plain);
        assert_int_equal(plain.nevents, 0);
        opt.record_events = 1;
        cost_schedule(r.s, &p, &opt, r.c.arena, &rec);
        assert_true(rec.nevents > 0);
        assert_true(rec.step_us == plain.step_us && rec.compute_us == plain.compute_us);
        for (int q = 0; q < rec.nphases; ++q) {
            double compute = 0, coll = 0;
            for (int d = 0; d < rec.ndev; ++d) {
                double a = event_sum(&rec, d, q, COST_EV_COMPUTE),
                       b = event_sum(&rec, d, q, COST_EV_COLLECTIVE);
                compute = a > compute ? a : compute;
                coll = b > coll ? b : coll;
            }
            assert_true(fabs(compute - rec.phases[q].compute_us) <= 1e-6 * (1 + compute));
            assert_true(fabs(coll - rec.phases[q].collective_us) <= 1e-6 * (1 + coll));
        }
        double last[4][COST_EV_KIND_COUNT] = {{0}};
        for (int i = 0; i < rec.nevents; ++i) {
            const CostEvent *e = &rec.events[i];
            assert_true(e->rank >= 0 && e->rank < 4 && e->phase >= 0 && e->phase < rec.nphases);
            assert_true(e->end_us > e->start_us && e->end_us <= rec.step_us + 1e-9);
            if (e->kind == COST_EV_COMPUTE || e->kind == COST_EV_COLLECTIVE)
                assert_true(e->start_us >= last[e->rank][e->kind] - 1e-9);
            last[e->rank][e->kind] = e->end_us;
        }
        compilation_free(&r.c);
    }
}

static void test_cost_bytes_match_schedule(void **state) {
    (void)state;
    static const char *const parts[][2] = {
        {"replicate", "d: 4"}, {"data", "d: 4"}, {"column", "d: 4"},
        {"row", "d: 4"},       {"ring", "d: 4"}, {"square", "i: 2, j: 2"},
    };
    Profile p;
    load(&p, "h100");
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i) {
        Run r;
        run_matmul(&r, parts[i][0], parts[i][1], 96, 64, 80);
        CostReport rep;
        cost_schedule(r.s, &p, NULL, r.c.arena, &rep);
        assert_int_equal(rep.shift_bytes, pred_sum(r.s, PRIME_BYTES_SHIFT));
        assert_int_equal(rep.collective_bytes, pred_sum(r.s, PRIME_BYTES_COLLECTIVE));
        assert_int_equal(rep.redist_bytes, pred_sum(r.s, PRIME_BYTES_REDIST));
        for (int d = 0; d < 4; ++d)
            assert_int_equal(rep.peak_bytes[d], r.s->pred_peak[d]);
        assert_true(rep.step_us > 0 && isfinite(rep.step_us));
        compilation_free(&r.c);
    }
}

static void test_cost_training_memory(void **state) {
    (void)state;
    Profile p;
    load(&p, "v100");
    Run r;
    run_matmul(&r, "column", "d: 4", 96, 64, 80);
    TrainingMemory m;
    cost_training_memory(r.s, &p, NULL, r.c.arena, &m);
    assert_int_equal(m.model_params, 64 * 80);
    for (int d = 0; d < 4; ++d) {
        assert_int_equal(m.params[d], 64 * 80 / 4);
        assert_int_equal(m.state_bytes[d], 16 * 64 * 80 / 4);
        assert_int_equal(m.total_bytes[d], r.s->pred_peak[d] + 12 * 64 * 80 / 4);
    }
    assert_true(m.fits);
    compilation_free(&r.c);

    run_matmul(&r, "replicate", "d: 4", 96, 64, 80);
    cost_training_memory(r.s, &p, NULL, r.c.arena, &m);
    for (int d = 0; d < 4; ++d)
        assert_int_equal(m.params[d], 64 * 80);
    compilation_free(&r.c);
}

/* A training iteration composed from one layer's cost: each term of
 * cost_pipeline.h's formulas, checked against the report it came from. */
static void test_cost_pipeline(void **state) {
    (void)state;
    Run r;
    run_matmul(&r, "column", "d: 4", 64, 32, 48);
    Profile p;
    load(&p, "v100");
    CostReport rep;
    cost_schedule(r.s, &p, NULL, r.c.arena, &rep);
    double fwd = 0, bwd = 0;
    for (int i = 0; i < rep.nphases; ++i) {
        PhaseKind kind = rep.phases[i].phase->kind;
        if (kind == PHASE_FWD)
            fwd += rep.phases[i].time_us;
        else if (kind != PHASE_INIT)
            bwd += rep.phases[i].time_us;
    }
    assert_true(fwd > 0 && bwd > 0);
    long params = 0;
    for (int d = 0; d < 4; ++d)
        params = rep.memory.params[d] > params ? rep.memory.params[d] : params;
    char err[256];
    PipelineCost c;

    /* One stage, one replica, one micro-batch of one sequence. */
    PipelineShape one = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    assert_int_equal(cost_pipeline(&rep, 1, &one, &p, &c, err, sizeof err), 1);
    assert_true(close_to(c.layer_fwd_us, fwd) && close_to(c.layer_bwd_us, bwd));
    assert_true(close_to(c.stage_us, fwd + bwd));
    assert_true(c.bubble_us == 0 && c.p2p_us == 0 && c.allreduce_us == 0 && c.head_us == 0);
    assert_true(close_to(c.optimizer_us, (double)params * 28 / 900e3));
    assert_true(close_to(c.iteration_us, fwd + bwd + c.optimizer_us));
    assert_int_equal(c.seq_tokens, 64);
    assert_int_equal(c.hidden, 32);

    /* Recomputation adds one forward per layer, sequence and micro-batch. */
    PipelineShape rec = {1, 1, 1, 3, 2, 2, 0, 1, 0, 0};
    assert_int_equal(cost_pipeline(&rep, 1, &rec, &p, &c, err, sizeof err), 1);
    assert_true(close_to(c.stage_us, 2 * 3 * (2 * fwd + bwd)));

    /* 4 stages of 2 layers, 2 replicas, micro-batches of 2, global batch
     * 16: m = 4 per replica; the LM head on the last stage. */
    PipelineShape pp = {4, 1, 2, 8, 2, 16, 96, 0, 0, 0};
    assert_int_equal(cost_pipeline(&rep, 1, &pp, &p, &c, err, sizeof err), 1);
    assert_int_equal(c.micro_batches, 4);
    assert_int_equal(c.devices, 32);
    double stage = 2 * 2 * (fwd + bwd);
    assert_true(close_to(c.stage_us, stage));
    assert_true(close_to(c.head_us, 3 * cost_gemm_us(&p, 2 * 64, 96 / 4, 32, 1, 4)));
    /* Stage neighbours are 4 * 2 ranks apart: other nodes (4 per node). */
    double send = cost_p2p_us(&p, LINK_INTER, 2.0 * 64 * 32 * 4 / 4);
    assert_true(close_to(c.p2p_us, 2 * send));
    double tmax = stage + c.head_us, tmean = stage + c.head_us / 4;
    assert_true(close_to(c.bubble_us, 3 * (tmean + c.p2p_us)));
    assert_true(close_to(c.pipeline_us, 4 * (tmax + c.p2p_us) + c.bubble_us));
    double pdev = (double)params * 2 + 96.0 / 4 * 32;
    assert_true(close_to(c.params_device, pdev));
    assert_true(
        close_to(c.allreduce_us, cost_collective_us(&p, COMM_ALLREDUCE, LINK_INTER, pdev * 4, 2)));
    assert_true(c.embedding_us > 0);
    assert_true(
        close_to(c.iteration_us, c.pipeline_us + c.allreduce_us + c.embedding_us + c.optimizer_us));

    /* Two chunks per stage: half the bubble's stages, twice the sends. */
    PipelineShape il = pp;
    il.chunks = 2;
    PipelineCost ci;
    assert_int_equal(cost_pipeline(&rep, 1, &il, &p, &ci, err, sizeof err), 1);
    assert_true(close_to(ci.p2p_us, 2 * c.p2p_us));
    assert_true(close_to(ci.bubble_us, 1.5 * (tmean + ci.p2p_us)));

    /* Shapes that do not divide. */
    PipelineShape bad = pp;
    bad.layers = 6;
    assert_int_equal(cost_pipeline(&rep, 1, &bad, &p, &c, err, sizeof err), 0);
    assert_string_equal(err, "6 layers do not split into 4 stages of 1 chunk");
    bad = pp;
    bad.global_batch = 10;
    assert_int_equal(cost_pipeline(&rep, 1, &bad, &p, &c, err, sizeof err), 0);
    assert_non_null(strstr(err, "not a whole number of micro-batches"));
    bad = one;
    bad.chunks = 2;
    assert_int_equal(cost_pipeline(&rep, 1, &bad, &p, &c, err, sizeof err), 0);
    compilation_free(&r.c);
}

static void test_cost_print(void **state) {
    (void)state;
    Profile p;
    load(&p, "v100");
    Run r;
    run_matmul(&r, "square", "i: 2, j: 2", 96, 64, 80);
    CostReport a, b;
    cost_schedule(r.s, &p, NULL, r.c.arena, &a);
    cost_schedule(r.s, &p, NULL, r.c.arena, &b);
    assert_true(a.step_us == b.step_us); /* deterministic */
    char *text = NULL, *json = NULL;
    size_t tn = 0, jn = 0;
    FILE *f = open_memstream(&text, &tn);
    cost_print(&a, f);
    fclose(f);
    f = open_memstream(&json, &jn);
    cost_print_json(&a, f);
    fclose(f);
    assert_non_null(
        strstr(text, "cost of model t on 4 devices (mesh i:2 j:2) with profile v100-nvlink-ib"));
    assert_non_null(strstr(text, "forward of y"));
    assert_non_null(strstr(text, "step time"));
    /* The JSON parses, and carries the report's figures (doubles to 6
     * significant digits). */
    json_error_t err;
    json_t *root = json_loads(json, 0, &err);
    assert_non_null(root);
    double step_us = json_real_value(json_object_get(root, "step_us"));
    assert_true(fabs(step_us - a.step_us) <= 1e-5 * fabs(a.step_us));
    json_t *mem = json_object_get(root, "training_memory");
    assert_int_equal(json_integer_value(json_object_get(mem, "bytes_per_param")), 16);
    assert_int_equal(json_integer_value(json_object_get(mem, "model_params")),
                     a.memory.model_params);
    assert_int_equal(json_array_size(json_object_get(root, "phases")), a.nphases);
    assert_string_equal(json_string_value(json_object_get(root, "model")), "t");
    json_decref(root);
    free(text);
    free(json);
    compilation_free(&r.c);
}

/* ------------------------------------------------------------------ */
/* Calibration                                                         */

static void test_calibrate_quick(void **state) {
    (void)state;
    CalibrateOptions opt;
    calibrate_options_quick(&opt);
    CalibrateResult *res = malloc(sizeof *res);
    assert_non_null(res);
    char err[512] = "";
    if (!calibrate_run(&opt, res, err, sizeof err)) {
        /* On a machine busy with other work the timings can stay too noisy
         * to fit in every sweep: calibrate refuses them, which is its
         * behaviour, not a fault (the fits themselves are tested on fixed
         * samples above and below). Any other failure is one. */
        if (!strstr(err, "too noisy points") || !strstr(err, "sweeps"))
            fail_msg("%s", err);
        fprintf(stderr, "calibrate refused noisy timings (%s): profile checks skipped\n", err);
        free(res);
        skip();
    }
    const Profile *p = &res->profile;
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        for (int c = 0; c < LINK_CLASS_COUNT; ++c) {
            /* A fit whose intercept comes out negative (noisy small
             * samples; the threads backend's collectives in shared memory
             * have little fixed cost) is refitted with alpha 0. */
            assert_true(p->link[k][c].alpha_us >= 0 && isfinite(p->link[k][c].alpha_us));
            assert_true(p->link[k][c].beta_GBps > 0 && isfinite(p->link[k][c].beta_GBps));
        }
    assert_true(p->peak_tflops > 0 && p->gemm_half_dim >= 0 && p->kernel_overhead_us >= 0);
    assert_true(p->mem_bandwidth_GBps > 0 && p->vector_tflops > 0 && p->mem_capacity_GB > 0);
    assert_int_equal(res->nsamples, COMM_KIND_COUNT * 6); /* 1 world x 1K..1M */
    assert_true(res->seconds > 0 && res->attempts >= 1 && res->attempts <= 3);
    /* What it writes is a profile. */
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    calibrate_write_profile(res, &opt, f);
    fclose(f);
    Profile back;
    if (!profile_parse(text, "calibrated", &back, err, sizeof err))
        fail_msg("%s", err);
    assert_string_equal(back.name, "cpu-threads");
    free(text);
    free(res);
}

/* The text form of a world's samples: write, parse, fit. */
static void test_calibrate_samples_text(void **state) {
    (void)state;
    CalibrateOptions opt;
    calibrate_options_quick(&opt);
    CalibrateWorld *w = calloc(2, sizeof *w);
    assert_non_null(w);
    /* Synthetic samples of a machine with alpha 3 us, beta 2 GB/s, and
     * GEMMs at 10 GFLOP/s with half_dim 32. */
    w[0].ndev = 2;
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        for (long b = 1024; b <= 1L << 20; b *= 4) {
            CalibrateSample *cs = &w[0].samples[w[0].nsamples++];
            cs->kind = (CommKind)k;
            cs->gsize = 2;
            cs->bytes = (double)b;
            cs->volume = calibrate_volume(cs->kind, cs->bytes, 2);
            cs->us = 3 + cs->volume / 2e3;
        }
    CalibrateCompute *c = &w[0].compute;
    for (int d = 16; d <= 64; d *= 2) {
        c->gemm_dim[c->ngemm] = d;
        c->gemm_us[c->ngemm++] = 2.0 * d * d * d / (1e4 * d / (d + 32.0));
    }
    c->mem_floats = 262144;
    c->mem_us = 100;
    c->vec_floats = 1024;
    c->vec_us = 0.5;
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    fprintf(f, "a line of mpiexec's before the samples\n");
    calibrate_world_write(&w[0], f);
    fclose(f);
    char err[256] = "";
    if (!calibrate_world_parse(text, &w[1], err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(w[1].ndev, 2);
    assert_int_equal(w[1].nsamples, w[0].nsamples);
    for (int i = 0; i < w[0].nsamples; ++i) {
        assert_int_equal(w[1].samples[i].kind, w[0].samples[i].kind);
        assert_true(w[1].samples[i].volume == w[0].samples[i].volume);
        assert_true(fabs(w[1].samples[i].us - w[0].samples[i].us) < 1e-6);
    }
    assert_int_equal(w[1].compute.ngemm, 3);
    assert_true(w[1].compute.mem_us == 100 && w[1].compute.vec_floats == 1024);

    CalibrateResult *res = malloc(sizeof *res);
    assert_non_null(res);
    if (!calibrate_fit_worlds(&opt, &w[1], CALIBRATE_MPI, 1.5, res, err, sizeof err))
        fail_msg("%s", err);
    assert_string_equal(res->profile.name, "cpu-mpi");
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        for (int l = 0; l < LINK_CLASS_COUNT; ++l) {
            assert_true(fabs(res->profile.link[k][l].alpha_us - 3) < 1e-3);
            assert_true(fabs(res->profile.link[k][l].beta_GBps - 2) < 1e-3);
        }
    assert_true(fabs(res->profile.peak_tflops - 0.01) < 1e-6);
    assert_true(fabs(res->profile.gemm_half_dim - 32) < 1e-3);
    assert_true(fabs(res->profile.mem_bandwidth_GBps - 8.0 * 262144 / 100 / 1e3) < 1e-9);
    free(res);

    /* Malformed text: the line at fault. */
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"comm p2p 1024 1\nend\n", "no 'primec-calibrate-samples 1' header"},
        {"primec-calibrate-samples 1 devices 0\nend\n", "line 1: bad header"},
        {"primec-calibrate-samples 1 devices 2\ncomm p2p 1024 1\n",
         "the samples end early (no 'end' line after line 2)"},
        {"primec-calibrate-samples 1 devices 2\ncomm bogus 1024 1\nend\n",
         "line 2: bad comm sample"},
        {"primec-calibrate-samples 1 devices 2\ncomm p2p 1024\nend\n",
         "line 2: unexpected 'comm p2p 1024'"},
        {"primec-calibrate-samples 1 devices 2\ngemm 16 -1\nend\n",
         "line 2: unexpected 'gemm 16 -1'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        err[0] = '\0';
        assert_int_equal(calibrate_world_parse(bad[i].text, &w[1], err, sizeof err), 0);
        assert_string_equal(err, bad[i].msg);
    }
    free(text);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_parse_good),
        cmocka_unit_test(test_profile_parse_errors),
        cmocka_unit_test(test_profile_load_shipped),
        cmocka_unit_test(test_profile_write_roundtrip),
        cmocka_unit_test(test_fit_alpha_beta),
        cmocka_unit_test(test_fit_gemm),
        cmocka_unit_test(test_cost_formulas),
        cmocka_unit_test(test_cost_square_overlaps),
        cmocka_unit_test(test_cost_row_allreduce),
        cmocka_unit_test(test_cost_events),
        cmocka_unit_test(test_cost_bytes_match_schedule),
        cmocka_unit_test(test_cost_training_memory),
        cmocka_unit_test(test_cost_pipeline),
        cmocka_unit_test(test_cost_print),
        cmocka_unit_test(test_calibrate_quick),
        cmocka_unit_test(test_calibrate_samples_text),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
