/*
 * prime_program.c — the driver of an emitted program (see
 * prime_program.h): inputs, the run on the devices, the check
 * against the dense reference, and the counter report.
 *
 * The driver is the same for both runtime backends. Without --check no
 * process holds a whole value: each device makes its own tiles of the
 * random inputs from the seed, element by element (the same floats the
 * whole value would have), or reads them from --weights. With --check
 * every process fills the whole inputs and computes the reference (they
 * are deterministic),
 * but with MPI a process runs only its own device, so whatever the
 * devices write for the report lives in arrays laid out per rank (status,
 * err, seen) that prime_world_share completes on every process. Every
 * process then reaches the same verdict; only the root prints it and
 * writes the --json and --trace files, and the exit code is agreed on,
 * so every process exits with the same one.
 *
 * Exit codes: 0 success; 1 --check found a wrong result or counter;
 * 2 a bad command line, bad weights (docs/weights.md), an output file
 * that cannot be written (checked before the run and again when
 * written), or a wrong number of MPI processes; 3 an internal or runtime
 * failure (out of memory, a transport error); 4 a device did not answer within --timeout (each
 * process prints, for its devices, which rank waited for whom, where).
 * After a timeout with MPI the processes cannot agree on anything: each
 * one that timed out exits with 4 at once and the launcher ends the rest.
 *
 * Tiles are reached through the device's table (prime_devops.h): on a
 * device whose tiles are not host memory (CUDA), the filled tiles are
 * packed on the host and uploaded, and the checked ones downloaded.
 */
#define _POSIX_C_SOURCE 200809L
#include "prime_program.h"

#include "prime_devops.h"
#include "prime_weights.h"

#include "prime_options.h"
#include "prime_progress.h"
#include "prime_timing.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Run {
    const PrimeProgram *prog;
    float **whole;  /* per value: the whole array (inputs filled) */
    float **ref;    /* per value: the dense reference (with check) */
    double **ref64; /* per value: the dense reference in fp64 (with check) */
    int check;
    PrimeStore *stores;  /* per rank */
    PrimeStatus *status; /* per rank */
    double *err;         /* [rank * ntensors + tensor]: worst relative error */
    unsigned char *seen; /* [rank * seen_stride + seen_off[tensor] + tile]: held at the end */
    size_t seen_stride;  /* bytes per rank: the tile counts of all tensors */
    size_t *seen_off;    /* per tensor: its first tile in a rank's block */
    double *scale64;     /* per tensor: the largest magnitude of its fp64 reference */
    double *err32;       /* per tensor: the dense fp32 reference's error against fp64 */
    int *fill_first;     /* per schedule phase: the first tensor filled after it, or -1 */
    int *fill_next;      /* per tensor: the next one filled after the same phase, or -1 */
    PrimeTiming timing;  /* what the devices spent, per phase and repeat */
    PrimeGrads *grads;   /* --save-grads, in the last run only: gathered from the stores */
    /* --weights without --check: the files, from which each device reads
     * its own tiles of the values whose whole[v] is NULL. */
    const PrimeWeightFiles *wfiles;
    /* Without --check no whole value exists: a device makes its tiles of
     * the random values itself, element by element from the seed. */
    unsigned long long seed;
    const double *scale; /* per value: the init scale (NULL: 1) */
} Run;

static long elems_of(const long *shape, int ndims) {
    long n = 1;
    for (int i = 0; i < ndims; ++i)
        n *= shape[i];
    return n;
}

/* Offsets of tile `id` in the whole tensor (row-major over its dims). */
void prime_tile_offset(const PrimeTensorDesc *t, long id, long *off) {
    for (int x = t->ndims - 1; x >= 0; --x) {
        off[x] = (id % t->nslices[x]) * t->tile[x];
        id /= t->nslices[x];
    }
}

/* How many tiles a layout gives a rank, and the i-th one. */
int prime_layout_count(const PrimeProgram *prog, const PrimeLayout *l, int rank) {
    return l->form ? prime_layout_form_count(l->form, prog->mesh, rank) : l->count[rank];
}

void prime_layout_tile(const PrimeProgram *prog, const PrimeLayout *l, int rank, int i, long *tile,
                       int *slot) {
    if (l->form) {
        prime_layout_form_tile(l->form, prog->mesh, rank, i, tile, slot);
    } else {
        *tile = l->tiles[rank][i];
        *slot = l->slots[rank][i];
    }
}

/* The values the filled input `value` has in the box at off of extent
 * tile (row-major in shape), as prime_fill_random gives the whole value
 * and the init scale scales it: the same floats, without the whole. */
static void random_box(const Run *run, int value, int ndims, const long *shape, const long *off,
                       const long *tile, float *dst) {
    const uint64_t seed = run->seed * 1000003ull + (unsigned long long)value;
    const double sc = run->scale ? run->scale[value] : 1.0;
    long rows = 1, idx[PRIME_MAX_DIMS] = {0};
    for (int x = 0; x + 1 < ndims; ++x)
        rows *= tile[x];
    const long inner = ndims ? tile[ndims - 1] : 1;
    for (long r = 0; r < rows; ++r) {
        uint64_t base = 0;
        for (int x = 0; x < ndims; ++x)
            base = base * (uint64_t)shape[x] + (uint64_t)(off[x] + (x + 1 < ndims ? idx[x] : 0));
        for (long i = 0; i < inner; ++i) {
            float v = prime_random_at(seed, base + (uint64_t)i);
            dst[r * inner + i] = sc != 1.0 ? (float)(v * sc) : v;
        }
        for (int x = ndims - 2; x >= 0 && ++idx[x] == tile[x]; --x)
            idx[x] = 0;
    }
}

