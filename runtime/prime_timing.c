/*
 * prime_timing.c — the time report of an emitted program (see
 * prime_timing.h and docs/timing.md).
 */
#define _POSIX_C_SOURCE 200809L

#include "prime_timing.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Rows per repeat: the phases and the whole step. */
static size_t rows(const PrimeTiming *t) {
    return (size_t)t->nphases + 1;
}

int prime_timing_init(PrimeTiming *t, const PrimeProgram *prog, int repeat) {
    memset(t, 0, sizeof *t);
    t->prog = prog;
    t->ndev = prog->ndev;
    t->nphases = prog->nphases;
    t->cap = repeat > 0 ? repeat : 1;
    size_t ncur = (size_t)t->ndev * (size_t)t->nphases + 1;
    size_t nrec = (size_t)t->cap * rows(t);
    t->cur = calloc(ncur, sizeof *t->cur);
    t->wall = calloc(nrec, sizeof(double));
    t->kernel = calloc(nrec, sizeof(double));
    t->exposed = calloc(nrec, sizeof(double));
    t->overhead = calloc(nrec, sizeof(double));
    t->cpu = calloc((size_t)t->cap, sizeof(double));
    if (!t->cur || !t->wall || !t->kernel || !t->exposed || !t->overhead || !t->cpu) {
        prime_timing_free(t);
        return 0;
    }
    return 1;
}

void prime_timing_free(PrimeTiming *t) {
    free(t->cur);
    free(t->wall);
    free(t->kernel);
    free(t->exposed);
    free(t->overhead);
    free(t->cpu);
    memset(t, 0, sizeof *t);
}

