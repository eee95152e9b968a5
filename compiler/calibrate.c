/*
 * calibrate.c — `primec calibrate` and `primec cost` (calibrate.h).
 *
 * The measurements are calibrate_sweep.c's: in this process on
 * thread-devices (backend cpu), or in primec-calibrate-mpi under mpiexec
 * (backend mpi, calibrate_mpi.c). Either way they arrive as one
 * CalibrateWorld per world size, and everything from there on — the
 * fits, the profile, its comments, the summary — is shared.
 */
#define _POSIX_C_SOURCE 200809L
#include "calibrate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calibrate_mpi.h"
#include "cost.h"
#include "pipeline.h"
#include "prime_rt.h"

/* ------------------------------------------------------------------ */
/* Fits                                                                */

/* Weighted least squares over the basis functions selected by `use`
 * (bit j: x_j); solves the normal equations by Gaussian elimination.
 * Returns 0 when they are singular. */
static int wls(int nb, const double (*xs)[3], const double *y, int n, unsigned use, int weighted,
               double *coef) {
    double A[3][4] = {{0}};
    int idx[3], m = 0;
    for (int j = 0; j < nb; ++j)
        if (use & (1u << j))
            idx[m++] = j;
    for (int i = 0; i < n; ++i) {
        double w = weighted ? 1 / (y[i] * y[i]) : 1;
        for (int a = 0; a < m; ++a) {
            for (int b = 0; b < m; ++b)
                A[a][b] += w * xs[i][idx[a]] * xs[i][idx[b]];
            A[a][m] += w * xs[i][idx[a]] * y[i];
        }
    }
    for (int c = 0; c < m; ++c) {
        int piv = c;
        for (int r = c + 1; r < m; ++r)
            if (fabs(A[r][c]) > fabs(A[piv][c]))
                piv = r;
        if (fabs(A[piv][c]) < 1e-300)
            return 0;
        for (int k = 0; k <= m; ++k) {
            double t = A[c][k];
            A[c][k] = A[piv][k];
            A[piv][k] = t;
        }
        for (int r = 0; r < m; ++r) {
            if (r == c)
                continue;
            double f = A[r][c] / A[c][c];
            for (int k = c; k <= m; ++k)
                A[r][k] -= f * A[c][k];
        }
    }
    for (int j = 0; j < nb; ++j)
        coef[j] = 0;
    for (int a = 0; a < m; ++a) {
        coef[idx[a]] = A[a][m] / A[a][a];
        if (!isfinite(coef[idx[a]]))
            return 0;
    }
    return 1;
}

int calibrate_fit_alpha_beta(const double *x, const double *us, int n, double *alpha_us,
                             double *beta_GBps) {
    if (n < 2 || n > CALIBRATE_MAX_SAMPLES)
        return 0;
    double(*xs)[3] = malloc(sizeof(double[3]) * (size_t)n);
    if (!xs)
        return 0;
    for (int i = 0; i < n; ++i) {
        if (!(us[i] > 0)) {
            free(xs);
            return 0;
        }
        xs[i][0] = 1;
        xs[i][1] = x[i];
        xs[i][2] = 0;
    }
    /* Relative weights first; noisy small messages can tilt that fit's
     * slope below zero, and then plain least squares (which the large
     * messages dominate) decides the bandwidth. */
    double c[3] = {0, 0, 0};
    int ok = 0;
    for (int weighted = 1; weighted >= 0 && !(ok && c[1] > 0); --weighted) {
        ok = wls(2, (const double(*)[3])xs, us, n, 3u, weighted, c);
        if (ok && c[0] < 0)
            ok = wls(2, (const double(*)[3])xs, us, n, 2u, weighted, c);
    }
    free(xs);
    if (!ok || !(c[1] > 0))
        return 0;
    *alpha_us = c[0];
    *beta_GBps = 1 / (c[1] * 1e3);
    return 1;
}

