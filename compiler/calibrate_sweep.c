/*
 * calibrate_sweep.c — the sweeps of `primec calibrate` (calibrate_sweep.h),
 * compiled against either runtime backend.
 *
 * Every device writes the start and end times of its repetitions into
 * its own block of one array (block r: rank r); after the run,
 * prime_world_share completes the array on every process (threads: the
 * blocks are already shared). All buffers are allocated, and the devices
 * agree that every allocation succeeded, before the first measurement,
 * so that a failed allocation stops every device at the same place
 * instead of leaving the others in a collective.
 *
 * Rank 0 moves the progress line (runtime/prime_progress.h) after every
 * series; it shows only when stdout is a terminal.
 */
#define _POSIX_C_SOURCE 200809L
#include "calibrate_sweep.h"

#include "prime_progress.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VEC_FLOATS 1024
#define VEC_ITERS 2000
#define TAG_AGREE 99
#define TAG_FIRST 100

void calibrate_options_default(CalibrateOptions *opt) {
    memset(opt, 0, sizeof *opt);
    opt->nworlds = 2;
    opt->worlds[0] = 2;
    opt->worlds[1] = 4;
    opt->min_bytes = 1L << 10;
    opt->max_bytes = 16L << 20;
    opt->reps = 15;
    opt->gemm_min = 16;
    opt->gemm_max = 512;
    opt->mem_floats = 4L << 20;
}

void calibrate_options_quick(CalibrateOptions *opt) {
    calibrate_options_default(opt);
    opt->nworlds = 1;
    opt->worlds[0] = 2;
    opt->max_bytes = 1L << 20;
    opt->reps = 5;
    opt->gemm_max = 64;
    opt->mem_floats = 256L << 10;
}

int calibrate_options_check(const CalibrateOptions *opt, char *err, size_t errlen) {
    if (opt->reps < 1 || opt->reps > 255 || opt->min_bytes < 4 || opt->max_bytes < opt->min_bytes ||
        opt->max_bytes > (1L << 30) || opt->gemm_min < 1 || opt->gemm_max < opt->gemm_min ||
        opt->gemm_max > 8192 || opt->mem_floats < VEC_FLOATS || opt->mem_floats > (1L << 30)) {
        snprintf(err, errlen, "bad calibration options");
        return 0;
    }
    return 1;
}