static PrimeStatus fill_tiles(PrimeDev *dev, const Run *run, int tensor) {
    const PrimeTensorDesc *t = &run->prog->tensors[tensor];
    const int rank = prime_dev_rank(dev);
    PrimeStore *st = &run->stores[rank];
    const PrimeDevOps *ops = prime_dev_ops(dev);
    static const long zero[PRIME_MAX_DIMS] = {0};
    size_t n = (size_t)elems_of(t->tile, t->ndims);
    float *host = ops->upload ? malloc(sizeof(float) * (n ? n : 1)) : NULL;
    if (ops->upload && !host)
        return prime_dev_fail_text(dev, PRIME_ERR_NOMEM, "out of memory for a tile's upload");
    PrimeStatus status = PRIME_OK;
    for (int i = 0; i < prime_layout_count(run->prog, &t->fill_layout, rank) && status == PRIME_OK;
         ++i) {
        long off[PRIME_MAX_DIMS], id;
        int s;
        prime_layout_tile(run->prog, &t->fill_layout, rank, i, &id, &s);
        prime_tile_offset(t, id, off);
        float *slot = st->slots[tensor][s];
        float *dst = host ? host : slot;
        if (run->whole[t->value])
            prime_copy_box(t->ndims, t->tile, run->whole[t->value], t->shape, off, dst, t->tile,
                           zero);
        else if (!prime_weights_has(run->wfiles, t->value))
            random_box(run, t->value, t->ndims, t->shape, off, t->tile, dst);
        else if (prime_weights_read_box(run->wfiles, t->value, t, off, t->tile, dst) != 0)
            status = prime_dev_fail_text(dev, PRIME_ERR_NOMEM, "out of memory reading a tile");
        if (host && status == PRIME_OK)
            status = ops->upload(dev, slot, host, n);
        prime_store_written(st, tensor, s);
    }
    free(host);
    return status;
}

static PrimeStatus check_rank(PrimeDev *dev, Run *run);

static void rank_main(PrimeDev *dev, void *arg) {
    Run *run = arg;
    const PrimeProgram *prog = run->prog;
    const int rank = prime_dev_rank(dev);
    PrimeStatus st = PRIME_OK;
    PrimePhaseRun whole = {0, prog->nphases, 1, 0, 0, 0};
    const PrimePhaseRun *runs = prog->runs ? prog->runs : &whole;
    int nruns = prog->runs ? prog->nruns : 1;
    for (int r = 0; r < nruns && st == PRIME_OK; ++r) {
        const PrimePhaseRun *pr = &runs[r];
        for (long l = 0; l < pr->repeat && st == PRIME_OK; ++l)
            for (int j = 0; j < pr->len && st == PRIME_OK; ++j) {
                st = prime_sched_run_timed(dev, prog->phases[pr->first + j], &run->stores[rank],
                                           (int)(l * pr->dtensor), (int)(l * pr->dtag),
                                           prime_timing_slot(&run->timing, rank, pr->first + j));
                long p = pr->orig + l * pr->len + j;
                for (int t = run->fill_first[p]; t >= 0 && st == PRIME_OK; t = run->fill_next[t])
                    st = fill_tiles(dev, run, t);
            }
    }
    if (st == PRIME_OK && run->check)
        st = check_rank(dev, run);
    if (st == PRIME_OK && run->grads)
        st = prime_grads_collect(run->grads, prog, dev, &run->stores[rank]);
    prime_store_release(dev, &run->stores[rank]);
    run->status[rank] = st;
}

static void stores_release(Run *run) {
    /* Stores of devices that ran are empty already; with MPI the others
     * never held a tile, so no device is needed to count their release. */
    for (int r = 0; r < run->prog->ndev; ++r)
        prime_store_release(NULL, &run->stores[r]);
}

static int stores_init(Run *run) {
    const PrimeProgram *prog = run->prog;
    size_t n = prog->ntensors ? (size_t)prog->ntensors : 1;
    size_t *tile_elems = malloc(sizeof(size_t) * n);
    int *max_slots = malloc(sizeof(int) * n);
    int ok = tile_elems && max_slots;
    for (int t = 0; ok && t < prog->ntensors; ++t) {
        tile_elems[t] = (size_t)elems_of(prog->tensors[t].tile, prog->tensors[t].ndims);
        max_slots[t] = prog->tensors[t].max_slots;
    }
    /* A failed init leaves an empty store behind. */
    for (int r = 0; ok && r < prog->ndev; ++r)
        ok = prime_store_init(&run->stores[r], prog->ntensors, tile_elems, max_slots) == PRIME_OK;
    free(tile_elems);
    free(max_slots);
    return ok;
}

/* The tiles this process's devices hold at their peak, as predicted:
 * each local device counted at the largest rank's peak. */