int calibrate_fit_gemm(const double *dim, const double *us, int n, double *overhead_us,
                       double *peak_tflops, double *half_dim) {
    if (n < 2 || n > CALIBRATE_MAX_GEMMS)
        return 0;
    double xs[CALIBRATE_MAX_GEMMS][3];
    for (int i = 0; i < n; ++i) {
        if (!(us[i] > 0) || !(dim[i] > 0))
            return 0;
        xs[i][0] = 1;
        xs[i][1] = dim[i] * dim[i] * dim[i];
        xs[i][2] = dim[i] * dim[i];
    }
    /* Full model first; then without the terms that came out negative. */
    static const unsigned tries[] = {7u, 3u, 6u, 2u};
    double c[3] = {0, 0, 0};
    int ok = 0;
    for (size_t t = 0; t < sizeof tries / sizeof tries[0] && !ok; ++t) {
        int nb = (int)(tries[t] & 1u) + (int)(tries[t] >> 1 & 1u) + (int)(tries[t] >> 2 & 1u);
        if (n < nb)
            continue;
        ok = wls(3, (const double(*)[3])xs, us, n, tries[t], 1, c) && c[0] >= 0 && c[1] > 0 &&
             c[2] >= 0;
    }
    if (!ok)
        return 0;
    *overhead_us = c[0];
    *peak_tflops = 2 / c[1] * 1e-6;
    *half_dim = c[2] / c[1];
    return 1;
}

/* ------------------------------------------------------------------ */
/* Sweeps and fits                                                     */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double physical_memory_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    double kb = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %lf kB", &kb) == 1)
                break;
        fclose(f);
    }
    return kb > 0 ? kb * 1024 : 1e9;
}

static int largest_world(const CalibrateOptions *opt) {
    int largest = 0;
    for (int i = 1; i < opt->nworlds; ++i)
        if (opt->worlds[i] > opt->worlds[largest])
            largest = i;
    return largest;
}

/* Checks the worlds of opt: 1 to CALIBRATE_MAX_WORLDS of 2 to
 * CALIBRATE_MAX_DEVICES devices. */
static int check_worlds(const CalibrateOptions *opt, char *err, size_t errlen) {
    if (opt->nworlds < 1 || opt->nworlds > CALIBRATE_MAX_WORLDS) {
        snprintf(err, errlen, "bad calibration options");
        return 0;
    }
    for (int i = 0; i < opt->nworlds; ++i) {
        if (opt->worlds[i] < 2 || opt->worlds[i] > CALIBRATE_MAX_DEVICES) {
            snprintf(err, errlen, "a calibration world needs 2 to %d devices, not %d",
                     CALIBRATE_MAX_DEVICES, opt->worlds[i]);
            return 0;
        }
    }
    return 1;
}

/* How many times calibrate_run measures when the timings fit no
 * positive bandwidth or peak: on a loaded machine one sweep's collectives
 * can be all scheduling delay, and the next sweep's usually are not. */
#define CALIBRATE_ATTEMPTS 3

/* One sweep over every world, fitted; 0 with err set. *runtime_failed
 * tells a failure of the runtime (final) from a fit of noisy timings. */
static int calibrate_attempt(const CalibrateOptions *opt, double t_start, CalibrateResult *out,
                             int *runtime_failed, char *err, size_t errlen) {
    CalibrateWorld *worlds = calloc((size_t)opt->nworlds, sizeof *worlds);
    *runtime_failed = 1;
    if (!worlds) {
        snprintf(err, errlen, "out of memory");
        return 0;
    }
    int largest = largest_world(opt);
    for (int wi = 0; wi < opt->nworlds; ++wi) {
        int g = opt->worlds[wi];
        PrimeWorld *world = NULL;
        PrimeStatus st = prime_world_create(g, &world);
        if (st == PRIME_OK)
            st = calibrate_sweep_world(world, opt, wi == largest, &worlds[wi]);
        prime_world_destroy(world);
        if (st != PRIME_OK) {
            snprintf(err, errlen, "the runtime failed on %d thread-devices: %s", g,
                     prime_status_name(st));
            free(worlds);
            return 0;
        }
    }
    *runtime_failed = 0;
    int ok = calibrate_fit_worlds(opt, worlds, CALIBRATE_CPU, (now_us() - t_start) / 1e6, out, err,
                                  errlen);
    free(worlds);
    return ok;
}