static double process_cpu(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void prime_timing_start(PrimeTiming *t) {
    memset(t->cur, 0, sizeof *t->cur * (size_t)t->ndev * (size_t)t->nphases);
    t->cpu0 = process_cpu();
}

PrimeSchedStats *prime_timing_slot(PrimeTiming *t, int rank, int phase) {
    return &t->cur[(size_t)rank * (size_t)t->nphases + (size_t)phase];
}

void prime_timing_collect(PrimeTiming *t) {
    if (t->repeat >= t->cap)
        return;
    t->cpu[t->repeat] = process_cpu() - t->cpu0;
    size_t base = (size_t)t->repeat * rows(t);
    double step_wall = 0, step_kernel = 0, step_exposed = 0, step_over = 0;
    for (int r = 0; r < t->ndev; ++r) {
        double wall = 0, kernel = 0, exposed = 0;
        for (int p = 0; p < t->nphases; ++p) {
            const PrimeSchedStats *s = prime_timing_slot(t, r, p);
            wall += (double)s->wall_ns * 1e-9;
            kernel += (double)s->kernel_ns * 1e-9;
            exposed += (double)s->comm_ns * 1e-9;
        }
        step_wall = wall > step_wall ? wall : step_wall;
        step_kernel += kernel / t->ndev;
        step_exposed += exposed / t->ndev;
        step_over += (wall - kernel - exposed) / t->ndev;
    }
    for (int p = 0; p < t->nphases; ++p) {
        double wall = 0, kernel = 0, exposed = 0, over = 0;
        for (int r = 0; r < t->ndev; ++r) {
            const PrimeSchedStats *s = prime_timing_slot(t, r, p);
            double w = (double)s->wall_ns * 1e-9, k = (double)s->kernel_ns * 1e-9;
            double c = (double)s->comm_ns * 1e-9;
            wall = w > wall ? w : wall;
            kernel += k / t->ndev;
            exposed += c / t->ndev;
            over += (w - k - c) / t->ndev;
        }
        t->wall[base + (size_t)p] = wall;
        t->kernel[base + (size_t)p] = kernel;
        t->exposed[base + (size_t)p] = exposed;
        t->overhead[base + (size_t)p] = over;
    }
    size_t step = base + (size_t)t->nphases;
    t->wall[step] = step_wall;
    t->kernel[step] = step_kernel;
    t->exposed[step] = step_exposed;
    t->overhead[step] = step_over;
    t->repeat++;
}

/* For sorting repeat indices by one row's wall time. */
typedef struct Key {
    double wall;
    int repeat;
} Key;

static int cmp_key(const void *a, const void *b) {
    const Key *x = a, *y = b;
    if (x->wall != y->wall)
        return (x->wall > y->wall) - (x->wall < y->wall);
    return (x->repeat > y->repeat) - (x->repeat < y->repeat);
}

/* The repeat whose wall time in row `row` is the median (the lower one
 * of the middle two for an even count); the report takes every time of
 * the row from that repeat, so that they stay consistent. */
static int median_repeat(const PrimeTiming *t, int row) {
    if (t->repeat <= 1)
        return 0;
    Key small[64];
    Key *k = t->repeat <= 64 ? small : malloc(sizeof(Key) * (size_t)t->repeat);
    if (!k)
        return t->repeat - 1;
    for (int i = 0; i < t->repeat; ++i) {
        k[i].wall = t->wall[(size_t)i * rows(t) + (size_t)row];
        k[i].repeat = i;
    }
    qsort(k, (size_t)t->repeat, sizeof *k, cmp_key);
    int m = k[(t->repeat - 1) / 2].repeat;
    if (k != small)
        free(k);
    return m;
}

/* One row of the report, medians and counts of the last repeat. */
typedef struct Row {
    double wall, kernel, exposed, overhead, flops, cpu;
    long kernels, sends, collectives, steps, runs, tiles_filled, tiles_unfilled;
} Row;

/* A phase's FLOPs, kernels and transfers summed over the ranks, steps of
 * its busiest rank; row nphases: the whole step. */
static Row row_of(const PrimeTiming *t, int row) {
    Row w;
    memset(&w, 0, sizeof w);
    size_t at = (size_t)median_repeat(t, row) * rows(t) + (size_t)row;
    w.wall = t->wall[at];
    w.kernel = t->kernel[at];
    w.exposed = t->exposed[at];
    w.overhead = t->overhead[at];
    w.cpu = row == t->nphases ? t->cpu[median_repeat(t, row)] : 0;
    int lo = row < t->nphases ? row : 0, hi = row < t->nphases ? row + 1 : t->nphases;
    for (int p = lo; p < hi; ++p) {
        double kf = t->prog->phases[p]->kernel_flops;
        for (int r = 0; r < t->ndev; ++r) {
            const PrimeSchedStats *s = &t->cur[(size_t)r * (size_t)t->nphases + (size_t)p];
            w.kernels += s->kernels;
            w.sends += s->sends;
            w.collectives += s->collectives;
            w.tiles_filled += s->tiles_filled;
            w.tiles_unfilled += s->tiles_unfilled;
            w.flops += (double)s->kernels * kf;
            if (row < t->nphases && s->steps > w.steps)
                w.steps = s->steps;
        }
    }
    return w;
}

/* How many times a phase runs in one training step (layer copies). */
static long runs_of(const PrimeProgram *prog, int phase) {
    if (!prog->runs)
        return 1;
    for (int r = 0; r < prog->nruns; ++r)
        if (phase >= prog->runs[r].first && phase < prog->runs[r].first + prog->runs[r].len)
            return prog->runs[r].repeat;
    return 0;
}

static double gflops(double flops, double seconds) {
    return seconds > 0 ? flops / seconds * 1e-9 : 0;
}

static double pct(double part, double whole) {
    return whole > 0 ? 100 * part / whole : 0;
}

void prime_timing_print(const PrimeTiming *t, FILE *out) {
    if (!out || t->repeat == 0)
        return;
    Row s = row_of(t, t->nphases);
    fprintf(out,
            "time per training step (median of %d run%s): %.3f ms, %.3g GFLOP/s of %.4g MFLOP\n",
            t->repeat, t->repeat == 1 ? "" : "s", s.wall * 1e3, gflops(s.flops, s.wall),
            s.flops * 1e-6);
    fprintf(out,
            "  per device: kernels %.3f ms (%.0f%%), exposed communication %.3f ms (%.0f%%), "
            "schedule overhead %.3f ms (%.0f%%)\n",
            s.kernel * 1e3, pct(s.kernel, s.wall), s.exposed * 1e3, pct(s.exposed, s.wall),
            s.overhead * 1e3, pct(s.overhead, s.wall));
    fprintf(out, "  processor time of this process: %.3f ms; BLAS kernels: %s\n", s.cpu * 1e3,
            prime_blas_core() ? prime_blas_core() : "unknown");
    fprintf(out, "%-28s %4s %5s %10s %10s %9s %10s %10s %10s\n", "phase", "runs", "steps",
            "wall us", "step us", "GFLOP/s", "kernel us", "exposed us", "overhead us");
    for (int p = 0; p < t->nphases; ++p) {
        Row w = row_of(t, p);
        long steps = w.steps ? w.steps : 1;
        fprintf(out, "%-28.28s %4ld %5ld %10.1f %10.2f %9.3g %10.1f %10.1f %10.1f\n",
                t->prog->phases[p]->name, runs_of(t->prog, p), w.steps, w.wall * 1e6,
                w.wall * 1e6 / (double)steps, gflops(w.flops, w.wall), w.kernel * 1e6,
                w.exposed * 1e6, w.overhead * 1e6);
    }
}

/* The JSON fields of one row (times in seconds). */
static void json_row(FILE *js, const Row *w) {
    fprintf(js,
            "\"wall_time\": %.9g, \"flops\": %.17g, \"gflops\": %.9g, \"kernel_time\": %.9g, "
            "\"exposed_comm_time\": %.9g, \"overhead_time\": %.9g, \"kernels\": %ld, \"sends\": "
            "%ld, \"collectives\": %ld, \"tiles_filled\": %ld, \"tiles_unfilled\": %ld",
            w->wall, w->flops, gflops(w->flops, w->wall), w->kernel, w->exposed, w->overhead,
            w->kernels, w->sends, w->collectives, w->tiles_filled, w->tiles_unfilled);
}

void prime_timing_json(const PrimeTiming *t, FILE *js) {
    if (!js || t->repeat == 0)
        return;
    Row s = row_of(t, t->nphases);
    fprintf(js,
            ", \"step_time\": %.9g, \"timing\": {\"repeat\": %d, \"process_cpu_time\": %.9g, "
            "\"blas_core\": \"%s\", ",
            s.wall, t->repeat, s.cpu, prime_blas_core() ? prime_blas_core() : "");
    json_row(js, &s);
    fprintf(js, ", \"phases\": [");
    for (int p = 0; p < t->nphases; ++p) {
        Row w = row_of(t, p);
        long steps = w.steps ? w.steps : 1;
        fprintf(js, "%s{\"name\": \"%s\", \"runs\": %ld, \"steps\": %ld, \"step_time\": %.9g, ",
                p ? ", " : "", t->prog->phases[p]->name, runs_of(t->prog, p), w.steps,
                w.wall / (double)steps);
        json_row(js, &w);
        fprintf(js, "}");
    }
    fprintf(js, "]}");
}

long prime_timing_rank_sends(const PrimeTiming *t, int rank) {
    long n = 0;
    for (int p = 0; p < t->nphases; ++p)
        n += t->cur[(size_t)rank * (size_t)t->nphases + (size_t)p].sends;
    return n;
}

long prime_timing_rank_collectives(const PrimeTiming *t, int rank) {
    long n = 0;
    for (int p = 0; p < t->nphases; ++p)
        n += t->cur[(size_t)rank * (size_t)t->nphases + (size_t)p].collectives;
    return n;
}