static size_t local_peak_bytes(const PrimeProgram *prog) {
    long most = 0;
    int nranks = prog->predicted_uniform ? 1 : prog->ndev;
    for (int r = 0; prog->predicted_peak && r < nranks; ++r)
        most = prog->predicted_peak[r] > most ? prog->predicted_peak[r] : most;
    return (size_t)most * (size_t)prime_local_devices(prog->ndev);
}

/* Ends the process, exit 3, unless `callers` threads can still map their
 * GEMM buffers and `tiles` bytes (see prime_blas_room); `who` names the
 * threads in the message.
 * It ends with _exit: OpenBLAS's exit handler joins its own threads, and
 * one that could not map its buffer at load time never returns. */
static void need_blas_room(const PrimeProgram *prog, int callers, size_t tiles, const char *who) {
    unsigned long long limit = 0;
    if (prime_blas_room(callers, tiles, &limit))
        return;
    const double mib = 1024.0 * 1024.0;
    char also[64] = "";
    if (tiles)
        snprintf(also, sizeof also, " and %.1f MiB of tiles", (double)tiles / mib);
    fprintf(stderr,
            "%s: not enough address space for the BLAS: %s need%s %d x %.0f MiB of GEMM "
            "buffers%s, more than is left under the limit of %.0f MiB (ulimit -v / -d); "
            "raise the limit\n",
            prog->name, who, callers == 1 ? "s" : "", callers,
            (double)prime_blas_buffer_bytes() / mib, also, (double)limit / mib);
    fflush(NULL);
    _exit(3);
}

/* The exit code of a run in which a device did not answer. */
#define EXIT_TIMEOUT 4

/* The largest of every process's `value` (with threads: `value`). Each
 * block of the shared array starts as this process's value, and the share
 * keeps the block of this process's rank, whichever that is. A failed
 * share counts as `fail`, one that timed out as EXIT_TIMEOUT. */
static int agree_max(PrimeWorld *world, int ndev, int value, int fail) {
    int *all = malloc(sizeof(int) * (size_t)ndev);
    if (!all)
        return value > fail ? value : fail;
    for (int r = 0; r < ndev; ++r)
        all[r] = value;
    PrimeStatus st = prime_world_share(world, all, sizeof(int));
    if (st == PRIME_ERR_TIMEOUT)
        fail = EXIT_TIMEOUT;
    if (st != PRIME_OK)
        all[0] = value > fail ? value : fail;
    int most = all[0];
    for (int r = 1; r < ndev; ++r)
        if (all[r] > most)
            most = all[r];
    free(all);
    return most;
}

/* printf on the root only (`out` is NULL elsewhere). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
say(FILE *out, const char *fmt, ...) {
    if (!out)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
}

static long ntiles_of(const PrimeTensorDesc *t) {
    long n = 1;
    for (int x = 0; x < t->ndims; ++x)
        n *= t->nslices[x];
    return n;
}

/* The index in the whole tensor of element e of the tile at off. */
static long global_index(const PrimeTensorDesc *t, const long *off, long e) {
    long idx = 0, stride = 1;
    for (int x = t->ndims - 1; x >= 0; --x) {
        idx += (off[x] + e % t->tile[x]) * stride;
        e /= t->tile[x];
        stride *= t->shape[x];
    }
    return idx;
}

/* Compares every tile this rank holds at the end with the fp64 reference. */
static PrimeStatus check_rank(PrimeDev *dev, Run *run) {
    const PrimeProgram *prog = run->prog;
    const int rank = prime_dev_rank(dev);
    const PrimeDevOps *ops = prime_dev_ops(dev);
    PrimeStatus status = PRIME_OK;
    for (int tensor = 0; tensor < prog->ntensors && status == PRIME_OK; ++tensor) {
        const PrimeTensorDesc *t = &prog->tensors[tensor];
        if (!t->check)
            continue;
        long tile_n = elems_of(t->tile, t->ndims);
        double scale = run->scale64[tensor], worst = 0;
        const double *ref = run->ref64[t->value];
        unsigned char *seen = run->seen + (size_t)rank * run->seen_stride + run->seen_off[tensor];
        float *host = ops->download ? malloc(sizeof(float) * (size_t)(tile_n ? tile_n : 1)) : NULL;
        if (ops->download && !host)
            return prime_dev_fail_text(dev, PRIME_ERR_NOMEM, "out of memory for a tile's download");
        for (int i = 0; i < prime_layout_count(prog, &t->final_layout, rank) && status == PRIME_OK;
             ++i) {
            long id, off[PRIME_MAX_DIMS];
            int s;
            prime_layout_tile(prog, &t->final_layout, rank, i, &id, &s);
            prime_tile_offset(t, id, off);
            const float *slot = prime_store_tile(dev, &run->stores[rank], tensor, s);
            if (!slot)
                continue;
            if (host) {
                status = ops->download(dev, host, slot, (size_t)tile_n);
                slot = host;
                if (status != PRIME_OK)
                    break;
            }
            seen[id] = 1;
            for (long e = 0; e < tile_n; ++e) {
                double d = fabs((double)slot[e] - ref[global_index(t, off, e)]) / scale;
                if (isnan(d))
                    d = INFINITY;
                if (d > worst)
                    worst = d;
            }
        }
        free(host);
        run->err[rank * prog->ntensors + tensor] = worst;
    }
    return status;
}