int calibrate_run(const CalibrateOptions *opt, CalibrateResult *out, char *err, size_t errlen) {
    double t_start = now_us();
    if (!check_worlds(opt, err, errlen) || !calibrate_options_check(opt, err, errlen))
        return 0;
    for (int attempt = 1;; ++attempt) {
        int runtime_failed = 0;
        if (calibrate_attempt(opt, t_start, out, &runtime_failed, err, errlen)) {
            out->attempts = attempt;
            return 1;
        }
        if (runtime_failed || attempt == CALIBRATE_ATTEMPTS) {
            if (!runtime_failed) {
                size_t len = strlen(err);
                snprintf(err + len, errlen - len, " in %d sweeps", attempt);
            }
            return 0;
        }
    }
}

/* Fits time = alpha + volume / beta to the samples of `kind` (and of
 * world g only when g > 0). */
static int fit_kind(const CalibrateResult *res, CommKind kind, int g, LinkCost *lc,
                    double *rel_rms) {
    double x[CALIBRATE_MAX_SAMPLES] = {0}, y[CALIBRATE_MAX_SAMPLES] = {0};
    int n = 0;
    for (int i = 0; i < res->nsamples; ++i)
        if (res->samples[i].kind == kind && (g == 0 || res->samples[i].gsize == g)) {
            x[n] = res->samples[i].volume;
            y[n++] = res->samples[i].us;
        }
    if (!calibrate_fit_alpha_beta(x, y, n, &lc->alpha_us, &lc->beta_GBps))
        return 0;
    double ss = 0;
    for (int i = 0; i < n; ++i) {
        double pred = lc->alpha_us + x[i] / (lc->beta_GBps * 1e3);
        ss += (pred - y[i]) * (pred - y[i]) / (y[i] * y[i]);
    }
    *rel_rms = sqrt(ss / n);
    return 1;
}

int calibrate_fit_worlds(const CalibrateOptions *opt, const CalibrateWorld *worlds,
                         CalibrateBackend backend, double seconds, CalibrateResult *out, char *err,
                         size_t errlen) {
    memset(out, 0, sizeof *out);
    out->backend = backend;
    out->seconds = seconds;
    out->attempts = 1;
    if (!check_worlds(opt, err, errlen))
        return 0;
    for (int wi = 0; wi < opt->nworlds; ++wi)
        for (int i = 0; i < worlds[wi].nsamples && out->nsamples < CALIBRATE_MAX_SAMPLES; ++i)
            out->samples[out->nsamples++] = worlds[wi].samples[i];
    out->compute = worlds[largest_world(opt)].compute;
    const CalibrateCompute *c = &out->compute;

    Profile *p = &out->profile;
    char host[64] = "this machine";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "this machine");
    host[sizeof host - 1] = '\0';
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (backend == CALIBRATE_MPI) {
        snprintf(p->name, sizeof p->name, "cpu-mpi");
        snprintf(p->description, sizeof p->description,
                 "measured by primec calibrate --backend mpi on %s (%ld cores): one MPI process "
                 "per device, "
                 "all on this node",
                 host, cores);
    } else {
        snprintf(p->name, sizeof p->name, "cpu-threads");
        snprintf(p->description, sizeof p->description,
                 "measured by primec calibrate --backend cpu on %s (%ld cores): thread-devices of "
                 "one process",
                 host, cores);
    }
    /* Every device measured shares this node: no inter-node link was seen. */
    p->devices_per_node = 1024;
    for (int wi = 0; wi < opt->nworlds; ++wi) {
        for (int k = 0; k < COMM_KIND_COUNT; ++k) {
            LinkCost *lc = &out->world_fit[wi][k];
            double rms;
            if (!fit_kind(out, (CommKind)k, opt->worlds[wi], lc, &rms))
                lc->alpha_us = lc->beta_GBps = 0;
        }
    }
    for (int k = 0; k < COMM_KIND_COUNT; ++k) {
        LinkCost lc;
        if (!fit_kind(out, (CommKind)k, 0, &lc, &out->fit_rel_rms[k])) {
            snprintf(err, errlen,
                     "the %s timings give no positive bandwidth (too few or too noisy points)",
                     comm_kind_name((CommKind)k));
            return 0;
        }
        p->link[k][LINK_INTRA] = lc;
        p->link[k][LINK_INTER] = lc;
    }
    double o, peak, half;
    if (!calibrate_fit_gemm(c->gemm_dim, c->gemm_us, c->ngemm, &o, &peak, &half)) {
        snprintf(err, errlen, "the GEMM timings give no positive peak");
        return 0;
    }
    p->kernel_overhead_us = o;
    p->peak_tflops = peak;
    p->gemm_half_dim = half;
    p->gemm_eff_max = 1;
    double ss = 0;
    for (int i = 0; i < c->ngemm; ++i) {
        double d = c->gemm_dim[i];
        double pred = o + 2 * d * d * d / (peak * 1e6 * profile_gemm_efficiency(p, d));
        ss += (pred - c->gemm_us[i]) * (pred - c->gemm_us[i]) / (c->gemm_us[i] * c->gemm_us[i]);
    }
    out->gemm_rel_rms = sqrt(ss / c->ngemm);
    p->mem_bandwidth_GBps = c->mem_us > 0 ? 8.0 * c->mem_floats / c->mem_us / 1e3 : 1;
    p->vector_tflops = c->vec_us > 0 ? c->vec_floats / c->vec_us / 1e6 : 1e-3;
    p->mem_capacity_GB = physical_memory_bytes() / opt->worlds[largest_world(opt)] / 1e9;
    return 1;
}