double calibrate_volume(CommKind kind, double bytes, int g) {
    switch (kind) {
    case COMM_P2P:
        return bytes;
    case COMM_ALLREDUCE:
        return 2.0 * (g - 1) / g * bytes;
    default:
        return (double)(g - 1) / g * bytes;
    }
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* A series is one timed point: (kind, size), a GEMM size, the memcpy or
 * the vector add. times[((rank * nseries + series) * reps + rep) * 2 + {0, 1}]. */
typedef struct Sweep {
    const CalibrateOptions *opt;
    int ndev;
    int nsizes;
    long sizes[CALIBRATE_MAX_SIZES];
    int compute; /* run the GEMM and memory sweeps too */
    int ngemm;
    int dims[CALIBRATE_MAX_GEMMS];
    long giters[CALIBRATE_MAX_GEMMS]; /* GEMMs per repetition */
    int nseries;
    double *times;
    PrimeProgress progress; /* rank 0 only */
    long done;              /* series rank 0 finished */
    char label[48];
} Sweep;

/* Rank 0: one more series done. */
static void series_done(Sweep *w, int rank) {
    if (rank == 0)
        prime_progress_update(&w->progress, ++w->done);
}

static int series_comm(const Sweep *w, int k, int s) {
    return k * w->nsizes + s;
}
static int series_gemm(const Sweep *w, int x) {
    return COMM_KIND_COUNT * w->nsizes + x;
}
static int series_mem(const Sweep *w) {
    return series_gemm(w, w->ngemm);
}
static int series_vec(const Sweep *w) {
    return series_mem(w) + 1;
}

static void record(Sweep *w, int rank, int series, int rep, double t0, double t1) {
    if (rep < 0) /* the warm-up */
        return;
    double *at =
        &w->times[(((size_t)rank * (size_t)w->nseries + (size_t)series) * (size_t)w->opt->reps +
                   (size_t)rep) *
                  2];
    at[0] = t0;
    at[1] = t1;
}

static PrimeStatus comm_op(PrimeDev *dev, int kind, const int *group, int g, float *a, float *b,
                           size_t n, int tag) {
    int r = prime_dev_rank(dev);
    switch (kind) {
    case COMM_P2P: {
        PrimeReq rq, sq;
        PrimeStatus st = prime_irecv(dev, (r + g - 1) % g, tag, b, n, &rq);
        if (st == PRIME_OK)
            st = prime_isend(dev, (r + 1) % g, tag, a, n, PRIME_BYTES_SHIFT, &sq);
        else
            return st;
        PrimeStatus w1 = prime_wait(dev, &rq);
        PrimeStatus w2 = st == PRIME_OK ? prime_wait(dev, &sq) : st;
        return w1 != PRIME_OK ? w1 : w2;
    }
    case COMM_ALLREDUCE:
        return prime_allreduce_sum(dev, group, g, a, n, tag);
    case COMM_REDUCE_SCATTER:
        return prime_reduce_scatter_sum(dev, group, g, a, n, tag);
    default:
        return prime_allgather(dev, group, g, a, n, tag);
    }
}

static void sweep_rank(PrimeDev *dev, void *arg) {
    Sweep *w = arg;
    const CalibrateOptions *opt = w->opt;
    const int r = prime_dev_rank(dev), g = w->ndev;
    int group[CALIBRATE_MAX_DEVICES];
    for (int i = 0; i < g; ++i)
        group[i] = i;
    size_t nmax = (size_t)(opt->max_bytes / 4);
    size_t gmax = w->compute ? (size_t)opt->gemm_max * (size_t)opt->gemm_max : 0;
    size_t mem_n = w->compute ? (size_t)opt->mem_floats : 0;
    float *a = prime_alloc(dev, nmax), *b = prime_alloc(dev, nmax);
    float *ga = NULL, *gb = NULL, *gc = NULL, *ma = NULL, *mb = NULL;
    if (w->compute) {
        ga = prime_alloc(dev, gmax);
        gb = prime_alloc(dev, gmax);
        gc = prime_alloc(dev, gmax);
        ma = prime_alloc(dev, mem_n);
        mb = prime_alloc(dev, mem_n);
    }
    /* Every device learns whether any allocation failed. */
    float failed = !a || !b || (w->compute && (!ga || !gb || !gc || !ma || !mb));
    PrimeStatus st = prime_allreduce_sum(dev, group, g, &failed, 1, TAG_AGREE);
    if (st != PRIME_OK || failed > 0)
        goto out;

    for (int k = 0; k < COMM_KIND_COUNT && st == PRIME_OK; ++k) {
        for (int s = 0; s < w->nsizes && st == PRIME_OK; ++s) {
            size_t n = (size_t)(w->sizes[s] / 4);
            for (int rep = -1; rep < opt->reps && st == PRIME_OK; ++rep) {
                prime_barrier(dev);
                double t0 = now_us();
                st = comm_op(dev, k, group, g, a, b, n, TAG_FIRST + series_comm(w, k, s));
                record(w, r, series_comm(w, k, s), rep, t0, now_us());
            }
            series_done(w, r);
        }
    }
    if (w->compute && st == PRIME_OK) {
        prime_fill_random(ga, gmax, 11 + (uint64_t)r);
        prime_fill_random(gb, gmax, 23 + (uint64_t)r);
        for (int x = 0; x < w->ngemm; ++x) {
            int d = w->dims[x];
            for (int rep = -1; rep < opt->reps; ++rep) {
                prime_barrier(dev);
                double t0 = now_us();
                for (long it = 0; it < w->giters[x]; ++it)
                    prime_gemm(0, 0, d, d, d, 1.0f, ga, d, gb, d, 0.0f, gc, d);
                record(w, r, series_gemm(w, x), rep, t0, now_us());
            }
            series_done(w, r);
        }
        for (int rep = -1; rep < opt->reps; ++rep) {
            prime_barrier(dev);
            double t0 = now_us();
            memcpy(ma, mb, mem_n * sizeof(float));
            record(w, r, series_mem(w), rep, t0, now_us());
        }
        series_done(w, r);
        for (int rep = -1; rep < opt->reps; ++rep) {
            prime_barrier(dev);
            double t0 = now_us();
            for (int it = 0; it < VEC_ITERS; ++it)
                prime_add(ma, mb, VEC_FLOATS);
            record(w, r, series_vec(w), rep, t0, now_us());
        }
        series_done(w, r);
    }
out:
    prime_free(dev, a, nmax);
    prime_free(dev, b, nmax);
    if (w->compute) {
        prime_free(dev, ga, gmax);
        prime_free(dev, gb, gmax);
        prime_free(dev, gc, gmax);
        prime_free(dev, ma, mem_n);
        prime_free(dev, mb, mem_n);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over repetitions of the span from the first device's start to
 * the last device's end. Devices that share cores run one after another,
 * and a device timing itself would not see the time it waited for a
 * core. */
static double median_span(const Sweep *w, int series) {
    double m[256];
    int n = w->opt->reps < 256 ? w->opt->reps : 256;
    for (int rep = 0; rep < n; ++rep) {
        double lo = 0, hi = 0;
        for (int r = 0; r < w->ndev; ++r) {
            const double *x = &w->times[(((size_t)r * (size_t)w->nseries + (size_t)series) *
                                             (size_t)w->opt->reps +
                                         (size_t)rep) *
                                        2];
            if (r == 0 || x[0] < lo)
                lo = x[0];
            if (r == 0 || x[1] > hi)
                hi = x[1];
        }
        m[rep] = hi - lo;
    }
    qsort(m, (size_t)n, sizeof m[0], cmp_double);
    return n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
}

PrimeStatus calibrate_sweep_world(PrimeWorld *world, const CalibrateOptions *opt, int compute,
                                  CalibrateWorld *out) {
    memset(out, 0, sizeof *out);
    char err[64];
    int g = prime_world_size(world);
    if (g < 1 || g > CALIBRATE_MAX_DEVICES || !calibrate_options_check(opt, err, sizeof err))
        return PRIME_ERR_ARG;
    Sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.opt = opt;
    sw.ndev = g;
    sw.compute = compute;
    for (long s = opt->min_bytes; s <= opt->max_bytes && sw.nsizes < CALIBRATE_MAX_SIZES; s *= 4)
        sw.sizes[sw.nsizes++] = s;
    for (int d = opt->gemm_min; compute && d <= opt->gemm_max && sw.ngemm < CALIBRATE_MAX_GEMMS;
         d *= 2) {
        /* Enough GEMMs per repetition to take about a millisecond. */
        double flops = 2.0 * d * d * d;
        sw.giters[sw.ngemm] = flops < 2e7 ? (long)(2e7 / flops) : 1;
        sw.dims[sw.ngemm++] = d;
    }
    sw.nseries = series_vec(&sw) + 1;
    size_t per_rank = (size_t)sw.nseries * (size_t)opt->reps * 2;
    sw.times = calloc(per_rank * (size_t)g, sizeof(double));
    if (!sw.times)
        return PRIME_ERR_NOMEM;
    snprintf(sw.label, sizeof sw.label, "calibrate on %d devices", g);
    prime_progress_start(&sw.progress, stdout,
                         (long)COMM_KIND_COUNT * sw.nsizes + (compute ? sw.ngemm + 2 : 0),
                         sw.label);
    PrimeStatus st = prime_world_run(world, sweep_rank, &sw);
    prime_progress_end(&sw.progress);
    /* Every process takes part in the share, whatever its status. */
    PrimeStatus shared = prime_world_share(world, sw.times, per_rank * sizeof(double));
    if (st == PRIME_OK)
        st = shared;
    if (st == PRIME_OK) {
        out->ndev = g;
        for (int k = 0; k < COMM_KIND_COUNT; ++k) {
            for (int s = 0; s < sw.nsizes; ++s) {
                CalibrateSample *cs = &out->samples[out->nsamples++];
                cs->kind = (CommKind)k;
                cs->gsize = g;
                cs->bytes = (double)(sw.sizes[s] / 4 * 4);
                cs->volume = calibrate_volume(cs->kind, cs->bytes, g);
                cs->us = median_span(&sw, series_comm(&sw, k, s));
            }
        }
        CalibrateCompute *c = &out->compute;
        for (int x = 0; x < sw.ngemm; ++x) {
            c->gemm_dim[c->ngemm] = sw.dims[x];
            c->gemm_us[c->ngemm++] = median_span(&sw, series_gemm(&sw, x)) / (double)sw.giters[x];
        }
        if (compute) {
            c->mem_floats = (double)opt->mem_floats;
            c->mem_us = median_span(&sw, series_mem(&sw));
            c->vec_floats = VEC_FLOATS;
            c->vec_us = median_span(&sw, series_vec(&sw)) / VEC_ITERS;
        }
    }
    free(sw.times);
    return st;
}

/* ------------------------------------------------------------------ */
/* Text form                                                           */

#define SAMPLES_HEADER "primec-calibrate-samples 1"

void calibrate_world_write(const CalibrateWorld *w, FILE *out) {
    fprintf(out, SAMPLES_HEADER " devices %d\n", w->ndev);
    for (int i = 0; i < w->nsamples; ++i)
        fprintf(out, "comm %s %.0f %.9g\n", comm_kind_name(w->samples[i].kind), w->samples[i].bytes,
                w->samples[i].us);
    const CalibrateCompute *c = &w->compute;
    for (int i = 0; i < c->ngemm; ++i)
        fprintf(out, "gemm %.0f %.9g\n", c->gemm_dim[i], c->gemm_us[i]);
    if (c->ngemm > 0) {
        fprintf(out, "mem %.0f %.9g\n", c->mem_floats, c->mem_us);
        fprintf(out, "vec %.0f %.9g\n", c->vec_floats, c->vec_us);
    }
    fprintf(out, "end\n");
}

/* Reads "WORD NUMBER..." fields of one line: the first word into `word`,
 * a second word (a kind name) into `name` when `name` is not NULL, then
 * `nnum` numbers. Returns 1 when the line has exactly those fields. */
static int scan_line(const char *line, size_t len, char *word, size_t wordlen, char *name,
                     size_t namelen, double *num, int nnum) {
    char buf[256];
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, line, len);
    buf[len] = '\0';
    char *save = NULL, *tok = strtok_r(buf, " \t\r", &save);
    if (!tok || strlen(tok) >= wordlen)
        return 0;
    strcpy(word, tok);
    if (name) {
        tok = strtok_r(NULL, " \t\r", &save);
        if (!tok || strlen(tok) >= namelen)
            return 0;
        strcpy(name, tok);
    }
    for (int i = 0; i < nnum; ++i) {
        tok = strtok_r(NULL, " \t\r", &save);
        char *end;
        if (!tok)
            return 0;
        num[i] = strtod(tok, &end);
        if (*end || !(num[i] >= 0) || num[i] > 1e15)
            return 0;
    }
    return strtok_r(NULL, " \t\r", &save) == NULL;
}

int calibrate_world_parse(const char *text, CalibrateWorld *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int lineno = 0, in_samples = 0, ended = 0;
    for (const char *line = text; *line && !ended;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        ++lineno;
        char word[32], name[32];
        double v[2];
        if (!in_samples) {
            size_t hl = strlen(SAMPLES_HEADER);
            if (len > hl && strncmp(line, SAMPLES_HEADER " ", hl + 1) == 0) {
                if (!scan_line(line + hl, len - hl, word, sizeof word, NULL, 0, v, 1) ||
                    strcmp(word, "devices") != 0 || v[0] < 1 || v[0] > CALIBRATE_MAX_DEVICES ||
                    v[0] != (int)v[0]) {
                    snprintf(err, errlen, "line %d: bad header", lineno);
                    return 0;
                }
                out->ndev = (int)v[0];
                in_samples = 1;
            }
        } else if (len == 3 && strncmp(line, "end", 3) == 0) {
            ended = 1;
        } else if (scan_line(line, len, word, sizeof word, name, sizeof name, v, 2) &&
                   strcmp(word, "comm") == 0) {
            int k = 0;
            while (k < COMM_KIND_COUNT && strcmp(comm_kind_name((CommKind)k), name) != 0)
                ++k;
            if (k == COMM_KIND_COUNT || v[0] < 4 ||
                out->nsamples == COMM_KIND_COUNT * CALIBRATE_MAX_SIZES) {
                snprintf(err, errlen, "line %d: bad comm sample", lineno);
                return 0;
            }
            CalibrateSample *cs = &out->samples[out->nsamples++];
            cs->kind = (CommKind)k;
            cs->gsize = out->ndev;
            cs->bytes = v[0];
            cs->volume = calibrate_volume(cs->kind, cs->bytes, out->ndev);
            cs->us = v[1];
        } else if (scan_line(line, len, word, sizeof word, NULL, 0, v, 2) &&
                   strcmp(word, "gemm") == 0 && v[0] >= 1 &&
                   out->compute.ngemm < CALIBRATE_MAX_GEMMS) {
            out->compute.gemm_dim[out->compute.ngemm] = v[0];
            out->compute.gemm_us[out->compute.ngemm++] = v[1];
        } else if (scan_line(line, len, word, sizeof word, NULL, 0, v, 2) &&
                   strcmp(word, "mem") == 0) {
            out->compute.mem_floats = v[0];
            out->compute.mem_us = v[1];
        } else if (scan_line(line, len, word, sizeof word, NULL, 0, v, 2) &&
                   strcmp(word, "vec") == 0) {
            out->compute.vec_floats = v[0];
            out->compute.vec_us = v[1];
        } else {
            snprintf(err, errlen, "line %d: unexpected '%.*s'", lineno, (int)(len < 60 ? len : 60),
                     line);
            return 0;
        }
        line = nl ? nl + 1 : line + len;
    }
    if (!in_samples) {
        snprintf(err, errlen, "no '" SAMPLES_HEADER "' header");
        return 0;
    }
    if (!ended) {
        snprintf(err, errlen, "the samples end early (no 'end' line after line %d)", lineno);
        return 0;
    }
    return 1;
}