/* Prints what every device of this process that failed says about it
 * (who waited for whom, where) and the verdict, on the root and on every
 * process that has something to say; returns EXIT_TIMEOUT. */
static int say_timeout(const PrimeProgram *prog, const PrimeWorld *world, PrimeStatus st,
                       double timeout) {
    int said = 0;
    for (int r = 0; r < prog->ndev; ++r) {
        const char *why = prime_world_failure(world, r);
        if (why) {
            fprintf(stderr, "%s: %s\n", prog->name, why);
            ++said;
        }
    }
    if (said || prime_world_is_root(world))
        fprintf(stderr, "%s: run failed: %s (--timeout %g s)\n", prog->name, prime_status_name(st),
                timeout);
    return EXIT_TIMEOUT;
}

static int run_program(const PrimeProgram *prog, const PrimeProgramDevice *device, int argc,
                       char **argv);

/* Every copy's descriptor of a program whose tensors come in runs. */
static PrimeTensorDesc *expand_tensors(const PrimeProgram *prog, char ***names) {
    PrimeTensorDesc *all = calloc((size_t)prog->ntensors + 1, sizeof *all);
    *names = calloc((size_t)prog->ntensors + 1, sizeof(char *));
    if (!all || !*names)
        return NULL;
    long k = 0;
    for (int r = 0; r < prog->ntensor_runs; ++r) {
        const PrimeTensorRun *tr = &prog->tensor_runs[r];
        for (long l = 0; l < tr->repeat; ++l)
            for (int j = 0; j < tr->len; ++j) {
                if (k >= prog->ntensors)
                    return NULL;
                const PrimeTensorDesc *d = &prog->tensors[tr->first + j];
                all[k] = *d;
                all[k].value = (int)(d->value + l * d->value_step);
                if (tr->repeat > 1) {
                    char buf[256];
                    snprintf(buf, sizeof buf, d->name, d->name_base + l * d->name_step);
                    (*names)[k] = strdup(buf);
                    if (!(*names)[k])
                        return NULL;
                    all[k].name = (*names)[k];
                }
                ++k;
            }
    }
    return k == prog->ntensors ? all : NULL;
}

/* Every value's element count (and init scale, into *scale) of a
 * program whose values come in runs. */
static long *expand_values(const PrimeProgram *prog, double **scale, unsigned char **weight) {
    long *all = calloc((size_t)prog->nvalues + 1, sizeof(long));
    *scale = calloc((size_t)prog->nvalues + 1, sizeof(double));
    *weight = calloc((size_t)prog->nvalues + 1, 1);
    if (!all || !*scale || !*weight) {
        free(all);
        return NULL;
    }
    long k = 0;
    for (int r = 0; r < prog->nvalue_runs; ++r) {
        const PrimeValueRun *vr = &prog->value_runs[r];
        for (long l = 0; l < vr->repeat; ++l)
            for (int j = 0; j < vr->len; ++j) {
                if (k >= prog->nvalues) {
                    free(all);
                    return NULL;
                }
                (*scale)[k] = prog->value_scale ? prog->value_scale[vr->first + j] : 1.0;
                (*weight)[k] = prog->value_weight ? prog->value_weight[vr->first + j] : 0;
                all[k++] = prog->value_elems[vr->first + j];
            }
    }
    if (k != prog->nvalues) {
        free(all);
        return NULL;
    }
    return all;
}

int prime_program_main(const PrimeProgram *prog, int argc, char **argv) {
    return prime_program_main_device(prog, NULL, argc, argv);
}

int prime_program_main_device(const PrimeProgram *prog, const PrimeProgramDevice *device, int argc,
                              char **argv) {
    prime_blas_choose_core(argv);
    if (!prog->tensor_runs && !prog->value_runs)
        return run_program(prog, device, argc, argv);
    PrimeProgram full = *prog;
    char **names = NULL;
    PrimeTensorDesc *all = prog->tensor_runs ? expand_tensors(prog, &names) : NULL;
    double *scales = NULL;
    unsigned char *weights = NULL;
    long *elems = prog->value_runs ? expand_values(prog, &scales, &weights) : NULL;
    int rc = 3;
    if ((all || !prog->tensor_runs) && (elems || !prog->value_runs)) {
        if (all)
            full.tensors = all;
        if (elems) {
            full.value_elems = elems;
            full.value_scale = scales;
            full.value_weight = weights;
        }
        rc = run_program(&full, device, argc, argv);
    } else {
        fprintf(stderr, "%s: out of memory or a corrupt tensor table\n", prog->name);
    }
    free(elems);
    free(scales);
    free(weights);
    for (int t = 0; names && t < prog->ntensors; ++t)
        free(names[t]);
    free(names);
    free(all);
    return rc;
}

static void run_free(Run *run) {
    free(run->seen);
    free(run->seen_off);
    free(run->fill_first);
    free(run->fill_next);
    prime_timing_free(&run->timing);
    free(run->err);
    for (int v = 0; v < run->prog->nvalues; ++v) {
        free(run->whole[v]);
        free(run->ref[v]);
        if (run->ref64)
            free(run->ref64[v]);
    }
    free(run->ref64);
    free(run->scale64);
    free(run->err32);
    free(run->whole);
    free(run->ref);
    free(run->stores);
    free(run->status);
}