void calibrate_write_profile(const CalibrateResult *res, const CalibrateOptions *opt, FILE *out) {
    char comment[8192];
    size_t used = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (used < sizeof comment) {                                                               \
            int w_ = snprintf(comment + used, sizeof comment - used, __VA_ARGS__);                 \
            used += w_ > 0 ? (size_t)w_ : 0;                                                       \
        }                                                                                          \
    } while (0)
    if (res->backend == CALIBRATE_MPI) {
        ADD("Measured by `primec calibrate --backend mpi` (compiler/calibrate.c, "
            "primec-calibrate-mpi)\n");
        ADD("in %.1f s. Devices are MPI processes (runtime prime_rt_mpi), all started by mpiexec\n",
            res->seconds);
        ADD("on this one node, so every link is MPI's shared-memory transport: the inter rows\n");
        ADD("repeat the intra rows and devices_per_node only says that all devices share one "
            "node.\n");
    } else {
        ADD("Measured by `primec calibrate --backend cpu` (compiler/calibrate.c) in %.1f s.\n",
            res->seconds);
        ADD("Devices are threads of one process (runtime prime_rt): every link is the\n");
        ADD("threads transport, so the inter rows repeat the intra rows and\n");
        ADD("devices_per_node only says that all devices share one node.\n");
    }
    ADD("Communication: ring shifts (p2p), all-reduce, reduce-scatter, all-gather on\n");
    ADD("worlds of");
    for (int i = 0; i < opt->nworlds; ++i)
        ADD(" %d", opt->worlds[i]);
    ADD(" devices, %ld .. %ld bytes (x4 steps), median of %d repetitions of the\n", opt->min_bytes,
        opt->max_bytes, opt->reps);
    ADD("slowest device; fit time = alpha + volume / beta weighted by 1/time^2, volume =\n");
    ADD("bytes (p2p), 2(g-1)/g bytes (allreduce), (g-1)/g bytes (reduce_scatter, allgather).\n");
    ADD("Relative rms residuals:");
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        ADD(" %s %.1f%%", comm_kind_name((CommKind)k), 100 * res->fit_rel_rms[k]);
    ADD(".\n");
    if (opt->nworlds > 1) {
        ADD("Each world alone (alpha_us/beta_GBps):");
        for (int k = 0; k < COMM_KIND_COUNT; ++k) {
            ADD("\n  %-14s", comm_kind_name((CommKind)k));
            for (int i = 0; i < opt->nworlds; ++i)
                ADD("  %d devices %.1f/%.3g", opt->worlds[i], res->world_fit[i][k].alpha_us,
                    res->world_fit[i][k].beta_GBps);
        }
        ADD("\n");
    }
    ADD("Compute: square sgemm (OpenBLAS, one thread per device) %d .. %d with every device\n",
        opt->gemm_min, opt->gemm_max);
    ADD("of the largest world computing at once; fit time = overhead + 2d^3 / (peak eff(d)),\n");
    ADD("eff(d) = d / (d + half_dim), relative rms residual %.1f%%. Memory bandwidth: a\n",
        100 * res->gemm_rel_rms);
    ADD("memcpy of %.0f floats (8 bytes per element); vector rate: prime_add (1 flop per\n",
        res->compute.mem_floats);
    ADD("element, what an accumulator merge runs) on %.0f floats in cache.\n",
        res->compute.vec_floats);
    ADD("mem_capacity_GB: physical memory divided among the devices of the largest world.\n");
    ADD("\nsamples (kind devices bytes us):\n");
    for (int i = 0; i < res->nsamples; ++i)
        ADD("  %-14s %2d %10.0f %12.2f\n", comm_kind_name(res->samples[i].kind),
            res->samples[i].gsize, res->samples[i].bytes, res->samples[i].us);
    ADD("gemm samples (d us):\n");
    for (int i = 0; i < res->compute.ngemm; ++i)
        ADD("  %4.0f %12.2f\n", res->compute.gemm_dim[i], res->compute.gemm_us[i]);