/* --list-weights, --weights and --save-grads before the values are made:
 * 0 to run, -1 when listed (exit 0), or the exit code. Without --check,
 * --weights opens the files for the devices to read their tiles from
 * (*wfiles); with it, the whole values are loaded after they are made
 * (prime_weights_load), since the dense reference needs them. */
static int weights_setup(const PrimeProgram *prog, const Options *opt, PrimeWeightNames *names,
                         PrimeGrads *grads, PrimeWeightFiles **wfiles) {
    int rc = 0;
    if (opt->weights || opt->weights_map || opt->save_grads || opt->list_weights)
        rc = prime_weight_names(prog, opt->weights_map, names);
    if (rc == 0 && opt->list_weights) {
        prime_weights_list(prog, names);
        return -1;
    }
    if (rc == 0 && opt->weights && !opt->check)
        rc = prime_weights_open(prog, names, opt->weights, wfiles);
    if (rc == 0 && opt->save_grads)
        rc = prime_grads_init(grads, prog, names);
    if (rc == 0 && opt->save_grads && !prime_dir_writable(prog->name, opt->save_grads))
        rc = 2;
    return rc;
}

/* --save-grads after the run: every rank's block to the root, which
 * writes the file. */
static int save_grads(const PrimeProgram *prog, PrimeWorld *world, const Options *opt,
                      PrimeGrads *grads, const PrimeWeightNames *names, PrimeStatus *run_error) {
    PrimeStatus shared = prime_world_share(world, grads->buf, sizeof(float) * grads->total);
    if (shared == PRIME_ERR_TIMEOUT) {
        *run_error = shared;
        return say_timeout(prog, world, shared, opt->timeout);
    }
    if (shared != PRIME_OK) {
        fprintf(stderr, "%s: cannot gather the gradients\n", prog->name);
        return 3;
    }
    return prime_world_is_root(world) ? prime_grads_write(grads, prog, names, opt->save_grads) : 0;
}

static int run_program(const PrimeProgram *prog, const PrimeProgramDevice *device, int argc,
                       char **argv) {
    Options opt;
    int parsed = prime_parse_options(prog->name, argc, argv, &opt);
    if (parsed != 0)
        return parsed == 1 ? 0 : 2;
    /* Before the first allocation, and again before the first GEMMs. */
    need_blas_room(prog, prime_local_devices(prog->ndev), 0, "the devices");
    const int check = opt.check, repeat = opt.repeat, fan_in = opt.fan_in;
    const unsigned long long seed = opt.seed;
    const char *trace = opt.trace, *json = opt.json;

    Run run;
    memset(&run, 0, sizeof run);
    run.prog = prog;
    run.whole = calloc((size_t)prog->nvalues, sizeof(float *));
    float **ref = calloc((size_t)prog->nvalues, sizeof(float *));
    run.ref = ref;
    run.stores = calloc((size_t)prog->ndev, sizeof(PrimeStore));
    run.status = calloc((size_t)prog->ndev, sizeof(PrimeStatus));
    size_t nrt = (size_t)prog->ndev * (size_t)prog->ntensors;
    run.err = calloc(nrt, sizeof(double));
    run.seen_off = calloc((size_t)prog->ntensors + 1, sizeof(size_t));
    long nsched = 0; /* phases of the schedule, copies of repeated layers included */
    for (int r = 0; r < prog->nruns; ++r)
        nsched += prog->runs[r].len * prog->runs[r].repeat;
    if (!prog->runs)
        nsched = prog->nphases;
    run.fill_first = malloc(sizeof(int) * (size_t)(nsched + 1));
    run.fill_next = malloc(sizeof(int) * (size_t)(prog->ntensors + 1));
    int rc = 0;
    if (!run.whole || !ref || !run.stores || !run.status || !run.err || !run.seen_off ||
        !run.fill_first || !run.fill_next || !prime_timing_init(&run.timing, prog, repeat)) {
        fprintf(stderr, "%s: out of memory\n", prog->name);
        return 3;
    }
    for (long p = 0; p <= nsched; ++p)
        run.fill_first[p] = -1;
    for (int t = prog->ntensors - 1; t >= 0; --t) {
        int p = prog->tensors[t].fill_after;
        run.fill_next[t] = -1;
        if (p >= 0 && p < nsched) {
            run.fill_next[t] = run.fill_first[p];
            run.fill_first[p] = t;
        }
    }
    unsigned char *filled = calloc((size_t)prog->nvalues + 1, 1);
    run.ref64 = check ? calloc((size_t)prog->nvalues + 1, sizeof(double *)) : NULL;
    run.scale64 = calloc((size_t)prog->ntensors + 1, sizeof(double));
    run.err32 = calloc((size_t)prog->ntensors + 1, sizeof(double));
    if (!filled || (check && !run.ref64) || !run.scale64 || !run.err32) {
        fprintf(stderr, "%s: out of memory\n", prog->name);
        return 3;
    }
    for (int t = 0; t < prog->ntensors; ++t)
        if (prog->tensors[t].fill_after >= 0 && prog->tensors[t].value < prog->nvalues)
            filled[prog->tensors[t].value] = 1;
    /* Weights and loaded names first: what the devices read from the
     * files needs no whole value. */
    PrimeWeightNames names = {0, NULL, NULL};
    PrimeGrads grads;
    memset(&grads, 0, sizeof grads);
    PrimeWeightFiles *wfiles = NULL;
    rc = weights_setup(prog, &opt, &names, &grads, &wfiles);
    run.wfiles = wfiles;
    run.seed = seed;
    run.scale = fan_in ? prog->value_scale : NULL;
    for (int v = 0; rc == 0 && v < prog->nvalues; ++v) {
        size_t n = (size_t)prog->value_elems[v];
        if (prime_weights_has(wfiles, v) || !check)
            continue; /* whole[v] stays NULL: read or made by tiles */
        run.whole[v] = calloc(n ? n : 1, sizeof(float));
        /* The dense references exist with --check only. */
        if (check)
            ref[v] = calloc(n ? n : 1, sizeof(float));
        if (check)
            run.ref64[v] = calloc(n ? n : 1, sizeof(double));
        if (!run.whole[v] || (check && (!ref[v] || !run.ref64[v]))) {
            fprintf(stderr, "%s: out of memory\n", prog->name);
            return 3;
        }
        if (filled[v]) {
            prime_fill_random(run.whole[v], n, seed * 1000003ull + (unsigned long long)v);
            double sc = fan_in && prog->value_scale ? prog->value_scale[v] : 1.0;
            for (size_t i = 0; sc != 1.0 && i < n; ++i)
                run.whole[v][i] = (float)(run.whole[v][i] * sc);
        }
    }
    /* Loaded weights replace the random ones before the reference's copy. */
    if (rc == 0 && opt.weights && check)
        rc = prime_weights_load(prog, &names, opt.weights, run.whole);
    if (rc != 0) {
        if (rc == 3)
            fprintf(stderr, "%s: out of memory\n", prog->name);
        prime_weight_names_free(&names);
        prime_grads_free(&grads);
        prime_weights_close(wfiles);
        free(filled);
        run_free(&run);
        return rc < 0 ? 0 : rc;
    }
    for (int v = 0; check && v < prog->nvalues; ++v) {
        if (!filled[v])
            continue;
        memcpy(ref[v], run.whole[v], (size_t)prog->value_elems[v] * sizeof(float));
        for (long i = 0; check && i < prog->value_elems[v]; ++i)
            run.ref64[v][i] = run.whole[v][i];
    }
    free(filled);
    if (check)
        need_blas_room(prog, prime_blas_threads(), 0, "the dense reference's threads");
    if (check) {
        prog->reference(ref);
        if (prog->reference64)
            prog->reference64(run.ref64);
        /* Per checked tensor: its scale, and how far the dense fp32
         * program itself is from fp64 (the yardstick of the check). */
        for (int t = 0; t < prog->ntensors; ++t) {
            const PrimeTensorDesc *d = &prog->tensors[t];
            if (!d->check)
                continue;
            long n = elems_of(d->shape, d->ndims);
            double sc = 1e-30, e32 = 0;
            for (long i = 0; i < n; ++i)
                sc = fabs(run.ref64[d->value][i]) > sc ? fabs(run.ref64[d->value][i]) : sc;
            for (long i = 0; i < n; ++i) {
                double e = fabs((double)ref[d->value][i] - run.ref64[d->value][i]) / sc;
                e32 = isnan(e) ? INFINITY : e > e32 ? e : e32;
            }
            run.scale64[t] = sc;
            run.err32[t] = e32;
        }
    }
    for (int t = 0; t < prog->ntensors; ++t)
        run.seen_off[t + 1] = run.seen_off[t] + (size_t)ntiles_of(&prog->tensors[t]);
    run.seen_stride = run.seen_off[prog->ntensors];
    run.seen = calloc((size_t)prog->ndev, run.seen_stride ? run.seen_stride : 1);
    if (!run.seen) {
        fprintf(stderr, "%s: out of memory\n", prog->name);
        return 3;
    }

    PrimeWorld *world = NULL;
    prime_set_default_timeout(opt.timeout);
    PrimeStatus created = prime_world_create(prog->ndev, &world);
    if (created != PRIME_OK) {
        /* A wrong process count (PRIME_ERR_ARG) was explained by MPI's rank 0. */
        if (created != PRIME_ERR_ARG)
            fprintf(stderr, "%s: cannot create %d devices: %s\n", prog->name, prog->ndev,
                    prime_status_name(created));
        run_free(&run);
        return created == PRIME_ERR_ARG ? 2 : created == PRIME_ERR_TIMEOUT ? EXIT_TIMEOUT : 3;
    }
    if (device && device->attach(world, device->arg) != PRIME_OK) {
        prime_world_destroy(world);
        run_free(&run);
        return 3;
    }
    const int root = prime_world_is_root(world);
    FILE *out = root ? stdout : NULL;
    /* Output paths are checked, by the process that writes them, before
     * the run; the files are written after it. */
    FILE *js = NULL;
    int bad_output = 0;
    if (json && root)
        bad_output |= !(js = prime_open_output(prog->name, json));
    if (trace && root && !bad_output) {
        FILE *t = prime_open_output(prog->name, trace);
        bad_output |= !t;
        if (t)
            fclose(t);
    }
    rc = agree_max(world, prog->ndev, bad_output ? 2 : 0, 2);
    if (rc == EXIT_TIMEOUT)
        say_timeout(prog, world, PRIME_ERR_TIMEOUT, opt.timeout);
    PrimeStatus run_error = PRIME_OK;
    PrimeProgress progress;
    prime_progress_start(&progress, root ? stdout : NULL, repeat, prog->name);
    for (int it = 0; it < repeat && rc == 0; ++it) {
        int last = it == repeat - 1;
        if (last) {
            prime_world_reset_counters(world);
            prime_world_enable_trace(world, trace != NULL);
            run.check = check;
            run.grads = opt.save_grads ? &grads : NULL;
        }
        /* With MPI, no device may start unless every process can. */
        int not_ready = !stores_init(&run);
        /* The last allocations before the devices' first GEMMs. */
        if (!not_ready && it == 0)
            need_blas_room(prog, prime_local_devices(prog->ndev), local_peak_bytes(prog),
                           "the devices");
        not_ready = agree_max(world, prog->ndev, not_ready, 1);
        if (not_ready) {
            if (not_ready == EXIT_TIMEOUT) {
                rc = say_timeout(prog, world, PRIME_ERR_TIMEOUT, opt.timeout);
            } else {
                fprintf(stderr, "%s: out of memory\n", prog->name);
                rc = 3;
            }
            stores_release(&run);
            break;
        }
        prime_timing_start(&run.timing);
        PrimeStatus st = prime_world_run(world, rank_main, &run);
        stores_release(&run);
        PrimeStatus shared = prime_world_share(world, run.status, sizeof *run.status);
        if (shared == PRIME_OK)
            shared = prime_world_share(world, run.timing.cur,
                                       sizeof *run.timing.cur * (size_t)prog->nphases);
        if (shared != PRIME_OK && st == PRIME_OK)
            st = shared == PRIME_ERR_TIMEOUT ? shared : PRIME_ERR_TRANSPORT;
        for (int r = 0; r < prog->ndev && st == PRIME_OK; ++r)
            st = run.status[r];
        /* A device whose call failed aborts the world (which the threads
         * world reports as a timeout) and the others: its failure is the
         * run's. */
        for (int r = 0; r < prog->ndev && (st == PRIME_ERR_ABORTED || st == PRIME_ERR_TIMEOUT); ++r)
            if (run.status[r] == PRIME_ERR_DEVICE)
                st = PRIME_ERR_DEVICE;
        if (st == PRIME_ERR_TIMEOUT || st == PRIME_ERR_ABORTED) {
            rc = say_timeout(prog, world, st, opt.timeout);
        } else if (st != PRIME_OK) {
            /* What a device's table said about its failure (a CUDA call). */
            for (int r = 0; r < prog->ndev; ++r)
                if (prime_world_failure(world, r))
                    fprintf(stderr, "%s: %s\n", prog->name, prime_world_failure(world, r));
            if (root)
                fprintf(stderr, "%s: run failed: %s\n", prog->name, prime_status_name(st));
            rc = 3;
        }
        run_error = st;
        if (st == PRIME_OK)
            prime_timing_collect(&run.timing);
        prime_progress_update(&progress, it + 1);
    }
    prime_progress_end(&progress);
    if (rc == 0 && check) {
        PrimeStatus shared =
            prime_world_share(world, run.err, sizeof(double) * (size_t)prog->ntensors);
        if (shared == PRIME_OK)
            shared = prime_world_share(world, run.seen, run.seen_stride);
        if (shared == PRIME_ERR_TIMEOUT) {
            rc = say_timeout(prog, world, shared, opt.timeout);
            run_error = shared;
        } else if (shared != PRIME_OK) {
            fprintf(stderr, "%s: cannot gather the check results\n", prog->name);
            rc = 3;
        }
    }

    if (rc == 0 && opt.save_grads)
        rc = save_grads(prog, world, &opt, &grads, &names, &run_error);
    prime_weight_names_free(&names);
    prime_grads_free(&grads);
    prime_weights_close(wfiles);
    if (js && run_error != PRIME_OK)
        fprintf(js, "{\"program\": \"%s\", \"devices\": %d, \"error\": \"%s\"}\n", prog->name,
                prog->ndev, prime_status_name(run_error));
    if (rc == 0) {
        say(out, "%s: %d devices\n", prog->name, prog->ndev);
        say(out, "%6s %14s %14s %14s %14s\n", "rank", "shift bytes", "collective", "redist",
            "peak bytes");
        int counters_ok = 1;
        if (js)
            fprintf(js, "{\"program\": \"%s\", \"devices\": %d, \"ranks\": [", prog->name,
                    prog->ndev);
        for (int r = 0; r < prog->ndev; ++r) {
            unsigned long long b[PRIME_BYTES_KIND_COUNT];
            for (int k = 0; k < PRIME_BYTES_KIND_COUNT; ++k) {
                b[k] = (unsigned long long)prime_world_bytes_sent(world, r, (PrimeByteKind)k);
                int pr = prog->predicted_uniform ? 0 : r;
                if ((long)b[k] != prog->predicted_bytes[pr * PRIME_BYTES_KIND_COUNT + k])
                    counters_ok = 0;
            }
            unsigned long long peak = (unsigned long long)prime_world_peak_bytes(world, r);
            if ((long)peak != prog->predicted_peak[prog->predicted_uniform ? 0 : r])
                counters_ok = 0;
            say(out, "%6d %14llu %14llu %14llu %14llu\n", r, b[0], b[1], b[2], peak);
            if (js)
                fprintf(js,
                        "%s{\"rank\": %d, \"shift\": %llu, \"collective\": %llu, \"redist\": %llu, "
                        "\"peak\": %llu, \"sends\": %ld, \"collectives\": %ld}",
                        r ? ", " : "", r, b[0], b[1], b[2], peak,
                        prime_timing_rank_sends(&run.timing, r),
                        prime_timing_rank_collectives(&run.timing, r));
        }
        if (js)
            fprintf(js, "], \"counters_match_prediction\": %s", counters_ok ? "true" : "false");
        say(out, "counters %s the compiler's prediction\n", counters_ok ? "equal" : "DIFFER FROM");
        prime_timing_print(&run.timing, out);
        prime_timing_json(&run.timing, js);
        if (check) {
            if (!counters_ok)
                rc = 1;
            if (js)
                fprintf(js, ", \"check\": {");
            /* --dtype: the yardstick is the dense program with the same
             * narrow GEMMs (docs/cuda.md). */
            const char *narrow = device ? device->gemm_dtype : NULL;
            const char *dense = narrow ? narrow : "fp32";
            if (narrow)
                say(out,
                    "check: GEMM operands in %s, fp32 accumulation; the yardstick (dense %s) is "
                    "the dense fp32 program with the same %s GEMMs\n",
                    dense, dense, dense);
            for (int t = 0, first = 1; t < prog->ntensors; ++t) {
                if (!prog->tensors[t].check)
                    continue;
                int missing = 0;
                double err = 0;
                long ntiles = ntiles_of(&prog->tensors[t]);
                for (long id = 0; id < ntiles; ++id) {
                    int any = 0;
                    for (int r = 0; r < prog->ndev; ++r)
                        any |= run.seen[(size_t)r * run.seen_stride + run.seen_off[t] + (size_t)id];
                    missing += !any;
                }
                for (int r = 0; r < prog->ndev; ++r)
                    if (run.err[r * prog->ntensors + t] > err)
                        err = run.err[r * prog->ntensors + t];
                /* Twice fp32's unit roundoff: the floor of the yardstick
                 * (docs/check.md). */
                double e32 = run.err32[t] > 0x1p-23 ? run.err32[t] : 0x1p-23;
                double bound = prog->tolerance * e32;
                /* A reference that overflows proves nothing: non-finite
                 * errors fail whatever the bound. */
                int ok = isfinite(err) && isfinite(bound) && err <= bound && missing == 0;
                say(out, "check %-8s error vs fp64 %.3e (dense %s %.3e, bound %.3e)%s %s\n",
                    prog->tensors[t].name, err, dense, run.err32[t], bound,
                    missing ? " MISSING TILES" : "", ok ? "ok" : "FAIL");
                if (js)
                    fprintf(js,
                            "%s\"%s\": {\"error\": %.6e, \"dense_%s_error\": %.6e, \"bound\": "
                            "%.6e, \"ok\": %s}",
                            first ? "" : ", ", prog->tensors[t].name, err, dense, run.err32[t],
                            bound, ok ? "true" : "false");
                first = 0;
                if (!ok)
                    rc = 1;
            }
            if (js)
                fprintf(js, "}");
            say(out, "%s\n", rc == 0 ? "check passed" : "check FAILED");
        }
        if (js)
            fprintf(js, "}\n");
        errno = 0;
        if (trace && root && prime_world_write_trace(world, trace) != PRIME_OK) {
            fprintf(stderr, "%s: cannot write trace '%s'%s%s\n", prog->name, trace,
                    errno ? ": " : "", errno ? strerror(errno) : "");
            rc = rc > 2 ? rc : 2;
        }
    }
    /* Write errors show when the data reaches the file. */
    if (js) {
        int bad = ferror(js);
        errno = 0;
        if (fclose(js) != 0 || bad) {
            fprintf(stderr, "%s: cannot write '%s'%s%s\n", prog->name, json, errno ? ": " : "",
                    errno ? strerror(errno) : "");
            rc = rc > 2 ? rc : 2;
        }
    }
    if (root && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "%s: cannot write the report: %s\n", prog->name, strerror(errno));
        rc = rc > 2 ? rc : 2;
    }
    int agreed = agree_max(world, prog->ndev, rc, 3);
    if (agreed == EXIT_TIMEOUT && rc != EXIT_TIMEOUT)
        say_timeout(prog, world, PRIME_ERR_TIMEOUT, opt.timeout);
    rc = agreed;
    if (device)
        device->detach(world, device->arg);
    prime_world_destroy(world);
    run_free(&run);
    return rc;
}