#undef ADD
    if (used >= sizeof comment)
        comment[sizeof comment - 1] = '\0';
    /* Drop a trailing newline: profile_write adds one per line. */
    size_t len = strlen(comment);
    if (len && comment[len - 1] == '\n')
        comment[len - 1] = '\0';
    profile_write(&res->profile, comment, out);
}

/* ------------------------------------------------------------------ */
/* Commands                                                            */

static void calibrate_usage(FILE *out) {
    fprintf(
        out,
        "usage: primec calibrate [--backend cpu|mpi] [-o FILE] [--worlds N,N...] [--quick]\n"
        "                        [--mpiexec CMD]\n"
        "  measure this machine with the runtime and write a profile for the cost model\n"
        "  (docs/cost-model.md); a summary of the fits goes to standard error\n"
        "  --backend cpu   thread-devices of one process (the default; profile cpu-threads)\n"
        "  --backend mpi   one MPI process per device (profile cpu-mpi): runs\n"
        "                  " CALIBRATE_MPI_HELPER " (next to primec) with mpiexec once per\n"
        "                  world, all processes on this node (the inter rows repeat the intra)\n"
        "  -o FILE         write the profile to FILE (default: standard output)\n"
        "  --worlds LIST   device counts to measure and fit together (default 2,4);\n"
        "                  compute is measured on the largest\n"
        "  --quick         a smaller sweep (less accurate; well under a second with cpu,\n"
        "                  a second or two with mpi)\n"
        "  --mpiexec CMD   mpi: the MPI launcher, a path or a name in PATH (default mpiexec)\n");
}

int calibrate_main(int argc, char **argv) {
    const char *backend = "cpu", *path = NULL, *worlds = NULL, *mpiexec = NULL;
    int quick = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            calibrate_usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            quick = 1;
        } else if ((strcmp(a, "--backend") == 0 || strcmp(a, "-o") == 0 ||
                    strcmp(a, "--worlds") == 0 || strcmp(a, "--mpiexec") == 0) &&
                   i + 1 < argc) {
            if (strcmp(a, "-o") == 0)
                path = argv[++i];
            else if (strcmp(a, "--worlds") == 0)
                worlds = argv[++i];
            else if (strcmp(a, "--mpiexec") == 0)
                mpiexec = argv[++i];
            else
                backend = argv[++i];
        } else {
            fprintf(stderr, "primec: error: calibrate: unexpected argument '%s'\n", a);
            calibrate_usage(stderr);
            return 2;
        }
    }
    if (strcmp(backend, "cpu") != 0 && strcmp(backend, "mpi") != 0) {
        fprintf(stderr, "primec: error: calibrate: unknown backend '%s' (backends: cpu, mpi)\n",
                backend);
        return 2;
    }
    if (mpiexec && strcmp(backend, "mpi") != 0) {
        fprintf(stderr, "primec: error: calibrate: --mpiexec goes with --backend mpi\n");
        return 2;
    }
    CalibrateOptions opt;
    if (quick)
        calibrate_options_quick(&opt);
    else
        calibrate_options_default(&opt);
    if (worlds) {
        opt.nworlds = 0;
        const char *s = worlds;
        for (;;) {
            char *end;
            long n = strtol(s, &end, 10);
            if (end == s || n < 2 || n > CALIBRATE_MAX_DEVICES ||
                opt.nworlds == CALIBRATE_MAX_WORLDS || (*end && *end != ',')) {
                fprintf(
                    stderr,
                    "primec: error: calibrate: --worlds wants up to %d device counts of 2 to %d, "
                    "e.g. 2,4; got '%s'\n",
                    CALIBRATE_MAX_WORLDS, CALIBRATE_MAX_DEVICES, worlds);
                return 2;
            }
            opt.worlds[opt.nworlds++] = (int)n;
            if (!*end)
                break;
            s = end + 1;
        }
    }
    CalibrateResult *res = malloc(sizeof *res);
    CalibrateWorld *measured = calloc(CALIBRATE_MAX_WORLDS, sizeof *measured);
    if (!res || !measured) {
        fprintf(stderr, "primec: error: calibrate: out of memory\n");
        free(res);
        free(measured);
        return 3;
    }
    char err[1024];
    int rc = 0;
    if (strcmp(backend, "mpi") == 0) {
        double t_start = now_us();
        rc = calibrate_mpi_sweep(&opt, mpiexec, NULL, measured, err, sizeof err);
        if (rc == 0 && !calibrate_fit_worlds(&opt, measured, CALIBRATE_MPI,
                                             (now_us() - t_start) / 1e6, res, err, sizeof err))
            rc = 3;
    } else if (!calibrate_run(&opt, res, err, sizeof err)) {
        rc = 3;
    }
    free(measured);
    if (rc != 0) {
        fprintf(stderr, "primec: error: calibrate: %s\n", err);
        free(res);
        return rc;
    }
    FILE *out = stdout;
    if (path && !(out = fopen(path, "w"))) {
        fprintf(stderr, "primec: error: cannot write '%s': %s\n", path, strerror(errno));
        free(res);
        return 2;
    }
    calibrate_write_profile(res, &opt, out);
    int bad = ferror(out);
    if (path)
        bad |= fclose(out) != 0;
    else
        bad |= fflush(out) != 0;
    if (bad) {
        fprintf(stderr, "primec: error: cannot write '%s'\n", path ? path : "standard output");
        free(res);
        return 2;
    }
    const Profile *p = &res->profile;
    fprintf(stderr, "calibrated in %.1f s%s%s\n", res->seconds, path ? ", profile written to " : "",
            path ? path : "");
    if (res->attempts > 1)
        fprintf(stderr,
                "  (%d sweeps: the timings of the first fitted no positive bandwidth or peak; "
                "a loaded machine?)\n",
                res->attempts);
    fprintf(stderr, "  %-15s %10s %10s %8s\n", "kind", "alpha_us", "beta_GBps", "rms");
    for (int k = 0; k < COMM_KIND_COUNT; ++k)
        fprintf(stderr, "  %-15s %10.2f %10.3f %7.1f%%\n", comm_kind_name((CommKind)k),
                p->link[k][LINK_INTRA].alpha_us, p->link[k][LINK_INTRA].beta_GBps,
                100 * res->fit_rel_rms[k]);
    for (int i = 0; i < opt.nworlds && opt.nworlds > 1; ++i) {
        fprintf(stderr, "  %d devices alone:", opt.worlds[i]);
        for (int k = 0; k < COMM_KIND_COUNT; ++k)
            fprintf(stderr, " %s %.1f/%.3g", comm_kind_name((CommKind)k),
                    res->world_fit[i][k].alpha_us, res->world_fit[i][k].beta_GBps);
        fprintf(stderr, "\n");
    }
    fprintf(stderr,
            "  gemm: peak %.1f GFLOP/s per device, half efficiency at d = %.0f, overhead %.2f us "
            "(rms %.1f%%)\n",
            p->peak_tflops * 1e3, p->gemm_half_dim, p->kernel_overhead_us, 100 * res->gemm_rel_rms);
    fprintf(stderr, "  memory %.2f GB/s per device, vector %.2f GFLOP/s per device\n",
            p->mem_bandwidth_GBps, p->vector_tflops * 1e3);
    free(res);
    return 0;
}
